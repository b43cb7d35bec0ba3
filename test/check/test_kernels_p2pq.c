/* SPDX-License-Identifier: BSD-3-Clause */
/* On a GPU: P2P queues with GPU endpoints. Elements go host -> GPU -> host through queues in
 * pinned host memory, through a queue in one GPU's memory between two kernels of it, and with
 * two GPUs through a queue in the second GPU's memory (direct P2P) or in pinned memory; every
 * element checked in order, the mode each queue reports compared with where it must be. */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "test_util.h"

#ifdef HAVE_CUDA
#include <ringk/api/ringk.h>
#include <test/kernels/ringk_kernels.h>

#include <cuda_runtime_api.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>

#define P2PQ_ELEMS 100000u

static ringk_p2pq_t *p2pq_gpu(int src, int dst, ringk_p2pq_mode_t mode)
{
    ringk_p2pq_params_t p = {
        .field_mask = RINGK_P2PQ_PARAM_FIELD_CAPACITY | RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE |
                      RINGK_P2PQ_PARAM_FIELD_DEVICES,
        .capacity = 256, .elem_size = sizeof(ringk_kernels_p2pq_elem_t), .src_device = src,
        .dst_device = dst
    };
    ringk_p2pq_info_t info = {.field_mask = RINGK_P2PQ_INFO_FIELD_MODE |
                              RINGK_P2PQ_INFO_FIELD_DIRECT_P2P | RINGK_P2PQ_INFO_FIELD_REASON};
    ringk_p2pq_t *q;

    ck_assert_int_eq(ringk_p2pq_create(&p, &q), 0);
    ck_assert_int_eq(ringk_p2pq_info_query(q, &info), 0);
    printf("# queue %d -> %d: mode %d, direct P2P %d: %s\n", src, dst, (int)info.mode,
           info.direct_p2p, info.reason);
    if ((int)mode >= 0) {
        ck_assert_int_eq(info.mode, mode);
        ck_assert_int_eq(info.direct_p2p, (src >= 0) && (dst >= 0) && (src != dst) &&
                                          (mode == RINGK_P2PQ_MODE_DEVICE_MEMORY));
    }
    return q;
}

/* The mode of a queue from GPU @a a to GPU @a b (a != b): the receiver's memory, written by
 * the sender over peer access, where the topology's path is P2P and CUDA gives peer access;
 * else pinned host memory. */
static ringk_p2pq_mode_t p2pq_mode_between(int a, int b)
{
    ringk_peer_info_t info;
    int can = 0;

    if ((ringk_peer_can_access(a, b, &info) == 0) && info.can_access &&
        (cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess) && can) {
        return RINGK_P2PQ_MODE_DEVICE_MEMORY;
    }
    printf("# GPU %d -> GPU %d: no peer access (CUDA %d; %s)\n", a, b, can, info.reason);
    return RINGK_P2PQ_MODE_PINNED_HOST;
}

static struct ringk_p2pq_dev *view(ringk_p2pq_t *q)
{
    struct ringk_p2pq_dev *v;

    ck_assert_int_eq(ringk_p2pq_dev_view(q, &v), 0);
    return v;
}

/* The host sends P2PQ_ELEMS elements into @a first and receives them from @a last, in order. */
static void host_ends(ringk_p2pq_t *first, ringk_p2pq_t *last)
{
    ringk_kernels_p2pq_elem_t e;
    uint64_t sent = 0, got = 0;
    double until = test_now_s() + 60;

    while ((got < P2PQ_ELEMS) && (test_now_s() < until)) {
        if (sent < P2PQ_ELEMS) {
            e.n     = sent;
            e.check = sent * 0x9e3779b97f4a7c15ull;
            sent += (ringk_p2pq_send(first, &e) == 0);
        }
        if (ringk_p2pq_receive(last, &e) == 0) {
            ck_assert_uint_eq(e.n, got);
            ck_assert_uint_eq(e.check, got * 0x9e3779b97f4a7c15ull);
            got++;
        } else {
            sched_yield();
        }
    }
    ck_assert_uint_eq(got, P2PQ_ELEMS);
}

/* host -> GPU 0 -> host, then host -> GPU a -> GPU b -> host (a == b: two kernels of one GPU). */
static const struct {
    int a, b;
} p2pq_gpu_cases[] = {{0, -1}, {0, 0}, {0, 1}};

START_TEST(test_kernels_p2pq)
{
    int a = p2pq_gpu_cases[_i].a, b = p2pq_gpu_cases[_i].b, n = 0, *status;
    ringk_p2pq_t *in, *mid = NULL, *out;
    ringk_p2pq_stats_t st;
    cudaStream_t sa, sb;

    ck_assert_int_eq(cudaGetDeviceCount(&n), cudaSuccess);
    if ((a >= n) || (b >= n)) {
        printf("# %d CUDA device(s): the case of devices %d and %d is not run\n", n, a, b);
        return;
    }
    ck_assert_int_eq(cudaMallocHost((void**)&status, 2 * sizeof(int)), cudaSuccess);
    status[0] = status[1] = -1;
    in = p2pq_gpu(RINGK_P2PQ_HOST, a, RINGK_P2PQ_MODE_PINNED_HOST);
    out = p2pq_gpu((b < 0) ? a : b, RINGK_P2PQ_HOST, RINGK_P2PQ_MODE_PINNED_HOST);
    ck_assert_int_eq(cudaSetDevice(a), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking), cudaSuccess);
    if (b < 0) {
        ck_assert_int_eq(ringk_kernels_p2pq_echo(a, view(in), view(out), P2PQ_ELEMS, &status[0],
                                                 sa), 0);
    } else {
        mid = p2pq_gpu(a, b, (a == b) ? RINGK_P2PQ_MODE_DEVICE_MEMORY : p2pq_mode_between(a, b));
        ck_assert_int_eq(cudaSetDevice(b), cudaSuccess);
        ck_assert_int_eq(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking), cudaSuccess);
        ck_assert_int_eq(ringk_kernels_p2pq_echo(b, view(mid), view(out), P2PQ_ELEMS,
                                                 &status[1], sb), 0);
        ck_assert_int_eq(ringk_kernels_p2pq_echo(a, view(in), view(mid), P2PQ_ELEMS,
                                                 &status[0], sa), 0);
    }
    host_ends(in, out);
    ck_assert_int_eq(cudaStreamSynchronize(sa), cudaSuccess);
    ck_assert_int_eq(status[0], 0);
    if (mid != NULL) {
        ck_assert_int_eq(cudaStreamSynchronize(sb), cudaSuccess);
        ck_assert_int_eq(status[1], 0);
        /* counted by the kernels, read from GPU memory (or pinned memory) by the host */
        ck_assert_int_eq(ringk_p2pq_stats_query(mid, &st), 0);
        ck_assert_uint_eq(st.sent, P2PQ_ELEMS);
        ck_assert_uint_eq(st.received, P2PQ_ELEMS);
        ck_assert_int_eq(ringk_p2pq_count(mid), 0);
        ck_assert_int_eq(ringk_p2pq_send(mid, &st), -EPERM); /* the sender is a GPU */
        ck_assert_int_eq(ringk_p2pq_destroy(mid), 0);
        cudaStreamDestroy(sb);
    }
    ck_assert_int_eq(ringk_p2pq_stats_query(in, &st), 0);
    ck_assert_uint_eq(st.received, P2PQ_ELEMS);
    ck_assert_int_eq(ringk_p2pq_destroy(in), 0);
    ck_assert_int_eq(ringk_p2pq_destroy(out), 0);
    cudaStreamDestroy(sa);
    cudaFreeHost(status);
}
END_TEST

void test_kernels_p2pq_cases(TCase *tc)
{
    tcase_add_loop_test(tc, test_kernels_p2pq, 0,
                        (int)(sizeof(p2pq_gpu_cases) / sizeof(p2pq_gpu_cases[0])));
}
#endif
