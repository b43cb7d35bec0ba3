/* SPDX-License-Identifier: BSD-3-Clause */
/* Backpressure across processes (driven by test_job.sh), 2 processes: rank 1's kernel "sink"
 * (inbox of W = 16) starts inactive, so nothing leaves its inbox. Rank 0 sends to it without
 * waiting until it is refused, then sends with a 200 ms timeout, which must return -ETIMEDOUT
 * after 200 ms. Then rank 0 tells rank 1's "ctl" to activate the sink and sends the rest of M
 * waiting as needed; the sink must get all M in order. Usage: job_backpressure [M [publish]]
 *   K2K sends: more than W and at most 2 x W are accepted (W in the inbox, W credits of backlog
 *     in rank 1);
 *   publish: rank 0 publishes to topic "bp", which the sink subscribes to: TW = 256 publishes
 *     may be on their way to a process (W of them in the inbox, the rest in the backlog; the
 *     first W's credits come back only in batches of TW / 4), so TW to TW + W are accepted.
 * While rank 0's timed send waits, RINGK_WAIT_WARN_MS = 50 makes it warn that it waits (named
 * receiver) through the log hook. Prints one line per rank ending in OK or FAIL, then one for the
 * script: "RESULT job_backpressure rank=R size=2 ok=0|1 key=value ..." (ok=1: exit 0). */
#include "test_log.h"
#include "job_seq.h"

#include <ringk/api/ringk.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define W  16
#define TW 256 /* RINGK_TOPIC_WINDOW */

static ringk_kernel_t *sink;
static job_seq_t seq;

static int ctl_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return ringk_kernel_activate(sink);
}

static int publish_mode;
static char logbuf[4096];

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

/* keeps warnings and errors while there is room (the waits of step 3 may add many) */
static void log_hook(void *arg, int level, const char *message)
{
    if (level <= RINGK_LOG_WARN) {
        test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
    }
}

/* One message to the sink: a K2K send, or a publish to its topic. */
static int to_sink(ringk_ctx_t *ctx, uint64_t *v, int timeout_ms)
{
    int ret;

    if (!publish_mode) {
        return ringk_send(ctx, NULL, "sink", RINGK_MSG_DATA, v, sizeof(*v), timeout_ms);
    }
    ret = ringk_publish(ctx, NULL, "bp", v, sizeof(*v), timeout_ms, NULL);
    return (ret > 0) ? 0 : ret;
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    const uint64_t m = (argc > 1) ? strtoull(argv[1], NULL, 10) : 20000;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *ctl;
    ringk_ctx_t *ctx;
    uint64_t i = 0;
    unsigned idle = 0;
    double t0, waited;
    int rank, ret, tret, ok, warned;
    const char *what;
    uint64_t lo, hi;

    publish_mode = (argc > 2) && !strcmp(argv[2], "publish");
    what = publish_mode ? "publish" : "send";
    lo   = publish_mode ? TW : W + 1;
    hi   = publish_mode ? TW + W : 2 * W;

    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = log_hook};

    setenv("RINGK_WAIT_WARN_MS", "50", 1);
    if (ringk_ctx_create(&cp, &ctx) != 0) {
        return 1;
    }
    rank = ringk_ctx_rank(ctx);
    if (ringk_ctx_size(ctx) != 2) {
        fprintf(stderr, "job_backpressure needs 2 processes, not %d\n", ringk_ctx_size(ctx));
        return 2;
    }
    if (rank == 1) {
        static const char *topics[] = {"bp", NULL};
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE |
                          RINGK_KERNEL_PARAM_FIELD_MAX_IN | RINGK_KERNEL_PARAM_FIELD_START_INACTIVE |
                          RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB,
            .name = "sink", .handler = job_seq_handler, .arg = &seq,
            .mode = RINGK_MODE_EVENT_DRIVEN,
            .inbox_size = W, .max_in = 64, /* one cell each: the inbox holds exactly W */
            .topics_sub = topics
        };
        ringk_kernel_params_t c = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_MODE,
            .name = "ctl", .handler = ctl_handler, .mode = RINGK_MODE_EVENT_DRIVEN
        };
        if ((ringk_kernel_create(ctx, &p, &sink) != 0) ||
            (ringk_kernel_create(ctx, &c, &ctl) != 0)) {
            return 1;
        }
    }
    if (ringk_ctx_start(ctx) != 0) {
        return 1;
    }
    if (rank == 1) {
        do {
            usleep(1000);
            ringk_kernel_stats_query(sink, &st);
        } while (st.state != RINGK_KERNEL_TERMINATED);
        ringk_ctx_destroy(ctx);
        ok = (seq.got == m) && (seq.bad == 0);
        printf("backpressure [rank 1 of 2]: sink got %llu of %llu, %llu out of order: %s\n",
               (unsigned long long)seq.got, (unsigned long long)m, (unsigned long long)seq.bad,
               ok ? "OK" : "FAIL");
        printf("RESULT job_backpressure rank=1 size=2 ok=%d got=%llu expected=%llu "
               "out_of_order=%llu\n", ok, (unsigned long long)seq.got, (unsigned long long)m,
               (unsigned long long)seq.bad);
        return ok ? 0 : 1;
    }
    /* 1. without waiting, until refused for 300 ms in a row (credits come back meanwhile) */
    while ((idle < 300) && (i < m)) { /* without backpressure: stops at m, and fails */
        ret = to_sink(ctx, &i, RINGK_WAIT_NONE);
        if (ret == 0) {
            i++;
            idle = 0;
        } else if (ret == -EAGAIN) {
            idle++;
            usleep(1000);
        } else {
            fprintf(stderr, "%s %llu: %s\n", what, (unsigned long long)i, strerror(-ret));
            return 1;
        }
    }
    const uint64_t accepted = i;
    /* 2. a timed send while still full (the log: from here on) */
    pthread_mutex_lock(&log_mu);
    logbuf[0] = '\0';
    pthread_mutex_unlock(&log_mu);
    t0     = now_ms();
    tret   = to_sink(ctx, &i, 200);
    waited = now_ms() - t0;
    ok = (accepted >= lo) && (accepted <= hi) && (tret == -ETIMEDOUT) && (waited >= 199);
    /* it said that it waited, and for what (rank 1's log is its own) */
    warned = (strstr(logbuf, "a thread outside the kernels has waited 0.") != NULL) &&
             (strstr(logbuf, publish_mode ? "for room in process 1 (256 publishes on their way" :
                                            "for room in 'sink' of process 1") != NULL);
    if (!warned) {
        fprintf(stderr, "no wait warning in the log: '%s'\n", logbuf);
    }
    ok = ok && warned;
    /* 3. the sink consumes again: the rest waits for credits as needed */
    if (tret == 0) {
        i++;
    }
    ret = ringk_send(ctx, NULL, "ctl", RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_FOREVER);
    for (; (ret == 0) && (i < m); i++) {
        ret = to_sink(ctx, &i, RINGK_WAIT_FOREVER);
    }
    if (ret == 0) {
        ret = ringk_send(ctx, NULL, "sink", RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
    }
    if (ret == 0) {
        ret = ringk_send(ctx, NULL, "ctl", RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
    }
    ok = ok && (ret == 0);
    ringk_ctx_destroy(ctx);
    printf("backpressure [rank 0 of 2]: %s, inbox %d: %llu accepted before -EAGAIN (%llu to %llu "
           "expected), timed %s: %s after %.0f ms (%s), then %llu in all: %s\n", what, W,
           (unsigned long long)accepted, (unsigned long long)lo, (unsigned long long)hi, what,
           (tret == 0) ? "accepted" : strerror(-tret), waited,
           warned ? "warned that it waited" : "no warning", (unsigned long long)i,
           ok ? "OK" : "FAIL");
    /* accepted: before the first -EAGAIN, expected lo..hi; timed_out: the timed send returned
     * -ETIMEDOUT, after waited_ms (whole ms); warned: the log said it waited; total: sent in
     * all; error: the errno that stopped step 3, or 0 */
    printf("RESULT job_backpressure rank=0 size=2 ok=%d publish=%d inbox=%d accepted=%llu lo=%llu "
           "hi=%llu timed_out=%d waited_ms=%lld warned=%d total=%llu expected=%llu error=%d\n",
           ok, publish_mode, W, (unsigned long long)accepted, (unsigned long long)lo,
           (unsigned long long)hi, tret == -ETIMEDOUT, (long long)waited, warned,
           (unsigned long long)i, (unsigned long long)m, -ret);
    return ok ? 0 : 1;
}
