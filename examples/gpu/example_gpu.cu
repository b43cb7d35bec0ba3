// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory helpers of the device-kernel examples: compiled by nvcc, pinned mapped host
// memory (plain memory when there is no device); compiled as host C (the emulated device),
// plain memory.
#include "examples/gpu/example_gpu.h"

#include <stdlib.h>
#include <string.h>

void *example_shared_alloc(size_t bytes, void **dev_p)
{
#if defined(__CUDACC__)
    void *host = NULL;

    if (cudaHostAlloc(&host, bytes, cudaHostAllocMapped) != cudaSuccess) {
        /* no device (the kernels fall back to the CPU): plain memory */
        host   = calloc(1, bytes);
        *dev_p = host;
        return host;
    }
    if (cudaHostGetDevicePointer(dev_p, host, 0) != cudaSuccess) {
        cudaFreeHost(host);
        return NULL;
    }
    memset(host, 0, bytes);
    return host;
#else
    void *host = calloc(1, bytes);

    *dev_p = host;
    return host;
#endif
}

void example_shared_free(void *host)
{
#if defined(__CUDACC__)
    if (cudaFreeHost(host) != cudaSuccess) {
        free(host); /* it came from calloc */
    }
#else
    free(host);
#endif
}

void *example_device_alloc(size_t bytes)
{
#if defined(__CUDACC__)
    void *p = NULL;
    int n = 0;

    if ((cudaGetDeviceCount(&n) == cudaSuccess) && (n > 0)) {
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            return NULL;
        }
        cudaMemset(p, 0, bytes);
        cudaDeviceSynchronize(); /* before any kernel runs: nothing is resident yet */
        return p;
    }
#endif
    return calloc(1, bytes);
}

void example_device_free(void *p)
{
#if defined(__CUDACC__)
    int n = 0;

    if ((cudaGetDeviceCount(&n) == cudaSuccess) && (n > 0)) {
        cudaFree(p); /* after the context, and so its kernels, is gone */
        return;
    }
#endif
    free(p);
}

const char *example_where(int device)
{
    return (device >= 0) ? "GPU" : (device == RINGK_DEVICE_EMULATED) ? "emulated device" : "CPU";
}
