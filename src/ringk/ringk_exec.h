/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk executors: what runs a kernel's dispatch loop. A kernel is created with one
 * executor; the runtime starts it, wakes it when a send finds it asleep, and joins it once the
 * kernel terminated. The CPU executor (ringk_exec_cpu.c) runs persistent kernels on threads of
 * their own and event-driven kernels on the context's pool threads; the device executor
 * (dev/ringk_exec_dev.c) runs kernels of the CUDA backend on a GPU or the emulated device. */
#ifndef RINGK_EXEC_H
#define RINGK_EXEC_H

#include "ringk_internal.h"

typedef struct ringk_exec_ops {
    const char *name;
    /** Starts running kernel @a k, created and registered: 0, or a negative errno (logged). */
    int  (*start)(ringk_kernel_t *k);
    /** Signals @a k's executor, which ringk_sleeping_seen() found asleep (or about to be). */
    void (*wake)(ringk_kernel_t *k);
    /** Once @a k is terminated: ends what start() began. */
    void (*join)(ringk_kernel_t *k);
    /** After the host changed k->state (NULL: the executor reads k->state itself). */
    void (*state)(ringk_kernel_t *k);
} ringk_exec_ops_t;

/** The CPU executor. */
extern const ringk_exec_ops_t ringk_exec_cpu;

/** Starts the context's pool threads (ctx->pool_want of them): 0 or -EAGAIN (logged). */
int ringk_exec_cpu_pool_start(ringk_ctx_t *ctx);
/**
 * The calling thread is about to wait long (at a barrier, for room in an inbox). When it is a
 * pool thread, the event-driven kernel @a k it runs keeps it while it waits, so the pool
 * starts another thread if fewer than pool_threads would be left to run the others (which
 * the wait may well need: the other participants of the barrier, the kernel whose inbox is
 * full). @a what names the wait for the line logged if no thread can be started.
 * @return the pool's context, for ringk_exec_cpu_block_end(), or NULL on other threads.
 */
ringk_ctx_t *ringk_exec_cpu_block_begin(const ringk_kernel_t *k, const char *what);
/** The wait of ringk_exec_cpu_block_begin() is over (@a pool: what it returned). */
void ringk_exec_cpu_block_end(ringk_ctx_t *pool);
/** Stops and joins the pool threads (ctx->stop is set). */
void ringk_exec_cpu_pool_stop(ringk_ctx_t *ctx);

/* Whether the executor of @a k sleeps, or is about to: W2, pairs with W1 in the executor's
 * sleep, which stores 'sleeping', fences, then reads the tail (ringk_inbox_empty). The caller
 * has either claimed cells (a seq_cst read-modify-write on the tail, ringk_cas_u64) or fenced
 * just before: then either this read sees the flag or the sleeper's read sees the claim and
 * does not sleep. */
static inline int ringk_sleeping_seen(ringk_kernel_t *k)
{
    /* k->sleeping (a persistent kernel's thread), ctx->pool_sleeping (the pool), or a device
     * kernel's 'idle' in its control block */
    return __atomic_load_n(k->sleep_word, __ATOMIC_SEQ_CST);
}

/* Signals the executor of @a k, seen sleeping by ringk_sleeping_seen(). */
static inline void ringk_wake_signal(ringk_kernel_t *k)
{
    k->exec->wake(k);
}

/** Wakes the executor of @a k if it sleeps, after a state change (not a claim): fences
 *  first. */
void ringk_wake(ringk_kernel_t *k);

#endif
