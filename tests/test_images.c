/* test_images.c - image files as data (src/data/decode.c, resize.c, folder.c) against PIL:
 * tests/images/make_images.py (Debian's python3-pil and python3-numpy, which make's install
 * step installs) writes JPEG, PNG (RGB, gray, RGBA, palette), PPM and PGM files and what PIL's
 * open().convert().resize(BILINEAR) makes of them; ddl_image_load must give the same bytes, at
 * sizes down, up and unchanged. Then a folder of three classes (sorted names, labels, mixed
 * formats, a text file and a hidden folder left out, the same bytes on 1 and 2 threads), and
 * damaged, foreign and huge files and decompression bombs (a PNG's deflate stream running on
 * past its rows, a progressive JPEG of many scans) refused with a message naming them (or
 * skipped, counted and named). A CMYK JPEG gives PIL's bytes. Run from the repository's root
 * (tests/run.sh does). */
#include "ddl.h"
#include "tests/check.h"
#include "tests/pydata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512];

static long read_raw(const char *path, uint8_t *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    long got = (long)fread(buf, 1, n, f);
    fclose(f);
    return got;
}

/* ---- every file, mode and size equals PIL's bytes ---- */

static void against_pil(void)
{
    static const char *const names[] = {"src.png", "src.jpg", "src.ppm", "gray.png", "gray.pgm",
                                        "gray.jpg", "rgba.png", "palette.png", "cmyk.jpg"};
    static const int sizes[][2] = {{28, 28}, {64, 48}, {130, 170}, {100, 100}, {7, 3}};
    static uint8_t got[3 * 130 * 170], want[3 * 130 * 170];
    for (size_t f = 0; f < sizeof names / sizeof names[0]; f++)
        for (int c = 1; c <= 3; c += 2)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                int w = sizes[s][0], h = sizes[s][1];
                size_t n = (size_t)c * (size_t)w * (size_t)h;
                char ref[128];
                snprintf(ref, sizeof ref, "%s.%s.%dx%d.raw", names[f], c == 1 ? "L" : "RGB", w, h);
                int rc = ddl_image_load(at(names[f]), c, h, w, NULL, got, err, sizeof err);
                long have = read_raw(at(ref), want, sizeof want);
                size_t diff = 0;
                for (size_t i = 0; i < n; i++)
                    diff += got[i] != want[i];
                CHECK(rc == DDL_OK && have == (long)n && diff == 0);
                if (rc != DDL_OK || have != (long)n || diff)
                    fprintf(stderr, "  %s: rc %d (%s), %zu of %zu bytes differ from PIL's\n", ref, rc,
                            rc ? err : "", diff, n);
            }
}

/* ---- a folder of classes ---- */

/* what a folder load logs: its lines, one after the other */
static char logged[4096];

static void log_to(void *ud, int level, const char *msg)
{
    size_t used = strlen(logged);
    CHECK(ud == logged && level == DDL_LOG_WARN);
    snprintf(logged + used, sizeof logged - used, "%s\n", msg);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* skipped_files: skip_bad names each file it leaves out (fruits/ holds one damaged file,
 * b_kiwi_1a.jpg), the first 10 of them, then counts the rest. */
static void skipped_files(ddl_folder_config *cfg)
{
    ddl_dataset d;
    int skipped = -1;
    cfg->log = log_to, cfg->log_ud = logged;
    logged[0] = '\0';
    int rc = ddl_dataset_load_folder(at("fruits"), cfg, NULL, &d, &skipped, err, sizeof err);
    CHECK(rc == DDL_OK && skipped == 1 && lines(logged) == 1);
    CHECK(strstr(logged, "left out ") == logged && strstr(logged, "fruits/b_kiwi/b_kiwi_1a.jpg: a damaged JPEG file"));
    ddl_dataset_free(&d);
    char cmd[800];
    for (int i = 0; i < 11; i++) { /* 12 in all */
        snprintf(cmd, sizeof cmd, "cp %s %s/fruits/a_apple/bad_%02d.png", at("text.png"), pydata_dir, i);
        CHECK(system(cmd) == 0);
    }
    logged[0] = '\0';
    rc = ddl_dataset_load_folder(at("fruits"), cfg, NULL, &d, &skipped, err, sizeof err);
    CHECK(rc == DDL_OK && skipped == 12 && d.n == 9 && lines(logged) == 11);
    CHECK(strstr(logged, "a_apple/bad_00.png: not a JPEG") && strstr(logged, "a_apple/bad_09.png: not a JPEG") &&
          !strstr(logged, "bad_10.png") && strstr(logged, "\nleft out 2 more images that could not be decoded\n"));
    if (lines(logged) != 11)
        fprintf(stderr, "  logged:\n%s", logged);
    ddl_dataset_free(&d);
    snprintf(cmd, sizeof cmd, "rm %s/fruits/a_apple/bad_*.png", pydata_dir);
    CHECK(system(cmd) == 0);
    cfg->log = NULL, cfg->log_ud = NULL;
}

static void folder(void)
{
    ddl_folder_config cfg = {.channels = 3, .height = 32, .width = 40};
    ddl_dataset d, d2;
    int skipped = -1;
    ddl_set_threads(1);
    int rc = ddl_dataset_load_folder(at("fruits"), &cfg, NULL, &d, &skipped, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc != DDL_OK) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK(d.n == 9 && d.n_classes == 3 && d.c == 3 && d.h == 32 && d.w == 40 && skipped == 0);
    CHECK(d.class_names && strcmp(d.class_names[0], "a_apple") == 0 && strcmp(d.class_names[1], "b_kiwi") == 0 &&
          strcmp(d.class_names[2], "c_guava") == 0);
    static const uint8_t labels[9] = {0, 0, 0, 0, 1, 1, 1, 2, 2};
    CHECK(memcmp(d.targets, labels, 9) == 0);
    /* sample 4 is b_kiwi's first file in sorted order: b_kiwi_0.jpg */
    static uint8_t one[3 * 32 * 40];
    char p[300];
    snprintf(p, sizeof p, "%s/fruits/b_kiwi/b_kiwi_0.jpg", pydata_dir);
    CHECK(ddl_image_load(p, 3, 32, 40, NULL, one, err, sizeof err) == DDL_OK);
    CHECK(memcmp(d.images + 4 * sizeof one, one, sizeof one) == 0);
    ddl_set_threads(2);
    CHECK(ddl_dataset_load_folder(at("fruits"), &cfg, NULL, &d2, NULL, err, sizeof err) == DDL_OK);
    CHECK(d2.n == d.n && memcmp(d2.images, d.images, (size_t)d.n * sizeof one) == 0);
    ddl_set_threads(1);
    ddl_dataset_free(&d);
    ddl_dataset_free(&d2);

    /* a damaged file: an error naming it; with skip_bad, left out and counted */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp %s %s/fruits/b_kiwi/b_kiwi_1a.jpg", at("cut.jpg"), pydata_dir);
    CHECK(system(cmd) == 0);
    rc = ddl_dataset_load_folder(at("fruits"), &cfg, NULL, &d, &skipped, err, sizeof err);
    CHECK(rc == DDL_ECORRUPT && strstr(err, "b_kiwi_1a.jpg: a damaged JPEG file") && d.n == 0 && !d.images);
    if (rc != DDL_ECORRUPT)
        fprintf(stderr, "  damaged file in a folder: rc %d: %s\n", rc, err);
    cfg.skip_bad = 1;
    rc = ddl_dataset_load_folder(at("fruits"), &cfg, NULL, &d, &skipped, err, sizeof err);
    CHECK(rc == DDL_OK && d.n == 9 && skipped == 1 && memcmp(d.targets, labels, 9) == 0);
    ddl_dataset_free(&d);
    skipped_files(&cfg);

    /* a FIFO named like an image is passed over, never opened (an open would wait for a writer
     * forever: the alarm turns that into a failure) */
    snprintf(p, sizeof p, "%s/fruits/b_kiwi/b_kiwi_9.png", pydata_dir);
    CHECK(mkfifo(p, 0600) == 0);
    alarm(30);
    cfg.skip_bad = 0;
    snprintf(cmd, sizeof cmd, "rm %s/fruits/b_kiwi/b_kiwi_1a.jpg", pydata_dir);
    CHECK(system(cmd) == 0);
    rc = ddl_dataset_load_folder(at("fruits"), &cfg, NULL, &d, &skipped, err, sizeof err);
    CHECK(rc == DDL_OK && d.n == 9 && skipped == 0);
    ddl_dataset_free(&d);
    rc = ddl_image_load(p, 3, 28, 28, NULL, one, err, sizeof err);
    CHECK(rc == DDL_EIO && strstr(err, "b_kiwi_9.png: not a regular file"));
    alarm(0);
    unlink(p);

    /* an empty class folder is refused, naming it; so is a class that skip_bad left empty */
    snprintf(p, sizeof p, "%s/fruits/d_empty", pydata_dir);
    CHECK(mkdir(p, 0700) == 0);
    rc = ddl_dataset_load_folder(at("fruits"), &cfg, NULL, &d, &skipped, err, sizeof err);
    CHECK(rc == DDL_EINVAL && strstr(err, "fruits/d_empty: a class folder with no image in it") && !d.images);
    snprintf(cmd, sizeof cmd, "cp %s %s/", at("cut.jpg"), p);
    CHECK(system(cmd) == 0);
    cfg.skip_bad = 1;
    rc = ddl_dataset_load_folder(at("fruits"), &cfg, NULL, &d, &skipped, err, sizeof err);
    CHECK(rc == DDL_ECORRUPT && strstr(err, "fruits/d_empty: none of this class's images could be decoded") &&
          !d.images);
    snprintf(cmd, sizeof cmd, "rm -r %s", p);
    CHECK(system(cmd) == 0);

    rc = ddl_dataset_load_folder(at("src.png"), &cfg, NULL, &d, NULL, err, sizeof err);
    CHECK(rc == DDL_EIO && strstr(err, "cannot open the folder"));
    rc = ddl_dataset_load_folder(pydata_dir, &cfg, NULL, &d, NULL, err, sizeof err); /* class folder "fruits", no images */
    CHECK(rc == DDL_EINVAL && strstr(err, "no image in them"));
}

/* ---- bad files ---- */

static void bad(const char *name, int code, const char *words)
{
    static uint8_t out[3 * 28 * 28];
    err[0] = 0;
    int rc = ddl_image_load(at(name), 3, 28, 28, NULL, out, err, sizeof err);
    CHECK(rc == code && strstr(err, name) && strstr(err, words));
    if (rc != code || !strstr(err, words))
        fprintf(stderr, "  %s: rc %d: %s\n", name, rc, err);
}

int main(void)
{
    int made = pydata_make("images", "tests/images/make_images.py");
    CHECK(made); /* the Python modules come with make's install step */
    if (made) {
        against_pil();
        folder();
        bad("cut.jpg", DDL_ECORRUPT, "a damaged JPEG file");
        bad("text.png", DDL_ECORRUPT, "not a JPEG, PNG, PGM or PPM file (it starts 68 65 6c 6c)");
        bad("huge.png", DDL_ECORRUPT, "100000 x 100000 pixels");
        /* bombs: refused from their headers, before the work */
        bad("trail.png", DDL_ECORRUPT, "compressed image data for a 100 x 100 PNG");
        bad("scans.jpg", DDL_ECORRUPT, "a progressive JPEG of more than 64 scans");
        bad("longtext.png", DDL_ECORRUPT, "its tEXt chunk of 1643905027 bytes runs past the end of the file");
        bad("missing.jpg", DDL_EIO, "cannot open");
    }
    pydata_remove();
    return TEST_END();
}
