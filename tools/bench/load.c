/* load.c - make bench's image loading figure: ddl_dataset_load_folder on DIR (a folder of class
 * folders), channels 3, resized to SIZE x SIZE, on THREADS threads; prints the best of ROUNDS
 * loads as images/s. Usage: load DIR SIZE THREADS ROUNDS. */
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

int main(int argc, char **argv)
{
    if (argc != 5)
        return fprintf(stderr, "usage: load DIR SIZE THREADS ROUNDS\n"), 2;
    int size = atoi(argv[2]), rounds = atoi(argv[4]);
    ddl_set_threads(atoi(argv[3]));
    ddl_folder_config cfg = {.channels = 3, .height = size, .width = size};
    ddl_dataset d;
    char err[512];
    double best = 1e30;
    int n = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = bench_now();
        if (ddl_dataset_load_folder(argv[1], &cfg, NULL, &d, NULL, err, sizeof err) != DDL_OK)
            return fprintf(stderr, "load: %s\n", err), 1;
        double t = bench_now() - t0;
        best = t < best ? t : best;
        n = d.n;
        ddl_dataset_free(&d);
    }
    printf("images=%d threads=%s size=%d best_s=%.4f images_per_sec=%.0f\n", n, argv[3], size, best, n / best);
    return 0;
}
