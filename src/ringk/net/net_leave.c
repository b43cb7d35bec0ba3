/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer, leaving the job cleanly: goodbyes and their acknowledgements. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <string.h>


/* ---- leaving ------------------------------------------------------------------------------- */

/* Sends a goodbye or its acknowledgement without waiting: the progress thread sends these and
 * must not spin on its own worker. */
static void bye_send(ringk_remote_t *r, int rank, uint32_t ack)
{
    bye_msg_t m = {.rank = (uint32_t)r->ctx->job.rank, .magic = RINGK_BYE_MAGIC, .ack = ack};

    net_am_send_async(r, rank, RINGK_AM_BYE, &m, sizeof(m));
}

/* Acknowledges the goodbyes received since the last call. */
void net_bye_acks_send(ringk_remote_t *r)
{
    int i;

    if (__atomic_load_n(&r->acks_due, __ATOMIC_ACQUIRE) == 0) {
        return;
    }
    for (i = 0; i < r->size; i++) {
        if (__atomic_exchange_n(&r->ack_due[i], 0, __ATOMIC_ACQ_REL)) {
            __atomic_sub_fetch(&r->acks_due, 1, __ATOMIC_RELEASE);
            bye_send(r, i, 1);
        }
    }
}

/* A peer leaves: it sent everything it will send (it flushed before saying goodbye), so its
 * endpoint closing later is not a loss; sends to it fail from now on. */
ucs_status_t net_am_bye_recv(void *arg, const void *header, size_t header_length, void *data,
                                size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    bye_msg_t m;

    if (ringk_wire_bye_parse(header, header_length, r->size, r->ctx->job.rank, &m) != 0) {
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "dropped a malformed goodbye (%zu bytes)",
                      header_length);
        return UCS_OK;
    }
    if (m.ack) {
        __atomic_store_n(&r->acked[m.rank], 1, __ATOMIC_RELEASE);
        return UCS_OK;
    }
    /* answered outside this callback, by whichever thread progresses next (net_bye_acks_send) */
    if (!__atomic_exchange_n(&r->ack_due[m.rank], 1, __ATOMIC_ACQ_REL)) {
        __atomic_add_fetch(&r->acks_due, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&r->left[m.rank], 1, __ATOMIC_RELEASE);
    __atomic_store_n(&r->dead[m.rank], 1, __ATOMIC_RELEASE);
    net_event_post(r, m.rank, RINGK_PEER_LEFT);
    ringk_log_msg(r->ctx, RINGK_LOG_INFO, "process %u left the job", m.rank);
    return UCS_OK;
}

/* Leaves the job cleanly: everything sent so far is flushed out, then every reachable process is
 * told, and acknowledges, that this one leaves, so that its endpoint closing is not taken for a
 * failure. Bounded by RINGK_LEAVE_TIMEOUT_MS: a process that does not answer is left behind. */
void net_leave(ringk_remote_t *r)
{
    ucp_request_param_t param = {.op_attr_mask = 0};
    const uint64_t deadline = net_now_ms() + RINGK_LEAVE_TIMEOUT_MS;
    ucs_status_ptr_t req;
    int rank, waiting;

    req = ucp_worker_flush_nbx(r->worker, &param);
    if (UCS_PTR_IS_PTR(req)) {
        while ((ucp_request_check_status(req) == UCS_INPROGRESS) && (net_now_ms() < deadline)) {
            ucp_worker_progress(r->worker);
            net_bye_acks_send(r);
        }
        if (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ringk_log_msg(r->ctx, RINGK_LOG_WARN, "leaving the job: messages still in flight "
                          "after %d ms", RINGK_LEAVE_TIMEOUT_MS);
            ucp_request_cancel(r->worker, req);
        }
        ucp_request_free(req);
    }
    for (rank = 0; rank < r->size; rank++) {
        if ((r->eps[rank] != NULL) && !__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
            bye_send(r, rank, 0);
        }
    }
    do {
        ucp_worker_progress(r->worker);
        net_bye_acks_send(r);
        waiting = -1;
        for (rank = 0; rank < r->size; rank++) {
            if ((r->eps[rank] != NULL) && !__atomic_load_n(&r->acked[rank], __ATOMIC_ACQUIRE) &&
                !__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
                waiting = rank;
                break;
            }
        }
    } while ((waiting >= 0) && (net_now_ms() < deadline));
    if (waiting >= 0) {
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "leaving the job: process %d did not acknowledge "
                      "within %d ms", waiting, RINGK_LEAVE_TIMEOUT_MS);
    }
}
