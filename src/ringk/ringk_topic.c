/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk topics: the subscribers of each topic in this process. A publish (ringk_publish)
 * and the network layer's delivery of a publish from another process both take a snapshot of
 * a topic's subscribers here; the directory exchanged at start lists the topics that have
 * subscribers here. The registry is under ctx->lock and only grows. */
#include "ringk_config.h"

#include "ringk_internal.h"

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
