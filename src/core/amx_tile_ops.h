/* amx_tile_ops.h - the tile operations an AMX loop (gemm_bf16_amx_driver.h, conv_bf16_amx_loop.h)
 * is written with, for the kind of tiles AMX_TILES names: AMX_TILES_EMU, the emulated tiles of
 * amx_tiles.h (a variable `emu` in each loop); AMX_TILES_CPU, the CPU's instructions (in a
 * function with the amx-tile and amx-bf16 target); AMX_TILES_FREE, tiles that cost nothing (a
 * DDL_AMX_FREE_TILES build: loads and products do nothing, a store writes zeros with a real
 * store's traffic, from the loop's `cfg`). Included before each loop, no guard: it undefines the
 * last kind's macros first.
 *   T_STATE         declarations the operations need, at the top of the loop
 *   T_CONFIG(cfg)   load a tile configuration (const amx_cfg *)
 *   T_ZERO(t)       zero tile t; T_LOAD(t, p, stride) / T_STORE(t, p, stride): tile t from / to
 *                   p, rows stride bytes apart; T_DP(c, a, b): tile c += tile a x tile b
 *   T_RELEASE()     give the tile state back */
#define AMX_TILES_EMU 1
#define AMX_TILES_CPU 2
#define AMX_TILES_FREE 3

#undef T_STATE
#undef T_CONFIG
#undef T_ZERO
#undef T_LOAD
#undef T_STORE
#undef T_DP
#undef T_RELEASE

#if AMX_TILES == AMX_TILES_EMU
#define T_STATE amx_emu emu;
#define T_CONFIG(cfg) emu_config(&emu, cfg)
#define T_ZERO(t) emu_zero(&emu, t)
#define T_LOAD(t, p, stride) emu_load(&emu, t, p, stride)
#define T_STORE(t, p, stride) emu_store(&emu, t, p, stride)
#define T_DP(c, a, b) emu_dp(&emu, c, a, b)
#define T_RELEASE() (void)0
#elif AMX_TILES == AMX_TILES_CPU
#define T_STATE
#define T_CONFIG(cfg) _tile_loadconfig(cfg)
#define T_ZERO(t) _tile_zero(t)
#define T_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define T_STORE(t, p, stride) _tile_stored(t, p, stride)
#define T_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define T_RELEASE() _tile_release()
#elif AMX_TILES == AMX_TILES_FREE
#define T_STATE
#define T_CONFIG(cfg) (void)(cfg)
#define T_ZERO(t) (void)0
#define T_LOAD(t, p, stride) ((void)(p), (void)(stride))
#define T_STORE(t, p, stride) amx_free_store(p, stride, cfg.rows[t], cfg.colsb[t])
#define T_DP(c, a, b) (void)0
#define T_RELEASE() (void)0
#else
#error "amx_tile_ops.h: AMX_TILES names no kind of tiles"
#endif
#undef AMX_TILES
