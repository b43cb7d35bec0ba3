/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer, credits: how many messages this process may have on their way to a
 * kernel of another process, returned by the receiver as they enter its inbox, and the wait
 * for one. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>


/* Returns the credits queued by net_credit_owe(), one active message per (process, kernel); not
 * from inside an AM callback. Credits whose message UCP refused are owed again (a sender that
 * never gets them back would wait forever): this call stops there, the next tries again. */
void net_credits_return(ringk_remote_t *r)
{
    credit_msg_t m = {.magic = RINGK_CREDIT_MAGIC, .rank = (uint32_t)r->ctx->job.rank};
    uint32_t idx, rank;

    while (__atomic_load_n(&r->owed_pending, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&r->owed_mu);
        if (r->owed_n == 0) {
            __atomic_store_n(&r->owed_pending, 0, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&r->owed_mu);
            break;
        }
        idx = r->owed_queue[--r->owed_n];
        pthread_mutex_unlock(&r->owed_mu);
        __atomic_store_n(&r->owed_queued[idx], 0, __ATOMIC_RELEASE);
        m.count = __atomic_exchange_n(&r->owed[idx], 0, __ATOMIC_ACQ_REL);
        rank    = idx / RINGK_SLOTS;
        m.id    = idx % RINGK_SLOTS;
        if ((m.count == 0) || __atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
            continue;
        }
        if (net_am_send_async(r, (int)rank, RINGK_AM_CREDIT, &m, sizeof(m)) != UCS_OK) {
            break; /* owed again (net_send.c): the next call tries again */
        }
    }
}

/* Credits returned by another process: more room for sends to its kernel, never more than the
 * window it granted. */
ucs_status_t net_am_credit_recv(void *arg, const void *header, size_t header_length,
                                   void *data, size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    uint32_t idx, cur, next;
    credit_msg_t m;

    if (ringk_wire_credit_parse(header, header_length, r->size, r->ctx->job.rank, &m) != 0) {
        memset(&m, 0, sizeof(m));
        memcpy(&m, header, (header_length < sizeof(m)) ? header_length : sizeof(m));
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "dropped malformed credits (process %u, kernel "
                      "%u)", m.rank, m.id);
        return UCS_OK;
    }
    idx = m.rank * RINGK_SLOTS + m.id;
    cur = __atomic_load_n(&r->credits[idx], __ATOMIC_RELAXED);
    do {
        next = (m.count > r->window[idx] - cur) ? r->window[idx] : cur + m.count;
    } while (!__atomic_compare_exchange_n(&r->credits[idx], &cur, next, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return UCS_OK;
}

void ringk_remote_wait_what(const ringk_ctx_t *ctx, int rank, uint32_t id, char *buf,
                            size_t size)
{
    const ringk_remote_t *r = ctx->remote;
    const dir_entry_t *e;
    int i;

    if (id == RINGK_TOPIC_SLOT) {
        snprintf(buf, size, "process %d (%u publishes on their way, none handed on)", rank,
                 RINGK_TOPIC_WINDOW);
        return;
    }
    for (i = 0; i < RINGK_DIR_ENTRIES; i++) {
        e = &r->dir[(size_t)rank * RINGK_DIR_ENTRIES + i];
        if (e->used && (e->id == id)) {
            snprintf(buf, size, "'%.*s' of process %d", RINGK_NAME_MAX, e->name, rank);
            return;
        }
    }
    snprintf(buf, size, "kernel %u of process %d", id, rank);
}

/* Takes a credit for slot @a id of process @a rank, waiting as @a timeout_ms says (progressing
 * the worker, which brings credits back): 0, -EAGAIN, -ETIMEDOUT, or -EPIPE (it is lost). */
__attribute__((noinline)) int net_credit_wait(ringk_ctx_t *ctx, int rank, uint32_t id,
                                                int timeout_ms)
{
    ringk_remote_t *r = ctx->remote;
    uint64_t deadline = 0, start = 0, now, warn_next = 0;
    char what[RINGK_NAME_MAX + 64];

    while (!net_credit_take(r, rank, id)) {
        if (timeout_ms == RINGK_WAIT_NONE) {
            return -EAGAIN;
        }
        now = net_now_ms();
        if (deadline == 0) {
            start    = now;
            deadline = (timeout_ms < 0) ? UINT64_MAX : now + (uint64_t)timeout_ms;
            ringk_wait_prepare();
        }
        if (__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
            return -EPIPE;
        }
        if (now > deadline) {
            return -ETIMEDOUT;
        }
        if ((ctx->wait_warn_ms != 0) && ((warn_next == 0) || (now * 1000000u >= warn_next))) {
            ringk_remote_wait_what(ctx, rank, id, what, sizeof(what));
            ringk_wait_warn(ctx, start * 1000000u, now * 1000000u, &warn_next, what);
        }
        if (ringk_remote_poll(ctx) == 0) {
            sched_yield();
        }
    }
    return 0;
}
