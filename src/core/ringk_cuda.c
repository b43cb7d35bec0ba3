/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: device count and the P2P canary. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_cuda.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

int ringk_cuda_device_count(char *why, size_t why_len)
{
    cudaError_t err;
    int n = 0;

    err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        return 0;
    }
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device");
    }
    return n;
}

#define CANARY_WORDS 4096

int ringk_cuda_p2p_canary(const char *busid_a, const char *busid_b, char *why, size_t why_len)
{
    uint32_t *host = NULL, *back = NULL, *mem_b = NULL, *mem_a = NULL;
    int dev_a, dev_b, can = 0, ret = -EIO, i;
    cudaError_t err;

    if ((cudaDeviceGetByPCIBusId(&dev_a, busid_a) != cudaSuccess) ||
        (cudaDeviceGetByPCIBusId(&dev_b, busid_b) != cudaSuccess)) {
        snprintf(why, why_len, "no CUDA device at %s or %s", busid_a, busid_b);
        return -ENODEV;
    }
    if (dev_a != dev_b) {
        if ((cudaDeviceCanAccessPeer(&can, dev_a, dev_b) != cudaSuccess) || !can) {
            snprintf(why, why_len, "cudaDeviceCanAccessPeer(%d, %d) says no", dev_a, dev_b);
            return -EPERM;
        }
        cudaSetDevice(dev_a);
        err = cudaDeviceEnablePeerAccess(dev_b, 0);
        if ((err != cudaSuccess) && (err != cudaErrorPeerAccessAlreadyEnabled)) {
            snprintf(why, why_len, "cudaDeviceEnablePeerAccess(%d -> %d): %s", dev_a, dev_b,
                     cudaGetErrorString(err));
            return -EPERM;
        }
        cudaGetLastError(); /* clear an 'already enabled' */
    }
    host = malloc(CANARY_WORDS * sizeof(*host));
    back = malloc(CANARY_WORDS * sizeof(*back));
    if ((host == NULL) || (back == NULL)) {
        snprintf(why, why_len, "out of host memory");
        ret = -ENOMEM;
        goto out;
    }
    for (i = 0; i < CANARY_WORDS; i++) {
        host[i] = 0x9e3779b9u * (uint32_t)(i + 1);
    }
    /* pattern into A's memory, A -> B over the peer path, B -> A back, compare */
    if (((err = cudaSetDevice(dev_b)) != cudaSuccess) ||
        ((err = cudaMalloc((void**)&mem_b, CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = cudaMemset(mem_b, 0, CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = cudaSetDevice(dev_a)) != cudaSuccess) ||
        ((err = cudaMalloc((void**)&mem_a, CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = cudaMemcpy(mem_a, host, CANARY_WORDS * sizeof(*host),
                           cudaMemcpyHostToDevice)) != cudaSuccess) ||
        ((err = cudaMemcpyPeer(mem_b, dev_b, mem_a, dev_a,
                               CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = cudaMemset(mem_a, 0, CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = cudaMemcpyPeer(mem_a, dev_a, mem_b, dev_b,
                               CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = cudaMemcpy(back, mem_a, CANARY_WORDS * sizeof(*back),
                           cudaMemcpyDeviceToHost)) != cudaSuccess)) {
        snprintf(why, why_len, "canary %s -> %s: %s", busid_a, busid_b, cudaGetErrorString(err));
        goto out;
    }
    if (memcmp(host, back, CANARY_WORDS * sizeof(*host)) != 0) {
        snprintf(why, why_len, "canary %s -> %s: data read back differs", busid_a, busid_b);
        goto out;
    }
    snprintf(why, why_len, "verified by a %zu-byte write/read canary",
             CANARY_WORDS * sizeof(*host));
    ret = 0;
out:
    if (mem_a != NULL) {
        cudaSetDevice(dev_a);
        cudaFree(mem_a);
    }
    if (mem_b != NULL) {
        cudaSetDevice(dev_b);
        cudaFree(mem_b);
    }
    free(back);
    free(host);
    return ret;
}

#else /* !HAVE_CUDA */

int ringk_cuda_device_count(char *why, size_t why_len)
{
    snprintf(why, why_len, "built without CUDA");
    return 0;
}

int ringk_cuda_p2p_canary(const char *busid_a, const char *busid_b, char *why, size_t why_len)
{
    snprintf(why, why_len, "built without CUDA: GPU paths are unavailable");
    return -ENODEV;
}

#endif
