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

/* Claims @a ncells cells of @a to's inbox, waiting for room as @a timeout_ms says; *sleeper_p:
 * the executor of @a to slept, so the publish must wake it.
 * @return 0, -EAGAIN, -ETIMEDOUT, or -EPIPE (terminating). */
static inline __attribute__((always_inline)) int
ringk_inbox_claim(ringk_kernel_t *to, uint32_t ncells, int timeout_ms, uint64_t *head_cache,
                  uint64_t *pos_p, int *sleeper_p)
{
    int state, ret;

    /* Fast refusal; the check that counts comes after the claim (T1). */
    state = ringk_load_i(&to->state);
    if ((state == RINGK_KERNEL_TERMINATING) || (state == RINGK_KERNEL_TERMINATED)) {
        return -EPIPE;
    }
    if (!ringk_ring_mp_claim_cached(&to->inbox, ncells, head_cache, pos_p)) {
        ret = ringk_inbox_wait(to, ncells, timeout_ms, head_cache, pos_p);
        if (ret != 0) {
            return ret;
        }
    }
    /* W2 (see ringk_sleeping_seen): right after the claim, so that no fence is needed */
    *sleeper_p = ringk_sleeping_seen(to);
    /* T1: the claim (a compare-and-swap on the tail) comes before this read of the state;
     * pairs with T2 in kernel_try_finish(), which reads the state, then the tail. A sender that
     * finds the kernel terminating here gives its cells up (the consumer passes over them)
     * and is told. */
    state = __atomic_load_n(&to->state, __ATOMIC_SEQ_CST);
    if ((state == RINGK_KERNEL_TERMINATING) || (state == RINGK_KERNEL_TERMINATED)) {
        ringk_ring_cancel(&to->inbox, *pos_p, ncells);
        return -EPIPE;
    }
    return 0;
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

/* Claims a new batch cell on route @a i of @a from and writes its header; the first entry will
 * carry sequence number @a seq. */
static __attribute__((noinline)) int batch_open(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                unsigned i, uint64_t seq, int timeout_ms)
{
    route_t *rt = &from->routes[i];
    ringk_batch_hdr_t *bh;
    int ret;

    ret = ringk_inbox_claim(rt->target, 1, timeout_ms, &rt->head_cache, &rt->batch_pos,
                            &rt->batch_sleeper);
    if (ret != 0) {
        return ret;
    }
    bh           = ringk_ring_payload(&rt->target->inbox, rt->batch_pos);
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
    from->open_batches |= 1u << i;
    return 0;
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
 * of its route @a i: appended to the route's open batch cell, or to a new one. */
static inline __attribute__((always_inline)) int
batch_send(ringk_ctx_t *ctx, ringk_kernel_t *from, unsigned i, ringk_msg_type_t type,
           const void *payload, size_t length, int timeout_ms)
{
    route_t *rt     = &from->routes[i];
    uint32_t need   = RINGK_BATCH_ENTRY(length);
    uint64_t seq    = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);
    int ret;

    if (from->open_batches & (1u << i)) {
        if (ringk_load_i(&rt->target->state) >= RINGK_KERNEL_TERMINATING) {
            /* what the cell holds was sent before the terminate: it is handled */
            batch_flush(from, i);
            return -EPIPE;
        }
        if (!batch_fits(rt, seq, need)) {
            batch_flush(from, i);
        }
    }
    if (!(from->open_batches & (1u << i))) {
        ret = batch_open(ctx, from, i, seq, timeout_ms);
        if (ret != 0) {
            return ret;
        }
    }
    batch_append(from, rt, seq, type, payload, length, need);
    return 0;
}

/* Puts one message into @a to's inbox, waiting for room as @a timeout_ms says. */
int ringk_deliver(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_kernel_t *to,
                   ringk_msg_type_t type, uint32_t receiver, const void *payload, size_t length,
                   int timeout_ms, uint64_t *head_cache, const ringk_msg_t *remote_hdr)
{
    uint64_t local_head = 0;
    uint32_t ncells = RINGK_MSG_CELLS(length);
    uint64_t pos = 0;
    ringk_msg_t *msg;
    int ret, sleeper;

    if (head_cache == NULL) {
        head_cache = &local_head;
    }
    ret = ringk_inbox_claim(to, ncells, timeout_ms, head_cache, &pos, &sleeper);
    if (ret != 0) {
        return ret;
    }
    msg = ringk_ring_payload(&to->inbox, pos);
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
    if (length > 0) {
        memcpy(msg + 1, payload, length);
    }
    ringk_ring_publish(&to->inbox, pos, sizeof(*msg) + length, ncells, (uint8_t)type, 0);
    if (from != NULL) {
        /* only the sender's executor sends as it: a plain increment, read racily by stats */
        __atomic_store_n(&from->msgs_out, from->msgs_out + 1, __ATOMIC_RELAXED);
    }
    if (sleeper) {
        /* it sees a claimed cell, so it waits for the publish rather than sleeping again */
        ringk_wake_signal(to);
    }
    return 0;
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

/* ringk_send() of a kernel (not the host), once its arguments were checked. */
static __attribute__((noinline)) int send_from(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                               unsigned i, ringk_msg_type_t type,
                                               const void *payload, size_t length, int timeout_ms)
{
    route_t *route = &from->routes[i];
    ringk_kernel_t *to;

    if (length > from->max_out) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "message of %zu bytes from '%s' exceeds its max_out %u",
                      length, from->name, from->max_out);
        return -EMSGSIZE;
    }
    ringk_flush_running(); /* a remote send may wait for a credit */
    to = route->target;
    if (to == NULL) {
        return ringk_remote_send(ctx, from, route->rank, route->remote_id, type, payload, length,
                                 timeout_ms);
    }
    if (!route->allowed) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' does not subscribe to '%s'", to->name,
                      from->name);
        return -EPERM;
    }
    if (length > to->max_in) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "message of %zu bytes to '%s' exceeds its max_in %u",
                      length, to->name, to->max_in);
        return -EMSGSIZE;
    }
    return ringk_deliver(ctx, from, to, type, to->id, payload, length, timeout_ms,
                         &route->head_cache, NULL);
}

/* ringk_send() of the host (no sending kernel). */
static __attribute__((noinline)) int send_from_host(ringk_ctx_t *ctx, const char *to_name,
                                                    ringk_msg_type_t type, const void *payload,
                                                    size_t length, int timeout_ms)
{
    ringk_kernel_t *to = ringk_kernel_lookup(ctx, to_name);
    uint32_t id;
    int rank;

    if (to == NULL) {
        if ((ringk_remote_of(ctx) != NULL) &&
            (ringk_remote_lookup(ctx, to_name, &rank, &id) == 0)) {
            return ringk_remote_send(ctx, NULL, rank, id, type, payload, length, timeout_ms);
        }
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: no kernel named '%s'", to_name);
        return -ENOENT;
    }
    if (length > to->max_in) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "message of %zu bytes to '%s' exceeds its max_in %u",
                      length, to->name, to->max_in);
        return -EMSGSIZE;
    }
    return ringk_deliver(ctx, NULL, to, type, to->id, payload, length, timeout_ms, NULL, NULL);
}

/* ringk_send() on route @a i of @a from once its arguments were checked: resolves the route if
 * it has not been, then batches the send or sends it alone. */
static int send_route(ringk_ctx_t *ctx, ringk_kernel_t *from, unsigned i, ringk_msg_type_t type,
                      const void *payload, size_t length, int timeout_ms)
{
    int ret;

    if (((from->routes[i].target == NULL) && (from->routes[i].rank < 0)) ||
        (from->routes[i].gen != __atomic_load_n(&ctx->kernels_gen, __ATOMIC_ACQUIRE))) {
        if (from->open_batches & (1u << i)) {
            batch_flush(from, i); /* into the inbox it was claimed in */
        }
        ret = ringk_route_resolve(ctx, from, i);
        if (ret != 0) {
            return ret;
        }
    }
    __atomic_store_n(&from->last_rt, &from->routes[i], __ATOMIC_RELAXED);
    if ((ringk_tls_running == from) && (from->iter_sends++ > 0) && (type != RINGK_MSG_TERMINATE) &&
        (length < from->routes[i].batch_lim)) {
        /* sent from the sender's own handler, small, to a local kernel: batched with its other
         * sends (batch_send); batch_lim holds the route's checks (max_out, max_in, allowed) */
        return batch_send(ctx, from, i, type, payload, length, timeout_ms);
    }
    return send_from(ctx, from, i, type, payload, length, timeout_ms);
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

static int send_named(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name,
                      ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms);

/* ringk_send() but for its fast path. */
static __attribute__((noinline)) int send_slow(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                               const char *to_name, ringk_msg_type_t type,
                                               const void *payload, size_t length,
                                               int timeout_ms)
{
    int ret, host;

    if ((ret = send_args_check("ringk_send", ctx, from, payload, length, type,
                               timeout_ms)) != 0) {
        return ret;
    }
    if (to_name == NULL) {
        return ringk_log_bad_arg(ctx, "ringk_send", "to is NULL");
    }
    if (ringk_tls_inline != NULL) {
        if (ringk_tls_inline->defer_head != NULL) {
            return ringk_defer_behind(ctx, RINGK_DEFER_SEND, from, -1, to_name, type, payload,
                                      length, timeout_ms);
        }
        ret = send_named(ctx, from, to_name, type, payload, length, timeout_ms);
        return (ret != RINGK_WOULD_WAIT) ? ret :
               ringk_defer_call(ctx, RINGK_DEFER_SEND, from, -1, to_name, type, payload, length,
                                timeout_ms);
    }
    host = ringk_host_enter(ctx); /* a thread outside the executors: a destroy waits for it */
    ret  = send_named(ctx, from, to_name, type, payload, length, timeout_ms);
    ringk_host_leave(ctx, host);
    return ret;
}

/* ringk_send() once its arguments were checked. */
static int send_named(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name,
                      ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms)
{
    unsigned i;
    int ret;

    if (from == NULL) {
        return send_from_host(ctx, to_name, type, payload, length, timeout_ms);
    }
    /* a kernel usually sends where it sent last: that route is tried first */
    i = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED)->index;
    if ((i >= from->publishes_to.count) ||
        !ringk_route_name_eq(&from->routes[i], from->publishes_to.names[i], to_name)) {
        ret = ringk_route_index(ctx, from, to_name);
        if (ret < 0) {
            return ret;
        }
        i = (unsigned)ret;
    }
    return send_route(ctx, from, i, type, payload, length, timeout_ms);
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

/* The fast path of a send from a kernel's own handler on route @a i, resolved to a kernel of
 * another process: what send_route() and send_from() would check and do, without their calls
 * (their calls are a large part of a cross-process round trip). Returns 1 with the
 * result in *ret_p, or 0 when the send needs the full path, having changed nothing. */
static inline __attribute__((always_inline)) int
remote_fast(ringk_ctx_t *ctx, ringk_kernel_t *from, unsigned i, ringk_msg_type_t type,
            const void *payload, size_t length, int timeout_ms, int *ret_p)
{
    const route_t *rt = &from->routes[i];

    if ((rt->target != NULL) || (rt->rank < 0) || ((unsigned)type > RINGK_MSG_TERMINATE) ||
        (length > from->max_out)) {
        return 0;
    }
    __atomic_store_n(&from->last_rt, &from->routes[i], __ATOMIC_RELAXED);
    from->iter_sends++;
    if (from->open_batches != 0) {
        ringk_batch_flush_all(from); /* a remote send may wait for a credit */
    }
    *ret_p = ringk_remote_send(ctx, from, rt->rank, rt->remote_id, type, payload, length,
                               timeout_ms);
    return 1;
}

/* ringk_send() whose batched fast path did not take the message, though the sender's own
 * handler sends on the route it used last (from->last_rt, which names @a to_name): the short
 * path to another process, a new batch cell, the full remote path, or send_slow(). */
static __attribute__((noinline)) int send_last_route(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                     const char *to_name, ringk_msg_type_t type,
                                                     const void *payload, size_t length,
                                                     int timeout_ms)
{
    unsigned i = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED)->index;
    int ret;

    /* to another process: its short path first, which sends now or changes nothing */
    if ((from->routes[i].remote_ep != NULL) &&
        ((ret = ringk_remote_send_last(from, type, payload, length)) != RINGK_REMOTE_FULL_PATH)) {
        return ret;
    }
    if (from->defer_head != NULL) {
        return send_slow(ctx, from, to_name, type, payload, length, timeout_ms);
    }
    if ((from->routes[i].target != NULL) && (from->iter_sends != 0) &&
        (from->routes[i].gen == __atomic_load_n(&ctx->kernels_gen, __ATOMIC_ACQUIRE)) &&
        ((unsigned)type < RINGK_MSG_TERMINATE) && (length < from->routes[i].batch_lim) &&
        (ringk_tls_inline == NULL)) {
        /* its batch cell is full (or the receiver terminating): what send_route() would do */
        from->iter_sends++;
        return batch_send(ctx, from, i, type, payload, length, timeout_ms);
    }
    if (remote_fast(ctx, from, i, type, payload, length, timeout_ms, &ret)) {
        return (ret != RINGK_WOULD_WAIT) ? ret :
               ringk_defer_call(ctx, RINGK_DEFER_SEND, from, -1, to_name, type, payload, length,
                                timeout_ms);
    }
    return send_slow(ctx, from, to_name, type, payload, length, timeout_ms);
}

/* The batched fast path (batch_fast()), else send_last_route() (with the short path to another
 * process, ringk_remote_send_last(), first) or send_slow(), which checks everything again. The
 * batched path makes no call (the others are tail calls), so the function saves few registers
 * (two with GCC 12 at -O2): the local one-way throughput is bound by it. */
int ringk_send(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name,
               ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms)
{
    route_t *rt;

    if ((from != NULL) && (ringk_tls_running == from) && (ctx == from->ctx) &&
        (to_name != NULL) && ((payload != NULL) || (length == 0)) &&
        ((unsigned)type <= RINGK_MSG_TERMINATE) && (timeout_ms >= RINGK_WAIT_FOREVER)) {
        /* a route past publishes_to.count is named "" and never opens a cell: the checks of
         * send_last_route() and send_slow() refuse it */
        rt = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED);
        if (ringk_route_name_eq(rt, from->publishes_to.names[rt->index], to_name)) {
            /* no cell is open while calls of the handler wait to be made (ringk_defer_call) */
            if (batch_fast(from, rt, type, payload, length)) {
                return 0;
            }
            return send_last_route(ctx, from, to_name, type, payload, length, timeout_ms);
        }
    }
    return send_slow(ctx, from, to_name, type, payload, length, timeout_ms);
}

/* ringk_send_route() but for its fast path. */
static __attribute__((noinline)) int send_route_slow(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                     int route, ringk_msg_type_t type,
                                                     const void *payload, size_t length,
                                                     int timeout_ms)
{
    int ret, host;

    if ((ret = send_args_check("ringk_send_route", ctx, from, payload, length, type,
                               timeout_ms)) != 0) {
        return ret;
    }
    if (from == NULL) {
        return ringk_log_bad_arg(ctx, "ringk_send_route", "from is NULL (routes are a "
                                 "kernel's)");
    }
    if ((route < 0) || ((unsigned)route >= from->publishes_to.count)) {
        return ringk_log_bad_arg(ctx, "ringk_send_route", "kernel '%s': route %d does not "
                                 "exist (it has %u)", from->name, route,
                                 from->publishes_to.count);
    }
    if ((ringk_tls_inline != NULL) && (ringk_tls_inline->defer_head != NULL)) {
        return ringk_defer_behind(ctx, RINGK_DEFER_SEND_ROUTE, from, route, NULL, type, payload,
                                  length, timeout_ms);
    }
    host = ringk_host_enter(ctx);
    ret  = send_route(ctx, from, (unsigned)route, type, payload, length, timeout_ms);
    ringk_host_leave(ctx, host);
    return (ret != RINGK_WOULD_WAIT) ? ret :
           ringk_defer_call(ctx, RINGK_DEFER_SEND_ROUTE, from, route, NULL, type, payload, length,
                            timeout_ms);
}

/* ringk_send_route() from the sender's own handler whose batched path did not take the
 * message: the short path to another process, the full remote path, or send_route_slow(). */
static __attribute__((noinline)) int send_route_other(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                      int route, ringk_msg_type_t type,
                                                      const void *payload, size_t length,
                                                      int timeout_ms)
{
    int ret;

    /* to another process: its short path first, which sends now or changes nothing */
    if (from->routes[route].remote_ep != NULL) {
        __atomic_store_n(&from->last_rt, &from->routes[route], __ATOMIC_RELAXED);
        ret = ringk_remote_send_last(from, type, payload, length);
        if (ret != RINGK_REMOTE_FULL_PATH) {
            return ret;
        }
    }
    if ((from->defer_head == NULL) &&
        remote_fast(ctx, from, (unsigned)route, type, payload, length, timeout_ms, &ret)) {
        return (ret != RINGK_WOULD_WAIT) ? ret :
               ringk_defer_call(ctx, RINGK_DEFER_SEND_ROUTE, from, route, NULL, type, payload,
                                length, timeout_ms);
    }
    return send_route_slow(ctx, from, route, type, payload, length, timeout_ms);
}

/* As ringk_send(): the batched path makes no call, the others are tail calls. */
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
        return send_route_other(ctx, from, route, type, payload, length, timeout_ms);
    }
    return send_route_slow(ctx, from, route, type, payload, length, timeout_ms);
}
