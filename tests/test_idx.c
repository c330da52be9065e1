/* test_idx.c - IDX loading and MNIST-layout data sets (src/data/idx.c).
 * Writes small IDX files, raw and gzipped, into a temporary directory and checks what the user
 * sees: the values on success, and on every kind of bad file the status code and a message that
 * names the file and says what was wrong, and (with a counting allocator) that a file claiming
 * more than it can hold is refused before anything of that size is allocated. Loads the real
 * Fashion-MNIST when it is installed. */
#include "check.h"
#include "ddl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef DDL_WITH_ZLIB
#include <zlib.h>
#endif

#define FMNIST "/usr/share/datasets/fashion-mnist"

/* ---- temporary files ---- */

static char tmpdir[64];
static char made[64][256]; /* every file written, removed at the end */
static int n_made;

static const char *tmp_path(const char *name)
{
    snprintf(made[n_made], sizeof made[0], "%s/%s", tmpdir, name);
    return made[n_made++];
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(data, 1, n, f) == n);
        fclose(f);
    }
}

static void write_gz(const char *path, const void *data, size_t n)
{
#ifdef DDL_WITH_ZLIB
    gzFile g = gzopen(path, "wb6");
    CHECK(g != NULL);
    if (g) {
        CHECK(gzwrite(g, data, (unsigned)n) == (int)n);
        CHECK(gzclose(g) == Z_OK);
    }
#else
    /* Without zlib only the magic matters: the loader must refuse with DDL_ENOTSUP. */
    (void)data;
    (void)n;
    static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    write_file(path, hdr, sizeof hdr);
#endif
}

#ifdef DDL_WITH_ZLIB
static size_t read_file(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap, f) : 0;
    if (f)
        fclose(f);
    return n;
}
#endif

/* make_idx: header (magic, dims) then `n_data` bytes of data (value i * 7 + 3) into out. */
static size_t make_idx(unsigned char *out, uint32_t magic, int nd, const uint32_t *dims, size_t n_data)
{
    size_t o = 0;
    for (int k = 3; k >= 0; k--)
        out[o++] = (unsigned char)(magic >> (8 * k));
    for (int i = 0; i < nd; i++)
        for (int k = 3; k >= 0; k--)
            out[o++] = (unsigned char)(dims[i] >> (8 * k));
    for (size_t i = 0; i < n_data; i++)
        out[o++] = (unsigned char)(i * 7 + 3);
    return o;
}

/* ---- allocators ---- */

static long live_allocs;
static size_t largest_alloc; /* the largest allocation asked for since the last reset */
static void *count_alloc(void *ud, size_t n)
{
    (void)ud;
    void *p = NULL;
    largest_alloc = n > largest_alloc ? n : largest_alloc;
    if (posix_memalign(&p, 64, n ? n : 1))
        return NULL;
    live_allocs++;
    return p;
}
static void count_free(void *ud, void *p)
{
    (void)ud;
    if (p)
        live_allocs--;
    free(p);
}
static const ddl_allocator counting = {count_alloc, count_free, NULL};

static void *fail_alloc(void *ud, size_t n)
{
    (void)ud;
    (void)n;
    return NULL;
}
static const ddl_allocator failing = {fail_alloc, count_free, NULL};

/* ---- helpers that check what the user sees ---- */

/* expect_fail: ddl_idx_load(path) fails with code; err names path and contains phrase. */
static void expect_fail_at(const char *path, int code, const char *phrase, int line)
{
    char err[DDL_ERR_BYTES] = "";
    uint8_t *data = (uint8_t *)1;
    int nd = -1, dims[4];
    int rc = ddl_idx_load(path, &counting, &data, &nd, dims, err, sizeof err);
    int ok = rc == code && data == NULL && strstr(err, path) && strstr(err, phrase);
    CHECK(ok);
    if (rc == DDL_OK)
        count_free(NULL, data);
    if (!ok)
        fprintf(stderr, "  line %d: rc %d (want %d), err \"%s\" (want \"%s\")\n", line, rc, code, err, phrase);
    CHECK(live_allocs == 0);
}
#define expect_fail(path, code, phrase) expect_fail_at(path, code, phrase, __LINE__)

/* expect_ok: load path and check its dims and the values i * 7 + 3. */
static void expect_ok(const char *path, int nd, const uint32_t *dims, size_t n_data)
{
    char err[DDL_ERR_BYTES] = "";
    uint8_t *data = NULL;
    int got_nd = 0, got[4] = {-1, -1, -1, -1};
    int rc = ddl_idx_load(path, &counting, &data, &got_nd, got, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc) {
        fprintf(stderr, "  %s: %s\n", path, err);
        return;
    }
    CHECK(got_nd == nd);
    for (int i = 0; i < 4; i++)
        CHECK(got[i] == (i < nd ? (int)dims[i] : 0));
    int same = 1;
    for (size_t i = 0; i < n_data; i++)
        same &= data[i] == (uint8_t)(i * 7 + 3);
    CHECK(same);
    count_free(NULL, data);
    CHECK(live_allocs == 0);
}

/* ---- good files ---- */

static void test_good(void)
{
    static const uint32_t d3[3] = {2, 3, 4}, d1[1] = {5}, d4[4] = {2, 1, 3, 2};
    unsigned char buf[256];
    size_t n = make_idx(buf, 0x803, 3, d3, 24);
    const char *p = tmp_path("good3.idx");
    write_file(p, buf, n);
    expect_ok(p, 3, d3, 24);
    n = make_idx(buf, 0x801, 1, d1, 5);
    write_file(p = tmp_path("good1.idx"), buf, n);
    expect_ok(p, 1, d1, 5);
    n = make_idx(buf, 0x804, 4, d4, 12);
    write_file(p = tmp_path("good4.idx"), buf, n);
    expect_ok(p, 4, d4, 12);

    n = make_idx(buf, 0x803, 3, d3, 24);
    write_gz(p = tmp_path("good3.idx.gz"), buf, n);
#ifdef DDL_WITH_ZLIB
    expect_ok(p, 3, d3, 24);
    /* gzip is found by its magic, not by the name */
    write_gz(p = tmp_path("gz-without-suffix.idx"), buf, n);
    expect_ok(p, 3, d3, 24);
#else
    expect_fail(p, DDL_ENOTSUP, "rebuild with zlib");
#endif
}

/* ---- bad headers ---- */

static void test_bad_header(void)
{
    static const uint32_t d3[3] = {2, 3, 4};
    unsigned char buf[256];
    const char *p;

    write_file(p = tmp_path("empty.idx"), buf, 0);
    expect_fail(p, DDL_ECORRUPT, "truncated header: expected 4 bytes of magic, found 0");
    /* formats people mistake for IDX are named, with where to load them instead */
    static const struct { const char bytes[16], *says; } foreign[] = { /* bytes: 8 used, zero-padded */
        {"\x89PNG\r\n\x1a\n", "a PNG image, not an IDX file: load images with ddl_dataset_load_folder"},
        {"\xff\xd8\xff\xe0\0\x10", "a JPEG image, not an IDX file"},
        {"\x93NUMPY\x01\0", "a numpy array (.npy), not an IDX file"},
        {"PK\x03\x04\x14\0", "a zip file (numpy's .npz?), not an IDX file"},
        {"P5\n28 28\n255\n", "a PGM image, not an IDX file"},
    };
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        write_file(p = tmp_path("foreign.idx"), foreign[i].bytes, 8);
        expect_fail(p, DDL_ECORRUPT, foreign[i].says);
    }
    write_gz(p = tmp_path("foreign.idx.gz"), foreign[0].bytes, 8); /* also inside gzip */
    expect_fail(p, DDL_ECORRUPT, "a PNG image, not an IDX file");
    size_t n = make_idx(buf, 0x803, 3, d3, 0);
    write_file(p = tmp_path("short-magic.idx"), buf, 3);
    expect_fail(p, DDL_ECORRUPT, "truncated header: expected 4 bytes of magic, found 3");
    write_file(p = tmp_path("short-dims.idx"), buf, n - 2);
    expect_fail(p, DDL_ECORRUPT, "truncated header: expected 16 bytes (magic and 3 dims), found 14");
    write_gz(p = tmp_path("short-dims.idx.gz"), buf, n - 5);
#ifdef DDL_WITH_ZLIB
    expect_fail(p, DDL_ECORRUPT, "truncated header: expected 16 bytes (magic and 3 dims), found 11");
#endif

    n = make_idx(buf, 0x01000803, 3, d3, 24);
    write_file(p = tmp_path("magic-hi.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "bad magic 0x01000803, expected 0x00000803 (unsigned bytes, 3 dims)");
    n = make_idx(buf, 0x805, 3, d3, 24);
    write_file(p = tmp_path("magic-5dims.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "bad magic 0x00000805: 5 dims, expected 0x00000801 to 0x00000804");
    n = make_idx(buf, 0x800, 0, d3, 0);
    write_file(p = tmp_path("magic-0dims.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "bad magic 0x00000800: 0 dims");
    write_file(p = tmp_path("text.idx"), "hello, world\n", 13);
    expect_fail(p, DDL_ECORRUPT, "bad magic 0x68656c6c");

    n = make_idx(buf, 0xd03, 3, d3, 24); /* 0x0d: float, not unsigned bytes */
    write_file(p = tmp_path("float.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "bad magic 0x00000d03, expected 0x00000803 (unsigned bytes, 3 dims)");
    n = make_idx(buf, 0x901, 1, d3, 2);
    write_file(p = tmp_path("sbyte.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "bad magic 0x00000901, expected 0x00000801 (unsigned bytes, 1 dim)");

    static const uint32_t zero[3] = {2, 0, 4};
    n = make_idx(buf, 0x803, 3, zero, 0);
    write_file(p = tmp_path("zero-dim.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "dimension 2 of 3 is 0, expected at least 1");

    static const uint32_t huge[3] = {60000, 65536, 65536}, max4[4] = {~0u, ~0u, ~0u, ~0u};
    static const uint32_t just[2] = {65536, 32768}; /* 2^31 bytes: one over the limit */
    n = make_idx(buf, 0x803, 3, huge, 16);
    write_file(p = tmp_path("huge.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "data too large: dims 60000 x 65536 x 65536 make 257698037760000 bytes, "
                                 "expected at most 2147483647");
    n = make_idx(buf, 0x804, 4, max4, 16);
    write_file(p = tmp_path("max4.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "data too large: dims 4294967295 x 4294967295 x 4294967295 x 4294967295");
    n = make_idx(buf, 0x802, 2, just, 16);
    write_file(p = tmp_path("just-over.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "make 2147483648 bytes, expected at most 2147483647");
}

/* ---- bad data length ---- */

static void test_bad_length(void)
{
    static const uint32_t d3[3] = {2, 3, 4};
    unsigned char buf[256];
    const char *p;
    size_t n = make_idx(buf, 0x803, 3, d3, 24);

    write_file(p = tmp_path("short-data.idx"), buf, n - 4);
    expect_fail(p, DDL_ECORRUPT, "truncated: expected 24 bytes of data, found 20");
    write_file(p = tmp_path("no-data.idx"), buf, 16);
    expect_fail(p, DDL_ECORRUPT, "truncated: expected 24 bytes of data, found 0");
    n = make_idx(buf, 0x803, 3, d3, 27);
    write_file(p = tmp_path("trailing.idx"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "trailing bytes: expected 24 bytes of data, found 27 (3 extra)");
#ifdef DDL_WITH_ZLIB
    n = make_idx(buf, 0x803, 3, d3, 24);
    write_gz(p = tmp_path("short-data.idx.gz"), buf, n - 4);
    expect_fail(p, DDL_ECORRUPT, "truncated: expected 24 bytes of data, found 20");
    n = make_idx(buf, 0x803, 3, d3, 27);
    write_gz(p = tmp_path("trailing.idx.gz"), buf, n);
    expect_fail(p, DDL_ECORRUPT, "trailing bytes: expected 24 bytes of data, found 3 extra after them");
#endif
}

/* ---- damaged gzip streams ---- */

#ifdef DDL_WITH_ZLIB
static void test_bad_gzip(void)
{
    static const uint32_t dims[3] = {100, 28, 28};
    static unsigned char buf[16 + 78400], gz[200000];
    size_t n = make_idx(buf, 0x803, 3, dims, 0);
    uint64_t x = 1;
    for (size_t i = 0; i < 78400; i++) { /* compressible but varied, like images */
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        buf[n + i] = (unsigned char)((i % 28 < 14) ? (x >> 60) : (x >> 56));
    }
    n += 78400;
    const char *good = tmp_path("gzsrc.idx.gz"), *p;
    write_gz(good, buf, n);
    size_t gn = read_file(good, gz, sizeof gz);
    CHECK(gn > 1000 && gn < sizeof gz);

    unsigned char bad[200000];
    memcpy(bad, gz, gn);
    bad[gn / 2] ^= 0x10; /* a flipped bit in the middle of the deflate data */
    write_file(p = tmp_path("flipped.idx.gz"), bad, gn);
    expect_fail(p, DDL_ECORRUPT, "gzip data corrupt: ");
    expect_fail(p, DDL_ECORRUPT, "expected a valid gzip stream");

    memcpy(bad, gz, gn);
    bad[gn - 6] ^= 0xff; /* the CRC-32 in the trailer */
    write_file(p = tmp_path("badcrc.idx.gz"), bad, gn);
    expect_fail(p, DDL_ECORRUPT, "gzip data corrupt: incorrect data check, expected a valid gzip stream");

    memcpy(bad, gz, gn);
    bad[gn - 2] ^= 0x01; /* the length in the trailer */
    write_file(p = tmp_path("badlen.idx.gz"), bad, gn);
    expect_fail(p, DDL_ECORRUPT, "incorrect length check");

    write_file(p = tmp_path("cut.idx.gz"), gz, gn / 2); /* the stream stops in the middle */
    expect_fail(p, DDL_ECORRUPT, "truncated: expected 78400 bytes of data, found ");
    expect_fail(p, DDL_ECORRUPT, "(gzip stream ends early)");
    write_file(p = tmp_path("cut-trailer.idx.gz"), gz, gn - 3); /* all data, trailer cut */
    expect_fail(p, DDL_ECORRUPT, "gzip stream ends early: expected its trailer (CRC-32 and length) after "
                                 "the 78400 bytes of data, found the end of the file");

    write_file(p = tmp_path("gz-magic-only.idx.gz"), gz, 2);
    expect_fail(p, DDL_ECORRUPT, "truncated header: expected 4 bytes of magic, found 0");
}
#endif

/* ---- files that cannot be read ---- */

static void test_unreadable(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/does-not-exist.idx", tmpdir);
    expect_fail(p, DDL_EIO, "cannot open: No such file or directory");
    expect_fail(tmpdir, DDL_EIO, "is a directory");

    char err[DDL_ERR_BYTES];
    uint8_t *data;
    int nd, dims[4];
    CHECK(ddl_idx_load(NULL, NULL, &data, &nd, dims, err, sizeof err) == DDL_EINVAL);
    CHECK(ddl_idx_load(p, NULL, NULL, &nd, dims, err, sizeof err) == DDL_EINVAL);
    CHECK(ddl_idx_load(p, NULL, &data, &nd, dims, NULL, 0) == DDL_EIO); /* no err buffer is fine */

    static const uint32_t d3[3] = {2, 3, 4};
    unsigned char buf[64];
    size_t n = make_idx(buf, 0x803, 3, d3, 24);
    const char *q = tmp_path("for-failing-alloc.idx");
    write_file(q, buf, n);
    data = (uint8_t *)1;
    int rc = ddl_idx_load(q, &failing, &data, &nd, dims, err, sizeof err);
    CHECK(rc == DDL_ENOMEM && data == NULL && strstr(err, q) && strstr(err, "cannot allocate 24 bytes"));
}

/* ---- MNIST-layout data sets ---- */

/* write_split: SPLIT-images-idx3-ubyte (n_img of 2 x 3, gzip if gz) and SPLIT-labels-idx1-ubyte
 * (n_lab labels i % 10, the last one bad_label when >= 0). */
static void write_split(const char *split, int n_img, int n_lab, int bad_label, int gz)
{
    static unsigned char buf[4096];
    char name[128];
    uint32_t di[3] = {(uint32_t)n_img, 2, 3}, dl[1] = {(uint32_t)n_lab};
    size_t n = make_idx(buf, 0x803, 3, di, (size_t)n_img * 6);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", split, gz ? ".gz" : "");
    if (gz)
        write_gz(tmp_path(name), buf, n);
    else
        write_file(tmp_path(name), buf, n);
    n = make_idx(buf, 0x801, 1, dl, 0);
    for (int i = 0; i < n_lab; i++)
        buf[n++] = (unsigned char)(i % 10);
    if (bad_label >= 0)
        buf[n - 1] = (unsigned char)bad_label;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
    write_file(tmp_path(name), buf, n);
}

/* expect_mnist_fail: loading split fails with code and a message holding both phrases. */
static void expect_mnist_fail(const char *split, int code, const char *phrase1, const char *phrase2)
{
    char err[DDL_ERR_BYTES] = "";
    ddl_dataset d;
    memset(&d, 0xab, sizeof d);
    int rc = ddl_dataset_load_mnist(tmpdir, split, &counting, &d, err, sizeof err);
    int ok = rc == code && d.owned == NULL && d.n == 0 && strstr(err, phrase1) && strstr(err, phrase2);
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "  %s: rc %d (want %d), err \"%s\"\n", split, rc, code, err);
    CHECK(live_allocs == 0);
}

static void test_mnist(void)
{
    int gz = 0;
#ifdef DDL_WITH_ZLIB
    gz = 1;
#endif
    write_split("good", 12, 12, -1, gz);
    char err[DDL_ERR_BYTES] = "";
    ddl_dataset d;
    int rc = ddl_dataset_load_mnist(tmpdir, "good", &counting, &d, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc == DDL_OK) {
        CHECK(d.n == 12 && d.c == 1 && d.h == 2 && d.w == 3 && d.th == 1 && d.tw == 1 && d.n_classes == 10);
        CHECK(d.images[0] == 3 && d.images[71] == (uint8_t)(71 * 7 + 3));
        CHECK(d.targets[0] == 0 && d.targets[11] == 1);
        CHECK(d.alloc == &counting && live_allocs == 1);
        float mean, std;
        double s = 0, s2 = 0;
        for (int i = 0; i < 72; i++)
            s += d.images[i] / 255.0, s2 += (d.images[i] / 255.0) * (d.images[i] / 255.0);
        ddl_dataset_stats(&d, &mean, &std);
        CHECK_NEAR(mean, s / 72, 1e-6);
        CHECK_NEAR(std, sqrt(s2 / 72 - (s / 72) * (s / 72)), 1e-6);
    }
    ddl_dataset_free(&d);
    CHECK(live_allocs == 0 && d.owned == NULL && d.images == NULL);
    ddl_dataset_free(&d); /* twice, and on a zeroed struct: fine */

    ddl_dataset flat = {0};
    unsigned char px[4] = {0, 255, 0, 255};
    flat.n = 1, flat.c = 1, flat.h = 2, flat.w = 2, flat.images = px;
    float mean = -1, std = -1;
    ddl_dataset_stats(&flat, &mean, &std);
    CHECK_NEAR(mean, 0.5, 1e-7);
    CHECK_NEAR(std, 0.5, 1e-7);
    flat.n = 0;
    ddl_dataset_stats(&flat, &mean, &std);
    CHECK(mean == 0 && std == 0);

    char ipath[300], lpath[300];
    snprintf(ipath, sizeof ipath, "%s/count-images-idx3-ubyte", tmpdir);
    snprintf(lpath, sizeof lpath, "%s/count-labels-idx1-ubyte", tmpdir);
    write_split("count", 12, 11, -1, 0);
    expect_mnist_fail("count", DDL_ECORRUPT, lpath, "11 labels, expected 12, the image count of");
    expect_mnist_fail("count", DDL_ECORRUPT, ipath, "11 labels");
    write_split("label", 12, 12, 12, gz);
    snprintf(lpath, sizeof lpath, "%s/label-labels-idx1-ubyte", tmpdir);
    expect_mnist_fail("label", DDL_ECORRUPT, lpath, "label 12 at sample 11, expected 0 to 9");
    snprintf(ipath, sizeof ipath, "%s/none-images-idx3-ubyte:", tmpdir);
    expect_mnist_fail("none", DDL_EIO, ipath, "No such file or directory");

    /* images and labels swapped: the magic says how many dims were expected */
    char a[300], b[300];
    write_split("swap", 4, 4, -1, 0);
    snprintf(a, sizeof a, "%s/swap-images-idx3-ubyte", tmpdir);
    snprintf(b, sizeof b, "%s/swap-labels-idx1-ubyte", tmpdir);
    char c[300];
    snprintf(c, sizeof c, "%s/swap-tmp", tmpdir);
    CHECK(rename(a, c) == 0 && rename(b, a) == 0 && rename(c, b) == 0);
    expect_mnist_fail("swap", DDL_ECORRUPT, a, "bad magic 0x00000801, expected 0x00000803 (unsigned bytes, 3 dims)");

    /* a short images file is reported before labels are looked at */
    write_split("short", 4, 4, -1, 0);
    snprintf(a, sizeof a, "%s/short-images-idx3-ubyte", tmpdir);
    CHECK(truncate(a, 16 + 4 * 6 - 1) == 0);
    expect_mnist_fail("short", DDL_ECORRUPT, a, "truncated: expected 24 bytes of data, found 23");

    rc = ddl_dataset_load_mnist(tmpdir, "good", &failing, &d, err, sizeof err);
    CHECK(rc == DDL_ENOMEM && strstr(err, "cannot allocate") && d.owned == NULL);
    CHECK(ddl_dataset_load_mnist(NULL, "good", NULL, &d, err, sizeof err) == DDL_EINVAL);
    CHECK(ddl_dataset_load_mnist(tmpdir, "", NULL, &d, err, sizeof err) == DDL_EINVAL);
}

/* ---- files that claim more than they hold ---- */

static void test_huge_claims(void)
{
    /* 0x7fff x 256 x 256: 2 GiB - 64 KiB of data claimed, allowed by the header checks */
    static const uint32_t d3[3] = {0x7fff, 256, 256};
    static unsigned char buf[64];
    size_t n = make_idx(buf, 0x803, 3, d3, 0);
    const char *p;
    write_file(p = tmp_path("huge-claim.idx"), buf, n); /* raw: the file size tells */
    largest_alloc = 0;
    expect_fail(p, DDL_ECORRUPT, "truncated: expected 2147418112 bytes of data, found 0");
    CHECK(largest_alloc < 4096);
#ifdef DDL_WITH_ZLIB
    write_gz(p = tmp_path("huge-claim.idx.gz"), buf, n); /* about 36 bytes of gzip */
    largest_alloc = 0;
    expect_fail(p, DDL_ECORRUPT, "data too large for the file: the dims make 2147418112 bytes of data, but a gzip");
    CHECK(largest_alloc < 4096);
    /* in an MNIST split, before the labels are read or anything allocated */
    char name[128];
    snprintf(name, sizeof name, "%s/huge-images-idx3-ubyte.gz", tmpdir);
    write_gz(tmp_path("huge-images-idx3-ubyte.gz"), buf, n);
    largest_alloc = 0;
    expect_mnist_fail("huge", DDL_ECORRUPT, name, "(deflate expands at most 1032 times)");
    CHECK(largest_alloc < 4096);

    /* but a file that does compress about 1000 times still loads: 4 MiB of zeros */
    static unsigned char zeros[16 + (4 << 20)];
    static const uint32_t dz[3] = {64, 256, 256};
    n = make_idx(zeros, 0x803, 3, dz, 0);
    memset(zeros + n, 0, (size_t)4 << 20);
    p = tmp_path("zeros.idx.gz");
    gzFile g = gzopen(p, "wb9");
    CHECK(g && gzwrite(g, zeros, (unsigned)(n + (4 << 20))) == (int)(n + (4 << 20)) && gzclose(g) == Z_OK);
    struct stat st;
    CHECK(stat(p, &st) == 0 && st.st_size * 900 < (4 << 20));
    char err[DDL_ERR_BYTES] = "";
    uint8_t *data = NULL;
    int nd = 0, dims[4];
    CHECK(ddl_idx_load(p, &counting, &data, &nd, dims, err, sizeof err) == DDL_OK && nd == 3 && dims[0] == 64);
    if (data)
        CHECK(data[0] == 0 && data[(4 << 20) - 1] == 0);
    count_free(NULL, data);
#endif
    /* a FIFO: refused at once, not waited on for a writer (alarm: a hang fails) */
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/fifo.idx", tmpdir);
    CHECK(mkfifo(fifo, 0600) == 0);
    alarm(20);
    expect_fail(fifo, DDL_EIO, "cannot read: not a regular file, expected an IDX file");
    alarm(0);
    unlink(fifo);
}

/* ---- the real Fashion-MNIST, when installed ---- */

static void test_fashion_mnist(void)
{
    if (access(FMNIST "/train-images-idx3-ubyte.gz", R_OK) != 0 && access(FMNIST "/train-images-idx3-ubyte", R_OK)) {
        printf("skipping Fashion-MNIST: not in " FMNIST "\n");
        return;
    }
    char err[DDL_ERR_BYTES] = "";
    ddl_dataset train, test;
    int rc = ddl_dataset_load_mnist(FMNIST, "train", NULL, &train, err, sizeof err);
#ifndef DDL_WITH_ZLIB
    if (access(FMNIST "/train-images-idx3-ubyte", R_OK) != 0) {
        CHECK(rc == DDL_ENOTSUP && strstr(err, FMNIST "/train-images-idx3-ubyte.gz: gzip file") &&
              strstr(err, "rebuild with zlib"));
        return;
    }
#endif
    CHECK(rc == DDL_OK);
    if (rc) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    rc = ddl_dataset_load_mnist(FMNIST, "t10k", NULL, &test, err, sizeof err);
    CHECK(rc == DDL_OK);
    CHECK(train.n == 60000 && train.c == 1 && train.h == 28 && train.w == 28 && train.n_classes == 10);
    CHECK(test.n == 10000 && test.c == 1 && test.h == 28 && test.w == 28);
    float mean, std;
    ddl_dataset_stats(&train, &mean, &std);
    CHECK_NEAR(mean, 0.2860, 1e-3);
    CHECK_NEAR(std, 0.3530, 1e-3);
    int hist[10] = {0}, thist[10] = {0};
    for (int i = 0; i < train.n; i++)
        hist[train.targets[i]]++;
    for (int i = 0; i < test.n; i++)
        thist[test.targets[i]]++;
    for (int k = 0; k < 10; k++)
        CHECK(hist[k] == 6000 && thist[k] == 1000);
    printf("fashion-mnist: train %d, t10k %d, mean %.4f, std %.4f\n", train.n, test.n, mean, std);
    ddl_dataset_free(&train);
    ddl_dataset_free(&test);
}

int main(void)
{
    strcpy(tmpdir, "/tmp/ddl-test-idx-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_good();
    test_bad_header();
    test_bad_length();
#ifdef DDL_WITH_ZLIB
    test_bad_gzip();
#endif
    test_unreadable();
    test_mnist();
    test_huge_claims();
    test_fashion_mnist();
    for (int i = 0; i < n_made; i++)
        unlink(made[i]);
    CHECK(rmdir(tmpdir) == 0);
    return TEST_END();
}
