/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI one-sided latency and bandwidth, passive target (MPI_Win_lock_all on a window from
 * MPI_Win_allocate), rank 0 the origin and rank 1 the target; run with 2 ranks by
 * bench/ringk_vs_posix.sh over pml+osc ucx. Prints one line per case:
 *   mpi_rma CASE VALUE UNIT
 * Latency cases (usec per operation, each completed by MPI_Win_flush): put_8, get_8,
 * acc_8 (MPI_Accumulate MPI_SUM of one int64), fop_8 (MPI_Fetch_and_op MPI_SUM).
 * Bandwidth cases (MB/s, a window of 16 operations then one flush): put_65536, get_65536,
 * put_1048576. The target's window is checked after the puts and accumulates.
 * Then the same on a window of memory the program allocated and MPI_Win_create registered
 * (memory UCX only registers: ringk reaches it by cross-memory attach, posix,cma by active
 * messages): cw_put_8, cw_get_8 (latency), cw_put_1048576, cw_get_1048576 (bandwidth).
 *
 *   mpirun -np 2 mpi_rma [ITERS]      (default 20000 latency iterations)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN_BYTES (4 << 20)
#define BW_WINDOW 16
#define ACC_DISP  (WIN_BYTES - 16) /* the accumulate's counter (the window's unit is 1 byte) */
#define FOP_DISP  (WIN_BYTES - 8)  /* the fetch-and-op's */

static double lat(MPI_Win win, int kind, int iters, int64_t *buf)
{
    int64_t one = 1, old;
    double t0 = 0;
    int i;

    for (i = -iters / 10; i < iters; i++) {
        if (i == 0) {
            t0 = MPI_Wtime();
        }
        switch (kind) {
        case 0: MPI_Put(buf, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win); break;
        case 1: MPI_Get(buf, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win); break;
        case 2:
            MPI_Accumulate(&one, 1, MPI_INT64_T, 1, ACC_DISP, 1, MPI_INT64_T, MPI_SUM, win);
            break;
        default: MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 1, FOP_DISP, MPI_SUM, win); break;
        }
        MPI_Win_flush(1, win);
    }
    return (MPI_Wtime() - t0) * 1e6 / iters;
}

static double bw(MPI_Win win, int put, size_t size, int iters, char *buf)
{
    double t0 = 0;
    int i, j;

    for (i = -iters / 10; i < iters; i++) {
        if (i == 0) {
            t0 = MPI_Wtime();
        }
        for (j = 0; j < BW_WINDOW; j++) {
            if (put) {
                MPI_Put(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
            } else {
                MPI_Get(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
            }
        }
        MPI_Win_flush(1, win);
    }
    return (double)size * BW_WINDOW * iters / (MPI_Wtime() - t0) / 1e6;
}

int main(int argc, char **argv)
{
    int rank, nranks, iters = (argc > 1) ? atoi(argv[1]) : 20000, errors = 0;
    int64_t *base, *cbase, acc_expect;
    char *buf;
    MPI_Win win, cwin;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if ((nranks != 2) || (iters < 10)) {
        if (rank == 0) {
            fprintf(stderr, "mpi_rma: run with 2 ranks (got %d) and ITERS >= 10 (got %d)\n",
                    nranks, iters);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Win_allocate(WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    memset(base, 0, WIN_BYTES);
    buf = calloc(1, WIN_BYTES);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    if (rank == 0) {
        ((int64_t*)buf)[0] = 42;
        printf("mpi_rma put_8 %.3f usec\n", lat(win, 0, iters, (int64_t*)buf));
        printf("mpi_rma get_8 %.3f usec\n", lat(win, 1, iters, (int64_t*)buf + 1));
        errors += (((int64_t*)buf)[1] != 42);
        printf("mpi_rma acc_8 %.3f usec\n", lat(win, 2, iters, NULL));
        printf("mpi_rma fop_8 %.3f usec\n", lat(win, 3, iters, NULL));
        printf("mpi_rma put_65536 %.1f MB/s\n", bw(win, 1, 65536, iters / 20 + 10, buf));
        printf("mpi_rma get_65536 %.1f MB/s\n", bw(win, 0, 65536, iters / 20 + 10, buf));
        printf("mpi_rma put_1048576 %.1f MB/s\n", bw(win, 1, 1 << 20, iters / 200 + 10, buf));
    }
    MPI_Win_unlock_all(win);

    cbase = calloc(1, WIN_BYTES);
    MPI_Win_create(cbase, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &cwin);
    MPI_Win_lock_all(0, cwin);
    if (rank == 0) {
        memset(buf, 0, WIN_BYTES);
        ((int64_t*)buf)[0] = 43;
        printf("mpi_rma cw_put_8 %.3f usec\n", lat(cwin, 0, iters, (int64_t*)buf));
        printf("mpi_rma cw_get_8 %.3f usec\n", lat(cwin, 1, iters, (int64_t*)buf + 1));
        errors += (((int64_t*)buf)[1] != 43);
        printf("mpi_rma cw_put_1048576 %.1f MB/s\n", bw(cwin, 1, 1 << 20, iters / 200 + 10, buf));
        printf("mpi_rma cw_get_1048576 %.1f MB/s\n", bw(cwin, 0, 1 << 20, iters / 200 + 10, buf));
    }
    MPI_Win_unlock_all(cwin);
    MPI_Barrier(MPI_COMM_WORLD);
    if ((rank == 1) && ((cbase[0] != 43) || (cbase[1] != 43))) {
        fprintf(stderr, "mpi_rma: created window holds %lld %lld, expected 43 43\n",
                (long long)cbase[0], (long long)cbase[1]);
        errors++;
    }
    if (rank == 1) {
        /* accumulates add 1 per iteration, warm-up included */
        acc_expect = iters + iters / 10;
        if ((base[ACC_DISP / 8] != acc_expect) || (base[FOP_DISP / 8] != acc_expect)) {
            fprintf(stderr, "mpi_rma: target window holds %lld and %lld, expected %lld\n",
                    (long long)base[ACC_DISP / 8], (long long)base[FOP_DISP / 8],
                    (long long)acc_expect);
            errors++;
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_rma errors %d\n", errors);
    }
    free(buf);
    MPI_Win_free(&cwin);
    free(cbase);
    MPI_Win_free(&win);
    MPI_Finalize();
    return errors ? 1 : 0;
}
