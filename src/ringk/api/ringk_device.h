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

#include <ringk/api/ringk_device_abi.h>
#include <ringk/api/ringk_device_sync.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Adds @a n to counter @a f of the launch's own copies. The loop stores them to the control
 * block (ringk_dev_own_store) when it goes idle, every RINGK_DEV_STATE_POLLS busy turns, before
 * a wait and before the launch returns: a message costs no write across the bus for its
 * counters, and a burst of sends from one handler call none at all. */
#define RINGK_DEV_COUNT(k, f, n) \
    ((k)->own.f += (n), (k)->own_changed = 1u)

/* Stores the launch's counters and clock to the control block if any changed since the last
 * store (the loop is their only writer, so nothing is read back). Relaxed stores: the host
 * reads them as statistics and orders nothing by them, and the next launch, which reads them
 * back, is ordered after this one by its stream; a release store would put a system-wide fence
 * (a wait for every earlier write to cross the bus) in front of each. */
RINGK_DEV_FN void ringk_dev_own_store(ringk_dev_kernel_t *k)
{
    ringk_dev_ctl_t *c = k->ctl;
    const ringk_dev_own_t *o = &k->own;

    if (!k->own_changed) {
        return;
    }
    k->own_changed = 0;
    ringk_dev_store_rlx_sys_u64(&c->handler_errors, o->handler_errors);
    ringk_dev_store_rlx_sys_u64(&c->bad_cells, o->bad_cells);
    ringk_dev_store_rlx_sys_u64(&c->iterations, o->iterations);
    ringk_dev_store_rlx_sys_u64(&c->msgs_direct, o->msgs_direct);
    ringk_dev_store_rlx_sys_u64(&c->seq, o->seq);
    ringk_dev_store_rlx_sys_u64(&c->hlc, o->hlc);
    ringk_dev_store_rlx_sys_u64(&c->barrier_req, o->barrier_req);
    ringk_dev_store_rlx_sys_u64(&c->msgs_out, o->msgs_out);
    ringk_dev_store_rlx_sys_u64(&c->msgs_in, o->msgs_in);
}

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

/* ringk_dev_hlc_tick() with the kernel's lock held, or in one thread. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_tick_in(ringk_dev_kernel_t *k)
{
    uint64_t now  = ((ringk_dev_now_ns() + k->clock_off) / 1000000u) << 16;
    uint64_t last = k->own.hlc;
    uint64_t t    = (now > last) ? now : last + 1;

    k->own.hlc     = t; /* stored to the control block with the counters */
    k->own_changed = 1u;
    return t;
}

/* ringk_dev_hlc_recv() with the kernel's lock held, or in one thread. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_merge(ringk_dev_kernel_t *k, uint64_t remote)
{
    uint64_t t = ringk_dev_hlc_tick_in(k);

    if (remote >= t) {
        t = k->own.hlc = remote + 1;
    }
    return t;
}

/** Per thread: the kernel's hybrid logical clock now (a local event), in ringk_hlc_t's format:
 *  milliseconds since the epoch above 16 bits of logical counter. The kernel has one clock;
 *  its threads take turns at it. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_tick(ringk_dev_kernel_t *k)
{
    uint64_t t;

    ringk_dev_turn_take(k);
    t = ringk_dev_hlc_tick_in(k);
    ringk_dev_turn_give(k);
    return t;
}

/** Per thread: a receive of a message stamped @a remote. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_recv(ringk_dev_kernel_t *k, uint64_t remote)
{
    uint64_t t;

    ringk_dev_turn_take(k);
    t = ringk_dev_hlc_merge(k, remote);
    ringk_dev_turn_give(k);
    return t;
}

/** Per thread: the clock's last value, without an event. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_now(ringk_dev_kernel_t *k)
{
    uint64_t t;

    ringk_dev_turn_take(k);
    t = k->own.hlc;
    ringk_dev_turn_give(k);
    return t;
}

/* Nanoseconds from @a t0 to @a now, 0 when the clock stepped back past @a t0. */
RINGK_DEV_FN uint64_t ringk_dev_elapsed_ns(uint64_t t0, uint64_t now)
{
    return (now > t0) ? now - t0 : 0;
}

/* Whether a wait begun at @a t0 with @a timeout_ms is over (RINGK_WAIT_FOREVER: never). */
RINGK_DEV_FN int ringk_dev_wait_over(uint64_t t0, int timeout_ms)
{
    return (timeout_ms != RINGK_WAIT_FOREVER) &&
           (ringk_dev_elapsed_ns(t0, ringk_dev_now_ns()) >= (uint64_t)timeout_ms * 1000000u);
}

/* One step of a wait of kernel @a k for room or a message that @a timeout_ms bounds: -EAGAIN
 * at once for RINGK_WAIT_NONE, -ETIMEDOUT once the bound passed, else 0 after a nap (doubling
 * from RINGK_DEV_NAP_MIN_NS to RINGK_DEV_NAP_MAX_NS). *@a t0_p (0 at first) and *@a nap_p (the
 * first nap) are the wait's state. The first step stores the kernel's counters: a wait may be
 * long, and the host sees them as they are when it begins. */
RINGK_DEV_FN int ringk_dev_wait_step(ringk_dev_kernel_t *k, int timeout_ms, uint64_t *t0_p,
                                     uint32_t *nap_p)
{
    if (timeout_ms == RINGK_WAIT_NONE) {
        return -EAGAIN;
    }
    if (*t0_p == 0) {
        ringk_dev_own_store(k);
        *t0_p = ringk_dev_now_ns();
    } else if (ringk_dev_wait_over(*t0_p, timeout_ms)) {
        return -ETIMEDOUT;
    }
    ringk_dev_nap(*nap_p);
    *nap_p = (*nap_p < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * *nap_p : RINGK_DEV_NAP_MAX_NS;
    return 0;
}

/* Fills the message header at @a m for a send of @a k. */
RINGK_DEV_FN void ringk_dev_msg_fill(ringk_dev_kernel_t *k, ringk_msg_t *m, uint32_t receiver,
                                     uint32_t type, uint32_t len)
{
    m->sender    = k->own.sender;
    m->receiver  = receiver;
    m->type      = (uint16_t)type;
    m->flags     = 0;
    m->length    = len;
    m->seq       = k->own.seq;
    m->timestamp = k->own.timestamps ? ringk_dev_hlc_tick_in(k) : 0;
    m->enq_ns    = 0;
    RINGK_DEV_COUNT(k, seq, 1);
}

/* Copies @a len bytes: on the device a loop of 8-byte words where both sides and the length
 * allow (payloads start 8-byte aligned in cells), else of bytes; memcpy on the host. For a
 * source in mapped memory, ringk_dev_fetch(). */
RINGK_DEV_FN void ringk_dev_copy(void *dst, const void *src, uint32_t len)
{
#if defined(__CUDA_ARCH__)
    uint8_t *d = (uint8_t*)dst;
    const uint8_t *s = (const uint8_t*)src;
    uint32_t i = 0;

    if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
        for (; i + 8 <= len; i += 8) {
            *(uint64_t*)(d + i) = *(const uint64_t*)(s + i);
        }
    }
    for (; i < len; i++) {
        d[i] = s[i];
    }
#else
    if (len > 0) { /* a message without payload may come with a NULL one */
        memcpy(dst, src, len);
    }
#endif
}

/* ringk_dev_copy() from mapped memory, where each load crosses the bus (about a microsecond
 * on PCIe) and a store waits for the load it stores: on the device in blocks of
 * RINGK_DEV_FETCH_WORDS 8-byte words whose loads all come before their stores, so that they
 * are in flight together (a cell of 256 bytes is one block). Not inlined: the block's
 * registers are its own. */
#define RINGK_DEV_FETCH_WORDS 32u
RINGK_DEV_CALL_FN void ringk_dev_fetch(void *dst, const void *src, uint32_t len)
{
#if defined(__CUDA_ARCH__)
    uint8_t *d = (uint8_t*)dst;
    const uint8_t *s = (const uint8_t*)src;
    uint64_t w[RINGK_DEV_FETCH_WORDS];
    uint32_t i = 0, j, n;

    if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
        while (i + 8 <= len) {
            n = (len - i) / 8;
            n = (n < RINGK_DEV_FETCH_WORDS) ? n : RINGK_DEV_FETCH_WORDS;
#pragma unroll
            for (j = 0; j < RINGK_DEV_FETCH_WORDS; j++) {
                if (j < n) {
                    w[j] = *(const uint64_t*)(s + i + 8 * j);
                }
            }
#pragma unroll
            for (j = 0; j < RINGK_DEV_FETCH_WORDS; j++) {
                if (j < n) {
                    *(uint64_t*)(d + i + 8 * j) = w[j];
                }
            }
            i += 8 * n;
        }
    }
    for (; i < len; i++) {
        d[i] = s[i];
    }
#else
    ringk_dev_copy(dst, src, len);
#endif
}

/* Copies part @a part of @a parts of @a len bytes (a collective copy: each thread of a block
 * one part): 8-byte words where both sides allow, word i by part i mod @a parts, the bytes
 * after the last whole word by part 0. */
RINGK_DEV_FN void ringk_dev_copy_part(void *dst, const void *src, uint32_t len, uint32_t part,
                                      uint32_t parts)
{
    uint8_t *d = (uint8_t*)dst;
    const uint8_t *s = (const uint8_t*)src;
    uint32_t i, words = 0;

    if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
        words = len / 8;
        for (i = part; i < words; i += parts) {
            ((uint64_t*)d)[i] = ((const uint64_t*)s)[i];
        }
    }
    if (part == 0) {
        for (i = 8 * words; i < len; i++) {
            d[i] = s[i];
        }
    }
}

/* Claims the outbox cells of a record of @a len payload bytes and fills its header (single
 * producer: the kernel's lock held, or one thread), waiting for the host proxy to make room as
 * @a timeout_ms says: 0 (the claim in *@a cl), -EAGAIN or -ETIMEDOUT. */
RINGK_DEV_FN int ringk_dev_outbox_claim(ringk_dev_kernel_t *k, uint32_t op, uint32_t op_arg,
                                        uint32_t receiver, uint32_t type, uint32_t len,
                                        int timeout_ms, ringk_dev_claim_t *cl)
{
    uint32_t bytes = (uint32_t)sizeof(ringk_dev_out_t) + len;
    uint32_t nc    = ringk_ring_cells_for(bytes, k->outbox.cell_size);
    uint64_t pos, t0 = 0;
    ringk_dev_out_t *rec;
    uint32_t nap = RINGK_DEV_NAP_MIN_NS;
    int ret;

    while (!ringk_ring_sp_claim(&k->outbox, &k->out_prod, nc, &pos)) {
        if ((ret = ringk_dev_wait_step(k, timeout_ms, &t0, &nap)) != 0) {
            return ret;
        }
    }
    rec = (ringk_dev_out_t*)ringk_ring_payload(&k->outbox, pos);
    rec->op_arg     = op_arg;
    rec->timeout_ms = timeout_ms;
    ringk_dev_msg_fill(k, &rec->msg, receiver, type, len);
    cl->ring    = k->outbox;
    cl->pos     = pos;
    cl->payload = (uint8_t*)(rec + 1);
    cl->bytes   = bytes;
    cl->ncells  = nc;
    cl->id      = op;
    cl->direct  = 0;
    cl->marked  = 0;
    cl->wake    = NULL;
    return 0;
}

/* Publishes the claimed message @a cl once its payload is written, without the wake-up of
 * ringk_dev_commit(). A marked claim (a target in another process) is unmarked first: seq 0,
 * then a fence, then the header and the publish, so that whoever reads the mark and the
 * fields and the mark again (the target's loop: ringk_dev_give_up_dead()) never takes this
 * header for the mark's. */
RINGK_DEV_FN void ringk_dev_claim_publish(const ringk_dev_claim_t *cl)
{
    if (cl->marked) {
        ringk_ring_st_rlx(&cl->ring, &ringk_ring_cell(&cl->ring, cl->pos)->seq, 0);
        ringk_dev_fence_sc_sys();
    }
    /* outbox: P1 at system scope (ringk_ring.h's device atomics), the host proxy sees the
     * record whole; a device inbox: device scope */
    ringk_ring_publish(&cl->ring, cl->pos, cl->bytes, (uint16_t)cl->ncells, (uint8_t)cl->id, 0);
}

/* Publishes the claimed message @a cl once its payload is written; for a direct send to an
 * event-driven target, wakes the target if it returned. The cells are the claimer's alone
 * until then: no lock needed. */
RINGK_DEV_FN void ringk_dev_commit(const ringk_dev_claim_t *cl)
{
    ringk_dev_ctl_t *tc = cl->wake;

    ringk_dev_claim_publish(cl);
    /* W2 (device): the publish before the read of 'idle'; pairs with W1 in ringk_dev_park().
     * The host proxy relaunches a kernel whose doorbell rang. */
    if (tc != NULL) {
        ringk_dev_fence_sc_sys();
        if (ringk_dev_load_acq_sys_i32(&tc->idle) && ringk_dev_cas_sys_i32(&tc->idle, 1, 0)) {
            ringk_dev_store_rel_sys_i32(&tc->doorbell, 1);
        }
    }
}

/* Puts a record into the outbox (one thread, or the kernel's lock held): 0, -EAGAIN or
 * -ETIMEDOUT. */
RINGK_DEV_FN int ringk_dev_outbox_put(ringk_dev_kernel_t *k, uint32_t op, uint32_t op_arg,
                                      uint32_t receiver, uint32_t type, const void *payload,
                                      uint32_t len, int timeout_ms)
{
    ringk_dev_claim_t cl;
    int ret = ringk_dev_outbox_claim(k, op, op_arg, receiver, type, len, timeout_ms, &cl);

    if (ret == 0) {
        ringk_dev_copy(cl.payload, payload, len);
        ringk_dev_commit(&cl);
    }
    return ret;
}

/* Claims cells in the device inbox of a kernel of the same device, or of another GPU reached by
 * peer access (route @a rt, resolved by the host), and fills the message header: claim with a
 * compare-and-swap on the target's tail; the publish (ringk_dev_commit()) is one release store
 * of the cell header, then wakes the target if it returned (event-driven). A target that is
 * finishing has closed its inbox: -EPIPE. While the inbox is full it also reads the route's
 * @a direct word (across the bus): a target destroyed without closing (its launch faulted) has
 * its route dropped, and the send gets -EPIPE. */
RINGK_DEV_FN int ringk_dev_direct_claim(ringk_dev_kernel_t *k, int route,
                                        const ringk_dev_target_t *rt, const int32_t *direct,
                                        uint32_t type, uint32_t len, int timeout_ms,
                                        ringk_dev_claim_t *cl)
{
    ringk_ring_t *r = &cl->ring;
    uint32_t nc = ringk_ring_cells_for(sizeof(ringk_msg_t) + len, rt->cell_size);
    uint32_t nap = RINGK_DEV_NAP_MIN_NS;
    uint64_t pos, t0 = 0;
    int ret;

    if (len > rt->max_in) {
        return -EMSGSIZE;
    }
    ringk_ring_view(r, rt->inbox, rt->log2_ncells, rt->cell_size);
    /* device scope where only kernels of the target's GPU write its inbox; system scope where
     * kernels of other GPUs may too (the claim is then a native atomic across the link) */
    r->scope = rt->scope;
    /* T1 (device): the claim is a compare-and-swap on the target inbox's tail, and the
     * target's close (T2 in ringk_dev_try_finish()) an atomic OR on the same word, so one of
     * them comes first without a fence: a claim before the close is among the cells the
     * finishing loop waits for; one after it sees the tail closed. */
    for (;;) {
        ret = ringk_ring_mp_claim_open(r, nc, &k->head_cache[route], &k->tail_cache[route],
                                       &pos);
        if (ret > 0) {
            break;
        }
        if ((ret < 0) || !ringk_dev_load_acq_sys_i32(direct)) {
            return -EPIPE;
        }
        if ((ret = ringk_dev_wait_step(k, timeout_ms, &t0, &nap)) != 0) {
            return ret;
        }
    }
    /* a target in another process: who holds the cells until the publish, so that the target's
     * loop can give them up if this one's process dies in between */
    if (rt->marks) {
        ringk_ring_mark_claimed(r, pos, nc, k->own.sender);
    }
    ringk_dev_msg_fill(k, (ringk_msg_t*)ringk_ring_payload(r, pos), rt->receiver, type, len);
    cl->pos     = pos;
    cl->payload = (uint8_t*)((ringk_msg_t*)ringk_ring_payload(r, pos) + 1);
    cl->bytes   = (uint32_t)sizeof(ringk_msg_t) + len;
    cl->ncells  = nc;
    cl->id      = type;
    cl->direct  = 1;
    cl->marked  = rt->marks;
    /* only an event-driven target returns when idle */
    cl->wake    = rt->event_driven ? rt->ctl : NULL;
    return 0;
}

/* The checks of a send on route @a route: 0, -EINVAL or -EMSGSIZE. */
RINGK_DEV_FN int ringk_dev_send_check(const ringk_dev_kernel_t *k, int route, uint32_t type,
                                      const void *payload, uint32_t len, int timeout_ms)
{
    if ((route < 0) || ((uint32_t)route >= k->own.nroutes) || (type > RINGK_MSG_TERMINATE) ||
        ((payload == NULL) && (len > 0)) || (timeout_ms < RINGK_WAIT_FOREVER)) {
        return -EINVAL;
    }
    return (len > k->own.max_out) ? -EMSGSIZE : 0;
}

/* Claims the cells of a send on route @a route (checked; the kernel's lock held, or one
 * thread): in the device inbox of a kernel the host made the route direct to (the same device,
 * or another GPU with peer access), else in the outbox. Counted as sent once claimed (nothing
 * fails after the claim). */
RINGK_DEV_FN int ringk_dev_send_claim(ringk_dev_kernel_t *k, int route, uint32_t type,
                                      uint32_t len, int timeout_ms, ringk_dev_claim_t *cl)
{
    ringk_dev_route_t *rt = &k->routes[route];
    int ret;

    /* 'direct' is read across the bus until the route is direct; from then on the launch's
     * copy of the target stands for it (a direct route is never rewritten; a target that
     * goes away is closing, or its inbox stays full, and only then is 'direct' read again) */
    if ((k->targets_copied & (1u << route)) || ringk_dev_load_acq_sys_i32(&rt->direct)) {
        if (!(k->targets_copied & (1u << route))) {
            /* after the acquire of 'direct': the host wrote the target before it */
            k->targets[route]  = rt->target;
            k->targets_copied |= 1u << route;
        }
        ret = ringk_dev_direct_claim(k, route, &k->targets[route], &rt->direct, type, len,
                                     timeout_ms, cl);
        if (ret == 0) {
            RINGK_DEV_COUNT(k, msgs_direct, 1);
        } else if ((ret == -EPIPE) && !ringk_dev_load_acq_sys_i32(&rt->direct)) {
            /* the target was destroyed and the route dropped: through the host, which finds
             * whatever has the name now */
            k->targets_copied &= ~(1u << route);
            ret = ringk_dev_outbox_claim(k, RINGK_DEV_OUT_SEND, (uint32_t)route, 0, type, len,
                                         timeout_ms, cl);
        }
    } else {
        ret = ringk_dev_outbox_claim(k, RINGK_DEV_OUT_SEND, (uint32_t)route, 0, type, len,
                                     timeout_ms, cl);
    }
    if (ret == 0) {
        RINGK_DEV_COUNT(k, msgs_out, 1);
    }
    return ret;
}

/**
 * Per thread: sends a message on route @a route (an index into the kernel's publishes_to):
 * straight into the device inbox of a kernel on the same device or on another GPU of the
 * process that this one reaches by peer access with native atomics (docs/gpu.md, "Device
 * kernels on several GPUs"), else through the outbox to the host proxy, which delivers it as
 * ringk_send_route() would (a CPU kernel of this process, a kernel of another process). Each
 * thread that calls it sends its own message; the kernel's threads take turns at the claim (a
 * lock of the kernel's), so messages of one thread keep their order, and those of different
 * threads are in the order of their claims. For one message written by a whole block,
 * ringk_dev_send_route_block(). @a timeout_ms:
 * RINGK_WAIT_NONE, RINGK_WAIT_FOREVER or milliseconds to wait for room in the inbox or the
 * outbox.
 * @return 0; -EINVAL no such route or a bad type; -EMSGSIZE above max_out, or above the max_in
 *         of a target on this device; -EAGAIN full (RINGK_WAIT_NONE); -ETIMEDOUT still full;
 *         -EPIPE the target is terminating (a target on this device: once its loop looks for
 *         its last messages; a message sent before is handled). Errors the host proxy meets
 *         later (a payload above the target's max_in, a name no kernel has, the target does
 *         not subscribe to this kernel, a lost process) are counted in the kernel's statistics
 *         (send_failed) and logged on the host.
 */
RINGK_DEV_FN int ringk_dev_send_route(ringk_dev_kernel_t *k, int route, uint32_t type,
                                      const void *payload, uint32_t len, int timeout_ms)
{
    ringk_dev_claim_t cl;
    int ret = ringk_dev_send_check(k, route, type, payload, len, timeout_ms);

    if (ret != 0) {
        return ret;
    }
    ringk_dev_turn_take(k);
    ret = ringk_dev_send_claim(k, route, type, len, timeout_ms, &cl);
    if (ret == 0) {
        ringk_dev_copy(cl.payload, payload, len);
        ringk_dev_commit(&cl);
    }
    ringk_dev_turn_give(k);
    return ret;
}

/* A collective send of the block: one thread claims as @a claim says (under the kernel's lock),
 * the block writes the payload in parallel, one thread publishes. 0 or the claim's error, in
 * every thread; -EDEADLK (the emulated device) when part of the block called it. */
#define RINGK_DEV_BLOCK_SEND(k, tag, payload, len, claim_call) \
    do { \
        ringk_dev_blk_t *b_ = ringk_dev_blk(); \
        uint32_t t_ = ringk_dev_pt_thread(); \
        int r_; \
        if ((r_ = ringk_dev_sync_tag((k), RINGK_DEV_SYNC_BLOCK, (tag))) != 0) { \
            return r_; \
        } \
        if (t_ == 0) { \
            ringk_dev_turn_take(k); \
            b_->ret = (claim_call); \
            ringk_dev_turn_give(k); \
        } \
        ringk_dev_sync_tag((k), RINGK_DEV_SYNC_BLOCK, (tag)); \
        r_ = b_->ret; \
        if (r_ == 0) { \
            ringk_dev_copy_part(b_->claim.payload, (payload), (len), t_, (k)->threads); \
            ringk_dev_sync_tag((k), RINGK_DEV_SYNC_BLOCK, (tag)); \
            if (t_ == 0) { \
                ringk_dev_commit(&b_->claim); \
            } \
        } \
        return r_; \
    } while (0)

/**
 * Collective over the block: every thread of the calling block calls it with the same
 * arguments, and the block sends one message: one thread claims the cells, every thread
 * copies a share of @a payload (memory all of them read: global or shared), one thread
 * publishes. A kernel of several blocks sends one message per block that calls it. Returns
 * the same in every thread of the block, as ringk_dev_send_route(); -EDEADLK (the emulated
 * device) when only part of the block called it.
 */
RINGK_DEV_FN int ringk_dev_send_route_block(ringk_dev_kernel_t *k, int route, uint32_t type,
                                            const void *payload, uint32_t len, int timeout_ms)
{
    int ret = ringk_dev_send_check(k, route, type, payload, len, timeout_ms);

    if ((ret != 0) || ringk_dev_alone(k)) {
        return (ret != 0) ? ret : ringk_dev_send_route(k, route, type, payload, len, timeout_ms);
    }
    RINGK_DEV_BLOCK_SEND(k, RINGK_DEV_TAG_SEND, payload, len,
                         ringk_dev_send_claim(k, route, type, len, timeout_ms, &b_->claim));
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

/** Per thread: the route number of kernel @a name in the kernel's publishes_to, or -ENOENT. */
RINGK_DEV_FN int ringk_dev_route_index(const ringk_dev_kernel_t *k, const char *name)
{
    uint32_t i;

    for (i = 0; i < k->own.nroutes; i++) {
        if (ringk_dev_name_eq(k->route_names[i], name)) {
            return (int)i;
        }
    }
    return -ENOENT;
}

/** Per thread: sends to kernel @a name, which must be in the kernel's publishes_to (else
 *  -EPERM); as ringk_dev_send_route(). */
RINGK_DEV_FN int ringk_dev_send(ringk_dev_kernel_t *k, const char *name, uint32_t type,
                                const void *payload, uint32_t len, int timeout_ms)
{
    int route = ringk_dev_route_index(k, name);

    return (route < 0) ? -EPERM : ringk_dev_send_route(k, route, type, payload, len, timeout_ms);
}

/** Collective over the block: ringk_dev_send_route_block() to kernel @a name (-EPERM when it
 *  is not in the kernel's publishes_to, in every thread, without a wait). */
RINGK_DEV_FN int ringk_dev_send_block(ringk_dev_kernel_t *k, const char *name, uint32_t type,
                                      const void *payload, uint32_t len, int timeout_ms)
{
    int route = ringk_dev_route_index(k, name);

    return (route < 0) ? -EPERM :
           ringk_dev_send_route_block(k, route, type, payload, len, timeout_ms);
}

/* The topic index of @a topic in the kernel's topics_pub after the checks of a publish: >= 0,
 * -EINVAL, -EMSGSIZE or -EPERM. */
RINGK_DEV_FN int ringk_dev_topic_check(const ringk_dev_kernel_t *k, const char *topic,
                                       const void *payload, uint32_t len, int timeout_ms)
{
    uint32_t i;

    if (((payload == NULL) && (len > 0)) || (timeout_ms < RINGK_WAIT_FOREVER)) {
        return -EINVAL;
    }
    if (len > k->own.max_out) {
        return -EMSGSIZE;
    }
    for (i = 0; i < k->own.ntopics; i++) {
        if (ringk_dev_name_eq(k->topics[i], topic)) {
            return (int)i;
        }
    }
    return -EPERM;
}

/** Per thread: publishes to @a topic (in the kernel's topics_pub, else -EPERM) through the host
 *  proxy, which fans it out to every subscriber as ringk_publish() does; @a timeout_ms bounds
 *  the wait for room in the outbox. Each calling thread publishes its own message. 0, -EPERM,
 *  -EMSGSIZE, -EAGAIN, -ETIMEDOUT. */
RINGK_DEV_FN int ringk_dev_publish(ringk_dev_kernel_t *k, const char *topic, const void *payload,
                                   uint32_t len, int timeout_ms)
{
    int i = ringk_dev_topic_check(k, topic, payload, len, timeout_ms), ret;

    if (i < 0) {
        return i;
    }
    ringk_dev_turn_take(k);
    ret = ringk_dev_outbox_put(k, RINGK_DEV_OUT_PUBLISH, (uint32_t)i, RINGK_MSG_BROADCAST,
                               RINGK_MSG_DATA, payload, len, timeout_ms);
    ringk_dev_turn_give(k);
    return ret;
}

/** Collective over the block: publishes one message to @a topic per block, written by the
 *  block in parallel, as ringk_dev_send_route_block() sends; returns as ringk_dev_publish(), in
 *  every thread of the block. */
RINGK_DEV_FN int ringk_dev_publish_block(ringk_dev_kernel_t *k, const char *topic,
                                         const void *payload, uint32_t len, int timeout_ms)
{
    int i = ringk_dev_topic_check(k, topic, payload, len, timeout_ms);

    if ((i < 0) || ringk_dev_alone(k)) {
        return (i < 0) ? i : ringk_dev_publish(k, topic, payload, len, timeout_ms);
    }
    RINGK_DEV_BLOCK_SEND(k, RINGK_DEV_TAG_PUBLISH, payload, len,
                         ringk_dev_outbox_claim(k, RINGK_DEV_OUT_PUBLISH, (uint32_t)i,
                                                RINGK_MSG_BROADCAST, RINGK_MSG_DATA, len,
                                                timeout_ms, &b_->claim));
}

/* ringk_dev_barrier_wait() in one thread. */
RINGK_DEV_FN int ringk_dev_barrier_wait_in(ringk_dev_kernel_t *k, const char *name,
                                           int timeout_ms)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint32_t i, nap = RINGK_DEV_NAP_MIN_NS;
    uint64_t req;
    int ret;

    for (i = 0; (i < k->own.nbarriers) && !ringk_dev_name_eq(k->barriers[i], name); i++) {
    }
    if (i == k->own.nbarriers) {
        return -ENOENT;
    }
    ret = ringk_dev_outbox_put(k, RINGK_DEV_OUT_BARRIER, i, 0, RINGK_MSG_CONTROL, NULL, 0,
                               timeout_ms);
    if (ret != 0) {
        return ret; /* not asked: the answers still match the requests */
    }
    /* the proxy answers requests in order, one at a time: this one is answered by count req */
    RINGK_DEV_COUNT(k, barrier_req, 1);
    req = k->own.barrier_req;
    ringk_dev_own_store(k); /* the wait may be long */
    /* the proxy stores the result, then barrier_done with a release store */
    while (ringk_load_acquire_u64(&c->barrier_done) != req) {
        ringk_dev_nap(nap);
        nap = (nap < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * nap : RINGK_DEV_NAP_MAX_NS;
    }
    return ringk_dev_load_acq_sys_i32(&c->barrier_result);
}

/* Runs @a call in the loop's thread for a collective call of the whole kernel (tag @a tag):
 * the kernel's threads meet, the loop's thread makes the call while the others wait, and every
 * thread returns its result. */
#define RINGK_DEV_KERNEL_CALL(k, tag, call) \
    do { \
        int r_; \
        if ((r_ = ringk_dev_sync_tag((k), RINGK_DEV_SYNC_KERNEL, (tag))) != 0) { \
            return r_; \
        } \
        if (ringk_dev_leader()) { \
            (k)->coll_ret = (call); \
        } \
        ringk_dev_sync_tag((k), RINGK_DEV_SYNC_KERNEL, (tag)); \
        return (k)->coll_ret; \
    } while (0)

/**
 * Collective over the kernel: every thread of every block calls it with the same arguments.
 * Waits at named barrier @a name (in the kernel's barriers, else -ENOENT) until every
 * participant of the job (CPU and device kernels, in every process) has arrived; the kernel is
 * one participant. The host proxy arrives for the kernel and answers; the loop takes no message
 * meanwhile. @a timeout_ms: RINGK_WAIT_FOREVER or milliseconds (then -ETIMEDOUT, and the
 * kernel has left the barrier).
 * @return the same in every thread: 0, -ENOENT, -ETIMEDOUT, -EPIPE (a process taking part is
 * gone), -ECANCELED (the kernel is being terminated: it has left the barrier), -EAGAIN /
 * -ETIMEDOUT also when the outbox stayed full (RINGK_WAIT_NONE / for @a timeout_ms), -EINVAL
 * (@a timeout_ms below RINGK_WAIT_FOREVER), -EDEADLK (the emulated device) when only part of
 * the kernel's threads called it.
 */
RINGK_DEV_FN int ringk_dev_barrier_wait(ringk_dev_kernel_t *k, const char *name, int timeout_ms)
{
    if (timeout_ms < RINGK_WAIT_FOREVER) {
        return -EINVAL;
    }
    if (ringk_dev_alone(k)) {
        return ringk_dev_barrier_wait_in(k, name, timeout_ms);
    }
    RINGK_DEV_KERNEL_CALL(k, RINGK_DEV_TAG_BARRIER, ringk_dev_barrier_wait_in(k, name,
                                                                              timeout_ms));
}

#ifdef __cplusplus
}
#endif

#include <ringk/api/ringk_device_loop.h>
#include <ringk/api/ringk_device_cuda.h>

#endif
