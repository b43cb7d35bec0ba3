/* SPDX-License-Identifier: BSD-3-Clause */
/* Host entry points of the CUDA kernels in kernels/. */
#ifndef RINGK_KERNELS_H
#define RINGK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Number of CUDA devices; 0 with the reason in @a why when there is none or CUDA fails. */
int ringk_kernels_device_count(char *why, size_t why_len);

/**
 * Runs the ring protocol on the GPU: block 0 produces @a nmsgs messages of 0 to 3 cells into a
 * device-resident ring, block 1 consumes and checks every byte.
 * @return 0 with the number of verified messages in @a verified_p, or a negative errno.
 */
int ringk_kernels_selftest(uint32_t nmsgs, uint32_t ncells, uint32_t cell_size,
                           unsigned *verified_p, char *why, size_t why_len);

/** An element of the P2P queue tests. */
typedef struct ringk_kernels_p2pq_elem {
    uint64_t n, check;
} ringk_kernels_p2pq_elem_t;

struct ringk_p2pq_dev;

/**
 * Launches, on CUDA device @a dev and stream @a stream (a cudaStream_t of that device), one
 * thread that receives @a n elements { i, i * 0x9e3779b97f4a7c15 } from @a in (NULL: makes
 * them) and sends each to @a out (NULL: drops it). *@a status (mapped or device memory) is then
 * 0, 1 for a wrong element, 2 when it waited 20 s for an element or for room.
 * @return 0 once launched, or -ENODEV / -EIO.
 */
int ringk_kernels_p2pq_echo(int dev, struct ringk_p2pq_dev *in, struct ringk_p2pq_dev *out,
                            uint64_t n, int *status, void *stream);

#ifdef __cplusplus
}
#endif

#endif
