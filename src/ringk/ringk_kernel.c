/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: ring kernels: their parameters, creation, life cycle (activate, deactivate,
 * terminate, destroy) and statistics. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_exec.h"
#include "dev/ringk_dev.h"
#include "ringk_internal.h"
#include "ringk_route.h"

#include <ringk/api/ringk_device_abi.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int copy_list(ringk_ctx_t *ctx, const char *kernel, const char *what,
                     const char *const *src, name_list_t *dst)
{
    unsigned i;

    dst->count = 0;
    for (; (src != NULL) && (*src != NULL); src++) {
        if (dst->count == RINGK_LIST_MAX) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s has more than %d entries",
                          kernel, what, RINGK_LIST_MAX);
            return -EINVAL;
        }
        if ((**src == '\0') || (strlen(*src) >= RINGK_NAME_MAX)) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s entry '%s' is empty or longer "
                          "than %d characters", kernel, what, *src, RINGK_NAME_MAX - 1);
            return -EINVAL;
        }
        for (i = 0; i < dst->count; i++) {
            if (!strcmp(dst->names[i], *src)) {
                ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s lists '%s' twice", kernel,
                              what, *src);
                return -EINVAL;
            }
        }
        strcpy(dst->names[dst->count++], *src);
    }
    return 0;
}

void ringk_kernel_free(ringk_kernel_t *k)
{
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    ringk_exec_dev_free(k);
    free(k->inbox_mem);
    free(k);
}

/* ---- kernels -------------------------------------------------------------------------------- */

static int check_pow2(ringk_ctx_t *ctx, const char *kernel, const char *what, unsigned v)
{
    if ((v < 2) || (v > 65536) || (v & (v - 1))) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s %u is not a power of 2 between 2 "
                      "and 65536", kernel, what, v);
        return -EINVAL;
    }
    return 0;
}

static int check_size(ringk_ctx_t *ctx, const char *kernel, const char *what, unsigned v)
{
    if ((v < 1) || (v > RINGK_MAX_PAYLOAD)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s %u is out of range 1..%u", kernel,
                      what, v, RINGK_MAX_PAYLOAD);
        return -EINVAL;
    }
    return 0;
}

/* The kernel's name and handler: 0, or -EINVAL (logged). */
static int kernel_params_identity(ringk_ctx_t *ctx, const ringk_kernel_params_t *p,
                                  ringk_kernel_t *k)
{
    const uint64_t f = p->field_mask;

    if (!(f & RINGK_KERNEL_PARAM_FIELD_NAME) || (p->name == NULL) || (*p->name == '\0')) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR,
                      "a kernel needs a name (RINGK_KERNEL_PARAM_FIELD_NAME)");
        return -EINVAL;
    }
    if (strlen(p->name) >= RINGK_NAME_MAX) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel name '%.20s...' is longer than %d characters",
                      p->name, RINGK_NAME_MAX - 1);
        return -EINVAL;
    }
    strcpy(k->name, p->name);
    if ((f & RINGK_KERNEL_PARAM_FIELD_BACKENDS) && (p->backends == RINGK_BACKEND_CUDA) &&
        !((f & RINGK_KERNEL_PARAM_FIELD_HANDLER) && (p->handler != NULL))) {
        k->arg = p->arg; /* a device kernel only: its handler is in device_entry */
        return 0;
    }
    if (!(f & RINGK_KERNEL_PARAM_FIELD_HANDLER) || (p->handler == NULL)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' needs a handler%s", k->name,
                      ((f & RINGK_KERNEL_PARAM_FIELD_BACKENDS) &&
                       (p->backends & RINGK_BACKEND_CUDA)) ? " (CPU | CUDA: the one it runs on "
                      "the CPU when no device is there; a device kernel alone needs none)" : "");
        return -EINVAL;
    }
    k->handler = p->handler;
    k->arg     = p->arg;
    return 0;
}

/* The numbers and modes of the parameters, or their defaults, into @a k. */
static void kernel_params_values(const ringk_kernel_params_t *p, ringk_kernel_t *k)
{
    const uint64_t f = p->field_mask;

    k->inbox_size        = (f & RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE) ? p->inbox_size : 256;
    k->max_in            = (f & RINGK_KERNEL_PARAM_FIELD_MAX_IN) ? p->max_in
                                                                 : RINGK_MSG_MAX_DEFAULT;
    k->max_out           = (f & RINGK_KERNEL_PARAM_FIELD_MAX_OUT) ? p->max_out
                                                                  : RINGK_MSG_MAX_DEFAULT;
    k->mode              = (f & RINGK_KERNEL_PARAM_FIELD_MODE) ? p->mode : RINGK_MODE_PERSISTENT;
    k->max_iterations    = (f & RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS) ? p->max_iterations
                                                                         : 1000;
    k->processing        = (f & RINGK_KERNEL_PARAM_FIELD_PROCESSING) ? p->processing
                                                                     : RINGK_PROCESSING_CONTINUOUS;
    k->max_per_iteration = (f & RINGK_KERNEL_PARAM_FIELD_MAX_PER_ITER) ? p->max_per_iteration : 0;
    k->placement         = (f & RINGK_KERNEL_PARAM_FIELD_PLACEMENT) ? p->placement : -1;
    k->timestamps        = (f & RINGK_KERNEL_PARAM_FIELD_TIMESTAMPS) ? !!p->timestamps : 0;
    k->peer_events       = (f & RINGK_KERNEL_PARAM_FIELD_PEER_EVENTS) ? !!p->peer_events : 0;
    k->dev_threads       = (f & RINGK_KERNEL_PARAM_FIELD_THREADS) ? p->threads : RINGK_DEV_WARP;
    k->dev_blocks        = (f & RINGK_KERNEL_PARAM_FIELD_BLOCKS) ? p->blocks : 1;
}

/* Checks the values kernel_params_values() set: 0 or -EINVAL, each refusal naming the value
 * and the limit. */
static int kernel_params_check(ringk_ctx_t *ctx, const ringk_kernel_params_t *p,
                               const ringk_kernel_t *k)
{
    const char *name = k->name;
    int ret;

    if (((ret = check_pow2(ctx, name, "inbox_size", k->inbox_size)) != 0) ||
        ((ret = check_size(ctx, name, "max_in", k->max_in)) != 0) ||
        ((ret = check_size(ctx, name, "max_out", k->max_out)) != 0)) {
        return ret;
    }
    if ((unsigned)k->mode > RINGK_MODE_EVENT_DRIVEN) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': mode %d is not persistent (0) or "
                      "event-driven (1)", name, (int)k->mode);
        return -EINVAL;
    }
    if ((unsigned)k->processing > RINGK_PROCESSING_ADAPTIVE) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': processing %d is not continuous (0), "
                      "batch (1) or adaptive (2)", name, (int)k->processing);
        return -EINVAL;
    }
    if ((k->max_iterations < 1) || (k->max_iterations > 100000000)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': max_iterations %u is out of range "
                      "1..100000000", name, k->max_iterations);
        return -EINVAL;
    }
    if ((k->placement < -1) || (k->placement >= RINGK_PLACEMENT_MAX)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': placement %d is out of range -1..%d",
                      name, k->placement, RINGK_PLACEMENT_MAX - 1);
        return -EINVAL;
    }
    if ((k->dev_threads < 1) || (k->dev_threads > RINGK_DEV_THREADS_MAX)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': threads %u is out of range 1..%u",
                      name, k->dev_threads, RINGK_DEV_THREADS_MAX);
        return -EINVAL;
    }
    if ((k->dev_blocks < 1) || (k->dev_blocks > RINGK_DEV_BLOCKS_MAX)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': blocks %u is out of range 1..%u",
                      name, k->dev_blocks, RINGK_DEV_BLOCKS_MAX);
        return -EINVAL;
    }
    if ((p->field_mask & RINGK_KERNEL_PARAM_FIELD_BACKENDS) &&
        ((p->backends == 0) || (p->backends & ~(unsigned)(RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA)))) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': backends 0x%x is not CPU (0x1), CUDA "
                      "(0x2) or both", name, p->backends);
        return -EINVAL;
    }
    return 0;
}

/* Copies the name lists of the parameters. */
static int kernel_params_lists(ringk_ctx_t *ctx, const ringk_kernel_params_t *p,
                               ringk_kernel_t *k)
{
    const uint64_t f = p->field_mask;
    const char *name = k->name;
    int ret = 0;

    if (((f & RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO) &&
         (ret = copy_list(ctx, name, "publishes_to", p->publishes_to, &k->publishes_to))) ||
        ((f & RINGK_KERNEL_PARAM_FIELD_SUBSCRIBES_TO) &&
         (ret = copy_list(ctx, name, "subscribes_to", p->subscribes_to, &k->subscribes_to))) ||
        ((f & RINGK_KERNEL_PARAM_FIELD_TOPICS_PUB) &&
         (ret = copy_list(ctx, name, "topics_pub", p->topics_pub, &k->topics_pub))) ||
        ((f & RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB) &&
         (ret = copy_list(ctx, name, "topics_sub", p->topics_sub, &k->topics_sub))) ||
        ((f & RINGK_KERNEL_PARAM_FIELD_BARRIERS) &&
         (ret = copy_list(ctx, name, "barriers", p->barriers, &k->barriers)))) {
        return ret;
    }
    return 0;
}

/* Validates the parameters into @a k; every refusal names the value and the limit. */
static int kernel_params(ringk_ctx_t *ctx, const ringk_kernel_params_t *p, ringk_kernel_t *k)
{
    int ret;

    if (p->field_mask & ~(uint64_t)RINGK_KERNEL_PARAM_FIELDS) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel parameters: field_mask 0x%llx has unknown "
                      "bits (known: 0x%llx)", (unsigned long long)p->field_mask,
                      (unsigned long long)RINGK_KERNEL_PARAM_FIELDS);
        return -EINVAL;
    }
    ret = kernel_params_identity(ctx, p, k);
    if (ret != 0) {
        return ret;
    }
    kernel_params_values(p, k);
    ret = kernel_params_check(ctx, p, k);
    return (ret != 0) ? ret : kernel_params_lists(ctx, p, k);
}

/* Adds @a k to its topics and barriers; under ctx->lock. */
static int kernel_register(ringk_ctx_t *ctx, ringk_kernel_t *k)
{
    int ret = ringk_topic_join(ctx, k);

    return (ret != 0) ? ret : ringk_barrier_join(ctx, k);
}

/* The inbox holds inbox_size messages of up to 224 payload bytes (one cell each) and at least
 * two of the largest: 0, or -ENOMEM (logged). */
static int kernel_inbox_alloc(ringk_ctx_t *ctx, ringk_kernel_t *k)
{
    uint32_t ncells = k->inbox_size, big = RINGK_MSG_CELLS(k->max_in);
    uint64_t bytes;

    while (ncells < 2 * big) {
        ncells *= 2;
    }
    bytes = ringk_ring_bytes(ncells, RINGK_CELL);
    if ((posix_memalign(&k->inbox_mem, 4096, bytes) != 0) ||
        (ringk_ring_init(&k->inbox, k->inbox_mem, bytes, ncells, RINGK_CELL) != 0)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': cannot allocate an inbox of %llu bytes",
                      k->name, (unsigned long long)bytes);
        free(k->inbox_mem);
        k->inbox_mem = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* Under ctx->lock: the slot for a new kernel (its id is the slot + 1), or -1. The slot of a
 * destroyed kernel is taken again while the context has not joined a job, whose other
 * processes know kernels by id. */
static int kernel_slot(ringk_ctx_t *ctx)
{
    unsigned i;

    if (ringk_remote_of(ctx) == NULL) {
        for (i = 0; i < ctx->nkernels; i++) {
            if (ctx->kernels[i] == NULL) {
                return (int)i;
            }
        }
    }
    return (ctx->nkernels < RINGK_MAX_KERNELS) ? (int)ctx->nkernels : -1;
}

/* Adds @a k to the context under a name no other kernel has, and to its topics and barriers:
 * 0, -EEXIST, -ENOSPC (logged). */
static int kernel_insert(ringk_ctx_t *ctx, ringk_kernel_t *k)
{
    int slot, ret;

    pthread_mutex_lock(&ctx->lock);
    if (ringk_kernel_find(ctx, k->name) != NULL) {
        pthread_mutex_unlock(&ctx->lock);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "a kernel named '%s' exists already", k->name);
        return -EEXIST;
    }
    slot = kernel_slot(ctx);
    if (slot < 0) {
        pthread_mutex_unlock(&ctx->lock);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "more than %d kernels in one context",
                      RINGK_MAX_KERNELS);
        return -ENOSPC;
    }
    ret = kernel_register(ctx, k);
    if (ret != 0) {
        pthread_mutex_unlock(&ctx->lock);
        return ret;
    }
    k->id = (uint32_t)slot + 1;
    __atomic_store_n(&ctx->kernels[slot], k, __ATOMIC_RELEASE);
    if ((unsigned)slot == ctx->nkernels) {
        __atomic_store_n(&ctx->nkernels, ctx->nkernels + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ctx->lock);
    return 0;
}

int ringk_kernel_create(ringk_ctx_t *ctx, const ringk_kernel_params_t *params,
                        ringk_kernel_t **kernel_p)
{
    ringk_kernel_t *k;
    unsigned i;
    int ret;

    if ((ctx == NULL) || (params == NULL) || (kernel_p == NULL)) {
        return ringk_log_bad_arg(ctx, __func__, "%s is NULL", (ctx == NULL) ? "ctx" :
                                 (params == NULL) ? "params" : "kernel_p");
    }
    if (posix_memalign((void**)&k, 64, sizeof(*k)) != 0) {
        return -ENOMEM;
    }
    memset(k, 0, sizeof(*k));
    k->ctx  = ctx;
    k->exec = &ringk_exec_cpu;
    k->state = (params->field_mask & RINGK_KERNEL_PARAM_FIELD_START_INACTIVE) ?
               RINGK_KERNEL_INACTIVE : RINGK_KERNEL_ACTIVE;
    ret     = kernel_params(ctx, params, k);
    if (ret != 0) {
        goto err_free;
    }
    /* a device kernel's inbox is its host ingress ring, in the device's mapped memory */
    ret = ringk_exec_dev_create(ctx, params, k);
    if (ret == 0) {
        ret = kernel_inbox_alloc(ctx, k);
    } else if (ret == 1) {
        ret = 0;
    }
    if (ret != 0) {
        goto err_free;
    }
    for (i = 0; i < RINGK_LIST_MAX; i++) {
        k->routes[i].rank  = -1;
        ringk_route_name_init(&k->routes[i], k->publishes_to.names[i]);
        k->routes[i].index = i;
        k->routes[i].bit   = 1u << i;
    }
    k->last_rt = &k->routes[0];
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    if (k->dev == NULL) {
        k->sleep_word = (k->mode == RINGK_MODE_PERSISTENT) ? &k->sleeping : &ctx->pool_sleeping;
    }
    if ((k->mode == RINGK_MODE_PERSISTENT) && (k->dev == NULL)) {
        /* its handler may run in a receive callback (ringk_deliver_direct), unless it could
         * need a wait there that cannot be deferred (a barrier) or it publishes */
        k->recv_inline = ctx->recv_inline && (k->barriers.count == 0) &&
                         (k->topics_pub.count == 0);
        /* by default, processes of one job on one host start at different cores */
        k->core = (k->placement >= 0) ? (unsigned)k->placement :
                  __atomic_fetch_add(&ctx->next_core, 1, __ATOMIC_RELAXED) + ctx->job.rank;
    }
    ret = kernel_insert(ctx, k);
    if (ret != 0) {
        goto err_kernel_free;
    }
    ret = k->exec->start(k);
    if (ret != 0) {
        /* registered, so others may hold it already: it stays, terminated, until the
         * context goes */
        __atomic_store_n(&k->state, RINGK_KERNEL_TERMINATED, __ATOMIC_RELEASE);
        return ret;
    }
    ringk_log_msg(ctx, RINGK_LOG_DEBUG, "kernel '%s' (id %u) launched: %s, mode %d, inbox_size %u "
                  "(%u cells of %u bytes: two messages of max_in %u fit)", k->name, k->id,
                  k->exec->name, (int)k->mode, k->inbox_size, k->inbox.ncells, RINGK_CELL, k->max_in);
    *kernel_p = k;
    return 0;

err_kernel_free:
    ringk_kernel_free(k); /* its mutex, condition variable and inbox, then itself */
    return ret;
err_free:
    ringk_exec_dev_free(k); /* its device memory goes back to the slabs */
    free(k->inbox_mem);
    free(k);
    return ret;
}

static int set_state(ringk_kernel_t *k, int from, int to)
{
    int expect = from;

    if (!__atomic_compare_exchange_n(&k->state, &expect, to, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_RELAXED)) {
        if (expect == to) {
            return 0;
        }
        ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s' is %s: it cannot be %s", k->name,
                      (expect == RINGK_KERNEL_TERMINATING) ? "terminating" : "terminated",
                      (to == RINGK_KERNEL_ACTIVE) ? "activated" : "deactivated");
        return -EINVAL;
    }
    if (k->exec->state != NULL) {
        k->exec->state(k);
    }
    pthread_mutex_lock(&k->mu);
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    ringk_wake(k);
    return 0;
}

int ringk_kernel_activate(ringk_kernel_t *k)
{
    if (k == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "kernel is NULL");
    }
    return set_state(k, RINGK_KERNEL_INACTIVE, RINGK_KERNEL_ACTIVE);
}

int ringk_kernel_deactivate(ringk_kernel_t *k)
{
    if (k == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "kernel is NULL");
    }
    return set_state(k, RINGK_KERNEL_ACTIVE, RINGK_KERNEL_INACTIVE);
}

void ringk_kernel_terminating(ringk_kernel_t *k)
{
    int state = ringk_load_i(&k->state);

    if ((state == RINGK_KERNEL_ACTIVE) || (state == RINGK_KERNEL_INACTIVE)) {
        /* an inactive kernel is resumed to drain */
        __atomic_compare_exchange_n(&k->state, &state, RINGK_KERNEL_TERMINATING, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
        if (k->exec->state != NULL) {
            k->exec->state(k);
        }
        pthread_mutex_lock(&k->mu);
        pthread_cond_broadcast(&k->cv);
        pthread_mutex_unlock(&k->mu);
        ringk_wake(k);
        ringk_barrier_cancel(k->ctx); /* a wait of its handler at a barrier ends */
    }
}

int ringk_kernel_terminate(ringk_kernel_t *k)
{
    if (k == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "kernel is NULL");
    }
    if (ringk_tls_inline != NULL) {
        /* it waits for @a k, which may wait for the worker's lock: after the callback */
        ringk_flush_running();
        return ringk_defer_call(k->ctx, RINGK_DEFER_TERMINATE, k, -1, NULL, RINGK_MSG_DATA, NULL,
                                0, 0);
    }
    ringk_wait_prepare(); /* it waits for @a k to drain */
    ringk_kernel_terminating(k);
    if (k == ringk_tls_running) {
        return 0; /* its own handler: it stops once that returned and its inbox is drained */
    }
    pthread_mutex_lock(&k->mu);
    while (ringk_load_i(&k->state) != RINGK_KERNEL_TERMINATED) {
        struct timespec ts;
        ringk_timespec_in_ms(&ts, 10);
        pthread_cond_timedwait(&k->cv, &k->mu, &ts);
    }
    pthread_mutex_unlock(&k->mu);
    k->exec->join(k);
    return 0;
}

int ringk_kernel_destroy(ringk_kernel_t *k)
{
    ringk_ctx_t *ctx;

    if (k == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "kernel is NULL");
    }
    ctx = k->ctx;
    if (ringk_tls_inline != NULL) {
        /* it waits for @a k and for the executors, which may wait for the worker's lock */
        ringk_flush_running();
        return ringk_defer_call(ctx, RINGK_DEFER_DESTROY, k, -1, NULL, RINGK_MSG_DATA, NULL, 0,
                                0);
    }
    if (k == ringk_tls_running) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' cannot destroy itself from its own "
                      "handler (ringk_kernel_terminate stops it)", k->name);
        return -EDEADLK;
    }
    ringk_kernel_terminate(k);
    /* unlinked: no lookup finds it, no topic lists it, routes to it resolve again */
    pthread_mutex_lock(&ctx->lock);
    __atomic_store_n(&ctx->kernels[k->id - 1], NULL, __ATOMIC_RELEASE);
    ringk_topic_leave(ctx, k);
    ringk_exec_dev_route_drop(ctx, k);
    __atomic_add_fetch(&ctx->kernels_gen, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&ctx->lock);
    if (ringk_qs_synchronize(ctx, RINGK_DESTROY_GRACE_MS) == 0) {
        ringk_kernel_free(k);
        return 0;
    }
    /* a thread that may still hold it did not come by in time (a handler waiting long): the
     * memory goes with the context */
    ringk_log_msg(ctx, RINGK_LOG_DEBUG, "kernel '%s' destroyed; its memory is freed with the "
                  "context (a thread did not pass a quiescent state within %d ms)", k->name,
                  RINGK_DESTROY_GRACE_MS);
    pthread_mutex_lock(&ctx->lock);
    k->zombie_next = ctx->zombies;
    ctx->zombies   = k;
    pthread_mutex_unlock(&ctx->lock);
    return 0;
}

uint32_t ringk_kernel_id(const ringk_kernel_t *k)
{
    if (k == NULL) {
        ringk_log_bad_arg(NULL, __func__, "kernel is NULL");
        return 0;
    }
    return k->id;
}

ringk_ctx_t *ringk_kernel_ctx(const ringk_kernel_t *k)
{
    if (k == NULL) {
        ringk_log_bad_arg(NULL, __func__, "kernel is NULL");
        return NULL;
    }
    return k->ctx;
}

const char *ringk_kernel_name(const ringk_kernel_t *k)
{
    if (k == NULL) {
        ringk_log_bad_arg(NULL, __func__, "kernel is NULL");
        return NULL;
    }
    return k->name;
}

/* The statistic of field @a bit of the mask @a mask: *dst = the counter at @a src. */
#define STATS_COPY(mask, bit, dst, src) \
    do { \
        if ((mask) & RINGK_KERNEL_STATS_FIELD_##bit) { \
            (dst) = __atomic_load_n(src, __ATOMIC_RELAXED); \
        } \
    } while (0)

int ringk_kernel_stats_query(ringk_kernel_t *k, ringk_kernel_stats_t *s)
{
    uint64_t m;
    unsigned i;

    if ((k == NULL) || (s == NULL)) {
        return ringk_log_bad_arg((k != NULL) ? k->ctx : NULL, __func__, "%s is NULL",
                                 (k == NULL) ? "kernel" : "stats_p");
    }
    if (s->field_mask & ~(uint64_t)RINGK_KERNEL_STATS_FIELD_ALL) {
        return ringk_log_bad_arg(k->ctx, __func__, "field_mask 0x%llx has unknown bits "
                                 "(known: 0x%llx)", (unsigned long long)s->field_mask,
                                 (unsigned long long)RINGK_KERNEL_STATS_FIELD_ALL);
    }
    m = s->field_mask;
    if (m & RINGK_KERNEL_STATS_FIELD_STATE) {
        s->state = (ringk_kernel_state_t)ringk_load_i(&k->state);
    }
    if (k->dev != NULL) {
        s->field_mask &= ~(uint64_t)RINGK_KERNEL_STATS_FIELD_STATE;
        ringk_exec_dev_stats(k, s); /* its counters are in its control block */
        s->field_mask = m;
        m &= ~(uint64_t)(RINGK_KERNEL_STATS_FIELD_MSGS_IN | RINGK_KERNEL_STATS_FIELD_MSGS_OUT |
                         RINGK_KERNEL_STATS_FIELD_HANDLER_ERRORS |
                         RINGK_KERNEL_STATS_FIELD_QUEUE_DEPTH | RINGK_KERNEL_STATS_FIELD_DEVICE |
                         RINGK_KERNEL_STATS_FIELD_SHAPE);
    } else if (m & RINGK_KERNEL_STATS_FIELD_DEVICE) {
        s->device      = RINGK_DEVICE_NONE;
        s->launches    = 0;
        s->bad_cells   = 0;
        s->send_failed = 0;
        s->sent_direct = 0;
        s->parked      = 0;
    }
    if ((k->dev == NULL) && (m & RINGK_KERNEL_STATS_FIELD_SHAPE)) {
        s->threads     = 1;
        s->blocks      = 1;
        s->block_share = 0;
    }
    if ((k->dev == NULL) && (m & RINGK_KERNEL_STATS_FIELD_DEVICE_TALLY)) {
        memset(&s->tally, 0, sizeof(s->tally)); /* no device code counted */
    }
    STATS_COPY(m, MSGS_IN, s->msgs_in, &k->msgs_in);
    STATS_COPY(m, MSGS_OUT, s->msgs_out, &k->msgs_out);
    STATS_COPY(m, REFUSED_FULL, s->refused_full, &k->refused_full);
    STATS_COPY(m, HANDLER_ERRORS, s->handler_errors, &k->handler_errors);
    STATS_COPY(m, BATCHED_IN, s->batched_in, &k->batched_in);
    STATS_COPY(m, INLINE_IN, s->inline_in, &k->inline_in);
    STATS_COPY(m, DEFERRED, s->deferred, &k->deferred);
    STATS_COPY(m, DEFERRED_FAILED, s->deferred_failed, &k->deferred_failed);
    if (m & RINGK_KERNEL_STATS_FIELD_DIRECT_IN) {
        /* the handler calls in a receive callback are counted apart (inline_in) */
        s->direct_in = __atomic_load_n(&k->direct_in, __ATOMIC_RELAXED) +
                       __atomic_load_n(&k->inline_in, __ATOMIC_RELAXED);
    }
    if (m & RINGK_KERNEL_STATS_FIELD_DROPS) {
        s->drops = 0;
    }
    if (m & RINGK_KERNEL_STATS_FIELD_QUEUE_DEPTH) {
        s->queue_depth = __atomic_load_n(&k->inbox.prod->pos, __ATOMIC_RELAXED) -
                         __atomic_load_n(&k->head, __ATOMIC_RELAXED);
    }
    for (i = 0; (m & RINGK_KERNEL_STATS_FIELD_LATENCY_HIST) && (i < 32); i++) {
        s->latency_hist[i] = __atomic_load_n(&k->latency_hist[i], __ATOMIC_RELAXED);
    }
    return 0;
}
