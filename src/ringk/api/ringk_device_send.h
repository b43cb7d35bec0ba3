/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API, what a handler sends with (included by ringk_device.h): claims in the
 * outbox (to the host proxy) and in device inboxes (a kernel of the same device, another GPU
 * by peer access, another process), each route's decision between the two, the publish,
 * sends and publishes per thread and per block, and the wait at a named barrier. */
#ifndef RINGK_API_RINGK_DEVICE_SEND_H
#define RINGK_API_RINGK_DEVICE_SEND_H

#ifndef RINGK_API_RINGK_DEVICE_H
#  error "include <ringk/api/ringk_device.h>, not this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Claims the outbox cells of a record of @a len payload bytes and fills its header (single
 * producer: the kernel's lock held, or one thread), waiting for the host proxy to make room as
 * @a timeout_ms says: 0 (the claim in *@a cl), -EAGAIN or -ETIMEDOUT. */
RINGK_DEV_FN int ringk_dev_outbox_claim(ringk_dev_kernel_t *k, uint32_t op, uint32_t op_arg,
                                        uint32_t receiver, uint32_t type, uint32_t len,
                                        int timeout_ms, ringk_dev_claim_t *cl)
{
    uint32_t bytes = (uint32_t)sizeof(ringk_dev_out_t) + len;
    uint32_t nc    = ringk_ring_cells_for(bytes, k->outbox.cell_size);
    uint32_t pad   = ringk_ring_pad(&k->outbox, k->out_prod.pos, nc);
    uint64_t pos, t0 = 0;
    ringk_dev_out_t *rec;
    uint32_t nap = RINGK_DEV_NAP_MIN_NS;
    unsigned prev;
    int ret;

    /* room by the head the upkeep last read (ringk_dev_chores()): no read across the bus;
     * else the real head, read in the wait */
    if ((k->out_prod.pos + pad + nc - k->out_prod.head > k->outbox.ncells) ||
        !ringk_ring_sp_claim(&k->outbox, &k->out_prod, nc, &pos)) {
        prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_WAIT);
        while (!ringk_ring_sp_claim(&k->outbox, &k->out_prod, nc, &pos)) {
            if ((ret = ringk_dev_wait_step(k, timeout_ms, &t0, &nap)) != 0) {
                (void)RINGK_DEV_IN(prev);
                return ret;
            }
        }
        (void)RINGK_DEV_IN(prev);
    }
    rec = (ringk_dev_out_t*)ringk_ring_payload(&k->outbox, pos);
    RINGK_DEV_TALLY(rec, RINGK_TALLY_STORE);
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
 * header for the mark's. The consumers of both rings a device kernel sends into (the host
 * proxy of an outbox, the loop of a device inbox) clear every continuation cell they pass, so
 * the publish reads nothing of the ring first (ringk_ring_publish_hdr()). */
RINGK_DEV_FN void ringk_dev_claim_publish(const ringk_dev_claim_t *cl)
{
    if (cl->marked) {
        ringk_ring_st_rlx(&cl->ring, &ringk_ring_cell(&cl->ring, cl->pos)->seq, 0);
        ringk_dev_fence_sc_sys();
    }
    /* outbox: P1 at system scope (ringk_ring.h's device atomics), the host proxy sees the
     * record whole; a device inbox: device scope */
    ringk_ring_publish_hdr(&cl->ring, cl->pos, cl->bytes, (uint16_t)cl->ncells,
                           (uint8_t)cl->id, 0);
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
    uint32_t nap = RINGK_DEV_NAP_MIN_NS, spins = 0;
    uint64_t pos, t0 = 0, now;
    unsigned prev = RINGK_DEV_BUCKET_PATH;
    int ret, waited = 0;

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
     * finishing loop waits for; one after it sees the tail closed. The swap itself orders
     * nothing: the head it claims against was read with acquire (C2), and the cells are
     * published with the release of their header (P1). */
    for (;;) {
        ret = ringk_ring_mp_claim_in(r, nc, &k->head_cache[route], &k->tail_cache[route], &pos,
                                     RINGK_RING_CLAIM_CLOSABLE | RINGK_RING_CLAIM_RELAXED);
        if (ret != 0) {
            ret = (ret > 0) ? 0 : -EPIPE; /* claimed, or the target closed its inbox */
            break;
        }
        /* full: the target's loop gives cells back every RINGK_DEV_RELEASE_CELLS, so a burst
         * looks again a few times before it naps; its route's 'direct' (across the bus) is
         * read at most every RINGK_DEV_ROUTE_NS of the wait, or of the sends that found the
         * inbox full (RINGK_WAIT_NONE: a sender that never waits learns it too) */
        if (!waited) {
            prev   = RINGK_DEV_IN(RINGK_DEV_BUCKET_WAIT);
            waited = 1;
        }
        now = ringk_dev_now_ns();
        if (ringk_dev_elapsed_ns(k->route_at[route], now) >= RINGK_DEV_ROUTE_NS) {
            k->route_at[route] = now;
            if (!ringk_dev_load_acq_sys_i32(direct)) {
                ret = -EPIPE; /* its target was destroyed without closing (a launch fault) */
                break;
            }
        }
        if (timeout_ms == RINGK_WAIT_NONE) {
            ret = -EAGAIN;
            break;
        }
        if ((++spins > RINGK_DEV_SPINS) &&
            ((ret = ringk_dev_wait_step(k, timeout_ms, &t0, &nap)) != 0)) {
            break;
        }
    }
    if (waited) {
        (void)RINGK_DEV_IN(prev);
    }
    if (ret != 0) {
        return ret;
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

/* Whether route @a route is direct, as this launch knows it: its target copied; else the
 * route's 'direct' word, read across the bus on the route's first send of the launch and then
 * at most every RINGK_DEV_ROUTE_NS (a reply route to a CPU kernel costs no read a message).
 * A route the host makes direct (once in its life, when its target starts after this kernel
 * sent to its name) is taken direct once the host proxy took every record this kernel put in
 * the outbox on that route (k->route_last; a launch counts the whole outbox it starts with):
 * the proxy delivered those before anything sent directly from then on. Until then each send
 * on it reads the proxy's head. A route an earlier launch took direct (ctl->direct_taken) is
 * taken so again at once: a relaunch sends nothing through the host on it. 1 direct, 0
 * through the host. */
RINGK_DEV_FN int ringk_dev_route_direct(ringk_dev_kernel_t *k, int route)
{
    ringk_dev_route_t *rt = &k->routes[route];
    const uint32_t bit    = 1u << route;
    uint64_t now;
    unsigned prev;

    if (k->targets_copied & bit) {
        return 1;
    }
    now = ringk_dev_now_ns();
    if (!(k->direct_seen & bit) && (k->route_at[route] != 0) &&
        (ringk_dev_elapsed_ns(k->route_at[route], now) < RINGK_DEV_ROUTE_NS)) {
        return 0;
    }
    prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_CHORE);
    if (!(k->direct_seen & bit)) {
        k->route_at[route] = now | 1u;
        if (ringk_dev_load_acq_sys_i32(&rt->direct)) {
            k->direct_seen |= bit;
        }
    }
    if ((k->direct_seen & bit) && !(k->own.direct_taken & bit)) {
        /* C2: the proxy's head; pairs with its release of the cells it took */
        k->out_prod.head = ringk_ring_ld_acq(&k->outbox, &k->outbox.cons->pos);
    }
    if ((k->direct_seen & bit) && ((k->own.direct_taken & bit) ||
                                   ((int64_t)(k->out_prod.head - k->route_last[route]) >= 0))) {
        /* after the acquire of 'direct': the host wrote the target before it */
        RINGK_DEV_TALLY(&rt->target, RINGK_TALLY_LOAD);
        k->targets[route]  = rt->target;
        k->targets_copied |= bit;
        k->direct_seen    &= ~bit;
        if (!(k->own.direct_taken & bit)) {
            k->own.direct_taken |= bit; /* for the next launches: read at each launch */
            RINGK_DEV_TALLY(&k->ctl->direct_taken, RINGK_TALLY_STORE | RINGK_TALLY_SYS);
            ((volatile ringk_dev_ctl_t*)k->ctl)->direct_taken = k->own.direct_taken;
        }
    }
    (void)RINGK_DEV_IN(prev);
    return (k->targets_copied & bit) != 0;
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

    if (ringk_dev_route_direct(k, route)) {
        ret = ringk_dev_direct_claim(k, route, &k->targets[route], &rt->direct, type, len,
                                     timeout_ms, cl);
        if (ret == 0) {
            RINGK_DEV_COUNT(k, msgs_direct, 1);
        } else if ((ret == -EPIPE) && !ringk_dev_load_acq_sys_i32(&rt->direct)) {
            /* the target was destroyed and the route dropped: through the host, which finds
             * whatever has the name now (never direct again: the host rewrites no route) */
            k->targets_copied &= ~(1u << route);
            k->route_at[route] = ringk_dev_now_ns() | 1u;
            ret = ringk_dev_outbox_claim(k, RINGK_DEV_OUT_SEND, (uint32_t)route, 0, type, len,
                                         timeout_ms, cl);
            k->route_last[route] = (ret == 0) ? k->out_prod.pos : k->route_last[route];
        }
    } else {
        ret = ringk_dev_outbox_claim(k, RINGK_DEV_OUT_SEND, (uint32_t)route, 0, type, len,
                                     timeout_ms, cl);
        if (ret == 0) {
            k->route_last[route] = k->out_prod.pos; /* the route's last record ends here */
        }
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
    unsigned prev;
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
    req  = k->own.barrier_req;
    prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_WAIT);
    ringk_dev_own_store(k); /* the wait may be long */
    /* the proxy stores the result, then barrier_done with a release store */
    while (ringk_dev_load_acq_sys_u64(&c->barrier_done) != req) {
        ringk_dev_nap(nap);
        nap = (nap < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * nap : RINGK_DEV_NAP_MAX_NS;
    }
    ret = ringk_dev_load_acq_sys_i32(&c->barrier_result);
    (void)RINGK_DEV_IN(prev);
    return ret;
}

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

#endif
