/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the consumer side: one iteration of a kernel's dispatch loop over its inbox, batch
 * cells, and messages from other processes handed straight to an idle kernel. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_internal.h"
#include "net/ringk_net.h"

#include <errno.h>
#include <string.h>

/* The kernel whose dispatch loop runs on this thread: its sends may go into batch cells, which
 * the loop publishes (ringk_batch_flush_all). */
__thread ringk_kernel_t *ringk_tls_running __attribute__((tls_model("initial-exec")));
/* the kernel whose idle thread is polling the worker (see ringk_deliver_direct) */
__thread ringk_kernel_t *ringk_tls_polling __attribute__((tls_model("initial-exec")));
/* the context whose worker this kernel thread polled since it last slept or waited, or NULL
 * (the progress thread naps meanwhile; see ringk_remote_unpoll) */
__thread ringk_ctx_t *ringk_tls_polled __attribute__((tls_model("initial-exec")));
__thread ringk_kernel_t *ringk_tls_inline __attribute__((tls_model("initial-exec")));

/* ringk_flush_running(), and the inbox cells the dispatch loop has finished with (it hands them
 * back 32 at a time) go back to their senders: for a thread about to wait, since a kernel it waits
 * for may itself be waiting for room in this inbox. Only forward: the head published when the
 * loop passed a wrap-around skip may be ahead of k->head. */
void ringk_wait_prepare(void)
{
    ringk_kernel_t *k = ringk_tls_running;
    uint64_t head;

    if (ringk_tls_polled != NULL) {
        /* a kernel thread that polled the worker may now wait long: the progress thread
         * takes over */
        ringk_remote_unpoll(ringk_tls_polled);
        ringk_tls_polled = NULL;
    }
    if (k == NULL) {
        return;
    }
    ringk_flush_running();
    head = __atomic_load_n(&k->head, __ATOMIC_RELAXED);
    if ((int64_t)(head - ringk_load_relaxed_u64(&k->inbox.cons->pos)) > 0) {
        ringk_ring_release_to(&k->inbox, head);
    }
}

/* Counts a sampled message, enqueued at @a enq_ns, in the latency histogram. */
static void lat_record(ringk_kernel_t *k, uint64_t enq_ns)
{
    uint64_t lat    = ringk_now_ns() - enq_ns;
    unsigned bucket = (lat == 0) ? 0 : (63 - __builtin_clzll(lat));

    ringk_add_u64(&k->latency_hist[bucket > 31 ? 31 : bucket], 1);
}

/* Hands one message to the kernel's handler (or takes a terminate), with its accounting. */
static inline __attribute__((always_inline)) void dispatch(ringk_kernel_t *k,
                                                          const ringk_msg_t *msg)
{
    int rc;

    if (msg->timestamp != 0) {
        ringk_hlc_recv(&k->ctx->clock, msg->timestamp);
    }
    if (msg->enq_ns != 0) {
        lat_record(k, msg->enq_ns);
    }
    if (msg->type != RINGK_MSG_TERMINATE) {
        rc = k->handler(k, msg, k->arg);
        if (rc < 0) {
            ringk_add_u64(&k->handler_errors, 1);
        }
    } else {
        /* a terminate message: everything before it is handled; stop taking more */
        int expect = RINGK_KERNEL_ACTIVE;
        __atomic_compare_exchange_n(&k->state, &expect, RINGK_KERNEL_TERMINATING, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
        expect = RINGK_KERNEL_INACTIVE;
        __atomic_compare_exchange_n(&k->state, &expect, RINGK_KERNEL_TERMINATING, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
    }
    /* only the consumer writes it: a plain increment, read racily by stats */
    __atomic_store_n(&k->msgs_in, k->msgs_in + 1, __ATOMIC_RELAXED);
}

/* Handles entries of the batch cell at @a cell (@a len bytes after the cell header), from
 * k->batch_next on, up to @a budget of them; returns how many, and 1 in *done_p once the cell is
 * finished. Only this process writes inboxes, but every offset is checked all the same. */
static unsigned batch_dispatch(ringk_kernel_t *k, const ringk_cell_hdr_t *cell, uint32_t len,
                               unsigned budget, int *done_p)
{
    const uint8_t *base = (const uint8_t*)cell + RINGK_CELL_HDR_BYTES;
    const ringk_batch_hdr_t *bh = (const ringk_batch_hdr_t*)base;
    const ringk_batch_entry_t *e;
    struct {
        ringk_msg_t msg;
        uint8_t     payload[RINGK_BATCH_MAX_LEN];
    } m;
    uint32_t off = k->batch_next ? k->batch_next : sizeof(*bh);
    unsigned n = 0;

    *done_p = 0;
    if ((len < sizeof(*bh)) || (len > RINGK_CELL - RINGK_CELL_HDR_BYTES)) {
        ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': malformed batch cell (length %u)",
                      k->name, len);
        *done_p = 1;
        return 0;
    }
    /* what every entry of the cell shares; per entry only its own fields change */
    m.msg.sender    = bh->sender;
    m.msg.receiver  = k->id;
    m.msg.flags     = 0;
    m.msg.timestamp = 0; /* batches are not used with timestamps */
    m.msg.enq_ns    = 0;
    if ((off == sizeof(*bh)) && (bh->enq_ns != 0)) {
        m.msg.enq_ns = bh->enq_ns; /* the first entry was sampled for the latency histogram */
        lat_record(k, bh->enq_ns);
    }
    while (n < budget) {
        if (off + sizeof(*e) > len) {
            *done_p = 1;
            break;
        }
        e = (const ringk_batch_entry_t*)(base + off);
        if ((e->length > RINGK_BATCH_MAX_LEN) || (off + RINGK_BATCH_ENTRY(e->length) > len) ||
            (e->type >= RINGK_MSG_TERMINATE)) {
            ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': malformed batch entry at offset "
                          "%u (type %u, payload %u bytes, cell %u bytes)", k->name, off, e->type,
                          e->length, len);
            *done_p = 1;
            break;
        }
        m.msg.type   = e->type;
        m.msg.length = e->length;
        m.msg.seq    = bh->seq + e->seq_delta;
        if (e->length == sizeof(uint64_t)) {
            memcpy(m.payload, e + 1, sizeof(uint64_t)); /* the common case, inlined */
        } else {
            memcpy(m.payload, e + 1, e->length);
        }
        off += RINGK_BATCH_ENTRY(e->length);
        /* never a terminate (batch_send() sends those alone): straight to the handler */
        if (k->handler(k, &m.msg, k->arg) < 0) {
            ringk_add_u64(&k->handler_errors, 1);
        }
        m.msg.enq_ns = 0;
        n++;
        if (off + sizeof(*e) > len) {
            *done_p = 1;
            break;
        }
    }
    /* only the consumer writes them: plain increments, read racily by stats */
    __atomic_store_n(&k->msgs_in, k->msgs_in + n, __ATOMIC_RELAXED);
    __atomic_store_n(&k->batched_in, k->batched_in + n, __ATOMIC_RELAXED);
    k->batch_next = *done_p ? 0 : off;
    return n;
}

/* Handles up to the processing mode's number of messages; returns how many. Only the kernel's
 * executor calls it (its thread, or the pool thread holding k->running). */
unsigned ringk_kernel_iteration(ringk_kernel_t *k)
{
    /* the consumer's own copy: other threads read k->head (atomically) for depth and stats */
    uint64_t head = __atomic_load_n(&k->head, __ATOMIC_RELAXED), released = head;
    unsigned limit, n = 0;
    const ringk_cell_hdr_t *cell;
    uint32_t len, ncells;
    uint8_t flags;

    ringk_tls_running   = k;
    k->iter_sends = 0; /* the first send of an iteration goes out at once, later ones batched */

    switch (k->processing) {
    case RINGK_PROCESSING_CONTINUOUS:
        limit = 1;
        break;
    case RINGK_PROCESSING_ADAPTIVE:
        /* the producers' line is read only in this mode */
        if (__atomic_load_n(&k->inbox.prod->pos, __ATOMIC_RELAXED) - k->head <= 16) {
            limit = 1;
            break;
        }
        /* fall through */
    default:
        limit = k->max_per_iteration ? k->max_per_iteration : UINT32_MAX;
        break;
    }
    while (n < limit) {
        cell = ringk_ring_peek(&k->inbox, &head);
        if (cell == NULL) {
            /* skip cells passed over count as consumed */
            __atomic_store_n(&k->head, head, __ATOMIC_RELAXED);
            break;
        }
        len    = cell->len;
        ncells = cell->ncells;
        flags  = cell->flags;
        if ((ringk_ring_msg_check(&k->inbox, head, len, ncells, flags, k->inbox.ncells) != 0) ||
            ((len < sizeof(ringk_msg_t)) && (cell->id != RINGK_CELL_BATCH))) {
            /* Only this process writes inboxes: a bad cell is a bug, reported, never used. */
            ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': malformed inbox cell at %llu "
                          "(length %u, cells %u)", k->name, (unsigned long long)head, len, ncells);
            ringk_ring_release(&k->inbox, head, 1, 0xff);
            head++;
            __atomic_store_n(&k->head, head, __ATOMIC_RELAXED);
            continue;
        }
        if (cell->id == RINGK_CELL_BATCH) {
            int done;

            n += batch_dispatch(k, cell, len, limit - n, &done);
            if (!done) {
                break; /* the fairness limit: the rest of the cell next time */
            }
        } else {
            dispatch(k, ringk_ring_payload(&k->inbox, head));
            n++;
        }
        ringk_ring_done(&k->inbox, head, ncells, flags);
        head += ncells;
        __atomic_store_n(&k->head, head, __ATOMIC_RELAXED);
        if (head - released >= RINGK_RELEASE_BATCH) {
            ringk_ring_release_to(&k->inbox, head);
            released = head;
            if (k->open_batches != 0) {
                ringk_batch_flush_all(k); /* what the handlers sent so far goes out */
            }
        }
    }
    if (head != released) {
        /* before the executor may wait: senders waiting for room must see it */
        ringk_ring_release_to(&k->inbox, head);
    }
    if (k->open_batches != 0) {
        ringk_batch_flush_all(k);
    }
    ringk_tls_running = NULL;
    return n;
}

/* Handles the message ringk_deliver_direct() left in the kernel's direct slot. */
void ringk_kernel_direct(ringk_kernel_t *k)
{
    ringk_tls_running   = k;
    k->iter_sends = 0;
    dispatch(k, &k->direct.msg);
    k->direct_full = 0;
    __atomic_store_n(&k->direct_in, k->direct_in + 1, __ATOMIC_RELAXED);
    if (k->open_batches != 0) {
        ringk_batch_flush_all(k);
    }
    ringk_tls_running = NULL;
}

/* A handler call in the receive callback holds the worker's lock, so that no other thread of
 * the process can send to or receive from another process meanwhile: a kernel whose handler
 * took longer than RINGK_INLINE_MAX_NS there (one call in RINGK_LAT_SAMPLE is timed) has its
 * messages handled from its loop from now on. */
static __attribute__((noinline)) void inline_stop(ringk_kernel_t *k, uint64_t ns)
{
    k->recv_inline = 0;
    ringk_log_msg(k->ctx, RINGK_LOG_INFO, "kernel '%s': a handler call took %.1f us in a receive "
                  "callback (more than %u): its messages are handled from its loop from now on",
                  k->name, ns / 1e3, RINGK_INLINE_MAX_NS / 1000);
}

int ringk_deliver_direct(ringk_kernel_t *to, uint32_t sender, uint32_t type, uint64_t seq,
                         uint64_t timestamp, const void *payload, size_t len)
{
    ringk_msg_t *msg = &to->direct.msg;
    uint64_t t0;

    /* FIFO: an empty inbox holds nothing older from the same sender; the slot is handled
     * before the inbox is looked at again */
    if ((ringk_tls_polling != to) || to->direct_full || (len > RINGK_DIRECT_MAX) ||
        (len > to->max_in) || (ringk_load_i(&to->state) != RINGK_KERNEL_ACTIVE) ||
        !ringk_inbox_empty(to)) {
        return -EAGAIN;
    }
    msg->sender    = sender;
    msg->receiver  = to->id;
    msg->type      = (uint16_t)type;
    msg->flags     = 0;
    msg->length    = (uint32_t)len;
    msg->seq       = seq;
    msg->timestamp = timestamp;
    msg->enq_ns    = ((seq % RINGK_LAT_SAMPLE) == 0) ? ringk_now_ns() : 0;
    if ((len >= 8) && (len <= 16)) {
        /* the usual small message: two 8-byte copies (overlapping below 16), no call */
        memcpy(to->direct.payload, payload, 8);
        memcpy(to->direct.payload + len - 8, (const uint8_t*)payload + len - 8, 8);
    } else if (len > 0) {
        memcpy(to->direct.payload, payload, len);
    }
    if (!to->recv_inline) {
        to->direct_full = 1; /* for ringk_kernel_direct(), once the poll returned */
        return 0;
    }
    /* the handler runs here, in the receive callback: its reply leaves before the worker's
     * progress call unwinds. What it cannot do without waiting is deferred
     * (ringk_tls_inline). What ringk_kernel_direct() does, without its call. */
    t0               = msg->enq_ns;
    to->direct_full  = 1; /* the slot is in use until the handler returned */
    ringk_tls_inline = to;
    ringk_tls_running      = to;
    to->iter_sends   = 0;
    dispatch(to, msg);
    to->direct_full  = 0;
    /* counted apart from direct_in (ringk_kernel_stats_query adds them up) */
    __atomic_store_n(&to->inline_in, to->inline_in + 1, __ATOMIC_RELAXED);
    if (to->open_batches != 0) {
        ringk_batch_flush_all(to);
    }
    ringk_tls_running      = NULL;
    ringk_tls_inline = NULL;
    if ((t0 != 0) && (ringk_now_ns() - t0 > RINGK_INLINE_MAX_NS)) {
        inline_stop(to, ringk_now_ns() - t0);
    }
    return 0;
}
