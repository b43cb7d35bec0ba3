/* SPDX-License-Identifier: BSD-3-Clause */
/* examples/gpu/matvec: a matrix-vector product per message. A kernel "mv" holds an N x N matrix;
 * each message brings a vector x and gets y = A x back. What its device handler
 * (matvec_kernels.cu, every thread of the kernel a share of the rows) and its CPU handler
 * (matvec.c, one thread) share. */
#ifndef RINGK_EXAMPLE_GPU_MATVEC_H
#define RINGK_EXAMPLE_GPU_MATVEC_H

#include "examples/gpu/example_gpu.h"

#define MV_N_MAX 512

/* a message either way: a sequence number, then N doubles (x to "mv", y back); to "mv" with
 * seq 0 and no vector: fill the matrix */
typedef struct {
    uint64_t seq;
    double   v[];
} mv_msg_t;

/* mv's state: the matrix, and the reply it builds (memory of the place it runs) */
typedef struct {
    int32_t   n;
    int32_t   threads_used;  /* a device kernel: the threads its rows took */
    double   *a;             /* n x n, row-major */
    mv_msg_t *out;           /* the reply: seq, y */
    uint64_t  bad;           /* malformed messages */
} mv_state_t;

EXAMPLE_HD uint32_t mv_len(int n)
{
    return (uint32_t)(sizeof(mv_msg_t) + (size_t)n * sizeof(double));
}

/* The matrix's entries, as the kernel fills it (its first message) and the host checks it. */
EXAMPLE_HD double mv_a(int i, int j)
{
    return ((i * 13 + j * 7) % 23) / 11.0 - 1.0;
}

/* Entries part, part + parts, ... of the matrix (row-major), filled. */
EXAMPLE_HD void mv_fill(mv_state_t *s, int part, int parts)
{
    int idx;

    for (idx = part; idx < s->n * s->n; idx += parts) {
        s->a[idx] = mv_a(idx / s->n, idx % s->n);
    }
}

/* Rows part, part + parts, ... of y = A x into out->v. */
EXAMPLE_HD void mv_rows(const mv_state_t *s, const double *x, int part, int parts)
{
    const double *a = s->a; /* read once: s may be across the bus */
    double *y       = s->out->v;
    int n = s->n, i, j;

    for (i = part; i < n; i += parts) {
        double sum = 0.0;

        for (j = 0; j < n; j++) {
            sum += a[(size_t)i * n + j] * x[j];
        }
        y[i] = sum;
    }
}

#ifdef __cplusplus
extern "C" {
#endif
extern const ringk_device_entry_t example_mv_entry;
#ifdef __cplusplus
}
#endif

#endif
