/* SPDX-License-Identifier: BSD-3-Clause */
/* What the device loop's primitives cost on this GPU (docs/gpu.md, "The dispatch loop"): reads
 * of mapped host memory one after another and 32 in flight together (an LL poll), system-scope
 * loads, atomics, stores and fences on host memory, device-scope ones on device memory, a
 * device-memory read after an acquire, a claim's compare-and-swap relaxed and ordered,
 * __nanosleep and %globaltimer. One thread times each with %globaltimer; ROUNDS rounds, medians.
 * Lines "RESULT device_prims name ns ns" are for scripts. Exits 77 without a GPU. The bundle
 * runs it beside bench/device_bench, whose raw references (a mapped-flag ping-pong, a block
 * ping-pong, an SPSC ring between blocks) are the limits its figures are held to.
 *   device_prims [-r ROUNDS] [-n ITERATIONS] */
#define _GNU_SOURCE
#include "bench/src/bench_cuda.h"
#include "bench/src/device_prims.h"

#include <string.h>
#include <unistd.h>

#define MAX_ROUNDS 32
#define WORDS      512

static const char *names[PRIM_COUNT] = {
    "host_dep_read", "host_poll32", "host_acq_sys", "host_atomic_sys", "host_rel_sys",
    "host_rel_after_8", "host_rel_after_32", "fence_sys", "fence_gpu", "dev_acq_gpu",
    "dev_dep_read", "dev_l2_after_acq", "dev_cas_rlx", "dev_cas_acqrel", "dev_rel_gpu",
    "nanosleep_100", "globaltimer", "globaltimer_step"
};
static const char *what[PRIM_COUNT] = {
    "a read of mapped host memory the next depends on",
    "32 reads of mapped host memory in flight together (an LL poll)",
    "ld.acquire.sys of mapped host memory",
    "atomicAdd_system on mapped host memory",
    "st.release.sys to mapped host memory",
    "8 relaxed stores to host memory, then st.release.sys",
    "32 relaxed stores to host memory, then st.release.sys",
    "__threadfence_system after a store",
    "__threadfence after a store",
    "ld.acquire.gpu of device memory",
    "a dependent read of device memory",
    "an acquire, then a device-memory read (L2)",
    "a relaxed device-scope compare-and-swap (a claim)",
    "an acq_rel device-scope compare-and-swap",
    "st.release.gpu after a store (a publish)",
    "__nanosleep(100)",
    "a read of %globaltimer",
    "the smallest step of %globaltimer seen"
};

int main(int argc, char **argv)
{
    static double ns[PRIM_COUNT][MAX_ROUNDS];
    uint64_t chain[WORDS], *host, *host_dev, *dev;
    struct cudaDeviceProp prop;
    double r[PRIM_COUNT], v[MAX_ROUNDS];
    int opt, rounds = 5, ndev = 0, i, m;
    unsigned iters = 20000;

    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((opt = getopt(argc, argv, "r:n:")) != -1) {
        if ((opt == 'r') && ((rounds = atoi(optarg)) >= 1) && (rounds <= MAX_ROUNDS)) {
            continue;
        }
        if ((opt == 'n') && (atoi(optarg) >= 1)) {
            iters = (unsigned)atoi(optarg);
            continue;
        }
        fprintf(stderr, "usage: device_prims [-r ROUNDS (1..%d)] [-n ITERATIONS]\n",
                MAX_ROUNDS);
        return 2;
    }
    if ((cudaGetDeviceCount(&ndev) != cudaSuccess) || (ndev == 0)) {
        printf("device_prims: no CUDA device: skipped\n");
        return 77;
    }
    BENCH_CK("device_prims", cudaGetDeviceProperties(&prop, 0));
    BENCH_CK("device_prims", cudaHostAlloc((void**)&host, WORDS * sizeof(uint64_t),
                                           cudaHostAllocMapped));
    BENCH_CK("device_prims", cudaHostGetDevicePointer((void**)&host_dev, host, 0));
    BENCH_CK("device_prims", cudaMalloc((void**)&dev, WORDS * sizeof(uint64_t)));
    for (i = 0; i < WORDS; i++) {
        chain[i] = (uint64_t)(i + 8) % WORDS; /* a cache line on each read */
    }
    memcpy(host, chain, sizeof(chain));
    BENCH_CK("device_prims", cudaMemcpy(dev, chain, sizeof(chain), cudaMemcpyHostToDevice));
    printf("device_prims: %s (sm_%d%d, %d SMs), %d rounds of %u each, medians, ns each\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, rounds, iters);
    for (i = 0; i < rounds; i++) {
        if (bench_prims_run(host, host_dev, dev, iters, r) != 0) {
            return 1;
        }
        for (m = 0; m < PRIM_COUNT; m++) {
            ns[m][i] = r[m];
        }
    }
    for (m = 0; m < PRIM_COUNT; m++) {
        memcpy(v, ns[m], (size_t)rounds * sizeof(double));
        qsort(v, (size_t)rounds, sizeof(double), bench_cmp_double);
        r[m] = (rounds % 2) ? v[rounds / 2] : (v[rounds / 2 - 1] + v[rounds / 2]) / 2;
        printf("  %-58s %9.1f\n", what[m], r[m]);
    }
    printf("  a host message's poll over a dependent host read: %.2fx; a release after 32 "
           "stores over one alone: %.2fx\n", r[PRIM_HOST_POLL32] / r[PRIM_HOST_DEP_READ],
           r[PRIM_HOST_REL_AFTER_32] / r[PRIM_HOST_REL_SYS]);
    for (m = 0; m < PRIM_COUNT; m++) {
        printf("RESULT device_prims %s %.1f ns\n", names[m], r[m]);
    }
    cudaFreeHost(host);
    cudaFree(dev);
    return 0;
}
