/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk topics: the subscribers of each topic in this process. A publish (ringk_publish)
 * and the network layer's delivery of a publish from another process both take a snapshot of
 * a topic's subscribers here; the directory exchanged at start lists the topics that have
 * subscribers here. The registry is under ctx->lock; a destroyed kernel leaves its topics. */
#include "ringk_config.h"

#include "ringk_internal.h"
#include "net/ringk_net.h"

#include <errno.h>
#include <string.h>

/* Under ctx->lock: the entry of topic @a name, added (with no subscriber) when it has none;
 * NULL when the table is full (logged). */
static topic_t *topic_entry(ringk_ctx_t *ctx, const char *name)
{
    unsigned j;

    for (j = 0; j < ctx->ntopics; j++) {
        if (!strcmp(ctx->topics[j].name, name)) {
            return &ctx->topics[j];
        }
    }
    if (j == RINGK_MAX_TOPICS) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "more than %d topics", RINGK_MAX_TOPICS);
        return NULL;
    }
    strcpy(ctx->topics[j].name, name);
    ctx->ntopics++;
    return &ctx->topics[j];
}

/* A topic that a kernel publishes to or subscribes to has an entry: a host publish to a name
 * no kernel declared is refused (a typo), one to a declared topic without subscribers is not. */
int ringk_topic_join(ringk_ctx_t *ctx, ringk_kernel_t *k)
{
    topic_t *t;
    unsigned i;

    for (i = 0; i < k->topics_pub.count; i++) {
        if (topic_entry(ctx, k->topics_pub.names[i]) == NULL) {
            return -ENOSPC;
        }
    }
    for (i = 0; i < k->topics_sub.count; i++) {
        t = topic_entry(ctx, k->topics_sub.names[i]);
        if (t == NULL) {
            return -ENOSPC;
        }
        t->subs[t->nsubs++] = k;
    }
    return 0;
}

void ringk_topic_leave(ringk_ctx_t *ctx, const ringk_kernel_t *k)
{
    topic_t *t;
    unsigned i, j;

    for (i = 0; i < ctx->ntopics; i++) {
        t = &ctx->topics[i];
        for (j = 0; j < t->nsubs; j++) {
            if (t->subs[j] == k) {
                t->subs[j] = t->subs[--t->nsubs];
                break;
            }
        }
    }
}

int ringk_topic_subscribers(ringk_ctx_t *ctx, const char *topic, ringk_kernel_t **subs)
{
    int nsubs = -1;
    unsigned i;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->ntopics; i++) {
        if (!strcmp(ctx->topics[i].name, topic)) {
            nsubs = (int)ctx->topics[i].nsubs;
            memcpy(subs, ctx->topics[i].subs, (size_t)nsubs * sizeof(subs[0]));
            break;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return nsubs;
}

unsigned ringk_topic_list(ringk_ctx_t *ctx, const char **names, unsigned *counts)
{
    unsigned i;

    for (i = 0; i < ctx->ntopics; i++) {
        names[i]  = ctx->topics[i].name;
        counts[i] = ctx->topics[i].nsubs;
    }
    return ctx->ntopics;
}

/* The checks of a publish before anything is sent: 0, or its error (logged). */
static int publish_check(ringk_ctx_t *ctx, const ringk_kernel_t *from, const char *topic,
                         const void *payload, size_t length, int timeout_ms)
{
    if ((ctx == NULL) || (topic == NULL)) {
        return ringk_log_bad_arg((ctx != NULL) ? ctx : (from != NULL) ? from->ctx : NULL,
                                 "ringk_publish", "%s is NULL", (ctx == NULL) ? "ctx" : "topic");
    }
    if ((from != NULL) && (from->ctx != ctx)) {
        return ringk_log_bad_arg(ctx, "ringk_publish", "kernel '%s' belongs to another context",
                                 from->name);
    }
    if ((ringk_log_check_payload(ctx, "ringk_publish", payload, length) != 0) ||
        (ringk_log_check_timeout(ctx, "ringk_publish", timeout_ms) != 0)) {
        return -EINVAL;
    }
    if ((from != NULL) && !ringk_list_has(&from->topics_pub, topic)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' does not publish to topic '%s' "
                      "(topics_pub)", from->name, topic);
        return -EPERM;
    }
    if ((from != NULL) && (length > from->max_out)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "publish of %zu bytes from '%s' exceeds its max_out "
                      "%u", length, from->name, from->max_out);
        return -EMSGSIZE;
    }
    return 0;
}

/* A publish from the host to a topic that no kernel declares (@a declared < 0 here) is a typo:
 * -ENOENT (logged) unless a kernel of another process of the job declares it; else 0. */
static int publish_declared(ringk_ctx_t *ctx, const char *topic, int declared)
{
    if ((declared >= 0) ||
        ((ringk_remote_of(ctx) != NULL) && ringk_remote_topic_declared(ctx, topic))) {
        return 0;
    }
    ringk_log_msg(ctx, RINGK_LOG_ERROR, "publish to topic '%s': no kernel %s declares it "
                  "(topics_sub or topics_pub)", topic,
                  (ringk_remote_of(ctx) != NULL) ? "of the job" : "of this process");
    return -ENOENT;
}

int ringk_publish(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *topic, const void *payload,
                  size_t length, int timeout_ms, unsigned *delivered_p)
{
    ringk_kernel_t *subs[RINGK_MAX_KERNELS];
    unsigned nsubs, i, done = 0;
    int ret, host, declared;

    if (delivered_p != NULL) {
        *delivered_p = 0;
    }
    ret = publish_check(ctx, from, topic, payload, length, timeout_ms);
    if (ret != 0) {
        return ret;
    }
    if (ringk_tls_inline != NULL) {
        /* a publish may wait (room, credits, its active messages): after the callback */
        ringk_flush_running();
        return ringk_defer_call(ctx, RINGK_DEFER_PUBLISH, from, -1, topic, RINGK_MSG_DATA, payload,
                                length, timeout_ms);
    }
    ringk_flush_running();
    host     = ringk_host_enter(ctx); /* a thread outside the executors: a destroy waits for it */
    declared = ringk_topic_subscribers(ctx, topic, subs);
    nsubs    = (declared > 0) ? (unsigned)declared : 0;
    if ((from == NULL) && ((ret = publish_declared(ctx, topic, declared)) != 0)) {
        ringk_host_leave(ctx, host);
        return ret;
    }
    for (i = 0; (ret == 0) && (i < nsubs); i++) {
        if (length > subs[i]->max_in) {
            ret = -EMSGSIZE;
        }
    }
    for (i = 0; (ret == 0) && (i < nsubs); i++) {
        ret = ringk_deliver(ctx, from, subs[i], RINGK_MSG_DATA, RINGK_MSG_BROADCAST, payload,
                            length, timeout_ms, NULL, NULL);
        done += (ret == 0);
    }
    ringk_host_leave(ctx, host);
    if ((ret == 0) && (ringk_remote_of(ctx) != NULL)) {
        unsigned reached = 0;

        ret   = ringk_remote_publish(ctx, from, topic, payload, length, timeout_ms, &reached);
        done += reached;
    }
    if (delivered_p != NULL) {
        *delivered_p = done;
    }
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "publish to topic '%s' reached %u subscribers (of them "
                      "%u in this process, which has %u) before: %s", topic, done,
                      (done < nsubs) ? done : nsubs, nsubs, strerror(-ret));
        return ret;
    }
    return (int)done;
}
