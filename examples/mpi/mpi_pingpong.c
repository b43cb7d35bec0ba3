/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI ping-pong from 1 byte to 16 MiB with every byte verified, and a latency figure at 8 B.
 * Run over ringk with: ringk-run mpirun -np 2 --mca pml ucx -x UCX_TLS=ringk,self ... */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t pat(size_t size, size_t i, int iter)
{
    return (uint8_t)(size * 7 + i * 13 + iter);
}

int main(int argc, char **argv)
{
    const size_t max = 16 << 20;
    int rank, nranks, iter, iters, errors = 0, lat_iters = 20000;
    uint8_t *buf;
    size_t size, i;
    double t0, lat;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2) {
        if (rank == 0) {
            fprintf(stderr, "mpi_pingpong: needs exactly 2 ranks, got %d\n", nranks);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (argc > 1) {
        lat_iters = atoi(argv[1]);
    }
    buf = malloc(max);
    if (buf == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size = 1; size <= max; size *= 2) {
        iters = (size <= 65536) ? 20 : 4;
        for (iter = 0; iter < iters; iter++) {
            if (rank == 0) {
                for (i = 0; i < size; i++) {
                    buf[i] = pat(size, i, iter);
                }
                MPI_Send(buf, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                memset(buf, 0, size);
                MPI_Recv(buf, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (i = 0; i < size; i++) {
                    if (buf[i] != (uint8_t)(pat(size, i, iter) ^ 0x5a)) {
                        errors++;
                        break;
                    }
                }
            } else {
                MPI_Recv(buf, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (i = 0; i < size; i++) {
                    if (buf[i] != pat(size, i, iter)) {
                        errors++;
                        break;
                    }
                    buf[i] ^= 0x5a; /* the reply differs from the request */
                }
                MPI_Send(buf, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
    }
    /* 8-byte latency */
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (iter = 0; iter < lat_iters; iter++) {
        if (rank == 0) {
            MPI_Send(buf, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    lat = (MPI_Wtime() - t0) / lat_iters / 2 * 1e6;
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_pingpong: sizes 1 B .. 16 MiB verified, %d errors\n", errors);
        printf("mpi_pingpong: 8 B one-way latency %.3f us\n", lat);
    }
    free(buf);
    MPI_Finalize();
    return errors ? 1 : 0;
}
