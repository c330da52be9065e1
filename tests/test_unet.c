/* test_unet.c - the U-Net plugin and the scene generator: a finite-difference gradient check of
 * a whole small U-Net under cross-entropy + dice, PyTorch parameter names, samples independent
 * of each other (GroupNorm), a wrong input size refused, scenes deterministic and labelled in
 * range, and a few training steps on tiny scenes lowering the loss. */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

enum { K = 11, HW = 16, S = HW * HW };

/* ---- synthetic items: 8x8 shapes of 10 classes, so the test needs no data files ---- */

static void make_items(ddl_dataset *d, uint8_t *img, uint8_t *lab, int n, uint64_t seed)
{
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        int k = (int)ddl_rng_below(&r, 10);
        lab[i] = (uint8_t)k;
        for (int p = 0; p < 64; p++) {
            int y = p / 8, x = p % 8;
            int on = k < 5 ? (y >= k / 2 && y < 8 - k / 2 && x >= 1 && x < 7) : ((x + y + k) % 3 != 0 && y > 1);
            img[i * 64 + p] = (uint8_t)(on ? 120 + 20 * (k % 5) + ddl_rng_below(&r, 40) : ddl_rng_below(&r, 20));
        }
    }
    memset(d, 0, sizeof *d);
    d->n = n;
    d->c = 1;
    d->h = d->w = 8;
    d->th = d->tw = 1;
    d->n_classes = 10;
    d->images = img;
    d->targets = lab;
}

static ddl_model *small_unet(int batch, int in_hw)
{
    ddl_model_config mc = {.batch = batch, .in_c = 1, .in_h = in_hw, .in_w = in_hw, .n_classes = K,
                           .plugin_config = &(ddl_unet_config){.depth = 2, .width = 4}};
    ddl_model *m = NULL;
    return ddl_model_create(ddl_model_unet(), &mc, NULL, &m, NULL, 0) == DDL_OK ? m : NULL;
}

/* ---- gradient check of the whole network ---- */

/* loss_of: summed cross-entropy plus summed dice (scale 1), in double. */
static double loss_of(ddl_model *m, const float *x, const uint16_t *y, int B, float *probs, float *dl)
{
    const float *logits = ddl_model_forward(m, x, B, 1, NULL);
    if (dl)
        memset(dl, 0, sizeof(float) * (size_t)B * K * S);
    double l = ddl_softmax_xent(B, K, S, logits, y, 1.0f, probs, dl);
    return l + ddl_dice_loss(B, K, S, probs, y, 1.0f, dl);
}

/* central_difference: (L(w + eps) - L(w - eps)) / 2 eps for the parameter at *w. */
static double central_difference(ddl_model *m, const float *x, const uint16_t *y, int B, float *probs, float *w,
                                 float eps)
{
    float keep = *w;
    *w = keep + eps;
    double lp = loss_of(m, x, y, B, probs, NULL);
    *w = keep - eps;
    double lm = loss_of(m, x, y, B, probs, NULL);
    *w = keep;
    return (lp - lm) / ((double)(keep + eps) - (double)(keep - eps));
}

static void test_gradients(void)
{
    enum { B = 2 };
    ddl_model *m = small_unet(B, HW);
    CHECK(m != NULL);
    if (!m)
        return;
    int n_t = ddl_model_n_tensors(m);
    CHECK(n_t == 14 * 2 + 8);
    CHECK(!strcmp(ddl_model_tensor(m, 0)->name, "down0.conv1.weight"));
    CHECK(!strcmp(ddl_model_tensor(m, 1)->name, "down0.norm1.weight"));
    CHECK(!strcmp(ddl_model_tensor(m, 12)->name, "bottom.conv1.weight"));
    CHECK(!strcmp(ddl_model_tensor(m, 18)->name, "up1.up.weight"));
    const ddl_param_info *up = ddl_model_tensor(m, 18), *last = ddl_model_tensor(m, n_t - 1);
    CHECK(up->shape[0] == 16 && up->shape[1] == 8 && up->shape[2] == 2 && up->shape[3] == 2); /* (in, out, k, k) */
    CHECK(!strcmp(last->name, "head.bias") && last->offset + last->count == ddl_model_n_params(m));
    int c, h, w;
    ddl_model_output_shape(m, &c, &h, &w);
    CHECK(c == K && h == HW && w == HW);

    ddl_model_init_weights(m, 5);
    float *p = ddl_model_params(m), *g = ddl_model_grads(m);
    ddl_rng r;
    ddl_rng_seed(&r, 9);
    for (size_t i = 0; i < ddl_model_n_params(m); i++) /* move norms and biases off their init values */
        p[i] += 0.05f * ddl_rng_normal(&r);
    static float x[B * S], probs[B * K * S], dl[B * K * S];
    static uint16_t y[B * S];
    for (int i = 0; i < B * S; i++) {
        x[i] = ddl_rng_normal(&r);
        y[i] = (uint16_t)((i / HW) % 8 < 3 ? 0 : 1 + ddl_rng_below(&r, K - 1));
    }
    ddl_model_zero_grads(m);
    loss_of(m, x, y, B, probs, dl);
    ddl_model_backward(m, x, B, dl);
    int bad = 0, checked = 0;
    for (int ti = 0; ti < n_t; ti++) {
        const ddl_param_info *t = ddl_model_tensor(m, ti);
        for (int k = 0; k < 4; k++) {
            size_t i = t->offset + ddl_rng_below(&r, (uint32_t)t->count);
            double ana = g[i], num[2];
            for (int e = 0; e < 2; e++)
                num[e] = central_difference(m, x, y, B, probs, &p[i], e ? 1e-3f : 3e-4f);
            checked++;
            /* ReLU and max-pool kinks bend the loss within a step, float rounding blurs small steps
             * (about 0.05 here, on gradients of 1 to 100): one of two step sizes must agree. */
            double tol = 0.1 + 3e-2 * fabs(ana);
            if (fabs(num[0] - ana) > tol && fabs(num[1] - ana) > tol) {
                bad++;
                fprintf(stderr, "%s[%zu]: numeric %.6g / %.6g analytic %.6g\n", t->name, i - t->offset, num[0],
                        num[1], ana);
            }
        }
    }
    CHECK(checked == 4 * n_t);
    CHECK(bad == 0);
    /* every parameter at once, along a random direction v: dL/dt of L(p + t v) is g . v */
    size_t np = ddl_model_n_params(m);
    float *v = (float *)malloc(np * sizeof(float)), *keep = (float *)malloc(np * sizeof(float));
    if (!v || !keep)
        return;
    memcpy(keep, p, np * sizeof(float));
    double gv = 0.0, l[2];
    for (size_t i = 0; i < np; i++) {
        v[i] = ddl_rng_normal(&r);
        gv += (double)g[i] * v[i];
    }
    for (int side = 0; side < 2; side++) {
        for (size_t i = 0; i < np; i++)
            p[i] = keep[i] + (side ? -3e-5f : 3e-5f) * v[i];
        l[side] = loss_of(m, x, y, B, probs, NULL);
    }
    memcpy(p, keep, np * sizeof(float));
    CHECK_NEAR((l[0] - l[1]) / (2 * 3e-5), gv, 3e-2 * fabs(gv)); /* small step: kinks */
    free(v);
    free(keep);
    ddl_model_destroy(m);
}

/* ---- samples are independent: GroupNorm's statistics are per sample ---- */

static void test_per_sample(void)
{
    ddl_model *m = small_unet(3, HW);
    CHECK(m != NULL);
    if (!m)
        return;
    ddl_model_init_weights(m, 1);
    static float x[3 * S], first[K * S];
    ddl_rng r;
    ddl_rng_seed(&r, 4);
    for (int i = 0; i < 3 * S; i++)
        x[i] = ddl_rng_normal(&r);
    memcpy(first, ddl_model_forward(m, x, 3, 1, NULL), sizeof first);
    const float *alone = ddl_model_forward(m, x, 1, 1, NULL);
    double diff = 0.0; /* not diff = fmax(diff, ...): gcc 12.2 for aarch64 crashes vectorising that */
    for (int i = 0; i < K * S; i++) {
        double d = fabs(alone[i] - first[i]);
        diff = d > diff ? d : diff;
    }
    CHECK_NEAR(diff, 0.0, 1e-5);
    ddl_model_destroy(m);
}

/* ---- configurations refused ---- */

static void test_bad_config(void)
{
    ddl_unet_config uc = {.depth = 2, .width = 4};
    ddl_model_config mc = {.batch = 2, .in_c = 1, .in_h = 18, .in_w = 16, .n_classes = K, .plugin_config = &uc};
    CHECK(ddl_model_sizeof(ddl_model_unet(), &mc) == 0); /* 18 is not divisible by 4 */
    ddl_model *m = (ddl_model *)1;
    CHECK(ddl_model_create(ddl_model_unet(), &mc, NULL, &m, NULL, 0) == DDL_EINVAL && m == NULL);
    mc.in_h = 16;
    uc.depth = 5; /* 16 is not divisible by 32 */
    CHECK(ddl_model_sizeof(ddl_model_unet(), &mc) == 0);
    uc.depth = 4;
    CHECK(ddl_model_sizeof(ddl_model_unet(), &mc) > 0);
    uc.depth = 7;
    mc.in_h = mc.in_w = 128;
    CHECK(ddl_model_sizeof(ddl_model_unet(), &mc) == 0); /* too deep */
    /* the built model's config points at the plugin's own copy of its settings, the defaults
     * filled in: a caller's struct may be gone by then */
    ddl_model_config dc = {.batch = 1, .in_c = 1, .in_h = 16, .in_w = 16, .n_classes = K, .plugin_config = &uc};
    uc = (ddl_unet_config){.depth = 0, .width = 5};
    ddl_model *built = NULL;
    CHECK(ddl_model_create(ddl_model_unet(), &dc, NULL, &built, NULL, 0) == DDL_OK);
    const ddl_unet_config *kept = built ? (const ddl_unet_config *)ddl_model_get_config(built)->plugin_config : NULL;
    CHECK(kept && kept != &uc && kept->depth == 3 && kept->width == 5);
    ddl_model_destroy(built);
    CHECK(ddl_model_find("unet") == ddl_model_unet());
    CHECK(!strcmp(ddl_model_unet()->name, "unet"));
}

/* ---- scenes ---- */

static void test_scenes(void)
{
    static uint8_t img[50 * 64], lab[50];
    ddl_dataset items, a, b, c;
    make_items(&items, img, lab, 50, 3);
    char err[DDL_ERR_BYTES];
    CHECK(ddl_dataset_make_scenes(&items, 20, HW, 3, 7, NULL, &a, err, sizeof err) == DDL_OK);
    CHECK(ddl_dataset_make_scenes(&items, 20, HW, 3, 7, NULL, &b, err, sizeof err) == DDL_OK);
    CHECK(ddl_dataset_make_scenes(&items, 20, HW, 3, 8, NULL, &c, err, sizeof err) == DDL_OK);
    CHECK(a.n == 20 && a.c == 1 && a.h == HW && a.w == HW && a.th == HW && a.tw == HW && a.n_classes == K);
    CHECK(!memcmp(a.images, b.images, 20 * S) && !memcmp(a.targets, b.targets, 20 * S));
    CHECK(memcmp(a.images, c.images, 20 * S) != 0 && memcmp(a.targets, c.targets, 20 * S) != 0);
    int in_range = 1, fg = 0, bright_fg = 0;
    for (int i = 0; i < 20 * S; i++) {
        in_range &= a.targets[i] < K;
        fg += a.targets[i] > 0;
        bright_fg += a.targets[i] > 0 && a.images[i] > 60;
    }
    CHECK(in_range);
    CHECK(fg > 20 * 10 && fg < 20 * S * 3 / 4); /* every scene has an item; not all is foreground */
    CHECK(bright_fg > fg / 2);                  /* labelled pixels are where the items are */
    /* a one-item scene carries one class only */
    ddl_dataset one;
    CHECK(ddl_dataset_make_scenes(&items, 5, HW, 1, 1, NULL, &one, err, sizeof err) == DDL_OK);
    int one_class = 1;
    for (int i = 0; i < 5; i++) {
        int cls = 0;
        for (int p = 0; p < S; p++) {
            int t = one.targets[i * S + p];
            if (t && !cls)
                cls = t;
            one_class &= !t || t == cls;
        }
    }
    CHECK(one_class);
    ddl_dataset_free(&a);
    ddl_dataset_free(&b);
    ddl_dataset_free(&c);
    ddl_dataset_free(&one);
    CHECK(a.images == NULL && a.n == 0);
    /* bad arguments are refused with a message */
    ddl_dataset bad;
    err[0] = 0;
    CHECK(ddl_dataset_make_scenes(&items, 10, 6, 2, 1, NULL, &bad, err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "canvas size 6") != NULL && bad.images == NULL);
    CHECK(ddl_dataset_make_scenes(&items, 0, HW, 2, 1, NULL, &bad, err, sizeof err) == DDL_EINVAL);
    CHECK(ddl_dataset_make_scenes(&a, 10, HW, 2, 1, NULL, &bad, err, sizeof err) == DDL_EINVAL); /* freed: empty */
}

/* ---- training lowers the loss ---- */

static void test_training(void)
{
    static uint8_t img[200 * 64], lab[200];
    ddl_dataset items, train;
    make_items(&items, img, lab, 200, 11);
    char err[DDL_ERR_BYTES];
    CHECK(ddl_dataset_make_scenes(&items, 64, HW, 2, 1, NULL, &train, err, sizeof err) == DDL_OK);
    ddl_model *m = small_unet(16, HW);
    CHECK(m != NULL);
    if (!m)
        return;
    float mean, std;
    ddl_dataset_stats(&train, &mean, &std);
    ddl_model_set_norm(m, mean, std);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 16;
    tc.optim.kind = DDL_OPTIM_ADAM;
    tc.optim.lr = 1e-2f;
    tc.dice_weight = 1.0f;
    ddl_trainer *tr = NULL;
    CHECK(ddl_trainer_create(&tc, m, &train, NULL, &tr, NULL, 0) == DDL_OK);
    if (!tr)
        return;
    double first = 0.0, last = 0.0, l = 0.0;
    ddl_eval_stats before, after;
    CHECK(ddl_trainer_evaluate(tr, &train, &before) == DDL_OK);
    for (int s = 0; s < 40; s++) {
        CHECK(ddl_trainer_step(tr, &l) == DDL_OK);
        if (s < 4)
            first += l / 4;
        if (s >= 36)
            last += l / 4;
    }
    CHECK(ddl_trainer_evaluate(tr, &train, &after) == DDL_OK);
    CHECK(last < 0.7 * first);
    CHECK(after.loss < 0.7 * before.loss);
    CHECK(after.dice > before.dice && after.dice > 0.6);
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
    ddl_dataset_free(&train);
}

int main(void)
{
    test_gradients();
    test_per_sample();
    test_bad_config();
    test_scenes();
    test_training();
    return TEST_END();
}
