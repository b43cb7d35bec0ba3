/* SPDX-License-Identifier: BSD-3-Clause */
/* What the CUDA benchmarks of one file each share: a CUDA call that fails ends the program
 * with the call and CUDA's error, the monotonic clock, the order of doubles for qsort. */
#ifndef BENCH_CUDA_H
#define BENCH_CUDA_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* @a call (a CUDA runtime call), or exit 1 naming it, as program @a prog. */
#define BENCH_CK(prog, call) \
    do { \
        cudaError_t err_ = (call); \
        if (err_ != cudaSuccess) { \
            fprintf(stderr, "%s: %s: %s\n", (prog), #call, cudaGetErrorString(err_)); \
            exit(1); \
        } \
    } while (0)

static inline double bench_now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

#endif
