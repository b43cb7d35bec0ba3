// SPDX-License-Identifier: BSD-3-Clause
// The raw references of bench/device_bench, which show what the hardware allows: a resident
// kernel answering a mapped host flag, a kernel launch per message, an SPSC ring and a
// ping-pong between two blocks of one launch in device memory.
#include "bench/src/device_bench.h"

#include <cuda/atomic>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
                        fprintf(stderr, "device_bench: %s: %s\n", #call, cudaGetErrorString(e_)); \
                        return -1; } } while (0)

// ---- raw references --------------------------------------------------------------------------

typedef cuda::atomic_ref<uint64_t, cuda::thread_scope_system> sys_u64;
typedef cuda::atomic_ref<uint64_t, cuda::thread_scope_device> dev_u64;

// Answers each new value of the host's flag in dev_flag: one system-scope acquire load polled,
// one release store back.
__global__ void flag_pong(uint64_t *host_flag, uint64_t *dev_flag)
{
    uint64_t last = 0, v;

    for (;;) {
        v = sys_u64(*host_flag).load(cuda::memory_order_acquire);
        if (v == BENCH_STOP) {
            return;
        }
        if (v != last) {
            sys_u64(*dev_flag).store(v, cuda::memory_order_release);
            last = v;
        }
    }
}

__global__ void launch_one(uint64_t *out, uint64_t value)
{
    sys_u64(*out).store(value + 1, cuda::memory_order_release);
}

// The ring kernel's handler work (device_bench_ring.cu's work) for messages seq .. seq + n - 1
// in one launch of one block: each its share, a barrier, thread 0 stores the message's seq.
__global__ void work_loop(bench_work_t *w, uint64_t iters, uint64_t seq, uint64_t n)
{
    uint64_t i;

    for (i = 0; i < n; i++) {
        bench_work_elem(w, blockIdx.x * blockDim.x + threadIdx.x, iters);
        __syncthreads();
        if ((threadIdx.x == 0) && (blockIdx.x == 0)) {
            sys_u64(*w->done).store(seq + i, cuda::memory_order_release);
        }
    }
}

// Cell: a sequence word (position + 1 once published), then the payload; ring[ncells] of them,
// then the consumer's head. Producer: block 0, consumer: block 1, one thread each.
typedef struct {
    uint64_t seq;
    uint64_t payload[BENCH_PAYLOAD / 8];
    uint64_t pad[8 - 1 - BENCH_PAYLOAD / 8];
} raw_cell_t;

__global__ void raw_ring(raw_cell_t *ring, uint32_t ncells, uint64_t msgs, uint64_t *errors)
{
    uint64_t *head = (uint64_t*)(ring + ncells);
    uint64_t i, cached = 0, err = 0;

    if (threadIdx.x != 0) {
        return;
    }
    if (blockIdx.x == 0) {
        for (i = 0; i < msgs; i++) {
            raw_cell_t *c = &ring[i & (ncells - 1)];
            while (i - cached >= ncells) {
                cached = dev_u64(*head).load(cuda::memory_order_acquire);
            }
            c->payload[0] = i;
            c->payload[1] = msgs;
            dev_u64(c->seq).store(i + 1, cuda::memory_order_release);
        }
    } else {
        for (i = 0; i < msgs; i++) {
            raw_cell_t *c = &ring[i & (ncells - 1)];
            while (dev_u64(c->seq).load(cuda::memory_order_acquire) != i + 1) {
            }
            err += (c->payload[0] != i);
            if ((i & 31) == 31) { // cells back 32 at a time, as the ring kernels' loop does
                dev_u64(*head).store(i + 1, cuda::memory_order_release);
            }
        }
        sys_u64(*errors).store(err, cuda::memory_order_release);
    }
}

// Two blocks bounce a counter: block 0 writes odd values to words[0], block 1 answers in
// words[1].
__global__ void raw_pingpong(uint64_t *words, uint64_t n)
{
    uint64_t i;

    if (threadIdx.x != 0) {
        return;
    }
    for (i = 1; i <= n; i++) {
        if (blockIdx.x == 0) {
            dev_u64(words[0]).store(i, cuda::memory_order_release);
            while (dev_u64(words[1]).load(cuda::memory_order_acquire) != i) {
            }
        } else {
            while (dev_u64(words[0]).load(cuda::memory_order_acquire) != i) {
            }
            dev_u64(words[1]).store(i, cuda::memory_order_release);
        }
    }
}

extern "C" int bench_cuda_init(int *ndev, char *name, size_t name_len)
{
    cudaDeviceProp prop;

    if ((cudaGetDeviceCount(ndev) != cudaSuccess) || (*ndev == 0)) {
        *ndev = 0;
        return 0;
    }
    const char *loading = getenv("CUDA_MODULE_LOADING");
    int native = 0;

    CHECK(cudaGetDeviceProperties(&prop, 0));
    CHECK(cudaDeviceGetAttribute(&native, cudaDevAttrHostNativeAtomicSupported, 0));
    // what the figures depend on: the GPU, its link to the host's atomics, the kernel loading
    snprintf(name, name_len, "%s (sm_%d%d, %d SMs, host-native atomics: %s, "
             "CUDA_MODULE_LOADING=%s)", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, native ? "yes" : "no",
             (loading != NULL) ? loading : "unset");
    return 0;
}

extern "C" void *bench_mapped_alloc(size_t bytes, void **dev_p)
{
    void *host = NULL;

    /* portable: kernels of another GPU (device_bench -p) use it too */
    if ((cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) ||
        (cudaHostGetDevicePointer(dev_p, host, 0) != cudaSuccess)) {
        return NULL;
    }
    memset(host, 0, bytes);
    return host;
}

extern "C" void *bench_device_alloc(size_t bytes)
{
    void *p = NULL;

    if ((cudaMalloc(&p, bytes) != cudaSuccess) || (cudaMemset(p, 0, bytes) != cudaSuccess) ||
        (cudaDeviceSynchronize() != cudaSuccess)) {
        return NULL;
    }
    return p;
}

extern "C" void *bench_device_alloc_on(int dev, size_t bytes)
{
    void *p;
    int cur = 0;

    if ((cudaGetDevice(&cur) != cudaSuccess) || (cudaSetDevice(dev) != cudaSuccess)) {
        return NULL;
    }
    p = bench_device_alloc(bytes);
    cudaSetDevice(cur);
    return p;
}

extern "C" int bench_copy_to_device(void *dst, const void *src, size_t bytes)
{
    CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

extern "C" int bench_copy_from_device(void *dst, const void *src, size_t bytes)
{
    CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

static int stream_of(void **stream_p)
{
    if (*stream_p == NULL) {
        CHECK(cudaStreamCreateWithFlags((cudaStream_t*)stream_p, cudaStreamNonBlocking));
    }
    return 0;
}

extern "C" int bench_flag_pong_start(uint64_t *host_flag_d, uint64_t *dev_flag_d, void **stream_p)
{
    if (stream_of(stream_p) != 0) {
        return -1;
    }
    flag_pong<<<1, 1, 0, (cudaStream_t)*stream_p>>>(host_flag_d, dev_flag_d);
    CHECK(cudaGetLastError());
    return 0;
}

extern "C" int bench_stream_sync(void *stream)
{
    CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

extern "C" int bench_launch_one(void *stream, uint64_t *out_d, uint64_t value)
{
    launch_one<<<1, 1, 0, (cudaStream_t)stream>>>(out_d, value);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

extern "C" int bench_launch_work(void *stream, bench_work_t *w_d, uint32_t threads,
                                 uint32_t blocks, uint64_t iters, uint64_t seq)
{
    work_loop<<<blocks, threads, 0, (cudaStream_t)stream>>>(w_d, iters, seq, 1);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

extern "C" int bench_work_loop(void *stream, bench_work_t *w_d, uint32_t threads,
                               uint32_t blocks, uint64_t iters, uint64_t n)
{
    work_loop<<<blocks, threads, 0, (cudaStream_t)stream>>>(w_d, iters, 1, n);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

extern "C" int bench_raw_ring(void *stream, void *ring_d, uint32_t ncells, uint64_t msgs,
                              uint64_t *errors_d)
{
    CHECK(cudaMemsetAsync(ring_d, 0, (ncells + 1) * sizeof(raw_cell_t), (cudaStream_t)stream));
    raw_ring<<<2, 1, 0, (cudaStream_t)stream>>>((raw_cell_t*)ring_d, ncells, msgs, errors_d);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

extern "C" int bench_raw_pingpong(void *stream, uint64_t *words_d, uint64_t n)
{
    CHECK(cudaMemsetAsync(words_d, 0, 2 * sizeof(uint64_t), (cudaStream_t)stream));
    raw_pingpong<<<2, 1, 0, (cudaStream_t)stream>>>(words_d, n);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}
