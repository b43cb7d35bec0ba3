/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer, joining the job (UCP context, worker, endpoints, the directory
 * exchange) and stopping. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* For each local kernel that lists subscribes_to: which kernels of other processes it takes
 * messages from (those it names, and every process's host, which local sends do not check
 * either). Built once the directory is in; net_am_recv() refuses the others. A kernel's
 * subscribes_to never changes once it exists. */
static int allowed_build(ringk_remote_t *r)
{
    const ringk_kernel_t *k;
    unsigned id, j, e;
    int rank;

    for (id = 1; id <= RINGK_MAX_KERNELS; id++) {
        k = ringk_kernel_by_id(r->ctx, id);
        if ((k == NULL) || (k->subscribes_to.count == 0)) {
            continue;
        }
        r->allowed[id] = calloc((size_t)r->size * RINGK_SLOTS, 1);
        if (r->allowed[id] == NULL) {
            return -ENOMEM;
        }
        for (rank = 0; rank < r->size; rank++) {
            r->allowed[id][rank * RINGK_SLOTS] = 1;
            for (e = 0; e < RINGK_DIR_ENTRIES; e++) {
                const dir_entry_t *d = &r->dir[(size_t)rank * RINGK_DIR_ENTRIES + e];

                for (j = 0; d->used && (j < k->subscribes_to.count); j++) {
                    if (!strncmp(d->name, k->subscribes_to.names[j], RINGK_NAME_MAX)) {
                        r->allowed[id][rank * RINGK_SLOTS + d->id] = 1;
                    }
                }
            }
        }
    }
    return 0;
}

/* ---- start and stop ------------------------------------------------------------------------- */

/* Frees what remote_alloc() allocated (each array may be NULL), and @a r. */
static void remote_free(ringk_remote_t *r)
{
    unsigned i;

    for (i = 0; i <= RINGK_MAX_KERNELS; i++) {
        free(r->allowed[i]);
    }
    free(r->eps);
    free(r->dead);
    free(r->left);
    free(r->here);
    free(r->acked);
    free(r->ack_due);
    free(r->ctl_err_next);
    free(r->ctl_err_quiet);
    free(r->window);
    free(r->credits);
    free(r->owed);
    free(r->owed_queued);
    free(r->owed_queue);
    free(r->dir);
    free(r->topics);
    free(r->barriers);
    free(r->event_state);
    free(r->event_kind);
    free(r->event_next);
    pthread_mutex_destroy(&r->nap_mu);
    pthread_cond_destroy(&r->nap_cv);
    pthread_mutex_destroy(&r->backlog_mu);
    pthread_mutex_destroy(&r->owed_mu);
    pthread_mutex_destroy(&r->event_mu);
    free(r);
}

/* Allocates @a r's arrays for a job of @a size processes: 0 or -ENOMEM (remote_free() frees
 * what was allocated). */
static int remote_alloc(ringk_remote_t *r, int size)
{
    const size_t slots = (size_t)size * RINGK_SLOTS;
    struct {
        void   *field;   /* the address of a pointer member of @a r */
        size_t  n, size;
    } arrays[] = {
#define REMOTE_ARRAY(_field, _n) {&r->_field, (_n), sizeof(*r->_field)}
        REMOTE_ARRAY(eps, size), REMOTE_ARRAY(dead, size), REMOTE_ARRAY(left, size),
        REMOTE_ARRAY(here, size),
        REMOTE_ARRAY(event_state, size), REMOTE_ARRAY(event_kind, size),
        REMOTE_ARRAY(event_next, size), REMOTE_ARRAY(acked, size), REMOTE_ARRAY(ack_due, size),
        REMOTE_ARRAY(ctl_err_next, size), REMOTE_ARRAY(ctl_err_quiet, size),
        REMOTE_ARRAY(window, slots), REMOTE_ARRAY(credits, slots), REMOTE_ARRAY(owed, slots),
        REMOTE_ARRAY(owed_queued, slots), REMOTE_ARRAY(owed_queue, slots),
        REMOTE_ARRAY(dir, (size_t)size * RINGK_DIR_ENTRIES),
        REMOTE_ARRAY(topics, (size_t)size * RINGK_MAX_TOPICS),
        REMOTE_ARRAY(barriers, (size_t)size * RINGK_MAX_BARRIERS)
#undef REMOTE_ARRAY
    };
    pthread_condattr_t cattr;
    unsigned i;
    void *mem;

    pthread_mutex_init(&r->nap_mu, NULL);
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->nap_cv, &cattr);
    pthread_condattr_destroy(&cattr);
    pthread_mutex_init(&r->backlog_mu, NULL);
    pthread_mutex_init(&r->owed_mu, NULL);
    pthread_mutex_init(&r->event_mu, NULL);
    r->size = size;
    for (i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
        mem = calloc(arrays[i].n, arrays[i].size);
        if (mem == NULL) {
            return -ENOMEM;
        }
        memcpy(arrays[i].field, &mem, sizeof(mem)); /* into a pointer of its own type */
    }
    return 0;
}

/* The UCP context and the worker, with the handlers of every active message of the job. */
static int worker_setup(ringk_remote_t *r)
{
    static const struct {
        unsigned     id;
        ucp_am_recv_callback_t cb;
    } handlers[] = {
        {RINGK_AM_MSG, net_am_recv}, {RINGK_AM_TOPIC, net_am_topic_recv},
        {RINGK_AM_BARRIER, net_am_barrier_recv}, {RINGK_AM_BYE, net_am_bye_recv},
        {RINGK_AM_CREDIT, net_am_credit_recv}
    };
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features   = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
        .mt_workers_shared = 1
    };
    ucp_worker_params_t wparams = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_MULTI
    };
    ucp_am_handler_param_t am = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .arg = r, .flags = UCP_AM_FLAG_WHOLE_MSG
    };
    ucp_worker_attr_t wattr = {.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE};
    ucp_config_t *config;
    unsigned i;

    if ((ucp_config_read(NULL, NULL, &config) != UCS_OK) ||
        (ucp_init(&params, config, &r->context) != UCS_OK)) {
        ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "ucp_init failed");
        return -EIO;
    }
    ucp_config_release(config);
    if ((ucp_worker_create(r->context, &wparams, &r->worker) != UCS_OK) ||
        (ucp_worker_query(r->worker, &wattr) != UCS_OK) ||
        (ucp_worker_get_efd(r->worker, &r->efd) != UCS_OK)) {
        ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "cannot set up the UCP worker");
        return -EIO;
    }
    /* The kernels' threads and the progress thread share the worker: a UCX built without
     * multi-thread support gives a single-threaded one, which they would corrupt. */
    if (wattr.thread_mode != UCS_THREAD_MODE_MULTI) {
        ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "UCX %s gives no thread-safe worker (it was "
                      "built without multi-thread support, configure --enable-mt): ringk's "
                      "threads share one; use a UCX built with --enable-mt",
                      ucp_get_version_string());
        return -ENOTSUP;
    }
    for (i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++) {
        am.id = handlers[i].id;
        am.cb = handlers[i].cb;
        if (ucp_worker_set_am_recv_handler(r->worker, &am) != UCS_OK) {
            ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "cannot set up the UCP worker");
            return -EIO;
        }
    }
    return 0;
}

/* Exchanges the workers' addresses: 1. their lengths and nodes, 2. the addresses, padded to
 * the longest. On success *all_p holds r->size addresses, *maxlen_p bytes apart, and *nodes_p
 * the nodes by rank (the caller frees both). */
static int addresses_exchange(ringk_remote_t *r, uint8_t **all_p, uint64_t *maxlen_p,
                              ringk_node_id_t **nodes_p)
{
    ringk_ctx_t *ctx = r->ctx;
    ringk_node_id_t *nodes = NULL, node;
    uint64_t len, maxlen = 0;
    uint8_t *mine = NULL, *all = NULL;
    wire_hello_t me, *lens;
    char why[256];
    ucp_address_t *addr;
    int ret, rank;

    if (ucp_worker_get_address(r->worker, &addr, &len) != UCS_OK) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "cannot get the UCP worker's address");
        return -EIO;
    }
    ringk_node_id_get(&node);
    ringk_wire_hello_make(&me, len, &node);
    lens  = calloc(r->size, sizeof(*lens));
    nodes = calloc(r->size, sizeof(*nodes));
    ret   = ((lens == NULL) || (nodes == NULL)) ? -ENOMEM :
            ctx->job.allgather(ctx->job.arg, &me, lens, sizeof(me));
    for (rank = 0; (ret == 0) && (rank < r->size); rank++) {
        if (ringk_wire_hello_check(&lens[rank], &me, rank, why, sizeof(why)) != 0) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "%s", why);
            ret = -EPROTO;
            break;
        }
        maxlen      = (lens[rank].len > maxlen) ? lens[rank].len : maxlen;
        nodes[rank] = lens[rank].node;
    }
    for (rank = 0; (ret == 0) && (rank < r->size); rank++) {
        r->here[rank] = (uint8_t)ringk_node_id_same(&nodes[rank], &me.node, NULL, 0);
    }
    if (ret == 0) {
        mine = calloc(1, maxlen);
        all  = calloc(r->size, maxlen);
        if ((mine == NULL) || (all == NULL)) {
            ret = -ENOMEM;
        } else {
            memcpy(mine, addr, len);
            ret = ctx->job.allgather(ctx->job.arg, mine, all, maxlen);
        }
    }
    ucp_worker_release_address(r->worker, addr);
    free(lens);
    free(mine);
    if (ret != 0) {
        free(all);
        free(nodes);
        return ret;
    }
    *all_p    = all;
    *maxlen_p = maxlen;
    *nodes_p  = nodes;
    return 0;
}

/* The directory of this process in the wire's form: its kernels, and its topics and barriers
 * with their local participants. */
static void directory_pack(const ringk_directory_t *d, dir_entry_t *entries,
                           topic_entry_t *topics, topic_entry_t *barriers)
{
    unsigned i;

    for (i = 0; i < d->nkernels; i++) {
        strcpy(entries[i].name, d->kernels[i].name);
        entries[i].id     = d->kernels[i].id;
        entries[i].used   = 1;
        entries[i].window = d->kernels[i].window;
        entries[i].dev    = d->kernels[i].dev;
        entries[i].pid    = (uint32_t)getpid();
    }
    for (i = 0; i < d->ntopics; i++) {
        strcpy(topics[i].name, d->topics[i].name);
        topics[i].nsubs = d->topics[i].count;
        topics[i].used  = 1;
    }
    for (i = 0; i < d->nbarriers; i++) {
        strcpy(barriers[i].name, d->barriers[i].name);
        barriers[i].nsubs = d->barriers[i].count;
        barriers[i].used  = 1;
    }
}

/* Every send to a kernel of another process starts with a full window of credits, and the
 * publishes to each process with RINGK_TOPIC_WINDOW. */
static void credits_init(ringk_remote_t *r)
{
    unsigned i;
    int rank;

    for (rank = 0; rank < r->size; rank++) {
        r->window[rank * RINGK_SLOTS + RINGK_TOPIC_SLOT]  = RINGK_TOPIC_WINDOW;
        r->credits[rank * RINGK_SLOTS + RINGK_TOPIC_SLOT] = RINGK_TOPIC_WINDOW;
    }
    for (i = 0; i < (unsigned)r->size * RINGK_DIR_ENTRIES; i++) {
        const dir_entry_t *e = &r->dir[i];

        if (e->used) {
            rank = (int)(i / RINGK_DIR_ENTRIES);
            r->window[rank * RINGK_SLOTS + e->id]  = e->window;
            r->credits[rank * RINGK_SLOTS + e->id] = e->window;
        }
    }
}

/* Exchanges the directories (kernels, topics, barriers), checked as they come from peers. */
static int directory_exchange(ringk_remote_t *r)
{
    ringk_ctx_t *ctx             = r->ctx;
    ringk_directory_t *d         = calloc(1, sizeof(*d));
    dir_entry_t *entries         = calloc(RINGK_DIR_ENTRIES, sizeof(*entries));
    topic_entry_t *topics        = calloc(RINGK_MAX_TOPICS, sizeof(*topics));
    topic_entry_t *barriers      = calloc(RINGK_MAX_BARRIERS, sizeof(*barriers));
    int ret                      = -ENOMEM;

    if ((d == NULL) || (entries == NULL) || (topics == NULL) || (barriers == NULL)) {
        goto out;
    }
    ringk_ctx_directory(ctx, d);
    directory_pack(d, entries, topics, barriers);
    ret = ctx->job.allgather(ctx->job.arg, entries, r->dir, RINGK_DIR_ENTRIES * sizeof(*entries));
    if (ret != 0) {
        goto out;
    }
    ringk_wire_dir_fix(r->dir, (size_t)r->size * RINGK_DIR_ENTRIES);
    credits_init(r);
    ret = allowed_build(r);
    if (ret != 0) {
        goto out;
    }
    ret = ctx->job.allgather(ctx->job.arg, topics, r->topics, RINGK_MAX_TOPICS * sizeof(*topics));
    if (ret != 0) {
        goto out;
    }
    ringk_wire_topics_fix(r->topics, (size_t)r->size * RINGK_MAX_TOPICS);
    ret = ctx->job.allgather(ctx->job.arg, barriers, r->barriers,
                             RINGK_MAX_BARRIERS * sizeof(*barriers));
    if (ret == 0) {
        ringk_wire_topics_fix(r->barriers, (size_t)r->size * RINGK_MAX_BARRIERS); /* same shape */
    }
out:
    free(d);
    free(entries);
    free(topics);
    free(barriers);
    return ret;
}

/* An endpoint to every other process, its failures reported to net_ep_error(). */
static int endpoints_connect(ringk_remote_t *r, const uint8_t *all, uint64_t maxlen)
{
    int rank;

    for (rank = 0; rank < r->size; rank++) {
        ucp_ep_params_t ep = {
            .field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
            .address         = (const ucp_address_t*)(all + (size_t)rank * maxlen),
            .err_mode        = UCP_ERR_HANDLING_MODE_PEER,
            .err_handler.cb  = net_ep_error,
            .err_handler.arg = r
        };
        if ((rank != r->ctx->job.rank) && (ucp_ep_create(r->worker, &ep,
                                                         &r->eps[rank]) != UCS_OK)) {
            ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "cannot connect to process %d", rank);
            return -EHOSTUNREACH;
        }
    }
    return 0;
}

/* Undoes a start that failed: endpoints, worker, context, memory. */
static void remote_undo(ringk_remote_t *r)
{
    int rank;

    for (rank = 0; (r->eps != NULL) && (rank < r->size); rank++) {
        if (r->eps[rank] != NULL) {
            ucp_ep_destroy(r->eps[rank]);
        }
    }
    if (r->worker != NULL) {
        ucp_worker_destroy(r->worker);
    }
    if (r->context != NULL) {
        ucp_cleanup(r->context);
    }
    remote_free(r);
}

int ringk_remote_start(ringk_ctx_t *ctx)
{
    const int size = ctx->job.size, me = ctx->job.rank;
    uint8_t *all   = NULL;
    ringk_node_id_t *nodes = NULL;
    const char *why;
    uint64_t maxlen;
    ringk_remote_t *r;
    int ret;

    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    r->ctx = ctx;
    ret    = remote_alloc(r, size);
    if (ret == 0) {
        ret = worker_setup(r);
    }
    if (ret == 0) {
        ret = addresses_exchange(r, &all, &maxlen, &nodes);
    }
    if (ret == 0) {
        ret = directory_exchange(r);
    }
    if (ret == 0) {
        ret = endpoints_connect(r, all, maxlen);
    }
    if (ret == 0) {
        net_report_transports(r, nodes);
    }
    free(all);
    free(nodes);
    if (ret != 0) {
        why = ctx->job_from_env ? ringk_job_env_why(&ctx->job) : NULL;
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "joining the job as rank %d of %d failed: %s%s%s",
                      me, size, strerror(-ret), (why != NULL) ? ": " : "",
                      (why != NULL) ? why : "");
        remote_undo(r);
        return ret;
    }
    /* Published last, once nothing can fail: kernel threads progress the worker and resolve
     * routes to it once they see it, and the directory must be complete before any message
     * can make a kernel send. The progress thread starts before, but progresses nothing until
     * then (a message it took would make a handler send through a context without it). */
    if (pthread_create(&r->progress, NULL, net_progress_main, r) != 0) {
        remote_undo(r);
        return -EAGAIN;
    }
    __atomic_store_n(&ctx->remote, r, __ATOMIC_RELEASE);
    net_progress_kick(r); /* it waits for this */
    ringk_log_msg(ctx, RINGK_LOG_INFO, "rank %d of %d joined the job", me, size);
    return 0;
}

void ringk_remote_stop(ringk_ctx_t *ctx)
{
    ringk_remote_t *r = ctx->remote;
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
    backlog_t *b;
    void *req;
    int rank;
    unsigned id;

    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    net_progress_kick(r);
    pthread_join(r->progress, NULL);
    net_leave(r);
    for (rank = 0; rank < ctx->job.size; rank++) {
        if (r->eps[rank] == NULL) {
            continue;
        }
        req = ucp_ep_close_nbx(r->eps[rank], &param);
        if (UCS_PTR_IS_PTR(req)) {
            while (ucp_request_check_status(req) == UCS_INPROGRESS) {
                ucp_worker_progress(r->worker);
            }
            ucp_request_free(req);
        }
    }
    for (id = 0; id <= RINGK_MAX_KERNELS; id++) {
        while ((b = r->backlog_head[id]) != NULL) {
            r->backlog_head[id] = b->next;
            if ((b->ref != NULL) && (--b->ref->remaining == 0)) {
                free(b->ref);
            }
            free(b);
        }
    }
    for (rank = 0; rank < ctx->job.size; rank++) { /* what the rate limit held back */
        if (r->ctl_err_quiet[rank] != 0) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "%u more control messages to process %d were "
                          "not sent since the last report", r->ctl_err_quiet[rank], rank);
        }
    }
    ucp_worker_destroy(r->worker);
    ucp_cleanup(r->context);
    remote_free(r);
    __atomic_store_n(&ctx->remote, NULL, __ATOMIC_RELEASE); /* pairs with remote_of() */
}
