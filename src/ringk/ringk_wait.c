/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the waits of a send that could not go at once (its slow path decides that it
 * waits): for room in a full inbox, with timeouts, warnings and the detection of wait cycles
 * (deadlocks) between kernels; for a credit of a kernel of another process; for UCP to send
 * a message that is on its way. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_exec.h"
#include "ringk_internal.h"
#include "net/ringk_net.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>

/* ---- the producer side ---------------------------------------------------------------------- */

/* Waits for room without a timeout can close a cycle: a kernel whose executor waits for room in
 * the inbox of a kernel whose executor waits for room in the first one's (or a longer chain)
 * will never get it, as only a kernel's executor empties its inbox. Such a waiter publishes
 * blocked_on, a new block_gen per wait, and block_fails, its failed claims in this wait.
 * wait_cycle() follows blocked_on from @a to and returns 1 when it comes back to @a self, with
 * *sig_p a signature of the waits on the cycle and *min_p the lowest kernel id on it; it
 * records each member's block_fails in @a fails (by kernel id), or with @a check set, tells in
 * *progressed_p whether every member has failed again since they were recorded. */
static int wait_cycle(ringk_kernel_t *self, ringk_kernel_t *to, uint64_t *sig_p, uint32_t *min_p,
                      uint64_t *fails, int check, int *progressed_p)
{
    ringk_kernel_t *k = to;
    uint64_t sig = 0, f;
    uint32_t min = self->id;
    unsigned n;
    int progressed = 1;

    for (n = 0; (n < RINGK_MAX_KERNELS) && (k != NULL); n++) {
        if (k == self) {
            *sig_p        = sig;
            *min_p        = min;
            *progressed_p = progressed;
            return 1;
        }
        sig = (sig ^ ((uint64_t)k->id << 40) ^ __atomic_load_n(&k->block_gen, __ATOMIC_ACQUIRE)) *
              0x9e3779b97f4a7c15ull;
        min = (k->id < min) ? k->id : min;
        f   = __atomic_load_n(&k->block_fails, __ATOMIC_RELAXED);
        if (!check) {
            fails[k->id] = f;
        } else if (f == fails[k->id]) {
            progressed = 0;
        }
        k = __atomic_load_n(&k->blocked_on, __ATOMIC_ACQUIRE);
    }
    return 0;
}

/* The wait of ringk_inbox_claim() once the inbox was found full: 0 with the cells claimed, or an
 * error. A cycle of waits without a timeout (wait_cycle) that stays the same for
 * RINGK_DEADLOCK_MS, in which every member has tried to claim and failed again since the cycle
 * was first seen, is a deadlock (nobody on it consumes, so no room can come): the kernel with
 * the lowest id on it gives up (-EDEADLK), so that it goes back to its inbox and the others get
 * room. */
/* What a waiting kernel knows of the cycle of waits it is on. */
typedef struct {
    uint64_t sig, since;                   /* the cycle's signature, when first seen (0: none) */
    uint64_t fails[RINGK_MAX_KERNELS + 1]; /* its members' failed claims then, by kernel id */
} wait_cycle_t;

/* Whether @a self, waiting since @a now for room in @a to, is the kernel that must give up on
 * a deadlocked cycle of waits (see ringk_inbox_wait); logs it. */
static int wait_deadlocked(ringk_kernel_t *self, ringk_kernel_t *to, uint64_t now,
                           wait_cycle_t *c)
{
    uint64_t sig = 0;
    int progressed;
    uint32_t min;

    if (!wait_cycle(self, to, &sig, &min, c->fails, c->since != 0, &progressed)) {
        c->since = 0;
    } else if ((c->since == 0) || (sig != c->sig)) {
        /* a new cycle: (again) record its members' failed claims */
        if ((c->since == 0) || wait_cycle(self, to, &sig, &min, c->fails, 0, &progressed)) {
            c->sig   = sig;
            c->since = now;
        } else {
            c->since = 0;
        }
    } else if ((now - c->since > RINGK_DEADLOCK_MS * 1000000ull) && (min == self->id) &&
               progressed) {
        ringk_log_msg(self->ctx, RINGK_LOG_ERROR, "deadlock: kernel '%s' waits without a "
                      "timeout for room in '%s', which waits, directly or through others, for "
                      "room in '%s'; this send fails with EDEADLK", self->name, to->name,
                      self->name);
        return 1;
    }
    return 0;
}

/* One look of a waiting send, every 64 failed claims: 0 to go on waiting, or the error that
 * ends the wait. */
static int wait_check(ringk_kernel_t *self, ringk_kernel_t *to, uint64_t start,
                      uint64_t deadline, uint64_t *warn_next, wait_cycle_t *cycle)
{
    const uint64_t now = ringk_now_ns();
    char what[sizeof(to->name) + 2];

    if (now > deadline) {
        ringk_add_u64(&to->refused_full, 1);
        return -ETIMEDOUT;
    }
    if (ringk_load_i(&to->state) >= RINGK_KERNEL_TERMINATING) {
        return -EPIPE;
    }
    if ((to->ctx->wait_warn_ms != 0) && ((*warn_next == 0) || (now >= *warn_next))) {
        snprintf(what, sizeof(what), "'%s'", to->name);
        ringk_wait_warn(to->ctx, start, now, warn_next, what);
    }
    if (self == NULL) {
        return 0; /* with a timeout: no cycle detection */
    }
    if (wait_deadlocked(self, to, now, cycle)) {
        ringk_add_u64(&to->refused_full, 1);
        return -EDEADLK;
    }
    /* read by the other members: this one claimed and failed again */
    __atomic_store_n(&self->block_fails, self->block_fails + 1, __ATOMIC_RELAXED);
    return 0;
}

__attribute__((noinline)) int
ringk_inbox_wait(ringk_kernel_t *to, uint32_t ncells, int timeout_ms, uint64_t *head_cache,
                 uint64_t *pos_p)
{
    ringk_kernel_t *self = (timeout_ms == RINGK_WAIT_FOREVER) ? ringk_tls_running : NULL;
    uint64_t deadline, start, warn_next = 0;
    wait_cycle_t cycle;
    unsigned spins = 0;
    ringk_ctx_t *pool = NULL;
    int ret;

    ringk_wait_prepare();
    start       = ringk_now_ns();
    deadline    = (timeout_ms < 0) ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000u;
    cycle.since = 0;
    if (self != NULL) {
        /* (to == self is a cycle of one: only this executor empties that inbox) */
        __atomic_store_n(&self->block_fails, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&self->block_gen, self->block_gen + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&self->blocked_on, to, __ATOMIC_RELEASE);
    }
    for (;;) {
        if (ringk_inbox_claim_cells(to, ncells, head_cache, pos_p)) {
            ret = 0;
            break;
        }
        if (((spins & 63) == 0) &&
            ((ret = wait_check(self, to, start, deadline, &warn_next, &cycle)) != 0)) {
            break;
        }
        if (++spins < 256) {
            ringk_cpu_relax();
        } else {
            if ((spins == 256) && (pool == NULL)) {
                /* a pool thread that waits on: the receiver may need a pool thread itself */
                pool = ringk_exec_cpu_block_begin(ringk_tls_running, "for room in an inbox");
            }
            sched_yield();
        }
    }
    ringk_exec_cpu_block_end(pool);
    if (self != NULL) {
        __atomic_store_n(&self->blocked_on, NULL, __ATOMIC_RELEASE);
    }
    return ret;
}

void ringk_wait_warn(ringk_ctx_t *ctx, uint64_t since_ns, uint64_t now_ns, uint64_t *next_ns,
                     const char *what)
{
    const ringk_kernel_t *self = ringk_tls_running;
    const uint64_t every       = (uint64_t)ctx->wait_warn_ms * 1000000u;

    if (every == 0) {
        return;
    }
    if (*next_ns == 0) {
        *next_ns = since_ns + every;
    }
    if (now_ns < *next_ns) {
        return;
    }
    *next_ns = now_ns + every;
    ringk_log_msg(ctx, RINGK_LOG_WARN, "%s%s%s has waited %.1f s for room in %s, which takes "
                  "nothing in (inactive, busy, or itself waiting for room somewhere on a "
                  "cycle?)", self ? "kernel '" : "a thread outside the kernels",
                  self ? self->name : "", self ? "'" : "", (double)(now_ns - since_ns) / 1e9,
                  what);
}


/* ---- a send to another process ------------------------------------------------------------- */

int ringk_wait_sent(ringk_ctx_t *ctx, int rank, void *req)
{
    uint64_t warn[2] = {0, 0};
    int ret;

    /* a kernel thread that polled may be the one waiting: the progress thread must not nap */
    ringk_remote_unpoll(ctx);
    while ((ret = ringk_remote_request_test(ctx, rank, req, warn)) == RINGK_REMOTE_PENDING) {
        sched_yield();
    }
    return ret;
}

int ringk_wait_credit(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt,
                      ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms)
{
    uint64_t start = 0, deadline = 0, warn_next = 0, now;
    char what[RINGK_NAME_MAX + 64];
    void *req = NULL;
    int ret;

    /* a send that may take a request: it never ends UCP-busy */
    while ((ret = ringk_remote_send_try(ctx, from, rt, type, payload, length, 0, &req)) ==
           RINGK_REMOTE_NO_CREDIT) {
        if (timeout_ms == RINGK_WAIT_NONE) {
            return -EAGAIN;
        }
        now = ringk_now_ns();
        if (deadline == 0) {
            start    = now;
            deadline = (timeout_ms < 0) ? UINT64_MAX : now + (uint64_t)timeout_ms * 1000000u;
            ringk_wait_prepare();
        }
        if (now > deadline) {
            return -ETIMEDOUT;
        }
        if ((ctx->wait_warn_ms != 0) && ((warn_next == 0) || (now >= warn_next))) {
            ringk_remote_wait_what(ctx, rt->rank, rt->remote_id, what, sizeof(what));
            ringk_wait_warn(ctx, start, now, &warn_next, what);
        }
        /* credits come back through the worker: this thread progresses it, or lets the
         * thread that does run */
        if (ringk_remote_poll(ctx) == 0) {
            sched_yield();
        }
    }
    return (ret == RINGK_REMOTE_PENDING) ? ringk_wait_sent(ctx, rt->rank, req) : ret;
}
