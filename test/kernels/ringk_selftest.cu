// SPDX-License-Identifier: BSD-3-Clause
// ringk device self-test: one GPU block produces into a device-resident ring and another consumes
// from it with the same protocol code the host uses (src/core/ringk_ring.h), checking every byte.
#include "core/ringk_ring.h"
#include "test/kernels/ringk_kernels.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

__device__ static uint8_t ringk_selftest_byte(uint32_t msg, uint32_t i)
{
    return (uint8_t)(msg * 131u + i * 7u + 1u);
}

__device__ static uint32_t ringk_selftest_len(uint32_t msg, uint32_t cell_size)
{
    // Sizes from 0 bytes to a few cells, so single- and multi-cell messages alternate.
    return (msg * 37u) % (3u * cell_size);
}

// Nanoseconds of the GPU's global timer.
__device__ static uint64_t ringk_selftest_now(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// How long either block waits for the other before it counts an error and stops: a consumer
// that stopped on a bad message would otherwise leave the producer spinning on a full ring.
#define RINGK_SELFTEST_WAIT_NS 10000000000ull

// Whether the other block counted an error (it stopped, so waiting for it is pointless).
__device__ static int ringk_selftest_failed(unsigned *errors)
{
    return *(volatile unsigned*)errors != 0;
}

__global__ void ringk_selftest_kernel(void *mem, uint64_t bytes, uint32_t nmsgs,
                                      unsigned *verified, unsigned *errors)
{
    ringk_ring_t r;
    uint8_t buf[3 * 256];

    if (threadIdx.x != 0 || ringk_ring_attach(&r, mem, bytes) != 0) {
        if (threadIdx.x == 0) {
            atomicAdd(errors, 1u);
        }
        return;
    }
    if (blockIdx.x == 0) {
        ringk_ring_prod_t prod = {0, 0};
        uint64_t pos;
        for (uint32_t m = 0; m < nmsgs; m++) {
            uint32_t len = ringk_selftest_len(m, r.cell_size);
            uint32_t nc  = ringk_ring_cells_for(len, r.cell_size);
            for (uint32_t i = 0; i < len; i++) {
                buf[i] = ringk_selftest_byte(m, i);
            }
            uint64_t until = ringk_selftest_now() + RINGK_SELFTEST_WAIT_NS;
            while (!ringk_ring_sp_claim(&r, &prod, nc, &pos)) {
                if (ringk_selftest_failed(errors) || (ringk_selftest_now() > until)) {
                    atomicAdd(errors, 1u);
                    return;
                }
            }
            ringk_ring_write(&r, pos, 0, buf, len);
            ringk_ring_publish(&r, pos, len, (uint16_t)nc, (uint8_t)(m & 0xff), 0);
        }
    } else {
        uint64_t pos = 0;
        for (uint32_t m = 0; m < nmsgs; m++) {
            const ringk_cell_hdr_t *h;
            uint64_t until = ringk_selftest_now() + RINGK_SELFTEST_WAIT_NS;
            while ((h = ringk_ring_peek(&r, &pos)) == NULL) {
                if (ringk_selftest_failed(errors) || (ringk_selftest_now() > until)) {
                    atomicAdd(errors, 1u);
                    return;
                }
            }
            uint32_t len = h->len, nc = h->ncells;
            uint8_t flags = h->flags;
            int ok = (ringk_ring_msg_check(&r, pos, len, nc, flags, r.ncells) == 0) &&
                     (len == ringk_selftest_len(m, r.cell_size)) && (h->id == (m & 0xff));
            if (ok) {
                ringk_ring_read(&r, pos, 0, buf, len);
                for (uint32_t i = 0; i < len; i++) {
                    ok &= (buf[i] == ringk_selftest_byte(m, i));
                }
            }
            ringk_ring_release(&r, pos, ok ? nc : 1, ok ? flags : 0xff);
            pos += ok ? nc : 1;
            if (ok) {
                (*verified)++;
            } else {
                atomicAdd(errors, 1u);
                return;
            }
        }
    }
}

extern "C" int ringk_kernels_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);

    if (err != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        return 0;
    }
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device");
    }
    return n;
}

extern "C" int ringk_kernels_selftest(uint32_t nmsgs, uint32_t ncells, uint32_t cell_size,
                                      unsigned *verified_p, char *why, size_t why_len)
{
    uint64_t bytes = ringk_ring_bytes(ncells, cell_size);
    unsigned *counters = NULL;
    unsigned host[2] = {0, 0};
    ringk_ring_t r;
    void *mem = NULL, *staging = NULL;
    cudaStream_t stream = NULL;
    cudaError_t err;
    int ret = -EIO, waited_ms;

    if (cell_size > 256) {
        snprintf(why, why_len, "cell_size %u is above the self-test's 256", cell_size);
        return -EINVAL;
    }
    /* formatted here, then copied: ringk_ring_init wants a ring line's alignment, which
     * malloc does not give */
    if ((posix_memalign(&staging, RINGK_RING_LINE, bytes) != 0) ||
        (ringk_ring_init(&r, staging, bytes, ncells, cell_size) != 0)) {
        snprintf(why, why_len, "cannot format a ring of %u cells of %u bytes", ncells, cell_size);
        free(staging);
        return -EINVAL;
    }
    if ((err = cudaMalloc(&mem, bytes)) != cudaSuccess ||
        (err = cudaMalloc((void**)&counters, sizeof(host))) != cudaSuccess ||
        (err = cudaMemcpy(mem, staging, bytes, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (err = cudaMemset(counters, 0, sizeof(host))) != cudaSuccess ||
        (err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) {
        snprintf(why, why_len, "CUDA setup: %s", cudaGetErrorString(err));
        goto out;
    }
    ringk_selftest_kernel<<<2, 32, 0, stream>>>(mem, bytes, nmsgs, &counters[0], &counters[1]);
    // waited for with a bound: the blocks give up after RINGK_SELFTEST_WAIT_NS each, so a
    // kernel still running after 60 s is stuck (not co-resident, or the timer does not move)
    err = cudaGetLastError();
    for (waited_ms = 0; err == cudaSuccess; waited_ms++) {
        err = cudaStreamQuery(stream);
        if (err != cudaErrorNotReady) {
            break; /* done (cudaSuccess), or failed */
        }
        err = cudaSuccess;
        if (waited_ms >= 60000) {
            snprintf(why, why_len, "kernel: still running after 60 s");
            ret = -ETIMEDOUT;
            stream = NULL; /* not destroyed, not freed: the kernel may still use them */
            mem = counters = NULL;
            goto out;
        }
        usleep(1000);
    }
    if ((err != cudaSuccess) ||
        (err = cudaMemcpy(host, counters, sizeof(host), cudaMemcpyDeviceToHost)) != cudaSuccess) {
        snprintf(why, why_len, "kernel: %s", cudaGetErrorString(err));
        goto out;
    }
    *verified_p = host[0];
    if (host[1] != 0) {
        snprintf(why, why_len, "%u errors on the device", host[1]);
        goto out;
    }
    ret = 0;
out:
    if (stream != NULL) {
        cudaStreamDestroy(stream);
    }
    cudaFree(counters);
    cudaFree(mem);
    free(staging);
    return ret;
}
