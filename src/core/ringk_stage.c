/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk staged copies: the bounce-buffer pool and the chunk schedule (ringk_stage.h). */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_stage.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

static uint64_t stage_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int ringk_stage_acquire(ringk_stage_pool_t *pool, unsigned *buf_p)
{
    uint64_t until = 0;
    unsigned i, spins;
    int idle = 0;

    for (spins = 0;; spins++) {
        for (i = 0; i < RINGK_STAGE_BUFS; i++) {
            if (!__atomic_load_n(&pool->busy[i], __ATOMIC_RELAXED) &&
                __atomic_compare_exchange_n(&pool->busy[i], &idle, 1, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                *buf_p = i;
                return 0;
            }
            idle = 0;
        }
        if ((spins % 1024) == 0) { /* the clock now and then */
            if (until == 0) {
                until = stage_now_ms() + (pool->wait_ms ? pool->wait_ms : RINGK_STAGE_WAIT_MS);
            } else if (stage_now_ms() >= until) {
                return -ETIMEDOUT;
            }
        }
        sched_yield(); /* each busy buffer is freed by a copy already queued */
    }
}

void ringk_stage_release(ringk_stage_pool_t *pool, unsigned buf)
{
    if (buf < RINGK_STAGE_BUFS) {
        __atomic_store_n(&pool->busy[buf], 0, __ATOMIC_RELEASE);
    }
}

unsigned ringk_stage_busy(ringk_stage_pool_t *pool)
{
    unsigned i, n = 0;

    for (i = 0; i < RINGK_STAGE_BUFS; i++) {
        n += (__atomic_load_n(&pool->busy[i], __ATOMIC_ACQUIRE) != 0);
    }
    return n;
}

int ringk_stage_run(const ringk_stage_ops_t *ops, size_t len)
{
    size_t off, n;
    unsigned b;
    int ret;

    for (off = 0; off < len; off += n) {
        n = len - off;
        if (n > ops->pool->chunk) {
            n = ops->pool->chunk;
        }
        if ((ret = ringk_stage_acquire(ops->pool, &b)) != 0) {
            return ret;
        }
        if ((ret = ops->copy_in(ops->arg, b, off, n)) != 0) {
            ringk_stage_release(ops->pool, b);
            return ret;
        }
        if ((ret = ops->copy_out(ops->arg, b, off, n)) != 0) {
            return ret; /* copy_out gave the buffer back */
        }
    }
    return 0;
}
