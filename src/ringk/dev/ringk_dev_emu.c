/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: launches on the emulated device: a kernel of T threads in B blocks runs on T x B
 * host threads, each knowing its place (ringk_dev_emu_self()), with the barriers of its warp,
 * its block and the launch (ringk_device.h's ringk_dev_sync_tag()). The CUDA stand-in of the
 * tests launches the same way. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static __thread ringk_dev_emu_self_t emu_self; /* thread 0 of block 0 outside a launch */

ringk_dev_emu_self_t *ringk_dev_emu_self(void)
{
    return &emu_self;
}

/* A host thread of an emulated launch. */
typedef struct emu_thread {
    ringk_dev_emu_t *group;
    void (*run)(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state);
    const ringk_dev_kernel_t *src;
    ringk_dev_kernel_t *state;
    uint32_t thread, block;
    pthread_t tid;
    /* the start gate: threads run once all of them exist, or return when one could not be
     * made (a launch runs whole or not at all: a missing thread would hold every barrier) */
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *gate;           /* 0 closed, 1 run, -1 give up */
} emu_thread_t;

static void emu_bar_init(ringk_dev_emu_bar_t *b, uint32_t need)
{
    memset(b, 0, sizeof(*b));
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->need = need;
}

static void emu_bar_destroy(ringk_dev_emu_bar_t *b)
{
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}

static void emu_group_free(ringk_dev_emu_t *g)
{
    uint32_t i;

    if (g == NULL) {
        return;
    }
    emu_bar_destroy(&g->grid);
    for (i = 0; (g->block != NULL) && (i < g->blocks); i++) {
        emu_bar_destroy(&g->block[i]);
    }
    for (i = 0; (g->warp != NULL) && (i < g->blocks * g->warps); i++) {
        emu_bar_destroy(&g->warp[i]);
    }
    free(g->block);
    free(g->warp);
    free(g->blk);
    free(g->grid_bad);
    free(g);
}

/* The barriers of a launch of @a threads x @a blocks, or NULL. */
static ringk_dev_emu_t *emu_group_new(uint32_t threads, uint32_t blocks)
{
    ringk_dev_emu_t *g = calloc(1, sizeof(*g));
    uint32_t b, w;

    if (g == NULL) {
        return NULL;
    }
    g->threads  = threads;
    g->blocks   = blocks;
    g->warps    = (threads + RINGK_DEV_WARP - 1) / RINGK_DEV_WARP;
    g->block    = calloc(blocks, sizeof(*g->block));
    g->warp     = calloc((size_t)blocks * g->warps, sizeof(*g->warp));
    g->blk      = calloc(blocks, sizeof(*g->blk));
    g->grid_bad = calloc(blocks, sizeof(*g->grid_bad));
    emu_bar_init(&g->grid, blocks);
    if ((g->block == NULL) || (g->warp == NULL) || (g->blk == NULL) || (g->grid_bad == NULL)) {
        free(g->block);
        g->block = NULL;
        free(g->warp);
        g->warp = NULL;
        emu_group_free(g);
        return NULL;
    }
    for (b = 0; b < blocks; b++) {
        emu_bar_init(&g->block[b], threads);
        for (w = 0; w < g->warps; w++) {
            uint32_t left = threads - w * RINGK_DEV_WARP;

            emu_bar_init(&g->warp[b * g->warps + w], (left < RINGK_DEV_WARP) ? left
                                                                             : RINGK_DEV_WARP);
        }
    }
    return g;
}

static void *emu_thread_main(void *arg)
{
    emu_thread_t *t = arg;
    int gate;

    pthread_mutex_lock(t->mu);
    while ((gate = *t->gate) == 0) {
        pthread_cond_wait(t->cv, t->mu);
    }
    pthread_mutex_unlock(t->mu);
    if (gate > 0) {
        emu_self.thread = t->thread;
        emu_self.block  = t->block;
        emu_self.group  = t->group;
        t->run(t->src, t->state);
    }
    return NULL;
}

int ringk_dev_emu_launch(void (*run)(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state),
                         const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state,
                         uint32_t threads, uint32_t blocks)
{
    uint32_t n = threads * blocks, i, made;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv  = PTHREAD_COND_INITIALIZER;
    pthread_attr_t attr;
    emu_thread_t *t;
    ringk_dev_emu_t *g;
    int gate = 0;

    if ((run == NULL) || (state == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (run == NULL) ? "run" : "state");
    }
    if ((threads == 0) || (blocks == 0)) {
        return ringk_log_bad_arg(NULL, __func__, "threads %u x blocks %u: both must be at least "
                                 "1", threads, blocks);
    }
    if ((threads > RINGK_DEV_EMU_THREADS_MAX) || (blocks > RINGK_DEV_EMU_THREADS_MAX) ||
        (n > RINGK_DEV_EMU_THREADS_MAX)) {
        ringk_log_bad_arg(NULL, __func__, "threads %u x blocks %u is above the %u threads the "
                          "emulated device runs a kernel on", threads, blocks,
                          RINGK_DEV_EMU_THREADS_MAX);
        return -E2BIG;
    }
    if (n == 1) {
        memset(&emu_self, 0, sizeof(emu_self));
        run(src, state);
        return 0;
    }
    g = emu_group_new(threads, blocks);
    t = calloc(n, sizeof(*t));
    if ((g == NULL) || (t == NULL)) {
        emu_group_free(g);
        free(t);
        return -EAGAIN;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20); /* handlers' locals; sanitizers need more than
                                                   the minimum */
    for (i = 0; i < n; i++) {
        t[i] = (emu_thread_t){g, run, src, state, i % threads, i / threads, 0, &mu, &cv, &gate};
    }
    /* thread 0 of block 0 is the calling one */
    for (made = 1; made < n; made++) {
        if (pthread_create(&t[made].tid, &attr, emu_thread_main, &t[made]) != 0) {
            break;
        }
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&mu);
    gate = (made == n) ? 1 : -1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if (made == n) {
        emu_self = (ringk_dev_emu_self_t){0, 0, g};
        run(src, state);
        memset(&emu_self, 0, sizeof(emu_self));
    }
    for (i = 1; i < made; i++) {
        pthread_join(t[i].tid, NULL);
    }
    free(t);
    emu_group_free(g);
    return (made == n) ? 0 : -EAGAIN;
}
