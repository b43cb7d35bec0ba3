/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the producer side: ringk_send() and ringk_send_route(), their fast paths, batch
 * cells, and the claim and publish of inbox cells. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_exec.h"
#include "ringk_internal.h"
#include "net/ringk_net.h"
#include "ringk_route.h"

#include <errno.h>
#include <string.h>

/* What a claim that found no room returns (nothing claimed): positive values, no errno, apart
 * from the RINGK_REMOTE_ ones; SEND_FULL_BATCH: the claim of a new batch cell. */
#define SEND_FULL       16
#define SEND_FULL_BATCH 17

/* After @a ncells cells of @a to's inbox were claimed at @a pos: *sleeper_p, whether the
 * executor of @a to slept (the publish must wake it); 0, or -EPIPE (it terminates: the cells are
 * given up). */
static inline __attribute__((always_inline)) int
inbox_claimed(ringk_kernel_t *to, uint32_t ncells, uint64_t pos, int *sleeper_p)
{
    int state;

    /* W2 (see ringk_sleeping_seen): right after the claim, so that no fence is needed */
    *sleeper_p = ringk_sleeping_seen(to);
    /* T1: the claim (a compare-and-swap on the tail) comes before this read of the state;
     * pairs with T2 in kernel_try_finish(), which reads the state, then the tail. A sender that
     * finds the kernel terminating here gives its cells up (the consumer passes over them)
     * and is told. */
    state = __atomic_load_n(&to->state, __ATOMIC_SEQ_CST);
    if ((state == RINGK_KERNEL_TERMINATING) || (state == RINGK_KERNEL_TERMINATED)) {
        if (to->inbox_ll) {
            ringk_ring_ll_cancel(&to->inbox, pos, ncells);
        } else {
            ringk_ring_cancel(&to->inbox, pos, ncells);
        }
        return -EPIPE;
    }
    return 0;
}

/* Claims @a ncells cells of @a to's inbox if it has room, without waiting.
 * @return 0 (claimed at *pos_p, *sleeper_p as inbox_claimed() says), SEND_FULL, or -EPIPE. */
static inline __attribute__((always_inline)) int
inbox_claim(ringk_kernel_t *to, uint32_t ncells, uint64_t *head_cache, uint64_t *pos_p,
            int *sleeper_p)
{
    /* Fast refusal; the check that counts comes after the claim (T1). */
    if (ringk_load_i(&to->state) >= RINGK_KERNEL_TERMINATING) {
        return -EPIPE;
    }
    if (!ringk_inbox_claim_cells(to, ncells, head_cache, pos_p)) {
        return SEND_FULL;
    }
    return inbox_claimed(to, ncells, *pos_p, sleeper_p);
}

/* What a delivery or send that found no room does, by its timeout and its thread: the one
 * place that says it. */
typedef enum {
    BLOCKED_WAIT,   /* it waits (ringk_wait.c) */
    BLOCKED_REFUSE, /* RINGK_WAIT_NONE: -EAGAIN */
    BLOCKED_DEFER   /* in a receive callback (ringk_tls_inline), where nothing may wait: the
                     * call is deferred (RINGK_WOULD_WAIT), made once the callback returned */
} blocked_t;

static inline blocked_t blocked_how(int timeout_ms)
{
    if (timeout_ms == RINGK_WAIT_NONE) {
        return BLOCKED_REFUSE;
    }
    /* the worker's lock is held: a receiver's executor may itself wait for it */
    return (ringk_tls_inline != NULL) ? BLOCKED_DEFER : BLOCKED_WAIT;
}

/* Publishes route @a i's open batch cell, and wakes its target if it slept at the claim. */
static void batch_flush(ringk_kernel_t *from, unsigned i)
{
    route_t *rt = &from->routes[i];
    ringk_kernel_t *to = rt->target;

    ringk_ring_publish(&to->inbox, rt->batch_pos, sizeof(ringk_batch_hdr_t) + rt->batch_bytes, 1,
                       RINGK_CELL_BATCH, 0);
    rt->batch_bytes   = 0;
    from->open_batches &= ~(1u << i);
    if (rt->batch_sleeper) {
        ringk_wake_signal(to);
    }
}

void ringk_batch_flush_all(ringk_kernel_t *from)
{
    while (from->open_batches != 0) {
        batch_flush(from, (unsigned)__builtin_ctz(from->open_batches));
    }
}

/* Writes the header of the batch cell just claimed at rt->batch_pos on route @a rt of @a from,
 * and opens it; the first entry will carry sequence number @a seq. */
static void batch_begin(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt, uint64_t seq)
{
    ringk_batch_hdr_t *bh = ringk_ring_payload(&rt->target->inbox, rt->batch_pos);

    bh->sender   = ((uint32_t)ctx->job.rank << RINGK_RANK_SHIFT) | from->id;
    bh->reserved = 0;
    bh->seq      = seq;
    /* the latency histogram samples about one message in RINGK_LAT_SAMPLE, as unbatched */
    bh->enq_ns = 0;
    if (seq >= from->next_sample) {
        bh->enq_ns        = ringk_now_ns();
        from->next_sample = seq + RINGK_LAT_SAMPLE;
    }
    rt->batch_hdr       = bh;
    rt->batch_seq       = seq;
    rt->batch_bytes     = 0;
    from->open_batches |= rt->bit;
}

/* Claims a new batch cell on route @a rt of @a from, if the inbox has room, and opens it (see
 * batch_begin). 0, SEND_FULL_BATCH, or -EPIPE. */
static __attribute__((noinline)) int batch_open(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                route_t *rt, uint64_t seq)
{
    int ret = inbox_claim(rt->target, 1, &rt->head_cache, &rt->batch_pos, &rt->batch_sleeper);

    if (ret == SEND_FULL) {
        return SEND_FULL_BATCH;
    }
    if (ret == 0) {
        batch_begin(ctx, from, rt, seq);
    }
    return ret;
}

/* Whether the open batch cell of @a rt has room for an entry of @a need bytes with sequence
 * number @a seq: not full, and the entry's 16-bit sequence delta holds it. */
static inline __attribute__((always_inline)) int batch_fits(const route_t *rt, uint64_t seq,
                                                            uint32_t need)
{
    return (rt->batch_bytes + need <= RINGK_BATCH_ROOM) &&
           (seq - rt->batch_seq <= RINGK_BATCH_MAX_DELTA);
}

/* Appends an entry (sequence number @a seq, @a need bytes) to the open batch cell of @a rt, a
 * route of @a from, which has room for it and a delta that holds it. The payload is copied last,
 * so nothing is live across a memcpy call. */
static inline __attribute__((always_inline)) void
batch_append(ringk_kernel_t *from, route_t *rt, uint64_t seq, ringk_msg_type_t type,
             const void *payload, size_t length, uint32_t need)
{
    ringk_batch_hdr_t *bh  = rt->batch_hdr;
    ringk_batch_entry_t *e = (ringk_batch_entry_t*)((uint8_t*)(bh + 1) + rt->batch_bytes);

    ringk_batch_entry_t entry = {
        .seq_delta = (uint16_t)(seq - rt->batch_seq), .type = (uint8_t)type,
        .length    = (uint8_t)length
    };

    memcpy(e, &entry, sizeof(entry)); /* one 4-byte store */
    rt->batch_bytes += need;
    __atomic_store_n(&from->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&from->msgs_out, from->msgs_out + 1, __ATOMIC_RELAXED);
    if (length == sizeof(uint64_t)) {
        memcpy(e + 1, payload, sizeof(uint64_t)); /* the common case, inlined */
    } else if (length > 0) {
        memcpy(e + 1, payload, length);
    }
}

/* Sends a small message of @a from (whose dispatch loop runs on this thread) to the local target
 * of its route @a rt: appended to the route's open batch cell, or to a new one. 0,
 * SEND_FULL_BATCH (no room for a new cell: nothing sent), or -EPIPE. */
static inline __attribute__((always_inline)) int
batch_send(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt, ringk_msg_type_t type,
           const void *payload, size_t length)
{
    uint32_t need   = RINGK_BATCH_ENTRY(length);
    uint64_t seq    = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);
    int ret;

    if (from->open_batches & rt->bit) {
        if (ringk_load_i(&rt->target->state) >= RINGK_KERNEL_TERMINATING) {
            /* what the cell holds was sent before the terminate: it is handled */
            batch_flush(from, rt->index);
            return -EPIPE;
        }
        if (!batch_fits(rt, seq, need)) {
            batch_flush(from, rt->index);
        }
    }
    if (!(from->open_batches & rt->bit)) {
        ret = batch_open(ctx, from, rt, seq);
        if (ret != 0) {
            return ret;
        }
    }
    batch_append(from, rt, seq, type, payload, length, need);
    return 0;
}

/* Writes message @a msg and its payload into the @a ncells cells of LL inbox @a to claimed at
 * @a pos, and publishes it (a device kernel's host ingress ring: core/ringk_ring.h). */
static __attribute__((noinline)) void
msg_write_ll(ringk_kernel_t *to, uint64_t pos, uint32_t ncells, const ringk_msg_t *msg,
             const void *payload, size_t length)
{
    /* sizeof(ringk_msg_t) is a multiple of 4: the payload starts on a word of its own */
    ringk_ring_ll_write(&to->inbox, pos, RINGK_RING_LL_HDR_WORDS, msg, sizeof(*msg));
    if (length > 0) {
        ringk_ring_ll_write(&to->inbox, pos, RINGK_RING_LL_HDR_WORDS + sizeof(*msg) / 4, payload,
                            (uint32_t)length);
    }
    ringk_ring_ll_publish(&to->inbox, pos, (uint32_t)(sizeof(*msg) + length), (uint16_t)ncells,
                          (uint8_t)msg->type, 0);
}

/* Writes one message into the @a ncells cells of @a to's inbox claimed at @a pos, publishes
 * it, and wakes @a to if @a sleeper says it slept; @a remote_hdr: the header of a message from
 * another process, or NULL. */
static inline __attribute__((always_inline)) void
msg_write(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_kernel_t *to, uint64_t pos,
          uint32_t ncells, int sleeper, ringk_msg_type_t type, uint32_t receiver,
          const void *payload, size_t length, const ringk_msg_t *remote_hdr)
{
    ringk_msg_t ll_msg;
    ringk_msg_t *msg = to->inbox_ll ? &ll_msg : ringk_ring_payload(&to->inbox, pos);

    msg->receiver  = receiver;
    msg->type      = type;
    msg->flags     = 0;
    msg->length    = (uint32_t)length;
    if (remote_hdr != NULL) {
        /* from another process: its sender, sequence and clock */
        msg->sender    = remote_hdr->sender;
        msg->seq       = remote_hdr->seq;
        msg->timestamp = remote_hdr->timestamp;
    } else {
        msg->sender    = ((uint32_t)ctx->job.rank << RINGK_RANK_SHIFT) | (from ? from->id : 0);
        msg->seq       = from ? ringk_kernel_next_seq(from)
                              : __atomic_fetch_add(&ctx->host_seq, 1, __ATOMIC_RELAXED);
        msg->timestamp = ((from && from->timestamps) || to->timestamps) ?
                         ringk_hlc_tick(&ctx->clock) : 0;
    }
    /* the latency histogram samples: a clock read on every message would cost more than the
     * rest of the send */
    msg->enq_ns    = ((msg->seq % RINGK_LAT_SAMPLE) == 0) ? ringk_now_ns() : 0;
    if (__builtin_expect(to->inbox_ll, 0)) {
        msg_write_ll(to, pos, ncells, msg, payload, length);
    } else {
        if (length > 0) {
            memcpy(msg + 1, payload, length);
        }
        ringk_ring_publish(&to->inbox, pos, sizeof(*msg) + length, ncells, (uint8_t)type, 0);
    }
    if (from != NULL) {
        /* only the sender's executor sends as it: a plain increment, read racily by stats */
        __atomic_store_n(&from->msgs_out, from->msgs_out + 1, __ATOMIC_RELAXED);
    }
    if (sleeper) {
        /* it sees a claimed cell, so it waits for the publish rather than sleeping again */
        ringk_wake_signal(to);
    }
}

/* Waits for @a ncells cells of @a to's inbox, found full (blocked_how() said so), as
 * @a timeout_ms says, then writes the message into them. */
static __attribute__((noinline)) int
deliver_wait(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_kernel_t *to, ringk_msg_type_t type,
             uint32_t receiver, const void *payload, size_t length, int timeout_ms,
             uint64_t *head_cache, const ringk_msg_t *remote_hdr)
{
    uint32_t ncells = RINGK_INBOX_CELLS(to, length);
    uint64_t pos    = 0;
    int ret, sleeper;

    ringk_flush_running(); /* never wait holding claimed cells their reader may need to pass */
    ret = ringk_inbox_wait(to, ncells, timeout_ms, head_cache, &pos);
    if ((ret != 0) || ((ret = inbox_claimed(to, ncells, pos, &sleeper)) != 0)) {
        return ret;
    }
    msg_write(ctx, from, to, pos, ncells, sleeper, type, receiver, payload, length, remote_hdr);
    return 0;
}

/* Waits for a cell of route @a rt's target inbox, found full (blocked_how() said so), as
 * @a timeout_ms says, opens a batch cell in it, and appends the message, as batch_send() would
 * have. */
static __attribute__((noinline)) int
batch_wait(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt, ringk_msg_type_t type,
           const void *payload, size_t length, int timeout_ms)
{
    uint64_t seq;
    int ret;

    ringk_flush_running(); /* never wait holding claimed cells their reader may need to pass */
    ret = ringk_inbox_wait(rt->target, 1, timeout_ms, &rt->head_cache, &rt->batch_pos);
    if ((ret != 0) ||
        ((ret = inbox_claimed(rt->target, 1, rt->batch_pos, &rt->batch_sleeper)) != 0)) {
        return ret;
    }
    seq = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);
    batch_begin(ctx, from, rt, seq);
    batch_append(from, rt, seq, type, payload, length, RINGK_BATCH_ENTRY(length));
    return 0;
}

/* A message for @a to that found its inbox full: waits, or says why not (blocked_how()). */
static __attribute__((noinline)) int
deliver_blocked(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_kernel_t *to,
                ringk_msg_type_t type, uint32_t receiver, const void *payload, size_t length,
                int timeout_ms, uint64_t *head_cache, const ringk_msg_t *remote_hdr)
{
    switch (blocked_how(timeout_ms)) {
    case BLOCKED_REFUSE:
        ringk_add_u64(&to->refused_full, 1);
        return -EAGAIN;
    case BLOCKED_DEFER:
        return RINGK_WOULD_WAIT;
    default:
        return deliver_wait(ctx, from, to, type, receiver, payload, length, timeout_ms,
                            head_cache, remote_hdr);
    }
}

int ringk_deliver(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_kernel_t *to,
                  ringk_msg_type_t type, uint32_t receiver, const void *payload, size_t length,
                  int timeout_ms, uint64_t *head_cache, const ringk_msg_t *remote_hdr)
{
    uint64_t local_head = 0;
    uint32_t ncells = RINGK_INBOX_CELLS(to, length);
    uint64_t pos = 0;
    int ret, sleeper;

    if (head_cache == NULL) {
        head_cache = &local_head;
    }
    ret = inbox_claim(to, ncells, head_cache, &pos, &sleeper);
    if (ret == SEND_FULL) {
        return deliver_blocked(ctx, from, to, type, receiver, payload, length, timeout_ms,
                               head_cache, remote_hdr);
    }
    if (ret == 0) {
        msg_write(ctx, from, to, pos, ncells, sleeper, type, receiver, payload, length,
                  remote_hdr);
    }
    return ret;
}

int ringk_deliver_hdr(ringk_ctx_t *ctx, ringk_kernel_t *to, const ringk_msg_t *hdr,
                      const void *payload, int timeout_ms)
{
    if (hdr->length > to->max_in) {
        return -EMSGSIZE;
    }
    return ringk_deliver(ctx, NULL, to, (ringk_msg_type_t)hdr->type, hdr->receiver, payload,
                         hdr->length, timeout_ms, NULL, hdr);
}

/* ---- one-way sends: ringk_send() and ringk_send_route() -------------------------------------
 *
 * Both entries check their arguments once and find the route (by name, by index, or one on the
 * stack for the host), then call send_on(), which sends on it: to a local kernel into its
 * inbox (batched with the sender's other small sends of the same dispatch-loop iteration, or
 * alone), to a kernel of another process as one active message (net/). Neither ever waits:
 * what could not go at once (no room, no credit, UCP busy) goes to send_blocked(), the one
 * place that decides whether the send waits (ringk_wait.c), is deferred (in a receive
 * callback), or fails. */

/* A send on @a rt whose length or sender the route does not take (length >= rt->ok_len): the
 * error, logged, as the first check that fails names it. */
static __attribute__((noinline, cold)) int
send_refused(ringk_ctx_t *ctx, const ringk_kernel_t *from, const route_t *rt, size_t length)
{
    if ((from != NULL) && (length > from->max_out)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "message of %zu bytes from '%s' exceeds its max_out %u",
                      length, from->name, from->max_out);
        return -EMSGSIZE;
    }
    if (!rt->allowed) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' does not subscribe to '%s'",
                      rt->target->name, from->name);
        return -EPERM;
    }
    ringk_log_msg(ctx, RINGK_LOG_ERROR, "message of %zu bytes to '%s' exceeds its max_in %u",
                  length, rt->name, (rt->target != NULL) ? rt->target->max_in : 0);
    return -EMSGSIZE;
}

/* The send on @a rt that could not go at once, for @a why (SEND_FULL, SEND_FULL_BATCH,
 * RINGK_REMOTE_NO_CREDIT, RINGK_REMOTE_BUSY, or RINGK_REMOTE_PENDING with @a req): waits as
 * @a timeout_ms says, is deferred, or fails. The one place that decides it. */
static __attribute__((noinline)) int
send_blocked(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt, ringk_msg_type_t type,
             const void *payload, size_t length, int timeout_ms, int why, void *req)
{
    blocked_t how = blocked_how(timeout_ms);

    if (why == RINGK_REMOTE_PENDING) {
        return ringk_wait_sent(ctx, rt->rank, req); /* it left; UCP reads the payload */
    }
    if ((why == RINGK_REMOTE_BUSY) && (how != BLOCKED_DEFER)) {
        /* the immediate send failed, a send that may take a request does not */
        how = BLOCKED_WAIT;
    }
    switch (how) {
    case BLOCKED_REFUSE:
        if (rt->kind == RINGK_ROUTE_LOCAL) {
            ringk_add_u64(&rt->target->refused_full, 1);
        }
        return -EAGAIN;
    case BLOCKED_DEFER:
        ringk_flush_running(); /* none is open while calls wait to be made */
        return (from != NULL) ?
               ringk_defer_call(ctx, RINGK_DEFER_SEND_ROUTE, from, (int)rt->index, NULL, type,
                                payload, length, timeout_ms) :
               ringk_defer_call(ctx, RINGK_DEFER_SEND, NULL, -1, rt->name, type, payload,
                                length, timeout_ms);
    default:
        ringk_flush_running(); /* never wait holding claimed cells their reader may need */
        if (rt->kind == RINGK_ROUTE_REMOTE) {
            return ringk_wait_credit(ctx, from, rt, type, payload, length, timeout_ms);
        }
        if (why == SEND_FULL_BATCH) {
            return batch_wait(ctx, from, rt, type, payload, length, timeout_ms);
        }
        return deliver_wait(ctx, from, rt->target, type, rt->target->id, payload, length,
                            timeout_ms, &rt->head_cache, NULL);
    }
}

/* Sends one message as @a from (NULL: the host) on route @a rt, with arguments checked: the
 * core of ringk_send() and ringk_send_route(). */
static __attribute__((noinline)) int
send_on(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt, ringk_msg_type_t type,
        const void *payload, size_t length, int timeout_ms)
{
    void *req = NULL;
    uint32_t ncells;
    uint64_t pos;
    int ret, sleeper, batch = 0;

    if ((from != NULL) &&
        __builtin_expect((rt->kind == RINGK_ROUTE_UNRESOLVED) ||
                         (rt->gen != __atomic_load_n(&ctx->kernels_gen, __ATOMIC_ACQUIRE)), 0)) {
        if (from->open_batches & rt->bit) {
            batch_flush(from, rt->index); /* into the inbox it was claimed in */
        }
        if ((ret = ringk_route_resolve(ctx, from, rt->index)) != 0) {
            return ret;
        }
    }
    if (length >= rt->ok_len) {
        return send_refused(ctx, from, rt, length);
    }
    if ((from != NULL) && (ringk_tls_running == from)) {
        __atomic_store_n(&from->last_rt, rt, __ATOMIC_RELAXED);
        /* the first send of a dispatch-loop iteration goes out at once, later ones batched */
        batch = (from->iter_sends++ > 0);
    }
    if (rt->kind == RINGK_ROUTE_REMOTE) {
        ret = ringk_remote_send_try(ctx, from, rt, type, payload, length, 1, &req);
    } else if (batch && (type != RINGK_MSG_TERMINATE) && (length < rt->batch_lim)) {
        /* small, to a local kernel, from the sender's own handler: batch_lim held the checks */
        ret = batch_send(ctx, from, rt, type, payload, length);
    } else {
        ncells = RINGK_INBOX_CELLS(rt->target, length);
        ret    = inbox_claim(rt->target, ncells, &rt->head_cache, &pos, &sleeper);
        if (ret == 0) {
            msg_write(ctx, from, rt->target, pos, ncells, sleeper, type, rt->target->id,
                      payload, length, NULL);
        }
    }
    return (ret <= 0) ? ret :
           send_blocked(ctx, from, rt, type, payload, length, timeout_ms, ret, req);
}

/* The arguments every send has, of public call @a fn: 0, or -EINVAL (logged). */
static int send_args_check(const char *fn, ringk_ctx_t *ctx, const ringk_kernel_t *from,
                           const void *payload, size_t length, ringk_msg_type_t type,
                           int timeout_ms)
{
    if (ctx == NULL) {
        return ringk_log_bad_arg((from != NULL) ? from->ctx : NULL, fn, "ctx is NULL");
    }
    if ((from != NULL) && (from->ctx != ctx)) {
        return ringk_log_bad_arg(ctx, fn, "kernel '%s' belongs to another context", from->name);
    }
    if ((unsigned)type > RINGK_MSG_TERMINATE) {
        return ringk_log_bad_arg(ctx, fn, "type %d is not data (0), control (1) or terminate "
                                 "(2)", (int)type);
    }
    if (ringk_log_check_payload(ctx, fn, payload, length) != 0) {
        return -EINVAL;
    }
    return ringk_log_check_timeout(ctx, fn, timeout_ms);
}

/* The route of a send that did not take an entry's fast path: by @a to_name (ringk_send) or
 * by number @a route (ringk_send_route, @a to_name NULL, checked), of @a from; the host's send
 * fills @a host_rt. NULL with *ret_p the error (logged). */
static route_t *send_route_of(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name,
                              int route, route_t *host_rt, int *ret_p)
{
    route_t *rt;
    int i;

    if (to_name == NULL) {
        return &from->routes[route];
    }
    if (from == NULL) {
        *ret_p = ringk_route_host(ctx, to_name, host_rt);
        return (*ret_p == 0) ? host_rt : NULL;
    }
    /* a kernel usually sends where it sent last: that route is tried first */
    rt = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED);
    if ((rt->index < from->publishes_to.count) &&
        ringk_route_name_eq(rt, from->publishes_to.names[rt->index], to_name)) {
        return rt;
    }
    if ((i = ringk_route_index(ctx, from, to_name)) < 0) {
        *ret_p = i;
        return NULL;
    }
    return &from->routes[i];
}

/* ringk_send() (@a by_name, to @a to_name) or ringk_send_route() (on @a route) but for their
 * fast paths: every check, the call queued behind the calls its handler deferred, the route. */
static __attribute__((noinline)) int
send_entry(ringk_ctx_t *ctx, ringk_kernel_t *from, int by_name, const char *to_name, int route,
           ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms)
{
    const char *fn = by_name ? "ringk_send" : "ringk_send_route";
    route_t host_rt, *rt;
    int ret, host;

    if ((ret = send_args_check(fn, ctx, from, payload, length, type, timeout_ms)) != 0) {
        return ret;
    }
    if (by_name && (to_name == NULL)) {
        return ringk_log_bad_arg(ctx, fn, "to is NULL");
    }
    if (!by_name && (from == NULL)) {
        return ringk_log_bad_arg(ctx, fn, "from is NULL (routes are a kernel's)");
    }
    if (!by_name && ((route < 0) || ((unsigned)route >= from->publishes_to.count))) {
        return ringk_log_bad_arg(ctx, fn, "kernel '%s': route %d does not exist (it has %u)",
                                 from->name, route, from->publishes_to.count);
    }
    if ((ringk_tls_inline != NULL) && (ringk_tls_inline->defer_head != NULL)) {
        /* in a receive callback, behind the calls its handler deferred: in order with them */
        return ringk_defer_behind(ctx, by_name ? RINGK_DEFER_SEND :
                                  RINGK_DEFER_SEND_ROUTE, from, route, to_name, type, payload,
                                  length, timeout_ms);
    }
    host = ringk_host_enter(ctx); /* a thread outside the executors: a destroy waits for it */
    rt   = send_route_of(ctx, from, to_name, route, &host_rt, &ret);
    if (rt != NULL) {
        ret = send_on(ctx, from, rt, type, payload, length, timeout_ms);
    }
    ringk_host_leave(ctx, host);
    return ret;
}

/* The fast path of ringk_send() and ringk_send_route(): appends to the open batch cell of route
 * @a rt of @a from, whose handler runs on this thread (a cell opens only at the handler's second
 * or later send of a dispatch-loop iteration, see send_route(), and is published when the
 * iteration ends). Returns 1 when it did; 0 when the send needs the full path (the cell is
 * full or not open, the message is too long or a terminate, the receiver is terminating),
 * having changed nothing. */
static inline __attribute__((always_inline)) int
batch_fast(ringk_kernel_t *from, route_t *rt, ringk_msg_type_t type, const void *payload,
           size_t length)
{
    uint32_t need;
    uint64_t seq;

    if (!(from->open_batches & rt->bit) || (length >= rt->batch_lim) ||
        ((unsigned)type >= RINGK_MSG_TERMINATE)) {
        return 0;
    }
    need = RINGK_BATCH_ENTRY(length);
    seq  = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);
    if (!batch_fits(rt, seq, need)
        || (ringk_load_i(&rt->target->state) >= RINGK_KERNEL_TERMINATING)) {
        return 0;
    }
    batch_append(from, rt, seq, type, payload, length, need);
    return 1;
}

/* The batched fast path (batch_fast()), else send_on() on the route the sender used last, else
 * send_entry(), which checks everything. The batched path makes no call (the others are tail
 * calls), so the function saves few registers: the local one-way throughput is bound by it. */
int ringk_send(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name,
               ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms)
{
    route_t *rt;

    if ((from != NULL) && (ringk_tls_running == from) && (ctx == from->ctx) &&
        (to_name != NULL) && ((payload != NULL) || (length == 0)) &&
        ((unsigned)type <= RINGK_MSG_TERMINATE) && (timeout_ms >= RINGK_WAIT_FOREVER)) {
        /* a route past publishes_to.count is named "" and never opens a cell */
        rt = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED);
        if (ringk_route_name_eq(rt, from->publishes_to.names[rt->index], to_name)) {
            /* no cell is open while calls of the handler wait to be made (ringk_defer_call) */
            if (batch_fast(from, rt, type, payload, length)) {
                return 0;
            }
            if ((from->defer_head == NULL) && (rt->index < from->publishes_to.count)) {
                return send_on(ctx, from, rt, type, payload, length, timeout_ms);
            }
        }
    }
    return send_entry(ctx, from, 1, to_name, -1, type, payload, length, timeout_ms);
}

/* As ringk_send(), by route number. */
int ringk_send_route(ringk_ctx_t *ctx, ringk_kernel_t *from, int route, ringk_msg_type_t type,
                     const void *payload, size_t length, int timeout_ms)
{
    if ((from != NULL) && (ringk_tls_running == from) && (ctx == from->ctx) &&
        ((unsigned)route < from->publishes_to.count) && ((payload != NULL) || (length == 0)) &&
        ((unsigned)type <= RINGK_MSG_TERMINATE) && (timeout_ms >= RINGK_WAIT_FOREVER)) {
        /* no cell is open while calls of the handler wait to be made (ringk_defer_call) */
        if (batch_fast(from, &from->routes[route], type, payload, length)) {
            return 0;
        }
        if (from->defer_head == NULL) {
            return send_on(ctx, from, &from->routes[route], type, payload, length, timeout_ms);
        }
    }
    return send_entry(ctx, from, 0, NULL, route, type, payload, length, timeout_ms);
}
