/* test_affine.c - the graph's parameter-free affine layer (ddl_graph_affine: x * scale + shift
 * per channel, how the ONNX import keeps a per-channel Mul or Add of constants): its forward
 * gives the values by hand, its backward passes the finite-difference check (on an image and on
 * a flat (N, K)), the text format writes and reads back its exact values, and wrong ones are
 * refused with the layer or line named. */
#include "check.h"
#include "random_input.h"
#include "ddl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ddl_graph *G(void)
{
    ddl_graph *g = NULL;
    CHECK(ddl_graph_create(NULL, &g) == DDL_OK);
    return g;
}

static const float scale[3] = {0.5f, -2.0f, 3.25f}, shift[3] = {1.0f, 0.0f, -0.75f};

/* conv 3x3 to 3 channels, affine, relu, dense: the affine's dx reaches the conv's weights */
static ddl_graph *image_graph(void)
{
    ddl_graph *g = G();
    int x = ddl_graph_input(g, 2, 5, 5);
    int c = ddl_graph_conv2d(g, x, "c1", 3, 3, 1, 1, 1);
    int a = ddl_graph_affine(g, c, 3, scale, shift);
    ddl_graph_dense(g, ddl_graph_relu(g, a), "fc", 3);
    CHECK(a == 2 && ddl_graph_error(g)[0] == '\0');
    return g;
}

static void gradients(void)
{
    char err[DDL_ERR_BYTES];
    for (int flat = 0; flat < 2; flat++) {
        ddl_graph *g = flat ? G() : image_graph();
        if (flat) { /* dense, affine of its (N, K), dense */
            int x = ddl_graph_input(g, 1, 4, 4);
            ddl_graph_dense(g, ddl_graph_affine(g, ddl_graph_dense(g, x, "a", 3), 3, scale, shift), "b", 2);
        }
        ddl_model_config mc = {.batch = 3, .in_c = flat ? 1 : 2, .in_h = flat ? 4 : 5, .in_w = flat ? 4 : 5,
                               .n_classes = flat ? 2 : 3, .plugin_config = g};
        ddl_model *m = NULL;
        CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_OK);
        if (m) {
            ddl_model_init_weights(m, 3);
            float *x = random_input((size_t)3 * mc.in_c * mc.in_h * mc.in_w, 5);
            double worst = 1.0;
            int rc = ddl_model_check_grads(m, x, 3, 11, 12, 2e-2, &worst, err, sizeof err);
            if (rc != DDL_OK)
                fprintf(stderr, "affine (%s): %s\n", flat ? "flat" : "image", err);
            CHECK(rc == DDL_OK && worst < 2e-2);
            free(x);
            ddl_model_destroy(m);
        }
        ddl_graph_destroy(g, NULL);
    }
}

/* forward: identity conv (1x1, one-hot) then affine: y = x * scale[c] + shift[c] exactly */
static void forward_values(void)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = G();
    int x = ddl_graph_input(g, 3, 2, 2);
    int a = ddl_graph_affine(g, ddl_graph_conv2d(g, x, "id", 3, 1, 1, 0, 0), 3, scale, shift);
    ddl_graph_output(g, a, DDL_HEAD_XENT);
    ddl_model_config mc = {.batch = 2, .in_c = 3, .in_h = 2, .in_w = 2, .n_classes = 3, .plugin_config = g};
    ddl_model *m = NULL;
    CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_OK);
    if (m) {
        float *p = ddl_model_params(m);
        memset(p, 0, 9 * sizeof *p);
        p[0] = p[4] = p[8] = 1.0f;
        float *in = random_input(24, 8);
        const float *y = ddl_model_forward(m, in, 2, 0, NULL);
        int same = y != NULL;
        for (int i = 0; same && i < 24; i++)
            same = y[i] == in[i] * scale[i / 4 % 3] + shift[i / 4 % 3];
        CHECK(same);
        free(in);
        ddl_model_destroy(m);
    }
    ddl_graph_destroy(g, NULL);
}

static void text_and_errors(void)
{
    char err[DDL_ERR_BYTES], text[2048], again[2048];
    ddl_graph *g = image_graph(), *h = G();
    ddl_graph_format(g, text, sizeof text);
    CHECK(strstr(text, "affine 3 scale=0.5,-2,3.25 shift=1,0,-0.75\n") != NULL);
    CHECK(ddl_graph_parse(h, text, err, sizeof err) == DDL_OK);
    ddl_graph_format(h, again, sizeof again);
    CHECK(strcmp(text, again) == 0);
    /* a value that needs all 9 digits reads back to the same float */
    const float odd[1] = {0.1f + 1e-8f}, zero[1] = {0.0f};
    ddl_graph *k = G();
    ddl_graph_affine(k, ddl_graph_conv2d(k, ddl_graph_input(k, 1, 3, 3), "c", 1, 1, 1, 0, 1), 1, odd, zero);
    ddl_graph_format(k, text, sizeof text);
    CHECK(ddl_graph_parse(h, text, err, sizeof err) == DDL_OK);
    ddl_graph_format(h, again, sizeof again);
    CHECK(strcmp(text, again) == 0);
    /* refused: channels that are not the input's (at build), too many, not finite; lines */
    ddl_graph *b = G();
    ddl_graph_dense(b, ddl_graph_affine(b, ddl_graph_conv2d(b, ddl_graph_input(b, 1, 3, 3), "c", 2, 1, 1, 0, 1), 3,
                                        scale, shift), "fc", 2);
    ddl_model_config mc = {.batch = 1, .in_c = 1, .in_h = 3, .in_w = 3, .n_classes = 2, .plugin_config = b};
    ddl_model *m = NULL;
    CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "layer 2 (affine): 3 scales and shifts for an input of 2 channels") != NULL);
    float big[DDL_GRAPH_MAX_AFFINE + 1] = {0}, inf[1] = {INFINITY};
    ddl_graph *e = G();
    int x = ddl_graph_input(e, 1, 3, 3);
    CHECK(ddl_graph_affine(e, x, DDL_GRAPH_MAX_AFFINE + 1, big, big) == -1);
    CHECK(strstr(ddl_graph_error(e), "layer 1 (affine): 65 channels: need 1 to 64") != NULL);
    ddl_graph_init(e, ddl_graph_sizeof());
    x = ddl_graph_input(e, 1, 3, 3);
    CHECK(ddl_graph_affine(e, x, 1, inf, zero) == -1);
    CHECK(strstr(ddl_graph_error(e), "channel 0: scale inf, shift 0: need finite values") != NULL);
    ddl_graph_init(e, ddl_graph_sizeof());
    x = ddl_graph_input(e, 1, 3, 3);
    int ok = 1;
    for (int i = 0; ok && i < DDL_GRAPH_MAX_AFFINE / 32; i++)
        ok = ddl_graph_affine(e, x, 32, big, big) > 0;
    CHECK(ok && ddl_graph_affine(e, x, 1, big, big) == -1);
    CHECK(strstr(ddl_graph_error(e), "the graph's affine layers hold 64 in all") != NULL);
    CHECK(ddl_graph_parse(h, "input 1 3 3\naffine 2 scale=1,2 shift=1\n", err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "line 2: affine takes shift=V1,..,V2 (2 numbers)") != NULL);
    CHECK(ddl_graph_parse(h, "input 1 3 3\naffine 1 scale=x shift=1\n", err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "line 2: affine takes scale=") != NULL);
    ddl_graph_destroy(g, NULL), ddl_graph_destroy(h, NULL), ddl_graph_destroy(k, NULL);
    ddl_graph_destroy(b, NULL), ddl_graph_destroy(e, NULL);
}

int main(void)
{
    gradients();
    forward_values();
    text_and_errors();
    return TEST_END();
}
