/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI allreduce and alltoall at several sizes, results checked against the closed form. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    static const int counts[] = {1, 7, 1000, 65536, 1 << 20};
    int rank, nranks, c, r, errors = 0;
    int64_t *in, *out, expect;
    size_t i, n;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (c = 0; c < (int)(sizeof(counts) / sizeof(counts[0])); c++) {
        n   = counts[c];
        in  = malloc(n * nranks * sizeof(*in));
        out = malloc(n * nranks * sizeof(*out));
        for (i = 0; i < n; i++) {
            in[i] = (int64_t)i * (rank + 1) + rank;
        }
        MPI_Allreduce(in, out, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        for (i = 0; i < n; i++) {
            /* sum over r of i*(r+1) + r */
            expect = (int64_t)i * nranks * (nranks + 1) / 2 + (int64_t)nranks * (nranks - 1) / 2;
            if (out[i] != expect) {
                errors++;
                break;
            }
        }
        /* alltoall: block for rank r holds (rank, r, index) */
        if (n <= 65536) {
            for (r = 0; r < nranks; r++) {
                for (i = 0; i < n; i++) {
                    in[r * n + i] = ((int64_t)rank << 40) | ((int64_t)r << 20) | (int64_t)i;
                }
            }
            MPI_Alltoall(in, (int)n, MPI_INT64_T, out, (int)n, MPI_INT64_T, MPI_COMM_WORLD);
            for (r = 0; r < nranks; r++) {
                for (i = 0; i < n; i++) {
                    if (out[r * n + i] != (((int64_t)r << 40) | ((int64_t)rank << 20) | (int64_t)i)) {
                        errors++;
                        r = nranks;
                        break;
                    }
                }
            }
        }
        free(in);
        free(out);
    }
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_collectives: %d ranks, allreduce and alltoall verified, %d errors\n", nranks,
               errors);
    }
    MPI_Finalize();
    return errors ? 1 : 0;
}
