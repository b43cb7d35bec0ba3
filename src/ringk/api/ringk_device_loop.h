/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API, the dispatch loop (included by ringk_device.h after the calls a handler
 * makes): ringk_dev_run(), and what it and ringk_dev_recv() take messages with: the staging of
 * the host ingress ring's messages, batches, the device side of the terminate and sleep
 * protocols. */
#ifndef RINGK_API_RINGK_DEVICE_LOOP_H
#define RINGK_API_RINGK_DEVICE_LOOP_H

#ifndef RINGK_API_RINGK_DEVICE_H
#  error "include <ringk/api/ringk_device.h>, not this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the dispatch loop ------------------------------------------------------------------- */

/* ringk_ring_peek() of the host ingress ring @a r (mapped memory: each access crosses the bus),
 * which copies each published cell into the kernel's staging buffer in device memory right
 * after its acquire, in one pass of loads in flight together: the staged header (k->stage), or
 * NULL. Skip and cancel cells are passed over as ringk_ring_peek() does. */
RINGK_DEV_FN const ringk_cell_hdr_t *ringk_dev_peek_staged(ringk_dev_kernel_t *k,
                                                           const ringk_ring_t *r,
                                                           uint64_t *pos_p)
{
    const ringk_cell_hdr_t *hdr = (const ringk_cell_hdr_t*)k->stage;
    uint64_t pos = *pos_p;

    for (;;) {
        /* C1: pairs with P1 in ringk_ring_publish(); the copy comes after this load */
        if (ringk_ring_ld_acq(r, &ringk_ring_cell(r, pos)->seq) != pos + 1) {
            hdr = NULL;
            break;
        }
        ringk_dev_fetch(k->stage, ringk_ring_cell(r, pos), r->cell_size);
        if (!ringk_ring_passes_over(r, pos, hdr->ncells, hdr->flags)) {
            break;
        }
        ringk_ring_done(r, pos, hdr->ncells, hdr->flags);
        pos += hdr->ncells;
    }
    if (pos != *pos_p) {
        ringk_ring_release_to(r, pos);
        *pos_p = pos;
    }
    return hdr;
}

/* The message of the published cell at @a head of @a r whose header is @a hdr (a producer's
 * writing: checked before use), its cell count in *@a ncells_p and flags in *@a flags_p; NULL
 * for a malformed cell, which is counted in bad_cells and passed to ringk_ring_done() (the
 * caller moves past it). A staged header (ringk_dev_peek_staged()) gives the staged message:
 * the cells after the first are copied once the header was checked, and the loop and the
 * handler then read nothing across the bus. */
RINGK_DEV_FN const ringk_msg_t *ringk_dev_cell_msg(ringk_dev_kernel_t *k, const ringk_ring_t *r,
                                                   uint64_t head, const ringk_cell_hdr_t *hdr,
                                                   uint32_t *ncells_p, uint8_t *flags_p)
{
    int staged = ((const uint8_t*)hdr == k->stage);
    const ringk_msg_t *msg = staged ? (const ringk_msg_t*)(k->stage + RINGK_CELL_HDR_BYTES)
                                    : (const ringk_msg_t*)ringk_ring_payload(r, head);
    uint32_t len, ncells;
    uint8_t flags, id;

    len    = hdr->len;
    ncells = hdr->ncells;
    flags  = hdr->flags;
    id     = hdr->id;
    if ((ringk_ring_msg_check(r, head, len, ncells, flags, r->ncells) != 0) ||
        (len < sizeof(ringk_msg_t)) || (id > RINGK_MSG_TERMINATE) ||
        (msg->length != len - sizeof(ringk_msg_t)) || (msg->length > k->own.max_in)) {
        RINGK_DEV_COUNT(k, bad_cells, 1);
        ringk_ring_done(r, head, 1, 0xff);
        return NULL;
    }
    if (staged && (RINGK_CELL_HDR_BYTES + len > r->cell_size)) {
        /* within the staging buffer: len is at most sizeof(ringk_msg_t) + max_in */
        ringk_dev_fetch(k->stage + r->cell_size, (const uint8_t*)ringk_ring_cell(r, head) +
                        r->cell_size, RINGK_CELL_HDR_BYTES + len - r->cell_size);
    }
    if (msg->timestamp != 0) {
        ringk_dev_hlc_merge(k, msg->timestamp);
    }
    *ncells_p = ncells;
    *flags_p  = flags;
    return msg;
}

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
        cell = (r == &k->ingress) ? ringk_dev_peek_staged(k, r, &head) : ringk_ring_peek(r, &head);
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
        } else if (ringk_dev_hand(k, msg, h) < 0) {
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
    uint32_t ncells, type = RINGK_MSG_DATA;
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
        /* not staged (ringk_ring_peek*): the staging buffer holds the running handler's
         * message */
        msg = ringk_dev_cell_msg(k, r, head, cell, &ncells, &flags);
        if (msg != NULL) {
            /* judged from the copy: the cells go back to the producers below */
            ringk_dev_fetch(out, msg, sizeof(*msg));
            type = out->type;
            if (out->length > cap) {
                return -EMSGSIZE;
            }
        }
        if (msg == NULL) {
            ncells = 1;
        } else if (type == RINGK_MSG_TERMINATE) {
            ringk_dev_store_rel_sys_i32(&c->term_req, 1);
            RINGK_DEV_COUNT(k, msgs_in, 1); /* taken, as the loop counts it */
            ringk_ring_done(r, head, ncells, flags);
        } else {
            ringk_dev_fetch(out + 1, msg + 1, out->length);
            RINGK_DEV_COUNT(k, msgs_in, 1);
            ringk_ring_done(r, head, ncells, flags);
        }
        *head_p = head + ncells;
        if (!held) {
            ringk_ring_release_to(r, *head_p); /* R1 */
        }
        if ((msg != NULL) && (type != RINGK_MSG_TERMINATE)) {
            return 0;
        }
    }
}

/* Whether sender id @a owner is of a process the host says ended (ctl->dead). A: ndead's
 * acquire pairs with the host's release after dead[n] (ringk_dev_remote.c, dead_tell()). */
RINGK_DEV_FN int ringk_dev_owner_dead(const ringk_dev_ctl_t *c, uint32_t owner)
{
    int32_t n = ringk_dev_load_acq_sys_i32(&c->ndead), i;

    for (i = 0; (i < n) && (i < (int32_t)RINGK_DEV_DEAD_MAX); i++) {
        if (((const volatile uint32_t*)c->dead)[i] == (owner >> RINGK_DEV_RANK_SHIFT)) {
            return 1;
        }
    }
    return 0;
}

/* The cell of the device inbox where the loop (or a handler's ringk_dev_recv()) waits, while
 * it is a claim marked by a sender (ringk_ring_mark_claimed()) of a process the host says
 * ended: its cells given up (a cancel cell, which the consumer passes), or it would wait there
 * for ever (and could not terminate). The mark is another process's writing: a seqlock's
 * reader. M1: seq is the mark (acquire: pairs with the mark's release), then the fields
 * (relaxed loads of len and ncells), then the owner found dead, then
 * M2: a fence and seq still the mark (pairs with the fence a live sender makes between its
 * unmark and its publish, ringk_dev_claim_publish()). A mark still there once its owner is
 * known dead is never published. Device memory is read first, the control block (mapped
 * memory, across the bus) only for a mark. @return 1 if cells were given up. */
RINGK_DEV_FN int ringk_dev_give_up_dead(ringk_dev_kernel_t *k)
{
    ringk_dev_ctl_t *c    = k->ctl;
    const ringk_ring_t *r = &k->inbox;
    const uint64_t pos    = k->dev_head, mark = (pos + 1) | RINGK_CELL_SEQ_CLAIMED;
    ringk_cell_hdr_t *cell = ringk_ring_cell(r, pos);
    uint64_t tail;
    uint32_t owner, ncells;

    if (ringk_ring_ld_acq(r, &cell->seq) != mark) { /* M1 */
        return 0;
    }
    owner  = ringk_dev_load_rlx_u32(&cell->len);
    ncells = ringk_dev_load_rlx_u16(&cell->ncells);
    tail   = ringk_ring_ld_acq(r, &r->prod->pos) & ~RINGK_RING_CLOSED;
    if ((ncells < 1) || (ncells > tail - pos) ||
        (ncells > r->ncells - (uint32_t)(pos & r->mask)) || !ringk_dev_owner_dead(c, owner)) {
        return 0;
    }
    ringk_dev_fence_sc_sys(); /* M2 */
    if (ringk_ring_ld_rlx(r, &cell->seq) != mark) {
        return 0;
    }
    ringk_ring_cancel(r, pos, ncells);
    ((volatile ringk_dev_ctl_t*)c)->given_up_owner = owner;
    /* G: the count after the owner; pairs with the host's acquire (given_up_log()) */
    ringk_dev_store_rel_sys_u64(&c->given_up,
                                ringk_dev_load_rlx_sys_u64(&c->given_up) + ncells);
    return 1;
}

/* ringk_dev_recv() in one thread. */
RINGK_DEV_FN int ringk_dev_recv_in(ringk_dev_kernel_t *k, ringk_msg_t *out, uint32_t cap,
                                   int timeout_ms)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint32_t i, nap = RINGK_DEV_NAP_MIN_NS;
    uint64_t t0 = 0;
    int32_t state;
    int ret = -EAGAIN, full;

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
        if (ringk_dev_give_up_dead(k)) {
            continue; /* the next look passes the cells given up */
        }
        if ((ret = ringk_dev_wait_step(k, timeout_ms, &t0, &nap)) != 0) {
            return ret;
        }
    }
}

/**
 * Collective over the kernel: every thread of every block calls it with the same arguments.
 * Takes the next message of the kernel's inboxes into @a out (a buffer of sizeof(ringk_msg_t)
 * + @a cap bytes: the header, then the payload, ringk_dev_msg_payload(out)), from a handler
 * that wants more than the message it was given (a reply it waits for, the rest of a group).
 * The loop's thread takes the message and writes it to its @a out while the others wait: in a
 * kernel of more than one thread, @a out is memory every thread reads (global memory, or
 * shared memory in a kernel of one block) and the same address in each. Messages come in the
 * order the loop would hand them over; FIFO per sender. An inactive kernel takes nothing. A
 * terminate message is taken as the loop takes it (the host terminates the kernel after the
 * handler returned) and the next message is looked for. @a timeout_ms: RINGK_WAIT_NONE,
 * RINGK_WAIT_FOREVER or milliseconds.
 * @return the same in every thread: 0; -EAGAIN none with RINGK_WAIT_NONE; -ETIMEDOUT none in
 * @a timeout_ms; -EMSGSIZE the next message's payload is above @a cap (its header is in
 * @a out, out->length its size; it stays first); -ECANCELED the kernel is terminating and its
 * inboxes are empty; -ENOBUFS the messages this handler took hold half of its message's inbox
 * (they go back to the senders when it returns); -EINVAL a NULL @a out or a timeout below
 * RINGK_WAIT_FOREVER; -EDEADLK (the emulated device) only part of the kernel's threads called
 * it.
 */
RINGK_DEV_FN int ringk_dev_recv(ringk_dev_kernel_t *k, ringk_msg_t *out, uint32_t cap,
                                int timeout_ms)
{
    if ((out == NULL) || (timeout_ms < RINGK_WAIT_FOREVER)) {
        return -EINVAL;
    }
    if (ringk_dev_alone(k)) {
        return ringk_dev_recv_in(k, out, cap, timeout_ms);
    }
    RINGK_DEV_KERNEL_CALL(k, RINGK_DEV_TAG_RECV, ringk_dev_recv_in(k, out, cap, timeout_ms));
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
    int look_in = (k->in_skip == 0), empty = 0, looked = 0;
    uint64_t in_queued = (uint64_t)look_in;

    if (k->own.processing == RINGK_PROCESSING_CONTINUOUS) {
        limit = 1;
    } else if (k->own.processing == RINGK_PROCESSING_ADAPTIVE) {
        /* The ingress ring's tail is read across the bus once: it sizes the batch, and a tail
         * at the head (nothing claimed) skips the look at the ring's next cell. A stale tail
         * only delays a message to the next turn. After a look that found the ring empty, the
         * look at its next cell is the one read instead (a message coming to an idle loop
         * costs no read of the tail; it is taken alone). */
        if (look_in && !k->in_idle) {
            in_queued = ringk_dev_load_rlx_sys_u64(&k->ingress.prod->pos) - k->in_head;
            empty     = (in_queued == 0);
            looked    = empty;
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
            looked = 1;
        }
    } else {
        m = 0;
        if (in_queued != 0) {
            m      = ringk_dev_take(k, &k->ingress, &k->in_head, limit, h);
            empty |= (m == 0);
            looked = 1;
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
    if (looked) {
        k->in_idle = (m == 0);
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

/* The dispatch loop (ringk_dev_run()) in the loop's thread. */
RINGK_DEV_FN void ringk_dev_loop(ringk_dev_kernel_t *k, ringk_dev_handler_t h)
{
    ringk_dev_ctl_t *c = k->ctl;
    uint32_t idle = 0, idle_iters = 0, nap = RINGK_DEV_NAP_MIN_NS;
    uint32_t since_state = RINGK_DEV_STATE_POLLS, since_store = 0;
    int32_t state = RINGK_KERNEL_INACTIVE;

    if ((c->magic != RINGK_DEV_CTL_MAGIC) || (c->abi != RINGK_DEV_ABI) ||
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
    k->in_idle      = 0;
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
                /* a dead sender's claim in the device inbox while the host ingress ring
                 * keeps the loop busy */
                ringk_dev_give_up_dead(k);
            }
            continue;
        }
        /* nothing to take: the counters as they are now (a store only after a change) */
        ringk_dev_own_store(k);
        since_store = 0;
        if (ringk_dev_give_up_dead(k)) {
            continue; /* the loop passes the cells given up */
        }
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
        *k = *src;
    }
    ringk_dev_sync_tag(k, RINGK_DEV_SYNC_KERNEL, RINGK_DEV_TAG_START);
#endif
    if (ringk_dev_leader()) {
        k->clock_off = ringk_dev_load_rlx_sys_u64(&k->ctl->launch_ns) - ringk_dev_now_ns();
    }
    ringk_dev_run(k, h);
}

#ifdef __cplusplus
}
#endif

#endif
