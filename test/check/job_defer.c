/* SPDX-License-Identifier: BSD-3-Clause */
/* Calls deferred from a handler run in the receive callback (driven by test_job.sh).
 *
 * In rank 1, kernel "relay" gets N triggers, one at a time: rank 0's host sends the first, and
 * rank 0's "sink" sends the next once it has all of the last one's messages (relay's thread is
 * idle then, polling the worker, so the trigger's handler call may run in the receive
 * callback). For each trigger relay sends B numbered messages to "sink" (an inbox of 16: 16
 * credits, so its handler runs out of them) and the same B to "near" (rank 1, an inbox of 8
 * and a slow handler, so it fills), all waiting without a timeout. near forwards each to
 * "tail" in rank 0, so it needs the worker's lock that a handler running in the callback
 * holds. Nothing may wait in the callback: those sends are deferred and made in order once it
 * returned; waiting there instead aborts (UCX's check) or deadlocks.
 *
 * sink and tail must get all N * B in order; relay's statistics must show handler calls in the
 * callback, deferred sends and no failed ones. tail's handler takes 100 us on every 64th
 * message, one that is timed: after such a call in the callback, tail's messages must be
 * handled from its loop (logged once; fewer than half in the callback). Which of tail's calls
 * run in the callback depends on the machine's timing (on a loaded one only a few do, and none
 * of the 50 slow ones may be among them), so tail counts the slow calls that did: its next
 * call sees whether its inline_in statistic grew by one since the slow call began. The stop
 * must be logged exactly when one did (at most once). With RINGK_RECV_INLINE=0 nothing runs in
 * the callback. Prints one line per rank ending in OK or
 * FAIL, then one for the script: "RESULT job_defer rank=R size=2 ok=0|1 key=value ..." (ok=1:
 * exit 0). */
#include <ringk/api/ringk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define B 64

typedef struct {
    ringk_ctx_t *ctx;
    const char  *next;   /* a kernel to send each message on to, or NULL */
    int          sink;   /* sends relay its next trigger */
    uint64_t     got;    /* messages checked, atomic */
    uint64_t     bad;    /* of them out of order */
    /* tail: its inline_in when its last call began, whether that call was a slow, timed one,
     * and the slow calls that ran in the receive callback */
    uint64_t     inline_prev;
    int          slow_prev;
    uint64_t     slow_inline;
} checker_t;

static uint64_t n, stops;

/* tail's lines only: on a loaded machine another kernel's timed call in the callback may take
 * more than the limit too, and is then rightly handled from its loop as well */
static void count_stops(void *arg, int level, const char *message)
{
    if ((strstr(message, "kernel 'tail': ") != NULL) &&
        (strstr(message, "handled from its loop from now on") != NULL)) {
        __atomic_add_fetch(&stops, 1, __ATOMIC_RELAXED);
    }
}

/* sink, near and tail: numbers 0, 1, 2, ... in order */
static int check(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    checker_t *c = arg;
    uint64_t v, t;
    int ret = 0;

    memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    if ((c->next == NULL) && !c->sink) {
        /* tail: a call in the receive callback adds one to inline_in once it returned, before
         * the kernel's next call begins (both on the thread polling for it) */
        ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_INLINE_IN};

        ringk_kernel_stats_query(k, &st);
        c->slow_inline += c->slow_prev && (st.inline_in == c->inline_prev + 1);
        c->inline_prev  = st.inline_in;
        c->slow_prev    = (v % 64 == 0);
    }
    c->bad += (v != c->got);
    __atomic_store_n(&c->got, c->got + 1, __ATOMIC_RELEASE);
    if ((c->next == NULL) && !c->sink && (v % 64 == 0)) {
        usleep(100); /* tail: a slow call now and then (sequence number v: timed) */
    }
    if (c->next != NULL) {
        usleep(20); /* near: slower than relay, so its inbox fills */
        ret = ringk_send(c->ctx, k, c->next, RINGK_MSG_DATA, &v, 8, RINGK_WAIT_FOREVER);
    } else if (c->sink && (v % B == B - 1) && ((t = v / B + 1) < n)) {
        ret = ringk_send(c->ctx, k, "relay", RINGK_MSG_DATA, &t, 8, RINGK_WAIT_FOREVER);
    }
    return ret;
}

static int relay(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_ctx_t *ctx = arg;
    uint64_t t, v, j;
    int fails = 0;

    memcpy(&t, ringk_msg_payload(msg), sizeof(t));
    for (j = 0; j < B; j++) {
        v = t * B + j;
        fails += (ringk_send(ctx, k, "sink", RINGK_MSG_DATA, &v, 8, RINGK_WAIT_FOREVER) != 0);
        fails += (ringk_send(ctx, k, "near", RINGK_MSG_DATA, &v, 8, RINGK_WAIT_FOREVER) != 0);
    }
    return fails ? -1 : 0;
}

/* Waits until @a c checked @a want messages in order, at most 60 s: 0, or 1. */
static int wait_got(checker_t *c, uint64_t want)
{
    int ms;

    for (ms = 0; (ms < 60000) && (__atomic_load_n(&c->got, __ATOMIC_ACQUIRE) < want); ms++) {
        usleep(1000);
    }
    return (__atomic_load_n(&c->got, __ATOMIC_ACQUIRE) != want) || (c->bad != 0);
}

/* Creates kernel @a name running check() with @a c, @a inbox messages, sending to @a to. */
static int checker(ringk_ctx_t *ctx, const char *name, unsigned inbox, const char **to,
                   checker_t *c, ringk_kernel_t **k_p)
{
    ringk_kernel_params_t p = {
        .field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                        RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name         = name,
        .handler      = check,
        .arg          = c,
        .inbox_size   = inbox,
        .publishes_to = to
    };
    c->ctx = ctx;
    return ringk_kernel_create(ctx, &p, k_p);
}

int main(int argc, char **argv)
{
    static const char *outs[] = {"sink", "near", NULL}, *to_relay[] = {"relay", NULL},
                      *to_tail[] = {"tail", NULL}, *none[] = {NULL};
    static checker_t sink = {.sink = 1}, tail, near = {.next = "tail"};
    const char *env = getenv("RINGK_RECV_INLINE");
    const int inl   = (env == NULL) || strcmp(env, "0");
    ringk_kernel_params_t p = {
        .field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                        RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name         = "relay",
        .handler      = relay,
        .publishes_to = outs
    };
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = count_stops};
    ringk_kernel_t *k = NULL, *kt = NULL;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_ctx_t *ctx;
    int rank, fails = 0;
    uint64_t first = 0;

    n = (argc > 1) ? strtoull(argv[1], NULL, 10) : 50;
    if ((ringk_ctx_create(&cp, &ctx) != 0) || (ringk_ctx_size(ctx) != 2)) {
        return 2;
    }
    rank = ringk_ctx_rank(ctx);
    if (rank == 0) {
        fails += (checker(ctx, "sink", 16, to_relay, &sink, &k) != 0);
        fails += (checker(ctx, "tail", 256, none, &tail, &kt) != 0);
    } else {
        fails += (checker(ctx, "near", 8, to_tail, &near, &kt) != 0);
        p.arg  = ctx;
        fails += (ringk_kernel_create(ctx, &p, &k) != 0);
    }
    if (fails || (ringk_ctx_start(ctx) != 0)) {
        return 1;
    }
    if (rank == 0) {
        fails += (ringk_send(ctx, NULL, "relay", RINGK_MSG_DATA, &first, 8,
                             RINGK_WAIT_FOREVER) != 0);
        fails += wait_got(&sink, n * B) + wait_got(&tail, n * B);
        ringk_kernel_stats_query(kt, &st);
        /* the last message (n * B - 1) is not a slow one, so every slow call was counted */
        fails += inl ? ((st.inline_in == 0) || (tail.slow_inline > 1) ||
                        (stops != tail.slow_inline) ||
                        ((stops == 1) && (st.inline_in >= n * B / 2))) :
                       ((st.inline_in != 0) || (stops != 0));
        printf("defer [rank 0 of 2]: sink got %llu of %llu (%llu out of order), tail %llu "
               "(%llu out of order, %llu in the receive callback, %llu of them slow; stopped "
               "%llu times): %s\n", (unsigned long long)sink.got, (unsigned long long)(n * B),
               (unsigned long long)sink.bad, (unsigned long long)tail.got,
               (unsigned long long)tail.bad, (unsigned long long)st.inline_in,
               (unsigned long long)tail.slow_inline, (unsigned long long)stops,
               fails ? "FAIL" : "OK");
        /* tail_inline: tail's messages handled in the receive callback; slow_inline: of
         * them its slow, timed calls; stops: how often it was logged to be handled from its
         * loop from then on */
        printf("RESULT job_defer rank=0 size=2 ok=%d recv_inline=%d expected=%llu sink_got=%llu "
               "sink_out_of_order=%llu tail_got=%llu tail_out_of_order=%llu tail_inline=%llu "
               "slow_inline=%llu stops=%llu\n", fails == 0, inl, (unsigned long long)(n * B),
               (unsigned long long)sink.got, (unsigned long long)sink.bad,
               (unsigned long long)tail.got, (unsigned long long)tail.bad,
               (unsigned long long)st.inline_in, (unsigned long long)tail.slow_inline,
               (unsigned long long)stops);
    } else {
        fails += wait_got(&near, n * B);
        ringk_kernel_stats_query(k, &st);
        fails += (st.msgs_in != n) || (st.handler_errors != 0) || (st.deferred_failed != 0) ||
                 (inl ? ((st.inline_in == 0) || (st.deferred == 0)) :
                        ((st.inline_in != 0) || (st.deferred != 0)));
        printf("defer [rank 1 of 2]: near got %llu of %llu (%llu out of order); relay handled "
               "%llu triggers, %llu in the receive callback, deferred %llu sends, %llu failed: "
               "%s\n", (unsigned long long)near.got, (unsigned long long)(n * B),
               (unsigned long long)near.bad, (unsigned long long)st.msgs_in,
               (unsigned long long)st.inline_in, (unsigned long long)st.deferred,
               (unsigned long long)st.deferred_failed, fails ? "FAIL" : "OK");
        /* relay's statistics: triggers handled, of them in the receive callback, sends deferred
         * and of them failed, handler errors */
        printf("RESULT job_defer rank=1 size=2 ok=%d recv_inline=%d expected=%llu near_got=%llu "
               "near_out_of_order=%llu triggers=%llu relay_inline=%llu deferred=%llu "
               "deferred_failed=%llu handler_errors=%llu\n", fails == 0, inl,
               (unsigned long long)(n * B), (unsigned long long)near.got,
               (unsigned long long)near.bad, (unsigned long long)st.msgs_in,
               (unsigned long long)st.inline_in, (unsigned long long)st.deferred,
               (unsigned long long)st.deferred_failed, (unsigned long long)st.handler_errors);
    }
    ringk_ctx_destroy(ctx);
    return fails ? 1 : 0;
}
