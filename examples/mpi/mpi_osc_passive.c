/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI one-sided passive target (osc ucx): lock / Rput / Rget / Accumulate / Fetch_and_op /
 * Compare_and_swap / unlock on every other rank's window, each result checked. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define WIN_ELEMS (1 << 15)

static int64_t pattern(int rank, size_t i)
{
    return ((int64_t)rank << 32) | (int64_t)i;
}

int main(int argc, char **argv)
{
    int rank, nranks, peer, errors = 0, round;
    int64_t *base, *buf, one = 1, old, cmp, val;
    size_t i, len;
    MPI_Request req;
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Win_allocate(WIN_ELEMS * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD,
                     &base, &win);
    buf = malloc(WIN_ELEMS * sizeof(int64_t));
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
    for (i = 0; i < WIN_ELEMS; i++) {
        base[i] = pattern(rank, i);
    }
    MPI_Win_unlock(rank, win);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Rget of every peer's whole window and of short pieces, shared lock */
    for (peer = 0; peer < nranks; peer++) {
        for (len = 1; len <= WIN_ELEMS; len *= 8) {
            MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
            MPI_Rget(buf, (int)len, MPI_INT64_T, peer, 0, (int)len, MPI_INT64_T, win, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            MPI_Win_unlock(peer, win);
            for (i = 0; i < len; i++) {
                if (buf[i] != pattern(peer, i)) {
                    fprintf(stderr, "rank %d: Rget %zu from %d: [%zu] = %lld\n", rank, len,
                            peer, i, (long long)buf[i]);
                    errors++;
                    break;
                }
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Rput into the next rank's second half, exclusive lock, then read back with Get */
    peer = (rank + 1) % nranks;
    for (i = 0; i < WIN_ELEMS / 2; i++) {
        buf[i] = -pattern(rank, i);
    }
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win);
    MPI_Rput(buf, WIN_ELEMS / 2, MPI_INT64_T, peer, WIN_ELEMS / 2, WIN_ELEMS / 2, MPI_INT64_T,
             win, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Win_unlock(peer, win);
    MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
    MPI_Get(buf + WIN_ELEMS / 2, WIN_ELEMS / 2, MPI_INT64_T, peer, WIN_ELEMS / 2, WIN_ELEMS / 2,
            MPI_INT64_T, win);
    MPI_Win_unlock(peer, win);
    for (i = 0; i < WIN_ELEMS / 2; i++) {
        if (buf[WIN_ELEMS / 2 + i] != -pattern(rank, i)) {
            fprintf(stderr, "rank %d: Rput/Get to %d: [%zu] = %lld\n", rank, peer, i,
                    (long long)buf[WIN_ELEMS / 2 + i]);
            errors++;
            break;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Accumulate, Fetch_and_op and Compare_and_swap on rank 0's element 0 from every rank */
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        base[0] = 0;
        base[1] = 0;
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (round = 0; round < 100; round++) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win);
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 1, MPI_SUM, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* the ranks in turn swap element 1 from the value the one before left: a chain */
    for (round = 0; round < nranks; round++) {
        if (rank == round) {
            cmp = (rank == 0) ? 100 * nranks : -rank;
            val = -1 - rank;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
            MPI_Compare_and_swap(&val, &cmp, &old, MPI_INT64_T, 0, 1, win);
            MPI_Win_unlock(0, win);
            if (old != cmp) {
                fprintf(stderr, "rank %d: Compare_and_swap found %lld\n", rank, (long long)old);
                errors++;
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        if ((base[0] != 100 * nranks) || (base[1] != -nranks)) {
            fprintf(stderr, "rank 0: accumulate %lld (expected %d), swaps %lld (expected %d)\n",
                    (long long)base[0], 100 * nranks, (long long)base[1], -nranks);
            errors++;
        }
        MPI_Win_unlock(0, win);
    }

    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_osc_passive: %d ranks, lock/Rget/Rput/Accumulate/Fetch_and_op/"
               "Compare_and_swap/unlock verified, %d errors\n", nranks, errors);
    }
    free(buf);
    MPI_Win_free(&win);
    MPI_Finalize();
    return errors ? 1 : 0;
}
