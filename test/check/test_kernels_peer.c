/* SPDX-License-Identifier: BSD-3-Clause */
/* On a GPU: GPUs of one process through ringk_peer.h: the pair's query and capability (its
 * figures printed), copies on one device and, with two devices, between them by the path the
 * policy picks, staged through host memory when RINGK_PATH forces it, synchronous and on a
 * stream of the application; each copy's data checked and its path compared with the query's. */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "test_util.h"

#ifdef HAVE_CUDA
#include <ringk/api/ringk.h>

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Device memory of @a len bytes on @a dev filled with the bytes of @a seed. */
static uint8_t *peer_alloc(int dev, size_t len, unsigned seed)
{
    uint8_t *host = malloc(len), *mem = NULL;
    size_t i;

    ck_assert_ptr_nonnull(host);
    for (i = 0; i < len; i++) {
        host[i] = (uint8_t)(i * 131u + seed);
    }
    ck_assert_int_eq(cudaSetDevice(dev), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void**)&mem, len), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(mem, host, len, cudaMemcpyHostToDevice), cudaSuccess);
    free(host);
    return mem;
}

/* Whether @a mem (on any device) holds the bytes peer_alloc() put there with @a seed. */
static void peer_check(const uint8_t *mem, size_t len, unsigned seed, const char *what)
{
    uint8_t *host = malloc(len);
    size_t i;

    ck_assert_ptr_nonnull(host);
    ck_assert_int_eq(cudaMemcpy(host, mem, len, cudaMemcpyDefault), cudaSuccess);
    for (i = 0; i < len; i++) {
        ck_assert_msg(host[i] == (uint8_t)(i * 131u + seed), "%s: byte %zu differs", what, i);
    }
    free(host);
}

static void peer_print(const char *what, const ringk_peer_info_t *info)
{
    printf("# %s: %s -> %s %s path %s access %d verified %d atomics %d est %.1f GB/s "
           "%.2f us, measured %.2f GB/s %.2f us\n#   %s\n", what, info->busid, info->peer_busid,
           info->link, ringk_peer_path_name(info->path), info->can_access, info->verified,
           info->native_atomics, info->est_gbps, info->est_lat_us, info->gbps, info->lat_us,
           info->reason);
}

#define PEER_BYTES ((11u << 20) / 2) /* 5.5 MiB: more chunks than the staging pool holds */

START_TEST(test_kernels_peer_one_device)
{
    ringk_peer_info_t info;
    ringk_peer_path_t path;
    uint8_t *a = peer_alloc(0, PEER_BYTES, 1), *b = peer_alloc(0, PEER_BYTES, 2);
    cudaStream_t s;

    ck_assert_int_eq(ringk_peer_can_access(0, 0, &info), 0);
    ck_assert_int_eq(info.cls, RINGK_PEER_CLASS_SAME_DEVICE);
    ck_assert_int_eq(info.path, RINGK_PEER_PATH_SAME_DEVICE);
    ck_assert_int_eq(ringk_peer_capability(0, 0, &info), 0);
    peer_print("device 0 to itself", &info);
    ck_assert(info.gbps > 0 && info.lat_us > 0);
    ck_assert_int_eq(ringk_peer_copy(b, a, PEER_BYTES, &path), 0);
    ck_assert_int_eq(path, RINGK_PEER_PATH_SAME_DEVICE);
    peer_check(b, PEER_BYTES, 1, "one device, synchronous");
    ck_assert_int_eq(cudaStreamCreate(&s), cudaSuccess);
    ck_assert_int_eq(cudaMemset(b, 0, PEER_BYTES), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(ringk_peer_copy_async(b, a, PEER_BYTES, s, &path), 0);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    peer_check(b, PEER_BYTES, 1, "one device, on a stream");
    ck_assert_int_eq(ringk_peer_copy(b, &info, 8, &path), -EINVAL); /* host memory */
    cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
}
END_TEST

/* Two devices: the policy's path, then HOST_STAGED forced; synchronous and on a stream of the
 * destination's device. */
static const char *const peer_force[] = {NULL, "HOST_STAGED"};

START_TEST(test_kernels_peer_two_devices)
{
    ringk_peer_info_t info;
    ringk_peer_path_t path;
    uint8_t *a, *b;
    cudaStream_t s;
    int n = 0, can = 0;

    ck_assert_int_eq(cudaGetDeviceCount(&n), cudaSuccess);
    if (n < 2) {
        printf("# %d CUDA device(s): the copies between two devices are not run\n", n);
        return;
    }
    if (peer_force[_i] != NULL) {
        setenv("RINGK_PATH", peer_force[_i], 1);
    }
    ck_assert_int_eq(ringk_peer_can_access(0, 1, &info), 0);
    peer_print("device 0 to 1", &info);
    ck_assert_int_eq(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
    ck_assert_int_eq(ringk_peer_enable(0, 1), can ? 0 : -EPERM);
    ck_assert_int_eq(ringk_peer_enable(0, 1), can ? 0 : -EPERM); /* already enabled */
    ck_assert_int_eq(ringk_peer_disable(0, 1), 0);
    if (peer_force[_i] != NULL) {
        ck_assert_int_eq(info.path, RINGK_PEER_PATH_HOST_STAGED);
    }
    a = peer_alloc(0, PEER_BYTES, 3);
    b = peer_alloc(1, PEER_BYTES, 4);
    ck_assert_int_eq(ringk_peer_copy(b, a, PEER_BYTES, &path), 0);
    ck_assert_int_eq(path, info.path);
    peer_check(b, PEER_BYTES, 3, "device 0 to 1, synchronous");
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaMemset(a, 0, PEER_BYTES), cudaSuccess); /* a no-op copy must show */
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreate(&s), cudaSuccess);
    ck_assert_int_eq(ringk_peer_copy_async(a, b, PEER_BYTES - 1, s, &path), 0);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    peer_check(a, PEER_BYTES - 1, 3, "device 1 to 0, on a stream"); /* b holds a's bytes */
    ck_assert_int_eq(ringk_peer_capability(0, 1, &info), 0);
    peer_print("device 0 to 1, measured", &info);
    ck_assert(info.gbps > 0 && info.lat_us > 0);
    cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    unsetenv("RINGK_PATH");
}
END_TEST

void test_kernels_peer_cases(TCase *tc)
{
    tcase_add_test(tc, test_kernels_peer_one_device);
    tcase_add_loop_test(tc, test_kernels_peer_two_devices, 0,
                        (int)(sizeof(peer_force) / sizeof(peer_force[0])));
}
#endif
