// SPDX-License-Identifier: BSD-3-Clause
// bench/small_copy's kernels: a copy by SM loads and stores, and a write of data carried in the
// kernel's parameters.
#include "bench/src/small_copy.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

struct bench_small_payload {
    uint8_t b[BENCH_SMALL_PARAM_MAX];
};

// 16 bytes a thread a step where both ends and the length allow it, else a byte at a time
__global__ static void bench_small_copy_kernel(uint8_t *dst, const uint8_t *src, size_t len)
{
    const size_t step = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    if ((((uintptr_t)dst | (uintptr_t)src | len) & 15u) == 0) {
        for (; i < len / 16; i += step) {
            ((uint4*)dst)[i] = ((const uint4*)src)[i];
        }
    } else {
        for (; i < len; i += step) {
            dst[i] = src[i];
        }
    }
}

__global__ static void bench_small_param_kernel(uint8_t *dst, bench_small_payload p,
                                                unsigned len)
{
    for (unsigned i = threadIdx.x; i < len; i += blockDim.x) {
        dst[i] = p.b[i];
    }
}

extern "C" int bench_small_sm_copy(void *dst, const void *src, size_t len, void *stream)
{
    const unsigned threads = 256;
    size_t units  = ((len & 15u) == 0) ? len / 16 : len;
    unsigned blocks = (unsigned)((units + threads - 1) / threads);

    if (blocks == 0) {
        blocks = 1;
    }
    if (blocks > 132) {
        blocks = 132; // a grid-stride loop: about one block an SM of an H100
    }
    bench_small_copy_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(
        (uint8_t*)dst, (const uint8_t*)src, len);
    return (cudaGetLastError() == cudaSuccess) ? 0 : -EIO;
}

extern "C" int bench_small_param_write(void *dst, const void *src, size_t len, void *stream)
{
    bench_small_payload p;

    if (len > BENCH_SMALL_PARAM_MAX) {
        return -EINVAL;
    }
    memcpy(p.b, src, len);
    bench_small_param_kernel<<<1, 128, 0, (cudaStream_t)stream>>>((uint8_t*)dst, p,
                                                                  (unsigned)len);
    return (cudaGetLastError() == cudaSuccess) ? 0 : -EIO;
}
