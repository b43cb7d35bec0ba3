/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API, the threads of a kernel (included by ringk_device.h): which thread and
 * block a caller is, the barriers of a warp, a block and the kernel (a GPU's, or the emulated
 * device's, which tell a collective call made by part of the threads), the lock of the calls
 * each thread makes on its own, and the block's shared scratch of collective calls. */
#ifndef RINGK_API_RINGK_DEVICE_SYNC_H
#define RINGK_API_RINGK_DEVICE_SYNC_H

#ifndef RINGK_API_RINGK_DEVICE_H
#  error "include <ringk/api/ringk_device.h>, not this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the threads of a kernel ---------------------------------------------------------------- */

/** Scopes of ringk_dev_sync(). */
#define RINGK_DEV_SYNC_WARP   1   /**< the calling thread's warp (32 threads, fewer in a block's
                                       last warp when the block is not a multiple of 32) */
#define RINGK_DEV_SYNC_BLOCK  2   /**< the calling thread's block */
#define RINGK_DEV_SYNC_KERNEL 3   /**< every thread of the kernel, all its blocks */

/* Which call a barrier arrival comes from. The emulated device compares them: threads that meet
 * at a barrier from different calls (a collective call made by part of the threads) get
 * -EDEADLK instead of waiting for ever (the threads in the loop's own barrier wait on). */
#define RINGK_DEV_TAG_START       (1u << 0)
#define RINGK_DEV_TAG_HAND        (1u << 1)
#define RINGK_DEV_TAG_DONE        (1u << 2)
#define RINGK_DEV_TAG_SYNC_WARP   (1u << 3)
#define RINGK_DEV_TAG_SYNC_BLOCK  (1u << 4)
#define RINGK_DEV_TAG_SYNC_KERNEL (1u << 5)
#define RINGK_DEV_TAG_SEND        (1u << 6)
#define RINGK_DEV_TAG_PUBLISH     (1u << 7)
#define RINGK_DEV_TAG_RECV        (1u << 8)
#define RINGK_DEV_TAG_BARRIER     (1u << 9)

#if defined(__CUDACC__)
/* A barrier of @a scope. On a GPU: __syncwarp over the warp's threads, the block's barrier,
 * and a grid-wide synchronization of the cooperative launch (ringk_device_cuda.h launches a
 * kernel of several blocks cooperatively, so all its blocks are resident). The loop's thread
 * and the others meet at these from different places in the code (ringk_dev_hand() and
 * ringk_dev_follow()), so the block's barrier is the one a diverged warp may use
 * (__barrier_sync: PTX barrier.sync, not the aligned bar.sync of __syncthreads, which all
 * threads of a warp must reach at the same instruction); the grid's uses it too. 0. */
RINGK_DEV_FN int ringk_dev_sync_tag(const ringk_dev_kernel_t *k, int scope, uint32_t tag)
{
    (void)k;
    (void)tag;
    if (scope == RINGK_DEV_SYNC_WARP) {
        uint32_t n = blockDim.x - (threadIdx.x & ~(RINGK_DEV_WARP - 1u));

        __syncwarp((n >= RINGK_DEV_WARP) ? 0xffffffffu : ((1u << n) - 1u));
    } else if ((scope == RINGK_DEV_SYNC_BLOCK) || (gridDim.x == 1)) {
        __barrier_sync(0);
    } else {
        cooperative_groups::this_grid().sync();
    }
    return 0;
}
/* The block's shared scratch of collective calls: shared memory. */
RINGK_DEV_FN ringk_dev_blk_t *ringk_dev_blk(void)
{
    __shared__ ringk_dev_blk_t blk;

    return &blk;
}
#else
/* A barrier of the emulated device: 0, or 1 when its arrivals came from different calls. */
RINGK_DEV_FN int ringk_dev_emu_bar_wait(ringk_dev_emu_bar_t *b, uint32_t tag)
{
    uint32_t gen;
    int bad;

    pthread_mutex_lock(&b->mu);
    gen      = b->gen;
    b->tags |= tag;
    if (++b->count == b->need) {
        b->last_tags = b->tags;
        b->tags      = 0;
        b->count     = 0;
        b->gen++;
        pthread_cond_broadcast(&b->cv);
    } else {
        while (b->gen == gen) {
            pthread_cond_wait(&b->cv, &b->mu);
        }
    }
    /* the next generation cannot pass before this thread arrives at it */
    bad = ((b->last_tags & (b->last_tags - 1u)) != 0);
    pthread_mutex_unlock(&b->mu);
    return bad;
}
/* A barrier of @a scope on the emulated device: the warp's, then the block's, then thread 0 of
 * each block at the launch's and the block's again. 0, or -EDEADLK when the threads met from
 * different calls (@a tag). */
RINGK_DEV_FN int ringk_dev_sync_tag(const ringk_dev_kernel_t *k, int scope, uint32_t tag)
{
    const ringk_dev_emu_self_t *s = ringk_dev_emu_self();
    ringk_dev_emu_t *g = s->group;
    int bad;

    (void)k;
    if (g == NULL) {
        return 0;
    }
    if (ringk_dev_emu_bar_wait(&g->warp[s->block * g->warps + s->thread / RINGK_DEV_WARP],
                               tag)) {
        return -EDEADLK;
    }
    if (scope == RINGK_DEV_SYNC_WARP) {
        return 0;
    }
    if ((g->warps > 1) && ringk_dev_emu_bar_wait(&g->block[s->block], tag)) {
        return -EDEADLK;
    }
    if ((scope == RINGK_DEV_SYNC_BLOCK) || (g->blocks == 1)) {
        return 0;
    }
    if (s->thread == 0) {
        g->grid_bad[s->block] = ringk_dev_emu_bar_wait(&g->grid, tag);
    }
    ringk_dev_emu_bar_wait(&g->block[s->block], tag); /* every thread is in this call */
    bad = g->grid_bad[s->block];
    return bad ? -EDEADLK : 0;
}
RINGK_DEV_FN ringk_dev_blk_t *ringk_dev_blk(void)
{
    const ringk_dev_emu_self_t *s = ringk_dev_emu_self();

    return &s->group->blk[s->block];
}
#endif

/* Whether the kernel is one thread: no barrier, lock or hand-over is needed. */
RINGK_DEV_FN int ringk_dev_alone(const ringk_dev_kernel_t *k)
{
    return (k->threads == 1) && (k->blocks == 1);
}

/* The lock of the calls any thread makes on its own (they share the kernel's counters, clock,
 * outbox and route caches). */
RINGK_DEV_FN void ringk_dev_turn_take(ringk_dev_kernel_t *k)
{
    if (!ringk_dev_alone(k)) {
        while (!ringk_dev_cas_acq_dev_i32(&k->lock, 0, 1)) {
            ringk_dev_nap(RINGK_DEV_NAP_MIN_NS);
        }
    }
}
RINGK_DEV_FN void ringk_dev_turn_give(ringk_dev_kernel_t *k)
{
    if (!ringk_dev_alone(k)) {
        ringk_dev_store_rel_dev_i32(&k->lock, 0);
    }
}

/** Per thread: the calling thread's index in its block, 0 .. ringk_dev_threads() - 1. */
RINGK_DEV_FN uint32_t ringk_dev_thread(const ringk_dev_kernel_t *k)
{
    (void)k;
    return ringk_dev_pt_thread();
}

/** Per thread: the threads of each of the kernel's blocks (the kernel's `threads`). */
RINGK_DEV_FN uint32_t ringk_dev_threads(const ringk_dev_kernel_t *k)
{
    return k->threads;
}

/** Per thread: the calling thread's block, 0 .. ringk_dev_blocks() - 1. */
RINGK_DEV_FN uint32_t ringk_dev_block(const ringk_dev_kernel_t *k)
{
    (void)k;
    return ringk_dev_pt_block();
}

/** Per thread: the kernel's blocks (its `blocks`). */
RINGK_DEV_FN uint32_t ringk_dev_blocks(const ringk_dev_kernel_t *k)
{
    return k->blocks;
}

/**
 * Collective over @a scope: waits until every thread of the calling thread's warp
 * (RINGK_DEV_SYNC_WARP), block (RINGK_DEV_SYNC_BLOCK) or of the whole kernel
 * (RINGK_DEV_SYNC_KERNEL) called it; what each wrote to memory the others read (global or
 * shared) before is seen by all of them after. Every thread of the scope must call it.
 * @return 0; -EINVAL a bad @a scope (no wait); -EDEADLK (the emulated device only) part of the
 *         threads called it while the others made another collective call or returned from
 *         the handler (on a GPU that is undefined: it may hang).
 */
RINGK_DEV_FN int ringk_dev_sync(ringk_dev_kernel_t *k, int scope)
{
    if ((scope < RINGK_DEV_SYNC_WARP) || (scope > RINGK_DEV_SYNC_KERNEL)) {
        return -EINVAL;
    }
    return ringk_dev_sync_tag(k, scope, (scope == RINGK_DEV_SYNC_WARP) ?
                              RINGK_DEV_TAG_SYNC_WARP : (scope == RINGK_DEV_SYNC_BLOCK) ?
                              RINGK_DEV_TAG_SYNC_BLOCK : RINGK_DEV_TAG_SYNC_KERNEL);
}

#ifdef __cplusplus
}
#endif

#endif
