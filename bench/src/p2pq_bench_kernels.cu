// SPDX-License-Identifier: BSD-3-Clause
// bench/p2pq_bench's GPU endpoints: one GPU thread at an end of a P2P queue, with the device
// calls of ringk_p2pq_dev.h.
#include "bench/src/p2pq_bench.h"
#include "ringk/api/ringk_p2pq_dev.h"

#include <cuda_runtime.h>
#include <errno.h>

#define BENCH_P2PQ_WAIT_NS 20000000000ull

__device__ static uint64_t bench_p2pq_now(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ static void bench_p2pq_move(ringk_p2pq_dev_t *in, ringk_p2pq_dev_t *out, uint64_t n,
                                       int *status)
{
    bench_p2pq_elem_t e;
    uint64_t i, since;

    for (i = 0; i < n; i++) {
        since = bench_p2pq_now();
        if (in == NULL) {
            e.n     = i;
            e.check = BENCH_P2PQ_CHECK(i);
        }
        while ((in != NULL) && (ringk_p2pq_dev_receive(in, &e) != 0)) {
            if (bench_p2pq_now() - since > BENCH_P2PQ_WAIT_NS) {
                *(volatile int*)status = 2;
                return;
            }
        }
        if ((e.n != i) || (e.check != BENCH_P2PQ_CHECK(i))) {
            *(volatile int*)status = 1;
            return;
        }
        while ((out != NULL) && (ringk_p2pq_dev_send(out, &e) != 0)) {
            if (bench_p2pq_now() - since > BENCH_P2PQ_WAIT_NS) {
                *(volatile int*)status = 2;
                return;
            }
        }
    }
    __threadfence_system();
    *(volatile int*)status = 0;
}

extern "C" int bench_p2pq_gpu_move(int dev, struct ringk_p2pq_dev *in,
                                   struct ringk_p2pq_dev *out, uint64_t n, int *status,
                                   void *stream)
{
    cudaError_t err;
    int cur = 0;

    cudaGetDevice(&cur);
    if (cudaSetDevice(dev) != cudaSuccess) {
        return -ENODEV;
    }
    bench_p2pq_move<<<1, 1, 0, (cudaStream_t)stream>>>(in, out, n, status);
    err = cudaGetLastError();
    cudaSetDevice(cur);
    return (err == cudaSuccess) ? 0 : -EIO;
}
