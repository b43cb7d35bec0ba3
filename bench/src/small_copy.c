/* SPDX-License-Identifier: BSD-3-Clause */
/* Small copies into GPU memory by the copy engine against SM stores, in one run: what the
 * transport's puts of a few bytes to kilobytes should use. Each copy is issued on a
 * non-blocking stream of device 0 and waited for, as the transport waits for each put:
 *   h2d_copy   pageable host -> device 0, cudaMemcpyAsync (what the transport does today)
 *   h2d_param  the same bytes written by a kernel that gets them in its parameters (at most
 *              4032 bytes)
 *   d2d_copy   device 0 -> device 0, cudaMemcpyAsync
 *   d2d_sm     the same by a kernel's loads and stores
 * and with two GPUs (peer access on from device 0), into device 1:
 *   h2p_copy   pageable host -> device 1, cudaMemcpyAsync on device 0's stream
 *   h2p_param  a kernel on device 0 writing the parameter bytes into device 1
 *   p2p_copy   device 0 -> device 1, cudaMemcpyPeerAsync
 *   p2p_sm     a kernel on device 0 copying into device 1 through peer access
 * Each round runs every method at every size back to back (interleaved), 200 copies each; the
 * figures are the medians over the rounds of the time per copy, and the ratio of each SM
 * method's time to its copy-engine counterpart's (below 1: the SM stores are faster). An
 * untimed first round checks every method's data.
 *   small_copy [-r ROUNDS]
 * Lines "RESULT small_copy method bytes usec x_copy" are for scripts. Exits 77 without a GPU. */
#define _GNU_SOURCE
#include "bench/src/small_copy.h"

#include "bench/src/bench_cuda.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 64
#define ITERS      200
#define NSIZES     6
#define MAX_SIZE   (256u << 10)

enum { H2D_COPY, H2D_PARAM, D2D_COPY, D2D_SM, H2P_COPY, H2P_PARAM, P2P_COPY, P2P_SM, NMETHODS };

static const char *const method_name[NMETHODS] = {"h2d_copy", "h2d_param", "d2d_copy", "d2d_sm",
                                                  "h2p_copy", "h2p_param", "p2p_copy", "p2p_sm"};
static const size_t sizes[NSIZES] = {8, 64, 512, BENCH_SMALL_PARAM_MAX, 32u << 10, MAX_SIZE};

static struct {
    uint8_t     *host, *a0, *b0, *b1; /* pageable source, device 0 source and destination,
                                         device 1 destination */
    int          two;                 /* device 1 exists and device 0 reaches it */
    cudaStream_t s;                   /* non-blocking, device 0 */
} g;

static double results[NMETHODS][NSIZES][MAX_ROUNDS];

#define CK(call) BENCH_CK("small_copy", call)

/* Method @a m carries copies of @a len bytes (the parameter methods only up to their limit, the
 * two-GPU ones only with two GPUs). */
static int applies(int m, size_t len)
{
    if ((m >= H2P_COPY) && !g.two) {
        return 0;
    }
    return ((m != H2D_PARAM) && (m != H2P_PARAM)) || (len <= BENCH_SMALL_PARAM_MAX);
}

static uint8_t *dst_of(int m)
{
    return (m >= H2P_COPY) ? g.b1 : g.b0;
}

/* One copy by method @a m, waited for. */
static void copy_once(int m, size_t len)
{
    uint8_t *dst = dst_of(m);
    int ret = 0;

    switch (m) {
    case H2D_COPY:
    case H2P_COPY:
        CK(cudaMemcpyAsync(dst, g.host, len, cudaMemcpyHostToDevice, g.s));
        break;
    case D2D_COPY:
        CK(cudaMemcpyAsync(dst, g.a0, len, cudaMemcpyDeviceToDevice, g.s));
        break;
    case P2P_COPY:
        CK(cudaMemcpyPeerAsync(dst, 1, g.a0, 0, len, g.s));
        break;
    case H2D_PARAM:
    case H2P_PARAM:
        ret = bench_small_param_write(dst, g.host, len, g.s);
        break;
    default:
        ret = bench_small_sm_copy(dst, g.a0, len, g.s);
        break;
    }
    if (ret != 0) {
        fprintf(stderr, "small_copy: %s of %zu bytes: launch failed (%d)\n", method_name[m],
                len, ret);
        exit(1);
    }
    CK(cudaStreamSynchronize(g.s));
}

/* The destination of method @a m holds the source's first @a len bytes after one copy. */
static void check(int m, size_t len)
{
    static uint8_t got[MAX_SIZE];

    CK(cudaMemset(dst_of(m), 0, len));
    CK(cudaDeviceSynchronize());
    copy_once(m, len);
    CK(cudaMemcpy(got, dst_of(m), len, cudaMemcpyDeviceToHost));
    if (memcmp(got, g.host, len) != 0) {
        fprintf(stderr, "small_copy: %s of %zu bytes: the data differs\n", method_name[m], len);
        exit(1);
    }
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
    return (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void setup(void)
{
    size_t i;
    int n = 0, can = 0;

    if ((cudaGetDeviceCount(&n) != cudaSuccess) || (n == 0)) {
        printf("small_copy: no CUDA device: skipped\n");
        exit(77);
    }
    g.host = malloc(MAX_SIZE); /* pageable, as the buffers UCX hands the transport */
    for (i = 0; i < MAX_SIZE; i++) {
        g.host[i] = (uint8_t)(i * 131u + 7u);
    }
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking));
    CK(cudaMalloc((void**)&g.a0, MAX_SIZE));
    CK(cudaMalloc((void**)&g.b0, MAX_SIZE));
    CK(cudaMemcpy(g.a0, g.host, MAX_SIZE, cudaMemcpyHostToDevice));
    if ((n >= 2) && (cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess) && can) {
        CK(cudaSetDevice(1));
        CK(cudaMalloc((void**)&g.b1, MAX_SIZE));
        CK(cudaSetDevice(0));
        if (cudaDeviceEnablePeerAccess(1, 0) == cudaErrorPeerAccessAlreadyEnabled) {
            (void)cudaGetLastError();
        }
        g.two = 1;
    }
    printf("small_copy: %d GPU(s)%s; copies waited for one by one, %d a sample\n", n,
           g.two ? ", device 0 reaches device 1 by peer access" :
           (n >= 2) ? ", no peer access from device 0 to device 1: one-GPU methods only" : "",
           ITERS);
}

int main(int argc, char **argv)
{
    int rounds = 5, r, m, s, i, c;
    double t0, med[NMETHODS][NSIZES];

    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed at its time limit keeps its lines */
    while ((c = getopt(argc, argv, "r:")) != -1) {
        if ((c != 'r') || ((rounds = atoi(optarg)) < 1) || (rounds > MAX_ROUNDS)) {
            fprintf(stderr, "usage: small_copy [-r ROUNDS (1..%d)]\n", MAX_ROUNDS);
            return 2;
        }
    }
    setup();
    for (m = 0; m < NMETHODS; m++) {
        for (s = 0; s < NSIZES; s++) {
            if (applies(m, sizes[s])) {
                check(m, sizes[s]);
            }
        }
    }
    for (r = 0; r < rounds; r++) {
        for (s = 0; s < NSIZES; s++) {
            for (m = 0; m < NMETHODS; m++) {
                if (!applies(m, sizes[s])) {
                    continue;
                }
                copy_once(m, sizes[s]); /* warm */
                t0 = bench_now_s();
                for (i = 0; i < ITERS; i++) {
                    copy_once(m, sizes[s]);
                }
                results[m][s][r] = (bench_now_s() - t0) * 1e6 / ITERS;
            }
        }
    }
    printf("%d rounds, medians, microseconds a copy (x copy: the time over the copy engine's "
           "for the same move)\n", rounds);
    printf("%-10s %8s %10s %8s\n", "method", "bytes", "usec", "x copy");
    for (m = 0; m < NMETHODS; m++) {
        for (s = 0; s < NSIZES; s++) {
            if (applies(m, sizes[s])) {
                med[m][s] = median(results[m][s], rounds);
            }
        }
    }
    for (m = 0; m < NMETHODS; m++) {
        for (s = 0; s < NSIZES; s++) {
            /* the methods come in pairs: the copy engine's first, then the SM one */
            double x = (m % 2) ? med[m][s] / med[m - 1][s] : 1.0;

            if (!applies(m, sizes[s])) {
                continue;
            }
            printf("%-10s %8zu %10.2f %8.2f\n", method_name[m], sizes[s], med[m][s], x);
            printf("RESULT small_copy %s %zu %.2f %.2f\n", method_name[m], sizes[s], med[m][s],
                   x);
        }
    }
    return 0;
}
