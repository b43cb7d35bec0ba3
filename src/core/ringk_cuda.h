/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: the only code that calls the CUDA runtime. Built without CUDA, every
 * call reports the GPU paths unavailable. */
#ifndef RINGK_CORE_CUDA_H
#define RINGK_CORE_CUDA_H

#include <stddef.h>

/** Number of usable CUDA devices; 0 with the reason in @a why when there is none. */
int ringk_cuda_device_count(char *why, size_t why_len);

/**
 * The run-time canary of a P2P path: device @a busid_a writes a pattern into memory of device
 * @a busid_b through peer access, reads it back the same way and compares, so a path the
 * topology allows is trusted only once it has worked.
 * @return 0 when verified; -ENODEV (no CUDA, no such device), -EPERM (no peer access) or -EIO
 *         (wrong data or a CUDA error), with the reason in @a why.
 */
int ringk_cuda_p2p_canary(const char *busid_a, const char *busid_b, char *why, size_t why_len);

#endif
