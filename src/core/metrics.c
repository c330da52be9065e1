/* metrics.c - accuracy, foreground dice and mean IoU from a confusion matrix [truth][predicted]:
 * what ddl_trainer_evaluate reports and what a predictor's caller counts. Pure arithmetic on
 * the caller's struct; knows nothing of models or ranks. */
#include "impl.h"

void ddl_eval_metrics(ddl_eval_stats *e, int K)
{
    const int64_t *cm = e->confusion;
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
