/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the libringk runtime (one process, CPU executor): the helpers every file of the
 * program shares, per-pair FIFO under concurrency with backpressure, batch cells, waits that
 * close a cycle, and main. The other areas: test_runtime_clock.c (clock, messages),
 * test_runtime_route.c (routes and names), test_runtime_topic.c (lifecycle, topics, barriers),
 * test_runtime_errors.c (statistics, bad input), test_runtime_p2pq.c (the P2P queue). */
#include "test_runtime.h"
#include "test_log.h"
#include "test_util.h"

#include <ringk/api/ringk.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

char logbuf[16384];
pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void log_hook(void *arg, int level, const char *message)
{
    if (level <= RINGK_LOG_WARN) {
        test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
    }
}

ringk_ctx_t *ctx_new(void)
{
    ringk_ctx_params_t p = {
        .field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_PIN,
        .log        = log_hook,
        .pin        = 0
    };
    ringk_ctx_t *ctx;

    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_ctx_create(&p, &ctx), 0);
    ck_assert_int_eq(ringk_ctx_peers_lost(ctx), 0); /* one process: nobody to lose */
    return ctx;
}

double now_s(void)
{
    return test_now_s();
}

/* Waits up to 30 s for *counter to reach @a value. */
void wait_for(volatile uint64_t *counter, uint64_t value)
{
    test_wait_u64((const uint64_t*)counter, value, 30);
}

/* ---- FIFO under concurrency, backpressure ------------------------------------------------- */

#define SOURCES   3
#define PER_SRC   20000

typedef struct {
    uint32_t src;
    uint32_t n;
} item_t;

static uint64_t sink_got, sink_bad, sink_expect[SOURCES], sink_seq[SOURCES + 8];

static int sink_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const item_t *it = ringk_msg_payload(msg);

    if ((msg->length != sizeof(*it)) || (it->src >= SOURCES) || (it->n != sink_expect[it->src]) ||
        (msg->seq != sink_seq[msg->sender])) {
        sink_bad++;
    }
    sink_expect[it->src] = it->n + 1;
    sink_seq[msg->sender] = msg->seq + 1;
    __atomic_fetch_add(&sink_got, 1, __ATOMIC_RELEASE);
    return 0;
}

/* A topology hwloc cannot load (no discovery component at all) leaves the threads unpinned,
 * says so, and leaks nothing (the sanitizer runs check that). */
START_TEST(test_runtime_ctx_hwloc_unloadable)
{
    ringk_ctx_params_t p = {
        .field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_PIN,
        .log        = log_hook,
        .pin        = 1
    };
    ringk_ctx_t *ctx;

    logbuf[0] = '\0';
    setenv("HWLOC_COMPONENTS", "stop", 1);
    ck_assert_int_eq(ringk_ctx_create(&p, &ctx), 0);
    unsetenv("HWLOC_COMPONENTS");
    ck_assert_msg(strstr(logbuf, "hwloc cannot load the topology") != NULL, "log: %s", logbuf);
    ck_assert_int_eq(ringk_ctx_start(ctx), 0);
    ck_assert_int_eq(ringk_ctx_destroy(ctx), 0);
}
END_TEST

/* A handler finds its context through its kernel and sends with it: "relay" forwards to
 * "end", which records the context it was run in. */
static ringk_ctx_t *seen_ctx;
static uint64_t relayed;

static int relay_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return ringk_send(ringk_kernel_ctx(k), k, "end", RINGK_MSG_DATA, ringk_msg_payload(msg),
                      msg->length, RINGK_WAIT_FOREVER);
}

static int end_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_store_n(&seen_ctx, ringk_kernel_ctx(k), __ATOMIC_RELAXED);
    __atomic_fetch_add(&relayed, 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_kernel_ctx)
{
    static const char *const to_end[] = {"end", NULL};
    ringk_kernel_params_t p = {
        .field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                        RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name         = "relay",
        .handler      = relay_handler,
        .publishes_to = to_end
    };
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_t *relay, *end;
    uint64_t v = 42;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &relay), 0);
    p = (ringk_kernel_params_t){
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .name       = "end",
        .handler    = end_handler
    };
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &end), 0);
    ck_assert_int_eq(ringk_ctx_start(ctx), 0);
    ck_assert_ptr_eq(ringk_kernel_ctx(relay), ctx);
    ck_assert_int_eq(ringk_send(ctx, NULL, "relay", RINGK_MSG_DATA, &v, sizeof(v),
                                RINGK_WAIT_FOREVER), 0);
    wait_for(&relayed, 1);
    ck_assert_ptr_eq(__atomic_load_n(&seen_ctx, __ATOMIC_RELAXED), ctx);
    ck_assert_int_eq(ringk_ctx_destroy(ctx), 0);
}
END_TEST

static ringk_ctx_t *fifo_ctx;

static int source_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    item_t it = {.src = (uint32_t)(uintptr_t)arg};
    int ret;

    for (it.n = 0; it.n < PER_SRC; it.n++) {
        ret = ringk_send(fifo_ctx, k, "sink", RINGK_MSG_DATA, &it, sizeof(it),
                         RINGK_WAIT_FOREVER);
        if (ret != 0) {
            return ret;
        }
    }
    return 0;
}

START_TEST(test_runtime_fifo_backpressure)
{
    static const char *to_sink[] = {"sink", NULL};
    ringk_kernel_params_t sp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                      RINGK_KERNEL_PARAM_FIELD_PROCESSING,
        .name = "sink", .handler = sink_handler, .inbox_size = 16, .max_in = 64,
        .processing = RINGK_PROCESSING_BATCH
    };
    ringk_kernel_t *sink, *src[SOURCES];
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    char name[16];
    int i;

    fifo_ctx = ctx_new();
    memset(sink_expect, 0, sizeof(sink_expect));
    memset(sink_seq, 0, sizeof(sink_seq));
    sink_got = sink_bad = 0;
    ck_assert_int_eq(ringk_kernel_create(fifo_ctx, &sp, &sink), 0);
    for (i = 0; i < SOURCES; i++) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO |
                          ((i == 2) ? RINGK_KERNEL_PARAM_FIELD_MODE : 0),
            .name = name, .handler = source_handler, .arg = (void*)(uintptr_t)i,
            .publishes_to = to_sink, .mode = RINGK_MODE_EVENT_DRIVEN
        };
        snprintf(name, sizeof(name), "source%d", i);
        ck_assert_int_eq(ringk_kernel_create(fifo_ctx, &p, &src[i]), 0);
    }
    for (i = 0; i < SOURCES; i++) {
        snprintf(name, sizeof(name), "source%d", i);
        ck_assert_int_eq(ringk_send(fifo_ctx, NULL, name, RINGK_MSG_DATA, NULL, 0,
                                    RINGK_WAIT_NONE), 0);
    }
    wait_for(&sink_got, (uint64_t)SOURCES * PER_SRC);
    ck_assert_uint_eq(sink_bad, 0);
    for (i = 0; i < SOURCES; i++) {
        ck_assert_uint_eq(sink_expect[i], PER_SRC);
        ck_assert_int_eq(ringk_kernel_stats_query(src[i], &st), 0);
        ck_assert_uint_eq(st.msgs_out, PER_SRC);
        ck_assert_uint_eq(st.handler_errors, 0);
    }
    ck_assert_int_eq(ringk_kernel_stats_query(sink, &st), 0);
    ck_assert_uint_eq(st.msgs_in, (uint64_t)SOURCES * PER_SRC);
    ck_assert_uint_eq(st.drops, 0);
    ck_assert_int_eq(ringk_ctx_destroy(fifo_ctx), 0);
}
END_TEST

uint64_t counted;

int count_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_fetch_add(&counted, 1, __ATOMIC_RELEASE);
    return 0;
}

ringk_kernel_params_t counter_params(const char *name, unsigned inbox, int inactive)
{
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                      (inactive ? RINGK_KERNEL_PARAM_FIELD_START_INACTIVE : 0),
        .name = name, .handler = count_handler, .inbox_size = inbox, .max_in = 128
    };
    return p;
}

/* ---- batch cells: a handler's sends to one kernel share inbox cells ------------------------- */


ringk_ctx_t *batch_ctx;
uint64_t batch_got, batch_bad, batch_next_v, batch_next_seq;

int batch_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v = UINT64_MAX;

    if (msg->length == sizeof(v)) {
        memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    }
    if ((v != batch_next_v) || (msg->seq != batch_next_seq) || (msg->type != RINGK_MSG_DATA) ||
        (msg->receiver != ringk_kernel_id(k)) || (msg->timestamp != 0)) {
        batch_bad++;
    }
    batch_next_v   = v + 1;
    batch_next_seq = msg->seq + 1;
    __atomic_fetch_add(&batch_got, 1, __ATOMIC_RELEASE);
    return 0;
}

static int batch_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;
    int ret;

    for (v = 0; v < BATCH_N; v++) {
        ret = ringk_send(batch_ctx, k, "bsink", RINGK_MSG_DATA, &v, sizeof(v), RINGK_WAIT_FOREVER);
        if (ret != 0) {
            return ret;
        }
    }
    return 0;
}

/* 200 sends from one handler call: the first goes out alone, the other 199 in batch cells (18 a
 * cell), which a sink taking 1 (continuous), 3 (max_per_iteration) or all (adaptive, event-
 * driven) messages an iteration consumes in parts; order, sequence numbers and counts hold, and
 * batched_in shows the batch path was taken. _i = 0, 1, 2: those three sinks. */
START_TEST(test_runtime_batch_order_fairness)
{
    static const char *to_sink[] = {"bsink", NULL};
    ringk_kernel_params_t sp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_PROCESSING |
                      RINGK_KERNEL_PARAM_FIELD_MAX_IN,
        .name = "bsink", .handler = batch_sink, .inbox_size = 8, .max_in = 64,
        .processing = RINGK_PROCESSING_CONTINUOUS
    };
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "bsource", .handler = batch_source, .publishes_to = to_sink
    };
    ringk_kernel_t *sink, *src;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};

    batch_ctx = ctx_new();
    batch_got = batch_bad = batch_next_v = batch_next_seq = 0;
    if (_i == 1) {
        sp.field_mask        |= RINGK_KERNEL_PARAM_FIELD_MAX_PER_ITER;
        sp.processing         = RINGK_PROCESSING_BATCH;
        sp.max_per_iteration  = 3;
    } else if (_i == 2) {
        sp.field_mask |= RINGK_KERNEL_PARAM_FIELD_MODE;
        sp.mode        = RINGK_MODE_EVENT_DRIVEN;
        sp.processing  = RINGK_PROCESSING_ADAPTIVE;
    }
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &sp, &sink), 0);
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &src), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "bsource", RINGK_MSG_DATA, NULL, 0,
                                RINGK_WAIT_FOREVER), 0);
    wait_for(&batch_got, BATCH_N);
    ck_assert_uint_eq(batch_bad, 0);
    ck_assert_int_eq(ringk_kernel_stats_query(sink, &st), 0);
    ck_assert_uint_eq(st.msgs_in, BATCH_N);
    ck_assert_uint_eq(st.batched_in, BATCH_N - 1);
    ck_assert_uint_eq(st.drops, 0);
    ck_assert_int_eq(ringk_kernel_stats_query(src, &st), 0);
    ck_assert_uint_eq(st.msgs_out, BATCH_N);
    ck_assert_uint_eq(st.handler_errors, 0);
    ringk_ctx_destroy(batch_ctx);
}
END_TEST

/* A holds an open batch cell in B's inbox, then streams to C, whose handler forwards each message
 * to B: B stops at A's cell, C blocks on B's full inbox, A on C's. A must publish its cell
 * before it waits (flush_running), or the three wait for each other for ever. */
uint64_t cycle_b;

static int cycle_a(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;
    int ret = 0;

    for (v = 0; (ret == 0) && (v < 2); v++) {
        ret = ringk_send(batch_ctx, k, "cb", RINGK_MSG_DATA, &v, sizeof(v), RINGK_WAIT_FOREVER);
    }
    for (v = 0; (ret == 0) && (v < 100); v++) {
        ret = ringk_send(batch_ctx, k, "cc", RINGK_MSG_DATA, &v, sizeof(v), RINGK_WAIT_FOREVER);
    }
    return ret;
}

static int cycle_c(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return ringk_send(batch_ctx, k, "cb", RINGK_MSG_DATA, ringk_msg_payload(msg), msg->length,
                      RINGK_WAIT_FOREVER);
}

static int cycle_count(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_fetch_add(&cycle_b, 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_batch_no_wait_holding)
{
    static const char *a_to[] = {"cb", "cc", NULL}, *c_to[] = {"cb", NULL};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_PROCESSING |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MAX_IN,
        .processing = RINGK_PROCESSING_CONTINUOUS, .max_in = 64 /* inboxes of inbox_size cells */
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *b, *k;

    batch_ctx = ctx_new();
    cycle_b   = 0;
    p.name = "cb"; p.handler = cycle_count; p.inbox_size = 4; p.publishes_to = NULL;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &b), 0);
    p.name = "cc"; p.handler = cycle_c; p.inbox_size = 2; p.publishes_to = c_to;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k), 0);
    p.name = "ca"; p.handler = cycle_a; p.inbox_size = 2; p.publishes_to = a_to;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "ca", RINGK_MSG_DATA, NULL, 0,
                                RINGK_WAIT_FOREVER), 0);
    wait_for(&cycle_b, 102);
    ck_assert_int_eq(ringk_kernel_stats_query(b, &st), 0);
    ck_assert_uint_eq(st.msgs_in, 102);
    ck_assert_uint_ge(st.batched_in, 1); /* A's second message came in a batch cell */
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_uint_eq(st.handler_errors, 0);
    ringk_ctx_destroy(batch_ctx);
}
END_TEST

/* Waits for room that close a cycle. _i = 0: kernels "dla" and "dlb" (inboxes of 8 cells) each
 * get a start message, then send 1000 messages to the other without a timeout from that one
 * handler call: each waits for the other's inbox, which only the other empties. The one with
 * the lower id ("dla") gives up with -EDEADLK and returns to its inbox; "dlb" then finishes, and
 * every send that returned 0 arrives. _i = 1: "dlb" waits with a 300 ms timeout instead: no
 * deadlock is reported, "dlb" times out and "dla" finishes. _i = 2: "dla" sends to itself. */
static ringk_ctx_t *dl_ctx;
static uint64_t dl_recv[2], dl_sent[2], dl_done[2];
static int dl_err[2], dl_case;

static int dl_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const unsigned me = (unsigned)(uintptr_t)arg;
    const char *to = ((me == 1) || (dl_case == 2)) ? "dla" : "dlb";
    int timeout = ((me == 1) && (dl_case == 1)) ? 300 : RINGK_WAIT_FOREVER;
    uint64_t v;
    int ret = 0;

    if (msg->length != 0) {
        __atomic_fetch_add(&dl_recv[me], 1, __ATOMIC_RELEASE);
        return 0;
    }
    for (v = 0; v < 1000; v++) {
        ret = ringk_send(dl_ctx, k, to, RINGK_MSG_DATA, &v, sizeof(v), timeout);
        if (ret != 0) {
            break;
        }
        dl_sent[me]++;
    }
    dl_err[me] = ret;
    __atomic_store_n(&dl_done[me], 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_wait_cycle)
{
    static const char *to_b[] = {"dlb", "dla", NULL}, *to_a[] = {"dla", NULL};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO |
                      RINGK_KERNEL_PARAM_FIELD_START_INACTIVE,
        .handler = dl_handler, .inbox_size = 8, .max_in = 64
    };
    ringk_kernel_t *k[2];
    unsigned i, n = (_i == 2) ? 1 : 2;

    dl_ctx  = ctx_new();
    dl_case = _i;
    memset(dl_recv, 0, sizeof(dl_recv));
    memset(dl_sent, 0, sizeof(dl_sent));
    memset(dl_done, 0, sizeof(dl_done));
    dl_err[0] = dl_err[1] = 1;
    for (i = 0; i < n; i++) {
        p.name         = (i == 0) ? "dla" : "dlb";
        p.arg          = (void*)(uintptr_t)i;
        p.publishes_to = (i == 0) ? to_b : to_a;
        ck_assert_int_eq(ringk_kernel_create(dl_ctx, &p, &k[i]), 0);
        ck_assert_int_eq(ringk_send(dl_ctx, NULL, p.name, RINGK_MSG_DATA, NULL, 0, 0), 0);
    }
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(ringk_kernel_activate(k[i]), 0);
    }
    wait_for(&dl_done[0], 1);
    if (_i == 2) {
        ck_assert_int_eq(dl_err[0], -EDEADLK);
        wait_for(&dl_recv[0], dl_sent[0]);
        ck_assert_ptr_nonnull(strstr(logbuf, "deadlock: kernel 'dla' waits without a timeout "
                                     "for room in 'dla'"));
        ringk_ctx_destroy(dl_ctx);
        return;
    }
    wait_for(&dl_done[1], 1);
    wait_for(&dl_recv[0], dl_sent[1]);
    wait_for(&dl_recv[1], dl_sent[0]);
    if (_i == 0) {
        ck_assert_int_eq(dl_err[0], -EDEADLK);
        ck_assert_uint_lt(dl_sent[0], 1000);
        ck_assert_int_eq(dl_err[1], 0);
        ck_assert_uint_eq(dl_sent[1], 1000);
        ck_assert_ptr_nonnull(strstr(logbuf, "deadlock: kernel 'dla' waits without a timeout "
                                     "for room in 'dlb'"));
    } else {
        ck_assert_int_eq(dl_err[0], 0);
        ck_assert_uint_eq(dl_sent[0], 1000);
        ck_assert_int_eq(dl_err[1], -ETIMEDOUT);
        ck_assert_ptr_null(strstr(logbuf, "deadlock"));
    }
    /* nothing more than was sent arrives */
    usleep(20000);
    ck_assert_uint_eq(dl_recv[0], dl_sent[1]);
    ck_assert_uint_eq(dl_recv[1], dl_sent[0]);
    ringk_ctx_destroy(dl_ctx);
}
END_TEST

/* A kernel that waits hands back the inbox cells its dispatch loop has finished with first
 * (they go back 32 at a time otherwise), so a wait that only looks like a cycle is not one.
 * "ea" (inbox of 8 cells, batch processing) handles 7 queued messages in one iteration; at the
 * 7th it sends 300 messages to the inactive "eb" and waits for room. "eb" is then activated and
 * its first message makes it send 100 messages (7 cells) back to "ea": they fit only if the 6
 * cells "ea" has finished with were handed back. No deadlock is reported and everything arrives. */
static uint64_t er_recv[2], er_sent[2], er_done[2], er_sending;
static int er_err[2];

static int er_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const unsigned me = (unsigned)(uintptr_t)arg;
    const uint64_t count = me ? 100 : 300;
    uint64_t v = 0;
    int ret = 0;

    if (msg->length == sizeof(v)) {
        memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    }
    if ((me == 0) ? (v != 7) : (msg->length != 0)) {
        __atomic_fetch_add(&er_recv[me], 1, __ATOMIC_RELEASE);
        return 0;
    }
    __atomic_store_n(&er_sending, 1, __ATOMIC_RELEASE);
    for (v = 100; v < 100 + count; v++) {
        ret = ringk_send(dl_ctx, k, me ? "ea" : "eb", RINGK_MSG_DATA, &v, sizeof(v),
                         RINGK_WAIT_FOREVER);
        if (ret != 0) {
            break;
        }
        er_sent[me]++;
    }
    er_err[me] = ret;
    __atomic_store_n(&er_done[me], 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_wait_hands_back)
{
    static const char *to_b[] = {"eb", NULL}, *to_a[] = {"ea", NULL};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_PROCESSING |
                      RINGK_KERNEL_PARAM_FIELD_START_INACTIVE,
        .handler = er_handler, .inbox_size = 8, .max_in = 64,
        .processing = RINGK_PROCESSING_BATCH
    };
    ringk_kernel_t *a, *b;
    uint64_t v;

    dl_ctx = ctx_new();
    memset(er_recv, 0, sizeof(er_recv));
    memset(er_sent, 0, sizeof(er_sent));
    memset(er_done, 0, sizeof(er_done));
    er_sending = 0;
    er_err[0] = er_err[1] = 1;
    p.name = "ea"; p.arg = (void*)0; p.publishes_to = to_b;
    ck_assert_int_eq(ringk_kernel_create(dl_ctx, &p, &a), 0);
    p.name = "eb"; p.arg = (void*)1; p.publishes_to = to_a;
    ck_assert_int_eq(ringk_kernel_create(dl_ctx, &p, &b), 0);
    ck_assert_int_eq(ringk_send(dl_ctx, NULL, "eb", RINGK_MSG_DATA, NULL, 0, 0), 0);
    for (v = 1; v <= 7; v++) {
        ck_assert_int_eq(ringk_send(dl_ctx, NULL, "ea", RINGK_MSG_DATA, &v, sizeof(v), 0), 0);
    }
    ck_assert_int_eq(ringk_kernel_activate(a), 0);
    wait_for(&er_sending, 1);
    usleep(50000); /* "ea" fills the inbox of "eb" and waits */
    ck_assert_uint_eq(__atomic_load_n(&er_done[0], __ATOMIC_ACQUIRE), 0);
    ck_assert_int_eq(ringk_kernel_activate(b), 0);
    wait_for(&er_done[0], 1);
    wait_for(&er_done[1], 1);
    ck_assert_int_eq(er_err[0], 0);
    ck_assert_int_eq(er_err[1], 0);
    ck_assert_uint_eq(er_sent[0], 300);
    ck_assert_uint_eq(er_sent[1], 100);
    wait_for(&er_recv[0], 6 + 100);
    wait_for(&er_recv[1], 300);
    ck_assert_ptr_null(strstr(logbuf, "deadlock"));
    ringk_ctx_destroy(dl_ctx);
}
END_TEST

/* Terminating a kernel from a handler that holds a batch cell in its inbox: what was sent before
 * is handled (the cell is published before terminate waits), a send after it fails. */
static int term_result[2];

static int term_sender(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;

    for (v = 0; v < 5; v++) {
        if (ringk_send(batch_ctx, k, "tb", RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) {
            return -1;
        }
    }
    term_result[0] = ringk_kernel_terminate((ringk_kernel_t*)arg);
    term_result[1] = ringk_send(batch_ctx, k, "tb", RINGK_MSG_DATA, &v, sizeof(v), 1000);
    __atomic_store_n(&cycle_b, 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_batch_terminate)
{
    static const char *to_b[] = {"tb", NULL};
    ringk_kernel_params_t p = counter_params("tb", 64, 0);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *b, *a;

    batch_ctx = ctx_new();
    counted   = 0;
    cycle_b   = 0;
    term_result[0] = term_result[1] = 1;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &b), 0);
    p.name = "ta"; p.handler = term_sender; p.arg = b; p.publishes_to = to_b;
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &a), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "ta", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    wait_for(&cycle_b, 1);
    ck_assert_int_eq(term_result[0], 0);
    ck_assert_int_eq(term_result[1], -EPIPE);
    ck_assert_uint_eq(counted, 5);
    ck_assert_int_eq(ringk_kernel_stats_query(b, &st), 0);
    ck_assert_int_eq(st.state, RINGK_KERNEL_TERMINATED);
    ck_assert_uint_eq(st.msgs_in, 5);
    ck_assert_uint_eq(st.batched_in, 4);
    ringk_ctx_destroy(batch_ctx);
}
END_TEST

/* A send to a kernel that sleeps, is about to, or spins is always handled promptly: 1000 sends
 * 0-3 ms apart (the executor spins briefly, then sleeps for up to 100 ms unless woken), each
 * must be handled within 50 ms. A lost wakeup (W1/W2 in ringk_exec_cpu.c and ringk_exec.h) would take 100 ms.
 * _i = 0: a persistent kernel (its own thread); 1: an event-driven one (the pool threads). */
START_TEST(test_runtime_wakeup_never_lost)
{
    ringk_ctx_t *ctx;
    ringk_kernel_params_t p = counter_params("sleepy", 64, 0);
    double t0, lat, worst = 0;
    ringk_kernel_t *k;
    uint64_t i;

    /* A sleeper nobody wakes looks again only after 10 s: a lost wakeup is a 10 s stall, which
     * the 5 s limit below catches, and no scheduling delay of a loaded machine comes near it. */
    setenv("RINGK_IDLE_WAKE_MS", "10000", 1);
    ctx = ctx_new();
    unsetenv("RINGK_IDLE_WAKE_MS");

    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_MODE;
    p.mode        = (_i == 0) ? RINGK_MODE_PERSISTENT : RINGK_MODE_EVENT_DRIVEN;
    counted = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    srand(7);
    for (i = 0; i < 1000; i++) {
        usleep(rand() % 3000);
        t0 = now_s();
        ck_assert_int_eq(ringk_send(ctx, NULL, "sleepy", RINGK_MSG_DATA, &i, sizeof(i),
                                    RINGK_WAIT_FOREVER), 0);
        while (__atomic_load_n(&counted, __ATOMIC_ACQUIRE) < i + 1) {
            ck_assert_msg(now_s() - t0 < 5, "message %llu not handled in 5 s",
                          (unsigned long long)i);
        }
        lat   = now_s() - t0;
        worst = (lat > worst) ? lat : worst;
    }
    printf("# wakeup_never_lost (%s): worst send-to-handled %.1f ms over 1000 sends\n",
           (_i == 0) ? "persistent" : "event-driven", worst * 1e3);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A full inbox refuses with -EAGAIN (or -ETIMEDOUT after waiting): every message is either
 * accepted and later handled, or refused and counted; none is lost. */
START_TEST(test_runtime_backpressure_counted)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t p = counter_params("slow", 8, 1);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k;
    uint64_t accepted = 0, refused = 0;
    double t0;
    int i, ret;

    counted = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 100; i++) {
        ret = ringk_send(ctx, NULL, "slow", RINGK_MSG_DATA, &i, sizeof(i), RINGK_WAIT_NONE);
        ck_assert(ret == 0 || ret == -EAGAIN);
        accepted += (ret == 0);
        refused  += (ret == -EAGAIN);
    }
    ck_assert_uint_eq(accepted, 8); /* the inbox holds 8 small messages */
    ck_assert_uint_eq(refused, 92);
    t0  = now_s();
    ret = ringk_send(ctx, NULL, "slow", RINGK_MSG_DATA, &i, sizeof(i), 50);
    ck_assert_int_eq(ret, -ETIMEDOUT);
    ck_assert(now_s() - t0 >= 0.045);
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_uint_eq(st.refused_full, 93);
    ck_assert_uint_eq(st.queue_depth, 8);
    ck_assert_uint_eq(st.msgs_in, 0);       /* inactive: nothing consumed */
    ck_assert_int_eq(ringk_kernel_activate(k), 0);
    wait_for(&counted, 8);
    usleep(10000);
    ck_assert_uint_eq(counted, 8);
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_uint_eq(st.msgs_in, 8);
    ck_assert_uint_eq(st.queue_depth, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc;

    tc = tcase_create("clock");
    test_runtime_clock_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("kernel");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_runtime_fifo_backpressure);
    tcase_add_loop_test(tc, test_runtime_batch_order_fairness, 0, 3);
    tcase_add_test(tc, test_runtime_batch_no_wait_holding);
    tcase_add_test(tc, test_runtime_batch_terminate);
    tcase_add_test(tc, test_runtime_kernel_ctx);
    tcase_add_test(tc, test_runtime_ctx_hwloc_unloadable);
    tcase_add_loop_test(tc, test_runtime_wait_cycle, 0, 3);
    tcase_add_test(tc, test_runtime_wait_hands_back);
    tcase_add_test(tc, test_runtime_backpressure_counted);
    tcase_add_loop_test(tc, test_runtime_wakeup_never_lost, 0, 2);
    test_runtime_route_tests(tc);
    test_runtime_topic_tests(tc);
    test_runtime_stats_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("p2pq");
    tcase_set_timeout(tc, 60);
    test_runtime_p2pq_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    test_runtime_errors_tests(tc);
    suite_add_tcase(s, tc);

    return test_run_suite(s);
}
