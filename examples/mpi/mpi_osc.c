/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI one-sided put, get and accumulate (osc ucx) on a window, checked after each epoch. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define WIN_ELEMS (1 << 16)

int main(int argc, char **argv)
{
    int rank, nranks, peer, errors = 0, r;
    int64_t *base, *buf;
    MPI_Win win;
    size_t i;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Win_allocate(WIN_ELEMS * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD,
                     &base, &win);
    buf  = malloc(WIN_ELEMS * sizeof(int64_t));
    peer = (rank + 1) % nranks;

    /* put: each rank writes its pattern into the next rank's window */
    for (i = 0; i < WIN_ELEMS; i++) {
        base[i] = -1;
        buf[i]  = ((int64_t)rank << 32) | (int64_t)i;
    }
    MPI_Win_fence(0, win);
    MPI_Put(buf, WIN_ELEMS, MPI_INT64_T, peer, 0, WIN_ELEMS, MPI_INT64_T, win);
    MPI_Win_fence(0, win);
    r = (rank + nranks - 1) % nranks;
    for (i = 0; i < WIN_ELEMS; i++) {
        if (base[i] != (((int64_t)r << 32) | (int64_t)i)) {
            errors++;
            break;
        }
    }
    /* get: read the next rank's window back (it holds what its predecessor, we, put there) */
    MPI_Get(buf, WIN_ELEMS, MPI_INT64_T, peer, 0, WIN_ELEMS, MPI_INT64_T, win);
    MPI_Win_fence(0, win);
    for (i = 0; i < WIN_ELEMS; i++) {
        if (buf[i] != (((int64_t)rank << 32) | (int64_t)i)) {
            errors++;
            break;
        }
    }
    /* accumulate: every rank adds rank+1 into rank 0's first 1024 elements */
    for (i = 0; i < WIN_ELEMS; i++) {
        base[i] = 0;
        buf[i]  = rank + 1;
    }
    MPI_Win_fence(0, win);
    MPI_Accumulate(buf, 1024, MPI_INT64_T, 0, 0, 1024, MPI_INT64_T, MPI_SUM, win);
    MPI_Win_fence(0, win);
    if (rank == 0) {
        for (i = 0; i < 1024; i++) {
            if (base[i] != (int64_t)nranks * (nranks + 1) / 2) {
                errors++;
                break;
            }
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_osc: %d ranks, put, get and accumulate verified, %d errors\n", nranks, errors);
    }
    free(buf);
    MPI_Win_free(&win);
    MPI_Finalize();
    return errors ? 1 : 0;
}
