/* SPDX-License-Identifier: BSD-3-Clause */
/* What the device-kernel examples share between their device code (a .cu file, compiled by
 * nvcc for a GPU or as host C for the emulated device) and their host program (C). */
#ifndef RINGK_EXAMPLE_GPU_H
#define RINGK_EXAMPLE_GPU_H

#include <ringk/api/ringk_device.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
/* Memory that a device kernel and the host both use (a kernel's argument): pinned host memory
 * mapped into the device under CUDA, plain memory on the emulated device; zeroed. *dev_p gets
 * the address the device uses. Allocate it before the kernels start: nothing may allocate
 * while device kernels run (a CUDA allocation can wait for them). NULL when it fails. */
void *example_shared_alloc(size_t bytes, void **dev_p);
void example_shared_free(void *host);
/* Memory of the place a device kernel runs, for its own arrays: device memory when there is a
 * CUDA device, else plain zeroed memory (the kernel then runs on the CPU or the emulated
 * device). Same rule: before the kernels start. */
void *example_device_alloc(size_t bytes);
void example_device_free(void *p);
/* "GPU", "emulated device" or "CPU" for ringk_kernel_stats_t.device */
const char *example_where(int device);
#ifdef __cplusplus
}
#endif

/* Example code shared by a device handler and a CPU handler: device and host code under nvcc. */
#if defined(__CUDACC__)
#  define EXAMPLE_HD static __host__ __device__ inline
#else
#  define EXAMPLE_HD static inline
#endif

#endif
