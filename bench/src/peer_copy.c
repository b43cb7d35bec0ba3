/* SPDX-License-Identifier: BSD-3-Clause */
/* Copies between GPU memories of one process through ringk_peer_copy, side by side with the
 * CUDA copies they are measured against, in one run:
 *   d2d          cudaMemcpy device to device on device 0: the limit
 *   staged_raw   device 0 -> pinned host -> device 0, the whole buffer out then in (two
 *                cudaMemcpy): the unpipelined staged copy
 *   staged       ringk_peer_copy on device 0 forced through host memory (RINGK_PATH=
 *                HOST_STAGED): 1 MiB chunks whose copies out and in overlap
 * and with two GPUs, device 0 -> device 1:
 *   memcpy_peer  cudaMemcpyPeer (peer access enabled)
 *   peer         ringk_peer_copy by the path the policy picks (said on the RESULT line)
 *   peer_staged  ringk_peer_copy forced through host memory
 * Each round runs every method at every size back to back (interleaved); the figures are the
 * medians over the rounds of the time per copy, with GB/s and the ratio of each method's time
 * to d2d's and to staged_raw's. An untimed first round checks every method's data.
 *   peer_copy [-r ROUNDS] [-m MAX_BYTES]
 * Lines "RESULT peer_copy method bytes usec GB/s x_d2d x_staged_raw path" are for scripts.
 * Exits 77 without a GPU. */
#define _GNU_SOURCE
#include <ringk/api/ringk.h>

#include "bench/src/bench_cuda.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 64
#define NSIZES     4
#define NMETHODS   6

enum { M_D2D, M_STAGED_RAW, M_STAGED, M_MEMCPY_PEER, M_PEER, M_PEER_STAGED };

static const char *const method_name[NMETHODS] = {"d2d", "staged_raw", "staged", "memcpy_peer",
                                                  "peer", "peer_staged"};
static const size_t sizes[NSIZES] = {64u << 10, 1u << 20, 16u << 20, 64u << 20};

static struct {
    uint8_t *a0, *b0, *b1, *host; /* device 0 (two), device 1, pinned host */
    int      two;                 /* device 1 exists */
    ringk_peer_path_t path[NMETHODS];
} g;

#define CK(call) BENCH_CK("peer_copy", call)

/* One copy of @a len bytes by method @a m: its seconds. */
static double run_copy(int m, size_t len)
{
    uint8_t *dst = (m >= M_MEMCPY_PEER) ? g.b1 : g.b0;
    ringk_peer_path_t path = RINGK_PEER_PATH_SAME_DEVICE;
    double t0 = bench_now_s();
    int ret = 0;

    switch (m) {
    case M_D2D: /* cudaMemcpy may return before a device-to-device copy landed */
        CK(cudaMemcpy(dst, g.a0, len, cudaMemcpyDeviceToDevice));
        CK(cudaDeviceSynchronize());
        break;
    case M_STAGED_RAW:
        CK(cudaMemcpy(g.host, g.a0, len, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(dst, g.host, len, cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());
        break;
    case M_MEMCPY_PEER:
        CK(cudaMemcpyPeer(dst, 1, g.a0, 0, len));
        CK(cudaDeviceSynchronize());
        break;
    default:
        setenv("RINGK_PATH", (m == M_PEER) ? "" : "HOST_STAGED", 1);
        ret = ringk_peer_copy(dst, g.a0, len, &path);
        g.path[m] = path;
        break;
    }
    if (ret != 0) {
        fprintf(stderr, "peer_copy: %s of %zu bytes: %d\n", method_name[m], len, ret);
        exit(1);
    }
    return bench_now_s() - t0;
}

/* The destination of method @a m holds the source's first @a len bytes. */
static void check(int m, size_t len)
{
    uint8_t *want = malloc(len), *got = malloc(len);

    CK(cudaMemset((m >= M_MEMCPY_PEER) ? g.b1 : g.b0, 0, len));
    CK(cudaDeviceSynchronize());
    run_copy(m, len);
    CK(cudaMemcpy(want, g.a0, len, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got, (m >= M_MEMCPY_PEER) ? g.b1 : g.b0, len, cudaMemcpyDeviceToHost));
    if (memcmp(want, got, len) != 0) {
        fprintf(stderr, "peer_copy: %s of %zu bytes: the data differs\n", method_name[m], len);
        exit(1);
    }
    if ((m == M_STAGED || m == M_PEER_STAGED) && (g.path[m] != RINGK_PEER_PATH_HOST_STAGED)) {
        fprintf(stderr, "peer_copy: %s took %s\n", method_name[m],
                ringk_peer_path_name(g.path[m]));
        exit(1);
    }
    free(want);
    free(got);
}

static void setup(size_t max)
{
    uint8_t *fill = malloc(max);
    size_t i;
    int n = 0, can = 0;

    for (i = 0; i < max; i++) {
        fill[i] = (uint8_t)(i * 131u + 7u);
    }
    CK(cudaSetDevice(0));
    CK(cudaMalloc((void**)&g.a0, max));
    CK(cudaMalloc((void**)&g.b0, max));
    CK(cudaMallocHost((void**)&g.host, max));
    CK(cudaMemcpy(g.a0, fill, max, cudaMemcpyHostToDevice));
    CK(cudaGetDeviceCount(&n));
    if (n >= 2) {
        g.two = 1;
        CK(cudaSetDevice(1));
        CK(cudaMalloc((void**)&g.b1, max));
        CK(cudaDeviceCanAccessPeer(&can, 1, 0));
        if (can) {
            cudaDeviceEnablePeerAccess(0, 0);
            CK(cudaSetDevice(0));
            cudaDeviceEnablePeerAccess(1, 0);
            cudaGetLastError();
        }
        CK(cudaSetDevice(0));
    }
    free(fill);
}

int main(int argc, char **argv)
{
    static double t[NMETHODS][NSIZES][MAX_ROUNDS];
    size_t max = 64u << 20;
    int rounds = 9, opt, m, s, r, nm, n = 0;
    char name[256] = "";
    struct cudaDeviceProp prop;

    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed at its time limit keeps its lines */
    while ((opt = getopt(argc, argv, "r:m:")) != -1) {
        if (opt == 'r') {
            rounds = atoi(optarg);
        } else if (opt == 'm') {
            max = strtoull(optarg, NULL, 0);
        } else {
            fprintf(stderr, "usage: peer_copy [-r ROUNDS (1..%d)] [-m MAX_BYTES]\n", MAX_ROUNDS);
            return 2;
        }
    }
    if ((rounds < 1) || (rounds > MAX_ROUNDS) || (max < sizes[0])) {
        fprintf(stderr, "peer_copy: rounds %d not in 1..%d, or MAX_BYTES %zu below %zu\n",
                rounds, MAX_ROUNDS, max, sizes[0]);
        return 2;
    }
    if ((cudaGetDeviceCount(&n) != cudaSuccess) || (n == 0)) {
        printf("peer_copy: no CUDA device: not run\n");
        return 77;
    }
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
        snprintf(name, sizeof(name), "%s", prop.name);
    }
    setup(max);
    nm = g.two ? NMETHODS : M_MEMCPY_PEER;
    printf("peer_copy: %d GPU(s), device 0 %s; %d rounds, interleaved; medians\n", n, name,
           rounds);
    for (m = 0; m < nm; m++) { /* the untimed round: every method's data */
        for (s = 0; (s < NSIZES) && (sizes[s] <= max); s++) {
            check(m, sizes[s]);
        }
    }
    for (r = 0; r < rounds; r++) {
        for (s = 0; (s < NSIZES) && (sizes[s] <= max); s++) {
            for (m = 0; m < nm; m++) {
                t[m][s][r] = run_copy(m, sizes[s]);
            }
        }
        fprintf(stderr, "peer_copy: round %d of %d\n", r + 1, rounds);
    }
    printf("%-12s %10s %10s %8s %7s %12s %s\n", "method", "bytes", "usec", "GB/s", "x d2d",
           "x staged_raw", "path");
    for (s = 0; (s < NSIZES) && (sizes[s] <= max); s++) {
        double med[NMETHODS];

        for (m = 0; m < nm; m++) {
            qsort(t[m][s], (size_t)rounds, sizeof(double), bench_cmp_double);
            med[m] = t[m][s][rounds / 2];
        }
        for (m = 0; m < nm; m++) {
            const char *path = (m == M_PEER || m == M_STAGED || m == M_PEER_STAGED) ?
                               ringk_peer_path_name(g.path[m]) : "-";

            printf("%-12s %10zu %10.1f %8.2f %7.2f %12.2f %s\n", method_name[m], sizes[s],
                   med[m] * 1e6, (double)sizes[s] / med[m] * 1e-9, med[m] / med[M_D2D],
                   med[m] / med[M_STAGED_RAW], path);
            printf("RESULT peer_copy %s %zu %.1f %.2f %.2f %.2f %s\n", method_name[m], sizes[s],
                   med[m] * 1e6, (double)sizes[s] / med[m] * 1e-9, med[m] / med[M_D2D],
                   med[m] / med[M_STAGED_RAW], path);
        }
    }
    if (!g.two) {
        printf("peer_copy: one GPU: the copies between two devices are not run\n");
    }
    return 0;
}
