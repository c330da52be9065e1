/* scenes.c - a deterministic generator of segmentation scenes from a classification data set
 * (Fashion-MNIST items): each square canvas holds 1 to max_items items at random positions,
 * later items covering earlier ones where they are opaque, plus Gaussian pixel noise; every
 * pixel is labelled 0 (background) or 1 + the class of the item whose pixel covers it.
 * Owns only the one block it allocates for the result; no global state; the same seed gives
 * the same bytes on every platform (ddl_rng, integers and plain float arithmetic, no libm). */
#include "core/impl.h"

#include <string.h>

/* An item pixel above this value (of 255) is opaque: it covers what is below and labels the
 * pixel with the item's class. Fainter pixels (anti-aliased edges, dark background) only
 * brighten the canvas and leave the label alone. */
#define SCENE_THRESHOLD 32
/* Standard deviation of the Gaussian noise added to every canvas pixel, in grey levels. */
#define SCENE_NOISE 16.0f

/* ---- checks ---- */

static int check_args(const ddl_dataset *items, int n_scenes, int size, int max_items, char *err, size_t err_bytes)
{
    if (!items || items->n < 1)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "scenes: the item data set is empty");
    if (!items->images || !items->targets)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "scenes: items must be byte images with byte labels");
    if (items->c != 1 || items->th != 1 || items->tw != 1)
        return ddl__errf(err, err_bytes, DDL_EINVAL,
                         "scenes: items must be one-channel images with one label each, not %dx%dx%d with %dx%d targets",
                         items->c, items->h, items->w, items->th, items->tw);
    if (items->n_classes < 1 || items->n_classes > 254)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "scenes: items have %d classes; 1 to 254 are possible",
                         items->n_classes);
    if (size < items->h || size < items->w || size > 4096)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "scenes: canvas size %d must be from the item size %dx%d to 4096",
                         size, items->h, items->w);
    if (n_scenes < 1 || max_items < 1)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "scenes: need n_scenes >= 1 and max_items >= 1, not %d and %d",
                         n_scenes, max_items);
    if ((size_t)n_scenes > (SIZE_MAX / 2) / ((size_t)size * (size_t)size))
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "scenes: %d scenes of %dx%d do not fit in memory", n_scenes, size,
                         size);
    return DDL_OK;
}

/* ---- drawing ---- */

/* paste: draw item k of `items` at (y0, x0) on img (size, size) and label lab. */
static void paste(const ddl_dataset *items, int k, int y0, int x0, int size, uint8_t *img, uint8_t *lab)
{
    int h = items->h, w = items->w;
    const uint8_t *src = items->images + (size_t)k * (size_t)h * (size_t)w;
    uint8_t cls = (uint8_t)(1 + items->targets[k]);
    for (int y = 0; y < h; y++) {
        uint8_t *row = img + (size_t)(y0 + y) * (size_t)size + x0, *lrow = lab + (size_t)(y0 + y) * (size_t)size + x0;
        for (int x = 0; x < w; x++) {
            uint8_t v = src[y * w + x];
            if (v > SCENE_THRESHOLD) {
                row[x] = v;
                lrow[x] = cls;
            } else if (v > row[x]) {
                row[x] = v;
            }
        }
    }
}

/* noisy: v plus noise of standard deviation SCENE_NOISE, from the four 16-bit parts of one draw
 * (their sum is nearly Gaussian); only + and * of floats, no libm, so every platform agrees. */
static uint8_t noisy(uint8_t v, uint64_t bits)
{
    long sum = (long)(bits & 0xffff) + (long)((bits >> 16) & 0xffff) + (long)((bits >> 32) & 0xffff) +
               (long)(bits >> 48);
    /* the sum has mean 2 * 65535 and standard deviation 65536 / sqrt(3) = 37837.23 */
    float f = (float)v + (float)(2 * sum - 4 * 65535) * (SCENE_NOISE / (2.0f * 37837.23f));
    return (uint8_t)(f <= 0.0f ? 0 : f >= 255.0f ? 255 : (int)(f + 0.5f));
}

/* make_scene: one canvas and its labels from the generator r. */
static void make_scene(const ddl_dataset *items, int size, int max_items, ddl_rng *r, uint8_t *img, uint8_t *lab)
{
    size_t px = (size_t)size * (size_t)size;
    memset(img, 0, px);
    memset(lab, 0, px);
    int count = 1 + (int)ddl_rng_below(r, (uint32_t)max_items);
    for (int i = 0; i < count; i++) {
        int k = (int)ddl_rng_below(r, (uint32_t)items->n);
        int y0 = (int)ddl_rng_below(r, (uint32_t)(size - items->h + 1));
        int x0 = (int)ddl_rng_below(r, (uint32_t)(size - items->w + 1));
        paste(items, k, y0, x0, size, img, lab);
    }
    for (size_t p = 0; p < px; p++)
        img[p] = noisy(img[p], ddl_rng_next(r));
}

/* ---- public ---- */

int ddl_dataset_make_scenes(const ddl_dataset *items, int n_scenes, int size, int max_items, uint64_t seed,
                            const ddl_allocator *alloc, ddl_dataset *out, char *err, size_t err_bytes)
{
    memset(out, 0, sizeof *out);
    int rc = check_args(items, n_scenes, size, max_items, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    size_t px = (size_t)size * (size_t)size, bytes = 2 * (size_t)n_scenes * px;
    uint8_t *mem = (uint8_t *)ddl__alloc(alloc, bytes);
    if (!mem)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "scenes: cannot allocate %zu bytes for %d scenes of %dx%d", bytes,
                         n_scenes, size, size);
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    uint8_t *img = mem, *lab = mem + (size_t)n_scenes * px;
    for (int i = 0; i < n_scenes; i++)
        make_scene(items, size, max_items, &r, img + (size_t)i * px, lab + (size_t)i * px);
    out->n = n_scenes;
    out->c = 1;
    out->h = out->w = out->th = out->tw = size;
    out->n_classes = items->n_classes + 1;
    out->images = img;
    out->targets = lab;
    out->owned = mem;
    out->alloc = alloc;
    return DDL_OK;
}
