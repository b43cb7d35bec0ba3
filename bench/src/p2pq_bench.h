/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/p2pq_bench: what its C half and its CUDA half (p2pq_bench_kernels.cu) share. */
#ifndef BENCH_P2PQ_BENCH_H
#define BENCH_P2PQ_BENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An element: its number, a check word derived from it, and padding to 64 bytes. */
typedef struct {
    uint64_t n, check;
    uint8_t  pad[48];
} bench_p2pq_elem_t;

#define BENCH_P2PQ_CHECK(n) ((uint64_t)(n) * 0x9e3779b97f4a7c15ull)

struct ringk_p2pq_dev;

/**
 * Launches one GPU thread on CUDA device @a dev, stream @a stream, that moves @a n elements:
 * receives each from @a in (or makes it, @a in NULL) and checks it, then sends it to @a out (or
 * drops it, @a out NULL). *@a status (mapped memory) gets 0 once done, 1 a bad element, 2 a
 * wait of more than 20 s. @return 0, -ENODEV, -EIO.
 */
int bench_p2pq_gpu_move(int dev, struct ringk_p2pq_dev *in, struct ringk_p2pq_dev *out,
                        uint64_t n, int *status, void *stream);

#ifdef __cplusplus
}
#endif

#endif
