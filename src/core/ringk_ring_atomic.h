/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk ring protocol, part of core/ringk_ring.h: the atomics the ring operations are made of
 * (CUDA's with a scope on a GPU, C11's on the host) and the hook through which device code
 * compiled as C counts what it touches. Included by core/ringk_ring.h. */
#ifndef RINGK_CORE_RING_ATOMIC_H
#define RINGK_CORE_RING_ATOMIC_H

#include <stdint.h>

#if defined(__CUDACC__)
#  define RINGK_HD static __host__ __device__ __forceinline__
#else
#  define RINGK_HD static inline __attribute__((always_inline))
#endif

/* What an access or fence of device code is, for the accounting of the emulated device (device
 * code compiled as C counts its accesses of mapped host memory and its ordered operations per
 * kernel; libringk's ringk_dev_emu_tally()): a kind, whether it orders other accesses, and the
 * scope it would have on a GPU (neither scope: a plain access). */
#define RINGK_TALLY_LOAD    0x1u
#define RINGK_TALLY_STORE   0x2u
#define RINGK_TALLY_RMW     0x3u
#define RINGK_TALLY_FENCE   0x4u
#define RINGK_TALLY_KIND    0x7u
#define RINGK_TALLY_ORDERED 0x8u   /* acquire, release, acq_rel or seq_cst */
#define RINGK_TALLY_SYS     0x10u  /* system scope */
#define RINGK_TALLY_DEV     0x20u  /* device scope */
/* RINGK_RING_TALLY(p, op): the hook the ring operations of core/ringk_ring.h call on the host
 * with the address and the op. ringk_device_abi.h defines it when it is the first to include
 * this file (device code compiled as C); everywhere else (the transport, libringk's host side)
 * it is nothing. */
#ifndef RINGK_RING_TALLY
#  define RINGK_RING_TALLY(p, op) ((void)0)
#endif

#if defined(__CUDA_ARCH__)
#  include <cuda/atomic>
RINGK_HD uint64_t ringk_load_acquire_u64(const uint64_t *p)
{
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*(uint64_t*)p)
               .load(cuda::memory_order_acquire);
}
RINGK_HD uint64_t ringk_load_relaxed_u64(const uint64_t *p)
{
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*(uint64_t*)p)
               .load(cuda::memory_order_relaxed);
}
RINGK_HD void ringk_store_release_u64(uint64_t *p, uint64_t v)
{
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
}
RINGK_HD void ringk_store_relaxed_u64(uint64_t *p, uint64_t v)
{
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_relaxed);
}
/* a failed swap leaves the value it found in *expected */
RINGK_HD int ringk_cas_u64(uint64_t *p, uint64_t *expected, uint64_t desired)
{
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).compare_exchange_strong(
               *expected, desired, cuda::memory_order_acq_rel, cuda::memory_order_relaxed);
}
#else
RINGK_HD uint64_t ringk_load_acquire_u64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
RINGK_HD uint64_t ringk_load_relaxed_u64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
RINGK_HD void ringk_store_release_u64(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
RINGK_HD void ringk_store_relaxed_u64(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
/* seq_cst (the same locked instruction as acq_rel on x86): libringk's wakeup orders a claim
 * before its read of the receiver's 'sleeping' flag with it (W2 in libringk's ringk_exec.h).
 * A failed swap leaves the value it found in *expected. */
RINGK_HD int ringk_cas_u64(uint64_t *p, uint64_t *expected, uint64_t desired)
{
    return __atomic_compare_exchange_n(p, expected, desired, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_RELAXED);
}
#endif

#endif
