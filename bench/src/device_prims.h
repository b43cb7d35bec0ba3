/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/device_prims: what the device loop's primitives cost on this GPU, one thread timing
 * each with %globaltimer; the kernels (device_prims_kernels.cu) for the C half. */
#ifndef BENCH_DEVICE_PRIMS_H
#define BENCH_DEVICE_PRIMS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The primitives, in the order of the results (ns each, the average over the iterations). */
enum {
    PRIM_HOST_DEP_READ,      /* a read of mapped host memory the next one depends on */
    PRIM_HOST_POLL32,        /* 32 reads of mapped host memory in flight together (an LL poll) */
    PRIM_HOST_ACQ_SYS,       /* ld.acquire.sys of mapped host memory */
    PRIM_HOST_ATOMIC_SYS,    /* atomicAdd_system on mapped host memory */
    PRIM_HOST_REL_SYS,       /* st.release.sys to mapped host memory */
    PRIM_HOST_REL_AFTER_8,   /* 8 relaxed stores to mapped host memory, then st.release.sys */
    PRIM_HOST_REL_AFTER_32,  /* 32 of them, then st.release.sys */
    PRIM_FENCE_SYS,          /* __threadfence_system */
    PRIM_FENCE_GPU,          /* __threadfence */
    PRIM_DEV_ACQ_GPU,        /* ld.acquire.gpu of device memory */
    PRIM_DEV_DEP_READ,       /* a dependent read of device memory (its own: an L1 hit) */
    PRIM_DEV_L2_AFTER_ACQ,   /* a device-memory read after an acquire (an L2 hit) */
    PRIM_DEV_CAS_RLX,        /* a relaxed device-scope compare-and-swap (a claim) */
    PRIM_DEV_CAS_ACQREL,     /* an acq_rel device-scope compare-and-swap */
    PRIM_DEV_REL_GPU,        /* st.release.gpu to device memory (a publish) */
    PRIM_NANOSLEEP_100,      /* __nanosleep(100) */
    PRIM_GLOBALTIMER,        /* a read of %globaltimer */
    PRIM_GLOBALTIMER_STEP,   /* the smallest step %globaltimer was seen to take (ns) */
    PRIM_COUNT
};

/**
 * Times every primitive @a iters times on the current device, one thread of one block, with
 * @a host and @a host_dev the host's and the device's address of mapped host memory of 4096
 * bytes, @a dev device memory of 4096 bytes; the ns each into @a ns (PRIM_COUNT of them).
 * @return 0, or -EIO (a CUDA call failed; its error printed).
 */
int bench_prims_run(uint64_t *host, uint64_t *host_dev, uint64_t *dev, uint32_t iters,
                    double *ns);

#ifdef __cplusplus
}
#endif

#endif
