/* ddl-ckpt.c - look into checkpoints and take models out of ddl:
 *
 *   ddl-ckpt show CKPT            the header, then every tensor with its shape and min/mean/max
 *   ddl-ckpt verify CKPT          exit 0 if the file is intact and its weights finite, else say why
 *   ddl-ckpt export CKPT OUT.npz  numpy .npz with PyTorch's names and layouts (conv1.weight
 *                                 [6,1,5,5], ...), plus input_mean and input_std; a tensor name
 *                                 other than letters, digits, '_' and '.' is refused (exit 1)
 *
 * Options as getopt_long reads them: --help, --version; a bad command or flag exits 2 naming it.
 * A program, not library code: it prints and exits. It reads checkpoints only through ddl.h.
 * The .npz is a zip of stored (uncompressed) .npy files, version 1.0, little-endian float32. */
#include "ddl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

#define USAGE                                                                                  \
    "usage: ddl-ckpt show CKPT\n"                                                              \
    "       ddl-ckpt verify CKPT\n"                                                            \
    "       ddl-ckpt export CKPT OUT.npz\n"                                                    \
    "  show      the header, then every tensor with its shape and min/mean/max\n"              \
    "  verify    exit 0 if the file is intact and its weights finite, else say why (exit 1)\n" \
    "  export    numpy .npz with PyTorch's names and layouts, plus input_mean and input_std\n" \
    "  -h, --help    this text\n"                                                              \
    "  --version     ddl-ckpt's version\n"

static ddl_checkpoint *open_or_die(const char *path)
{
    char err[DDL_ERR_BYTES];
    ddl_checkpoint *ck = NULL;
    int rc = ddl_checkpoint_open(path, NULL, &ck, err, sizeof err);
    if (rc != DDL_OK) {
        fprintf(stderr, "ddl-ckpt: %s (%s)\n", err, ddl_strerror(rc));
        exit(1);
    }
    return ck;
}

static const char *optim_name(int kind) { return kind == DDL_OPTIM_ADAM ? "adam" : "sgd"; }

/* shape_text: "[6,1,5,5]" */
static void shape_text(char *s, size_t n, const ddl_param_info *t)
{
    size_t o = (size_t)snprintf(s, n, "[");
    for (int d = 0; d < t->n_dims && o < n; d++)
        o += (size_t)snprintf(s + o, n - o, "%s%d", d ? "," : "", t->shape[d]);
    if (o < n)
        snprintf(s + o, n - o, "]");
}

/* name_text: name as printable text: bytes outside printable ASCII, backslash and '"' as \xNN, so a
 * crafted name cannot send escape sequences to the terminal. */
static void name_text(char *s, size_t n, const char *name)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && o + 5 < n; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '\\' && *p != '"')
            s[o++] = (char)*p;
        else
            o += (size_t)snprintf(s + o, n - o, "\\x%02x", *p);
    }
    s[o] = '\0';
}

/* ---- show and verify ---- */

static int cmd_show(const char *path)
{
    ddl_checkpoint *ck = open_or_die(path);
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    const ddl_model_config *mc = &in->model_cfg;
    printf("file       %s (%llu bytes, format version %d, %s)\n", path, (unsigned long long)in->file_bytes,
           in->version, in->compressed ? "lz4 where it helps" : "uncompressed");
    char text[4 * 64];
    name_text(text, sizeof text, in->model);
    printf("model      %s, signature %08x, input %dx%dx%d, %d classes, depth %d, width %d, dropout %g\n", text,
           (unsigned)in->signature, mc->in_c, mc->in_h, mc->in_w, mc->n_classes, mc->depth, mc->width,
           (double)mc->dropout);
    printf("progress   step %lld, epoch %d, position %lld of %lld samples\n", (long long)in->step, in->epoch + 1,
           (long long)in->pos, (long long)in->n_train);
    printf("run        world size %d, global batch %d, seed %llu\n", in->world_size, in->batch,
           (unsigned long long)in->seed);
    printf("optimizer  %s lr %g momentum %g weight_decay %g betas %g %g eps %g, %zu floats of state\n",
           optim_name(in->optim.kind), (double)in->optim.lr, (double)in->optim.momentum,
           (double)in->optim.weight_decay, (double)in->optim.beta1, (double)in->optim.beta2, (double)in->optim.eps,
           in->n_optim);
    printf("input      mean %.6f std %.6f\n", (double)in->mean, (double)in->std);
    printf("tensors    %d, %zu parameters\n", in->n_tensors, in->n_params);
    const float *w = ddl_checkpoint_params(ck);
    for (int i = 0; i < in->n_tensors; i++) {
        const ddl_param_info *t = ddl_checkpoint_tensor(ck, i);
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        for (size_t k = 0; k < t->count; k++) {
            double v = w[t->offset + k];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
        }
        char shape[64];
        shape_text(shape, sizeof shape, t);
        name_text(text, sizeof text, t->name);
        printf("  %-28s %-16s min %+.6f  mean %+.6f  max %+.6f\n", text, shape, lo, sum / (double)t->count, hi);
    }
    ddl_checkpoint_close(ck);
    return 0;
}

static int cmd_verify(const char *path)
{
    ddl_checkpoint *ck = open_or_die(path);
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    const float *w = ddl_checkpoint_params(ck), *s = ddl_checkpoint_optim_state(ck);
    for (size_t k = 0; k < in->n_params + in->n_optim; k++) {
        float v = k < in->n_params ? w[k] : s[k - in->n_params];
        if (!isfinite(v)) {
            fprintf(stderr, "ddl-ckpt: %s: intact, but %s %zu is %g: the run diverged before it was saved\n", path,
                    k < in->n_params ? "weight" : "optimizer state float", k < in->n_params ? k : k - in->n_params,
                    (double)v);
            ddl_checkpoint_close(ck);
            return 1;
        }
    }
    char text[4 * 64];
    name_text(text, sizeof text, in->model);
    printf("%s: ok (%s, %d tensors, %zu parameters, step %lld, epoch %d, world size %d)\n", path, text,
           in->n_tensors, in->n_params, (long long)in->step, in->epoch + 1, in->world_size);
    ddl_checkpoint_close(ck);
    return 0;
}

/* ---- .npz export ---- */

typedef struct zip {
    FILE *f;
    const char *path;
    unsigned char *central; /* central directory, grown as members are added */
    size_t central_bytes, central_cap;
    long offset;            /* bytes written so far */
    int members;
} zip;

static void le16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }

static void le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void zip_write(zip *z, const void *p, size_t n)
{
    if (fwrite(p, 1, n, z->f) != n) {
        fprintf(stderr, "ddl-ckpt: %s: cannot write: %s\n", z->path, strerror(errno));
        exit(1);
    }
    z->offset += (long)n;
}

/* zip_add: one stored member; fixed date 1980-01-01 so exports are reproducible. */
static void zip_add(zip *z, const char *name, const unsigned char *data, size_t n)
{
    size_t nl = strlen(name);
    if (n > 0xFFFFFFFEu || z->offset > 0x7FFFFFFFL) {
        fprintf(stderr, "ddl-ckpt: %s: larger than 2 GB: zip64 is not supported\n", z->path);
        exit(1);
    }
    uint32_t crc = ddl_crc32(0, data, n);
    unsigned char h[30], c[46];
    memset(h, 0, sizeof h);
    le32(h, 0x04034b50), le16(h + 4, 20), le16(h + 12, 0x21); /* version 2.0, date 1980-01-01 */
    le32(h + 14, crc), le32(h + 18, (uint32_t)n), le32(h + 22, (uint32_t)n), le16(h + 26, (unsigned)nl);
    memset(c, 0, sizeof c);
    le32(c, 0x02014b50), le16(c + 4, 20), le16(c + 6, 20), le16(c + 14, 0x21);
    le32(c + 16, crc), le32(c + 20, (uint32_t)n), le32(c + 24, (uint32_t)n), le16(c + 28, (unsigned)nl);
    le32(c + 42, (uint32_t)z->offset);
    if (z->central_bytes + sizeof c + nl > z->central_cap) {
        z->central_cap = 2 * (z->central_cap + sizeof c + nl);
        z->central = realloc(z->central, z->central_cap);
        if (!z->central) {
            fprintf(stderr, "ddl-ckpt: out of memory\n");
            exit(1);
        }
    }
    memcpy(z->central + z->central_bytes, c, sizeof c);
    memcpy(z->central + z->central_bytes + sizeof c, name, nl);
    z->central_bytes += sizeof c + nl;
    zip_write(z, h, sizeof h);
    zip_write(z, name, nl);
    zip_write(z, data, n);
    z->members++;
}

static void zip_finish(zip *z)
{
    unsigned char e[22];
    memset(e, 0, sizeof e);
    le32(e, 0x06054b50), le16(e + 8, (unsigned)z->members), le16(e + 10, (unsigned)z->members);
    le32(e + 12, (uint32_t)z->central_bytes), le32(e + 16, (uint32_t)z->offset);
    zip_write(z, z->central, z->central_bytes);
    zip_write(z, e, sizeof e);
    free(z->central);
}

/* npy_add: NAME.npy holding float32 values v[count] of shape (shape[0..n_dims)); n_dims 0: a scalar. */
static void npy_add(zip *z, const char *name, const float *v, size_t count, int n_dims, const int *shape)
{
    char dict[256], file[128];
    int o = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int d = 0; d < n_dims; d++)
        o += snprintf(dict + o, sizeof dict - (size_t)o, "%d,%s", shape[d], d + 1 < n_dims ? " " : "");
    o += snprintf(dict + o, sizeof dict - (size_t)o, "), }");
    size_t hl = 10 + (size_t)o + 1, pad = (64 - hl % 64) % 64; /* magic, version, length, dict, '\n' */
    size_t total = hl + pad + 4 * count;
    unsigned char *b = malloc(total);
    if (!b) {
        fprintf(stderr, "ddl-ckpt: out of memory\n");
        exit(1);
    }
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    le16(b + 8, (unsigned)(o + 1 + pad));
    memcpy(b + 10, dict, (size_t)o);
    memset(b + 10 + o, ' ', pad);
    b[hl + pad - 1] = '\n';
    for (size_t k = 0; k < count; k++) {
        uint32_t bits;
        memcpy(&bits, &v[k], 4);
        le32(b + hl + pad + 4 * k, bits);
    }
    snprintf(file, sizeof file, "%s.npy", name);
    zip_add(z, file, b, total);
    free(b);
}

/* export_names_ok: every tensor name can be a member NAME.npy of the .npz as it is: letters,
 * digits, '_' and '.' only (PyTorch's "conv1.weight"), none taken twice or by input_mean and
 * input_std. A name from the file is never made a path ("../x", "/x", control characters):
 * one that is not such a name is refused, before OUT is created. */
static int export_names_ok(const char *path, const ddl_checkpoint *ck)
{
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    for (int i = 0; i < in->n_tensors; i++) {
        const char *name = ddl_checkpoint_tensor(ck, i)->name, *why = NULL;
        if (strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.") != strlen(name))
            why = "export takes only names of letters, digits, '_' and '.'";
        else if (strcmp(name, "input_mean") == 0 || strcmp(name, "input_std") == 0)
            why = "that name is export's own (the input normalisation)";
        for (int k = 0; k < i && !why; k++)
            if (strcmp(name, ddl_checkpoint_tensor(ck, k)->name) == 0)
                why = "so is an earlier tensor";
        if (why) {
            char text[4 * 64];
            name_text(text, sizeof text, name);
            fprintf(stderr, "ddl-ckpt: %s: tensor %d is named \"%s\": %s; nothing exported\n", path, i, text, why);
            return 0;
        }
    }
    return 1;
}

static int cmd_export(const char *path, const char *out)
{
    ddl_checkpoint *ck = open_or_die(path);
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    if (!export_names_ok(path, ck)) {
        ddl_checkpoint_close(ck);
        return 1;
    }
    zip z = {.path = out};
    if (!(z.f = fopen(out, "wb"))) {
        fprintf(stderr, "ddl-ckpt: %s: cannot create: %s\n", out, strerror(errno));
        return 1;
    }
    const float *w = ddl_checkpoint_params(ck);
    for (int i = 0; i < in->n_tensors; i++) {
        const ddl_param_info *t = ddl_checkpoint_tensor(ck, i);
        npy_add(&z, t->name, w + t->offset, t->count, t->n_dims, t->shape);
    }
    npy_add(&z, "input_mean", &in->mean, 1, 0, NULL);
    npy_add(&z, "input_std", &in->std, 1, 0, NULL);
    zip_finish(&z);
    if (fclose(z.f) != 0) {
        fprintf(stderr, "ddl-ckpt: %s: cannot write: %s\n", out, strerror(errno));
        return 1;
    }
    printf("%s: %d tensors of %s (%zu parameters) and input_mean, input_std\n", out, in->n_tensors, in->model,
           in->n_params);
    ddl_checkpoint_close(ck);
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const commands[] = {"show", "verify", "export", NULL};
    static const struct option options[] = {CLI_HELP_VERSION, {NULL, 0, NULL, 0}};
    cli_start(argv, "ddl-ckpt");
    for (int c; (c = getopt_long(argc, argv, "h", options, NULL)) != -1;) {
        if (c == 'h')
            cli_help(USAGE);
        else if (c == 'V')
            cli_version();
        else
            cli_try(); /* getopt_long named the flag */
    }
    if (optind >= argc)
        cli_error("no command: show, verify or export");
    int cmd = cli_word("command", argv[optind], commands), need = cmd == 2 ? 2 : 1;
    if (argc - optind - 1 < need) {
        char msg[64];
        snprintf(msg, sizeof msg, "%s needs CKPT%s", commands[cmd], cmd == 2 ? " OUT.npz" : "");
        cli_error(msg);
    }
    cli_end(argc, argv, optind + 1 + need);
    const char *path = argv[optind + 1];
    return cmd == 0 ? cmd_show(path) : cmd == 1 ? cmd_verify(path) : cmd_export(path, argv[optind + 2]);
}
