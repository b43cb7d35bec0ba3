/* SPDX-License-Identifier: BSD-3-Clause */
/* Backpressure of publishes across processes (driven by test_job.sh), 2 processes: rank 1's
 * kernel "sink" (inbox of W = 16) subscribes to topic "bp" and starts inactive, so nothing
 * leaves its inbox. Rank 0 publishes without waiting until it is refused: a process may have
 * TW = 256 publishes on their way to another (credits), so TW are accepted (W of them in the
 * inbox, the rest in rank 1's backlog; the credits of the first W come back only in batches of
 * TW / 4), then -EAGAIN, and a publish with a 200 ms timeout returns -ETIMEDOUT after 200 ms.
 * Rank 0 then tells rank 1's "ctl" to activate the sink and publishes the rest of M waiting as
 * needed; the sink must get all M in order. Prints one line per rank ending in OK or FAIL. */
#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define W  16
#define TW 256 /* RINGK_TOPIC_WINDOW */

static ringk_kernel_t *sink;
static uint64_t got, bad;

static int sink_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;

    if (msg->length != sizeof(v)) {
        bad++;
        return 0;
    }
    memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    bad += (v != got);
    got++;
    return 0;
}

static int ctl_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return ringk_kernel_activate(sink);
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
    ringk_kernel_stats_t st;
    ringk_kernel_t *ctl;
    ringk_ctx_t *ctx;
    uint64_t i = 0;
    unsigned idle = 0;
    double t0, waited;
    int rank, ret, tret, ok;

    if (ringk_ctx_create(NULL, &ctx) != 0) {
        return 1;
    }
    rank = ringk_ctx_rank(ctx);
    if (ringk_ctx_size(ctx) != 2) {
        fprintf(stderr, "job_topic_backpressure needs 2 processes, not %d\n", ringk_ctx_size(ctx));
        return 2;
    }
    if (rank == 1) {
        static const char *topics[] = {"bp", NULL};
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE |
                          RINGK_KERNEL_PARAM_FIELD_MAX_IN | RINGK_KERNEL_PARAM_FIELD_START_INACTIVE |
                          RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB,
            .name = "sink", .handler = sink_handler, .mode = RINGK_MODE_EVENT_DRIVEN,
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
        ok = (got == m) && (bad == 0);
        printf("topic backpressure [rank 1 of 2]: sink got %llu of %llu, %llu out of order: %s\n",
               (unsigned long long)got, (unsigned long long)m, (unsigned long long)bad,
               ok ? "OK" : "FAIL");
        return ok ? 0 : 1;
    }
    /* 1. without waiting, until refused for 300 ms in a row (credits come back meanwhile) */
    while ((idle < 300) && (i < m)) { /* without backpressure: stops at m, and fails */
        ret = ringk_publish(ctx, NULL, "bp", &i, sizeof(i), RINGK_WAIT_NONE, NULL);
        ret = (ret > 0) ? 0 : ret;
        if (ret == 0) {
            i++;
            idle = 0;
        } else if (ret == -EAGAIN) {
            idle++;
            usleep(1000);
        } else {
            fprintf(stderr, "send %llu: %s\n", (unsigned long long)i, strerror(-ret));
            return 1;
        }
    }
    const uint64_t accepted = i;
    /* 2. a timed send while still full */
    t0     = now_ms();
    tret   = ringk_publish(ctx, NULL, "bp", &i, sizeof(i), 200, NULL);
    tret   = (tret > 0) ? 0 : tret;
    waited = now_ms() - t0;
    ok = (accepted >= TW) && (accepted <= TW + W) && (tret == -ETIMEDOUT) && (waited >= 199);
    /* 3. the sink consumes again: the rest waits for credits as needed */
    if (tret == 0) {
        i++;
    }
    ret = ringk_send(ctx, NULL, "ctl", RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_FOREVER);
    for (; (ret == 0) && (i < m); i++) {
        ret = ringk_publish(ctx, NULL, "bp", &i, sizeof(i), RINGK_WAIT_FOREVER, NULL);
        ret = (ret > 0) ? 0 : ret;
    }
    if (ret == 0) {
        ret = ringk_send(ctx, NULL, "sink", RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
    }
    if (ret == 0) {
        ret = ringk_send(ctx, NULL, "ctl", RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
    }
    ok = ok && (ret == 0);
    ringk_ctx_destroy(ctx);
    printf("topic backpressure [rank 0 of 2]: inbox %d: %llu publishes accepted before -EAGAIN "
           "(%d to %d expected), "
           "timed publish: %s after %.0f ms, then %llu published: %s\n", W,
           (unsigned long long)accepted,
           TW, TW + W, (tret == 0) ? "accepted" : strerror(-tret), waited, (unsigned long long)i,
           ok ? "OK" : "FAIL");
    return ok ? 0 : 1;
}
