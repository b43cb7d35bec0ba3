/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API, the dispatch loop (included by ringk_device.h): ringk_dev_run(), its
 * turns (a poll of the host when due, then the device inbox), the hand-over of a message to
 * the kernel's threads, the upkeep, the device side of the terminate and sleep protocols.
 * docs/gpu.md, "The dispatch loop", says why each part is there and what a message may cost. */
#ifndef RINGK_API_RINGK_DEVICE_LOOP_H
#define RINGK_API_RINGK_DEVICE_LOOP_H

#ifndef RINGK_API_RINGK_DEVICE_H
#  error "include <ringk/api/ringk_device.h>, not this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- handing messages to the kernel's threads ------------------------------------------- */

/* Runs handler @a h on @a msg in the calling thread, and keeps the lowest thread's error;
 * then waits for the kernel's other threads to return from it (threads still in a collective
 * call meet this wait with -EDEADLK on the emulated device, and come back). The loop's thread
 * gets the result: 0, or the error of the lowest thread (by block, then thread) that returned
 * one; the others 0. */
RINGK_DEV_FN int ringk_dev_handle(ringk_dev_kernel_t *k, const ringk_msg_t *msg,
                                  ringk_dev_handler_t h)
{
    int ret = h(k, msg, k->arg);

    if (ret < 0) {
        uint64_t who = (uint64_t)ringk_dev_pt_block() * k->threads + ringk_dev_pt_thread();

        ringk_dev_min_dev_u64(&k->err_key, (who << 32) | (uint32_t)-ret);
    }
    while (ringk_dev_sync_tag(k, RINGK_DEV_SYNC_KERNEL, RINGK_DEV_TAG_DONE) != 0) {
    }
    if (!ringk_dev_leader()) {
        return 0; /* unread; the loop's thread may already reset err_key for the next one */
    }
    return (k->err_key == UINT64_MAX) ? 0 : -(int)(uint32_t)k->err_key;
}

/* Hands message @a msg to the kernel's threads (the loop's thread): each runs @a h on it. The
 * handler's result (ringk_dev_handle()). */
RINGK_DEV_FN int ringk_dev_hand(ringk_dev_kernel_t *k, const ringk_msg_t *msg,
                                ringk_dev_handler_t h)
{
    if (ringk_dev_alone(k)) {
        return h(k, msg, k->arg);
    }
    k->hand_msg = msg;
    k->hand_op  = RINGK_DEV_HAND_RUN;
    k->err_key  = UINT64_MAX;
    ringk_dev_sync_tag(k, RINGK_DEV_SYNC_KERNEL, RINGK_DEV_TAG_HAND);
    return ringk_dev_handle(k, msg, h);
}

/* The loop returns: so do the kernel's other threads. */
RINGK_DEV_FN void ringk_dev_stop(ringk_dev_kernel_t *k)
{
    if (!ringk_dev_alone(k)) {
        k->hand_op = RINGK_DEV_HAND_STOP;
        ringk_dev_sync_tag(k, RINGK_DEV_SYNC_KERNEL, RINGK_DEV_TAG_HAND);
    }
}

/* The kernel's threads other than the loop's: each message the loop hands over, they run the
 * handler on, until the loop returns. */
RINGK_DEV_FN void ringk_dev_follow(ringk_dev_kernel_t *k, ringk_dev_handler_t h)
{
    for (;;) {
        ringk_dev_sync_tag(k, RINGK_DEV_SYNC_KERNEL, RINGK_DEV_TAG_HAND);
        if (k->hand_op != RINGK_DEV_HAND_RUN) {
            return;
        }
        ringk_dev_handle(k, k->hand_msg, h);
    }
}

/* Hands message @a msg of ring @a r at @a pos (the staging buffer's copy, for the host
 * ingress ring) to the kernel's threads; a terminate message is the host's to act on. */
RINGK_DEV_FN void ringk_dev_deliver(ringk_dev_kernel_t *k, const ringk_ring_t *r, uint64_t pos,
                                    const ringk_msg_t *msg, ringk_dev_handler_t h)
{
    k->cur_ring = r;
    k->cur_pos  = pos;
    if (msg->type == RINGK_MSG_TERMINATE) {
        /* everything before it is handled; the host makes the kernel terminating */
        ringk_dev_store_rel_sys_i32(&k->ctl->term_req, 1);
    } else if (ringk_dev_hand(k, msg, h) < 0) {
        RINGK_DEV_COUNT(k, handler_errors, 1);
    }
    k->cur_ring = NULL;
    RINGK_DEV_COUNT(k, msgs_in, 1);
}

/* One poll of the host at @a now (ringk_dev_host_poll() into the staging buffer), and the
 * message it found, if one, handed to the kernel's threads: 1, or 0. Sets the pace: the next
 * poll at once after one that found a message, else after the gap (RINGK_DEV_POLL_NS after
 * host messages, what the device inbox's messages set otherwise). */
RINGK_DEV_FN uint32_t ringk_dev_take_host(ringk_dev_kernel_t *k, ringk_dev_handler_t h,
                                          uint64_t now)
{
    /* the staging buffer as a cell: a header's room, then the message */
    const uint32_t room = (uint32_t)RINGK_DEV_STAGE_BYTES(k->own.max_in, k->ingress.cell_size) -
                          RINGK_CELL_HDR_BYTES;
    uint8_t *dst        = k->stage + RINGK_CELL_HDR_BYTES;
    const ringk_msg_t *msg;
    ringk_ring_ll_hdr_t hd;
    uint64_t pos;
    int got;

    do {
        pos = k->in_head;
        got = ringk_dev_host_poll(k, dst, room, &hd);
    } while (got == RINGK_DEV_POLL_AGAIN);
    k->host_at = now;
    if (got != RINGK_DEV_POLL_MSG) {
        k->gap = (k->gap == 0) ? RINGK_DEV_POLL_NS : k->gap;
        return 0;
    }
    k->gap = 0;
    msg    = ringk_dev_host_msg(k, (const ringk_msg_t*)dst, &hd);
    if (msg != NULL) {
        ringk_dev_deliver(k, &k->ingress, pos, msg, h);
    }
    ringk_dev_give_back_host(k, 0);
    return 1;
}

/* Takes up to @a limit messages of the device inbox and hands each to @a h; returns how many.
 * k->dev_head is the next message while a handler runs (ringk_dev_recv() in the handler moves
 * it on). Every continuation cell's first word is cleared (its producers read nothing before
 * they publish: ringk_ring_publish_hdr()); the cells go back in batches
 * (ringk_dev_give_back()). */
RINGK_DEV_FN uint32_t ringk_dev_take_inbox(ringk_dev_kernel_t *k, uint32_t limit,
                                           ringk_dev_handler_t h)
{
    const ringk_ring_t *r = &k->inbox;
    const ringk_cell_hdr_t *cell;
    const ringk_msg_t *msg;
    uint32_t n = 0, ncells;
    uint64_t head;
    uint8_t flags;

    while (n < limit) {
        head = k->dev_head;
        /* skip and cancel cells passed over go back with the batch */
        cell = ringk_ring_peek_held(r, &head);
        k->dev_head = head;
        if (cell == NULL) {
            break;
        }
        msg = ringk_dev_cell_msg(k, r, head, cell, &ncells, &flags);
        if (msg == NULL) {
            k->dev_head = head + ncells; /* passed (counted bad) */
            continue;
        }
        k->dev_head = head + ncells;
        ringk_dev_deliver(k, r, head, msg, h);
        ringk_ring_done(r, head, ncells, flags | RINGK_CELL_FLAG_CLEAR);
        ringk_dev_give_back(r, k->dev_head, &k->dev_rel, 0);
        n++;
    }
    return n;
}

/* ---- the loop's turns ------------------------------------------------------------------- */

/* Messages of the device inbox a turn takes at most: max_per_iteration when set, 1 when
 * continuous, else a release batch (between two turns the host may be polled). */
RINGK_DEV_FN uint32_t ringk_dev_turn_limit(const ringk_dev_kernel_t *k)
{
    if (k->own.max_per_iteration != 0) {
        return k->own.max_per_iteration;
    }
    return (k->own.processing == RINGK_PROCESSING_CONTINUOUS) ? 1 : RINGK_DEV_RELEASE_CELLS;
}

/* One turn at @a now: a poll of the host when it is due, then the device inbox; returns the
 * messages taken. Each inbox is FIFO per sender, and a sender uses one of them. Continuous, a
 * turn takes one message: the inbox looked at first takes turns, so that a stream of host
 * messages (polled again at once each) leaves the device inbox its share, and back. */
RINGK_DEV_FN uint32_t ringk_dev_iteration(ringk_dev_kernel_t *k, ringk_dev_handler_t h,
                                          uint64_t now)
{
    const int one = (k->own.processing == RINGK_PROCESSING_CONTINUOUS) &&
                    (k->own.max_per_iteration <= 1);
    uint32_t n = 0, m = 0;

    k->turn ^= 1u;
    if (one && k->turn && (k->state != RINGK_KERNEL_INACTIVE)) {
        m = ringk_dev_take_inbox(k, 1, h);
    }
    if ((m == 0) && ringk_dev_host_due(k, now)) {
        n = ringk_dev_take_host(k, h, now);
    }
    if ((m == 0) && !(one && (n != 0)) && (k->state != RINGK_KERNEL_INACTIVE)) {
        m = ringk_dev_take_inbox(k, ringk_dev_turn_limit(k), h);
    }
    if ((m != 0) && (k->gap != 0)) {
        /* device messages keep the loop busy: host polls, which stall the loop for a round
         * trip across the bus, spaced out */
        k->gap = RINGK_DEV_POLL_BUSY_NS;
    }
    return n + m;
}

/* The launch's counters for the host, a dead sender's claim, the outbox's head: upkeep at
 * @a now, while busy every RINGK_DEV_CHORE_NS, and once the loop found nothing to take for
 * that long. */
RINGK_DEV_FN void ringk_dev_chores(ringk_dev_kernel_t *k, uint64_t now)
{
    unsigned prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_CHORE);

    ringk_dev_own_store(k);
    ringk_dev_give_up_dead(k);
    /* the outbox's head as the proxy left it: claims of replies then find room by the cached
     * head, without a read across the bus (C2: pairs with the proxy's release) */
    if (k->out_prod.pos != k->out_prod.head) {
        k->out_prod.head = ringk_ring_ld_acq(&k->outbox, &k->outbox.cons->pos);
    }
    k->chore_at = now;
    (void)RINGK_DEV_IN(prev);
}

/* Whether both inboxes are empty: the producers' tails against the consumer's heads. */
RINGK_DEV_FN int ringk_dev_empty(const ringk_dev_kernel_t *k)
{
    return (ringk_ring_ld_acq(&k->ingress, &k->ingress.prod->pos) == k->in_head) &&
           ringk_dev_inbox_empty(k);
}

/* Every cell taken goes back to the producers. */
RINGK_DEV_FN void ringk_dev_give_back_all(ringk_dev_kernel_t *k)
{
    ringk_dev_give_back_host(k, 1);
    ringk_dev_give_back(&k->inbox, k->dev_head, &k->dev_rel, 1);
}

/* A terminating kernel stops once every claimed cell was consumed. T2, device inbox: closes it
 * (pairs with T1 in ringk_dev_send_direct()); its tail is then final. T2, host ingress ring:
 * the state (read by the caller) before the ingress ring's tail, with this fence; pairs with
 * T1 in the host's senders (ringk_inbox_claim), who read the state after their claim. */
RINGK_DEV_FN int ringk_dev_try_finish(ringk_dev_kernel_t *k)
{
    uint64_t tail;

    ringk_dev_give_back_all(k);
    tail = ringk_ring_close(&k->inbox);
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

    ringk_dev_give_back_all(k);
    ringk_dev_own_store(k); /* for the host, and for the next launch to read back */
    ringk_dev_store_rel_sys_i32(&c->idle, 1);
    ringk_dev_fence_sc_sys();
    state = ringk_dev_load_acq_sys_i32(&c->state);
    if (((state == RINGK_KERNEL_ACTIVE) && !ringk_dev_empty(k)) ||
        (state == RINGK_KERNEL_TERMINATING)) {
        /* work after all: take the launch back unless a waker took it (then it relaunches) */
        k->state = state;
        k->gap   = 0;
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

    RINGK_DEV_TALLY(c, RINGK_TALLY_LOAD); /* the configuration: loads in flight together */
    o->id                = c->id;
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
    o->direct_taken      = ringk_dev_load_rlx_u32(&c->direct_taken);
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
        k->route_at[i]   = 0; /* a route through the host is looked at on its first send */
        /* what the outbox holds may be any route's (records of the last launch) */
        k->route_last[i] = k->out_prod.pos;
    }
    k->targets_copied = 0;
    k->direct_seen    = 0;
    k->own_changed    = 0;
}

/* Where the last launch left off, and the pace of this one: consumers publish their heads
 * when they give cells back (all of them before a launch returns), and the outbox's progress
 * marker is the producer's position. 0, or -1 when the control block is not one of this
 * layout or the kernel already finished. */
RINGK_DEV_FN int ringk_dev_loop_begin(ringk_dev_kernel_t *k)
{
    ringk_dev_ctl_t *c = k->ctl;

    RINGK_DEV_TALLY(c, RINGK_TALLY_LOAD);
    if ((c->magic != RINGK_DEV_CTL_MAGIC) || (c->abi != RINGK_DEV_ABI) ||
        ringk_dev_load_acq_sys_i32(&c->done)) {
        return -1;
    }
    k->in_head       = ringk_ring_ld_acq(&k->ingress, &k->ingress.cons->pos);
    k->dev_head      = ringk_ring_ld_acq(&k->inbox, &k->inbox.cons->pos);
    k->in_rel        = k->in_head;
    k->dev_rel       = k->dev_head;
    k->out_prod.pos  = ringk_ring_ld_rlx(&k->outbox, &k->outbox.prod->pos);
    k->out_prod.head = ringk_ring_ld_acq(&k->outbox, &k->outbox.cons->pos);
    k->turn          = 0;
    k->cur_ring      = NULL;
    k->state         = RINGK_KERNEL_INACTIVE;
    k->gap           = 0; /* the first turn polls */
    k->host_at       = 0;
    k->idle_at       = 0;
    k->chore_at      = ringk_dev_now_ns();
    ringk_dev_own_load(k);
    return 0;
}

/* The dispatch loop (ringk_dev_run()) in the loop's thread. */
RINGK_DEV_FN void ringk_dev_loop(ringk_dev_kernel_t *k, ringk_dev_handler_t h)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint32_t idle = 0, idle_iters = 0, nap = RINGK_DEV_NAP_MIN_NS;
    unsigned prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_CHORE);
    uint64_t now;

    if (ringk_dev_loop_begin(k) != 0) {
        (void)RINGK_DEV_IN(prev);
        return;
    }
    (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_PATH);
    for (;;) {
        now = ringk_dev_now_ns();
        if (ringk_dev_iteration(k, h, now) > 0) {
            RINGK_DEV_COUNT(k, iterations, 1);
            idle = idle_iters = 0;
            nap  = RINGK_DEV_NAP_MIN_NS;
            k->idle_at = 0;
            if (ringk_dev_elapsed_ns(k->chore_at, now) >= RINGK_DEV_CHORE_NS) {
                ringk_dev_chores(k, now);
            }
            continue;
        }
        /* nothing to take */
        if (k->idle_at == 0) {
            k->idle_at = now;
        } else if (ringk_dev_elapsed_ns(k->idle_at, now) >= RINGK_DEV_POLL_NS) {
            /* a producer may wait for room: upkeep of an idle loop, counted so */
            (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_CHORE);
            ringk_dev_give_back_all(k);
            (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_PATH);
            if ((ringk_dev_elapsed_ns(k->idle_at, now) >= RINGK_DEV_CHORE_NS) &&
                (ringk_dev_elapsed_ns(k->chore_at, now) >= RINGK_DEV_CHORE_NS)) {
                ringk_dev_chores(k, now);
            }
        }
        if (ringk_dev_give_up_dead(k)) {
            continue; /* the loop passes the cells given up */
        }
        if (k->state == RINGK_KERNEL_TERMINATING) {
            (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_CHORE);
            if (ringk_dev_try_finish(k)) {
                ringk_dev_own_store(k);
                ringk_dev_store_rel_sys_i32(&c->done, 1); /* after the counters' last store */
                (void)RINGK_DEV_IN(prev);
                return;
            }
            (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_PATH);
        }
        if ((k->own.mode == RINGK_MODE_EVENT_DRIVEN) && (++idle_iters >= k->own.max_iterations)) {
            (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_CHORE);
            if (ringk_dev_park(k)) {
                (void)RINGK_DEV_IN(prev);
                return;
            }
            (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_PATH);
            idle_iters = 0;
            continue;
        }
        if (++idle > RINGK_DEV_SPINS) {
            ringk_dev_nap(nap);
            nap = (nap < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * nap : RINGK_DEV_NAP_MAX_NS;
        }
    }
}

/**
 * The dispatch loop of a device kernel. One thread of the launch (thread 0 of block 0) takes
 * messages from the device inbox and the host ingress ring and hands each to the kernel's
 * threads, which all run @a h on it and return before the next is taken: a message is handled
 * once per kernel, by all its threads together, in the order the loop takes them. The loop
 * follows the kernel's processing mode; persistent, it naps when idle (RINGK_DEV_NAP_MAX_NS at
 * most) and runs until terminated; event-driven, it returns after max_iterations idle
 * iterations and the host relaunches it when a message comes. An inactive kernel takes
 * nothing. Terminating, it drains both inboxes, then sets 'done'.
 */
RINGK_DEV_FN void ringk_dev_run(ringk_dev_kernel_t *k, ringk_dev_handler_t h)
{
    if (!ringk_dev_leader()) {
        ringk_dev_follow(k, h);
        return;
    }
    ringk_dev_loop(k, h);
    ringk_dev_stop(k);
}

/**
 * A launch of a device kernel, run by all its threads: copies the kernel from @a src (mapped
 * memory the host wrote before the first launch) into @a k (the kernel's device memory, which
 * the launch's threads share), takes the clock's offset from the host's launch time, and runs
 * the loop on @a k.
 */
RINGK_DEV_FN void ringk_dev_launch_run(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *k,
                                       ringk_dev_handler_t h)
{
#if defined(__CUDA_ARCH__)
    const uint64_t *from = (const uint64_t*)src;
    uint64_t *to         = (uint64_t*)k;
    unsigned i;

    if (blockIdx.x == 0) {
        for (i = threadIdx.x; i < sizeof(*k) / sizeof(uint64_t); i += blockDim.x) {
            to[i] = from[i]; /* the bus's latency once per launch, not once per word */
        }
    }
    ringk_dev_sync_tag(k, RINGK_DEV_SYNC_KERNEL, RINGK_DEV_TAG_START);
#else
    if (ringk_dev_leader()) {
        unsigned prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_CHORE);

        RINGK_DEV_TALLY(src, RINGK_TALLY_LOAD);
        *k = *src;
        (void)RINGK_DEV_IN(prev);
    }
    ringk_dev_sync_tag(k, RINGK_DEV_SYNC_KERNEL, RINGK_DEV_TAG_START);
#endif
    if (ringk_dev_leader()) {
        unsigned prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_CHORE);

        k->clock_off = ringk_dev_load_rlx_sys_u64(&k->ctl->launch_ns) - ringk_dev_now_ns();
        (void)RINGK_DEV_IN(prev);
    }
    ringk_dev_run(k, h);
}

#ifdef __cplusplus
}
#endif

#endif
