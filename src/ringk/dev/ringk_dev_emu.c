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

/* ---- the tally ------------------------------------------------------------------------------
 * Device code compiled as C calls ringk_dev_emu_tally() on each access and ordered operation
 * it makes through the ring operations and the portability helpers; a thread of a launch
 * counts into its kernel's ringk_device_tally_t, in the bucket it is in. Tables: kernels by
 * their device state (looked up at a launch), the device addresses of mapped host memory
 * (looked up at each access: a few slabs, read without a lock). */
#define TALLY_KERNELS 1024
#define TALLY_RANGES  64

/* a slot's state: NULL free, TALLY_RETIRED never taken again (a launch that did not return
 * may still count into it) */
#define TALLY_RETIRED ((const ringk_dev_kernel_t*)1)
static struct {
    const ringk_dev_kernel_t *state;
    ringk_device_tally_t      tally;
} tally_kernels[TALLY_KERNELS];
static struct {
    uintptr_t lo, hi; /* atomic: hi 0 when free, set last */
} tally_ranges[TALLY_RANGES];
static unsigned tally_nranges; /* atomic: the slots in use are below it */
static pthread_mutex_t tally_mu = PTHREAD_MUTEX_INITIALIZER;

static __thread ringk_device_tally_t *emu_tally; /* the launch's kernel's; NULL outside one */
static __thread unsigned emu_bucket;

int ringk_dev_tally_add(const ringk_dev_kernel_t *state, ringk_device_tally_t **tally_p)
{
    unsigned i;
    int ret = -ENOSPC;

    pthread_mutex_lock(&tally_mu);
    for (i = 0; i < TALLY_KERNELS; i++) {
        if (tally_kernels[i].state == state) {
            tally_kernels[i].state = NULL; /* at most one slot a state */
        }
    }
    for (i = 0; i < TALLY_KERNELS; i++) {
        if (tally_kernels[i].state == NULL) {
            tally_kernels[i].state = state;
            memset(&tally_kernels[i].tally, 0, sizeof(tally_kernels[i].tally));
            *tally_p = &tally_kernels[i].tally;
            ret = 0;
            break;
        }
    }
    pthread_mutex_unlock(&tally_mu);
    return ret;
}

void ringk_dev_tally_remove(const ringk_dev_kernel_t *state, int retire)
{
    unsigned i;

    pthread_mutex_lock(&tally_mu);
    for (i = 0; i < TALLY_KERNELS; i++) {
        if (tally_kernels[i].state == state) {
            tally_kernels[i].state = retire ? TALLY_RETIRED : NULL;
        }
    }
    pthread_mutex_unlock(&tally_mu);
}

/* The tally of the kernel whose device state is @a state, or NULL. */
static ringk_device_tally_t *tally_of(const ringk_dev_kernel_t *state)
{
    ringk_device_tally_t *t = NULL;
    unsigned i;

    pthread_mutex_lock(&tally_mu);
    for (i = 0; (i < TALLY_KERNELS) && (t == NULL); i++) {
        if ((state != NULL) && (tally_kernels[i].state == state)) {
            t = &tally_kernels[i].tally;
        }
    }
    pthread_mutex_unlock(&tally_mu);
    return t;
}

int ringk_dev_host_range_add(const void *dev, size_t bytes)
{
    unsigned i;
    int ret = -ENOSPC;

    pthread_mutex_lock(&tally_mu);
    for (i = 0; i < TALLY_RANGES; i++) {
        if (__atomic_load_n(&tally_ranges[i].hi, __ATOMIC_RELAXED) == 0) {
            __atomic_store_n(&tally_ranges[i].lo, (uintptr_t)dev, __ATOMIC_RELAXED);
            __atomic_store_n(&tally_ranges[i].hi, (uintptr_t)dev + bytes, __ATOMIC_RELEASE);
            if (i >= __atomic_load_n(&tally_nranges, __ATOMIC_RELAXED)) {
                __atomic_store_n(&tally_nranges, i + 1, __ATOMIC_RELEASE);
            }
            ret = 0;
            break;
        }
    }
    pthread_mutex_unlock(&tally_mu);
    return ret;
}

void ringk_dev_host_range_remove(const void *dev)
{
    unsigned i;

    pthread_mutex_lock(&tally_mu);
    for (i = 0; i < TALLY_RANGES; i++) {
        if ((__atomic_load_n(&tally_ranges[i].hi, __ATOMIC_RELAXED) != 0) &&
            (__atomic_load_n(&tally_ranges[i].lo, __ATOMIC_RELAXED) == (uintptr_t)dev)) {
            __atomic_store_n(&tally_ranges[i].hi, 0, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&tally_mu);
}

/* Whether @a p is a device address of mapped host memory (a slot's range is read without the
 * lock: its hi, stored last, says whether lo is set). */
static int tally_is_host(const void *p)
{
    uintptr_t a = (uintptr_t)p, hi;
    unsigned i, n = __atomic_load_n(&tally_nranges, __ATOMIC_ACQUIRE);

    for (i = 0; i < n; i++) {
        hi = __atomic_load_n(&tally_ranges[i].hi, __ATOMIC_ACQUIRE);
        if ((hi != 0) && (a < hi) && (a >= __atomic_load_n(&tally_ranges[i].lo,
                                                             __ATOMIC_RELAXED))) {
            return 1;
        }
    }
    return 0;
}

static void tally_add(uint64_t *counter)
{
    __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

unsigned ringk_dev_emu_bucket(unsigned bucket)
{
    unsigned old = emu_bucket;

    emu_bucket = (bucket <= RINGK_DEV_BUCKET_CHORE) ? bucket : RINGK_DEV_BUCKET_PATH;
    return old;
}

void ringk_dev_emu_tally(const void *p, unsigned op)
{
    ringk_device_tally_t *t = emu_tally;
    ringk_device_tally_part_t *part;
    unsigned kind = op & RINGK_TALLY_KIND;

    if (t == NULL) {
        return; /* the host's side: not device code */
    }
    part = (emu_bucket == RINGK_DEV_BUCKET_POLL) ? &t->poll :
           (emu_bucket == RINGK_DEV_BUCKET_WAIT) ? &t->wait :
           (emu_bucket == RINGK_DEV_BUCKET_CHORE) ? &t->chore : &t->path;
    switch (kind) {
    case RINGK_TALLY_POLL:
        tally_add(&t->polls);
        return;
    case RINGK_TALLY_HIT:
        tally_add(&t->poll_hits);
        return;
    case RINGK_TALLY_REREAD:
        tally_add(&t->poll_rereads);
        return;
    default:
        break;
    }
    if ((p != NULL) && (kind != RINGK_TALLY_FENCE) && tally_is_host(p)) {
        tally_add((kind == RINGK_TALLY_STORE) ? &part->host_writes : &part->host_reads);
    }
    if (op & RINGK_TALLY_SYS) {
        tally_add(&part->sys_ops);
    } else if ((op & RINGK_TALLY_DEV) && (op & RINGK_TALLY_ORDERED) &&
               (kind != RINGK_TALLY_LOAD)) {
        tally_add(&part->dev_syncs);
    }
}

/* A host thread of an emulated launch. */
typedef struct emu_thread {
    ringk_dev_emu_t *group;
    void (*run)(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state);
    const ringk_dev_kernel_t *src;
    ringk_dev_kernel_t *state;
    ringk_device_tally_t *tally;
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
        emu_tally       = t->tally;
        emu_bucket      = RINGK_DEV_BUCKET_PATH;
        t->run(t->src, t->state);
        emu_tally       = NULL;
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
    ringk_device_tally_t *tally;
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
    tally = tally_of(state);
    if (tally != NULL) {
        tally_add(&tally->launches);
    }
    if (n == 1) {
        memset(&emu_self, 0, sizeof(emu_self));
        emu_tally  = tally;
        emu_bucket = RINGK_DEV_BUCKET_PATH;
        run(src, state);
        emu_tally  = NULL;
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
        t[i] = (emu_thread_t){g, run, src, state, tally, i % threads, i / threads, 0, &mu, &cv,
                              &gate};
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
        emu_self   = (ringk_dev_emu_self_t){0, 0, g};
        emu_tally  = tally;
        emu_bucket = RINGK_DEV_BUCKET_PATH;
        run(src, state);
        emu_tally  = NULL;
        memset(&emu_self, 0, sizeof(emu_self));
    }
    for (i = 1; i < made; i++) {
        pthread_join(t[i].tid, NULL);
    }
    free(t);
    emu_group_free(g);
    return (made == n) ? 0 : -EAGAIN;
}
