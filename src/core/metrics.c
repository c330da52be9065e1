/* metrics.c - accuracy, foreground dice and mean IoU from a confusion matrix [truth][predicted]:
 * what ddl_trainer_evaluate reports and what a predictor's caller counts; and the counting of
 * correct predictions (and of the confusion matrix) from logits and labels, which the trainer
 * does every step. Pure arithmetic on the caller's buffers; knows nothing of models or ranks. */
#include "impl.h"

void ddl_eval_metrics(ddl_eval_stats *e, int K)
{
    const int64_t *cm = e->confusion;
    if (!cm)
        return;
    int64_t total = 0, diag = 0, tp_fg = 0, fp_fg = 0, fn_fg = 0;
    double iou_sum = 0.0;
    int present = 0;
    for (int i = 0; i < K; i++) {
        int64_t row = 0, col = 0;
        for (int j = 0; j < K; j++) {
            total += cm[i * K + j];
            row += cm[i * K + j];
            col += cm[j * K + i];
            if (i >= 1 && j >= 1)
                tp_fg += cm[i * K + j];
        }
        diag += cm[i * K + i];
        if (row + col > 0) {
            iou_sum += (double)cm[i * K + i] / (double)(row + col - cm[i * K + i]);
            present++;
        }
        if (i >= 1) {
            fn_fg += cm[i * K + 0];
            fp_fg += cm[0 * K + i];
        }
    }
    e->accuracy = total ? (double)diag / (double)total : 0.0;
    e->miou = present ? iou_sum / present : 0.0;
    e->dice = (2 * tp_fg + fp_fg + fn_fg) ? 2.0 * (double)tp_fg / (double)(2 * tp_fg + fp_fg + fn_fg) : 0.0;
}

/* ARGMAX_ROW: positions per pass of predict_rows. */
#define ARGMAX_ROW 256
#if defined(__GNUC__) && !defined(__clang__)
#define OWN_STORES __attribute__((optimize("allow-store-data-races")))
#else
#define OWN_STORES
#endif

/* predict_rows: the predicted class (the first of the largest logits) at positions [p0, p0 +
 * len) of one sample's logits (C, S), len <= ARGMAX_ROW. Classes outside, positions inside: the
 * compare-and-keep runs down contiguous rows in vector registers. gcc turns the selects into
 * conditional stores, which it only vectorises when told that nobody else sees top and best
 * (true: they are this call's and its caller's stack): a third of the time of a loop per position. */
OWN_STORES static void predict_rows(const float *l, int C, int S, int p0, int len, int *restrict best)
{
    float top[ARGMAX_ROW];
    for (int p = 0; p < len; p++) {
        top[p] = l[p0 + p];
        best[p] = 0;
    }
    for (int c = 1; c < C; c++) {
        const float *row = l + (size_t)c * S + p0;
        for (int p = 0; p < len; p++) {
            int more = row[p] > top[p];
            top[p] = more ? row[p] : top[p];
            best[p] = more ? c : best[p];
        }
    }
}

/* ddl__count_correct: see impl.h. */
int64_t ddl__count_correct(const float *logits, const uint16_t *y, int n, int C, int S, int64_t *confusion)
{
    int64_t correct = 0;
    int best[ARGMAX_ROW];
    for (int i = 0; i < n; i++)
        for (int p0 = 0; p0 < S; p0 += ARGMAX_ROW) {
            int len = S - p0 < ARGMAX_ROW ? S - p0 : ARGMAX_ROW;
            const uint16_t *yi = y + (size_t)i * S + p0;
            predict_rows(logits + (size_t)i * C * S, C, S, p0, len, best);
            for (int p = 0; p < len; p++)
                correct += best[p] == yi[p];
            for (int p = 0; confusion && p < len; p++)
                if (yi[p] < C) /* an ignored target (>= C) has no row */
                    confusion[yi[p] * C + best[p]]++;
        }
    return correct;
}
