/* presets.c - the built-in networks as graphs: lenet (the LeNet-5 of models/lenet.c), unet (the
 * U-Net of models/unet.c, same parameter names, order and kernels, so the same weights and
 * logits) and cnn (a small VGG-style classifier for RGB images of any size). Written with the
 * public calls, as a user would. */
#include "impl.h"

#include <stdlib.h>
#include <string.h>

static int lenet(ddl_graph *g)
{
    /* ReLU after max-pool as models/lenet.c does it: the two commute, and pooling first is cheaper */
    int x = ddl_graph_input(g, 1, 28, 28);
    x = ddl_graph_conv2d(g, x, "conv1", 6, 5, 1, 2, 1);
    x = ddl_graph_relu(g, ddl_graph_maxpool(g, x, 2, 2));
    x = ddl_graph_conv2d(g, x, "conv2", 16, 5, 1, 0, 1);
    x = ddl_graph_flatten(g, ddl_graph_relu(g, ddl_graph_maxpool(g, x, 2, 2)));
    x = ddl_graph_dropout(g, ddl_graph_relu(g, ddl_graph_dense(g, x, "fc1", 120)), -1.0f);
    x = ddl_graph_dropout(g, ddl_graph_relu(g, ddl_graph_dense(g, x, "fc2", 84)), -1.0f);
    return ddl_graph_dense(g, x, "fc3", DDL_CLASSES);
}

/* unet_block: conv 3x3 (no bias), GroupNorm, ReLU, twice, as models/unet.c's block. */
static int unet_block(ddl_graph *g, int x, const char *prefix, int c)
{
    char name[DDL_GRAPH_NAME_BYTES];
    for (int k = 1; k <= 2; k++) {
        snprintf(name, sizeof name, "%s.conv%d", prefix, k);
        x = ddl_graph_conv2d(g, x, name, c, 3, 1, 1, 0);
        snprintf(name, sizeof name, "%s.norm%d", prefix, k);
        x = ddl_graph_relu(g, ddl_graph_groupnorm(g, x, name, 0));
    }
    return x;
}

static int unet(ddl_graph *g, int depth, int width)
{
    int skip[8], x = ddl_graph_input(g, 0, 0, 0);
    char prefix[16];
    for (int l = 0; l < depth; l++) {
        snprintf(prefix, sizeof prefix, "down%d", l);
        skip[l] = unet_block(g, x, prefix, width << l);
        x = ddl_graph_maxpool(g, skip[l], 2, 2);
    }
    x = unet_block(g, x, "bottom", width << depth);
    for (int l = depth - 1; l >= 0; l--) {
        char name[DDL_GRAPH_NAME_BYTES];
        snprintf(prefix, sizeof prefix, "up%d", l);
        snprintf(name, sizeof name, "up%d.up", l);
        x = ddl_graph_deconv2d(g, x, name, width << l, 2, 2, 0);
        x = unet_block(g, ddl_graph_concat(g, skip[l], x), prefix, width << l);
    }
    x = ddl_graph_conv2d(g, x, "head", DDL_CLASSES, 1, 1, 0, 1);
    return ddl_graph_output(g, x, DDL_HEAD_DICE);
}

static int cnn(ddl_graph *g, int width)
{
    int x = ddl_graph_input(g, 0, 0, 0);
    char name[DDL_GRAPH_NAME_BYTES];
    for (int s = 1; s <= 3; s++) {
        int c = width << (s - 1);
        for (int k = 1; k <= 2; k++) {
            snprintf(name, sizeof name, "block%d.conv%d", s, k);
            x = ddl_graph_relu(g, ddl_graph_conv2d(g, x, name, c, 3, 1, 1, 1));
        }
        x = ddl_graph_maxpool(g, x, 2, 2);
    }
    x = ddl_graph_dropout(g, ddl_graph_global_avgpool(g, x), -1.0f);
    return ddl_graph_dense(g, x, "fc", DDL_CLASSES);
}

/* number: the decimal after a ':' in a preset's name, or fallback when there is none. */
static int number(const char **s, int fallback)
{
    if (**s != ':')
        return fallback;
    char *end;
    long v = strtol(*s + 1, &end, 10);
    if (end == *s + 1 || v < 1 || v > 4096)
        return -1;
    *s = end;
    return (int)v;
}

int ddl_graph_preset(ddl_graph *g, const char *name, char *err, size_t err_bytes)
{
    if (!g || !name)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_graph_preset: no graph or no name");
    ddl_graph_init(g, sizeof *g);
    const char *rest = name;
    int rc = -1;
    if (strcmp(name, "lenet") == 0) {
        rc = lenet(g);
    } else if (strncmp(name, "unet", 4) == 0) {
        rest += 4;
        int depth = number(&rest, 3), width = number(&rest, 8);
        if (depth >= 1 && depth <= 6 && width >= 1 && !*rest)
            rc = unet(g, depth, width);
        else
            return ddl__errf(err, err_bytes, DDL_EINVAL, "preset \"%s\": unet:DEPTH:WIDTH takes a depth of 1 to 6 and "
                             "a width >= 1", name);
    } else if (strncmp(name, "cnn", 3) == 0) {
        rest += 3;
        int width = number(&rest, 16);
        if (width >= 1 && width <= 1024 && !*rest)
            rc = cnn(g, width);
        else
            return ddl__errf(err, err_bytes, DDL_EINVAL, "preset \"%s\": cnn:WIDTH takes a first-stage width of 1 "
                             "to 1024", name);
    } else {
        return ddl__errf(err, err_bytes, DDL_EINVAL, "\"%s\" is not a preset (lenet, unet, unet:DEPTH:WIDTH, cnn, "
                         "cnn:WIDTH)", name);
    }
    if (rc < 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "preset %s: %s", name, ddl_graph_error(g));
    return DDL_OK;
}
