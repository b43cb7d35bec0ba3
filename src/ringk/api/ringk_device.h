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

/** The kernel's hybrid logical clock now (a local event), in ringk_hlc_t's format: milliseconds
 *  since the epoch above 16 bits of logical counter. Only the kernel's loop writes it. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_tick(ringk_dev_kernel_t *k)
{
    uint64_t now  = (ringk_dev_now_ns() / 1000000u) << 16;
    uint64_t last = k->own.hlc;
    uint64_t t    = (now > last) ? now : last + 1;

    k->own.hlc     = t; /* stored to the control block with the counters */
    k->own_changed = 1u;
    return t;
}

/** A receive of a message stamped @a remote. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_recv(ringk_dev_kernel_t *k, uint64_t remote)
{
    uint64_t t = ringk_dev_hlc_tick(k);

    if (remote >= t) {
        t = k->own.hlc = remote + 1;
    }
    return t;
}

/** The clock's last value, without an event. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_now(const ringk_dev_kernel_t *k)
{
    return k->own.hlc;
}

/* Whether a wait begun at @a t0 with @a timeout_ms is over (RINGK_WAIT_FOREVER: never). */
RINGK_DEV_FN int ringk_dev_wait_over(uint64_t t0, int timeout_ms)
{
    return (timeout_ms != RINGK_WAIT_FOREVER) &&
           (ringk_dev_now_ns() - t0 >= (uint64_t)timeout_ms * 1000000u);
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
    m->timestamp = k->own.timestamps ? ringk_dev_hlc_tick(k) : 0;
    m->enq_ns    = 0;
    RINGK_DEV_COUNT(k, seq, 1);
}

/* Copies @a len bytes: on the device a loop of 8-byte words where both sides and the length
 * allow (payloads start 8-byte aligned in cells), else of bytes (each access to mapped memory
 * crosses the bus); memcpy on the host. */
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
    ringk_dev_copy(rec + 1, payload, len);
    /* P1 at system scope (ringk_ring.h's device atomics): the host proxy sees the record whole */
    ringk_ring_publish(&k->outbox, pos, bytes, (uint16_t)nc, (uint8_t)op, 0);
    return 0;
}

/* A send into the device inbox of a kernel of the same device (route @a rt, resolved by the
 * host): claim with a compare-and-swap on the target's tail, write, publish by one release
 * store of the cell header, then wake the target if it returned (event-driven). A target that
 * is finishing has closed its inbox: -EPIPE. While the inbox is full it also reads the route's
 * @a direct word (across the bus): a target destroyed without closing (its launch faulted) has
 * its route dropped, and the send gets -EPIPE. */
RINGK_DEV_FN int ringk_dev_send_direct(ringk_dev_kernel_t *k, int route,
                                       const ringk_dev_target_t *rt, const int32_t *direct,
                                       uint32_t type, const void *payload, uint32_t len,
                                       int timeout_ms)
{
    ringk_ring_t r;
    ringk_dev_ctl_t *tc = rt->ctl;
    uint32_t nc = ringk_ring_cells_for(sizeof(ringk_msg_t) + len, rt->cell_size);
    uint32_t nap = RINGK_DEV_NAP_MIN_NS;
    uint64_t pos, t0 = 0;
    int ret;

    if (len > rt->max_in) {
        return -EMSGSIZE;
    }
    ringk_ring_view(&r, rt->inbox, rt->log2_ncells, rt->cell_size);
    r.scope = RINGK_RING_SCOPE_DEVICE; /* a device inbox: only kernels of this GPU use it */
    /* T1 (device): the claim is a compare-and-swap on the target inbox's tail, and the
     * target's close (T2 in ringk_dev_try_finish()) an atomic OR on the same word, so one of
     * them comes first without a fence: a claim before the close is among the cells the
     * finishing loop waits for; one after it sees the tail closed. */
    for (;;) {
        ret = ringk_ring_mp_claim_open(&r, nc, &k->head_cache[route], &k->tail_cache[route],
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
    ringk_dev_msg_fill(k, (ringk_msg_t*)ringk_ring_payload(&r, pos), rt->receiver, type, len);
    ringk_dev_copy((ringk_msg_t*)ringk_ring_payload(&r, pos) + 1, payload, len);
    ringk_ring_publish(&r, pos, (uint32_t)sizeof(ringk_msg_t) + len, (uint16_t)nc,
                       (uint8_t)type, 0);
    /* W2 (device): the publish before the read of 'idle'; pairs with W1 in ringk_dev_park().
     * The host proxy relaunches a kernel whose doorbell rang. Only an event-driven target
     * returns when idle. */
    if (rt->event_driven) {
        ringk_dev_fence_sc_sys();
        if (ringk_dev_load_acq_sys_i32(&tc->idle) && ringk_dev_cas_sys_i32(&tc->idle, 1, 0)) {
            ringk_dev_store_rel_sys_i32(&tc->doorbell, 1);
        }
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
 *         terminating (a target on this device: once its loop looks for its last messages; a
 *         message sent before is handled). Errors the host proxy meets later (the target does
 *         not subscribe to this kernel, a lost process) are counted in the kernel's statistics
 *         (send_failed) and logged on the host.
 */
RINGK_DEV_FN int ringk_dev_send_route(ringk_dev_kernel_t *k, int route, uint32_t type,
                                      const void *payload, uint32_t len, int timeout_ms)
{
    ringk_dev_route_t *rt;
    int ret;

    if ((route < 0) || ((uint32_t)route >= k->own.nroutes) || (type > RINGK_MSG_TERMINATE) ||
        ((payload == NULL) && (len > 0)) || (timeout_ms < RINGK_WAIT_FOREVER)) {
        return -EINVAL;
    }
    if (len > k->own.max_out) {
        return -EMSGSIZE;
    }
    rt = &k->routes[route];
    /* 'direct' is read across the bus until the route is direct; from then on the launch's
     * copy of the target stands for it (a direct route is never rewritten; a target that
     * goes away is closing, or its inbox stays full, and only then is 'direct' read again) */
    if ((k->targets_copied & (1u << route)) || ringk_dev_load_acq_sys_i32(&rt->direct)) {
        if (!(k->targets_copied & (1u << route))) {
            /* after the acquire of 'direct': the host wrote the target before it */
            k->targets[route]  = rt->target;
            k->targets_copied |= 1u << route;
        }
        ret = ringk_dev_send_direct(k, route, &k->targets[route], &rt->direct, type, payload,
                                    len, timeout_ms);
        if (ret == 0) {
            RINGK_DEV_COUNT(k, msgs_direct, 1);
        } else if ((ret == -EPIPE) && !ringk_dev_load_acq_sys_i32(&rt->direct)) {
            /* the target was destroyed and the route dropped: through the host, which finds
             * whatever has the name now */
            k->targets_copied &= ~(1u << route);
            ret = ringk_dev_outbox_put(k, RINGK_DEV_OUT_SEND, (uint32_t)route, 0, type, payload,
                                       len, timeout_ms);
        }
    } else {
        ret = ringk_dev_outbox_put(k, RINGK_DEV_OUT_SEND, (uint32_t)route, 0, type, payload, len,
                                   timeout_ms);
    }
    if (ret == 0) {
        RINGK_DEV_COUNT(k, msgs_out, 1);
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

    for (i = 0; i < k->own.nroutes; i++) {
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
    if (len > k->own.max_out) {
        return -EMSGSIZE;
    }
    for (i = 0; i < k->own.ntopics; i++) {
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

/* ---- the dispatch loop ------------------------------------------------------------------- */

/* The message of the published cell at @a head of @a r (a producer's writing: checked before
 * use), its cell count in *@a ncells_p and flags in *@a flags_p; NULL for a malformed cell,
 * which is counted in bad_cells and passed to ringk_ring_done() (the caller moves past it). */
RINGK_DEV_FN const ringk_msg_t *ringk_dev_cell_msg(ringk_dev_kernel_t *k, const ringk_ring_t *r,
                                                   uint64_t head, const ringk_cell_hdr_t *cell,
                                                   uint32_t *ncells_p, uint8_t *flags_p)
{
    uint32_t len    = cell->len, ncells = cell->ncells;
    uint8_t flags   = cell->flags, id = cell->id;
    const ringk_msg_t *msg = (const ringk_msg_t*)ringk_ring_payload(r, head);

    if ((ringk_ring_msg_check(r, head, len, ncells, flags, r->ncells) != 0) ||
        (len < sizeof(ringk_msg_t)) || (id > RINGK_MSG_TERMINATE) ||
        (msg->length != len - sizeof(ringk_msg_t)) || (msg->length > k->own.max_in)) {
        RINGK_DEV_COUNT(k, bad_cells, 1);
        ringk_ring_done(r, head, 1, 0xff);
        return NULL;
    }
    if (msg->timestamp != 0) {
        ringk_dev_hlc_recv(k, msg->timestamp);
    }
    *ncells_p = ncells;
    *flags_p  = flags;
    return msg;
}

/* Takes up to @a limit messages of ring @a r from *@a head_p, hands each to @a h; returns how
 * many. *@a head_p is the next message while a handler runs (ringk_dev_recv() in the handler
 * moves it on); the cells go back to their producers once the batch is done (one release
 * store). */
RINGK_DEV_FN uint32_t ringk_dev_take(ringk_dev_kernel_t *k, const ringk_ring_t *r,
                                     uint64_t *head_p, uint32_t limit, ringk_dev_handler_t h)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint64_t head, start = *head_p;
    const ringk_cell_hdr_t *cell;
    const ringk_msg_t *msg;
    uint32_t n = 0, ncells;
    uint8_t flags;

    while (n < limit) {
        head = *head_p;
        cell = ringk_ring_peek(r, &head);
        *head_p = head;
        if (cell == NULL) {
            break;
        }
        msg = ringk_dev_cell_msg(k, r, head, cell, &ncells, &flags);
        if (msg == NULL) {
            *head_p = head + 1;
            continue;
        }
        *head_p     = head + ncells;
        k->cur_ring = r;
        k->cur_pos  = head;
        if (msg->type == RINGK_MSG_TERMINATE) {
            /* everything before it is handled; the host makes the kernel terminating */
            ringk_dev_store_rel_sys_i32(&c->term_req, 1);
        } else if (h(k, msg, k->arg) < 0) {
            RINGK_DEV_COUNT(k, handler_errors, 1);
        }
        k->cur_ring = NULL;
        ringk_ring_done(r, head, ncells, flags);
        n++;
    }
    if (*head_p != start) {
        /* R1: after the reads above; the producers waiting for room see it */
        ringk_ring_release_to(r, *head_p);
    }
    if (n > 0) {
        RINGK_DEV_COUNT(k, msgs_in, n);
    }
    return n;
}

/* ringk_dev_recv() from ring @a r: 0 (a message copied to @a out), -EAGAIN (none), -EMSGSIZE
 * (the next one's payload is above @a cap: its header is in @a out, the message stays), or
 * -ENOBUFS (the cells the running handler holds back fill half of @a r). */
RINGK_DEV_FN int ringk_dev_recv_from(ringk_dev_kernel_t *k, const ringk_ring_t *r,
                                     uint64_t *head_p, ringk_msg_t *out, uint32_t cap)
{
    ringk_dev_ctl_t *c = k->ctl;
    int held = (k->cur_ring == r);
    const ringk_cell_hdr_t *cell;
    const ringk_msg_t *msg;
    uint32_t ncells;
    uint64_t head;
    uint8_t flags;

    for (;;) {
        if (held && (*head_p - k->cur_pos >= r->ncells / 2)) {
            return -ENOBUFS; /* its producers could wait for room this handler holds */
        }
        head = *head_p;
        /* cells of the handler's own ring go back when the handler returned (its message is
         * still in use); another ring's at once */
        cell = held ? ringk_ring_peek_held(r, &head) : ringk_ring_peek(r, &head);
        *head_p = head;
        if (cell == NULL) {
            return -EAGAIN;
        }
        msg = ringk_dev_cell_msg(k, r, head, cell, &ncells, &flags);
        if ((msg != NULL) && (msg->length > cap)) {
            ringk_dev_copy(out, msg, sizeof(*msg));
            return -EMSGSIZE;
        }
        if (msg == NULL) {
            ncells = 1;
        } else if (msg->type == RINGK_MSG_TERMINATE) {
            ringk_dev_store_rel_sys_i32(&c->term_req, 1);
            ringk_ring_done(r, head, ncells, flags);
        } else {
            ringk_dev_copy(out, msg, sizeof(*msg) + msg->length);
            RINGK_DEV_COUNT(k, msgs_in, 1);
            ringk_ring_done(r, head, ncells, flags);
        }
        *head_p = head + ncells;
        if (!held) {
            ringk_ring_release_to(r, *head_p); /* R1 */
        }
        if ((msg != NULL) && (msg->type != RINGK_MSG_TERMINATE)) {
            return 0;
        }
    }
}

/**
 * Takes the next message of the kernel's inboxes into @a out (a buffer of sizeof(ringk_msg_t)
 * + @a cap bytes: the header, then the payload, ringk_dev_msg_payload(out)), from a handler
 * that wants more than the message it was given (a reply it waits for, the rest of a group).
 * Messages come in the order the loop would hand them over; FIFO per sender. An inactive
 * kernel takes nothing. A terminate message is taken as the loop takes it (the host terminates
 * the kernel after the handler returned) and the next message is looked for.
 * @a timeout_ms: RINGK_WAIT_NONE, RINGK_WAIT_FOREVER or milliseconds.
 * @return 0; -EAGAIN none with RINGK_WAIT_NONE; -ETIMEDOUT none in @a timeout_ms; -EMSGSIZE the
 * next message's payload is above @a cap (its header is in @a out, out->length its size; it
 * stays first); -ECANCELED the kernel is terminating and its inboxes are empty; -ENOBUFS the
 * messages this handler took hold half of its message's inbox (they go back to the senders
 * when it returns); -EINVAL a NULL @a out or a timeout below RINGK_WAIT_FOREVER.
 */
RINGK_DEV_FN int ringk_dev_recv(ringk_dev_kernel_t *k, ringk_msg_t *out, uint32_t cap,
                                int timeout_ms)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint32_t i, nap = RINGK_DEV_NAP_MIN_NS;
    uint64_t t0 = 0;
    int32_t state;
    int ret = -EAGAIN, full;

    if ((out == NULL) || (timeout_ms < RINGK_WAIT_FOREVER)) {
        return -EINVAL;
    }
    for (;;) {
        state = ringk_dev_load_acq_sys_i32(&c->state);
        full  = 0;
        for (i = 0; (i < 2) && (state != RINGK_KERNEL_INACTIVE); i++) {
            ret = ((i ^ k->turn) & 1u) ?
                  ringk_dev_recv_from(k, &k->inbox, &k->dev_head, out, cap) :
                  ringk_dev_recv_from(k, &k->ingress, &k->in_head, out, cap);
            if ((ret == 0) || (ret == -EMSGSIZE)) {
                return ret;
            }
            full |= (ret == -ENOBUFS);
        }
        if (full) {
            return -ENOBUFS;
        }
        if (state == RINGK_KERNEL_TERMINATING) {
            return -ECANCELED;
        }
        if ((ret = ringk_dev_wait_step(k, timeout_ms, &t0, &nap)) != 0) {
            return ret;
        }
    }
}

/* One iteration: up to the processing mode's number of messages, from the device inbox and the
 * host ingress ring in turn (each ring is FIFO per sender, and a sender uses one of them). */
RINGK_DEV_FN uint32_t ringk_dev_iteration(ringk_dev_kernel_t *k, ringk_dev_handler_t h)
{
    uint32_t limit = k->own.max_per_iteration ? k->own.max_per_iteration : UINT32_MAX, n, m;
    /* The host ingress ring is across the bus: while the device inbox keeps the loop busy and
     * the ingress ring was empty at the last look, it is looked at every RINGK_DEV_STATE_POLLS
     * turns (a host message waits that many turns at most, each of which handles one device
     * message at least); an idle loop looks every turn. */
    int look_in = (k->in_skip == 0), empty = 0;
    uint64_t in_queued = (uint64_t)look_in;

    if (k->own.processing == RINGK_PROCESSING_CONTINUOUS) {
        limit = 1;
    } else if (k->own.processing == RINGK_PROCESSING_ADAPTIVE) {
        /* The ingress ring's tail is read across the bus once: it sizes the batch, and a tail
         * at the head (nothing claimed) skips the look at the ring's next cell. A stale tail
         * only delays a message to the next turn. */
        if (look_in) {
            in_queued = ringk_dev_load_rlx_sys_u64(&k->ingress.prod->pos) - k->in_head;
            empty     = (in_queued == 0);
        }
        if ((in_queued <= 16) && (((ringk_ring_ld_rlx(&k->inbox, &k->inbox.prod->pos) &
                                     ~RINGK_RING_CLOSED) - k->dev_head) <= 16)) {
            limit = 1;
        }
    }
    k->turn ^= 1u;
    if (k->turn) {
        n = ringk_dev_take(k, &k->inbox, &k->dev_head, limit, h);
        m = 0;
        if ((n < limit) && (in_queued != 0)) {
            m      = ringk_dev_take(k, &k->ingress, &k->in_head, limit - n, h);
            empty |= (m == 0);
        }
    } else {
        m = 0;
        if (in_queued != 0) {
            m      = ringk_dev_take(k, &k->ingress, &k->in_head, limit, h);
            empty |= (m == 0);
        }
        n = (m < limit) ? ringk_dev_take(k, &k->inbox, &k->dev_head, limit - m, h) : 0;
    }
    /* a look that found the ingress ring empty while the inbox delivers: skip the next looks;
     * an idle inbox, messages from the host, or no look this turn: look the next turn */
    if ((n != 0) && (m == 0) && look_in && empty) {
        k->in_skip = RINGK_DEV_STATE_POLLS - 1;
    } else if ((n != 0) && (m == 0) && !look_in) {
        k->in_skip--;
    } else {
        k->in_skip = 0;
    }
    return n + m;
}

/* Whether both inboxes are empty: the producers' tails against the consumer's heads. */
RINGK_DEV_FN int ringk_dev_empty(const ringk_dev_kernel_t *k)
{
    return (ringk_ring_ld_acq(&k->ingress, &k->ingress.prod->pos) == k->in_head) &&
           ((ringk_ring_ld_acq(&k->inbox, &k->inbox.prod->pos) & ~RINGK_RING_CLOSED) ==
            k->dev_head);
}

/* A terminating kernel stops once every claimed cell was consumed. T2, device inbox: closes it
 * (pairs with T1 in ringk_dev_send_direct()); its tail is then final. T2, host ingress ring:
 * the state (read by the caller) before the ingress ring's tail, with this fence; pairs with
 * T1 in the host's senders (ringk_inbox_claim), who read the state after their claim. */
RINGK_DEV_FN int ringk_dev_try_finish(ringk_dev_kernel_t *k)
{
    uint64_t tail = ringk_ring_close(&k->inbox);

    ringk_dev_fence_sc_sys();
    return (ringk_ring_ld_acq(&k->ingress, &k->ingress.prod->pos) == k->in_head) &&
           (tail == k->dev_head);
}

/* Event-driven: the loop returns after max_iterations idle iterations. W1: 'idle' before the
 * inboxes and the state are read again; a sender that claimed before is seen (the loop goes
 * on if it gets 'idle' back first), one that claims after sees the flag and relaunches.
 * @return 1: return from the launch; 0: go on. */
RINGK_DEV_FN int ringk_dev_park(ringk_dev_kernel_t *k)
{
    ringk_dev_ctl_t *c = k->ctl;
    int32_t state;

    ringk_dev_own_store(k); /* for the host, and for the next launch to read back */
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

/* The launch's own copies, from the control block: once per launch (the configuration the
 * host wrote before the first, the counters the last launch stored). */
RINGK_DEV_FN void ringk_dev_own_load(ringk_dev_kernel_t *k)
{
    const ringk_dev_ctl_t *c = k->ctl;
    ringk_dev_own_t *o = &k->own;
    uint32_t i;

    o->sender            = c->sender;
    o->mode              = c->mode;
    o->processing        = c->processing;
    o->max_per_iteration = c->max_per_iteration;
    o->max_iterations    = c->max_iterations;
    o->max_in            = c->max_in;
    o->max_out           = c->max_out;
    o->timestamps        = c->timestamps;
    o->nroutes           = c->nroutes;
    o->ntopics           = c->ntopics;
    o->nbarriers         = c->nbarriers;
    o->msgs_in           = ringk_dev_load_rlx_sys_u64(&c->msgs_in);
    o->handler_errors    = ringk_dev_load_rlx_sys_u64(&c->handler_errors);
    o->bad_cells         = ringk_dev_load_rlx_sys_u64(&c->bad_cells);
    o->iterations        = ringk_dev_load_rlx_sys_u64(&c->iterations);
    o->msgs_out          = ringk_dev_load_rlx_sys_u64(&c->msgs_out);
    o->msgs_direct       = ringk_dev_load_rlx_sys_u64(&c->msgs_direct);
    o->seq               = ringk_dev_load_rlx_sys_u64(&c->seq);
    o->hlc               = ringk_dev_load_rlx_sys_u64(&c->hlc);
    o->barrier_req       = ringk_dev_load_rlx_sys_u64(&c->barrier_req);
    for (i = 0; i < RINGK_DEV_ROUTES_MAX; i++) {
        k->head_cache[i] = 0; /* a stale head only makes a claim read the real one */
        k->tail_cache[i] = 0; /* a stale tail only makes the first swap fail */
    }
    k->targets_copied = 0;
    k->own_changed    = 0;
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
    uint32_t since_state = RINGK_DEV_STATE_POLLS, since_store = 0;
    int32_t state = RINGK_KERNEL_INACTIVE;

    if (!ringk_dev_leader() || (c->magic != RINGK_DEV_CTL_MAGIC) || (c->abi != RINGK_DEV_ABI) ||
        ringk_dev_load_acq_sys_i32(&c->done)) {
        return;
    }
    /* where the last launch left off: consumers publish their head at the end of each batch,
     * and the outbox's progress marker is the producer's position */
    k->in_head      = ringk_ring_ld_acq(&k->ingress, &k->ingress.cons->pos);
    k->dev_head     = ringk_ring_ld_acq(&k->inbox, &k->inbox.cons->pos);
    k->out_prod.pos = ringk_ring_ld_rlx(&k->outbox, &k->outbox.prod->pos);
    k->out_prod.head = ringk_ring_ld_acq(&k->outbox, &k->outbox.cons->pos);
    k->turn         = 0;
    k->in_skip      = 0;
    k->cur_ring     = NULL;
    ringk_dev_own_load(k);
    for (;;) {
        /* The state is in mapped memory: a read crosses the bus. An active kernel that takes
         * messages or spins reads it every RINGK_DEV_STATE_POLLS turns (a deactivate or
         * terminate is seen that many turns later at most); any other reads it every turn
         * (it naps, or waits to be activated or to finish). */
        if ((state != RINGK_KERNEL_ACTIVE) || (idle > RINGK_DEV_SPINS) ||
            (++since_state >= RINGK_DEV_STATE_POLLS)) {
            state       = ringk_dev_load_acq_sys_i32(&c->state);
            since_state = 0;
        }
        if ((state != RINGK_KERNEL_INACTIVE) && (ringk_dev_iteration(k, h) > 0)) {
            RINGK_DEV_COUNT(k, iterations, 1);
            idle = idle_iters = 0;
            nap  = RINGK_DEV_NAP_MIN_NS;
            if (++since_store >= RINGK_DEV_STATE_POLLS) {
                ringk_dev_own_store(k);
                since_store = 0;
            }
            continue;
        }
        /* nothing to take: the counters as they are now (a store only after a change) */
        ringk_dev_own_store(k);
        since_store = 0;
        if ((state == RINGK_KERNEL_TERMINATING) && ringk_dev_try_finish(k)) {
            ringk_dev_store_rel_sys_i32(&c->done, 1); /* after the counters' last store */
            return;
        }
        if ((k->own.mode == RINGK_MODE_EVENT_DRIVEN) && (++idle_iters >= k->own.max_iterations)) {
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

#ifdef __cplusplus
}
#endif

#include <ringk/api/ringk_device_cuda.h>

#endif
