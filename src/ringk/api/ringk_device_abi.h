/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API, part 1: the portability layer (atomics with an explicit scope, fences,
 * time, back-off: CUDA on a GPU, C11 on the host) and the layout libringk and a device kernel
 * share (control block, routes, the view a launch gets, outbox records, the entry). libringk's
 * host side includes this; device code includes ringk_device.h. */
#ifndef RINGK_API_RINGK_DEVICE_ABI_H
#define RINGK_API_RINGK_DEVICE_ABI_H

/* Device code compiled as C (the emulated device, and the tests' CUDA stand-in) counts what it
 * touches: the ring operations of core/ringk_ring.h call the tally hook, and so do the
 * portability helpers below (RINGK_DEV_TALLY). That takes this file being the first to include
 * core/ringk_ring.h; where it comes after (libringk's host side, which includes the ring
 * operations for itself first), nothing is counted and nothing costs. */
#if !defined(__CUDACC__)
#  ifdef __cplusplus
extern "C" {
#  endif
/** Counts an access at @a p (NULL: none) of kind @a op (RINGK_TALLY_*) in the calling thread's
 *  kernel and bucket, if it is a thread of an emulated launch (ringk_device_tally_t). */
void ringk_dev_emu_tally(const void *p, unsigned op);
/** Puts the calling thread's accesses in @a bucket (RINGK_DEV_BUCKET_*): the one it was in. */
unsigned ringk_dev_emu_bucket(unsigned bucket);
#  ifdef __cplusplus
}
#  endif
#  if !defined(RINGK_CORE_RING_ATOMIC_H) && !defined(RINGK_DEV_NO_TALLY)
#    define RINGK_DEV_TALLIES 1
#    define RINGK_RING_TALLY(p, op) ringk_dev_emu_tally((p), (op))
#  endif
#endif

#include <core/ringk_ring.h>
#include <core/ringk_ring_ll.h>
#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdint.h>

#if defined(__CUDACC__)
#  include <cooperative_groups.h>
#  include <cuda/atomic>
#  include <cuda_runtime.h>
#  include <stdio.h>
#  define RINGK_DEV_FN static __device__ __forceinline__
#  define RINGK_DEV_CALL_FN static __device__ __noinline__ /* registers of its own */
#  define RINGK_DEVICE __device__   /**< marks a handler (and what it calls) as device code */
#else
#  define RINGK_DEVICE
#  include <pthread.h>
#  include <sched.h>
#  include <time.h>
/* the emulated device takes time and naps from POSIX: clock_gettime, nanosleep */
#  if defined(__GLIBC__) && (!defined(_POSIX_C_SOURCE) || (_POSIX_C_SOURCE < 199309L))
#    error "device code compiled as C needs POSIX: use -std=gnu11 (or any gnu*), or define \
_POSIX_C_SOURCE=200809L before the first #include"
#  endif
#  define RINGK_DEV_FN static inline
#  define RINGK_DEV_CALL_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* where nothing is counted: a bucket is a value like any other (set, kept, never read) */
RINGK_DEV_FN unsigned ringk_dev_in_none(unsigned bucket)
{
    (void)bucket;
    return 0;
}

/* ---- the tally of device code compiled as C -------------------------------------------------
 * Device code compiled as C counts, per kernel and in the bucket its thread is in
 * (RINGK_DEV_IN): its reads and writes of mapped host memory (a group of loads in flight
 * together is one read: one round trip across the bus), its system-scope atomics and fences,
 * its device-scope ordered operations (releases, ordered read-modify-writes, fences), and the
 * loop's host polls. libringk adds them up in the kernel's statistics (RINGK_KERNEL_STATS_FIELD_
 * DEVICE_TALLY), so that tests hold the loop to budgets (docs/gpu.md, "What a message costs").
 * On a GPU, nothing: these are no code. */
#define RINGK_DEV_BUCKET_PATH  0u  /**< taking, handling and sending messages */
#define RINGK_DEV_BUCKET_POLL  1u  /**< the loop's polls across the bus */
#define RINGK_DEV_BUCKET_WAIT  2u  /**< waits: for room, for a barrier's answer, in a receive */
#define RINGK_DEV_BUCKET_CHORE 3u  /**< timed upkeep, and a launch's start and end */
#define RINGK_TALLY_POLL    0x5u   /* events, no address: a host poll; */
#define RINGK_TALLY_HIT     0x6u   /* a poll that found a host message whole; */
#define RINGK_TALLY_REREAD  0x7u   /* a read again for a host message found in part */
#if defined(RINGK_DEV_TALLIES)
#  define RINGK_DEV_TALLY(p, op) ringk_dev_emu_tally((p), (op))
#  define RINGK_DEV_IN(b) ringk_dev_emu_bucket(b)
#else
#  define RINGK_DEV_TALLY(p, op) ((void)0)
#  define RINGK_DEV_IN(b) ringk_dev_in_none(b)
#endif
#define RINGK_DEV_SYS_LD  (RINGK_TALLY_LOAD | RINGK_TALLY_SYS)
#define RINGK_DEV_SYS_ACQ (RINGK_TALLY_LOAD | RINGK_TALLY_ORDERED | RINGK_TALLY_SYS)
#define RINGK_DEV_SYS_ST  (RINGK_TALLY_STORE | RINGK_TALLY_SYS)
#define RINGK_DEV_SYS_REL (RINGK_TALLY_STORE | RINGK_TALLY_ORDERED | RINGK_TALLY_SYS)
#define RINGK_DEV_SYS_RMW (RINGK_TALLY_RMW | RINGK_TALLY_ORDERED | RINGK_TALLY_SYS)

/* ---- portability: atomics with an explicit scope, fences, time, back-off --------------------
 * System scope ("sys") orders against the host and other GPUs: the control block, the host
 * ingress ring and the outbox live in pinned host memory mapped into the device. The ring
 * operations of core/ringk_ring.h take their scope from the ring's view: system scope for those
 * two; for the device inbox device scope where only kernels of its GPU write it
 * (RINGK_RING_SCOPE_DEVICE), system scope where kernels of other GPUs may too. On the host (the
 * emulated device) these are C11 atomics. */
#if defined(__CUDA_ARCH__)
#  define RINGK_DEV_ATOMIC(T, s, p) cuda::atomic_ref<T, cuda::thread_scope_##s>(*(T*)(p))
RINGK_DEV_FN int32_t ringk_dev_load_acq_sys_i32(const int32_t *p)
{
    return RINGK_DEV_ATOMIC(int32_t, system, p).load(cuda::memory_order_acquire);
}
RINGK_DEV_FN void ringk_dev_store_rel_sys_i32(int32_t *p, int32_t v)
{
    RINGK_DEV_ATOMIC(int32_t, system, p).store(v, cuda::memory_order_release);
}
RINGK_DEV_FN int ringk_dev_cas_sys_i32(int32_t *p, int32_t expect, int32_t desired)
{
    return RINGK_DEV_ATOMIC(int32_t, system, p).compare_exchange_strong(
               expect, desired, cuda::memory_order_seq_cst, cuda::memory_order_relaxed);
}
RINGK_DEV_FN void ringk_dev_store_rel_sys_u64(uint64_t *p, uint64_t v)
{
    RINGK_DEV_ATOMIC(uint64_t, system, p).store(v, cuda::memory_order_release);
}
/* a store the host reads whole but orders nothing by (st.relaxed.sys: no fence before it) */
RINGK_DEV_FN void ringk_dev_store_rlx_sys_u64(uint64_t *p, uint64_t v)
{
    RINGK_DEV_ATOMIC(uint64_t, system, p).store(v, cuda::memory_order_relaxed);
}
RINGK_DEV_FN uint64_t ringk_dev_load_rlx_sys_u64(const uint64_t *p)
{
    return RINGK_DEV_ATOMIC(uint64_t, system, p).load(cuda::memory_order_relaxed);
}
RINGK_DEV_FN uint64_t ringk_dev_load_acq_sys_u64(const uint64_t *p)
{
    return RINGK_DEV_ATOMIC(uint64_t, system, p).load(cuda::memory_order_acquire);
}
RINGK_DEV_FN int32_t ringk_dev_load_rlx_sys_i32(const int32_t *p)
{
    return RINGK_DEV_ATOMIC(int32_t, system, p).load(cuda::memory_order_relaxed);
}
/* another writer's header fields, read whole (a seqlock's reader orders them by fences) */
RINGK_DEV_FN uint32_t ringk_dev_load_rlx_u32(const uint32_t *p)
{
    return RINGK_DEV_ATOMIC(uint32_t, system, p).load(cuda::memory_order_relaxed);
}
RINGK_DEV_FN uint16_t ringk_dev_load_rlx_u16(const uint16_t *p)
{
    return *(const volatile uint16_t*)p; /* ld.volatile: no 16-bit atomic_ref */
}
/* fence.sc.sys: orders a store before a later load of another word, against the host too (the
 * sleep and terminate protocols: W1/W2, T1/T2 below) */
RINGK_DEV_FN void ringk_dev_fence_sc_sys(void)
{
    cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_system);
}
/* device scope: the lock and the handler error the threads of a launch share */
RINGK_DEV_FN int ringk_dev_cas_acq_dev_i32(int32_t *p, int32_t expect, int32_t desired)
{
    return RINGK_DEV_ATOMIC(int32_t, device, p).compare_exchange_strong(
               expect, desired, cuda::memory_order_acquire, cuda::memory_order_relaxed);
}
RINGK_DEV_FN void ringk_dev_store_rel_dev_i32(int32_t *p, int32_t v)
{
    RINGK_DEV_ATOMIC(int32_t, device, p).store(v, cuda::memory_order_release);
}
RINGK_DEV_FN void ringk_dev_min_dev_u64(uint64_t *p, uint64_t v)
{
    atomicMin((unsigned long long*)p, (unsigned long long)v);
}
/* %globaltimer: nanoseconds as the driver keeps them. Neither its origin nor its rate is the
 * host's wall clock, and it may step: waits take differences clamped at 0, and the clock adds
 * the host's offset taken at each launch (docs/gpu.md, "Timestamps") */
RINGK_DEV_FN uint64_t ringk_dev_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
RINGK_DEV_FN void ringk_dev_nap(uint32_t ns)
{
    __nanosleep(ns);
}
/* the thread of the launch (thread 0 of block 0) that runs the dispatch loop */
RINGK_DEV_FN int ringk_dev_leader(void)
{
    return (threadIdx.x == 0) && (blockIdx.x == 0);
}
/* the calling thread's index in its block, and its block's in the launch (launches are 1-D) */
RINGK_DEV_FN uint32_t ringk_dev_pt_thread(void)
{
    return threadIdx.x;
}
RINGK_DEV_FN uint32_t ringk_dev_pt_block(void)
{
    return blockIdx.x;
}
#else
RINGK_DEV_FN int32_t ringk_dev_load_acq_sys_i32(const int32_t *p)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_ACQ);
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
RINGK_DEV_FN void ringk_dev_store_rel_sys_i32(int32_t *p, int32_t v)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_REL);
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
RINGK_DEV_FN int ringk_dev_cas_sys_i32(int32_t *p, int32_t expect, int32_t desired)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_RMW);
    return __atomic_compare_exchange_n(p, &expect, desired, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_RELAXED);
}
RINGK_DEV_FN void ringk_dev_store_rel_sys_u64(uint64_t *p, uint64_t v)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_REL);
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
RINGK_DEV_FN void ringk_dev_store_rlx_sys_u64(uint64_t *p, uint64_t v)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_ST);
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
RINGK_DEV_FN uint64_t ringk_dev_load_rlx_sys_u64(const uint64_t *p)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_LD);
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
RINGK_DEV_FN uint64_t ringk_dev_load_acq_sys_u64(const uint64_t *p)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_ACQ);
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
RINGK_DEV_FN int32_t ringk_dev_load_rlx_sys_i32(const int32_t *p)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_LD);
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
RINGK_DEV_FN uint32_t ringk_dev_load_rlx_u32(const uint32_t *p)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_LD);
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
RINGK_DEV_FN uint16_t ringk_dev_load_rlx_u16(const uint16_t *p)
{
    RINGK_DEV_TALLY(p, RINGK_DEV_SYS_LD);
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
RINGK_DEV_FN void ringk_dev_fence_sc_sys(void)
{
    RINGK_DEV_TALLY(NULL, RINGK_TALLY_FENCE | RINGK_TALLY_ORDERED | RINGK_TALLY_SYS);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
RINGK_DEV_FN int ringk_dev_cas_acq_dev_i32(int32_t *p, int32_t expect, int32_t desired)
{
    RINGK_DEV_TALLY(p, RINGK_TALLY_RMW | RINGK_TALLY_ORDERED | RINGK_TALLY_DEV);
    return __atomic_compare_exchange_n(p, &expect, desired, 0, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}
RINGK_DEV_FN void ringk_dev_store_rel_dev_i32(int32_t *p, int32_t v)
{
    RINGK_DEV_TALLY(p, RINGK_TALLY_STORE | RINGK_TALLY_ORDERED | RINGK_TALLY_DEV);
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
RINGK_DEV_FN void ringk_dev_min_dev_u64(uint64_t *p, uint64_t v)
{
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);

    RINGK_DEV_TALLY(p, RINGK_TALLY_RMW | RINGK_TALLY_DEV);
    while ((v < cur) && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED,
                                                      __ATOMIC_RELAXED)) {
    }
}
RINGK_DEV_FN uint64_t ringk_dev_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
/* a host thread standing in for a block: short naps yield the core, long ones sleep */
RINGK_DEV_FN void ringk_dev_nap(uint32_t ns)
{
    struct timespec ts = {0, (long)ns};

    if (ns < 2000) {
        sched_yield();
    } else {
        nanosleep(&ts, NULL);
    }
}
/* The emulated device runs a launch of T threads in B blocks on T x B host threads
 * (ringk_dev_emu_launch()); each knows its place from a thread-local record of libringk's. */
struct ringk_dev_emu;
typedef struct ringk_dev_emu_self {
    uint32_t             thread, block;
    struct ringk_dev_emu *group;  /**< the launch's barriers; NULL for a launch of 1 thread */
} ringk_dev_emu_self_t;
/** The calling host thread's place in an emulated launch (thread 0 of block 0 outside one). */
ringk_dev_emu_self_t *ringk_dev_emu_self(void);
RINGK_DEV_FN uint32_t ringk_dev_pt_thread(void)
{
    return ringk_dev_emu_self()->thread;
}
RINGK_DEV_FN uint32_t ringk_dev_pt_block(void)
{
    return ringk_dev_emu_self()->block;
}
RINGK_DEV_FN int ringk_dev_leader(void)
{
    const ringk_dev_emu_self_t *s = ringk_dev_emu_self();

    return (s->thread == 0) && (s->block == 0);
}
#endif

/* ---- what libringk and the device share (layout version RINGK_DEV_ABI) --------------------- */

#define RINGK_DEV_ABI        19u
/* bytes of a device kernel's staging buffer: the cells of its largest message, @a max_in
 * payload bytes, in a ring of @a cell_size-byte cells */
#define RINGK_DEV_STAGE_BYTES(max_in, cell_size) \
    ((uint64_t)ringk_ring_cells_for(sizeof(ringk_msg_t) + (max_in), (cell_size)) * (cell_size))
#define RINGK_DEV_CTL_MAGIC  0x524b4443u   /* "RKDC" */
#define RINGK_DEV_NAME_MAX   64
#define RINGK_DEV_ROUTES_MAX 32
#define RINGK_DEV_TOPICS_MAX 32
#define RINGK_DEV_BARRIERS_MAX 32
/* A device kernel's name tables (its routes, topics and barriers), in device memory */
#define RINGK_DEV_NAMES_BYTES \
    ((RINGK_DEV_ROUTES_MAX + RINGK_DEV_TOPICS_MAX + RINGK_DEV_BARRIERS_MAX) * RINGK_DEV_NAME_MAX)
#define RINGK_DEV_NAP_MIN_NS 100u          /* the idle loop's first nap */
#define RINGK_DEV_NAP_MAX_NS 50000u        /* and its longest: what an idle kernel adds to the
                                              latency of the next message */
#define RINGK_DEV_SPINS      64u           /* idle turns before the first nap */
/* The loop's pace across the bus (docs/gpu.md, "The dispatch loop"): it polls the host (the
 * kernel's state and the host ingress ring's next message, one round trip) again at once
 * after a poll that found a message; otherwise once RINGK_DEV_POLL_NS passed since its last
 * poll, or RINGK_DEV_POLL_BUSY_NS while the last message it took came from a device kernel
 * (a host message then waits that long at most, and device messages do not wait behind a
 * round trip across the bus each turn). */
#define RINGK_DEV_POLL_NS      1000u
#define RINGK_DEV_POLL_BUSY_NS 16000u
/* Upkeep while the loop takes messages: its counters stored for the host, a dead sender's
 * claim looked for, the outbox's head read; also done once the loop finds nothing to take. */
#define RINGK_DEV_CHORE_NS     100000u
/* A route's 'direct' word (across the bus) is read again at most this often: a route through
 * the host that the host may make direct, and a direct route while its target's inbox stays
 * full (a target destroyed without closing it is seen that late at most) */
#define RINGK_DEV_ROUTE_NS     1000000u
/* The loop gives cells back to the producers (one release of the ring's head) once it took
 * RINGK_DEV_RELEASE_CELLS cells since the last time (or a quarter of a smaller ring), and
 * once it found nothing to take for RINGK_DEV_POLL_NS. */
#define RINGK_DEV_RELEASE_CELLS 32u
/* Words of the host ingress ring a poll reads at once: a message of up to
 * RINGK_DEV_POLL_BYTES bytes (its ringk_msg_t header included) is read in one round trip */
#define RINGK_DEV_POLL_WORDS   32u
#define RINGK_DEV_POLL_BYTES   (4u * (RINGK_DEV_POLL_WORDS - RINGK_RING_LL_HDR_WORDS))
#define RINGK_DEV_WARP        32u          /* threads of a warp */
#define RINGK_DEV_THREADS_MAX 1024u        /* threads of a block (CUDA's limit) */
#define RINGK_DEV_BLOCKS_MAX  65535u       /* blocks of a launch (what a device holds at once
                                              is less: the launch checks) */
#define RINGK_DEV_EMU_THREADS_MAX 1024u    /* threads x blocks on the emulated device (host
                                              threads) */
#define RINGK_DEV_DEAD_MAX    8u           /* processes that ended whose claims in a device
                                              inbox its loop gives up (ringk_dev_ctl_t.dead) */
#define RINGK_DEV_RANK_SHIFT  20u          /* sender ids: rank << 20 | kernel id */

/* Outbox record operations (the cell id of an outbox message). */
#define RINGK_DEV_OUT_SEND    1u   /* op_arg: route index */
#define RINGK_DEV_OUT_PUBLISH 2u   /* op_arg: topic index */
#define RINGK_DEV_OUT_BARRIER 3u   /* op_arg: barrier index; the proxy answers in the control
                                      block (barrier_done, barrier_result) */

/* A route of a device kernel (its name is in ringk_dev_kernel_t.route_names): where the host
 * resolved it to a device kernel of the process that this one can write into (the same device,
 * or another GPU with peer access and native atomics), that kernel's device inbox and control
 * block. */
/* A direct target of a route: set by the host before it makes the route direct, never
 * changed after, so a sender copies it into its launch once (ringk_dev_kernel_t.targets) and
 * reads only 'direct' across the bus on each send. */
typedef struct ringk_dev_target {
    uint32_t receiver;     /**< target kernel id */
    uint32_t max_in;       /**< target's max_in */
    uint32_t log2_ncells;  /**< target inbox geometry */
    uint32_t cell_size;
    uint32_t event_driven; /**< the target returns when idle: a sender may have to wake it */
    uint32_t scope;        /**< RINGK_RING_SCOPE_* of the target inbox's atomics: DEVICE where
                                only kernels of its GPU write it, SYSTEM where kernels of
                                other GPUs may too (peer access) */
    uint32_t marks;        /**< 1: the target is in another process: each claim is marked
                                with the sender (ringk_ring_mark_claimed), so that the target's
                                loop can give the cells up if this one's process dies */
    uint32_t pad;
    void    *inbox;        /**< target's device inbox (device address; on another GPU, valid
                                here through peer access) */
    struct ringk_dev_ctl *ctl; /**< target's control block (device address) */
} ringk_dev_target_t;

typedef struct ringk_dev_route {
    int32_t  direct;       /**< 1: 'target' holds a direct target; 0: through the host
                                proxy. Written last by the host (release), read first
                                (acquire) */
    ringk_dev_target_t target;
} ringk_dev_route_t;

/* A device kernel's control block, in memory both sides see (mapped pinned memory on a GPU). */
typedef struct ringk_dev_ctl {
    uint32_t magic, abi;
    /* written by the host before the first launch */
    uint32_t id;                 /**< kernel id */
    uint32_t sender;             /**< sender id of its messages: rank << 20 | id */
    uint32_t mode;               /**< ringk_kernel_mode_t */
    uint32_t processing;         /**< ringk_processing_t */
    uint32_t max_per_iteration;  /**< 0: unlimited */
    uint32_t max_iterations;     /**< event-driven: idle iterations before returning */
    uint32_t max_in, max_out;
    uint32_t timestamps;
    uint32_t nroutes, ntopics, nbarriers;
    /* written by the host at run time: its own line */
    int32_t  state __attribute__((aligned(64))); /**< ringk_kernel_state_t, as the host set it */
    int32_t  barrier_result;     /**< the answer to the last barrier wait: 0 or -errno */
    uint64_t barrier_done;       /**< barrier waits answered (release, after barrier_result) */
    uint64_t launch_ns;          /**< the host's wall clock (ns since the epoch) just before
                                      the latest launch: the device clock's offset */
    int32_t  ndead;              /**< of dead[], those set (release, after them) */
    uint32_t dead[RINGK_DEV_DEAD_MAX]; /**< ranks of processes of the job that ended (they
                                      never publish again): their marked claims in the device
                                      inbox are given up by the loop */
    /* written by the device: lines of their own */
    int32_t  done __attribute__((aligned(64)));  /**< the loop finished terminating */
    int32_t  idle;               /**< event-driven: no launch runs the loop (senders wake it) */
    int32_t  doorbell;           /**< a device sender found it idle: the host relaunches */
    int32_t  term_req;           /**< a terminate message arrived: the host terminates it */
    uint64_t msgs_in, handler_errors, bad_cells, iterations, launches_run;
    uint64_t msgs_out, msgs_direct;  /**< sent; of them, straight into a device inbox */
    uint64_t seq;                /**< its next sequence number */
    uint64_t hlc;                /**< its hybrid logical clock (ringk_hlc_t's format) */
    uint64_t barrier_req;        /**< barrier waits asked for */
    uint64_t given_up;           /**< cells of dead processes' claims the loop gave up
                                      (release, after given_up_owner) */
    uint32_t given_up_owner;     /**< the sender id of the last such claim */
    uint32_t direct_taken;       /**< bit r: route r was taken direct by a launch (a later
                                      launch takes it so again at once, keeping FIFO) */
} ringk_dev_ctl_t;

/* A launch's own copies of the control block's configuration (read once per launch) and of
 * the counters only its loop writes (stored to the control block now and then, never read back
 * but at a launch: on a GPU each access to mapped memory crosses the bus). */
typedef struct ringk_dev_own {
    uint32_t sender, mode, processing, max_per_iteration, max_iterations, max_in, max_out;
    uint32_t timestamps, nroutes, ntopics, nbarriers, id, direct_taken, pad;
    uint64_t msgs_in, handler_errors, bad_cells, iterations, msgs_out, msgs_direct, seq, hlc;
    uint64_t barrier_req;
} ringk_dev_own_t;

/* The kernel as its loop sees it: addresses valid on the device, the user's argument, and the
 * loop's own state. The host writes it once, before the first launch, into mapped memory; each
 * launch copies it into the kernel's own device memory and runs there (a launch gets the two
 * addresses: a kernel parameter whose address is taken would be copied to every thread's
 * stack, and each field the loop reads would then be a local-memory access). */
typedef struct ringk_dev_kernel {
    ringk_dev_ctl_t   *ctl;
    ringk_ring_t       ingress;   /**< from the host: pinned mapped memory */
    ringk_ring_t       inbox;     /**< from device kernels (of this GPU, or of others by peer
                                       access): device memory. Its
                                       tail gets RINGK_RING_CLOSED when the loop, terminating,
                                       is about to look for the last messages (T2): device
                                       senders find it there, not in ctl->state, which
                                       is across the bus */
    ringk_ring_t       outbox;    /**< to the host proxy: pinned mapped memory */
    ringk_dev_route_t *routes;    /**< ctl->nroutes of them */
    uint8_t           *stage;     /**< device memory for one message of the host ingress ring
                                       (RINGK_DEV_STAGE_BYTES): the handler gets this
                                       copy, not the mapped original */
    /* names, copied to device memory before the first launch (a name looked up byte by byte
     * in mapped memory would cost a bus round trip a byte) */
    char             (*route_names)[RINGK_DEV_NAME_MAX]; /**< its routes' targets */
    char             (*topics)[RINGK_DEV_NAME_MAX]; /**< topics it publishes to */
    char             (*barriers)[RINGK_DEV_NAME_MAX]; /**< barriers it takes part in */
    void              *arg;
    uint32_t           threads;   /**< the launch's shape: threads of a block, 1..1024 */
    uint32_t           blocks;    /**< and blocks, all resident together */
    /* what the launch's threads share, in the kernel's device memory: the message the loop
     * hands to them (hand_op RINGK_DEV_HAND_*), the lowest thread's handler error
     * ((thread << 32) | -error, UINT64_MAX none), a collective call's result, and the lock of
     * the calls every thread may make on its own (sends, publishes, the clock) */
    const ringk_msg_t *hand_msg;
    uint32_t           hand_op;
    int32_t            lock;
    uint64_t           err_key;
    int32_t            coll_ret;
    uint32_t           pad_shared;
    /* the loop's own state, kept in the launch (positions are read back from the rings at
     * each launch) */
    uint64_t           in_head, dev_head;  /**< the next message of each inbox */
    uint64_t           in_rel, dev_rel;    /**< where each was last given back (released) */
    ringk_ring_prod_t  out_prod;
    uint64_t           host_at;   /**< the time of the last host poll (ringk_dev_now_ns) */
    uint64_t           chore_at;  /**< of the last upkeep */
    uint64_t           idle_at;   /**< since when the loop found nothing to take; 0 busy */
    uint32_t           gap;       /**< ns between host polls that find nothing */
    int32_t            state;     /**< the kernel's state, as the last poll read it */
    uint32_t           turn;
    uint32_t           own_changed; /**< 1: own's counters changed since they were stored */
    /* while a handler runs: the ring its message came from and the message's position (what
     * ringk_dev_recv() must not hand back to the producers before the handler returns) */
    const ringk_ring_t *cur_ring;
    uint64_t           cur_pos;
    ringk_dev_own_t    own;
    uint64_t           tail_cache[RINGK_DEV_ROUTES_MAX]; /**< per route: where this sender's last
                                                              claim in the target inbox ended */
    uint64_t           head_cache[RINGK_DEV_ROUTES_MAX]; /**< per route: the target inbox's head
                                                              as this sender last read it */
    uint32_t           targets_copied;  /**< bit r: targets[r] holds route r's target */
    uint32_t           direct_seen;     /**< bit r: route r's 'direct' read 1, its target not
                                             copied yet (its records still in the outbox) */
    uint64_t           route_at[RINGK_DEV_ROUTES_MAX]; /**< per route through the host: when
                                                            its 'direct' was last read */
    uint64_t           route_last[RINGK_DEV_ROUTES_MAX]; /**< per route: the outbox position
                                                            after its last record (this
                                                            launch's; its start for those
                                                            before) */
    ringk_dev_target_t targets[RINGK_DEV_ROUTES_MAX];
    uint64_t           clock_off;  /**< added to ringk_dev_now_ns() for the wall clock: the
                                        host's launch_ns less the device's time at the
                                        launch's start (modulo 2^64) */
} ringk_dev_kernel_t;

#define RINGK_DEV_HAND_RUN  1u   /* hand_op: run the handler on hand_msg */
#define RINGK_DEV_HAND_STOP 2u   /* the loop returned: so do the other threads */

/* A send's claimed cells, between the claim and the publish (ringk_dev_send_claim()): the ring
 * (its view), where the message starts, its size, and the target to wake after the publish
 * (a direct send to an event-driven kernel; else NULL). */
typedef struct ringk_dev_claim {
    ringk_ring_t        ring;
    uint64_t            pos;
    uint8_t            *payload;   /**< where the payload goes */
    uint32_t            bytes;     /**< what follows the cell header */
    uint32_t            ncells;
    uint32_t            id;        /**< the cell id */
    uint32_t            direct;    /**< 1: into a device inbox (counted as msgs_direct) */
    uint32_t            marked;    /**< 1: the claim's first cell carries its owner
                                        (ringk_ring_mark_claimed): unmarked before the publish */
    uint32_t            pad;
    struct ringk_dev_ctl *wake;    /**< an event-driven target's control block, or NULL */
} ringk_dev_claim_t;

/* What the threads of one block share during a collective call of the block: the claim of a
 * collective send and the call's result (shared memory on a GPU). */
typedef struct ringk_dev_blk {
    ringk_dev_claim_t claim;
    int32_t           ret;
    uint32_t          pad;
} ringk_dev_blk_t;

#if !defined(__CUDACC__)
/* The emulated device's barriers: a generation counter under a mutex; each arrival ORs in a
 * tag saying which call it comes from (RINGK_DEV_TAG_*), and a generation whose arrivals
 * came from different calls is reported to all of them (a collective called by part of the
 * threads). */
typedef struct ringk_dev_emu_bar {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    uint32_t        need, count, gen, tags, last_tags;
} ringk_dev_emu_bar_t;

/* An emulated launch's barriers and per-block scratch (ringk_dev_emu_launch()). */
typedef struct ringk_dev_emu {
    uint32_t             threads, blocks, warps; /**< warps: of a block */
    ringk_dev_emu_bar_t  grid;   /**< thread 0 of each block */
    ringk_dev_emu_bar_t *block;  /**< [blocks] */
    ringk_dev_emu_bar_t *warp;   /**< [blocks * warps] */
    ringk_dev_blk_t     *blk;    /**< [blocks] */
    int32_t             *grid_bad; /**< [blocks]: the kernel-scope step's result per block */
} ringk_dev_emu_t;

/**
 * Runs a launch of @a threads x @a blocks on as many host threads (the calling one is thread 0
 * of block 0), each calling @a run(@a src, @a state) with its place set (ringk_dev_emu_self()),
 * and returns when all returned: the emulated device's launch, and the test stand-in's of a
 * CUDA launch. 0; -EAGAIN when the host threads could not be made (then none ran @a run);
 * -EINVAL a NULL @a run or @a state, or no thread; -E2BIG above RINGK_DEV_EMU_THREADS_MAX
 * threads in all (both logged through the process's log hook).
 */
int ringk_dev_emu_launch(void (*run)(const struct ringk_dev_kernel *src,
                                     struct ringk_dev_kernel *state),
                         const struct ringk_dev_kernel *src, struct ringk_dev_kernel *state,
                         uint32_t threads, uint32_t blocks);
#endif

/* Outbox record: what follows the cell header of an outbox message. */
typedef struct ringk_dev_out {
    uint32_t    op_arg;    /**< route or topic index */
    int32_t     timeout_ms;
    ringk_msg_t msg;       /**< the message as the device built it; its payload follows */
} ringk_dev_out_t;

/** A device kernel's handler: as ringk_handler_t, on the device. */
typedef int (*ringk_dev_handler_t)(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg);

/* ---- the entry ----------------------------------------------------------------------------- */

#define RINGK_DEVICE_ENTRY_MAGIC 0x524b4445u   /* "RKDE" */
#define RINGK_DEVICE_ENTRY_EMULATED 1u         /* compiled as host C: the emulated device */
#define RINGK_DEVICE_ENTRY_CUDA     2u         /* compiled by nvcc: a CUDA device */

/* The CUDA calls a device kernel needs, compiled in the user's translation unit (so that they
 * use the CUDA runtime the user's program links, whatever libringk was built with). Every
 * function returns 0 or a negative errno, with the CUDA error in @a why. A call on a device
 * makes it current for the call only: the calling thread's current device is kept. */
typedef struct ringk_device_cuda_ops {
    int (*device_count)(char *why, size_t why_len);
    int (*alloc_device)(int device, void **p, size_t bytes, char *why, size_t why_len);
    /** pinned host memory mapped into @a device: the host's and the device's address */
    int (*alloc_mapped)(int device, void **host, void **dev, size_t bytes, char *why,
                        size_t why_len);
    /** copies on @a stream (of @a device) and waits for the copy */
    int (*copy_to_device)(int device, void *dst, const void *src, size_t bytes, void *stream,
                          char *why, size_t why_len);
    int (*stream_create)(int device, void **stream, char *why, size_t why_len);
    /** launches the loop on @a device: the launch copies the kernel from @a src (mapped memory
     *  the host wrote) into @a state (the kernel's device memory) and runs there */
    int (*launch)(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state, int device,
                  void *stream, uint32_t threads, uint32_t blocks, char *why, size_t why_len);
    /** 1 when the stream's work finished, 0 while it runs; -EIO (with the CUDA error in
     *  @a why) when a launch on it failed with an error that ends the device's context (a
     *  sticky one: the kernel faulted); -EAGAIN (the error in @a why) when CUDA answered with
     *  another error, which says nothing of the launch (a query refused while the program
     *  captures a stream, say) */
    int (*stream_status)(void *stream, char *why, size_t why_len);
    void (*free_device)(int device, void *p);
    void (*free_mapped)(void *host);
    void (*stream_destroy)(void *stream);
    /** loads the entry's kernel on @a device (CUDA loads kernels lazily by default, and a load
     *  can wait for every kernel that runs) and gives the local memory (stack) each of its
     *  threads needs in *@a stack_need */
    int (*load)(int device, size_t *stack_need, char *why, size_t why_len);
    /** reads @a device's stack limit per thread (cudaLimitStackSize) into *@a limit, raised to
     *  @a need first when it is lower (the device waits for every kernel that runs) */
    int (*stack_raise)(int device, size_t need, size_t *limit, char *why, size_t why_len);
    /** 0 when code on @a device can read through @a p (a kernel's arg): its own device memory,
     *  managed memory, pinned host memory at an address it uses, any host memory where it has
     *  pageable memory access, or no memory of the process at all (an integer); -EFAULT (why
     *  in @a why) when it cannot, -EIO when CUDA could not say */
    int (*reaches)(int device, const void *p, char *why, size_t why_len);
    /** exchanges the calling thread's stream capture mode with *@a mode (a
     *  cudaStreamCaptureMode, as cudaThreadExchangeStreamCaptureMode does): libringk makes its
     *  calls in RINGK_DEV_CAPTURE_RELAXED, which a stream capture of the program's, in another
     *  thread, does not forbid them in */
    void (*capture_mode)(int *mode);
    /** how many blocks of @a threads threads of the entry's kernel @a device holds at once
     *  (its occupancy for the kernel's registers and shared memory, times its
     *  multiprocessors; 1 where it has no cooperative launch) into *@a max_blocks, and the
     *  most threads a block of it may have into *@a max_threads */
    int (*fit)(int device, uint32_t threads, uint32_t *max_blocks, uint32_t *max_threads,
               char *why, size_t why_len);
} ringk_device_cuda_ops_t;

/** cudaStreamCaptureModeRelaxed */
#define RINGK_DEV_CAPTURE_RELAXED 2

/** What RINGK_DEVICE_ENTRY() defines and a kernel's parameters name (device_entry). */
typedef struct ringk_device_entry {
    uint32_t    magic;      /**< RINGK_DEVICE_ENTRY_MAGIC */
    uint32_t    abi;        /**< RINGK_DEV_ABI */
    uint32_t    kind;       /**< RINGK_DEVICE_ENTRY_EMULATED or _CUDA */
    const char *name;
    /** emulated: runs a launch on the calling thread until it returns (as the CUDA launch
     *  does: copies the kernel from @a src into @a state and runs there) */
    void      (*emu_run)(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state);
    /** CUDA: the runtime calls */
    const ringk_device_cuda_ops_t *cuda;
} ringk_device_entry_t;

/**
 * Makes a CUDA entry known to libringk before any device kernel starts. RINGK_DEVICE_ENTRY()
 * calls it when the program (or the library that defines the entry) is loaded, so a program
 * does not. Before the first device kernel of the process starts on a device, libringk loads
 * the kernels of every entry known so far there, and raises the device's stack limit to the
 * largest need among them: both would otherwise happen at a later kernel's first launch, and
 * both wait for every kernel that runs, which a resident kernel never lets happen. An entry
 * first seen once device kernels run (in a library loaded later) is refused with -EDEADLK
 * unless CUDA loads kernels eagerly (CUDA_MODULE_LOADING=EAGER). Entries of the emulated device
 * are ignored.
 * @return 0, -EINVAL for a NULL @a entry, or -ENOSPC when RINGK_DEVICE_ENTRIES_MAX entries are
 *         known already (the entry is then loaded when a kernel of it is created).
 */
int ringk_device_entry_register(const ringk_device_entry_t *entry);

/**
 * Forgets @a entry (RINGK_DEVICE_ENTRY calls it when the program or library that defines it is
 * unloaded, so that libringk never reads an entry of a library closed with dlclose()). A kernel
 * of it must not exist then.
 */
void ringk_device_entry_unregister(const ringk_device_entry_t *entry);

#define RINGK_DEVICE_ENTRIES_MAX 256

/**
 * The device kernels of this process (of every context) on CUDA device @a device: those made
 * and not yet destroyed, and those whose launch never returned. While there is one, a CUDA call
 * that waits for the whole device (cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost,
 * cudaMemset, cudaDeviceSynchronize, a copy on the legacy default stream, ...) can wait for
 * ever: a program makes such calls before its first device kernel or after its last. ringk's
 * transport asks it before such calls of its own.
 * @return the count; -EINVAL (logged) for a negative @a device.
 */
int ringk_device_kernels(int device);

#ifdef __cplusplus
}
#endif

#endif
