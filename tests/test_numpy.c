/* test_numpy.c - numpy arrays as numpy writes them (tests/numpy/make_arrays.py, run with Debian's
 * python3-numpy, which make's install step installs): .npy of every dtype ddl reads, .npz stored
 * and deflated, in the three image layouts, with labels and masks; and every way such a file or
 * array can be wrong, each refused with a message naming the file (or array) and what was
 * found. Run from the repository's root (tests/run.sh does). */
#include "ddl.h"
#include "tests/check.h"
#include "tests/pydata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[512];

/* refused: loading spec (as a data set with targets, or alone) fails with code and a message
 * holding each of the words. */
static void refused(const char *images, const char *targets, int code, const char *w1, const char *w2)
{
    ddl_dataset d;
    ddl_npy a;
    err[0] = 0;
    int rc = targets ? ddl_dataset_load_numpy(images, targets, NULL, &d, err, sizeof err)
                     : ddl_npy_load(images, NULL, &a, err, sizeof err);
    CHECK(rc == code);
    CHECK(w1 == NULL || strstr(err, w1) != NULL);
    CHECK(w2 == NULL || strstr(err, w2) != NULL);
    if (rc != code || (w1 && !strstr(err, w1)) || (w2 && !strstr(err, w2)))
        fprintf(stderr, "  %s: rc %d, err: %s\n", images, rc, err);
    if (targets && rc == DDL_OK)
        ddl_dataset_free(&d);
    else if (!targets && rc == DDL_OK)
        ddl_npy_free(&a, NULL);
    if (targets && rc != DDL_OK)
        CHECK(d.images == NULL && d.n == 0);
}

/* same_values: d holds normalised_f32.npy's floats, (i % 256 - 128) / 64 in (N, C, H, W). */
static void same_values(const ddl_dataset *d, int want)
{
    int same = d->fimages != NULL && d->images == NULL;
    for (int i = 0; same && i < 5 * 3 * 4 * 6; i++)
        same &= d->fimages[i] == ((float)(i % 256) - 128.0f) / 64.0f;
    CHECK(same == want);
}

/* ---- images in three layouts give the same pixels ---- */

static void layouts(void)
{
    const char *names[] = {"nchw_u8.npy", "nhwc_u8.npy", "nchw_f32_unit.npy", "nhwc_f64_255.npy"};
    for (int k = 0; k < 4; k++) {
        ddl_dataset d;
        int rc = ddl_dataset_load_numpy(at(names[k]), at("labels_i64.npy"), NULL, &d, err, sizeof err);
        CHECK(rc == DDL_OK);
        if (rc != DDL_OK) {
            fprintf(stderr, "  %s: %s\n", names[k], err);
            continue;
        }
        CHECK(d.n == 5 && d.c == 3 && d.h == 4 && d.w == 6 && d.th == 1 && d.tw == 1 && d.n_classes == 10);
        /* bytes stay bytes; floats stay floats, on the scale of a byte / 255 (0..255 floats
         * divided by 255, 0..1 floats as they are) */
        CHECK((k < 2) == (d.images != NULL) && (k < 2) == (d.fimages == NULL));
        int same = 1;
        for (int i = 0; i < 5 * 3 * 4 * 6; i++)
            same &= d.images ? d.images[i] == i % 256 : fabsf(d.fimages[i] - (float)(i % 256) / 255.0f) < 1e-6f;
        CHECK(same);
        CHECK(d.targets[0] == 0 && d.targets[1] == 3 && d.targets[3] == 9 && d.targets[4] == 2);
        ddl_dataset_free(&d);
    }
    ddl_dataset d;
    CHECK(ddl_dataset_load_numpy(at("nhw_u8.npy"), at("labels_u8.npy"), NULL, &d, err, sizeof err) == DDL_OK);
    CHECK(d.c == 1 && d.h == 4 && d.w == 6 && d.n_classes == 5 && d.images[6 * 4 + 1] == (3 * 4 * 6 + 1) % 256);
    ddl_dataset_free(&d);
    /* pre-normalised floats (here -2 to 1.98) are kept exactly as they are */
    CHECK(ddl_dataset_load_numpy(at("normalised_f32.npy"), at("labels_i64.npy"), NULL, &d, err, sizeof err) ==
          DDL_OK);
    same_values(&d, 1);
    ddl_dataset_free(&d);
    /* past 256 classes the labels are uint16 (targets16) */
    CHECK(ddl_dataset_load_numpy(at("nchw_u8.npy"), at("labels_i32_big.npy"), NULL, &d, err, sizeof err) == DDL_OK);
    CHECK(d.n_classes == 1000 && d.targets == NULL && d.targets16 && d.targets16[3] == 999 && d.targets16[1] == 3);
    ddl_dataset_free(&d);
}

/* ---- masks: floats thresholded at 0.5 ---- */

static void masks(void)
{
    ddl_dataset d;
    ddl_npy want;
    int rc = ddl_dataset_load_numpy(at("nhwc_u8.npy"), at("masks_f32.npy"), NULL, &d, err, sizeof err);
    CHECK(rc == DDL_OK);
    CHECK(ddl_npy_load(at("masks_expected.npy"), NULL, &want, err, sizeof err) == DDL_OK);
    if (rc == DDL_OK && want.data) {
        CHECK(d.th == 4 && d.tw == 6 && d.n_classes == 2);
        CHECK(memcmp(d.targets, want.data, 5 * 4 * 6) == 0);
    }
    ddl_dataset_free(&d);
    ddl_npy_free(&want, NULL);
}

/* ---- .npz, stored and deflated, equal the .npy ---- */

static void npz(void)
{
    ddl_npy x, s, c, one;
    CHECK(ddl_npy_load(at("x.npy"), NULL, &x, err, sizeof err) == DDL_OK);
    CHECK(x.dtype == DDL_NPY_UINT8 && x.n_dims == 3 && x.shape[0] == 300 && x.shape[1] == 28 && x.count == 300 * 784);
    char spec[300];
    snprintf(spec, sizeof spec, "%s:x_train", at("xy.npz"));
    CHECK(ddl_npy_load(spec, NULL, &s, err, sizeof err) == DDL_OK);
    snprintf(spec, sizeof spec, "%s:x_train", at("xy_compressed.npz"));
    int rc = ddl_npy_load(spec, NULL, &c, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc)
        fprintf(stderr, "  %s\n", err);
    CHECK(ddl_npy_load(at("one.npz"), NULL, &one, err, sizeof err) == DDL_OK);
    CHECK(s.data && memcmp(s.data, x.data, (size_t)x.count) == 0);
    CHECK(c.data && memcmp(c.data, x.data, (size_t)x.count) == 0);
    CHECK(one.data && memcmp(one.data, x.data, (size_t)x.count) == 0);
    ddl_npy_free(&x, NULL);
    ddl_npy_free(&s, NULL);
    ddl_npy_free(&c, NULL);
    ddl_npy_free(&one, NULL);

    /* zip64 fields in the central directory: the local header's offset from its extra field */
    snprintf(spec, sizeof spec, "%s:x", at("zip64.npz"));
    rc = ddl_npy_load(spec, NULL, &one, err, sizeof err);
    CHECK(rc == DDL_OK && one.count == 784 && ((const uint8_t *)one.data)[300] == 44);
    if (rc)
        fprintf(stderr, "  %s\n", err);
    ddl_npy_free(&one, NULL);

    char ys[300];
    ddl_dataset d;
    snprintf(spec, sizeof spec, "%s:x_train", at("xy_compressed.npz"));
    snprintf(ys, sizeof ys, "%s:y_train", at("xy_compressed.npz"));
    CHECK(ddl_dataset_load_numpy(spec, ys, NULL, &d, err, sizeof err) == DDL_OK);
    CHECK(d.n == 300 && d.c == 1 && d.h == 28 && d.w == 28 && d.n_classes <= 10);
    ddl_dataset_free(&d);
}

/* ---- a validation split: chosen by the seed, in order, nothing lost ---- */

static void split(void)
{
    char xs[300], ys[300];
    ddl_dataset d, tr, va, tr2, va2, tr3, va3;
    snprintf(xs, sizeof xs, "%s:x_train", at("xy.npz"));
    snprintf(ys, sizeof ys, "%s:y_train", at("xy.npz"));
    CHECK(ddl_dataset_load_numpy(xs, ys, NULL, &d, err, sizeof err) == DDL_OK);
    CHECK(ddl_dataset_split(&d, 0.1, 5, NULL, &tr, &va, err, sizeof err) == DDL_OK);
    CHECK(va.n == 30 && tr.n == 270 && va.h == 28 && tr.n_classes == d.n_classes);
    CHECK(ddl_dataset_split(&d, 0.1, 5, NULL, &tr2, &va2, err, sizeof err) == DDL_OK);
    CHECK(memcmp(va.images, va2.images, 30 * 784) == 0 && memcmp(tr.targets, tr2.targets, 270) == 0);
    CHECK(ddl_dataset_split(&d, 0.1, 6, NULL, &tr3, &va3, err, sizeof err) == DDL_OK);
    CHECK(memcmp(va.images, va3.images, 30 * 784) != 0); /* another seed, other samples */
    /* every sample of d is in exactly one part, and each part keeps d's order */
    int i_tr = 0, i_va = 0, whole = 1;
    for (int i = 0; i < d.n; i++) {
        const uint8_t *x = d.images + (size_t)i * 784;
        if (i_va < va.n && memcmp(x, va.images + (size_t)i_va * 784, 784) == 0 && d.targets[i] == va.targets[i_va])
            i_va++;
        else if (i_tr < tr.n && memcmp(x, tr.images + (size_t)i_tr * 784, 784) == 0 && d.targets[i] == tr.targets[i_tr])
            i_tr++;
        else
            whole = 0;
    }
    CHECK(whole && i_tr == 270 && i_va == 30);
    ddl_dataset e1, e2;
    CHECK(ddl_dataset_split(&d, 1.0, 5, NULL, &e1, &e2, err, sizeof err) == DDL_EINVAL && e1.n == 0 && e2.n == 0);
    CHECK(ddl_dataset_split(&d, 0.001, 5, NULL, &e1, &e2, err, sizeof err) == DDL_EINVAL &&
          strstr(err, "0.001 of 300 samples is 0"));
    ddl_dataset_free(&tr), ddl_dataset_free(&va), ddl_dataset_free(&tr2), ddl_dataset_free(&va2);
    ddl_dataset_free(&tr3), ddl_dataset_free(&va3), ddl_dataset_free(&d);
}

/* ---- what is refused, and how it is said ---- */

static void refusals(void)
{
    char spec[300];
    refused(at("xy.npz"), NULL, DDL_EINVAL, "holds 2 arrays (x_train, y_train)", "name one, as /tmp");
    snprintf(spec, sizeof spec, "%s:x_test", at("xy.npz"));
    refused(spec, NULL, DDL_EINVAL, "no array 'x_test'", "x_train, y_train");
    snprintf(spec, sizeof spec, "%s:x_train", at("flipped.npz"));
    refused(spec, NULL, DDL_ECORRUPT, "flipped.npz:x_train.npy", "damaged");
    snprintf(spec, sizeof spec, "%s:x_train", at("cut.npz"));
    refused(spec, NULL, DDL_ECORRUPT, "cut.npz", "not a zip file");
    /* a zip64 offset of 2^64 - 8: past the end, not 8 bytes before the file's start */
    snprintf(spec, sizeof spec, "%s:x", at("zip64_wrap.npz"));
    refused(spec, NULL, DDL_ECORRUPT, "local header at 18446744073709551608 is past the end of the file", NULL);
    refused(at("short.npy"), NULL, DDL_ECORRUPT, "needs 235200 bytes of data, found 235190", "short.npy");
    refused(at("not_npy.npy"), NULL, DDL_ECORRUPT, "not a .npy array", NULL);
    refused(at("fortran.npy"), NULL, DDL_ENOTSUP, "fortran_order is True", NULL);
    refused(at("big_endian.npy"), NULL, DDL_ENOTSUP, "dtype '>f4'", NULL);
    refused(at("complex.npy"), NULL, DDL_ENOTSUP, "dtype '<c8'", NULL);
    refused(at("missing.npy"), NULL, DDL_EIO, "missing.npy: cannot open", NULL);
    refused(pydata_dir, NULL, DDL_EIO, "not a regular file", NULL);

    refused(at("inf_f32.npy"), at("labels_i64.npy"), DDL_EINVAL, "inf_f32.npy: pixel 168 is inf", "finite");
    refused(at("rgba_u8.npy"), at("labels_i64.npy"), DDL_EINVAL, "images of shape (5, 4, 6, 4)", "C 1 or 3");
    refused(at("labels_i64.npy"), at("labels_i64.npy"), DDL_EINVAL, "images of shape (5,)", NULL);
    refused(at("nchw_u8.npy"), at("labels_4.npy"), DDL_EINVAL, "labels_4.npy: targets of shape (4,)", "labels (5,)");
    refused(at("nchw_u8.npy"), at("labels_f32.npy"), DDL_EINVAL, "labels of shape (5,) are float32", NULL);
    refused(at("nchw_u8.npy"), at("labels_i32_huge.npy"), DDL_EINVAL, "label 70000 at index 3", "0 to 1023");
    refused(at("nhwc_u8.npy"), at("masks_wrong.npy"), DDL_EINVAL, "targets of shape (5, 3, 6, 1)", "masks (5, 4, 6)");
    refused(at("labels_u8.npy"), NULL, DDL_OK, NULL, NULL);
}

/* ---- --scenes: U-Net's scenes as .npy files, for tests/test_train.sh ---- */

/* write_npy: a uint8 array (n, h, w) as a version 1.0 .npy file. */
static int write_npy(const char *path, const uint8_t *a, int n, int h, int w)
{
    char head[128];
    int len = snprintf(head, sizeof head, "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, %d), }", n, h, w);
    int total = (10 + len + 1 + 63) / 64 * 64; /* magic, version, length, header, '\n': a multiple of 64 */
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((total - 10) & 255, f), fputc((total - 10) >> 8, f);
    fwrite(head, 1, (size_t)len, f);
    for (int i = 10 + len; i < total - 1; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(a, 1, (size_t)n * h * w, f);
    return fclose(f);
}

/* scenes: build/bin/unet's training and held-out scenes for --seed seed (examples/unet.c's
 * make_data: items of Fashion-MNIST's train and t10k sets, at most 3 a scene) as
 * DIR/{train,test}_{x,y}.npy: images (N, S, S) and masks (N, S, S). */
static int scenes(const char *dir, int n, int n_test, int size, long seed)
{
    uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 0x7363656e65ull; /* unet.c's scene_seed */
    const char *split[2] = {"train", "t10k"}, *name[2] = {"train", "test"};
    char why[DDL_ERR_BYTES], p[600];
    for (int k = 0; k < 2; k++) {
        ddl_dataset items = {0}, sc = {0};
        int rc = ddl_dataset_load_mnist("/usr/share/datasets/fashion-mnist", split[k], NULL, &items, why, sizeof why);
        if (rc == DDL_OK)
            rc = ddl_dataset_make_scenes(&items, k ? n_test : n, size, 3, s + (uint64_t)k, NULL, &sc, why, sizeof why);
        if (rc == DDL_OK) {
            snprintf(p, sizeof p, "%s/%s_x.npy", dir, name[k]);
            rc = write_npy(p, sc.images, sc.n, size, size);
            snprintf(p, sizeof p, "%s/%s_y.npy", dir, name[k]);
            rc = rc || write_npy(p, sc.targets, sc.n, size, size);
        }
        ddl_dataset_free(&items);
        ddl_dataset_free(&sc);
        if (rc != DDL_OK)
            return fprintf(stderr, "test_numpy --scenes: %s\n", rc < 0 ? why : "cannot write"), 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--scenes") == 0)
        return scenes(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atol(argv[6]));
    int made = pydata_make("numpy", "tests/numpy/make_arrays.py");
    CHECK(made); /* the Python modules come with make's install step */
    if (made) {
        layouts();
        masks();
        npz();
        split();
        refusals();
    }
    pydata_remove();
    return TEST_END();
}
