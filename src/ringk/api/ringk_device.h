/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API: what a ring kernel of the CUDA backend runs on the GPU. A user writes the
 * handler as a device function in a .cu file, includes this header, and defines the kernel's
 * entry with RINGK_DEVICE_ENTRY(); the same file compiled as C for the host (no __CUDACC__)
 * runs on the emulated device: host threads stand in for GPU blocks and plain memory for
 * device memory, with the same loop, ring operations and atomics.
 *
 * Header-only: nothing here needs relocatable device code. The loop, the device-side ring
 * operations and the calls below are all inline in the user's translation unit. */
#ifndef RINGK_API_RINGK_DEVICE_H
#define RINGK_API_RINGK_DEVICE_H

#include <core/ringk_ring.h>
#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdint.h>

#if defined(__CUDACC__)
#  include <cuda/atomic>
#  include <cuda_runtime.h>
#  include <stdio.h>
#  define RINGK_DEV_FN static __device__ __forceinline__
#  define RINGK_DEVICE __device__   /**< marks a handler (and what it calls) as device code */
#else
#  define RINGK_DEVICE
#  include <sched.h>
#  include <time.h>
#  define RINGK_DEV_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- portability: atomics with an explicit scope, fences, time, back-off --------------------
 * System scope ("sys") orders against the host and other GPUs: the control block, the host
 * ingress ring and the outbox live in pinned host memory mapped into the device. The ring
 * operations of core/ringk_ring.h use system scope on the device for every ring, the device
 * inbox included (only kernels of one GPU write it, so device scope would be enough there; a
 * device-scope variant is a measured change for a GPU run). On the host (the emulated device)
 * these are C11 atomics. */
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
RINGK_DEV_FN uint64_t ringk_dev_load_rlx_sys_u64(const uint64_t *p)
{
    return RINGK_DEV_ATOMIC(uint64_t, system, p).load(cuda::memory_order_relaxed);
}
/* fence.sc.sys: orders a store before a later load of another word, against the host too (the
 * sleep and terminate protocols: W1/W2, T1/T2 below) */
RINGK_DEV_FN void ringk_dev_fence_sc_sys(void)
{
    cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_system);
}
/* %globaltimer: nanoseconds since the Unix epoch as the driver keeps it (its update step is
 * coarse on some GPUs: GPU-NOTES.md, "Timestamps") */
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
/* one thread of the block runs the loop; the others return at once */
RINGK_DEV_FN int ringk_dev_leader(void)
{
    return (threadIdx.x == 0) && (threadIdx.y == 0) && (threadIdx.z == 0);
}
#else
RINGK_DEV_FN int32_t ringk_dev_load_acq_sys_i32(const int32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
RINGK_DEV_FN void ringk_dev_store_rel_sys_i32(int32_t *p, int32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
RINGK_DEV_FN int ringk_dev_cas_sys_i32(int32_t *p, int32_t expect, int32_t desired)
{
    return __atomic_compare_exchange_n(p, &expect, desired, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_RELAXED);
}
RINGK_DEV_FN void ringk_dev_store_rel_sys_u64(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
RINGK_DEV_FN uint64_t ringk_dev_load_rlx_sys_u64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
RINGK_DEV_FN void ringk_dev_fence_sc_sys(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
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
RINGK_DEV_FN int ringk_dev_leader(void)
{
    return 1;
}
#endif

/* ---- what libringk and the device share (layout version RINGK_DEV_ABI) --------------------- */

#define RINGK_DEV_ABI        1u
#define RINGK_DEV_CTL_MAGIC  0x524b4443u   /* "RKDC" */
#define RINGK_DEV_NAME_MAX   64
#define RINGK_DEV_ROUTES_MAX 32
#define RINGK_DEV_TOPICS_MAX 32
#define RINGK_DEV_BARRIERS_MAX 32
#define RINGK_DEV_NAP_MIN_NS 100u          /* the idle loop's first nap */
#define RINGK_DEV_NAP_MAX_NS 50000u        /* and its longest: what an idle kernel adds to the
                                              latency of the next message */
#define RINGK_DEV_SPINS      64u           /* idle polls before the first nap */

/* Outbox record operations (the cell id of an outbox message). */
#define RINGK_DEV_OUT_SEND    1u   /* op_arg: route index */
#define RINGK_DEV_OUT_PUBLISH 2u   /* op_arg: topic index */
#define RINGK_DEV_OUT_BARRIER 3u   /* op_arg: barrier index; the proxy answers in the control
                                      block (barrier_done, barrier_result) */

/* A route of a device kernel: the target's name, and where the host resolved it to a kernel of
 * the same device, that kernel's device inbox and control block. */
typedef struct ringk_dev_route {
    int32_t  direct;       /**< 1: the fields below hold a same-device target; 0: through the
                                host proxy. Written last by the host (release), read first
                                (acquire) */
    uint32_t receiver;     /**< target kernel id */
    uint32_t max_in;       /**< target's max_in */
    uint32_t log2_ncells;  /**< target inbox geometry */
    uint32_t cell_size;
    uint32_t pad;
    void    *inbox;        /**< target's device inbox (device address) */
    struct ringk_dev_ctl *ctl; /**< target's control block (device address) */
    uint64_t head_cache;   /**< this sender's copy of the target inbox's head */
    char     name[RINGK_DEV_NAME_MAX];
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
} ringk_dev_ctl_t;

/* What each launch of the loop gets (a kernel argument, by value): addresses valid on the
 * device, and the user's argument. */
typedef struct ringk_dev_kernel {
    ringk_dev_ctl_t   *ctl;
    ringk_ring_t       ingress;   /**< from the host: pinned mapped memory */
    ringk_ring_t       inbox;     /**< from kernels of the same device: device memory */
    ringk_ring_t       outbox;    /**< to the host proxy: pinned mapped memory */
    ringk_dev_route_t *routes;    /**< ctl->nroutes of them */
    char             (*topics)[RINGK_DEV_NAME_MAX]; /**< topics it publishes to */
    char             (*barriers)[RINGK_DEV_NAME_MAX]; /**< barriers it takes part in */
    void              *arg;
    /* the loop's own state, kept in the launch (positions are read back from the rings at
     * each launch) */
    uint64_t           in_head, dev_head;
    ringk_ring_prod_t  out_prod;
    uint32_t           turn;
} ringk_dev_kernel_t;

/* Outbox record: what follows the cell header of an outbox message. */
typedef struct ringk_dev_out {
    uint32_t    op_arg;    /**< route or topic index */
    int32_t     timeout_ms;
    ringk_msg_t msg;       /**< the message as the device built it; its payload follows */
} ringk_dev_out_t;

/** A device kernel's handler: as ringk_handler_t, on the device. */
typedef int (*ringk_dev_handler_t)(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg);

/* ---- the device API ------------------------------------------------------------------------ */

/** The kernel's id (as ringk_kernel_id on the host). */
RINGK_DEV_FN uint32_t ringk_dev_id(const ringk_dev_kernel_t *k)
{
    return k->ctl->id;
}

/** The payload of a message. */
RINGK_DEV_FN const void *ringk_dev_msg_payload(const ringk_msg_t *msg)
{
    return (const void*)(msg + 1);
}

/** The kernel's hybrid logical clock now (a local event), in ringk_hlc_t's format: milliseconds
 *  since the epoch above 16 bits of logical counter. Only the kernel's loop writes it. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_tick(ringk_dev_kernel_t *k)
{
    uint64_t now  = (ringk_dev_now_ns() / 1000000u) << 16;
    uint64_t last = k->ctl->hlc;
    uint64_t t    = (now > last) ? now : last + 1;

    ringk_dev_store_rel_sys_u64(&k->ctl->hlc, t);
    return t;
}

/** A receive of a message stamped @a remote. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_recv(ringk_dev_kernel_t *k, uint64_t remote)
{
    uint64_t t = ringk_dev_hlc_tick(k);

    if (remote >= t) {
        t = remote + 1;
        ringk_dev_store_rel_sys_u64(&k->ctl->hlc, t);
    }
    return t;
}

/** The clock's last value, without an event. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_now(const ringk_dev_kernel_t *k)
{
    return ringk_dev_load_rlx_sys_u64(&k->ctl->hlc);
}

/* Whether a wait begun at @a t0 with @a timeout_ms is over (RINGK_WAIT_FOREVER: never). */
RINGK_DEV_FN int ringk_dev_wait_over(uint64_t t0, int timeout_ms)
{
    return (timeout_ms != RINGK_WAIT_FOREVER) &&
           (ringk_dev_now_ns() - t0 >= (uint64_t)timeout_ms * 1000000u);
}

/* Fills the message header at @a m for a send of @a k. */
RINGK_DEV_FN void ringk_dev_msg_fill(ringk_dev_kernel_t *k, ringk_msg_t *m, uint32_t receiver,
                                     uint32_t type, uint32_t len)
{
    ringk_dev_ctl_t *c = k->ctl;

    m->sender    = c->sender;
    m->receiver  = receiver;
    m->type      = (uint16_t)type;
    m->flags     = 0;
    m->length    = len;
    m->seq       = c->seq;
    m->timestamp = c->timestamps ? ringk_dev_hlc_tick(k) : 0;
    m->enq_ns    = 0;
    ringk_dev_store_rel_sys_u64(&c->seq, c->seq + 1);
}

/* Copies @a len bytes: plain byte loop on the device (no memcpy call in device code that the
 * compiler cannot see through), memcpy on the host. */
RINGK_DEV_FN void ringk_dev_copy(void *dst, const void *src, uint32_t len)
{
#if defined(__CUDA_ARCH__)
    uint8_t *d = (uint8_t*)dst;
    const uint8_t *s = (const uint8_t*)src;
    uint32_t i;

    for (i = 0; i < len; i++) {
        d[i] = s[i];
    }
#else
    memcpy(dst, src, len);
#endif
}

/* Puts a record into the outbox (single producer: only this kernel's loop writes it), waiting
 * for the host proxy to make room as @a timeout_ms says: 0, -EAGAIN or -ETIMEDOUT. */
RINGK_DEV_FN int ringk_dev_outbox_put(ringk_dev_kernel_t *k, uint32_t op, uint32_t op_arg,
                                      uint32_t receiver, uint32_t type, const void *payload,
                                      uint32_t len, int timeout_ms)
{
    uint32_t bytes = (uint32_t)sizeof(ringk_dev_out_t) + len;
    uint32_t nc    = ringk_ring_cells_for(bytes, k->outbox.cell_size);
    uint64_t pos, t0 = 0;
    ringk_dev_out_t *rec;
    uint32_t nap = RINGK_DEV_NAP_MIN_NS;

    while (!ringk_ring_sp_claim(&k->outbox, &k->out_prod, nc, &pos)) {
        if (timeout_ms == RINGK_WAIT_NONE) {
            return -EAGAIN;
        }
        if (t0 == 0) {
            t0 = ringk_dev_now_ns();
        } else if (ringk_dev_wait_over(t0, timeout_ms)) {
            return -ETIMEDOUT;
        }
        ringk_dev_nap(nap);
        nap = (nap < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * nap : RINGK_DEV_NAP_MAX_NS;
    }
    rec = (ringk_dev_out_t*)ringk_ring_payload(&k->outbox, pos);
    rec->op_arg     = op_arg;
    rec->timeout_ms = timeout_ms;
    ringk_dev_msg_fill(k, &rec->msg, receiver, type, len);
    ringk_dev_copy(rec + 1, payload, len);
    /* P1 at system scope (ringk_ring.h's device atomics): the host proxy sees the record whole */
    ringk_ring_publish(&k->outbox, pos, bytes, (uint16_t)nc, (uint8_t)op, 0);
    return 0;
}

/* A send into the device inbox of a kernel of the same device (route @a rt, resolved by the
 * host): claim with a compare-and-swap on the target's tail, write, publish by one release
 * store of the cell header, then wake the target if it returned (event-driven). */
RINGK_DEV_FN int ringk_dev_send_direct(ringk_dev_kernel_t *k, ringk_dev_route_t *rt,
                                       uint32_t type, const void *payload, uint32_t len,
                                       int timeout_ms)
{
    ringk_ring_t r;
    ringk_dev_ctl_t *tc = rt->ctl;
    uint32_t nc = ringk_ring_cells_for(sizeof(ringk_msg_t) + len, rt->cell_size);
    uint32_t nap = RINGK_DEV_NAP_MIN_NS;
    uint64_t pos, t0 = 0;
    int32_t state;

    if (len > rt->max_in) {
        return -EMSGSIZE;
    }
    ringk_ring_view(&r, rt->inbox, rt->log2_ncells, rt->cell_size);
    for (;;) {
        state = ringk_dev_load_acq_sys_i32(&tc->state);
        if ((state == RINGK_KERNEL_TERMINATING) || (state == RINGK_KERNEL_TERMINATED)) {
            return -EPIPE;
        }
        if (ringk_ring_mp_claim_cached(&r, nc, &rt->head_cache, &pos)) {
            break;
        }
        if (timeout_ms == RINGK_WAIT_NONE) {
            return -EAGAIN;
        }
        if (t0 == 0) {
            t0 = ringk_dev_now_ns();
        } else if (ringk_dev_wait_over(t0, timeout_ms)) {
            return -ETIMEDOUT;
        }
        ringk_dev_nap(nap);
        nap = (nap < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * nap : RINGK_DEV_NAP_MAX_NS;
    }
    /* T1 (device): the claim (a seq_cst compare-and-swap) before this read of the state; pairs
     * with T2 in ringk_dev_try_finish(). A target that is terminating gets a cancel cell. */
    ringk_dev_fence_sc_sys();
    state = ringk_dev_load_acq_sys_i32(&tc->state);
    if ((state == RINGK_KERNEL_TERMINATING) || (state == RINGK_KERNEL_TERMINATED)) {
        ringk_ring_cancel(&r, pos, nc);
        return -EPIPE;
    }
    ringk_dev_msg_fill(k, (ringk_msg_t*)ringk_ring_payload(&r, pos), rt->receiver, type, len);
    ringk_dev_copy((ringk_msg_t*)ringk_ring_payload(&r, pos) + 1, payload, len);
    ringk_ring_publish(&r, pos, (uint32_t)sizeof(ringk_msg_t) + len, (uint16_t)nc,
                       (uint8_t)type, 0);
    /* W2 (device): the publish before the read of 'idle'; pairs with W1 in ringk_dev_park().
     * The host proxy relaunches a kernel whose doorbell rang. */
    ringk_dev_fence_sc_sys();
    if (ringk_dev_load_acq_sys_i32(&tc->idle) && ringk_dev_cas_sys_i32(&tc->idle, 1, 0)) {
        ringk_dev_store_rel_sys_i32(&tc->doorbell, 1);
    }
    return 0;
}

/**
 * Sends a message on route @a route (an index into the kernel's publishes_to): straight into
 * the device inbox of a kernel on the same device, else through the outbox to the host proxy,
 * which delivers it as ringk_send_route() would (a CPU kernel of this process, a kernel of
 * another process). @a timeout_ms: RINGK_WAIT_NONE, RINGK_WAIT_FOREVER or milliseconds to wait
 * for room in the inbox or the outbox.
 * @return 0; -EINVAL no such route or a bad type; -EMSGSIZE above max_out or the target's
 *         max_in; -EAGAIN full (RINGK_WAIT_NONE); -ETIMEDOUT still full; -EPIPE the target is
 *         terminating. Errors the host proxy meets later (the target does not subscribe to this
 *         kernel, a lost process) are counted in the kernel's statistics (send_failed) and
 *         logged on the host.
 */
RINGK_DEV_FN int ringk_dev_send_route(ringk_dev_kernel_t *k, int route, uint32_t type,
                                      const void *payload, uint32_t len, int timeout_ms)
{
    ringk_dev_route_t *rt;
    int ret;

    if ((route < 0) || ((uint32_t)route >= k->ctl->nroutes) || (type > RINGK_MSG_TERMINATE) ||
        ((payload == NULL) && (len > 0)) || (timeout_ms < RINGK_WAIT_FOREVER)) {
        return -EINVAL;
    }
    if (len > k->ctl->max_out) {
        return -EMSGSIZE;
    }
    rt = &k->routes[route];
    if (ringk_dev_load_acq_sys_i32(&rt->direct)) {
        ret = ringk_dev_send_direct(k, rt, type, payload, len, timeout_ms);
        if (ret == 0) {
            ringk_dev_store_rel_sys_u64(&k->ctl->msgs_direct, k->ctl->msgs_direct + 1);
        }
    } else {
        ret = ringk_dev_outbox_put(k, RINGK_DEV_OUT_SEND, (uint32_t)route, 0, type, payload, len,
                                   timeout_ms);
    }
    if (ret == 0) {
        ringk_dev_store_rel_sys_u64(&k->ctl->msgs_out, k->ctl->msgs_out + 1);
    }
    return ret;
}

/* Whether the zero-terminated @a a equals @a b (at most RINGK_DEV_NAME_MAX bytes). */
RINGK_DEV_FN int ringk_dev_name_eq(const char *a, const char *b)
{
    uint32_t i;

    for (i = 0; i < RINGK_DEV_NAME_MAX; i++) {
        if (a[i] != b[i]) {
            return 0;
        }
        if (a[i] == '\0') {
            return 1;
        }
    }
    return 0;
}

/** The route number of kernel @a name in the kernel's publishes_to, or -ENOENT. */
RINGK_DEV_FN int ringk_dev_route_index(const ringk_dev_kernel_t *k, const char *name)
{
    uint32_t i;

    for (i = 0; i < k->ctl->nroutes; i++) {
        if (ringk_dev_name_eq(k->routes[i].name, name)) {
            return (int)i;
        }
    }
    return -ENOENT;
}

/** Sends to kernel @a name, which must be in the kernel's publishes_to (else -EPERM); as
 *  ringk_dev_send_route(). */
RINGK_DEV_FN int ringk_dev_send(ringk_dev_kernel_t *k, const char *name, uint32_t type,
                                const void *payload, uint32_t len, int timeout_ms)
{
    int route = ringk_dev_route_index(k, name);

    return (route < 0) ? -EPERM : ringk_dev_send_route(k, route, type, payload, len, timeout_ms);
}

/** Publishes to @a topic (in the kernel's topics_pub, else -EPERM) through the host proxy,
 *  which fans it out to every subscriber as ringk_publish() does; @a timeout_ms bounds the
 *  wait for room in the outbox. 0, -EPERM, -EMSGSIZE, -EAGAIN, -ETIMEDOUT. */
RINGK_DEV_FN int ringk_dev_publish(ringk_dev_kernel_t *k, const char *topic, const void *payload,
                                   uint32_t len, int timeout_ms)
{
    uint32_t i;

    if (((payload == NULL) && (len > 0)) || (timeout_ms < RINGK_WAIT_FOREVER)) {
        return -EINVAL;
    }
    if (len > k->ctl->max_out) {
        return -EMSGSIZE;
    }
    for (i = 0; i < k->ctl->ntopics; i++) {
        if (ringk_dev_name_eq(k->topics[i], topic)) {
            return ringk_dev_outbox_put(k, RINGK_DEV_OUT_PUBLISH, i, RINGK_MSG_BROADCAST,
                                        RINGK_MSG_DATA, payload, len, timeout_ms);
        }
    }
    return -EPERM;
}

/**
 * Waits at named barrier @a name (in the kernel's barriers, else -ENOENT) until every
 * participant of the job (CPU and device kernels, in every process) has arrived. The host proxy
 * arrives for the kernel and answers; the loop takes no message meanwhile. @a timeout_ms:
 * RINGK_WAIT_FOREVER or milliseconds (then -ETIMEDOUT, and the kernel has left the barrier).
 * @return 0, -ENOENT, -ETIMEDOUT, -EPIPE (a process taking part is gone), -ECANCELED (the
 * kernel is being terminated: it has left the barrier), -EAGAIN / -ETIMEDOUT also when the
 * outbox stayed full (RINGK_WAIT_NONE / for @a timeout_ms), -EINVAL (@a timeout_ms below
 * RINGK_WAIT_FOREVER).
 */
RINGK_DEV_FN int ringk_dev_barrier_wait(ringk_dev_kernel_t *k, const char *name, int timeout_ms)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint32_t i, nap = RINGK_DEV_NAP_MIN_NS;
    uint64_t req;
    int ret;

    if (timeout_ms < RINGK_WAIT_FOREVER) {
        return -EINVAL;
    }
    for (i = 0; (i < c->nbarriers) && !ringk_dev_name_eq(k->barriers[i], name); i++) {
    }
    if (i == c->nbarriers) {
        return -ENOENT;
    }
    ret = ringk_dev_outbox_put(k, RINGK_DEV_OUT_BARRIER, i, 0, RINGK_MSG_CONTROL, NULL, 0,
                               timeout_ms);
    if (ret != 0) {
        return ret; /* not asked: the answers still match the requests */
    }
    /* the proxy answers requests in order, one at a time: this one is answered by count req */
    req = c->barrier_req + 1;
    ringk_dev_store_rel_sys_u64(&c->barrier_req, req);
    /* the proxy stores the result, then barrier_done with a release store */
    while (ringk_load_acquire_u64(&c->barrier_done) != req) {
        ringk_dev_nap(nap);
        nap = (nap < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * nap : RINGK_DEV_NAP_MAX_NS;
    }
    return ringk_dev_load_acq_sys_i32(&c->barrier_result);
}

/* ---- the dispatch loop ------------------------------------------------------------------- */

/* Takes up to @a limit messages of ring @a r from *@a head_p, hands each to @a h; returns how
 * many. Cells go back to their producers once the batch is done (one release store). */
RINGK_DEV_FN uint32_t ringk_dev_take(ringk_dev_kernel_t *k, ringk_ring_t *r, uint64_t *head_p,
                                     uint32_t limit, ringk_dev_handler_t h)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint64_t head = *head_p, start = head;
    const ringk_cell_hdr_t *cell;
    const ringk_msg_t *msg;
    uint32_t n = 0, len, ncells;
    uint8_t flags, id;

    while (n < limit) {
        cell = ringk_ring_peek(r, &head);
        if (cell == NULL) {
            break;
        }
        len    = cell->len;
        ncells = cell->ncells;
        flags  = cell->flags;
        id     = cell->id;
        msg    = (const ringk_msg_t*)ringk_ring_payload(r, head);
        /* a cell is a producer's writing: checked before use, refused whole when malformed */
        if ((ringk_ring_msg_check(r, head, len, ncells, flags, r->ncells) != 0) ||
            (len < sizeof(ringk_msg_t)) || (id > RINGK_MSG_TERMINATE) ||
            (msg->length != len - sizeof(ringk_msg_t)) || (msg->length > c->max_in)) {
            ringk_dev_store_rel_sys_u64(&c->bad_cells, c->bad_cells + 1);
            ringk_ring_done(r, head, 1, 0xff);
            head++;
            continue;
        }
        if (msg->timestamp != 0) {
            ringk_dev_hlc_recv(k, msg->timestamp);
        }
        if (msg->type == RINGK_MSG_TERMINATE) {
            /* everything before it is handled; the host makes the kernel terminating */
            ringk_dev_store_rel_sys_i32(&c->term_req, 1);
        } else if (h(k, msg, k->arg) < 0) {
            ringk_dev_store_rel_sys_u64(&c->handler_errors, c->handler_errors + 1);
        }
        ringk_ring_done(r, head, ncells, flags);
        head += ncells;
        n++;
    }
    if (head != start) {
        /* R1: after the reads above; the producers waiting for room see it */
        ringk_ring_release_to(r, head);
        *head_p = head;
        ringk_dev_store_rel_sys_u64(&c->msgs_in, c->msgs_in + n);
    }
    return n;
}

/* One iteration: up to the processing mode's number of messages, from the device inbox and the
 * host ingress ring in turn (each ring is FIFO per sender, and a sender uses one of them). */
RINGK_DEV_FN uint32_t ringk_dev_iteration(ringk_dev_kernel_t *k, ringk_dev_handler_t h)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint32_t limit, n;

    if (c->processing == RINGK_PROCESSING_CONTINUOUS) {
        limit = 1;
    } else if ((c->processing == RINGK_PROCESSING_ADAPTIVE) &&
               (ringk_dev_load_rlx_sys_u64(&k->ingress.prod->pos) - k->in_head <= 16) &&
               (ringk_load_relaxed_u64(&k->inbox.prod->pos) - k->dev_head <= 16)) {
        limit = 1;
    } else {
        limit = c->max_per_iteration ? c->max_per_iteration : UINT32_MAX;
    }
    k->turn ^= 1u;
    if (k->turn) {
        n = ringk_dev_take(k, &k->inbox, &k->dev_head, limit, h);
        return n + ((n < limit) ? ringk_dev_take(k, &k->ingress, &k->in_head, limit - n, h) : 0);
    }
    n = ringk_dev_take(k, &k->ingress, &k->in_head, limit, h);
    return n + ((n < limit) ? ringk_dev_take(k, &k->inbox, &k->dev_head, limit - n, h) : 0);
}

/* Whether both inboxes are empty: the producers' tails against the consumer's heads. */
RINGK_DEV_FN int ringk_dev_empty(const ringk_dev_kernel_t *k)
{
    return (ringk_load_acquire_u64(&k->ingress.prod->pos) == k->in_head) &&
           (ringk_load_acquire_u64(&k->inbox.prod->pos) == k->dev_head);
}

/* A terminating kernel stops once every claimed cell was consumed. T2: the state (read by the
 * caller) before the tails; pairs with T1 in the senders (host: ringk_inbox_claim, device:
 * ringk_dev_send_direct), who read the state after their claim and cancel. */
RINGK_DEV_FN int ringk_dev_try_finish(ringk_dev_kernel_t *k)
{
    ringk_dev_fence_sc_sys();
    return ringk_dev_empty(k);
}

/* Event-driven: the loop returns after max_iterations idle iterations. W1: 'idle' before the
 * inboxes and the state are read again; a sender that claimed before is seen (the loop goes
 * on if it gets 'idle' back first), one that claims after sees the flag and relaunches.
 * @return 1: return from the launch; 0: go on. */
RINGK_DEV_FN int ringk_dev_park(ringk_dev_kernel_t *k)
{
    ringk_dev_ctl_t *c = k->ctl;
    int32_t state;

    ringk_dev_store_rel_sys_i32(&c->idle, 1);
    ringk_dev_fence_sc_sys();
    state = ringk_dev_load_acq_sys_i32(&c->state);
    if (((state == RINGK_KERNEL_ACTIVE) && !ringk_dev_empty(k)) ||
        (state == RINGK_KERNEL_TERMINATING)) {
        /* work after all: take the launch back unless a waker took it (then it relaunches) */
        return !ringk_dev_cas_sys_i32(&c->idle, 1, 0);
    }
    return 1;
}

/**
 * The dispatch loop of a device kernel, run by one thread of the launch (the others return): it
 * takes messages from the device inbox and the host ingress ring and hands them to @a h, as the
 * kernel's processing mode says; persistent, it naps when idle (RINGK_DEV_NAP_MAX_NS at most)
 * and runs until terminated; event-driven, it returns after max_iterations idle iterations and
 * the host relaunches it when a message comes. An inactive kernel takes nothing. Terminating,
 * it drains both inboxes, then sets 'done'.
 */
RINGK_DEV_FN void ringk_dev_run(ringk_dev_kernel_t *k, ringk_dev_handler_t h)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint32_t idle = 0, idle_iters = 0, nap = RINGK_DEV_NAP_MIN_NS;
    int32_t state;

    if (!ringk_dev_leader() || (c->magic != RINGK_DEV_CTL_MAGIC) || (c->abi != RINGK_DEV_ABI) ||
        ringk_dev_load_acq_sys_i32(&c->done)) {
        return;
    }
    /* where the last launch left off: consumers publish their head at the end of each batch,
     * and the outbox's progress marker is the producer's position */
    k->in_head      = ringk_load_acquire_u64(&k->ingress.cons->pos);
    k->dev_head     = ringk_load_acquire_u64(&k->inbox.cons->pos);
    k->out_prod.pos = ringk_load_relaxed_u64(&k->outbox.prod->pos);
    k->out_prod.head = ringk_load_acquire_u64(&k->outbox.cons->pos);
    k->turn         = 0;
    for (;;) {
        state = ringk_dev_load_acq_sys_i32(&c->state);
        if ((state != RINGK_KERNEL_INACTIVE) && (ringk_dev_iteration(k, h) > 0)) {
            ringk_dev_store_rel_sys_u64(&c->iterations, c->iterations + 1);
            idle = idle_iters = 0;
            nap  = RINGK_DEV_NAP_MIN_NS;
            continue;
        }
        if ((state == RINGK_KERNEL_TERMINATING) && ringk_dev_try_finish(k)) {
            ringk_dev_store_rel_sys_i32(&c->done, 1);
            return;
        }
        if ((c->mode == RINGK_MODE_EVENT_DRIVEN) && (++idle_iters >= c->max_iterations)) {
            if (ringk_dev_park(k)) {
                return;
            }
            idle_iters = 0;
            continue;
        }
        if (++idle > RINGK_DEV_SPINS) {
            ringk_dev_nap(nap);
            nap = (nap < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * nap : RINGK_DEV_NAP_MAX_NS;
        }
    }
}

/* ---- the entry ----------------------------------------------------------------------------- */

#define RINGK_DEVICE_ENTRY_MAGIC 0x524b4445u   /* "RKDE" */
#define RINGK_DEVICE_ENTRY_EMULATED 1u         /* compiled as host C: the emulated device */
#define RINGK_DEVICE_ENTRY_CUDA     2u         /* compiled by nvcc: a CUDA device */

/* The CUDA calls a device kernel needs, compiled in the user's translation unit (so that they
 * use the CUDA runtime the user's program links, whatever libringk was built with). Every
 * function returns 0 or a negative errno, with the CUDA error in @a why. */
typedef struct ringk_device_cuda_ops {
    int (*device_count)(char *why, size_t why_len);
    int (*set_device)(int device, char *why, size_t why_len);
    int (*alloc_device)(void **p, size_t bytes, char *why, size_t why_len);
    int (*alloc_mapped)(void **host, void **dev, size_t bytes, char *why, size_t why_len);
    int (*copy_to_device)(void *dst, const void *src, size_t bytes, void *stream, char *why,
                          size_t why_len);
    int (*stream_create)(void **stream, char *why, size_t why_len);
    int (*launch)(const ringk_dev_kernel_t *k, void *stream, char *why, size_t why_len);
    int (*stream_done)(void *stream);      /**< 1 when the stream's work finished, 0 if not */
    void (*free_device)(void *p);
    void (*free_mapped)(void *host);
    void (*stream_destroy)(void *stream);
} ringk_device_cuda_ops_t;

/** What RINGK_DEVICE_ENTRY() defines and a kernel's parameters name (device_entry). */
typedef struct ringk_device_entry {
    uint32_t    magic;      /**< RINGK_DEVICE_ENTRY_MAGIC */
    uint32_t    abi;        /**< RINGK_DEV_ABI */
    uint32_t    kind;       /**< RINGK_DEVICE_ENTRY_EMULATED or _CUDA */
    const char *name;
    /** emulated: runs the loop on the calling thread until the launch returns */
    void      (*emu_run)(ringk_dev_kernel_t *k);
    /** CUDA: the runtime calls */
    const ringk_device_cuda_ops_t *cuda;
} ringk_device_entry_t;

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
/* The CUDA calls, once per translation unit that defines an entry (host code). */
#  define RINGK_CUDA_FN static
#  define RINGK_DEVICE_CUDA_WHY(err, what) \
    (snprintf(why, why_len, "%s: %s", what, cudaGetErrorString(err)), -EIO)
RINGK_CUDA_FN int ringk_cuda_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);

    if (err == cudaErrorNoDevice || (err == cudaSuccess && n == 0)) {
        snprintf(why, why_len, "no CUDA device");
        return -ENODEV;
    }
    if (err == cudaErrorInsufficientDriver) {
        snprintf(why, why_len, "no NVIDIA driver (or one older than the CUDA runtime): %s",
                 cudaGetErrorString(err));
        return -ENODEV;
    }
    return (err == cudaSuccess) ? n : RINGK_DEVICE_CUDA_WHY(err, "cudaGetDeviceCount");
}
RINGK_CUDA_FN int ringk_cuda_set_device(int device, char *why, size_t why_len)
{
    cudaError_t err = cudaSetDevice(device);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaSetDevice");
}
RINGK_CUDA_FN int ringk_cuda_alloc_device(void **p, size_t bytes, char *why, size_t why_len)
{
    cudaError_t err = cudaMalloc(p, bytes);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaMalloc");
}
RINGK_CUDA_FN int ringk_cuda_alloc_mapped(void **host, void **dev, size_t bytes, char *why,
                                   size_t why_len)
{
    cudaError_t err = cudaHostAlloc(host, bytes, cudaHostAllocMapped);

    if (err != cudaSuccess) {
        return RINGK_DEVICE_CUDA_WHY(err, "cudaHostAlloc");
    }
    err = cudaHostGetDevicePointer(dev, *host, 0);
    if (err != cudaSuccess) {
        cudaFreeHost(*host);
        return RINGK_DEVICE_CUDA_WHY(err, "cudaHostGetDevicePointer");
    }
    return 0;
}
RINGK_CUDA_FN int ringk_cuda_copy_to_device(void *dst, const void *src, size_t bytes, void *stream,
                                     char *why, size_t why_len)
{
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                      (cudaStream_t)stream);
    if (err == cudaSuccess) {
        err = cudaStreamSynchronize((cudaStream_t)stream);
    }
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaMemcpyAsync");
}
RINGK_CUDA_FN int ringk_cuda_stream_create(void **stream, char *why, size_t why_len)
{
    /* non-blocking: it never synchronizes with the legacy NULL stream (GPU-NOTES.md) */
    cudaError_t err = cudaStreamCreateWithFlags((cudaStream_t*)stream, cudaStreamNonBlocking);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaStreamCreateWithFlags");
}
RINGK_CUDA_FN int ringk_cuda_stream_done(void *stream)
{
    return cudaStreamQuery((cudaStream_t)stream) != cudaErrorNotReady;
}
RINGK_CUDA_FN void ringk_cuda_free_device(void *p)
{
    cudaFree(p);
}
RINGK_CUDA_FN void ringk_cuda_free_mapped(void *host)
{
    cudaFreeHost(host);
}
RINGK_CUDA_FN void ringk_cuda_stream_destroy(void *stream)
{
    cudaStreamDestroy((cudaStream_t)stream);
}
#  define RINGK_DEVICE_ENTRY(sym, handler) \
    __global__ void sym##_ringk_global(ringk_dev_kernel_t k) \
    { \
        ringk_dev_run(&k, handler); \
    } \
    static int sym##_ringk_launch(const ringk_dev_kernel_t *k, void *stream, char *why, \
                                  size_t why_len) \
    { \
        cudaError_t err; \
        sym##_ringk_global<<<1, 32, 0, (cudaStream_t)stream>>>(*k); \
        err = cudaGetLastError(); \
        return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "kernel launch"); \
    } \
    static const ringk_device_cuda_ops_t sym##_ringk_ops = { \
        ringk_cuda_device_count, ringk_cuda_set_device, ringk_cuda_alloc_device, \
        ringk_cuda_alloc_mapped, ringk_cuda_copy_to_device, ringk_cuda_stream_create, \
        sym##_ringk_launch, ringk_cuda_stream_done, ringk_cuda_free_device, \
        ringk_cuda_free_mapped, ringk_cuda_stream_destroy \
    }; \
    extern "C" const ringk_device_entry_t sym = { \
        RINGK_DEVICE_ENTRY_MAGIC, RINGK_DEV_ABI, RINGK_DEVICE_ENTRY_CUDA, #sym, NULL, \
        &sym##_ringk_ops \
    }
#else
/**
 * Defines the device kernel entry @a sym (a const ringk_device_entry_t, given to
 * ringk_kernel_create as params.device_entry) whose loop hands messages to @a handler, a
 * function of type ringk_dev_handler_t (__device__ under nvcc). Compiled by nvcc, @a sym is a
 * CUDA kernel of one block; compiled as host C, the same source runs on the emulated device.
 */
#  define RINGK_DEVICE_ENTRY(sym, handler) \
    static void sym##_ringk_run(ringk_dev_kernel_t *k) \
    { \
        ringk_dev_run(k, handler); \
    } \
    const ringk_device_entry_t sym = { \
        RINGK_DEVICE_ENTRY_MAGIC, RINGK_DEV_ABI, RINGK_DEVICE_ENTRY_EMULATED, #sym, \
        sym##_ringk_run, NULL \
    }
#endif

#endif
