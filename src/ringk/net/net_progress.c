/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer, progress: the progress thread, and kernel threads polling the worker
 * while idle. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <time.h>


/* What a thread that progressed the worker does next: backlogs, acknowledgements, credits and
 * peer events, each behind a load of its 'nothing to do' word (no call when there is none).
 * Returns how many backlogged messages went into their inboxes. */
static inline unsigned remote_chores(ringk_remote_t *r)
{
    unsigned n = 0;

    if (__atomic_load_n(&r->backlogged, __ATOMIC_RELAXED) != 0) {
        n = net_backlog_drain(r);
    }
    if (__atomic_load_n(&r->acks_due, __ATOMIC_RELAXED) != 0) {
        net_bye_acks_send(r);
    }
    if (__atomic_load_n(&r->owed_pending, __ATOMIC_RELAXED) != 0) {
        net_credits_return(r);
    }
    if (__atomic_load_n(&r->events_due, __ATOMIC_RELAXED) != 0) {
        net_events_deliver(r);
    }
    return n;
}

/* The progress thread's nap while kernel threads poll the worker: a blocked thread, not a
 * yielding one. A thread that only yields stays runnable and, on a machine with no core to
 * spare, takes turns from the polling kernel threads (bench/RESULTS.md has the figures). It
 * wakes after RINGK_NAP_MS, when a kernel thread stops polling (ringk_remote_unpoll) or at
 * stop. */
static void progress_nap(ringk_remote_t *r)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += RINGK_NAP_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec  += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
    }
    pthread_mutex_lock(&r->nap_mu);
    if (!r->nap_kick && !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        pthread_cond_timedwait(&r->nap_cv, &r->nap_mu, &ts);
    }
    r->nap_kick = 0;
    pthread_mutex_unlock(&r->nap_mu);
}

void net_progress_kick(ringk_remote_t *r)
{
    pthread_mutex_lock(&r->nap_mu);
    r->nap_kick = 1;
    pthread_cond_signal(&r->nap_cv);
    pthread_mutex_unlock(&r->nap_mu);
}

void ringk_remote_unpoll(ringk_ctx_t *ctx)
{
    ringk_remote_t *r = ctx->remote;

    if (r == NULL) {
        return;
    }

    /* what the progress thread finds when it wakes: no poll since (others that still poll
     * set it again, and it naps again) */
    __atomic_store_n(&r->kernel_polled, 0, __ATOMIC_RELAXED);
    net_progress_kick(r);
}

void *net_progress_main(void *arg)
{
    ringk_remote_t *r   = arg;
    ringk_qs_slot_t *qs = ringk_qs_register(r->ctx);
    struct pollfd pfd   = {.fd = r->efd, .events = POLLIN};
    unsigned idle = 0, n;
    ucs_status_t status;

    while ((__atomic_load_n(&r->ctx->remote, __ATOMIC_ACQUIRE) != r) &&
           !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        progress_nap(r); /* until ringk_remote_start() published the context's remote side */
    }

    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        ringk_qs_quiescent(r->ctx, qs); /* its naps and polls are short: never offline */
        /* Idle kernel threads progress the worker themselves (ringk_remote_poll): while they
         * do (they polled since this thread last cleared the flag), it naps */
        if (__atomic_load_n(&r->kernel_polled, __ATOMIC_RELAXED)) {
            __atomic_store_n(&r->kernel_polled, 0, __ATOMIC_RELAXED);
            idle = 0;
            progress_nap(r);
            continue;
        }
        n = ucp_worker_progress(r->worker) + remote_chores(r);
        if (n > 0) {
            idle = 0;
            continue;
        }
        if (++idle < 1000) {
            sched_yield();
            continue;
        }
        /* sleep until the network has something, or 1 ms (backlogs, stop) */
        status = ucp_worker_arm(r->worker);
        if (status == UCS_OK) {
            poll(&pfd, 1, 1);
        }
        idle = 0;
    }
    ringk_qs_unregister(qs);
    return NULL;
}

/* Progresses the worker from a kernel thread that has nothing to do: the message it waits for
 * is handled without waking the progress thread. */
unsigned ringk_remote_poll(ringk_ctx_t *ctx)
{
    ringk_remote_t *r = ctx->remote;

    /* a store only when the progress thread cleared it (a read otherwise: no cache line
     * bouncing between the polling threads) */
    if (!__atomic_load_n(&r->kernel_polled, __ATOMIC_RELAXED)) {
        __atomic_store_n(&r->kernel_polled, 1, __ATOMIC_RELAXED);
    }
    return ucp_worker_progress(r->worker) + remote_chores(r);
}
