/* scenes.c - GET /api/scene/MODEL/N: scene N (0..9999) for a segmentation model, composed from the
 * Fashion-MNIST test items in --data DIR (default /usr/share/datasets/fashion-mnist) as `unet`
 * composes its held-out scenes, so the page can offer "a random scene" to segment: the pixels and
 * the true mask, as rows. The items are loaded at the first request, once, under a lock; a
 * missing data set is a 404 that says where it looked. Not on the predict path: it allocates. */
#include "serve.h"

#include <stdlib.h>
#include <string.h>

static pthread_mutex_t items_lock = PTHREAD_MUTEX_INITIALIZER;
static ddl_dataset items;
static int items_state; /* 0: not tried; 1: loaded; -1: failed (items_err says why) */
static char items_err[DDL_ERR_BYTES];

static const ddl_dataset *load_items(void)
{
    pthread_mutex_lock(&items_lock);
    if (items_state == 0) {
        const char *dir = sv_srv->data ? sv_srv->data : "/usr/share/datasets/fashion-mnist";
        items_state = ddl_dataset_load_mnist(dir, "t10k", NULL, &items, items_err, sizeof items_err) == DDL_OK ? 1 : -1;
    }
    pthread_mutex_unlock(&items_lock);
    return items_state == 1 ? &items : NULL;
}

static json_t *rows(const unsigned char *p, int h, int w)
{
    json_t *out = json_array();
    for (int y = 0; y < h; y++) {
        json_t *row = json_array();
        for (int x = 0; x < w; x++)
            json_array_append_new(row, json_integer(p[(size_t)y * w + x]));
        json_array_append_new(out, row);
    }
    return out;
}

void sv_scene(sv_model *m, const char *arg, sv_reply *rep)
{
    char *end;
    long n = strtol(arg, &end, 10);
    if (!arg[0] || *end || n < 0 || n > 9999) {
        sv_error(rep, 400, "scene number \"%.32s\": expected 0 to 9999", arg);
        return;
    }
    if (m->oh * m->ow <= 1) {
        sv_error(rep, 404, "model %s is a classifier: scenes are for segmentation models", m->name);
        return;
    }
    const ddl_dataset *it = load_items();
    if (!it) {
        sv_error(rep, 404, "no Fashion-MNIST test items for scenes (give --data DIR): %s", items_err);
        return;
    }
    ddl_dataset sc;
    char err[DDL_ERR_BYTES];
    if (ddl_dataset_make_scenes(it, 1, m->h, 3, (uint64_t)n * 0x9E3779B97F4A7C15ull + 1, NULL, &sc, err, sizeof err) !=
        DDL_OK) {
        sv_error(rep, 500, "scene %ld: %s", n, err);
        return;
    }
    sv_reply_json(rep, 200, json_pack("{s:s,s:i,s:o,s:o}", "model", m->name, "scene", (int)n, "pixels",
                                      rows(sc.images, m->h, m->w), "truth", rows(sc.targets, m->h, m->w)));
    ddl_dataset_free(&sc);
}
