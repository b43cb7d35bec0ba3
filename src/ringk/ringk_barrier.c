/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk named barriers: the participants of each barrier in this process, the wait, and the
 * state machine across processes. A barrier completes a generation when every participant has
 * arrived: in one process by the last local arrival; across processes, the last local arrival
 * of each process tells rank 0 (the root), which counts processes and, when all are in,
 * completes the generation at home and sends releases. The network layer (net/)
 * carries the arrivals and releases and hands what arrives to ringk_barrier_deliver(). All
 * state here is under ctx->lock; nothing sends while holding it (a send may need the progress
 * thread, which may need the lock). */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_exec.h"
#include "ringk_internal.h"
#include "net/ringk_net.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* Under ctx->lock. */
static barrier_t *barrier_find(ringk_ctx_t *ctx, const char *name)
{
    unsigned i;

    for (i = 0; i < ctx->nbarriers; i++) {
        if (!strcmp(ctx->barriers[i].name, name)) {
            return &ctx->barriers[i];
        }
    }
    return NULL;
}

int ringk_barrier_join(ringk_ctx_t *ctx, const ringk_kernel_t *k)
{
    barrier_t *b;
    unsigned i;

    for (i = 0; i < k->barriers.count; i++) {
        b = barrier_find(ctx, k->barriers.names[i]);
        if (b == NULL) {
            if (ctx->nbarriers == RINGK_MAX_BARRIERS) {
                ringk_log_msg(ctx, RINGK_LOG_ERROR, "more than %d barriers", RINGK_MAX_BARRIERS);
                return -ENOSPC;
            }
            b = &ctx->barriers[ctx->nbarriers++];
            strcpy(b->name, k->barriers.names[i]);
        }
        b->expected++;
    }
    return 0;
}

unsigned ringk_barrier_list(ringk_ctx_t *ctx, const char **names, unsigned *counts)
{
    unsigned i;

    for (i = 0; i < ctx->nbarriers; i++) {
        names[i]  = ctx->barriers[i].name;
        counts[i] = ctx->barriers[i].expected;
    }
    return ctx->nbarriers;
}

/* Under ctx->lock: the generation is complete here; its waiters go. */
static void barrier_complete(ringk_ctx_t *ctx, barrier_t *b)
{
    b->arrived = 0;
    b->generation++;
    pthread_cond_broadcast(&ctx->barrier_cv);
}

/* The root, under ctx->lock: one more process arrived at generation @a gen of barrier @a name.
 * When all that take part are in, completes the generation here and returns 1: the caller
 * then sends the releases, after unlocking. */
static int barrier_root_count(ringk_ctx_t *ctx, const char *name, uint64_t gen)
{
    barrier_t *b = barrier_find(ctx, name);

    if ((b == NULL) || (gen != b->generation)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "unexpected arrival at barrier '%s' generation %llu",
                      name, (unsigned long long)gen);
        return 0;
    }
    if (++b->procs_arrived < ringk_remote_barrier_processes(ctx, name)) {
        return 0;
    }
    b->procs_arrived = 0;
    barrier_complete(ctx, b);
    return 1;
}

/* Every participant of this process arrived at generation @a gen (called without the lock):
 * the root counts itself, another process tells the root. */
static int barrier_process_arrived(ringk_ctx_t *ctx, const char *name, uint64_t gen)
{
    int all;

    if (ctx->job.rank != 0) {
        return ringk_remote_barrier_send(ctx, 0, name, gen, 0);
    }
    pthread_mutex_lock(&ctx->lock);
    all = barrier_root_count(ctx, name, gen);
    pthread_mutex_unlock(&ctx->lock);
    if (all) {
        ringk_remote_barrier_release(ctx, name, gen);
    }
    return 0;
}

void ringk_barrier_deliver(ringk_ctx_t *ctx, const char *name, uint64_t gen, int release)
{
    barrier_t *b;
    int all;

    pthread_mutex_lock(&ctx->lock);
    if (!release) {
        all = (ctx->job.rank == 0) && barrier_root_count(ctx, name, gen);
        pthread_mutex_unlock(&ctx->lock);
        if (all) {
            ringk_remote_barrier_release(ctx, name, gen);
        }
        return;
    }
    b = barrier_find(ctx, name);
    if ((b != NULL) && (b->generation == gen)) {
        barrier_complete(ctx, b);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* Under ctx->lock: sleeps until barrier @a b leaves generation @a gen (0), @a timeout_ms passes
 * (-ETIMEDOUT), @a k is being terminated (-ECANCELED: a terminate or the context's destroy
 * waits for it; ringk_barrier_cancel wakes it), or, for a barrier across processes
 * (@a global), a process taking part is gone (-EPIPE: it can never complete; looked at every
 * RINGK_BARRIER_POLL_MS); then @a k leaves the barrier. Wakes each RINGK_WAIT_WARN_MS to say who waits and how many have arrived: a barrier
 * that some participant never reaches would otherwise hang without a word. */
static int barrier_sleep(ringk_kernel_t *k, barrier_t *b, uint64_t gen, int global,
                         int timeout_ms)
{
    ringk_ctx_t *ctx       = k->ctx;
    const uint64_t start   = ringk_now_ns();
    const uint64_t every   = (uint64_t)ctx->wait_warn_ms * 1000000u;
    const uint64_t timeout = (uint64_t)timeout_ms * 1000000u;
    uint64_t now = start, until, warn_next = (every != 0) ? start + every : UINT64_MAX;
    struct timespec ts;
    int gone;

    while (b->generation == gen) {
        gone = global ? ringk_remote_barrier_gone(ctx, b->name) : -1;
        if (ringk_load_i(&k->state) >= RINGK_KERNEL_TERMINATING) {
            if (b->arrived > 0) {
                b->arrived--;
            }
            ringk_log_msg(ctx, RINGK_LOG_INFO, "kernel '%s' leaves barrier '%s': it is being "
                          "terminated", k->name, b->name);
            return -ECANCELED;
        }
        if ((gone >= 0) || ((timeout_ms >= 0) && (now - start >= timeout))) {
            if (b->arrived > 0) {
                b->arrived--; /* leave: the others still wait for everyone */
            }
            if (gone < 0) {
                return -ETIMEDOUT;
            }
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' leaves barrier '%s': process %d, "
                          "which takes part, has left the job or was lost", k->name, b->name,
                          gone);
            return -EPIPE;
        }
        if (now >= warn_next) {
            warn_next = now + every;
            ringk_log_msg(ctx, RINGK_LOG_WARN, "kernel '%s' has waited %.1f s at barrier '%s': "
                          "%u of its %u participants in this process have arrived%s", k->name,
                          (double)(now - start) / 1e9, b->name, b->arrived, b->expected,
                          !global ? "" : (b->arrived < b->expected) ?
                          " (then it waits for those of other processes)" :
                          ", it waits for those of other processes");
        }
        until = (timeout_ms >= 0) ? start + timeout : UINT64_MAX;
        until = (warn_next < until) ? warn_next : until;
        if (global && (until - now > RINGK_BARRIER_POLL_MS * 1000000ull)) {
            until = now + RINGK_BARRIER_POLL_MS * 1000000ull;
        }
        if (until == UINT64_MAX) {
            pthread_cond_wait(&ctx->barrier_cv, &ctx->lock);
        } else {
            /* the condition variable keeps CLOCK_REALTIME: sleep for what is left, >= 1 ms */
            ringk_timespec_in_ms(&ts, (long)(((until > now) ? until - now : 0) / 1000000u) + 1);
            pthread_cond_timedwait(&ctx->barrier_cv, &ctx->lock, &ts);
        }
        now = ringk_now_ns();
    }
    return 0;
}

/* Under ctx->lock, returned with it held: @a k arrives at barrier @a b. 1: the generation is
 * complete; 0: it waits for generation *gen_p to pass (*global_p: across processes); or a
 * negative errno (the root could not be told). */
static int barrier_arrive_locked(ringk_kernel_t *k, barrier_t *b, uint64_t *gen_p,
                                 int *global_p)
{
    ringk_ctx_t *ctx = k->ctx;
    uint64_t gen     = b->generation;
    int global = (ringk_remote_of(ctx) != NULL) &&
                 (ringk_remote_barrier_processes(ctx, b->name) > 1);
    int ret;

    *gen_p    = gen;
    *global_p = global;
    if (++b->arrived < b->expected) {
        return 0;
    }
    if (!global) {
        barrier_complete(ctx, b);
        return 1;
    }
    /* every participant of this process is here: the root completes the generation once
     * each process has arrived (a release bumps the generation here) */
    pthread_mutex_unlock(&ctx->lock);
    ret = barrier_process_arrived(ctx, b->name, gen);
    pthread_mutex_lock(&ctx->lock);
    if (ret != 0) {
        b->arrived--;
        return ret;
    }
    return (b->generation != gen);
}

int ringk_barrier_arrive(ringk_kernel_t *k, const char *name, uint64_t *gen_p)
{
    barrier_t *b;
    int ret, global;

    pthread_mutex_lock(&k->ctx->lock);
    b   = barrier_find(k->ctx, name);
    ret = (b == NULL) ? -ENOENT : barrier_arrive_locked(k, b, gen_p, &global);
    pthread_mutex_unlock(&k->ctx->lock);
    return ret;
}

int ringk_barrier_poll(ringk_kernel_t *k, const char *name, uint64_t gen, int expired)
{
    ringk_ctx_t *ctx = k->ctx;
    barrier_t *b;
    int ret = 0, gone;

    pthread_mutex_lock(&ctx->lock);
    b = barrier_find(ctx, name);
    if ((b != NULL) && (b->generation == gen)) {
        gone = ((ringk_remote_of(ctx) != NULL) &&
                (ringk_remote_barrier_processes(ctx, name) > 1)) ?
               ringk_remote_barrier_gone(ctx, name) : -1;
        ret = (gone >= 0) ? -EPIPE : expired ? -ETIMEDOUT : -EAGAIN;
        if ((ret != -EAGAIN) && (b->arrived > 0)) {
            b->arrived--; /* leave: the others still wait for everyone */
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return ret;
}

void ringk_barrier_cancel(ringk_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    pthread_cond_broadcast(&ctx->barrier_cv);
    pthread_mutex_unlock(&ctx->lock);
}

int ringk_barrier_wait(ringk_kernel_t *k, const char *name, int timeout_ms)
{
    ringk_ctx_t *ctx;
    barrier_t *b;
    uint64_t gen;
    ringk_ctx_t *pool = NULL;
    int ret = 0, global;

    if ((k == NULL) || (name == NULL)) {
        return ringk_log_bad_arg((k != NULL) ? k->ctx : NULL, __func__, "%s is NULL",
                                 (k == NULL) ? "kernel" : "barrier");
    }
    ctx = k->ctx;
    if (ringk_log_check_timeout(ctx, __func__, timeout_ms) != 0) {
        return -EINVAL;
    }
    if (!ringk_list_has(&k->barriers, name)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' does not take part in barrier '%s'",
                      k->name, name);
        return -ENOENT;
    }
    if (ringk_tls_inline != NULL) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' cannot wait at barrier '%s' from the "
                      "handler of '%s', which runs in a receive callback", k->name, name,
                      ringk_tls_inline->name);
        return -EDEADLK;
    }
    ringk_wait_prepare();
    pthread_mutex_lock(&ctx->lock);
    b   = barrier_find(ctx, name); /* the kernel joined it: it exists */
    ret = barrier_arrive_locked(k, b, &gen, &global);
    if ((ret == 0) && (b->generation == gen)) {
        /* an event-driven kernel keeps its pool thread while it waits: the pool grows, so
         * that the other participants run (taken without ctx->lock, which the new thread
         * needs; the generation is looked at again after) */
        pthread_mutex_unlock(&ctx->lock);
        pool = ringk_exec_cpu_block_begin(k, "at a barrier");
        pthread_mutex_lock(&ctx->lock);
        ret = (b->generation == gen) ? barrier_sleep(k, b, gen, global, timeout_ms) : 0;
    }
    pthread_mutex_unlock(&ctx->lock);
    ringk_exec_cpu_block_end(pool);
    return (ret == 1) ? 0 : ret;
}
