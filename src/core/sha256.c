/* sha256.c - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the handshakes of the
 * network transports, their frame MACs' keys and the heartbeat's MAC (src/comm). Pure functions
 * over caller buffers: no state, no allocation, no I/O. Not a general crypto library: it must
 * not grow ciphers, key exchange or random numbers. */
#include "impl.h"

#include <string.h>

/* ---- SHA-256 ---- */

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t total;          /* bytes hashed so far */
    unsigned char block[64]; /* partial block */
    size_t fill;             /* bytes in block */
} sha256_ctx;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
        uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g; g = f; f = e; e = d + t1;
        d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
    h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

static void sha256_init(sha256_ctx *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->total = 0;
    c->fill = 0;
}

static void sha256_update(sha256_ctx *c, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    c->total += bytes;
    while (bytes) {
        if (c->fill == 0 && bytes >= 64) {
            sha256_block(c->h, p);
            p += 64;
            bytes -= 64;
            continue;
        }
        size_t n = 64 - c->fill < bytes ? 64 - c->fill : bytes;
        memcpy(c->block + c->fill, p, n);
        c->fill += n;
        p += n;
        bytes -= n;
        if (c->fill == 64) {
            sha256_block(c->h, c->block);
            c->fill = 0;
        }
    }
}

static void sha256_final(sha256_ctx *c, unsigned char out[DDL__SHA256_BYTES])
{
    uint64_t bits = c->total * 8;
    unsigned char pad[72] = {0x80};
    size_t n = (c->fill < 56 ? 56 : 120) - c->fill; /* padding up to 8 bytes before a block end */
    for (int i = 0; i < 8; i++)
        pad[n + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(c, pad, n + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(c->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)c->h[i];
    }
}

void ddl__sha256(const void *data, size_t bytes, unsigned char out[DDL__SHA256_BYTES])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, bytes);
    sha256_final(&c, out);
}

/* ---- HMAC-SHA256 ---- */

void ddl__hmac_sha256(const void *key, size_t key_bytes, const void *msg, size_t msg_bytes,
                      unsigned char out[DDL__SHA256_BYTES])
{
    unsigned char k[64] = {0}, pad[64], inner[DDL__SHA256_BYTES];
    if (key_bytes > 64)
        ddl__sha256(key, key_bytes, k); /* long keys are hashed first (RFC 2104) */
    else if (key_bytes)
        memcpy(k, key, key_bytes);
    sha256_ctx c;
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    sha256_init(&c);
    sha256_update(&c, pad, 64);
    sha256_update(&c, msg, msg_bytes);
    sha256_final(&c, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_init(&c);
    sha256_update(&c, pad, 64);
    sha256_update(&c, inner, sizeof inner);
    sha256_final(&c, out);
}

int ddl__ct_equal(const void *a, const void *b, size_t bytes)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < bytes; i++)
        d |= (unsigned char)(x[i] ^ y[i]);
    return d == 0;
}

void ddl_hmac_sha256(const void *key, size_t key_bytes, const void *msg, size_t msg_bytes, unsigned char out[32])
{
    ddl__hmac_sha256(key, key_bytes, msg, msg_bytes, out);
}
