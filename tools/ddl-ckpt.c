/* ddl-ckpt.c - look into checkpoints and take models out of ddl:
 *
 *   ddl-ckpt show CKPT            the header, then every tensor with its shape and min/mean/max
 *   ddl-ckpt verify CKPT          exit 0 if the file is intact and its weights finite, else say why
 *   ddl-ckpt export CKPT OUT.npz  numpy .npz with PyTorch's names and layouts (conv1.weight
 *                                 [6,1,5,5], ...), plus input_mean and input_std; a tensor name
 *                                 other than letters, digits, '_' and '.' is refused (exit 1)
 *   ddl-ckpt export CKPT OUT.onnx ONNX (opset 13) of a lenet or unet checkpoint: raw pixels 0..255
 *                                 in, logits out; any other extension is refused (exit 1)
 *
 * Options as getopt_long reads them: --help, --version; a bad command or flag exits 2 naming it.
 * A program, not library code: it prints and exits. It reads checkpoints only through ddl.h.
 * The exporters are the library's (ddl_export in ddl.h, src/infer/). */
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
    "       ddl-ckpt export CKPT OUT.npz|OUT.onnx\n"                                           \
    "  show      the header, then every tensor with its shape and min/mean/max\n"              \
    "  verify    exit 0 if the file is intact and its weights finite, else say why (exit 1)\n" \
    "  export    numpy .npz with PyTorch's names and layouts, plus input_mean and input_std;\n" \
    "            or ONNX (any model with a layer graph): raw pixels 0..255 in, logits out\n"                  \
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

/* print_desc: the layer graph the checkpoint carries, a line each, and its class names; escaped
 * as names are (the file may have been made by anyone). */
static void print_desc(const ddl_checkpoint *ck, int n_classes)
{
    const char *arch = ddl_checkpoint_arch(ck);
    for (const char *p = arch; p && *p;) {
        const char *nl = strchr(p, '\n');
        char line[160], text[640];
        snprintf(line, sizeof line, "%.*s", (int)(nl ? nl - p : (ptrdiff_t)strlen(p)), p);
        name_text(text, sizeof text, line);
        printf("%s %s\n", p == arch ? "graph     " : "          ", text);
        p = nl ? nl + 1 : p + strlen(p);
    }
    const char *const *names = ddl_checkpoint_class_names(ck);
    for (int c = 0; names && c < n_classes; c++) {
        char text[1040];
        name_text(text, sizeof text, names[c]);
        printf("%s%s", c ? ", " : "classes    ", text);
    }
    if (names)
        printf("\n");
}

static int cmd_show(const char *path)
{
    ddl_checkpoint *ck = open_or_die(path);
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    const ddl_model_config *mc = &in->model_cfg;
    printf("file       %s (%llu bytes, format version %d, %s)\n", path, (unsigned long long)in->file_bytes,
           in->version, in->compressed ? "lz4 where it helps" : "uncompressed");
    char text[4 * 64];
    name_text(text, sizeof text, in->model);
    const ddl_unet_config *u = (const ddl_unet_config *)ddl_checkpoint_plugin_config(ck);
    char settings[64] = "";
    if (u)
        snprintf(settings, sizeof settings, ", depth %d, width %d", u->depth, u->width);
    printf("model      %s, signature %08x, input %dx%dx%d, %d classes%s, dropout %g\n", text,
           (unsigned)in->signature, mc->in_c, mc->in_h, mc->in_w, mc->n_classes, settings, (double)mc->dropout);
    printf("progress   step %lld, epoch %d, position %lld of %lld samples\n", (long long)in->step, in->epoch + 1,
           (long long)in->pos, (long long)in->n_train);
    printf("run        world size %d, global batch %d, seed %llu\n", in->world_size, in->batch,
           (unsigned long long)in->seed);
    printf("optimizer  %s lr %g momentum %g weight_decay %g betas %g %g eps %g, %zu floats of state\n",
           optim_name(in->optim.kind), (double)in->optim.lr, (double)in->optim.momentum,
           (double)in->optim.weight_decay, (double)in->optim.beta1, (double)in->optim.beta2, (double)in->optim.eps,
           in->n_optim);
    if (in->n_norm) {
        printf("input      per channel: mean");
        for (int c = 0; c < in->n_norm; c++)
            printf(" %.6f", (double)in->norm_mean[c]);
        printf(", std");
        for (int c = 0; c < in->n_norm; c++)
            printf(" %.6f", (double)in->norm_std[c]);
        printf("\n");
    } else {
        printf("input      mean %.6f std %.6f\n", (double)in->mean, (double)in->std);
    }
    print_desc(ck, mc->n_classes);
    printf("tensors    %d, %zu parameters\n", in->n_tensors, in->n_params);
    int nb = ddl_checkpoint_n_buffer_tensors(ck);
    for (int i = 0; i < in->n_tensors + nb; i++) { /* the buffers (running statistics) after the weights */
        if (i == in->n_tensors)
            printf("buffers    %d, %zu running statistics\n", nb, ddl_checkpoint_n_buffers(ck));
        const ddl_param_info *t = i < in->n_tensors ? ddl_checkpoint_tensor(ck, i)
                                                    : ddl_checkpoint_buffer_tensor(ck, i - in->n_tensors);
        const float *w = i < in->n_tensors ? ddl_checkpoint_params(ck) : ddl_checkpoint_buffers(ck);
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

/* ---- export: the library's exporters, the format from OUT's extension ---- */

static int cmd_export(const char *path, const char *out)
{
    ddl_checkpoint *ck = open_or_die(path);
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    char err[DDL_ERR_BYTES];
    int rc = ddl_export(ck, out, NULL, err, sizeof err);
    if (rc != DDL_OK)
        fprintf(stderr, "ddl-ckpt: %s\n", err);
    else
        printf("%s: %d tensors of %s (%zu parameters) and the input normalisation\n", out, in->n_tensors, in->model,
               in->n_params);
    ddl_checkpoint_close(ck);
    return rc == DDL_OK ? 0 : 1;
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
        snprintf(msg, sizeof msg, "%s needs CKPT%s", commands[cmd], cmd == 2 ? " OUT.npz|OUT.onnx" : "");
        cli_error(msg);
    }
    cli_end(argc, argv, optind + 1 + need);
    const char *path = argv[optind + 1];
    return cmd == 0 ? cmd_show(path) : cmd == 1 ? cmd_verify(path) : cmd_export(path, argv[optind + 2]);
}
