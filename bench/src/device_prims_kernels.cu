// SPDX-License-Identifier: BSD-3-Clause
// bench/device_prims' kernel: one thread times each primitive the device loop is made of with
// %globaltimer, in a loop whose every turn depends on the one before (so that the time per turn
// is the primitive's latency, not its throughput), and writes the ns per turn.
#include "bench/src/device_prims.h"

#include <cuda/atomic>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>

#define SYS(p) cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*(p))
#define GPU(p) cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*(p))

// word indices of the 512 of each buffer: a chain of reads (w[i] = the next index, 8 words, a
// cache line, on), and words of their own for stores and atomics
#define CHAIN  511u
#define SLOT_A 130u
#define SLOT_B 200u
#define STORES 256u

__device__ static uint64_t now_ns(void)
{
    uint64_t t;

    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ static double per(uint64_t t0, uint64_t t1, uint32_t n)
{
    return (double)(t1 - t0) / n;
}

__global__ static void prims_kernel(uint64_t *host, uint64_t *dev, uint32_t n, double *ns,
                                    uint64_t *sink)
{
    uint64_t t0, t1, idx = 0, sum = 0, v, step = ~0ull;
    uint32_t i, j;

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        idx = SYS(&host[idx]).load(cuda::memory_order_relaxed) & CHAIN;
    }
    ns[PRIM_HOST_DEP_READ] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0, v = 0; i < n; i++) {
        uint64_t w[32];
#pragma unroll
        for (j = 0; j < 32; j++) {
            w[j] = SYS(&host[(v + j) & CHAIN]).load(cuda::memory_order_relaxed);
        }
#pragma unroll
        for (j = 0; j < 32; j++) {
            sum += w[j];
        }
        v = (v + 32 + (sum >> 63)) & 0x1e0u; // the next turn's reads wait for these
    }
    ns[PRIM_HOST_POLL32] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        idx = SYS(&host[idx]).load(cuda::memory_order_acquire) & CHAIN;
    }
    ns[PRIM_HOST_ACQ_SYS] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0, v = 0; i < n; i++) {
        v = atomicAdd_system((unsigned long long*)&host[SLOT_A + (v >> 63)], 1ull);
    }
    ns[PRIM_HOST_ATOMIC_SYS] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        SYS(&host[SLOT_B]).store(i, cuda::memory_order_release);
    }
    ns[PRIM_HOST_REL_SYS] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
#pragma unroll
        for (j = 0; j < 8; j++) {
            SYS(&host[STORES + j]).store(i, cuda::memory_order_relaxed);
        }
        SYS(&host[SLOT_B]).store(i, cuda::memory_order_release);
    }
    ns[PRIM_HOST_REL_AFTER_8] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
#pragma unroll
        for (j = 0; j < 32; j++) {
            SYS(&host[STORES + j]).store(i, cuda::memory_order_relaxed);
        }
        SYS(&host[SLOT_B]).store(i, cuda::memory_order_release);
    }
    ns[PRIM_HOST_REL_AFTER_32] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        GPU(&dev[SLOT_B]).store(i, cuda::memory_order_relaxed);
        __threadfence_system();
    }
    ns[PRIM_FENCE_SYS] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        GPU(&dev[SLOT_B]).store(i, cuda::memory_order_relaxed);
        __threadfence();
    }
    ns[PRIM_FENCE_GPU] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0, idx = 0; i < n; i++) {
        idx = GPU(&dev[idx]).load(cuda::memory_order_acquire) & CHAIN;
    }
    ns[PRIM_DEV_ACQ_GPU] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0, idx = 0; i < n; i++) {
        idx = dev[idx] & CHAIN;
    }
    ns[PRIM_DEV_DEP_READ] = per(t0, now_ns(), n);
    sum += idx;

    t0 = now_ns();
    for (i = 0, idx = 0; i < n; i++) {
        v   = GPU(&dev[SLOT_A]).load(cuda::memory_order_acquire);
        idx = dev[(idx + (v >> 63)) & CHAIN] & CHAIN;
    }
    ns[PRIM_DEV_L2_AFTER_ACQ] = per(t0, now_ns(), n);
    sum += idx;

    t0 = now_ns();
    for (i = 0, v = 0; i < n; i++) {
        uint64_t e = v;

        GPU(&dev[SLOT_B]).compare_exchange_strong(e, v + 1, cuda::memory_order_relaxed,
                                                  cuda::memory_order_relaxed);
        v = e + 1;
    }
    ns[PRIM_DEV_CAS_RLX] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        uint64_t e = v;

        GPU(&dev[SLOT_B]).compare_exchange_strong(e, v + 1, cuda::memory_order_acq_rel,
                                                  cuda::memory_order_relaxed);
        v = e + 1;
    }
    ns[PRIM_DEV_CAS_ACQREL] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        dev[STORES] = i; // the payload a publish orders
        GPU(&dev[SLOT_A + 1]).store(i, cuda::memory_order_release);
    }
    ns[PRIM_DEV_REL_GPU] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0; i < n; i++) {
        __nanosleep(100);
    }
    ns[PRIM_NANOSLEEP_100] = per(t0, now_ns(), n);

    t0 = now_ns();
    for (i = 0, v = 0; i < n; i++) {
        t1 = now_ns();
        if ((t1 > v) && (v != 0) && (t1 - v < step)) {
            step = t1 - v;
        }
        v = t1;
    }
    ns[PRIM_GLOBALTIMER]      = per(t0, now_ns(), n);
    ns[PRIM_GLOBALTIMER_STEP] = (step == ~0ull) ? 0.0 : (double)step;
    *sink = sum + idx;
}

extern "C" int bench_prims_run(uint64_t *host, uint64_t *host_dev, uint64_t *dev, uint32_t iters,
                               double *ns)
{
    double *ns_d;
    uint64_t *sink;
    cudaError_t err;

    (void)host;
    if (((err = cudaMalloc((void**)&ns_d, PRIM_COUNT * sizeof(double))) != cudaSuccess) ||
        ((err = cudaMalloc((void**)&sink, sizeof(uint64_t))) != cudaSuccess)) {
        fprintf(stderr, "device_prims: cudaMalloc: %s\n", cudaGetErrorString(err));
        return -EIO;
    }
    prims_kernel<<<1, 1>>>(host_dev, dev, iters, ns_d, sink);
    if (((err = cudaGetLastError()) != cudaSuccess) ||
        ((err = cudaMemcpy(ns, ns_d, PRIM_COUNT * sizeof(double), cudaMemcpyDeviceToHost)) !=
         cudaSuccess)) {
        fprintf(stderr, "device_prims: the kernel: %s\n", cudaGetErrorString(err));
        return -EIO;
    }
    cudaFree(ns_d);
    cudaFree(sink);
    return 0;
}
