/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer, sending: a K2K message or a publish to another process as one UCP
 * active message. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>


/* ---- credits ------------------------------------------------------------------------------- */

/* A control message on its way: the copy UCP reads until the send completes, and what a
 * failure needs to know. */
typedef struct {
    ringk_remote_t *r;
    int             rank;
    unsigned        id;
    size_t          len;
    uint64_t        data[]; /* the message */
} am_async_t;

/* Whether a failed control message to live process @a rank is logged now: the first, then one
 * each RINGK_CTL_ERR_EVERY_MS (a refusal that lasts would otherwise log on every progress
 * pass), with how many were not; *@a since_p: those not logged since the last line. */
static int am_failure_logged(ringk_remote_t *r, int rank, uint32_t *since_p)
{
    uint64_t now  = net_now_ms();
    uint64_t next = __atomic_load_n(&r->ctl_err_next[rank], __ATOMIC_ACQUIRE);

    if ((now < next) ||
        !__atomic_compare_exchange_n(&r->ctl_err_next[rank], &next,
                                     now + RINGK_CTL_ERR_EVERY_MS, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&r->ctl_err_quiet[rank], 1, __ATOMIC_RELAXED);
        return 0;
    }
    *since_p = __atomic_exchange_n(&r->ctl_err_quiet[rank], 0, __ATOMIC_ACQ_REL);
    return 1;
}

/* A control message that UCP refused or failed: logged (quietly once the peer is gone or the
 * context stops; else at most once a RINGK_CTL_ERR_EVERY_MS per process); returned credits are
 * owed again, so that net_credits_return() sends them later: a sender that never got them back
 * would wait forever. */
static void am_async_failed(ringk_remote_t *r, int rank, unsigned id, const void *hdr,
                            size_t len, ucs_status_t status)
{
    credit_msg_t m;
    uint32_t idx, since = 0;
    int quiet = __atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE) ||
                __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);

    if (quiet) {
        ringk_log_msg(r->ctx, RINGK_LOG_DEBUG, "control message %u to process %d not sent: %s",
                      id, rank, ucs_status_string(status));
    } else if (am_failure_logged(r, rank, &since)) {
        ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "control message %u to process %d not sent: "
                      "%s%s (%u more failed since the last report)", id, rank,
                      ucs_status_string(status),
                      (id == RINGK_AM_CREDIT) ? " (its credits are sent again)" : "", since);
    }
    if ((id != RINGK_AM_CREDIT) || quiet || (len != sizeof(m))) {
        return;
    }
    memcpy(&m, hdr, sizeof(m));
    idx = (uint32_t)rank * RINGK_SLOTS + m.id;
    __atomic_add_fetch(&r->owed[idx], m.count, __ATOMIC_ACQ_REL);
    net_owed_queue(r, idx);
}

static void am_async_done(void *request, ucs_status_t status, void *user_data)
{
    am_async_t *a = user_data;

    if (status != UCS_OK) {
        am_async_failed(a->r, a->rank, a->id, a->data, a->len, status);
    }
    free(a);
    ucp_request_free(request);
}

/* Sends a small control message without waiting for it to leave, from any thread including the
 * progress thread (which must not spin on its own worker); not from inside an AM callback.
 * Returns UCS_OK when it left or is on its way, else the error (see am_async_failed()). */
ucs_status_t net_am_send_async(ringk_remote_t *r, int rank, unsigned id, const void *hdr,
                               size_t len)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags        = UCP_AM_SEND_FLAG_EAGER,
        .cb.send      = am_async_done
    };
    am_async_t *a = malloc(sizeof(*a) + len);
    ucs_status_ptr_t req;

    if (a == NULL) {
        am_async_failed(r, rank, id, hdr, len, UCS_ERR_NO_MEMORY);
        return UCS_ERR_NO_MEMORY;
    }
    a->r    = r;
    a->rank = rank;
    a->id   = id;
    a->len  = len;
    memcpy(a->data, hdr, len);
    param.user_data = a;
    req = ucp_am_send_nbx(r->eps[rank], id, a->data, len, NULL, 0, &param);
    if (UCS_PTR_IS_PTR(req)) {
        return UCS_OK;
    }
    free(a);
    if (UCS_PTR_IS_ERR(req)) {
        am_async_failed(r, rank, id, hdr, len, UCS_PTR_STATUS(req));
    }
    return UCS_PTR_STATUS(req);
}

/* Eager active messages: constant parameters, not built on the stack for every send. */
static const ucp_request_param_t am_eager_param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                                   .flags = UCP_AM_SEND_FLAG_EAGER};
/* A send that leaves at once or not at all (UCS_ERR_NO_RESOURCE), never a request that only
 * progressing the worker completes (a handler run in a receive callback cannot wait for one). */
static const ucp_request_param_t am_now_param = {
    .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
    .flags        = UCP_AM_SEND_FLAG_EAGER};

/* Warns, once a send to process @a rank (active message @a id) has waited wait_warn_ms to leave
 * and again each time as long again has passed, that UCP has not sent it; @a w holds the first
 * look and the next warning, in ms (zeros before the first). */
static void request_warn(ringk_ctx_t *ctx, int rank, unsigned id, uint64_t w[2])
{
    const uint64_t every = (uint64_t)ctx->wait_warn_ms;
    uint64_t now;

    if (every == 0) {
        return;
    }
    now = net_now_ms();
    if (w[0] == 0) {
        w[0] = now;
        w[1] = now + every;
    } else if (now >= w[1]) {
        w[1] = now + every;
        ringk_log_msg(ctx, RINGK_LOG_WARN, "a message to process %d (active message %u) has "
                      "waited %.1f s to leave: UCP has not sent it (does the process take "
                      "messages in?)", rank, id, (double)(now - w[0]) / 1e3);
    }
}

/* Waits for a send (active message @a id to @a rank) that did not complete at once; the worker
 * is multi-threaded and whichever thread progresses it completes the request. UCP completes it
 * or fails it (a lost process fails it: UCP_ERR_HANDLING_MODE_PEER), so the wait has no bound
 * of its own (request_warn() says when it lasts). */
static __attribute__((noinline)) ucs_status_t am_request_wait(ringk_remote_t *r, int rank,
                                                               unsigned id, ucs_status_ptr_t req)
{
    uint64_t w[2] = {0, 0};
    ucs_status_t status;

    /* a kernel thread that polled may be the one waiting: the progress thread must not nap */
    ringk_remote_unpoll(r->ctx);
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        request_warn(r->ctx, rank, id, w);
        sched_yield();
    }
    ucp_request_free(req);
    return status;
}

/* Sends one active message (header and payload, eager) to @a rank and waits for it to leave. */
static ucs_status_t am_send_wait(ringk_remote_t *r, int rank, unsigned id, const void *hdr,
                                 size_t hdr_len, const void *payload, size_t length)
{
    ucs_status_ptr_t req;

    if (__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
        return UCS_ERR_CONNECTION_RESET;
    }
    req = ucp_am_send_nbx(r->eps[rank], id, hdr, hdr_len, payload, length, &am_eager_param);
    return UCS_PTR_IS_PTR(req) ? am_request_wait(r, rank, id, req) : UCS_PTR_STATUS(req);
}

int net_control_send(ringk_remote_t *r, int rank, unsigned id, const void *hdr, size_t len)
{
    return (am_send_wait(r, rank, id, hdr, len, NULL, 0) == UCS_OK) ? 0 : -EPIPE;
}

/* Fills the header of a message this process sends to another. */
static void remote_msg_init(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_msg_t *msg,
                            ringk_msg_type_t type, uint32_t receiver, size_t length)
{
    memset(msg, 0, sizeof(*msg));
    msg->sender    = ringk_sender_of(ctx, from);
    msg->receiver  = receiver;
    msg->type      = type;
    msg->length    = (uint32_t)length;
    msg->seq       = ringk_sender_next_seq(ctx, from);
    msg->timestamp = ringk_sender_stamp(ctx, from);
}

void ringk_remote_route_init(ringk_ctx_t *ctx, const ringk_kernel_t *from, route_t *rt)
{
    ringk_remote_t *r = ctx->remote;

    rt->remote_credit = &r->credits[(uint32_t)rt->rank * RINGK_SLOTS + rt->remote_id];
    rt->remote_dead   = &r->dead[rt->rank];
    rt->remote_sender = ringk_sender_of(ctx, from);
    rt->remote_ep     = r->eps[rt->rank];
}

_Static_assert(sizeof(wire_msg_t) <= sizeof(((route_t*)NULL)->remote_wire),
               "route_t.remote_wire holds a wire header");

int ringk_remote_send_try(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt,
                          ringk_msg_type_t type, const void *payload, size_t length, int now,
                          void **req_p)
{
    uint32_t *c   = rt->remote_credit;
    uint32_t cur  = __atomic_load_n(c, __ATOMIC_RELAXED);
    size_t hlen   = RINGK_WIRE_MSG_SHORT;
    wire_msg_t *w = (wire_msg_t*)rt->remote_wire; /* read by UCP until the send completes */
    ucs_status_ptr_t req;

    if (__atomic_load_n(rt->remote_dead, __ATOMIC_ACQUIRE)) {
        return -EPIPE;
    }
    /* backpressure: the receiving kernel's inbox and this process's share of its backlog are
     * full until it returns credits */
    do {
        if (cur == 0) {
            return RINGK_REMOTE_NO_CREDIT;
        }
    } while (!__atomic_compare_exchange_n(c, &cur, cur - 1, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    w->sender = rt->remote_sender;
    w->dst    = (uint16_t)rt->remote_id;
    w->type   = (uint8_t)type;
    w->flags  = 0;
    /* a kernel's number is taken once the message left (one thread at a time sends as a
     * kernel); the host's, which any thread sends as, now: a host send not sent leaves a gap */
    w->seq = (from != NULL) ? __atomic_load_n(&from->seq, __ATOMIC_RELAXED)
                           : __atomic_fetch_add(&ctx->host_seq, 1, __ATOMIC_RELAXED);
    if ((from != NULL) && from->timestamps) {
        w->timestamp = ringk_sender_stamp(ctx, from);
        w->flags     = RINGK_WIRE_TIMESTAMP;
        hlen         = sizeof(*w);
    }
    req = ucp_am_send_nbx(rt->remote_ep, RINGK_AM_MSG, w, hlen, payload, length,
                          now ? &am_now_param : &am_eager_param);
    if (ucs_likely(req == NULL)) {
        if (from != NULL) {
            __atomic_store_n(&from->seq, w->seq + 1, __ATOMIC_RELAXED);
            ringk_kernel_sent(from, 1);
        }
        return 0;
    }
    if (UCS_PTR_IS_PTR(req)) {
        /* on its way, reading the payload until UCP completes it */
        if (from != NULL) {
            __atomic_store_n(&from->seq, w->seq + 1, __ATOMIC_RELAXED);
            ringk_kernel_sent(from, 1);
        }
        *req_p = req;
        return RINGK_REMOTE_PENDING;
    }
    __atomic_add_fetch(c, 1, __ATOMIC_RELEASE); /* the credit back */
    if (req == UCS_STATUS_PTR(UCS_ERR_NO_RESOURCE)) {
        return RINGK_REMOTE_BUSY; /* as if never tried */
    }
    ringk_log_msg(ctx, RINGK_LOG_ERROR, "send to process %d failed: %s", rt->rank,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    return -EPIPE;
}

int ringk_remote_request_test(ringk_ctx_t *ctx, int rank, void *req, uint64_t warn[2])
{
    ucs_status_t status = ucp_request_check_status(req);

    if (status == UCS_INPROGRESS) {
        request_warn(ctx, rank, RINGK_AM_MSG, warn);
        return RINGK_REMOTE_PENDING;
    }
    ucp_request_free(req);
    if (status != UCS_OK) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "send to process %d failed: %s", rank,
                      ucs_status_string(status));
        return -EPIPE;
    }
    return 0;
}

int ringk_remote_topic_declared(ringk_ctx_t *ctx, const char *name)
{
    const ringk_remote_t *r = ctx->remote;
    size_t i;

    for (i = 0; i < (size_t)r->size * RINGK_MAX_TOPICS; i++) {
        if (r->topics[i].used && !strncmp(r->topics[i].name, name, RINGK_NAME_MAX)) {
            return 1;
        }
    }
    return 0;
}

int ringk_remote_publish(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *topic,
                         const void *payload, size_t length, int timeout_ms, unsigned *reached_p)
{
    ringk_remote_t *r = ctx->remote;
    unsigned reached = 0, nsubs;
    topic_hdr_t hdr;
    int rank, i, ret = 0;

    memset(&hdr, 0, sizeof(hdr));
    remote_msg_init(ctx, from, &hdr.msg, RINGK_MSG_DATA, RINGK_MSG_BROADCAST, length);
    snprintf(hdr.topic, sizeof(hdr.topic), "%s", topic);
    hdr.src_rank = (uint32_t)ctx->job.rank;
    /* one active message per process with subscribers, however many it has */
    for (rank = 0; rank < ctx->job.size; rank++) {
        if (rank == ctx->job.rank) {
            continue;
        }
        nsubs = 0;
        for (i = 0; i < RINGK_MAX_TOPICS; i++) {
            const topic_entry_t *t = &r->topics[(size_t)rank * RINGK_MAX_TOPICS + i];
            if (t->used && !strncmp(t->name, topic, RINGK_NAME_MAX)) {
                nsubs = t->nsubs;
            }
        }
        if (nsubs == 0) {
            continue;
        }
        /* backpressure: RINGK_TOPIC_WINDOW publishes on their way to that process */
        ret = net_credit_wait(ctx, rank, RINGK_TOPIC_SLOT, timeout_ms);
        if (ret != 0) {
            break;
        }
        if (am_send_wait(r, rank, RINGK_AM_TOPIC, &hdr, sizeof(hdr), payload, length) ==
            UCS_OK) {
            reached += nsubs;
        } else {
            ret = -EPIPE;
        }
    }
    if ((from != NULL) && (reached > 0)) {
        ringk_kernel_sent(from, reached);
    }
    *reached_p = reached;
    return ret;
}

int ringk_remote_dev_lookup(ringk_ctx_t *ctx, const char *name, int *rank_p,
                            ringk_dev_export_t *e_p)
{
    ringk_remote_t *r = ctx->remote;
    uint32_t id;
    int i;

    memset(e_p, 0, sizeof(*e_p));
    if (ringk_remote_lookup(ctx, name, rank_p, &id) != 0) {
        return -ENOENT;
    }
    for (i = 0; i < RINGK_DIR_ENTRIES; i++) {
        const dir_entry_t *e = &r->dir[(size_t)*rank_p * RINGK_DIR_ENTRIES + i];

        if (e->used && (e->id == id)) {
            *e_p = e->dev;
            break;
        }
    }
    return 0;
}

uint32_t ringk_remote_rank_pid(const ringk_ctx_t *ctx, int rank)
{
    const ringk_remote_t *r = ctx->remote;
    int i;

    for (i = 0; (rank >= 0) && (rank < r->size) && (i < RINGK_DIR_ENTRIES); i++) {
        if (r->dir[(size_t)rank * RINGK_DIR_ENTRIES + i].used) {
            return r->dir[(size_t)rank * RINGK_DIR_ENTRIES + i].pid;
        }
    }
    return 0;
}

int ringk_remote_gone(const ringk_ctx_t *ctx, int rank)
{
    const ringk_remote_t *r = ctx->remote;

    return (rank >= 0) && (rank < r->size) && __atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE);
}

int ringk_remote_lost_here(const ringk_ctx_t *ctx, int rank)
{
    const ringk_remote_t *r = ctx->remote;

    return ringk_remote_gone(ctx, rank) && r->here[rank] &&
           !__atomic_load_n(&r->left[rank], __ATOMIC_ACQUIRE);
}

int ringk_remote_lookup(ringk_ctx_t *ctx, const char *name, int *rank_p, uint32_t *id_p)
{
    ringk_remote_t *r = ctx->remote;
    int rank, i;

    for (rank = 0; rank < ctx->job.size; rank++) {
        if (rank == ctx->job.rank) {
            continue;
        }
        for (i = 0; i < RINGK_DIR_ENTRIES; i++) {
            const dir_entry_t *e = &r->dir[(size_t)rank * RINGK_DIR_ENTRIES + i];
            if (e->used && !strncmp(e->name, name, RINGK_NAME_MAX)) {
                *rank_p = rank;
                *id_p   = e->id;
                return 0;
            }
        }
    }
    return -ENOENT;
}
