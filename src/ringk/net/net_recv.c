/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer, receiving: K2K messages, publishes and barrier messages from other
 * processes, the ordered backlog of messages whose inbox is full, and peer events (a process
 * lost or gone). */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>


/* ---- peer events ----------------------------------------------------------------------------- */

/* Records that process @a rank was lost or left; told to kernels by net_events_deliver(). Once per
 * process: a loss after a clean leave is not reported again. */
void net_event_post(ringk_remote_t *r, int rank, ringk_peer_event_kind_t kind)
{
    uint8_t none = 0;

    /* 0 -> 3 (being posted) makes the first report the only one; 1 publishes the kind */
    if (__atomic_compare_exchange_n(&r->event_state[rank], &none, 3, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        r->event_kind[rank] = (uint8_t)kind;
        __atomic_store_n(&r->event_state[rank], 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&r->events_due, 1, __ATOMIC_RELEASE);
    }
}

/* Puts each due event into the inboxes of the kernels that asked for them, without waiting:
 * a full inbox, or one with a backlog (messages that came before the event), is tried again on
 * the next call. Called by whichever thread progresses. */
void net_events_deliver(ringk_remote_t *r)
{
    ringk_peer_event_t ev;
    ringk_kernel_t *k;
    ringk_msg_t hdr;
    int rank, ret;

    if ((__atomic_load_n(&r->events_due, __ATOMIC_ACQUIRE) == 0) ||
        (pthread_mutex_trylock(&r->event_mu) != 0)) {
        return;
    }
    for (rank = 0; rank < r->size; rank++) {
        if (__atomic_load_n(&r->event_state[rank], __ATOMIC_ACQUIRE) != 1) {
            continue;
        }
        ev.kind = r->event_kind[rank];
        ev.rank = rank;
        ret     = 0;
        for (; r->event_next[rank] < RINGK_MAX_KERNELS; r->event_next[rank]++) {
            k = ringk_kernel_by_id(r->ctx, r->event_next[rank] + 1);
            if ((k == NULL) || !k->peer_events) {
                continue;
            }
            if (__atomic_load_n(&r->backlog_head[k->id], __ATOMIC_ACQUIRE) != NULL) {
                ret = -EAGAIN; /* after the backlogged messages, which may be from that peer */
                break;
            }
            memset(&hdr, 0, sizeof(hdr));
            hdr.sender   = (uint32_t)rank << RINGK_RANK_SHIFT;
            hdr.receiver = k->id;
            hdr.type     = RINGK_MSG_CONTROL;
            hdr.length   = sizeof(ev);
            ret = ringk_deliver_hdr(r->ctx, k, &hdr, &ev, RINGK_WAIT_NONE);
            if (ret == -EAGAIN) {
                break; /* its inbox is full: the next call goes on from this kernel */
            }
        }
        if (ret != -EAGAIN) {
            __atomic_store_n(&r->event_state[rank], 2, __ATOMIC_RELEASE);
            __atomic_sub_fetch(&r->events_due, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&r->event_mu);
}

/* ---- receiving ----------------------------------------------------------------------------- */

static void backlog_push(ringk_remote_t *r, uint32_t dst, const remote_hdr_t *hdr,
                         const void *payload, topic_ref_t *ref)
{
    backlog_t *b = malloc(sizeof(*b) + hdr->msg.length);

    if (b == NULL) {
        abort(); /* cannot keep the promise of no silent drop without memory */
    }
    b->next = NULL;
    b->ref  = ref;
    b->hdr  = *hdr;
    memcpy(b->payload, payload, hdr->msg.length);
    if (r->backlog_tail[dst] != NULL) {
        r->backlog_tail[dst]->next = b;
    } else {
        __atomic_store_n(&r->backlog_head[dst], b, __ATOMIC_RELAXED);
    }
    r->backlog_tail[dst] = b;
    __atomic_fetch_add(&r->backlogged, 1, __ATOMIC_RELAXED);
}

/* Moves backlogged messages into their inboxes while there is room; returns how many. */
unsigned net_backlog_drain(ringk_remote_t *r)
{
    ringk_ctx_t *ctx = r->ctx;
    unsigned id, n = 0;
    ringk_kernel_t *k;
    backlog_t *b;
    int ret;

    if (__atomic_load_n(&r->backlogged, __ATOMIC_RELAXED) == 0) {
        return 0;
    }
    pthread_mutex_lock(&r->backlog_mu);
    for (id = 1; id <= RINGK_MAX_KERNELS; id++) {
        while ((b = __atomic_load_n(&r->backlog_head[id], __ATOMIC_RELAXED)) != NULL) {
            k   = ringk_kernel_by_id(ctx, id);
            ret = (k == NULL) ? -ENOENT :
                  ringk_deliver_hdr(ctx, k, &b->hdr.msg, b->payload, RINGK_WAIT_NONE);
            if (ret == -EAGAIN) {
                break;
            }
            if (ret != 0) {
                __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
                ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable message from sender 0x%x to "
                              "local kernel %u: %s", b->hdr.msg.sender, id, strerror(-ret));
            }
            if (b->ref != NULL) { /* a publish: its credit, once all its subscribers have it */
                if (--b->ref->remaining == 0) {
                    net_credit_owe(r, b->ref->src_rank, RINGK_TOPIC_SLOT, NULL);
                    free(b->ref);
                }
            } else if (b->hdr.src_rank < (uint32_t)r->size) { /* a K2K message's credit */
                net_credit_owe(r, b->hdr.src_rank, id, k);
            }
            /* release: net_am_recv() that finds the backlog empty without the lock delivers
             * after this entry */
            __atomic_store_n(&r->backlog_head[id], b->next, __ATOMIC_RELEASE);
            if (b->next == NULL) {
                r->backlog_tail[id] = NULL;
            }
            free(b);
            __atomic_fetch_sub(&r->backlogged, 1, __ATOMIC_RELAXED);
            n++;
        }
    }
    pthread_mutex_unlock(&r->backlog_mu);
    return n;
}

ucs_status_t net_am_recv(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    ringk_ctx_t *ctx  = r->ctx;
    remote_hdr_t hdr;
    ringk_kernel_t *k;
    wire_msg_t w;
    int ret;

    /* from a peer: checked before use */
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        (ringk_wire_msg_check(header, header_length, length, r->size, ctx->job.rank,
                              &w) != 0)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "dropping a malformed remote message (header %zu "
                      "bytes, expected %zu or %zu; data %zu bytes)", header_length,
                      (size_t)RINGK_WIRE_MSG_SHORT, sizeof(wire_msg_t), length);
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        return UCS_OK;
    }
    k = ringk_kernel_by_id(ctx, w.dst);
    if ((k != NULL) && (r->allowed[w.dst] != NULL) &&
        !r->allowed[w.dst][ringk_sender_rank(w.sender) * RINGK_SLOTS +
                           ringk_sender_kernel(w.sender)]) {
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        net_credit_owe(r, ringk_sender_rank(w.sender), w.dst, k);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: kernel '%s' does not subscribe to "
                      "kernel %u of process %u", k->name, ringk_sender_kernel(w.sender),
                      ringk_sender_rank(w.sender));
        return UCS_OK;
    }
    /* FIFO: once a kernel has a backlog, later messages queue behind it. Only AM callbacks
     * add to a backlog and the worker's lock serializes them, so a backlog found empty stays
     * empty until this callback returns: then the message goes straight in without the lock
     * (net_backlog_drain() empties a backlog under the lock, and publishes the empty head only
     * after its last message is in the inbox). The usual case first: the kernel's own thread
     * polls with nothing queued, and the message goes to it from the wire header. */
    if ((k != NULL) && (__atomic_load_n(&r->backlog_head[w.dst], __ATOMIC_ACQUIRE) == NULL) &&
        (ringk_deliver_direct(k, w.sender, w.type, w.seq, w.timestamp, data, length) == 0)) {
        net_credit_owe(r, ringk_sender_rank(w.sender), w.dst, k);
        return UCS_OK;
    }
    ringk_wire_msg_unpack(&w, length, &hdr);
    if (k == NULL) {
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        net_credit_owe(r, hdr.src_rank, hdr.dst, NULL);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: no local kernel %u (from 0x%x)",
                      hdr.dst, hdr.msg.sender);
        return UCS_OK;
    }
    if (__atomic_load_n(&r->backlog_head[hdr.dst], __ATOMIC_ACQUIRE) == NULL) {
        ret = ringk_deliver_hdr(ctx, k, &hdr.msg, data, RINGK_WAIT_NONE);
        if (ret == -EAGAIN) {
            pthread_mutex_lock(&r->backlog_mu);
            backlog_push(r, hdr.dst, &hdr, data, NULL);
            pthread_mutex_unlock(&r->backlog_mu);
        }
    } else {
        pthread_mutex_lock(&r->backlog_mu);
        ret = (__atomic_load_n(&r->backlog_head[hdr.dst], __ATOMIC_RELAXED) != NULL) ? -EAGAIN :
              ringk_deliver_hdr(ctx, k, &hdr.msg, data, RINGK_WAIT_NONE);
        if (ret == -EAGAIN) {
            backlog_push(r, hdr.dst, &hdr, data, NULL);
        }
        pthread_mutex_unlock(&r->backlog_mu);
    }
    if (ret != -EAGAIN) {
        net_credit_owe(r, hdr.src_rank, hdr.dst, k); /* in the inbox, or reported below */
    }
    if ((ret != 0) && (ret != -EAGAIN)) {
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable message from 0x%x to '%s': %s",
                      hdr.msg.sender, k->name, strerror(-ret));
    }
    return UCS_OK;
}

/* A publish from another process: fan out to this process's subscribers of the topic. */
ucs_status_t net_am_topic_recv(void *arg, const void *header, size_t header_length,
                                  void *data, size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    ringk_ctx_t *ctx  = r->ctx;
    ringk_kernel_t *subs[RINGK_MAX_KERNELS];
    topic_ref_t *ref = NULL;
    unsigned nsubs, i;
    int n;
    topic_hdr_t hdr;
    int ret;

    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        (ringk_wire_topic_parse(header, header_length, length, r->size, ctx->job.rank,
                                &hdr) != 0)) {
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "dropping a malformed publish (header %zu bytes, "
                      "data %zu)", header_length, length);
        return UCS_OK;
    }
    n     = ringk_topic_subscribers(ctx, hdr.topic, subs);
    nsubs = (n > 0) ? (unsigned)n : 0;
    pthread_mutex_lock(&r->backlog_mu);
    for (i = 0; i < nsubs; i++) {
        /* the publish's one credit is shared by its backlog entries (ref), not per entry */
        remote_hdr_t one = {.msg = hdr.msg, .dst = subs[i]->id, .src_rank = UINT32_MAX};

        ret = (__atomic_load_n(&r->backlog_head[subs[i]->id], __ATOMIC_RELAXED) != NULL) ? -EAGAIN :
              ringk_deliver_hdr(ctx, subs[i], &hdr.msg, data, RINGK_WAIT_NONE);
        if (ret == -EAGAIN) {
            if (ref == NULL) {
                ref = malloc(sizeof(*ref));
                if (ref == NULL) {
                    abort(); /* as backlog_push: no silent drop */
                }
                ref->src_rank  = hdr.src_rank;
                ref->remaining = 0;
            }
            ref->remaining++;
            backlog_push(r, subs[i]->id, &one, data, ref);
        } else if (ret != 0) {
            __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable publish on '%s' from 0x%x to '%s':"
                          " %s", hdr.topic, hdr.msg.sender, subs[i]->name, strerror(-ret));
        }
    }
    pthread_mutex_unlock(&r->backlog_mu);
    if (ref == NULL) { /* every subscriber has it (or it was reported): the credit returns */
        net_credit_owe(r, hdr.src_rank, RINGK_TOPIC_SLOT, NULL);
    }
    return UCS_OK;
}

/* Arrivals and releases go up to the barrier state machine (ringk_barrier.c). */
ucs_status_t net_am_barrier_recv(void *arg, const void *header, size_t header_length,
                                    void *data, size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    barrier_msg_t m;

    if (ringk_wire_barrier_parse(header, header_length, &m) != 0) {
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "dropped a malformed barrier message (%zu bytes)",
                      header_length);
        return UCS_OK;
    }
    ringk_barrier_deliver(r->ctx, m.name, m.generation, m.release);
    return UCS_OK;
}

/* ---- sending --------------------------------------------------------------------------------- */

void net_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ringk_remote_t *r = arg;
    int i;

    for (i = 0; i < r->size; i++) {
        if (r->eps[i] != ep) {
            continue;
        }
        __atomic_store_n(&r->dead[i], 1, __ATOMIC_RELEASE);
        if (!__atomic_load_n(&r->left[i], __ATOMIC_ACQUIRE)) {
            net_event_post(r, i, RINGK_PEER_LOST);
            ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "process %d is unreachable: %s; messages to "
                          "its kernels are reported undeliverable", i, ucs_status_string(status));
        }
    }
}

int ringk_remote_lost(const ringk_ctx_t *ctx)
{
    const ringk_remote_t *r = ctx->remote;
    int i, lost = 0;

    for (i = 0; i < r->size; i++) {
        lost += __atomic_load_n(&r->dead[i], __ATOMIC_ACQUIRE) &&
                !__atomic_load_n(&r->left[i], __ATOMIC_ACQUIRE);
    }
    return lost;
}
