/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API, taking messages from a handler (included by ringk_device.h):
 * ringk_dev_recv() from either inbox, the checks of a device inbox's cells, and the loop's
 * giving up of a dead sender's claims. */
#ifndef RINGK_API_RINGK_DEVICE_RECV_H
#define RINGK_API_RINGK_DEVICE_RECV_H

#ifndef RINGK_API_RINGK_DEVICE_H
#  error "include <ringk/api/ringk_device.h>, not this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The message of the published cell at @a head of the device inbox whose header is @a hdr (a
 * producer's writing: checked before use), its cell count in *@a ncells_p and flags in
 * *@a flags_p; NULL for a malformed cell, which is counted in bad_cells and passed to
 * ringk_ring_done() with every continuation cell cleared: its cells where the count is one
 * the ring holds (a message whose header says what no sender writes), else the one cell
 * (*@a ncells_p: what the caller moves past). */
RINGK_DEV_FN const ringk_msg_t *ringk_dev_cell_msg(ringk_dev_kernel_t *k, const ringk_ring_t *r,
                                                   uint64_t head, const ringk_cell_hdr_t *hdr,
                                                   uint32_t *ncells_p, uint8_t *flags_p)
{
    const ringk_msg_t *msg = (const ringk_msg_t*)ringk_ring_payload(r, head);
    uint32_t len, ncells;
    uint8_t flags, id;

    len    = hdr->len;
    ncells = hdr->ncells;
    flags  = hdr->flags;
    id     = hdr->id;
    if (ringk_ring_msg_check(r, head, len, ncells, flags, r->ncells) != 0) {
        ncells = 1;
    } else if ((len >= sizeof(ringk_msg_t)) && (id <= RINGK_MSG_TERMINATE) &&
               (msg->length == len - sizeof(ringk_msg_t)) && (msg->length <= k->own.max_in)) {
        if (msg->timestamp != 0) {
            ringk_dev_hlc_merge(k, msg->timestamp);
        }
        *ncells_p = ncells;
        *flags_p  = flags;
        return msg;
    }
    RINGK_DEV_COUNT(k, bad_cells, 1);
    ringk_ring_done(r, head, ncells, 0xff);
    *ncells_p = ncells;
    return NULL;
}

/* ringk_dev_recv() from the device inbox: 0 (a message copied to @a out), -EAGAIN (none),
 * -EMSGSIZE (the next one's payload is above @a cap: its header is in @a out, the message
 * stays), or -ENOBUFS (the cells the running handler holds back fill half of the inbox). */
RINGK_DEV_FN int ringk_dev_recv_inbox(ringk_dev_kernel_t *k, ringk_msg_t *out, uint32_t cap)
{
    const ringk_ring_t *r = &k->inbox;
    int held = (k->cur_ring == r);
    const ringk_cell_hdr_t *cell;
    const ringk_msg_t *msg;
    uint32_t ncells, type = RINGK_MSG_DATA;
    uint64_t head;
    uint8_t flags;

    if (held) {
        /* the loop's batch before the handler's message goes back now: what follows counts
         * the cells this handler holds */
        ringk_dev_give_back(r, k->cur_pos, &k->dev_rel, 1);
    }
    for (;;) {
        /* cells not given back yet: the running handler's message and those after it */
        if (held && (k->dev_head - k->dev_rel >= r->ncells / 2)) {
            return -ENOBUFS; /* its producers could wait for room this handler holds */
        }
        head = k->dev_head;
        cell = ringk_ring_peek_held(r, &head);
        k->dev_head = head;
        if (cell == NULL) {
            return -EAGAIN;
        }
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
            /* passed: ringk_dev_cell_msg() said how far */
        } else if (type == RINGK_MSG_TERMINATE) {
            ringk_dev_store_rel_sys_i32(&k->ctl->term_req, 1);
            RINGK_DEV_COUNT(k, msgs_in, 1); /* taken, as the loop counts it */
            ringk_ring_done(r, head, ncells, flags | RINGK_CELL_FLAG_CLEAR);
        } else {
            ringk_dev_fetch(out + 1, msg + 1, out->length);
            RINGK_DEV_COUNT(k, msgs_in, 1);
            ringk_ring_done(r, head, ncells, flags | RINGK_CELL_FLAG_CLEAR);
        }
        k->dev_head = head + ncells;
        if (!held) {
            /* the cells of the handler's own ring go back when it returned (its message is
             * still in use); here at the batch's pace */
            ringk_dev_give_back(r, k->dev_head, &k->dev_rel, 0);
        }
        if ((msg != NULL) && (type != RINGK_MSG_TERMINATE)) {
            return 0;
        }
    }
}

/* ringk_dev_recv() from the host ingress ring, one poll (its messages are copies: the
 * running handler holds none of its cells): as ringk_dev_recv_inbox(). */
RINGK_DEV_FN int ringk_dev_recv_host(ringk_dev_kernel_t *k, ringk_msg_t *out, uint32_t cap)
{
    ringk_ring_ll_hdr_t hd;
    int got;

    for (;;) {
        /* cap above max_in: no message is longer (and sizeof + cap does not wrap) */
        got        = ringk_dev_host_poll(k, (uint8_t*)out, (uint32_t)sizeof(*out) +
                                         ((cap < k->own.max_in) ? cap : k->own.max_in), &hd);
        k->host_at = ringk_dev_now_ns();
        if (got == RINGK_DEV_POLL_BIG) {
            return -EMSGSIZE;
        }
        if (got == RINGK_DEV_POLL_NONE) {
            return -EAGAIN;
        }
        if (got == RINGK_DEV_POLL_AGAIN) {
            continue;
        }
        ringk_dev_give_back_host(k, 0);
        if (ringk_dev_host_msg(k, out, &hd) == NULL) {
            continue;
        }
        RINGK_DEV_COUNT(k, msgs_in, 1);
        if (out->type != RINGK_MSG_TERMINATE) {
            return 0;
        }
        ringk_dev_store_rel_sys_i32(&k->ctl->term_req, 1);
    }
}

/* Whether sender id @a owner is of a process the host says ended (ctl->dead). A: ndead's
 * acquire pairs with the host's release after dead[n] (ringk_dev_remote.c, dead_tell()). */
RINGK_DEV_FN int ringk_dev_owner_dead(const ringk_dev_ctl_t *c, uint32_t owner)
{
    int32_t n = ringk_dev_load_acq_sys_i32(&c->ndead), i;

    for (i = 0; (i < n) && (i < (int32_t)RINGK_DEV_DEAD_MAX); i++) {
        if (ringk_dev_load_rlx_u32(&c->dead[i]) == (owner >> RINGK_DEV_RANK_SHIFT)) {
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
    RINGK_DEV_TALLY(&c->given_up_owner, RINGK_TALLY_STORE);
    ((volatile ringk_dev_ctl_t*)c)->given_up_owner = owner;
    /* G: the count after the owner; pairs with the host's acquire (given_up_log()) */
    ringk_dev_store_rel_sys_u64(&c->given_up,
                                ringk_dev_load_rlx_sys_u64(&c->given_up) + ncells);
    return 1;
}

/* Whether the device inbox is empty, as its tail says. */
RINGK_DEV_FN int ringk_dev_inbox_empty(const ringk_dev_kernel_t *k)
{
    return (ringk_ring_ld_acq(&k->inbox, &k->inbox.prod->pos) & ~RINGK_RING_CLOSED) ==
           k->dev_head;
}

/* ringk_dev_recv() in one thread. */
RINGK_DEV_FN int ringk_dev_recv_in(ringk_dev_kernel_t *k, ringk_msg_t *out, uint32_t cap,
                                   int timeout_ms)
{
    uint32_t i, nap = RINGK_DEV_NAP_MIN_NS;
    uint64_t t0 = 0;
    int ret = -EAGAIN, full;
    unsigned prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_PATH);

    for (;;) {
        full = 0;
        /* the host is polled first (it reads the state), then at most every RINGK_DEV_POLL_NS
         * while the receive waits */
        for (i = 0; i < 2; i++) {
            if (((i ^ k->turn) & 1u) && (k->state != RINGK_KERNEL_INACTIVE)) {
                ret = ringk_dev_recv_inbox(k, out, cap);
            } else if (((i ^ k->turn) & 1u) == 0) {
                ret = ((t0 == 0) || (ringk_dev_elapsed_ns(k->host_at, ringk_dev_now_ns()) >=
                                     RINGK_DEV_POLL_NS)) ? ringk_dev_recv_host(k, out, cap)
                                                         : -EAGAIN;
            }
            if ((ret == 0) || (ret == -EMSGSIZE)) {
                (void)RINGK_DEV_IN(prev);
                return ret;
            }
            full |= (ret == -ENOBUFS);
        }
        if (full) {
            ret = -ENOBUFS;
            break;
        }
        if ((k->state == RINGK_KERNEL_TERMINATING) && ringk_dev_inbox_empty(k)) {
            ret = -ECANCELED;
            break;
        }
        if (ringk_dev_give_up_dead(k)) {
            continue; /* the next look passes the cells given up */
        }
        (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_WAIT);
        ret = ringk_dev_wait_step(k, timeout_ms, &t0, &nap);
        (void)RINGK_DEV_IN(RINGK_DEV_BUCKET_PATH);
        if (ret != 0) {
            break;
        }
    }
    (void)RINGK_DEV_IN(prev);
    return ret;
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
 * RINGK_WAIT_FOREVER or milliseconds. The host's messages are seen at the next poll of the
 * host (at most every RINGK_DEV_POLL_NS while the receive waits).
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

#ifdef __cplusplus
}
#endif

#endif
