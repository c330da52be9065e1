/* test_resize.c - the resize layer (nearest and bilinear, as ONNX's Resize and PyTorch's
 * nn.Upsample): the values PyTorch gives for a 2x2 plane at scale 2 (nearest, bilinear with
 * align_corners False and True) and at sizes; the backward pass is the forward's adjoint
 * (<R x, dy> = <x, R' dy>) in every mode, and gives the same bits at one thread and two; a graph
 * with resize layers passes the finite-difference gradient check; the text format reads back
 * what it writes; wrong arguments are refused with the layer or line named. onnxruntime's values
 * are checked by tests/test_onnx_shapes.sh. */
#include "check.h"
#include "random_input.h"
#include "ddl.h"

#include <stdlib.h>
#include <string.h>

static ddl_resize2d geo(int in_h, int in_w, int out_h, int out_w, int mode, int coord, int nearest)
{
    return (ddl_resize2d){.batch = 1, .c = 1, .in_h = in_h, .in_w = in_w, .out_h = out_h, .out_w = out_w,
                          .mode = mode, .coord = coord, .nearest = nearest,
                          .scale_h = (float)out_h / (float)in_h, .scale_w = (float)out_w / (float)in_w};
}

/* known: PyTorch 1.13's F.interpolate of [[1, 2], [3, 4]] */
static void known(void)
{
    const float x[4] = {1, 2, 3, 4};
    float y[16];
    ddl_resize2d r = geo(2, 2, 4, 4, DDL_RESIZE_NEAREST, DDL_RESIZE_ASYMMETRIC, DDL_RESIZE_FLOOR);
    ddl_resize2d_forward(&r, x, y);
    const float nearest[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    CHECK(memcmp(y, nearest, sizeof y) == 0);
    r = geo(2, 2, 4, 4, DDL_RESIZE_LINEAR, DDL_RESIZE_HALF_PIXEL, 0); /* align_corners=False */
    ddl_resize2d_forward(&r, x, y);
    const float half[16] = {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4};
    for (int i = 0; i < 16; i++)
        CHECK_NEAR(y[i], half[i], 1e-6);
    r = geo(2, 2, 4, 4, DDL_RESIZE_LINEAR, DDL_RESIZE_ALIGN_CORNERS, 0); /* align_corners=True */
    ddl_resize2d_forward(&r, x, y);
    const float ac[4] = {1, 4.0f / 3, 5.0f / 3, 2};
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(y[i], ac[i], 1e-6);            /* first row */
        CHECK_NEAR(y[12 + i], ac[i] + 2, 1e-6);   /* last row: + 2 */
    }
    /* a 2x2 to 3x1 of sizes, nearest asymmetric: rows 0, 0, 1 (floor(y * 2 / 3)), column 0 */
    r = geo(2, 2, 3, 1, DDL_RESIZE_NEAREST, DDL_RESIZE_ASYMMETRIC, DDL_RESIZE_FLOOR);
    ddl_resize2d_forward(&r, x, y);
    CHECK(y[0] == 1 && y[1] == 1 && y[2] == 3);
    /* round_prefer_ceil with half_pixel ("nearest-exact"): 2 -> 3, sources -1/6, 1/2, 7/6 */
    r = geo(1, 2, 1, 3, DDL_RESIZE_NEAREST, DDL_RESIZE_HALF_PIXEL, DDL_RESIZE_ROUND_PREFER_CEIL);
    ddl_resize2d_forward(&r, x, y);
    CHECK(y[0] == 1 && y[1] == 2 && y[2] == 2);
    r.nearest = DDL_RESIZE_ROUND_PREFER_FLOOR;
    ddl_resize2d_forward(&r, x, y);
    CHECK(y[0] == 1 && y[1] == 1 && y[2] == 2);
}

/* adjoint: for every mode, <forward(x), dy> = <x, backward(dy)>, and backward's bits do not depend
 * on the thread count. */
static void adjoint(void)
{
    const int shapes[][4] = {{5, 7, 10, 14}, {6, 4, 9, 6}, {8, 9, 3, 4}, {3, 3, 7, 5}, {1, 4, 1, 9}};
    for (int s = 0; s < 5; s++)
        for (int mode = 0; mode < 2; mode++)
            for (int coord = 0; coord < 4; coord++)
                for (int nr = 0; nr < (mode ? 1 : 4); nr++) {
                    ddl_resize2d r = geo(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], mode, coord, nr);
                    r.batch = 2, r.c = 3;
                    size_t nx = 6 * (size_t)r.in_h * r.in_w, ny = 6 * (size_t)r.out_h * r.out_w;
                    float *x = random_input(nx, 1 + s), *dy = random_input(ny, 9 + s);
                    float *y = malloc(ny * 4), *dx = malloc(nx * 4), *dx2 = malloc(nx * 4);
                    ddl_set_threads(1);
                    ddl_resize2d_forward(&r, x, y);
                    ddl_resize2d_backward(&r, dy, dx);
                    ddl_set_threads(2);
                    ddl_resize2d_backward(&r, dy, dx2);
                    double a = 0, b = 0;
                    for (size_t i = 0; i < ny; i++)
                        a += (double)y[i] * dy[i];
                    for (size_t i = 0; i < nx; i++)
                        b += (double)x[i] * dx[i];
                    CHECK_NEAR(a, b, 1e-4 * (1 + fabs(a)));
                    CHECK(memcmp(dx, dx2, nx * 4) == 0);
                    free(x), free(dy), free(y), free(dx), free(dx2);
                }
    ddl_set_threads(1);
}

/* gradients: convs around resize layers of each kind pass the finite-difference check */
static void gradients(void)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = NULL;
    CHECK(ddl_graph_create(NULL, &g) == DDL_OK);
    int x = ddl_graph_input(g, 2, 5, 4);
    int c = ddl_graph_conv2d(g, x, "c1", 3, 3, 1, 1, 1);
    int up = ddl_graph_resize(g, c, DDL_RESIZE_LINEAR, DDL_RESIZE_HALF_PIXEL, 0, 1.5f, 2.0f, 0, 0); /* 7x8 */
    int ac = ddl_graph_resize(g, up, DDL_RESIZE_LINEAR, DDL_RESIZE_ALIGN_CORNERS, 0, 0, 0, 9, 5);
    int c2 = ddl_graph_conv2d(g, ac, "c2", 3, 3, 1, 1, 1);
    int nn = ddl_graph_resize(g, c2, DDL_RESIZE_NEAREST, DDL_RESIZE_ASYMMETRIC, DDL_RESIZE_FLOOR, 0.5f, 0.5f, 0, 0);
    ddl_graph_conv2d(g, ddl_graph_add(g, nn, ddl_graph_resize(g, c, DDL_RESIZE_NEAREST, DDL_RESIZE_HALF_PIXEL,
                                                              DDL_RESIZE_ROUND_PREFER_CEIL, 0, 0, 4, 2)),
                     "head", DDL_CLASSES, 1, 1, 0, 1);
    CHECK(ddl_graph_error(g)[0] == '\0');
    ddl_model_config mc = {.batch = 2, .in_c = 2, .in_h = 5, .in_w = 4, .n_classes = 3, .plugin_config = g};
    int oc, oh, ow;
    CHECK(ddl_graph_output_shape(g, &mc, &oc, &oh, &ow) == DDL_OK && oc == 3 && oh == 4 && ow == 2);
    ddl_model *m = NULL;
    CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_OK);
    if (m) {
        ddl_model_init_weights(m, 3);
        float *in = random_input(2 * 2 * 5 * 4, 5);
        double worst = 1;
        int rc = ddl_model_check_grads(m, in, 2, 7, 12, 1e-2, &worst, err, sizeof err);
        if (rc != DDL_OK)
            fprintf(stderr, "resize gradients: %s\n", err);
        CHECK(rc == DDL_OK && worst < 1e-2);
        free(in);
        ddl_model_destroy(m);
    }
    /* the text format: what it writes reads back to the same text */
    char a[2048], b[2048];
    ddl_graph_format(g, a, sizeof a);
    CHECK(strstr(a, "resize scale=1.5x2 mode=linear coord=half_pixel\n") != NULL);
    CHECK(strstr(a, "resize size=9x5 mode=linear coord=align_corners\n") != NULL);
    CHECK(strstr(a, "resize scale=0.5 mode=nearest coord=asymmetric nearest=floor\n") != NULL);
    ddl_graph *h = NULL;
    CHECK(ddl_graph_create(NULL, &h) == DDL_OK);
    CHECK(ddl_graph_parse(h, a, err, sizeof err) == DDL_OK);
    ddl_graph_format(h, b, sizeof b);
    CHECK(strcmp(a, b) == 0);
    ddl_graph_destroy(h, NULL);
    ddl_graph_destroy(g, NULL);
}

static void errors(void)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = NULL;
    CHECK(ddl_graph_create(NULL, &g) == DDL_OK);
    int x = ddl_graph_input(g, 1, 4, 4);
    CHECK(ddl_graph_resize(g, x, DDL_RESIZE_LINEAR, DDL_RESIZE_HALF_PIXEL, 0, 2.0f, 2.0f, 8, 8) == -1);
    CHECK(strstr(ddl_graph_error(g), "layer 1 (resize): scales 2, 2 and size 8x8: give two scales") != NULL);
    ddl_graph_init(g, ddl_graph_sizeof());
    x = ddl_graph_input(g, 1, 4, 4);
    CHECK(ddl_graph_resize(g, x, 2, DDL_RESIZE_HALF_PIXEL, 0, 2.0f, 2.0f, 0, 0) == -1);
    CHECK(strstr(ddl_graph_error(g), "mode 2") != NULL);
    const struct {
        const char *text, *says;
    } bad[] = {
        {"input 1 4 4\nresize mode=cubic scale=2\n", "line 2: resize: mode=cubic: take one of nearest, linear"},
        {"input 1 4 4\nresize scale=2 size=3x3\n", "line 2: resize takes scale=S or scale=SHxSW"},
        {"input 1 4 4\nresize\n", "line 2: resize takes scale=S"},
        {"input 1 4 4\nresize scale=-1\n", "line 2: resize takes scale=S"},
        {"input 1 4 4\nresize size=3x\n", "line 2: resize takes scale=S"},
        {"input 1 4 4\nresize scale=2 coord=tf_crop_and_resize\n", "coord=tf_crop_and_resize: take one of asymmetric"},
        {"input 1 4 4\nresize scale=2 stride=2\n", "line 2: resize takes no stride="},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = ddl_graph_parse(g, bad[i].text, err, sizeof err);
        CHECK(rc == DDL_EINVAL && strstr(err, bad[i].says) != NULL);
        if (rc != DDL_EINVAL || !strstr(err, bad[i].says))
            fprintf(stderr, "%s-> %s\n", bad[i].text, err);
    }
    /* a scale that leaves no pixel: refused when the shapes resolve */
    CHECK(ddl_graph_parse(g, "input 1 4 4\nresize scale=0.2\nconv 2 1\n", err, sizeof err) == DDL_OK);
    ddl_model_config mc = {.batch = 1, .in_c = 1, .in_h = 4, .in_w = 4, .n_classes = 2, .plugin_config = g};
    int c, h, w;
    CHECK(ddl_graph_output_shape(g, &mc, &c, &h, &w) == DDL_EINVAL);
    ddl_graph_destroy(g, NULL);
}

int main(void)
{
    known();
    adjoint();
    gradients();
    errors();
    return TEST_END();
}
