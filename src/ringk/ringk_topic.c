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

int ringk_topic_join(ringk_ctx_t *ctx, ringk_kernel_t *k)
{
    topic_t *t;
    unsigned i, j;

    for (i = 0; i < k->topics_sub.count; i++) {
        for (j = 0; (j < ctx->ntopics) && strcmp(ctx->topics[j].name, k->topics_sub.names[i]);
             j++) {
        }
        if (j == ctx->ntopics) {
            if (j == RINGK_MAX_TOPICS) {
                ringk_log_msg(ctx, RINGK_LOG_ERROR, "more than %d topics", RINGK_MAX_TOPICS);
                return -ENOSPC;
            }
            strcpy(ctx->topics[j].name, k->topics_sub.names[i]);
            ctx->ntopics++;
        }
        t = &ctx->topics[j];
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

unsigned ringk_topic_subscribers(ringk_ctx_t *ctx, const char *topic, ringk_kernel_t **subs)
{
    unsigned nsubs = 0, i;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->ntopics; i++) {
        if (!strcmp(ctx->topics[i].name, topic)) {
            nsubs = ctx->topics[i].nsubs;
            memcpy(subs, ctx->topics[i].subs, nsubs * sizeof(subs[0]));
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

int ringk_publish(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *topic, const void *payload,
                  size_t length, int timeout_ms, unsigned *delivered_p)
{
    ringk_kernel_t *subs[RINGK_MAX_KERNELS];
    unsigned nsubs, i, done = 0;
    int ret = 0, host;

    if ((ctx == NULL) || (topic == NULL) || ((payload == NULL) && (length > 0))) {
        return -EINVAL;
    }
    if ((from != NULL) && !ringk_list_has(&from->topics_pub, topic)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' does not publish to topic '%s' "
                      "(topics_pub)", from->name, topic);
        return -EPERM;
    }
    if ((from != NULL) && (length > from->max_out)) {
        return -EMSGSIZE;
    }
    if (ringk_tls_inline != NULL) {
        /* a publish may wait (room, credits, its active messages): after the callback */
        if (delivered_p != NULL) {
            *delivered_p = 0;
        }
        return ringk_defer_call(ctx, RINGK_DEFER_PUBLISH, from, -1, topic, RINGK_MSG_DATA, payload,
                                length, timeout_ms);
    }
    ringk_flush_running();
    host  = ringk_host_enter(ctx); /* a thread outside the executors: a destroy waits for it */
    nsubs = ringk_topic_subscribers(ctx, topic, subs);
    for (i = 0; i < nsubs; i++) {
        if (length > subs[i]->max_in) {
            ret = -EMSGSIZE;
            break;
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
