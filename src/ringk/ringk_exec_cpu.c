/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the CPU executor: a thread per persistent kernel, pool threads for event-driven
 * ones, their sleep and wake-up, and pinning to cores with hwloc. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_exec.h"
#include "ringk_internal.h"
#include "net/ringk_net.h"

#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>

/* A terminating kernel stops once every claimed cell was consumed: T2 reads the tail after the
 * state was set, and a sender that claims later sees the state (T1) and cancels. */
static int kernel_try_finish(ringk_kernel_t *k)
{
    if (ringk_load_i(&k->state) != RINGK_KERNEL_TERMINATING) {
        return 0;
    }
    /* T2: pairs with T1 in ringk_deliver(). */
    if (__atomic_load_n(&k->inbox.prod->pos, __ATOMIC_SEQ_CST) !=
        __atomic_load_n(&k->head, __ATOMIC_RELAXED)) {
        return 0;
    }
    pthread_mutex_lock(&k->mu);
    __atomic_store_n(&k->state, RINGK_KERNEL_TERMINATED, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return 1;
}

/* Pins the calling thread to core @a index (modulo the cores hwloc sees). Persistent kernels
 * get cores in creation order, so two kernels created one after the other never share a core
 * while another is free; pool threads are left to the scheduler. */
static void pin_thread(ringk_ctx_t *ctx, unsigned index)
{
    hwloc_obj_t core;
    int ncores;

    if (!ctx->pin || (ctx->topo == NULL)) {
        return;
    }
    ncores = hwloc_get_nbobjs_by_type(ctx->topo, HWLOC_OBJ_CORE);
    if (ncores <= 0) {
        return;
    }
    core = hwloc_get_obj_by_type(ctx->topo, HWLOC_OBJ_CORE, index % ncores);
    if ((core != NULL) &&
        (hwloc_set_cpubind(ctx->topo, core->cpuset, HWLOC_CPUBIND_THREAD) != 0)) {
        ringk_log_msg(ctx, RINGK_LOG_DEBUG, "cannot pin a thread to core %u", core->logical_index);
    }
}

/* Sleeps until woken by a sender or a state change; W1 pairs with W2 in ringk_sleeping_seen(). */
static void kernel_sleep(ringk_kernel_t *k)
{
    struct timespec ts;

    pthread_mutex_lock(&k->mu);
    __atomic_store_n(&k->sleeping, 1, __ATOMIC_RELAXED);
    /* W1: 'sleeping' before re-reading the inbox and the state. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if ((ringk_inbox_empty(k) || (ringk_load_i(&k->state) == RINGK_KERNEL_INACTIVE)) &&
        (ringk_load_i(&k->state) != RINGK_KERNEL_TERMINATING)) {
        /* a bounded sleep (RINGK_IDLE_WAKE_MS): senders and state changes signal */
        ringk_timespec_in_ms(&ts, k->ctx->idle_wake_ms);
        ringk_qs_offline(ringk_tls_qs);
        pthread_cond_timedwait(&k->cv, &k->mu, &ts);
        ringk_qs_online(ringk_tls_qs);
    }
    __atomic_store_n(&k->sleeping, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&k->mu);
}

static void *persistent_main(void *arg)
{
    ringk_kernel_t *k   = arg;
    ringk_qs_slot_t *qs = ringk_qs_register(k->ctx);
    unsigned idle = 0;
    int state;

    pin_thread(k->ctx, k->core);
    for (;;) {
        ringk_qs_quiescent(k->ctx, qs);
        state = ringk_load_i(&k->state);
        if (state == RINGK_KERNEL_TERMINATED) {
            break;
        }
        if (state == RINGK_KERNEL_INACTIVE) {
            ringk_wait_prepare();
            kernel_sleep(k);
            continue;
        }
        if (ringk_kernel_iteration(k) > 0) {
            idle = 0;
            continue;
        }
        if (kernel_try_finish(k)) {
            break;
        }
        if (ringk_remote_of(k->ctx) != NULL) {
            unsigned j, got = 0;

            /* a few polls of the worker between looks at the inbox (a load): a message from
             * another process is seen sooner, one from this process as soon */
            ringk_tls_polling = k;
            for (j = 0; (j < RINGK_REMOTE_POLLS) && !got && ((j == 0) || ringk_inbox_empty(k));
                 j++) {
                got = ringk_remote_poll(k->ctx);
            }
            ringk_tls_polling = NULL;
            ringk_tls_polled  = k->ctx;
            if (k->defer_head != NULL) {
                ringk_deferred_run(k);
            }
            if (k->direct_full) {
                ringk_kernel_direct(k);
            }
            if (got) {
                idle = 0;
                continue;
            }
        }
        if (++idle < RINGK_SPIN_POLLS) {
            /* spin briefly, then yield: a thread sharing our core gets to run. A kernel that
             * polls the worker spins without a pause: the polls are the pause, and one more
             * only delays seeing the next message */
            if (idle < 128) {
                if (ringk_remote_of(k->ctx) == NULL) {
                    ringk_cpu_relax();
                }
            } else {
                sched_yield();
            }
            continue;
        }
        idle = 0;
        ringk_wait_prepare();
        kernel_sleep(k);
    }
    ringk_wait_prepare();
    ringk_qs_unregister(qs);
    return NULL;
}

/* Whether an event-driven kernel has messages, or must finish terminating. */
static int pool_has_work(ringk_ctx_t *ctx)
{
    unsigned i, count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);
    ringk_kernel_t *k;
    int state;

    for (i = 0; i < count; i++) {
        k = __atomic_load_n(&ctx->kernels[i], __ATOMIC_ACQUIRE);
        if ((k == NULL) || (k->mode != RINGK_MODE_EVENT_DRIVEN) || (k->dev != NULL)) {
            continue;
        }
        state = ringk_load_i(&k->state);
        if ((state == RINGK_KERNEL_TERMINATING) ||
            ((state == RINGK_KERNEL_ACTIVE) && !ringk_inbox_empty(k))) {
            return 1;
        }
    }
    return 0;
}

static void *pool_main(void *arg)
{
    ringk_ctx_t *ctx    = arg;
    ringk_qs_slot_t *qs = ringk_qs_register(ctx);
    unsigned i, n, it, did, idle = 0, count, event_driven;
    struct timespec ts;
    ringk_kernel_t *k;
    int state;

    while (!ringk_load_i(&ctx->stop)) {
        ringk_qs_quiescent(ctx, qs);
        did   = 0;
        event_driven = 0;
        count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);
        for (i = 0; i < count; i++) {
            k = __atomic_load_n(&ctx->kernels[i], __ATOMIC_ACQUIRE);
            if ((k == NULL) || (k->mode != RINGK_MODE_EVENT_DRIVEN) || (k->dev != NULL)) {
                continue;
            }
            event_driven++;
            state = ringk_load_i(&k->state);
            if ((state == RINGK_KERNEL_INACTIVE) || (state == RINGK_KERNEL_TERMINATED) ||
                (ringk_inbox_empty(k) && (state != RINGK_KERNEL_TERMINATING))) {
                continue;
            }
            if (__atomic_exchange_n(&k->running, 1, __ATOMIC_ACQUIRE)) {
                continue; /* another pool thread has it */
            }
            for (it = 0; it < k->max_iterations; it++) {
                n = ringk_kernel_iteration(k);
                if (n == 0) {
                    break;
                }
                did += n;
            }
            kernel_try_finish(k);
            __atomic_store_n(&k->running, 0, __ATOMIC_RELEASE);
        }
        if (did > 0) {
            idle = 0;
            continue;
        }
        /* with no event-driven kernel there is nothing to spin for: the yields would only
         * take turns from persistent kernels on a busy machine */
        if ((event_driven > 0) && (++idle < RINGK_SPIN_POLLS / 4)) {
            sched_yield();
            continue;
        }
        idle = 0;
        pthread_mutex_lock(&ctx->pool_mu);
        __atomic_store_n(&ctx->pool_sleeping, 1, __ATOMIC_RELAXED);
        /* W1 (pool): as in kernel_sleep(), then the inboxes are read again: a sender that
         * claimed before is seen here, one that claims after sees the flag (W2). Each pool
         * thread does this before it sleeps, so one that is awake always looks again. */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (!ringk_load_i(&ctx->stop) && !pool_has_work(ctx)) {
            ringk_timespec_in_ms(&ts, ctx->idle_wake_ms); /* bounded, as kernel_sleep() */
            ringk_qs_offline(qs);
            pthread_cond_timedwait(&ctx->pool_cv, &ctx->pool_mu, &ts);
            ringk_qs_online(qs);
        }
        __atomic_store_n(&ctx->pool_sleeping, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&ctx->pool_mu);
    }
    ringk_qs_unregister(qs);
    return NULL;
}

/* Wakes the executor of @a k if it sleeps, after a state change (not a claim): fences first. */
void ringk_wake(ringk_kernel_t *k)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (ringk_sleeping_seen(k)) {
        ringk_wake_signal(k);
    }
}

/* Signals the executor of @a k, seen sleeping. */
static void cpu_wake(ringk_kernel_t *k)
{
    ringk_ctx_t *ctx = k->ctx;

    if (k->mode == RINGK_MODE_PERSISTENT) {
        pthread_mutex_lock(&k->mu);
        pthread_cond_signal(&k->cv);
        pthread_mutex_unlock(&k->mu);
    } else {
        pthread_mutex_lock(&ctx->pool_mu);
        pthread_cond_broadcast(&ctx->pool_cv);
        pthread_mutex_unlock(&ctx->pool_mu);
    }
}

/* A persistent kernel gets a thread of its own; an event-driven one is found by the pool
 * threads, which look at every event-driven kernel of the context. */
static int cpu_start(ringk_kernel_t *k)
{
    ringk_ctx_t *ctx = k->ctx;

    if (k->mode != RINGK_MODE_PERSISTENT) {
        return 0;
    }
    if (pthread_create(&k->thread, NULL, persistent_main, k) != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': cannot start its thread", k->name);
        return -EAGAIN;
    }
    k->has_thread = 1;
    return 0;
}

static void cpu_join(ringk_kernel_t *k)
{
    if (k->has_thread) {
        pthread_join(k->thread, NULL);
        k->has_thread = 0;
    }
}

const ringk_exec_ops_t ringk_exec_cpu = {
    .name  = "cpu",
    .start = cpu_start,
    .wake  = cpu_wake,
    .join  = cpu_join,
    .state = NULL
};

/* The pool thread that runs this thread's code, or NULL on other threads. */
static __thread ringk_ctx_t *tls_pool_ctx;

static void *pool_thread(void *arg)
{
    tls_pool_ctx = arg;
    return pool_main(arg);
}

/* Under pool_mu: one more pool thread: 0, or -EAGAIN when none could start. */
static int pool_add(ringk_ctx_t *ctx)
{
    if ((ctx->npool == RINGK_POOL_THREADS) ||
        (pthread_create(&ctx->pool[ctx->npool], NULL, pool_thread, ctx) != 0)) {
        return -EAGAIN;
    }
    ctx->npool++;
    return 0;
}

int ringk_exec_cpu_pool_start(ringk_ctx_t *ctx)
{
    int ret = 0;

    pthread_mutex_lock(&ctx->pool_mu);
    while ((ret == 0) && (ctx->npool < ctx->pool_want)) {
        ret = pool_add(ctx);
    }
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "cannot start pool thread %u", ctx->npool);
    }
    pthread_mutex_unlock(&ctx->pool_mu);
    return ret;
}

ringk_ctx_t *ringk_exec_cpu_block_begin(const ringk_kernel_t *k, const char *what)
{
    ringk_ctx_t *ctx = tls_pool_ctx;
    int said;

    if (ctx == NULL) {
        return NULL; /* a kernel's own thread, or one outside the executors: nobody waits on it */
    }
    pthread_mutex_lock(&ctx->pool_mu);
    ctx->pool_blocked++;
    if ((ctx->npool - ctx->pool_blocked < ctx->pool_want) && !ringk_load_i(&ctx->stop) &&
        (pool_add(ctx) != 0)) {
        said = ctx->pool_full_said;
        ctx->pool_full_said = 1;
        pthread_mutex_unlock(&ctx->pool_mu);
        if (!said) {
            ringk_log_msg(ctx, RINGK_LOG_WARN, "event-driven kernel '%s' waits %s on a pool "
                          "thread, and no other could be started (%u run, %u of them waiting, "
                          "pool_threads %u, at most %d): the other event-driven kernels wait "
                          "for a pool thread to come back", (k != NULL) ? k->name : "?", what,
                          ctx->npool, ctx->pool_blocked, ctx->pool_want, RINGK_POOL_THREADS);
        }
        return ctx;
    }
    pthread_mutex_unlock(&ctx->pool_mu);
    return ctx;
}

void ringk_exec_cpu_block_end(ringk_ctx_t *pool)
{
    if (pool != NULL) {
        pthread_mutex_lock(&pool->pool_mu);
        pool->pool_blocked--;
        pthread_mutex_unlock(&pool->pool_mu);
    }
}

void ringk_exec_cpu_pool_stop(ringk_ctx_t *ctx)
{
    unsigned i, n;

    /* under pool_mu: no pool thread is added once stop is seen (ringk_exec_cpu_block_begin) */
    pthread_mutex_lock(&ctx->pool_mu);
    __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&ctx->pool_cv);
    n = ctx->npool;
    pthread_mutex_unlock(&ctx->pool_mu);
    for (i = 0; i < n; i++) {
        pthread_join(ctx->pool[i], NULL);
    }
    ctx->npool = 0;
}
