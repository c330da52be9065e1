/* mpi_allreduce.c - the peer of `ddl-bench allreduce`: times the MPI library's own blocking
 * MPI_Allreduce (float32 sum, in place) and prints the same columns, so busbw can be compared
 * side by side. Not part of libddl; built by tools/bench/busbw.sh with mpicc.
 *
 *   mpirun -np 2 mpi_allreduce [-b 256K] [-e 8M] [-f 32] [--iters 20] [--warmup 5]
 *
 * time is the mean of --iters timed calls after --warmup untimed ones (the first checked), the
 * slowest rank's;
 * algbw = bytes / time; busbw = algbw * 2 (n - 1) / n (nccl-tests); check verifies the sum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end), mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024;
    else if (*end == 'M' || *end == 'm')
        mul = 1024.0 * 1024;
    else if (*end == 'G' || *end == 'g')
        mul = 1024.0 * 1024 * 1024;
    return v > 0 ? (size_t)(v * mul) : 0;
}

int main(int argc, char **argv)
{
    size_t lo = 256 << 10, hi = 8 << 20;
    double factor = 32;
    int iters = 20, warmup = 5, rank, n;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b"))
            lo = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-e"))
            hi = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-f"))
            factor = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup"))
            warmup = atoi(argv[i + 1]);
    }
    if (!lo || lo > hi || factor <= 1 || iters < 1 || warmup < 0) {
        fprintf(stderr, "usage: mpi_allreduce [-b MIN] [-e MAX] [-f FACTOR] [--iters K] [--warmup W]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    float *buf = malloc(hi + 64);
    int failed = !buf;
    if (rank == 0) {
        printf("# MPI_Allreduce (blocking, in place): %d ranks, float32 sum, %d iterations after %d warmup\n", n,
               iters, warmup);
        printf("%12s %12s %12s %10s %10s %6s\n", "bytes", "count", "time_us", "algbw_GBs", "busbw_GBs", "check");
    }
    for (double b = (double)lo; !failed && b <= (double)hi * 1.0000001; b *= factor) {
        int count = (int)((size_t)b / sizeof(float));
        for (int i = 0; i < count; i++)
            buf[i] = (float)(i % 17) + (float)rank;
        MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* checked, untimed */
        long bad = 0;
        for (int i = 0; i < count; i++)
            bad += buf[i] != (float)n * (float)(i % 17) + (float)(n * (n - 1) / 2);
        for (int k = 1; k < warmup; k++)
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < iters; k++)
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = (MPI_Wtime() - t0) / iters, worst;
        MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            double alg = (double)count * sizeof(float) / worst / 1e9;
            printf("%12zu %12d %12.2f %10.3f %10.3f %6s\n", (size_t)count * sizeof(float), count, worst * 1e6, alg,
                   alg * 2.0 * (n - 1) / n, bad ? "FAIL" : "ok");
        }
        failed |= bad != 0;
    }
    free(buf);
    MPI_Finalize();
    return failed;
}
