// SPDX-License-Identifier: BSD-3-Clause
// P2P queue endpoints on a GPU (test_kernels, TCase p2pq): one GPU thread receives elements from
// one queue and sends each on to another with the device calls of ringk_p2pq_dev.h, so that a
// queue's two ends can be any of the host and GPUs.
#include "ringk/api/ringk_p2pq_dev.h"
#include "test/kernels/ringk_kernels.h"

#include <cuda_runtime.h>
#include <errno.h>

// How long the kernel waits for an element or for room before it gives up (a stuck host side
// must not leave a kernel spinning for ever).
#define P2PQ_WAIT_NS 20000000000ull

__device__ static uint64_t p2pq_now(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Receives n elements from in (or makes them, in == NULL) and sends each to out (or drops it,
// out == NULL), checking each received one; *status: 0 done, 1 a bad element, 2 timed out.
__global__ static void p2pq_echo(ringk_p2pq_dev_t *in, ringk_p2pq_dev_t *out, uint64_t n,
                                 int *status)
{
    ringk_kernels_p2pq_elem_t e;
    uint64_t i, since;

    *status = 0;
    for (i = 0; i < n; i++) {
        since = p2pq_now();
        if (in == NULL) {
            e.n     = i;
            e.check = i * 0x9e3779b97f4a7c15ull;
        }
        while ((in != NULL) && (ringk_p2pq_dev_receive(in, &e) != 0)) {
            if (p2pq_now() - since > P2PQ_WAIT_NS) {
                *status = 2;
                return;
            }
            __nanosleep(200);
        }
        if ((e.n != i) || (e.check != i * 0x9e3779b97f4a7c15ull)) {
            *status = 1;
            return;
        }
        while ((out != NULL) && (ringk_p2pq_dev_send(out, &e) != 0)) {
            if (p2pq_now() - since > P2PQ_WAIT_NS) {
                *status = 2;
                return;
            }
            __nanosleep(200);
        }
    }
}

extern "C" int ringk_kernels_p2pq_echo(int dev, struct ringk_p2pq_dev *in,
                                       struct ringk_p2pq_dev *out, uint64_t n, int *status,
                                       void *stream)
{
    cudaError_t err;
    int cur = 0;

    cudaGetDevice(&cur);
    if ((err = cudaSetDevice(dev)) != cudaSuccess) {
        return -ENODEV;
    }
    p2pq_echo<<<1, 1, 0, (cudaStream_t)stream>>>(in, out, n, status);
    err = cudaGetLastError();
    cudaSetDevice(cur);
    return (err == cudaSuccess) ? 0 : -EIO;
}
