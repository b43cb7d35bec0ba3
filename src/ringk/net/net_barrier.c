/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer, named barriers across processes: arrivals at rank 0 and its releases. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <string.h>


/* The processes that take part in barrier @a name (have local participants). */
unsigned ringk_remote_barrier_processes(ringk_ctx_t *ctx, const char *name)
{
    ringk_remote_t *r = ctx->remote;
    unsigned n = 0, i;
    int rank;

    for (rank = 0; rank < r->size; rank++) {
        for (i = 0; i < RINGK_MAX_BARRIERS; i++) {
            const topic_entry_t *b = &r->barriers[(size_t)rank * RINGK_MAX_BARRIERS + i];
            if (b->used && (b->nsubs > 0) && !strncmp(b->name, name, RINGK_NAME_MAX)) {
                n++;
            }
        }
    }
    return n;
}

static void barrier_msg_init(barrier_msg_t *m, const char *name, uint64_t gen, int release)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->generation = gen;
    m->release    = (uint32_t)release;
}

void ringk_remote_barrier_release(ringk_ctx_t *ctx, const char *name, uint64_t gen)
{
    ringk_remote_t *r = ctx->remote;
    barrier_msg_t rel;
    unsigned j;
    int rank;

    barrier_msg_init(&rel, name, gen, 1);
    for (rank = 1; rank < r->size; rank++) {
        for (j = 0; j < RINGK_MAX_BARRIERS; j++) {
            const topic_entry_t *b = &r->barriers[(size_t)rank * RINGK_MAX_BARRIERS + j];
            if (b->used && (b->nsubs > 0) && !strncmp(b->name, name, RINGK_NAME_MAX)) {
                /* no wait: this may run inside an AM callback, where a send that does not
                 * leave at once would wait for progress that nobody can make */
                net_am_send_async(r, rank, RINGK_AM_BARRIER, &rel, sizeof(rel));
            }
        }
    }
}

int ringk_remote_barrier_send(ringk_ctx_t *ctx, int rank, const char *name, uint64_t gen,
                              int release)
{
    barrier_msg_t m;

    barrier_msg_init(&m, name, gen, release);
    return net_control_send(ctx->remote, rank, RINGK_AM_BARRIER, &m, sizeof(m));
}

int ringk_remote_barrier_gone(ringk_ctx_t *ctx, const char *name)
{
    ringk_remote_t *r = ctx->remote;
    unsigned i;
    int rank;

    for (rank = 0; rank < r->size; rank++) {
        if ((rank == ctx->job.rank) || !__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
            continue;
        }
        for (i = 0; i < RINGK_MAX_BARRIERS; i++) {
            const topic_entry_t *b = &r->barriers[(size_t)rank * RINGK_MAX_BARRIERS + i];
            if (b->used && (b->nsubs > 0) && !strncmp(b->name, name, RINGK_NAME_MAX)) {
                return rank;
            }
        }
    }
    return -1;
}
