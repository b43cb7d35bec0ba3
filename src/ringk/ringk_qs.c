/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: when the memory of a destroyed kernel may be freed. Other kernels' executors hold
 * pointers to it (routes, a topic's subscribers, a message being delivered) without a lock;
 * each executor thread passes a quiescent state at the top of its loop, where it holds none it
 * has not looked up again, or sleeps holding none. A destroy unlinks the kernel, asks for a
 * quiescent state of every executor thread and waits for them (quiescent-state-based
 * reclamation), and for the host's threads that looked up a kernel and are still sending. A
 * route resolved before the destroy sees ctx->kernels_gen change and resolves again. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_internal.h"

#include <errno.h>
#include <sched.h>
#include <time.h>

__thread ringk_qs_slot_t *ringk_tls_qs __attribute__((tls_model("initial-exec")));

ringk_qs_slot_t *ringk_qs_register(ringk_ctx_t *ctx)
{
    ringk_qs_slot_t *slot = NULL;
    unsigned i;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < RINGK_QS_SLOTS; i++) {
        if (!__atomic_load_n(&ctx->qs[i].used, __ATOMIC_ACQUIRE)) {
            slot = &ctx->qs[i];
            __atomic_store_n(&slot->seen, __atomic_load_n(&ctx->qs_want, __ATOMIC_ACQUIRE),
                             __ATOMIC_RELAXED);
            __atomic_store_n(&slot->offline, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&slot->used, 1, __ATOMIC_SEQ_CST);
            break;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    ringk_tls_qs = slot;
    return slot;
}

void ringk_qs_unregister(ringk_qs_slot_t *slot)
{
    if (slot != NULL) {
        __atomic_store_n(&slot->used, 0, __ATOMIC_RELEASE);
    }
    ringk_tls_qs = NULL;
}

/* Whether the thread of @a slot (not the caller's) has passed a quiescent state for @a want,
 * sleeps, or has gone. */
static int slot_quiet(const ringk_qs_slot_t *slot, uint64_t want)
{
    /* Q6: offline (pairs with Q5 and Q7); Q4: the quiescent state (pairs with Q3) */
    return !__atomic_load_n(&slot->used, __ATOMIC_SEQ_CST) ||
           __atomic_load_n(&slot->offline, __ATOMIC_SEQ_CST) ||
           ((int64_t)(__atomic_load_n(&slot->seen, __ATOMIC_ACQUIRE) - want) >= 0);
}

int ringk_qs_synchronize(ringk_ctx_t *ctx, long timeout_ms)
{
    const uint64_t deadline = ringk_now_ns() + (uint64_t)timeout_ms * 1000000u;
    /* Q1: after the caller's unlink; pairs with Q2 in ringk_qs_quiescent() */
    const uint64_t want     = __atomic_add_fetch(&ctx->qs_want, 1, __ATOMIC_SEQ_CST);
    const struct timespec nap = {.tv_sec = 0, .tv_nsec = 100000};
    unsigned i, spins = 0;

    /* the caller's own thread, if an executor, holds nothing of what was unlinked */
    ringk_qs_quiescent(ctx, ringk_qs_mine(ctx));
    for (i = 0; i < RINGK_QS_SLOTS; i++) {
        while (!slot_quiet(&ctx->qs[i], want)) {
            if (ringk_now_ns() > deadline) {
                return -ETIMEDOUT;
            }
            if (++spins < 100) {
                sched_yield();
            } else {
                nanosleep(&nap, NULL);
            }
        }
    }
    /* H2: pairs with H1 in ringk_host_enter(): a thread counted after this read looks the
     * kernel up after the unlink */
    while (__atomic_load_n(&ctx->host_users, __ATOMIC_SEQ_CST) != 0) {
        if (ringk_now_ns() > deadline) {
            return -ETIMEDOUT;
        }
        nanosleep(&nap, NULL);
    }
    return 0;
}
