/* test_checkpoint.c - checkpoints in one process: CRC-32C, a save/load round trip with
 * bit-identical state, an exact resume (same weights as a run never stopped), and every kind
 * of damage: truncation at many offsets, a flipped bit in every section, another format
 * version, trailing bytes, another model, another optimizer or data set, a directory, a
 * missing file, a FIFO, a failing allocator, a leftover .tmp or a link planted there, crafted
 * files whose lengths lie (with a counting allocator: nothing larger than the file is
 * allocated for them). Each must give its error code and a
 * message naming the file, and never crash. */
#include "ddl.h"
#include "check.h"
#include "train/impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_TRAIN 200
#define BATCH 32

static char dir[256], path[300];
static uint8_t img[N_TRAIN * 784], lab[N_TRAIN];
static ddl_dataset data;

/* ---- set-up ---- */

static void make_data(void)
{
    ddl_rng r;
    ddl_rng_seed(&r, 7);
    for (int i = 0; i < N_TRAIN; i++) {
        lab[i] = (uint8_t)ddl_rng_below(&r, 10);
        for (int p = 0; p < 784; p++)
            img[i * 784 + p] = (uint8_t)(p / 78 == lab[i] ? 200 : ddl_rng_below(&r, 80));
    }
    data = (ddl_dataset){.n = N_TRAIN, .c = 1, .h = 28, .w = 28, .th = 1, .tw = 1, .n_classes = 10,
                         .images = img, .targets = lab};
}

typedef struct run {
    ddl_model *m;
    ddl_trainer *t;
} run;

static int run_open(run *r, int optim, uint64_t seed, long limit)
{
    ddl_model_config mc = {.batch = BATCH, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10, .dropout = 0.25f};
    if (ddl_model_create(ddl_model_lenet(), &mc, NULL, &r->m, NULL, 0) != DDL_OK)
        return -1;
    ddl_model_set_norm(r->m, 0.2f, 0.3f);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = BATCH;
    tc.seed = seed;
    tc.train_limit = limit;
    tc.optim.kind = optim;
    tc.optim.lr = optim == DDL_OPTIM_ADAM ? 1e-3f : 0.01f;
    return ddl_trainer_create(&tc, r->m, &data, NULL, &r->t, NULL, 0);
}

static void run_close(run *r)
{
    ddl_trainer_destroy(r->t);
    ddl_model_destroy(r->m);
}

static void steps(run *r, int n)
{
    for (int i = 0; i < n; i++)
        CHECK(ddl_trainer_step(r->t, NULL) == DDL_OK);
}

/* ---- file helpers ---- */

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*n ? *n : 1);
    if (b && fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void spit(const char *p, const unsigned char *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

/* open_status: ddl_checkpoint_open's status on bytes b[n]; err gets its message. */
static int open_status(const unsigned char *b, size_t n, char *err)
{
    char p[320];
    snprintf(p, sizeof p, "%s/damaged", dir);
    spit(p, b, n);
    ddl_checkpoint *ck = NULL;
    err[0] = 0;
    int rc = ddl_checkpoint_open(p, NULL, &ck, err, DDL_ERR_BYTES);
    ddl_checkpoint_close(ck);
    if (rc != DDL_OK && !strstr(err, "damaged")) {
        fprintf(stderr, "error without the file name: %s\n", err);
        return 1; /* counted as a wrong status by the callers */
    }
    return rc;
}

/* ---- tests ---- */

static void test_crc32c(void)
{
    CHECK(ddl_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(ddl_crc32c(0, "", 0) == 0);
    CHECK(ddl_crc32c(ddl_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
}

/* round trip: what the file holds is the trainer's state, bit for bit. */
static void test_round_trip(int optim)
{
    run a;
    CHECK(run_open(&a, optim, 11, 0) == DDL_OK);
    steps(&a, 9); /* into the second epoch: 200 / 32 = 7 steps per epoch */
    CHECK(ddl_trainer_save(a.t, path) == DDL_OK);
    ddl_checkpoint *ck = NULL;
    char err[DDL_ERR_BYTES];
    CHECK(ddl_checkpoint_open(path, NULL, &ck, err, sizeof err) == DDL_OK);
    if (!ck) {
        fprintf(stderr, "%s\n", err);
        run_close(&a);
        return;
    }
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    CHECK(in->version == DDL_CHECKPOINT_VERSION);
    CHECK(strcmp(in->model, "lenet") == 0);
    CHECK(in->signature == ddl_model_signature(a.m));
    CHECK(in->step == 9 && in->epoch == 1 && in->pos == 2 * BATCH && in->n_train == N_TRAIN);
    CHECK(in->world_size == 1 && in->batch == BATCH && in->seed == 11);
    CHECK(in->optim.kind == optim && in->mean == 0.2f && in->std == 0.3f);
    CHECK(in->n_params == ddl_model_n_params(a.m) && in->n_tensors == 10);
    CHECK(in->model_cfg.dropout == 0.25f && in->model_cfg.batch == BATCH);
    CHECK(memcmp(ddl_checkpoint_params(ck), ddl_model_params(a.m), in->n_params * 4) == 0);
    CHECK(in->n_optim == ddl_optim_state_floats(&a.t->cfg.optim, in->n_params));
    CHECK(memcmp(ddl_checkpoint_optim_state(ck), a.t->opt_state, in->n_optim * 4) == 0);
    const ddl_param_info *t0 = ddl_checkpoint_tensor(ck, 0);
    CHECK(t0 && strcmp(t0->name, "conv1.weight") == 0 && t0->n_dims == 4 && t0->shape[0] == 6 && t0->count == 150);
    CHECK(ddl_checkpoint_tensor(ck, 10) == NULL && ddl_checkpoint_tensor(ck, -1) == NULL);
    ddl_checkpoint_close(ck);

    /* resume into a fresh trainer with other weights: then both go on in lockstep */
    run b;
    CHECK(run_open(&b, optim, 11, 0) == DDL_OK);
    ddl_model_init_weights(b.m, 999);
    int world = -1;
    CHECK(ddl_trainer_resume(b.t, path, 0, &world) == DDL_OK);
    CHECK(world == 1);
    CHECK(ddl_model_crc(a.m) == ddl_model_crc(b.m));
    CHECK(ddl_trainer_step_count(b.t) == 9 && ddl_trainer_epoch_index(b.t) == 1 && b.t->pos == 2 * BATCH);
    CHECK(memcmp(&a.t->drop_rng, &b.t->drop_rng, sizeof(ddl_rng)) == 0);
    steps(&a, 12);
    steps(&b, 12);
    CHECK(ddl_model_crc(a.m) == ddl_model_crc(b.m));
    run_close(&a);
    run_close(&b);
}

/* sections: offsets of the section headers of the file image b[n] (the header says how many:
 * 6 with the model description, as lenet's checkpoints have). */
static int n_sections(const unsigned char *b) { return b[16]; }
static int sections(const unsigned char *b, size_t n, size_t off[6], size_t end[6])
{
    size_t at = 32;
    if (n < 32 || n_sections(b) < 5 || n_sections(b) > 6)
        return -1;
    for (int i = 0; i < n_sections(b); i++) {
        if (at + 32 > n)
            return -1;
        uint64_t stored = 0;
        for (int k = 7; k >= 0; k--)
            stored = stored << 8 | b[at + 16 + k];
        off[i] = at;
        at += 32 + (size_t)stored;
        end[i] = at;
    }
    return at == n ? 0 : -1;
}

static void test_damage(void)
{
    run a;
    CHECK(run_open(&a, DDL_OPTIM_SGD, 5, 0) == DDL_OK);
    steps(&a, 3);
    CHECK(ddl_trainer_save(a.t, path) == DDL_OK);
    run_close(&a);
    size_t n = 0;
    unsigned char *b = slurp(path, &n), *d = malloc(n + 16);
    char err[DDL_ERR_BYTES];
    size_t off[6], end[6];
    CHECK(b && d && sections(b, n, off, end) == 0);
    if (!b || !d || sections(b, n, off, end) != 0)
        return;
    CHECK(n_sections(b) == 6); /* DESC: lenet describes itself as a layer graph */
    CHECK(open_status(b, n, err) == DDL_OK);

    /* truncation: every offset of the headers and the start of each section, a stride elsewhere */
    int bad = 0, tried = 0;
    for (size_t cut = 0; cut < n; cut += (cut < 2048 || (cut % 4096) < 64 ? 1 : 997)) {
        int rc = open_status(b, cut, err);
        bad += rc != DDL_ECORRUPT;
        tried++;
    }
    for (int i = 0; i < n_sections(b); i++)
        for (size_t k = off[i]; k < off[i] + 40 && k < n; k++)
            bad += open_status(b, k, err) != DDL_ECORRUPT;
    CHECK(bad == 0);
    CHECK(tried > 2000);
    CHECK(open_status(b, 100, err) == DDL_ECORRUPT && strstr(err, "truncated"));
    CHECK(open_status(b, 10, err) == DDL_ECORRUPT && strstr(err, "truncated") && strstr(err, "32-byte"));

    /* a flipped bit in the header and in every section's header and body */
    bad = 0;
    size_t spots[] = {0, 12, 20, 28};
    for (size_t s = 0; s < sizeof spots / sizeof spots[0]; s++) {
        memcpy(d, b, n);
        d[spots[s]] ^= 0x10;
        bad += open_status(d, n, err) != DDL_ECORRUPT;
    }
    for (int i = 0; i < n_sections(b); i++) {
        size_t at[] = {off[i], off[i] + 9, off[i] + 17, off[i] + 24, off[i] + 31, off[i] + 32,
                       (off[i] + 32 + end[i]) / 2, end[i] - 1};
        for (size_t s = 0; s < sizeof at / sizeof at[0]; s++)
            for (int bit = 0; bit < 8; bit += 3) {
                memcpy(d, b, n);
                d[at[s]] ^= (unsigned char)(1u << bit);
                int rc = open_status(d, n, err);
                if (rc != DDL_ECORRUPT)
                    fprintf(stderr, "section %d byte %zu bit %d: status %d: %s\n", i, at[s], bit, rc, err);
                bad += rc != DDL_ECORRUPT;
            }
    }
    CHECK(bad == 0);
    memcpy(d, b, n);
    d[(off[3] + 32 + end[3]) / 2] ^= 1;
    CHECK(open_status(d, n, err) == DDL_ECORRUPT && strstr(err, "WGTS") && strstr(err, "CRC-32C"));

    /* another format version: said as such, before any CRC */
    memcpy(d, b, n);
    d[8] = 2;
    CHECK(open_status(d, n, err) == DDL_ECORRUPT && strstr(err, "version 2, expected 1"));
    /* not a checkpoint at all */
    memcpy(d, "\x1f\x8b\x08\x00", 4);
    CHECK(open_status(d, n, err) == DDL_ECORRUPT && strstr(err, "not a ddl checkpoint"));
    /* trailing bytes */
    memcpy(d, b, n);
    memset(d + n, 0, 16);
    CHECK(open_status(d, n + 16, err) == DDL_ECORRUPT && strstr(err, "trailing"));
    free(b);
    free(d);
}

/* ---- another model: a one-layer classifier, named "tiny" or (to fool the name check) "lenet" ---- */

typedef struct tiny {
    float *w, *gw;
    int k;
} tiny;

static const char *tiny_name = "conv1.weight"; /* its one tensor's name */

static int tiny_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    tiny *t = (tiny *)self;
    int shape[2] = {cfg->n_classes, 784};
    t->k = cfg->n_classes;
    t->w = ddl_build_param(b, tiny_name, 2, shape, DDL_INIT_GLOROT, 784, 10, &t->gw);
    ddl_build_output(b, cfg->n_classes, 1, 1);
    return DDL_OK;
}

static void tiny_forward(void *self, const float *x, int batch, int training, ddl_rng *rng, float *logits)
{
    tiny *t = (tiny *)self;
    (void)training, (void)rng;
    for (int i = 0; i < batch * t->k; i++)
        logits[i] = 0;
    ddl_dense_forward(batch, 784, t->k, x, t->w, logits, logits); /* bias: the zeroed logits */
}

static void tiny_backward(void *self, const float *x, int batch, const float *dlogits, ddl_backward *pass)
{
    (void)pass; /* one layer: nothing to report before the end */
    tiny *t = (tiny *)self;
    float db[16];
    ddl_dense_backward(batch, 784, t->k, x, t->w, dlogits, NULL, t->gw, db);
}

/* tiny_open: the model "tiny" under the plugin name model_name (its plugin is static: one model
 * at a time), and a trainer of it on the test data. */
static int tiny_open(const char *model_name, ddl_model **m, ddl_trainer **t, char *err, size_t err_bytes)
{
    static ddl_model_plugin p = {.version = DDL_MODEL_VERSION, .self_bytes = sizeof(tiny), .build = tiny_build,
                                 .forward = tiny_forward, .backward = tiny_backward};
    p.name = model_name;
    ddl_model_config mc = {.batch = BATCH, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = BATCH;
    *m = NULL;
    *t = NULL;
    int rc = ddl_model_create(&p, &mc, NULL, m, err, err_bytes);
    return rc ? rc : ddl_trainer_create(&tc, *m, &data, NULL, t, err, err_bytes);
}

static void test_wrong_model(void)
{
    run a;
    CHECK(run_open(&a, DDL_OPTIM_SGD, 5, 0) == DDL_OK);
    steps(&a, 2);
    CHECK(ddl_trainer_save(a.t, path) == DDL_OK);
    uint32_t crc = ddl_model_crc(a.m);
    run_close(&a);

    const char *names[2] = {"tiny", "lenet"};
    for (int k = 0; k < 2; k++) {
        ddl_model *m = NULL;
        ddl_trainer *t = NULL;
        CHECK(tiny_open(names[k], &m, &t, NULL, 0) == DDL_OK && m && t);
        if (!t) {
            ddl_model_destroy(m);
            continue;
        }
        uint32_t before = ddl_model_crc(m);
        CHECK(ddl_trainer_resume(t, path, 0, NULL) == DDL_EINVAL);
        if (k == 0)
            CHECK(strstr(ddl_trainer_error(t), "checkpoint of model lenet, expected tiny") != NULL);
        else
            CHECK(strstr(ddl_trainer_error(t), "conv1.weight [6,1,5,5] in the checkpoint, expected conv1.weight "
                                               "[10,784]") != NULL);
        CHECK(ddl_model_crc(m) == before && ddl_trainer_step_count(t) == 0); /* unchanged */
        ddl_trainer_destroy(t);
        ddl_model_destroy(m);
    }

    /* the right model, but another optimizer, or another number of samples per epoch */
    run b;
    CHECK(run_open(&b, DDL_OPTIM_ADAM, 5, 0) == DDL_OK);
    CHECK(ddl_trainer_resume(b.t, path, 0, NULL) == DDL_EINVAL);
    CHECK(strstr(ddl_trainer_error(b.t), "optimizer sgd") && strstr(ddl_trainer_error(b.t), "expected adam"));
    run_close(&b);
    CHECK(run_open(&b, DDL_OPTIM_SGD, 5, 100) == DDL_OK);
    CHECK(ddl_trainer_resume(b.t, path, 0, NULL) == DDL_EINVAL);
    CHECK(strstr(ddl_trainer_error(b.t), "200 training samples per epoch, this one has 100") != NULL);
    run_close(&b);
    CHECK(run_open(&b, DDL_OPTIM_SGD, 5, 0) == DDL_OK);
    CHECK(ddl_trainer_resume(b.t, path, 0, NULL) == DDL_OK && ddl_model_crc(b.m) == crc);
    run_close(&b);
}

static void test_files(void)
{
    run a;
    char err[DDL_ERR_BYTES], p[400];
    ddl_checkpoint *ck = NULL;
    CHECK(run_open(&a, DDL_OPTIM_SGD, 5, 0) == DDL_OK);
    /* a directory, a missing file */
    CHECK(ddl_checkpoint_open(dir, NULL, &ck, err, sizeof err) == DDL_EIO && strstr(err, "is a directory"));
    snprintf(p, sizeof p, "%s/missing", dir);
    CHECK(ddl_checkpoint_open(p, NULL, &ck, err, sizeof err) == DDL_EIO && strstr(err, "missing: cannot open"));
    CHECK(ck == NULL);
    CHECK(ddl_trainer_resume(a.t, p, 0, NULL) == DDL_EIO && strstr(ddl_trainer_error(a.t), "missing"));
    int world = -1;
    uint32_t crc = ddl_model_crc(a.m);
    CHECK(ddl_trainer_resume(a.t, p, DDL_RESUME_IF_EXISTS, &world) == DDL_OK && world == 0);
    CHECK(ddl_model_crc(a.m) == crc && ddl_trainer_step_count(a.t) == 0);
    CHECK(ddl_trainer_resume(a.t, dir, DDL_RESUME_IF_EXISTS, NULL) == DDL_EIO);
    /* a save into a directory that does not exist: DDL_EIO naming the file */
    snprintf(p, sizeof p, "%s/no/such/ck", dir);
    CHECK(ddl_trainer_save(a.t, p) == DDL_EIO && strstr(ddl_trainer_error(a.t), "no/such/ck.tmp: cannot create"));
    /* a leftover .tmp from a crash is overwritten, and gone after the rename */
    snprintf(p, sizeof p, "%s.tmp", path);
    spit(p, (const unsigned char *)"garbage", 7);
    steps(&a, 1);
    CHECK(ddl_trainer_save(a.t, path) == DDL_OK);
    CHECK(access(p, F_OK) != 0);
    CHECK(ddl_checkpoint_open(path, NULL, &ck, err, sizeof err) == DDL_OK && ck);
    CHECK(ck && ddl_checkpoint_get_info(ck)->step == 1);
    ddl_checkpoint_close(ck);
    ck = NULL;

    /* a symlink or a hard link planted at PATH.tmp: unlinked, never written through */
    char victim[400];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    for (int k = 0; k < 2; k++) {
        spit(victim, (const unsigned char *)"precious", 8);
        unlink(p);
        CHECK((k == 0 ? symlink(victim, p) : link(victim, p)) == 0);
        steps(&a, 1);
        CHECK(ddl_trainer_save(a.t, path) == DDL_OK);
        size_t vn = 0;
        unsigned char *v = slurp(victim, &vn);
        CHECK(v && vn == 8 && memcmp(v, "precious", 8) == 0);
        free(v);
        CHECK(access(p, F_OK) != 0);
        struct stat st;
        CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1);
        CHECK(ddl_checkpoint_open(path, NULL, &ck, err, sizeof err) == DDL_OK && ck);
        CHECK(ck && ddl_checkpoint_get_info(ck)->step == 2 + k);
        CHECK(ck && memcmp(ddl_checkpoint_params(ck), ddl_model_params(a.m), ddl_model_n_params(a.m) * 4) == 0);
        ddl_checkpoint_close(ck);
        ck = NULL;
    }
    /* a directory at PATH.tmp: DDL_EIO naming it, and the checkpoint stays as it was */
    CHECK(mkdir(p, 0700) == 0);
    CHECK(ddl_trainer_save(a.t, path) == DDL_EIO && strstr(ddl_trainer_error(a.t), "ck.tmp: cannot create"));
    CHECK(ddl_checkpoint_open(path, NULL, &ck, err, sizeof err) == DDL_OK && ck &&
          ddl_checkpoint_get_info(ck)->step == 3);
    ddl_checkpoint_close(ck);
    ck = NULL;
    rmdir(p);
    /* a FIFO to open: refused at once, not waited on for a writer (alarm: a hang fails) */
    snprintf(p, sizeof p, "%s/fifo", dir);
    CHECK(mkfifo(p, 0600) == 0);
    alarm(20);
    CHECK(ddl_checkpoint_open(p, NULL, &ck, err, sizeof err) == DDL_EIO && strstr(err, "not a regular file"));
    alarm(0);
    unlink(p);
    unlink(victim);
    run_close(&a);
}

/* ---- crafted files that promise more than they hold ----
 * Written here byte by byte (sections stored as they are, or as hand-made lz4 blocks), so the
 * lengths can lie while every CRC is right. The model: one tensor "w" of n floats. */

static void le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void le64(unsigned char *p, uint64_t v)
{
    le32(p, (uint32_t)v);
    le32(p + 4, (uint32_t)(v >> 32));
}

typedef struct craft_sec {
    const unsigned char *body;
    size_t stored;
    uint64_t raw;
    int lz4;
} craft_sec;

/* craft: a checkpoint image of the five sections s into out; returns its size. */
static size_t craft(unsigned char *out, const craft_sec s[5])
{
    static const char ids[5][5] = {"META", "TENS", "RNGS", "WGTS", "OPTS"};
    memset(out, 0, 32);
    memcpy(out, "DDLCKPT", 8);
    le32(out + 8, DDL_CHECKPOINT_VERSION);
    le32(out + 12, 1);
    le32(out + 16, 5);
    le32(out + 28, ddl_crc32c(0, out, 28));
    size_t at = 32;
    for (int i = 0; i < 5; i++) {
        unsigned char *h = out + at;
        at += 32 + s[i].stored;
        memcpy(h, ids[i], 4);
        le32(h + 4, (uint32_t)s[i].lz4);
        le64(h + 8, s[i].raw);
        le64(h + 16, s[i].stored);
        le32(h + 24, ddl_crc32c(0, s[i].body, s[i].stored));
        le32(h + 28, ddl_crc32c(0, h, 28));
        if (s[i].stored) /* an empty section may have no body */
            memcpy(h + 32, s[i].body, s[i].stored);
    }
    return at;
}

#ifdef DDL_WITH_LZ4
/* lz4_zeros: an lz4 block of raw (>= 32) zero bytes: one literal, a long match, 5 literals. */
static size_t lz4_zeros(unsigned char *out, uint64_t raw)
{
    size_t o = 0;
    uint64_t ext = raw - 6 - 4 - 15; /* match length beyond the token's 15 + the minimum 4 */
    out[o++] = 0x1F;
    out[o++] = 0;
    out[o++] = 1, out[o++] = 0; /* offset 1 */
    for (; ext >= 255; ext -= 255)
        out[o++] = 255;
    out[o++] = (unsigned char)ext;
    out[o++] = 0x50;
    memset(out + o, 0, 5);
    return o + 5;
}
#endif

/* craft_file: META, TENS and RNGS of the model "w" (n floats, n_optim optimizer floats) in m,
 * t, r; with wgts and opts, the image into out. */
static size_t craft_file(unsigned char *out, uint64_t n, uint64_t n_optim, craft_sec wgts, craft_sec opts)
{
    static unsigned char m[256], t[84], r[32];
    memset(m, 0, sizeof m);
    memset(t, 0, sizeof t);
    memset(r, 1, sizeof r);
    unsigned char b[4];
    uint32_t sig = ddl_crc32c(0, "w", 2);
    le32(b, 1);
    sig = ddl_crc32c(sig, b, 4);
    le32(b, (uint32_t)n);
    sig = ddl_crc32c(sig, b, 4);
    memcpy(m, "tiny", 4);
    le32(m + 48, sig), le32(m + 52, 1), le64(m + 56, n), le64(m + 64, n_optim);
    le64(m + 88, 1), le32(m + 108, 1), le32(m + 112, 1), le32(m + 116, DDL_OPTIM_SGD);
    float one = 1.0f;
    uint32_t bits;
    memcpy(&bits, &one, 4);
    le32(m + 148, bits); /* std 1 */
    t[0] = 'w';
    le32(t + 48, 1), le32(t + 52, (uint32_t)n), le32(t + 56, 1), le32(t + 60, 1), le32(t + 64, 1);
    le64(t + 68, 0), le64(t + 76, n);
    craft_sec s[5] = {{m, 256, 256, 0}, {t, 84, 84, 0}, {r, 32, 32, 0}, wgts, opts};
    return craft(out, s);
}

typedef struct counter {
    long live;
    size_t largest;
} counter;

static void *count_alloc(void *ud, size_t bytes)
{
    counter *c = (counter *)ud;
    void *p = malloc(bytes ? bytes : 1);
    c->live += p != NULL;
    c->largest = bytes > c->largest ? bytes : c->largest;
    return p;
}

static void count_free(void *ud, void *p)
{
    ((counter *)ud)->live -= p != NULL;
    free(p);
}

/* open_counted: ddl_checkpoint_open of out[n] with a counting allocator; *largest its largest
 * allocation. */
static int open_counted(const unsigned char *out, size_t n, size_t *largest, char *err)
{
    char p[320];
    snprintf(p, sizeof p, "%s/crafted", dir);
    spit(p, out, n);
    counter c = {0, 0};
    ddl_allocator al = {count_alloc, count_free, &c};
    ddl_checkpoint *ck = NULL;
    int rc = ddl_checkpoint_open(p, &al, &ck, err, DDL_ERR_BYTES);
    ddl_checkpoint_close(ck);
    CHECK(c.live == 0);
    CHECK(rc == DDL_OK || strstr(err, "crafted"));
    *largest = c.largest;
    return rc;
}

static void test_huge_claims(void)
{
    enum { N = 1 << 16 };                              /* 256 KiB of weights */
    static unsigned char out[1 << 16], zw[4096], zo[4096], junk[4200];
    const size_t model = (size_t)N * 4, slack = sizeof(ddl_checkpoint) + 4096;
    char err[DDL_ERR_BYTES];
    size_t big = 0, n;
    memset(junk, 0x11, sizeof junk); /* as lz4: sequences of 1 literal and a 5-byte match */
#ifdef DDL_WITH_LZ4
    size_t nw = lz4_zeros(zw, model), no = lz4_zeros(zo, model);
    /* honest: zeros compress 255 times; the file opens and holds them */
    n = craft_file(out, N, N, (craft_sec){zw, nw, model, 1}, (craft_sec){zo, no, model, 1});
    CHECK(n < 4096 && open_counted(out, n, &big, err) == DDL_OK);
    CHECK(big <= model + slack);
    /* OPTS claims 4 floats per parameter (1 MiB) in 4 KiB that decode to far less */
    n = craft_file(out, N, 4 * N, (craft_sec){zw, nw, model, 1}, (craft_sec){junk, sizeof junk, 4 * model, 1});
    CHECK(open_counted(out, n, &big, err) == DDL_ECORRUPT && strstr(err, "section OPTS (optimizer state) must "
                                                                          "hold 1048576 bytes"));
    CHECK(big < 4 * n + model);
    /* WGTS claims 255 times its 4 KiB: refused having allocated about the file's size */
    n = craft_file(out, sizeof junk * 255 / 4, 0, (craft_sec){junk, sizeof junk, sizeof junk * 255, 1},
                   (craft_sec){NULL, 0, 0, 0});
    CHECK(open_counted(out, n, &big, err) == DDL_ECORRUPT && strstr(err, "section WGTS (weights) must hold"));
    CHECK(big < 4 * n + slack);
#endif
    /* uncompressed sections that claim more than the file has: truncated, before allocating */
    n = craft_file(out, N, 4 * N, (craft_sec){junk, sizeof junk, model, 0}, (craft_sec){NULL, 0, 0, 0});
    CHECK(open_counted(out, n, &big, err) == DDL_ECORRUPT && strstr(err, "WGTS (weights) claims 4200 bytes stored"));
    CHECK(big < 4 * n + slack);
    (void)zw, (void)zo;
}

/* ---- a failing allocator: every allocation of open fails in turn; no crash, no leak ---- */

typedef struct failer {
    int left, live;
} failer;

static void *fail_alloc(void *ud, size_t bytes)
{
    failer *f = (failer *)ud;
    if (f->left-- <= 0)
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
        return NULL;
    f->live++;
    return p;
}

static void fail_free(void *ud, void *p)
{
    if (p)
        ((failer *)ud)->live--;
    free(p);
}

static void test_alloc_failures(void)
{
    char err[DDL_ERR_BYTES];
    int ok_at = -1, all_clean = 1;
    for (int k = 0; k < 20 && ok_at < 0; k++) {
        failer f = {k, 0};
        ddl_allocator al = {fail_alloc, fail_free, &f};
        ddl_checkpoint *ck = NULL;
        int rc = ddl_checkpoint_open(path, &al, &ck, err, sizeof err);
        if (rc == DDL_OK)
            ok_at = k;
        else
            all_clean &= rc == DDL_ENOMEM && ck == NULL && f.live == 0;
        ddl_checkpoint_close(ck);
        all_clean &= f.live == 0;
    }
    CHECK(ok_at > 2);
    CHECK(all_clean);
}

/* write_named: a checkpoint of the model "tiny" whose tensor is named name, at out; for
 * tests/test_ckpt_tool.sh (ddl-ckpt export must refuse names that are not plain). 0 on success. */
static int write_named(const char *name, const char *out)
{
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    char err[DDL_ERR_BYTES] = "";
    tiny_name = name;
    make_data();
    int rc = tiny_open("tiny", &m, &t, err, sizeof err);
    if (!rc && (rc = ddl_trainer_save(t, out)))
        snprintf(err, sizeof err, "%s", ddl_trainer_error(t));
    if (rc)
        fprintf(stderr, "test_checkpoint --write-named: %s\n", err);
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--write-named") == 0)
        return write_named(argv[2], argv[3]);
    snprintf(dir, sizeof dir, "/tmp/ddl_test_checkpoint_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/ck", dir);
    make_data();
    test_crc32c();
    test_round_trip(DDL_OPTIM_SGD);
    test_round_trip(DDL_OPTIM_ADAM);
    test_damage();
    test_wrong_model();
    test_files();
    test_huge_claims();
    test_alloc_failures();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_END();
}
