/* SPDX-License-Identifier: BSD-3-Clause */
/* Ping-pong between two ring kernels: "ping" and "pong" bounce a counter ROUNDS times over K2K
 * routes; the result is checked and the round-trip time printed. In one process, or in a job
 * of two (RINGK_ROOT=host:port RINGK_RANK=0|1 RINGK_SIZE=2): rank 0 runs ping, rank 1 pong.
 * Each process ends with one line "RESULT pingpong rank=R size=N ok=0|1 key=value ..." for
 * scripts; ok=1 (exit 0) when no value came back wrong. */
#include "example_job.h"

#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t rounds = 200000, done, errors, pong_seen;
static struct timespec t_last; /* when ping got the last ball back (rank 0 / one process) */

static int ping(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;

    memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    if (v == rounds) {
        /* the clock stops here, not when main() next looks (example_idle) */
        clock_gettime(CLOCK_MONOTONIC, &t_last);
        /* pong may live in another process: tell it to stop once it drained */
        ringk_send(ringk_kernel_ctx(k), k, "pong", RINGK_MSG_TERMINATE, NULL, 0,
                   RINGK_WAIT_FOREVER);
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
        example_notify();
        return 0;
    }
    v++;
    return ringk_send(ringk_kernel_ctx(k), k, "pong", RINGK_MSG_DATA, &v, sizeof(v),
                      RINGK_WAIT_FOREVER);
}

static int pong(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;

    memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    if (v != ++pong_seen) { /* pong's n-th message carries n: nothing lost or reordered */
        errors++;
    }
    return ringk_send(ringk_kernel_ctx(k), k, "ping", RINGK_MSG_DATA, &v, sizeof(v),
                      RINGK_WAIT_FOREVER);
}

int main(int argc, char **argv)
{
    ringk_ctx_t *ctx;
    static const char *to_pong[] = {"pong", NULL}, *to_ping[] = {"ping", NULL};
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = example_log};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MAX_IN
    };
    ringk_kernel_t *kping = NULL, *kpong = NULL;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    struct timespec t0, t1;
    uint64_t zero = 0;
    int rank, size;
    double us;

    example_job_begin(&cp, &argc, &argv);
    if (argc > 1) {
        rounds = strtoull(argv[1], NULL, 10);
    }
    if (ringk_ctx_create(&cp, &ctx) != 0) {
        return 1;
    }
    p.max_in = 64;
    rank     = ringk_ctx_rank(ctx);
    size     = ringk_ctx_size(ctx);
    if (size > 2) {
        fprintf(stderr, "pingpong: runs as 1 or 2 processes, not %d\n", size);
        return 2;
    }
    if (rank == 0) {
        p.name         = "ping";
        p.handler      = ping;
        p.publishes_to = to_pong;
        if (ringk_kernel_create(ctx, &p, &kping) != 0) {
            return 1;
        }
    }
    if ((size == 1) || (rank == 1)) {
        p.name         = "pong";
        p.handler      = pong;
        p.publishes_to = to_ping;
        if (ringk_kernel_create(ctx, &p, &kpong) != 0) {
            return 1;
        }
    }
    if (ringk_ctx_start(ctx) != 0) {
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (rank == 0) {
        /* the host serves the first ball to pong as if ping had sent 0 */
        zero = 1;
        if (ringk_send(ctx, NULL, "pong", RINGK_MSG_DATA, &zero, sizeof(zero),
                       RINGK_WAIT_FOREVER)) {
            return 1;
        }
        while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
            if (example_idle(ctx) != 0) {
                ringk_ctx_destroy(ctx);
                return 1;
            }
        }
    } else {
        if (example_wait_terminated(ctx, &kpong, 1) != 0) {
            ringk_ctx_destroy(ctx);
            return 1;
        }
        rounds = pong_seen; /* report what this side saw */
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rank == 0) {
        t1 = t_last; /* done was stored after t_last (release; acquired above) */
    }
    us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3;
    ringk_kernel_stats_query((rank == 0) ? kping : kpong, &st);
    ringk_ctx_destroy(ctx);
    printf("pingpong%s: %llu round trips between two ring kernels, %llu errors, %.3f us per "
           "round trip\n", (size > 1) ? ((rank == 0) ? " [rank 0 of 2]" : " [rank 1 of 2]") : "",
           (unsigned long long)rounds, (unsigned long long)errors, us / rounds);
    if (size > 1) {
        /* across processes: how many of its messages the kernel's thread took straight from
         * the UCP worker (direct_in) rather than through its inbox, and of them how many it
         * handled in the receive callback itself (inline_in, see RINGK_RECV_INLINE) */
        printf("pingpong [rank %d of 2]: %s handled %llu messages, %llu of them straight from the "
               "worker, %llu in its receive callback\n", rank, (rank == 0) ? "ping" : "pong",
               (unsigned long long)st.msgs_in, (unsigned long long)st.direct_in,
               (unsigned long long)st.inline_in);
    }
    /* the machine-readable line the tests check; handled/direct/inline are ping's (rank 0) or
     * pong's (rank 1) */
    printf("RESULT pingpong rank=%d size=%d ok=%d rounds=%llu errors=%llu handled=%llu direct=%llu "
           "inline=%llu\n", rank, size, errors == 0, (unsigned long long)rounds,
           (unsigned long long)errors, (unsigned long long)st.msgs_in,
           (unsigned long long)st.direct_in, (unsigned long long)st.inline_in);
    example_job_end();
    return errors ? 1 : 0;
}
