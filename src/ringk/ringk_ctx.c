/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk contexts: parameters and environment, the job, the pool threads of event-driven
 * kernels, start (joining the other processes) and destroy. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_exec.h"
#include "dev/ringk_dev.h"
#include "ringk_internal.h"
#include "net/ringk_net.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ms_from_env(ringk_ctx_t *ctx, const char *name, long def, long min, long max,
                       long *ms_p)
{
    const char *s = getenv(name);
    char *end;
    long v;

    *ms_p = def;
    if ((s == NULL) || (*s == '\0')) {
        return 0;
    }
    errno = 0;
    v     = strtol(s, &end, 10);
    if ((errno != 0) || (end == s) || (*end != '\0') || (v < min) || (v > max)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "%s '%s' is not a number of milliseconds in %ld..%ld",
                      name, s, min, max);
        return -EINVAL;
    }
    *ms_p = v;
    return 0;
}

/* RINGK_IDLE_WAKE_MS: how long a sleeping kernel or pool thread that nobody woke waits before
 * it looks at its inboxes again. Every send and state change wakes sleepers; this is the net
 * under that, and a test sets it high so that a lost wakeup shows instead of being covered.
 * RINGK_WAIT_WARN_MS: after how long a send still waiting for room or for UCP to send it, or a
 * kernel waiting at a barrier, says so (0: never). */
static int waits_from_env(ringk_ctx_t *ctx)
{
    if (ms_from_env(ctx, "RINGK_IDLE_WAKE_MS", RINGK_IDLE_WAKE_MS_DEFAULT, 1,
                    RINGK_IDLE_WAKE_MS_MAX, &ctx->idle_wake_ms) != 0) {
        return -EINVAL;
    }
    return ms_from_env(ctx, "RINGK_WAIT_WARN_MS", RINGK_WAIT_WARN_MS_DEFAULT, 0,
                       RINGK_WAIT_WARN_MS_MAX, &ctx->wait_warn_ms);
}

/* RINGK_RECV_INLINE: 1 (the default) lets the handler of a persistent kernel run in the UCP
 * receive callback for a message from another process that its idle thread took from the
 * worker (ringk_deliver_direct); 0 hands every message to the kernel's loop first. */
static int recv_inline_from_env(ringk_ctx_t *ctx)
{
    const char *s = getenv("RINGK_RECV_INLINE");

    ctx->recv_inline = 1;
    if ((s == NULL) || (*s == '\0')) {
        return 0;
    }
    if (strcmp(s, "0") && strcmp(s, "1")) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "RINGK_RECV_INLINE '%s' is not 0 or 1", s);
        return -EINVAL;
    }
    ctx->recv_inline = (s[0] == '1');
    return 0;
}

/* The parameters, the environment and the job into @a ctx: 0 or a negative errno, said
 * through the log hook. */
static int ctx_configure(ringk_ctx_t *ctx, const ringk_ctx_params_t *params)
{
    char err[256];
    int ret;

    ctx->pool_want = 1;
    ctx->pin       = 1;
    if (params != NULL) {
        if (params->field_mask & RINGK_CTX_PARAM_FIELD_POOL_THREADS) {
            if ((params->pool_threads < 1) || (params->pool_threads > RINGK_MAX_POOL)) {
                ringk_log_msg(ctx, RINGK_LOG_ERROR, "pool_threads %u is out of range 1..%d",
                              params->pool_threads, RINGK_MAX_POOL);
                return -EINVAL;
            }
            ctx->pool_want = params->pool_threads;
        }
        if (params->field_mask & RINGK_CTX_PARAM_FIELD_PIN) {
            ctx->pin = params->pin;
        }
    }
    if ((waits_from_env(ctx) != 0) || (recv_inline_from_env(ctx) != 0)) {
        return -EINVAL;
    }
    if ((params == NULL) || !(params->field_mask & RINGK_CTX_PARAM_FIELD_JOB)) {
        ret = ringk_job_from_env(&ctx->job, err, sizeof(err));
        if (ret < 0) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "%s", err);
            return ret;
        }
        ctx->job_from_env = (ret == 0);
        return 0;
    }
    ctx->job = params->job;
    if ((ctx->job.size < 1) || (ctx->job.rank < 0) || (ctx->job.rank >= ctx->job.size) ||
        (ctx->job.size > (1 << (32 - RINGK_RANK_SHIFT))) ||
        ((ctx->job.size > 1) && (ctx->job.allgather == NULL))) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "job rank %d size %d: need 0 <= rank < size <= %d "
                      "and an allgather for more than one process", ctx->job.rank,
                      ctx->job.size, 1 << (32 - RINGK_RANK_SHIFT));
        return -EINVAL;
    }
    return 0;
}

/* The machine's topology for pinning threads; without it they run unpinned. */
static void ctx_topology_load(ringk_ctx_t *ctx)
{
    if (hwloc_topology_init(&ctx->topo) != 0) {
        ctx->topo = NULL;
    } else if (hwloc_topology_load(ctx->topo) != 0) {
        hwloc_topology_destroy(ctx->topo); /* initialised: its memory is ours to free */
        ctx->topo = NULL;
    }
    if (ctx->topo == NULL) {
        ringk_log_msg(ctx, RINGK_LOG_WARN, "hwloc cannot load the topology: threads are not "
                      "pinned");
    }
}

int ringk_ctx_create(const ringk_ctx_params_t *params, ringk_ctx_t **ctx_p)
{
    const uint64_t known = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_POOL_THREADS |
                           RINGK_CTX_PARAM_FIELD_PIN | RINGK_CTX_PARAM_FIELD_JOB;
    ringk_ctx_t *ctx;
    int ret;

    /* its quiescent-state slots and the lines the send path reads are cache-line aligned */
    if (posix_memalign((void**)&ctx, 64, sizeof(*ctx)) != 0) {
        return -ENOMEM;
    }
    memset(ctx, 0, sizeof(*ctx));
    pthread_mutex_init(&ctx->log_state.mu, NULL);
    if ((params != NULL) && (params->field_mask & RINGK_CTX_PARAM_FIELD_LOG)) {
        ctx->log     = params->log; /* the refusals below are said through it */
        ctx->log_arg = params->log_arg;
    }
    if (ctx_p == NULL) {
        ret = ringk_log_bad_arg(ctx, __func__, "ctx_p is NULL");
        goto err_free;
    }
    if ((params != NULL) && (params->field_mask & ~known)) {
        ret = ringk_log_bad_arg(ctx, __func__, "field_mask 0x%llx has unknown bits (known: "
                                "0x%llx)", (unsigned long long)params->field_mask,
                                (unsigned long long)known);
        goto err_free;
    }
    ret = ctx_configure(ctx, params);
    if (ret != 0) {
        goto err_free;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_cond_init(&ctx->barrier_cv, NULL);
    pthread_mutex_init(&ctx->pool_mu, NULL);
    pthread_cond_init(&ctx->pool_cv, NULL);
    ringk_hlc_init(&ctx->clock);
    if (ctx->pin) {
        ctx_topology_load(ctx);
    }
    ret = ringk_exec_cpu_pool_start(ctx);
    if (ret != 0) {
        ringk_ctx_destroy(ctx); /* joins the threads started, releases the rest */
        return ret;
    }
    *ctx_p = ctx;
    return 0;

err_free:
    ringk_log_flush_ctx(ctx);
    pthread_mutex_destroy(&ctx->log_state.mu);
    free(ctx);
    return ret;
}

int ringk_ctx_destroy(ringk_ctx_t *ctx)
{
    ringk_kernel_t *k;
    unsigned i;

    if (ctx == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "ctx is NULL");
    }
    for (i = 0; i < ctx->nkernels; i++) {
        if (ctx->kernels[i] != NULL) {
            ringk_kernel_terminate(ctx->kernels[i]);
        }
    }
    ringk_exec_dev_stop(ctx); /* every device kernel is done */
    if (ringk_remote_of(ctx) != NULL) {
        ringk_remote_stop(ctx);
    }
    if (ctx->job_from_env) {
        ringk_job_env_release(&ctx->job);
    }
    ringk_exec_cpu_pool_stop(ctx);
    for (i = 0; i < ctx->nkernels; i++) {
        if (ctx->kernels[i] != NULL) {
            ringk_kernel_free(ctx->kernels[i]);
        }
    }
    while ((k = ctx->zombies) != NULL) {
        ctx->zombies = k->zombie_next;
        ringk_kernel_free(k);
    }
    ringk_exec_dev_release(ctx);
    if (ctx->topo != NULL) {
        hwloc_topology_destroy(ctx->topo);
    }
    pthread_mutex_destroy(&ctx->lock);
    pthread_cond_destroy(&ctx->barrier_cv);
    pthread_mutex_destroy(&ctx->pool_mu);
    pthread_cond_destroy(&ctx->pool_cv);
    ringk_log_flush_ctx(ctx);
    pthread_mutex_destroy(&ctx->log_state.mu);
    free(ctx);
    return 0;
}

ringk_hlc_t *ringk_ctx_clock(ringk_ctx_t *ctx)
{
    if (ctx == NULL) {
        ringk_log_bad_arg(NULL, __func__, "ctx is NULL");
        return NULL;
    }
    return &ctx->clock;
}

int ringk_ctx_start(ringk_ctx_t *ctx)
{
    int ret;

    if (ctx == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "ctx is NULL");
    }
    if ((ctx->job.size == 1) || (ringk_remote_of(ctx) != NULL)) {
        return 0;
    }
    ret = ringk_remote_start(ctx);
    if ((ret == 0) && (ctx->devs != NULL)) {
        /* before the first launches: a route is direct from a kernel's first send on */
        ringk_exec_dev_remote_routes(ctx);
        ringk_exec_dev_start_deferred(ctx);
    }
    return ret;
}

int ringk_ctx_rank(const ringk_ctx_t *ctx)
{
    return (ctx != NULL) ? ctx->job.rank : ringk_log_bad_arg(NULL, __func__, "ctx is NULL");
}

int ringk_ctx_size(const ringk_ctx_t *ctx)
{
    return (ctx != NULL) ? ctx->job.size : ringk_log_bad_arg(NULL, __func__, "ctx is NULL");
}

int ringk_ctx_peers_lost(const ringk_ctx_t *ctx)
{
    if (ctx == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "ctx is NULL");
    }
    return (ringk_remote_of(ctx) != NULL) ? ringk_remote_lost(ctx) : 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

void ringk_ctx_directory(ringk_ctx_t *ctx, ringk_directory_t *dir)
{
    const char *names[RINGK_MAX_TOPICS > RINGK_MAX_BARRIERS ? RINGK_MAX_TOPICS :
                      RINGK_MAX_BARRIERS];
    unsigned counts[sizeof(names) / sizeof(names[0])];
    const ringk_kernel_t *k;
    unsigned i;

    memset(dir, 0, sizeof(*dir));
    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->nkernels; i++) {
        k = ctx->kernels[i];
        if (k != NULL) {
            strcpy(dir->kernels[dir->nkernels].name, k->name);
            dir->kernels[dir->nkernels].id     = k->id;
            dir->kernels[dir->nkernels].window = k->inbox_size;
            if (k->dev != NULL) {
                ringk_exec_dev_export(ctx, k, &dir->kernels[dir->nkernels].dev);
            }
            dir->nkernels++;
        }
    }
    dir->ntopics = ringk_topic_list(ctx, names, counts);
    for (i = 0; i < dir->ntopics; i++) {
        strcpy(dir->topics[i].name, names[i]);
        dir->topics[i].count = counts[i];
    }
    dir->nbarriers = ringk_barrier_list(ctx, names, counts);
    for (i = 0; i < dir->nbarriers; i++) {
        strcpy(dir->barriers[i].name, names[i]);
        dir->barriers[i].count = counts[i];
    }
    pthread_mutex_unlock(&ctx->lock);
}
