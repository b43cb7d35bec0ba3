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

#ifdef __cplusplus
}
#endif

#endif
