/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/small_copy: the launchers of its CUDA half (small_copy_kernels.cu) for its C half. */
#ifndef BENCH_SMALL_COPY_H
#define BENCH_SMALL_COPY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most bytes a copy whose data travels in the kernel's parameters carries (with the
 * destination and the length inside CUDA's 4 KiB of parameters). */
#define BENCH_SMALL_PARAM_MAX 4032u

/**
 * Copies @a len bytes from @a src to @a dst by the stores of a kernel launched on the current
 * device, stream @a stream (both pointers that device can reach: its own memory, or another
 * GPU's with peer access on). Does not wait. @return 0, or -EIO (the launch failed).
 */
int bench_small_sm_copy(void *dst, const void *src, size_t len, void *stream);

/**
 * Writes the @a len bytes at host address @a src (at most BENCH_SMALL_PARAM_MAX) to @a dst by
 * a kernel that gets them in its parameters (no copy engine, no host memory read by the GPU).
 * Does not wait. @return 0, -EINVAL (too long), or -EIO.
 */
int bench_small_param_write(void *dst, const void *src, size_t len, void *stream);

#ifdef __cplusplus
}
#endif

#endif
