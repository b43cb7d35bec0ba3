/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the libringk runtime (one process, CPU executor): clock properties, messages,
 * per-pair FIFO under concurrency with backpressure, lifecycle, topics, barriers, statistics
 * and bad input. */
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

static char logbuf[16384];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_hook(void *arg, int level, const char *message)
{
    if (level <= RINGK_LOG_WARN) {
        test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
    }
}

static ringk_ctx_t *ctx_new(void)
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

static double now_s(void)
{
    return test_now_s();
}

/* Waits up to 30 s for *counter to reach @a value. */
static void wait_for(volatile uint64_t *counter, uint64_t value)
{
    test_wait_u64((const uint64_t*)counter, value, 30);
}

/* ---- clock -------------------------------------------------------------------------------- */

START_TEST(test_hlc_monotonic)
{
    ringk_hlc_t c;
    uint64_t prev, t;
    int i;

    int bad = 0;

    ringk_hlc_init(&c);
    prev = ringk_hlc_tick(&c);
    /* plain comparisons in the loop: ck_assert reports each check to the parent process */
    for (i = 0; i < 1000000; i++) {
        t = ringk_hlc_tick(&c);
        bad += (t <= prev);
        prev = t;
    }
    ck_assert_int_eq(bad, 0);
    /* the physical part stays near the wall clock */
    ck_assert_uint_ge(RINGK_HLC_PHYSICAL_MS(prev), (uint64_t)time(NULL) * 1000 - 1000);
    ck_assert_uint_le(RINGK_HLC_PHYSICAL_MS(prev), (uint64_t)time(NULL) * 1000 + 5000);
}
END_TEST

START_TEST(test_hlc_causal)
{
    ringk_hlc_t a, b;
    uint64_t sent, recvd, ahead, later;

    ringk_hlc_init(&a);
    ringk_hlc_init(&b);
    sent  = ringk_hlc_tick(&a);
    recvd = ringk_hlc_recv(&b, sent);
    ck_assert_uint_gt(recvd, sent);                   /* receive after send */
    /* a sender whose clock runs 10 s ahead: the receiver moves past it, logically */
    ahead = ((RINGK_HLC_PHYSICAL_MS(sent) + 10000) << 16) | 7;
    recvd = ringk_hlc_recv(&b, ahead);
    ck_assert_uint_gt(recvd, ahead);
    ck_assert_uint_eq(RINGK_HLC_PHYSICAL_MS(recvd), RINGK_HLC_PHYSICAL_MS(ahead));
    ck_assert_uint_eq(RINGK_HLC_LOGICAL(recvd), 8);
    later = ringk_hlc_tick(&b);
    ck_assert_uint_gt(later, recvd);                  /* and stays monotonic */
}
END_TEST

#define HLC_THREADS 4
#define HLC_TICKS   100000

static ringk_hlc_t shared_clock;
static uint64_t hlc_values[HLC_THREADS][HLC_TICKS];

static void *hlc_thread(void *arg)
{
    uint64_t *out = arg;
    int i;

    for (i = 0; i < HLC_TICKS; i++) {
        out[i] = ringk_hlc_tick(&shared_clock);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return (x > y) - (x < y);
}

START_TEST(test_hlc_concurrent_unique)
{
    pthread_t th[HLC_THREADS];
    static uint64_t all[HLC_THREADS * HLC_TICKS];
    int i, j, bad = 0, dup = 0;

    ringk_hlc_init(&shared_clock);
    for (i = 0; i < HLC_THREADS; i++) {
        pthread_create(&th[i], NULL, hlc_thread, hlc_values[i]);
    }
    for (i = 0; i < HLC_THREADS; i++) {
        pthread_join(th[i], NULL);
        for (j = 1; j < HLC_TICKS; j++) {
            bad += (hlc_values[i][j] <= hlc_values[i][j - 1]);
        }
        memcpy(&all[i * HLC_TICKS], hlc_values[i], sizeof(hlc_values[i]));
    }
    ck_assert_int_eq(bad, 0); /* monotonic in every thread */
    qsort(all, HLC_THREADS * HLC_TICKS, sizeof(all[0]), cmp_u64);
    for (i = 1; i < HLC_THREADS * HLC_TICKS; i++) {
        dup += (all[i] == all[i - 1]);
    }
    ck_assert_int_eq(dup, 0); /* one atomic word: no two events alike */
}
END_TEST

START_TEST(test_msg_helpers)
{
    struct {
        ringk_msg_t hdr;
        char        data[8];
    } a, b;

    ringk_msg_init(&a.hdr, RINGK_MSG_CONTROL, 3, RINGK_MSG_BROADCAST, 8);
    ck_assert_uint_eq(a.hdr.type, RINGK_MSG_CONTROL);
    ck_assert_uint_eq(a.hdr.receiver, RINGK_MSG_BROADCAST);
    memcpy(a.data, "payload!", 8);
    b = a;
    ck_assert(ringk_msg_equal(&a.hdr, &b.hdr));
    b.data[7] = '?';
    ck_assert(!ringk_msg_equal(&a.hdr, &b.hdr));
    b = a;
    b.hdr.seq = 1;
    ck_assert(!ringk_msg_equal(&a.hdr, &b.hdr));
}
END_TEST

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

static uint64_t counted;

static int count_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_fetch_add(&counted, 1, __ATOMIC_RELEASE);
    return 0;
}

static ringk_kernel_params_t counter_params(const char *name, unsigned inbox, int inactive)
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

#define BATCH_N 200

static ringk_ctx_t *batch_ctx;
static uint64_t batch_got, batch_bad, batch_next_v, batch_next_seq;

static int batch_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
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
static uint64_t cycle_b;

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

/* Route lookup: ringk_send() tries the route of the kernel's last send first. Names that share
 * prefixes, sent from one buffer whose contents change between sends, must each reach their own
 * kernel; a name the kernel does not publish to (a longer one, the empty one) is refused, and a
 * message over the receiver's max_in is refused whether or not it would have been batched. */
static const char *route_names[] = {"rx", "rxy", "r", NULL};
static const unsigned route_seq[] = {0, 1, 2, 1, 0, 0, 2, 2, 1, 0, 1, 2};
static uint64_t route_got[3], route_bad;
static int route_err[4];

static int route_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t v = UINT64_MAX;

    if (msg->length == sizeof(v)) {
        memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    }
    if (v != me) {
        __atomic_fetch_add(&route_bad, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&route_got[me], 1, __ATOMIC_RELEASE);
    return 0;
}

static int route_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    char name[16];
    uint8_t big[16] = {0};
    uint64_t v;
    unsigned i;

    for (i = 0; i < sizeof(route_seq) / sizeof(route_seq[0]); i++) {
        v = route_seq[i];
        strcpy(name, route_names[v]);
        if (ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) {
            return -1;
        }
    }
    strcpy(name, "rxyz");
    route_err[0] = ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000);
    name[0] = '\0';
    route_err[1] = ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000);
    strcpy(name, "r"); /* its max_in is 8 */
    route_err[2] = ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, big, sizeof(big), 1000);
    v = 2;
    route_err[3] = ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000);
    return 0;
}

/* Creates a kernel of batch_ctx from @a p as @a name, with @a handler and routes to @a routes,
 * and sends it the empty message that starts it. */
static ringk_kernel_t *source_start(ringk_kernel_params_t *p, const char *name,
                                    ringk_handler_t handler, const char *const *routes)
{
    ringk_kernel_t *k;

    p->name         = name;
    p->handler      = handler;
    p->field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p->publishes_to = routes;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, p, &k), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, name, RINGK_MSG_DATA, NULL, 0, 1000), 0);
    return k;
}

START_TEST(test_runtime_route_lookup)
{
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_MAX_IN,
        .handler = route_sink, .max_in = 64
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k[3];
    unsigned i;

    batch_ctx = ctx_new();
    memset(route_got, 0, sizeof(route_got));
    route_bad = 0;
    for (i = 0; i < 3; i++) {
        p.name   = route_names[i];
        p.arg    = (void*)(uintptr_t)i;
        p.max_in = (i == 2) ? 8 : 64;
        ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k[i]), 0);
    }
    (void)source_start(&p, "rsrc", route_source, route_names);
    wait_for(&route_got[0], 4);
    wait_for(&route_got[1], 4);
    wait_for(&route_got[2], 5);
    ck_assert_uint_eq(route_bad, 0);
    ck_assert_int_eq(route_err[0], -EPERM);
    ck_assert_int_eq(route_err[1], -EPERM);
    ck_assert_int_eq(route_err[2], -EMSGSIZE);
    ck_assert_int_eq(route_err[3], 0);
    ck_assert_int_eq(ringk_kernel_stats_query(k[0], &st), 0);
    ck_assert_uint_ge(st.batched_in, 1); /* later sends of the handler call were batched */
    ringk_ctx_destroy(batch_ctx);
}
END_TEST

/* The send path compares a name with the route the kernel used last (route_name_eq) and must
 * never read past the name's end: names whose NUL is the last byte before an inaccessible page,
 * at each of the 8 alignments, reach their kernels, and a shorter name placed the same way right
 * after each is refused without a fault. Names of 2, 5, 7 and 8 characters. (A word-at-a-time
 * compare that read the aligned word after a name before checking the name's bytes in the
 * first faulted here.) route_name_eq() loads two words of b only when b's first 16 bytes lie
 * in its page: these names are compared byte by byte but for "e1234567" with its NUL 7 bytes
 * before the page's end, whose 16 bytes end right there; test_runtime_route_name_words covers
 * the words. */
static const char *edge_names[] = {"e1", "e1234", "e123456", "e1234567", NULL};
/* what name_sink() got, by kernel (its arg), and how many messages reached the wrong one */
static uint64_t name_got[8], name_bad, edge_refused;
static char *edge_page; /* a page, followed by one that is not accessible */
static long edge_pagesize;

static int name_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v = UINT64_MAX;

    if (msg->length == sizeof(v)) {
        memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    }
    if (v != (uintptr_t)arg) {
        __atomic_fetch_add(&name_bad, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&name_got[(uintptr_t)arg], 1, __ATOMIC_RELEASE);
    return 0;
}

/* Copies @a name so that its NUL is @a back bytes before the end of edge_page. */
static const char *edge_place(const char *name, unsigned back)
{
    char *at = edge_page + edge_pagesize - back - strlen(name) - 1;

    memcpy(at, name, strlen(name) + 1);
    return at;
}

static int edge_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;
    unsigned back;

    for (back = 0; back < 8; back++) {
        for (v = 0; v < 4; v++) {
            if (ringk_send(batch_ctx, k, edge_place(edge_names[v], back), RINGK_MSG_DATA, &v,
                           sizeof(v), 1000) != 0) {
                return -1;
            }
            /* shorter than the route just used, at the page's end: refused */
            if (ringk_send(batch_ctx, k, edge_place("e", back), RINGK_MSG_DATA, &v, sizeof(v),
                           1000) != 0) {
                edge_refused++;
            }
        }
    }
    return 0;
}

/* Creates batch_ctx with a name_sink kernel for each of @a names (arg: its index) and a source
 * kernel @a src_name that runs @a handler with routes to all of them; waits until each got
 * @a each messages, checks that none reached the wrong kernel and that the source's handler
 * never failed, and destroys the context. */
static void names_run(const char *const *names, const char *src_name, ringk_handler_t handler,
                      uint64_t each)
{
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .handler = name_sink
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k;
    unsigned i;

    batch_ctx = ctx_new();
    memset(name_got, 0, sizeof(name_got));
    name_bad = 0;
    for (i = 0; names[i] != NULL; i++) {
        p.name = names[i];
        p.arg  = (void*)(uintptr_t)i;
        ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k), 0);
    }
    k = source_start(&p, src_name, handler, names);
    for (i = 0; names[i] != NULL; i++) {
        wait_for(&name_got[i], each);
    }
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_uint_eq(st.handler_errors, 0);
    ck_assert_uint_eq(name_bad, 0);
    ringk_ctx_destroy(batch_ctx);
}

START_TEST(test_runtime_route_name_edge)
{
    edge_pagesize = sysconf(_SC_PAGESIZE);
    edge_page     = mmap(NULL, 2 * edge_pagesize, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(edge_page != MAP_FAILED);
    ck_assert_int_eq(mprotect(edge_page + edge_pagesize, edge_pagesize, PROT_NONE), 0);
    edge_refused = 0;
    names_run(edge_names, "esrc", edge_source, 8);
    ck_assert_uint_eq(edge_refused, 32);
    munmap(edge_page, 2 * edge_pagesize);
}
END_TEST

/* Names under 16 characters are compared with a route as two masked 8-byte words
 * (route_name_eq): names of 1, 7, 8, 9, 15 and 16 characters (the last one byte by byte) are
 * sent from a buffer whose bytes past the name are garbage, each after a send on another route
 * and again right after one on its own; names one character shorter or longer than a route, or
 * differing from it in its last character, are refused; none reaches the wrong kernel. */
static const char *word_names[] = {"w", "w123456", "w1234567", "w12345678", "w12345678901234",
                                   "w123456789012345", NULL};
static const char *word_bad[] = {"", "w12345", "w12345678x", "w1234567890123", "w1234567890123x",
                                 "w1234567890123456", "w12345678901234x", "v", NULL};
static uint64_t word_refused;

static int word_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    char name[32];
    uint64_t v;
    unsigned i, j;

    for (v = 0; v < 6; v++) {
        for (j = 0; j < 2; j++) { /* j == 1: the route just used is tried first */
            memset(name, 'w' + (int)v + (int)j, sizeof(name));
            memcpy(name, word_names[v], strlen(word_names[v]) + 1);
            if (ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) {
                return -1;
            }
        }
        for (i = 0; word_bad[i] != NULL; i++) {
            memset(name, '1', sizeof(name));
            memcpy(name, word_bad[i], strlen(word_bad[i]) + 1);
            if (ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000) == -EPERM) {
                word_refused++;
            }
        }
    }
    return 0;
}

START_TEST(test_runtime_route_name_words)
{
    word_refused = 0;
    names_run(word_names, "wsrc", word_source, 2);
    ck_assert_uint_eq(word_refused, 6 * 8);
}
END_TEST

/* A batch entry holds its sequence number as a 16-bit delta from its cell's first. A handler
 * opens a batch cell to "da", sends 70000 messages to "db" (whose inbox never fills, so the cell
 * to "da" stays open), then sends to "da" again: that message must not go into the old cell with
 * a wrapped delta, and "da" must see the sequence numbers that were sent. */
#define DELTA_GAP 70000
static uint64_t delta_seen[3], delta_n, delta_b;

static int delta_a(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    if (delta_n < 3) {
        delta_seen[delta_n] = msg->seq;
    }
    __atomic_fetch_add(&delta_n, 1, __ATOMIC_RELEASE);
    return 0;
}

static int delta_count(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_fetch_add(&delta_b, 1, __ATOMIC_RELEASE);
    return 0;
}

static int delta_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v = 0;
    unsigned i;

    if ((ringk_send(batch_ctx, k, "da", RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) ||
        (ringk_send(batch_ctx, k, "da", RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0)) {
        return -1;
    }
    for (i = 0; i < DELTA_GAP; i++) {
        if (ringk_send(batch_ctx, k, "db", RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) {
            return -1;
        }
    }
    return ringk_send(batch_ctx, k, "da", RINGK_MSG_DATA, &v, sizeof(v), 1000);
}

START_TEST(test_runtime_batch_seq_delta)
{
    static const char *to[] = {"da", "db", NULL};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_MAX_IN | RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE,
        .max_in = 64, .inbox_size = 64
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *a, *k;

    batch_ctx = ctx_new();
    delta_n = delta_b = 0;
    p.name = "da"; p.handler = delta_a;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &a), 0);
    p.name = "db"; p.handler = delta_count; p.inbox_size = 8192; /* 147456 batched messages */
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k), 0);
    p.name = "dsrc"; p.handler = delta_source; p.publishes_to = to;
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "dsrc", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    wait_for(&delta_n, 3);
    wait_for(&delta_b, DELTA_GAP);
    ck_assert_uint_eq(delta_seen[1], delta_seen[0] + 1);
    ck_assert_uint_eq(delta_seen[2], delta_seen[0] + 2 + DELTA_GAP);
    ck_assert_int_eq(ringk_kernel_stats_query(a, &st), 0);
    ck_assert_uint_eq(st.msgs_in, 3);
    ck_assert_uint_eq(st.batched_in, 2); /* both later sends to "da" came in batch cells */
    ck_assert_uint_eq(st.handler_errors, 0);
    ringk_ctx_destroy(batch_ctx);
}
END_TEST

/* Sends by route number (ringk_route_find, ringk_send_route) and by name to one kernel are one
 * FIFO: "bsink" sees values and sequence numbers in order, through batch cells (batched_in). A
 * route number the sender lacks, a name it does not publish to and a route to a kernel that
 * does not exist yet give their errors; once that kernel exists, the same route number reaches
 * it. */
static int rnum_err[6];
static uint64_t rnum_calls;

static int rnum_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    int to_sink = ringk_route_find(batch_ctx, k, "bsink");
    int to_late = ringk_route_find(batch_ctx, k, "rlate");
    uint64_t v;
    int ret;

    if ((to_sink != 0) || (to_late != 1)) {
        return -1;
    }
    if (__atomic_load_n(&rnum_calls, __ATOMIC_ACQUIRE) == 0) {
        for (v = 0; v < BATCH_N; v++) {
            ret = (v % 3 == 1) ?
                  ringk_send(batch_ctx, k, "bsink", RINGK_MSG_DATA, &v, sizeof(v),
                             RINGK_WAIT_FOREVER) :
                  ringk_send_route(batch_ctx, k, to_sink, RINGK_MSG_DATA, &v, sizeof(v),
                                   RINGK_WAIT_FOREVER);
            if (ret != 0) {
                return ret;
            }
        }
        rnum_err[0] = ringk_route_find(batch_ctx, k, "nobody");
        rnum_err[1] = ringk_send_route(batch_ctx, k, 2, RINGK_MSG_DATA, &v, sizeof(v), 1000);
        rnum_err[2] = ringk_send_route(batch_ctx, k, -1, RINGK_MSG_DATA, &v, sizeof(v), 1000);
        rnum_err[3] = ringk_send_route(batch_ctx, k, to_late, RINGK_MSG_DATA, &v, sizeof(v),
                                       1000);
    } else {
        /* the host created "rlate" since */
        rnum_err[4] = ringk_send_route(batch_ctx, k, to_late, RINGK_MSG_DATA, NULL, 0, 1000);
        rnum_err[5] = ringk_send_route(batch_ctx, k, to_late, RINGK_MSG_DATA, NULL, 0, 1000);
    }
    __atomic_fetch_add(&rnum_calls, 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_send_route)
{
    static const char *to[] = {"bsink", "rlate", NULL};
    static const char *twice[] = {"bsink", "rlate", "bsink", NULL};
    ringk_kernel_params_t sp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN,
        .name = "bsink", .handler = batch_sink, .inbox_size = 8, .max_in = 64
    };
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "rsource", .handler = rnum_source, .publishes_to = to
    };
    ringk_kernel_params_t lp = counter_params("rlate", 64, 0);
    ringk_kernel_t *sink, *src, *late;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    uint64_t v = 0;

    batch_ctx = ctx_new();
    batch_got = batch_bad = batch_next_v = batch_next_seq = 0;
    rnum_calls = 0;
    counted    = 0;
    memset(rnum_err, 1, sizeof(rnum_err));
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &sp, &sink), 0);
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &src), 0);
    /* the host has no routes */
    ck_assert_int_eq(ringk_route_find(batch_ctx, NULL, "bsink"), -EINVAL);
    ck_assert_int_eq(ringk_send_route(batch_ctx, NULL, 0, RINGK_MSG_DATA, &v, sizeof(v), 0),
                     -EINVAL);
    ck_assert_int_eq(ringk_route_find(batch_ctx, src, NULL), -EINVAL);
    ck_assert_int_eq(ringk_send_route(NULL, src, 0, RINGK_MSG_DATA, &v, sizeof(v), 0), -EINVAL);
    ck_assert_int_eq(ringk_send_route(batch_ctx, src, 0, RINGK_MSG_DATA, NULL, 8, 0), -EINVAL);

    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "rsource", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    wait_for(&rnum_calls, 1);
    wait_for(&batch_got, BATCH_N);
    ck_assert_uint_eq(batch_bad, 0);
    ck_assert_int_eq(ringk_kernel_stats_query(sink, &st), 0);
    ck_assert_uint_eq(st.msgs_in, BATCH_N);
    ck_assert_uint_eq(st.batched_in, BATCH_N - 1);
    ck_assert_int_eq(rnum_err[0], -EPERM);
    ck_assert_int_eq(rnum_err[1], -EINVAL);
    ck_assert_int_eq(rnum_err[2], -EINVAL);
    ck_assert_int_eq(rnum_err[3], -ENOENT);
    ck_assert_ptr_nonnull(strstr(logbuf, "route 2 does not exist (it has 2)"));

    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &lp, &late), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "rsource", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    wait_for(&rnum_calls, 2);
    wait_for(&counted, 2);
    ck_assert_int_eq(rnum_err[4], 0);
    ck_assert_int_eq(rnum_err[5], 0);
    ck_assert_int_eq(ringk_kernel_stats_query(src, &st), 0);
    ck_assert_uint_eq(st.msgs_out, BATCH_N + 2);
    /* a name listed twice would make two route numbers for one kernel: refused */
    p.name = "rtwice"; p.publishes_to = twice;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &src), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "kernel 'rtwice': publishes_to lists 'bsink' twice"));
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

/* ---- lifecycle -------------------------------------------------------------------------------- */

START_TEST(test_runtime_activate_deactivate_terminate)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t p = counter_params("worker", 64, 0);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k;
    int i;

    counted = 0;
    if (_i == 1) {
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_MODE;
        p.mode = RINGK_MODE_EVENT_DRIVEN;
    }
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 10; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "worker", RINGK_MSG_DATA, &i, 4, 1000), 0);
    }
    wait_for(&counted, 10);
    ck_assert_int_eq(ringk_kernel_deactivate(k), 0);
    usleep(20000);
    for (i = 0; i < 20; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "worker", RINGK_MSG_DATA, &i, 4, 1000), 0);
    }
    usleep(50000);
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_int_eq(st.state, RINGK_KERNEL_INACTIVE);
    ck_assert_uint_eq(st.msgs_in, 10);       /* kept, not consumed */
    ck_assert_uint_eq(st.queue_depth, 20);
    ck_assert_int_eq(ringk_kernel_activate(k), 0);
    wait_for(&counted, 30);
    /* terminate: what is queued is drained first, then sends fail */
    ck_assert_int_eq(ringk_kernel_deactivate(k), 0);
    for (i = 0; i < 5; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "worker", RINGK_MSG_DATA, &i, 4, 1000), 0);
    }
    ck_assert_int_eq(ringk_kernel_terminate(k), 0);
    ck_assert_uint_eq(counted, 35);
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_int_eq(st.state, RINGK_KERNEL_TERMINATED);
    ck_assert_int_eq(ringk_send(ctx, NULL, "worker", RINGK_MSG_DATA, &i, 4, 0), -EPIPE);
    ringk_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_runtime_terminate_message)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t p = counter_params("t", 64, 0);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k;
    double deadline;
    int i;

    counted = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 7; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "t", RINGK_MSG_DATA, &i, 4, 1000), 0);
    }
    ck_assert_int_eq(ringk_send(ctx, NULL, "t", RINGK_MSG_TERMINATE, NULL, 0, 1000), 0);
    deadline = now_s() + 10;
    do {
        ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
        ck_assert(now_s() < deadline);
    } while (st.state != RINGK_KERNEL_TERMINATED);
    ck_assert_uint_eq(counted, 7); /* the 7 before it were handled, the terminate is not */
    ck_assert_uint_eq(st.msgs_in, 8); /* but it was taken: counted, as on a device */
    ck_assert_int_eq(ringk_send(ctx, NULL, "t", RINGK_MSG_DATA, &i, 4, 0), -EPIPE);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* ---- topics and barriers ----------------------------------------------------------------------- */

static uint64_t topic_got[8];

static int topic_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    if (msg->receiver == RINGK_MSG_BROADCAST) {
        __atomic_fetch_add(&topic_got[(uintptr_t)arg], 1, __ATOMIC_RELEASE);
    }
    return 0;
}

START_TEST(test_runtime_topic_fanout)
{
    static const char *sub[] = {"news", NULL}, *pub[] = {"news", "quiet", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_t *k, *publisher;
    unsigned delivered;
    char name[16];
    int i;

    memset(topic_got, 0, sizeof(topic_got));
    for (i = 0; i < 5; i++) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB | RINGK_KERNEL_PARAM_FIELD_MODE,
            .name = name, .handler = topic_handler, .arg = (void*)(uintptr_t)i,
            .topics_sub = sub, .mode = (i % 2) ? RINGK_MODE_EVENT_DRIVEN : RINGK_MODE_PERSISTENT
        };
        snprintf(name, sizeof(name), "sub%d", i);
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    }
    {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_TOPICS_PUB,
            .name = "publisher", .handler = topic_handler, .arg = (void*)(uintptr_t)7,
            .topics_pub = pub
        };
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &publisher), 0);
    }
    for (i = 0; i < 100; i++) {
        ck_assert_int_eq(ringk_publish(ctx, publisher, "news", &i, sizeof(i), 1000, &delivered),
                         5);
        ck_assert_uint_eq(delivered, 5);
    }
    for (i = 0; i < 5; i++) {
        wait_for(&topic_got[i], 100);
    }
    usleep(10000);
    for (i = 0; i < 5; i++) {
        ck_assert_uint_eq(topic_got[i], 100);
    }
    ck_assert_int_eq(ringk_publish(ctx, publisher, "nobody-listens", &i, 4, 0, &delivered),
                     -EPERM); /* not in topics_pub */
    /* from the host: a topic no kernel declares is a typo (refused and said), one that a
     * kernel publishes to but nobody subscribes to reaches nobody */
    delivered = 99;
    ck_assert_int_eq(ringk_publish(ctx, NULL, "nobody-listens", &i, 4, 0, &delivered), -ENOENT);
    ck_assert_uint_eq(delivered, 0);
    ck_assert_msg(strstr(logbuf, "publish to topic 'nobody-listens': no kernel of this process "
                         "declares it (topics_sub or topics_pub)") != NULL, "log: %s", logbuf);
    delivered = 99;
    ck_assert_int_eq(ringk_publish(ctx, NULL, "quiet", &i, 4, 0, &delivered), 0);
    ck_assert_uint_eq(delivered, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

#define BARRIER_KERNELS 4
#define BARRIER_ROUNDS  5

static int arrived[BARRIER_ROUNDS], passed_early;
static uint64_t barrier_done;

static int barrier_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    int r;

    for (r = 0; r < BARRIER_ROUNDS; r++) {
        __atomic_fetch_add(&arrived[r], 1, __ATOMIC_SEQ_CST);
        usleep(1000 * ((uintptr_t)arg + 1)); /* arrive at different times */
        if (ringk_barrier_wait(k, "step", 10000) != 0) {
            return -1;
        }
        if (__atomic_load_n(&arrived[r], __ATOMIC_SEQ_CST) != BARRIER_KERNELS) {
            __atomic_fetch_add(&passed_early, 1, __ATOMIC_SEQ_CST);
        }
    }
    __atomic_fetch_add(&barrier_done, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Persistent kernels (_i 0), and event-driven ones on the default single pool thread (_i 1):
 * each waits with the pool thread it runs on, so the pool must grow for the others to arrive
 * (without that each wait timed out in turn). */
START_TEST(test_runtime_barrier)
{
    static const char *barriers[] = {"step", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k[BARRIER_KERNELS];
    char name[16];
    int i;

    memset(arrived, 0, sizeof(arrived));
    passed_early = 0;
    barrier_done = 0;
    for (i = 0; i < BARRIER_KERNELS; i++) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_BARRIERS | RINGK_KERNEL_PARAM_FIELD_MODE,
            .name = name, .handler = barrier_handler, .arg = (void*)(uintptr_t)i,
            .barriers = barriers,
            .mode = (_i == 0) ? RINGK_MODE_PERSISTENT : RINGK_MODE_EVENT_DRIVEN
        };
        snprintf(name, sizeof(name), "b%d", i);
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[i]), 0);
    }
    for (i = 0; i < BARRIER_KERNELS; i++) {
        snprintf(name, sizeof(name), "b%d", i);
        ck_assert_int_eq(ringk_send(ctx, NULL, name, RINGK_MSG_DATA, NULL, 0, 0), 0);
    }
    wait_for(&barrier_done, BARRIER_KERNELS);
    ck_assert_int_eq(passed_early, 0);
    for (i = 0; i < BARRIER_KERNELS; i++) {
        ck_assert_int_eq(ringk_kernel_stats_query(k[i], &st), 0);
        ck_assert_uint_eq(st.handler_errors, 0);
    }
    ck_assert_int_eq(ringk_barrier_wait(k[0], "other", 0), -ENOENT);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* An event-driven kernel that sends more than fits into the inbox of another event-driven
 * kernel waits for room on the only pool thread: the pool grows so that the receiver runs
 * (without that, the sender waited for ever). */
#define POOL_SENDS 500

static uint64_t pool_got;

static int pool_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_fetch_add(&pool_got, 1, __ATOMIC_RELEASE);
    return 0;
}

static int pool_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    int i, ret;

    for (i = 0; i < POOL_SENDS; i++) {
        ret = ringk_send(ringk_kernel_ctx(k), k, "psink", RINGK_MSG_DATA, &i, sizeof(i),
                         RINGK_WAIT_FOREVER);
        if (ret != 0) {
            return ret;
        }
    }
    return 0;
}

START_TEST(test_runtime_pool_send_wait)
{
    static const char *to_sink[] = {"psink", NULL};
    ringk_kernel_params_t sp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE |
                      RINGK_KERNEL_PARAM_FIELD_MAX_IN,
        .name = "psink", .handler = pool_sink, .mode = RINGK_MODE_EVENT_DRIVEN, .inbox_size = 2,
        .max_in = 16 /* an inbox of 2 cells */
    }, p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "psource", .handler = pool_source, .mode = RINGK_MODE_EVENT_DRIVEN,
        .publishes_to = to_sink
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_ctx_t *ctx = ctx_new(); /* pool_threads: the default, 1 */
    ringk_kernel_t *sink, *src;

    pool_got = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &sp, &sink), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &src), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "psource", RINGK_MSG_DATA, NULL, 0, 0), 0);
    wait_for(&pool_got, POOL_SENDS);
    ck_assert_int_eq(ringk_kernel_stats_query(src, &st), 0);
    ck_assert_uint_eq(st.handler_errors, 0);
    ck_assert_uint_eq(st.msgs_out, POOL_SENDS);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A kernel that waits at a barrier which the others never reach says so each
 * RINGK_WAIT_WARN_MS (who, which barrier, how many arrived), and still times out. */
static int barrier_lone_ret;
static uint64_t barrier_lone_done;

static int barrier_lone(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    barrier_lone_ret = ringk_barrier_wait(k, "meet", 450);
    __atomic_store_n(&barrier_lone_done, 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_barrier_warn)
{
    static const char *barriers[] = {"meet", NULL};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_BARRIERS,
        .handler = barrier_lone, .barriers = barriers
    };
    ringk_kernel_t *k;
    ringk_ctx_t *ctx;
    unsigned warnings = 0;
    const char *at;
    double t0;

    setenv("RINGK_WAIT_WARN_MS", "100", 1);
    ctx               = ctx_new();
    barrier_lone_done = 0;
    p.name            = "lone";
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    p.name = "absent"; /* takes part, never arrives */
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    t0 = now_s();
    ck_assert_int_eq(ringk_send(ctx, NULL, "lone", RINGK_MSG_DATA, NULL, 0, 0), 0);
    wait_for(&barrier_lone_done, 1);
    ck_assert(now_s() - t0 >= 0.44);
    ck_assert_int_eq(barrier_lone_ret, -ETIMEDOUT);
    pthread_mutex_lock(&log_mu);
    for (at = logbuf; (at = strstr(at, "at barrier 'meet'")) != NULL; at++) {
        warnings++;
    }
    /* at 100, 200, 300 and 400 ms; a slow machine may see fewer, never more */
    ck_assert_msg((warnings >= 2) && (warnings <= 4), "%u warnings: '%s'", warnings, logbuf);
    ck_assert_msg(strstr(logbuf, "kernel 'lone' has waited 0.") != NULL &&
                  strstr(logbuf, " s at barrier 'meet': 1 of its 2 participants in this "
                         "process have arrived\n") != NULL, "log '%s'", logbuf);
    pthread_mutex_unlock(&log_mu);
    ringk_ctx_destroy(ctx);
    unsetenv("RINGK_WAIT_WARN_MS");
}
END_TEST

/* A kernel waiting without a bound at a barrier that the others never reach is terminated (its
 * own thread, _i 0; a pool thread, _i 1): the wait ends with -ECANCELED and the terminate and the
 * context's destroy return (both waited for ever before). */
static int barrier_cancel_ret;
static uint64_t barrier_cancel_in, barrier_cancel_out;

static int barrier_forever(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_store_n(&barrier_cancel_in, 1, __ATOMIC_RELEASE);
    barrier_cancel_ret = ringk_barrier_wait(k, "never", RINGK_WAIT_FOREVER);
    __atomic_store_n(&barrier_cancel_out, 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_barrier_cancel)
{
    static const char *barriers[] = {"never", NULL};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_BARRIERS | RINGK_KERNEL_PARAM_FIELD_MODE,
        .handler = barrier_forever, .barriers = barriers,
        .mode = (_i == 0) ? RINGK_MODE_PERSISTENT : RINGK_MODE_EVENT_DRIVEN
    };
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_t *k, *other;
    double t0;

    barrier_cancel_in = barrier_cancel_out = 0;
    barrier_cancel_ret = 1;
    p.name = "waiter";
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    p.name = "absent"; /* takes part, never arrives */
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &other), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "waiter", RINGK_MSG_DATA, NULL, 0, 0), 0);
    wait_for(&barrier_cancel_in, 1);
    usleep(50000); /* inside the wait */
    ck_assert_uint_eq(__atomic_load_n(&barrier_cancel_out, __ATOMIC_ACQUIRE), 0);
    t0 = now_s();
    ck_assert_int_eq(ringk_kernel_terminate(k), 0);
    ck_assert_uint_eq(__atomic_load_n(&barrier_cancel_out, __ATOMIC_ACQUIRE), 1);
    ck_assert_int_eq(barrier_cancel_ret, -ECANCELED);
    ck_assert_msg(now_s() - t0 < 5, "terminate took %.1f s", now_s() - t0);
    ck_assert_int_eq(ringk_ctx_destroy(ctx), 0);
}
END_TEST

/* ---- statistics, bad input -------------------------------------------------------------------- */

START_TEST(test_runtime_latency_histogram)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t p = counter_params("h", 256, 0);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k;
    uint64_t sum = 0;
    int i;

    counted = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 1000; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "h", RINGK_MSG_DATA, &i, 4, RINGK_WAIT_FOREVER), 0);
    }
    wait_for(&counted, 1000);
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    for (i = 0; i < 32; i++) {
        sum += st.latency_hist[i];
    }
    ck_assert_uint_eq(sum, 1000 / 64 + 1); /* messages 0, 64, ..., 960 are sampled */
    ringk_ctx_destroy(ctx);
}
END_TEST

static const struct {
    const char *what;
    uint64_t    extra_fields;
    unsigned    inbox, max_in, mode, backends, iterations;
    const char *name;
    int         expect;
    const char *log;
} bad_params[] = {
    {"inbox not pow2", RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE, 1000, 0, 0, 0, 0, "k", -EINVAL,
     "inbox_size 1000 is not a power of 2 between 2 and 65536"},
    {"inbox too big", RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE, 131072, 0, 0, 0, 0, "k", -EINVAL,
     "inbox_size 131072 is not a power of 2"},
    {"max_in 0", RINGK_KERNEL_PARAM_FIELD_MAX_IN, 0, 0, 0, 0, 0, "k", -EINVAL,
     "max_in 0 is out of range 1..16777216"},
    {"bad mode", RINGK_KERNEL_PARAM_FIELD_MODE, 0, 0, 7, 0, 0, "k", -EINVAL,
     "mode 7 is not persistent (0) or event-driven (1)"},
    {"cuda without an entry", RINGK_KERNEL_PARAM_FIELD_BACKENDS, 0, 0, 0, RINGK_BACKEND_CUDA, 0,
     "k", -EINVAL, "the CUDA backend needs a device_entry"},
    {"cpu | cuda without an entry", RINGK_KERNEL_PARAM_FIELD_BACKENDS, 0, 0, 0,
     RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA, 0, "k", -EINVAL,
     "the CUDA backend needs a device_entry"},
    {"iterations 0", RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS, 0, 0, 0, 0, 0, "k", -EINVAL,
     "max_iterations 0 is out of range"},
    {"empty name", 0, 0, 0, 0, 0, 0, "", -EINVAL, "a kernel needs a name"},
    {"long name", 0, 0, 0, 0, 0, 0,
     "a-very-long-kernel-name-that-goes-on-and-on-and-on-past-sixty-four-chars", -EINVAL,
     "is longer than 63 characters"},
};

START_TEST(test_runtime_bad_params)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t p = counter_params(bad_params[_i].name, 16, 0);
    ringk_kernel_t *k = (ringk_kernel_t*)0x1;

    p.field_mask |= bad_params[_i].extra_fields;
    if (bad_params[_i].extra_fields & RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE) {
        p.inbox_size = bad_params[_i].inbox;
    }
    p.max_in         = (bad_params[_i].extra_fields & RINGK_KERNEL_PARAM_FIELD_MAX_IN) ?
                       bad_params[_i].max_in : 128;
    p.mode           = bad_params[_i].mode;
    p.backends       = bad_params[_i].backends;
    p.max_iterations = bad_params[_i].iterations;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), bad_params[_i].expect);
    ck_assert_ptr_eq(k, (ringk_kernel_t*)0x1); /* output untouched on error */
    ck_assert_msg(strstr(logbuf, bad_params[_i].log) != NULL, "%s: log '%s'",
                  bad_params[_i].what, logbuf);
    ringk_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_runtime_bad_sends)
{
    static const char *routes[] = {"b", "ghost", NULL}, *only_c[] = {"c", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t pa = counter_params("a", 16, 0), pb = counter_params("b", 16, 0),
                          pc = counter_params("c", 16, 0);
    ringk_kernel_t *a, *b, *c, *dup;
    static char big[200000];

    pa.field_mask |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    pa.publishes_to = routes;
    pb.field_mask |= RINGK_KERNEL_PARAM_FIELD_SUBSCRIBES_TO;
    pb.subscribes_to = only_c; /* b accepts only c */
    ck_assert_int_eq(ringk_kernel_create(ctx, &pa, &a), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &pb, &b), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &pc, &c), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &pc, &dup), -EEXIST);
    ck_assert_ptr_nonnull(strstr(logbuf, "a kernel named 'c' exists already"));
    ck_assert_int_eq(ringk_send(ctx, NULL, "nobody", RINGK_MSG_DATA, "x", 1, 0), -ENOENT);
    ck_assert_ptr_nonnull(strstr(logbuf, "undeliverable: no kernel named 'nobody'"));
    ck_assert_int_eq(ringk_send(ctx, a, "c", RINGK_MSG_DATA, "x", 1, 0), -EPERM);
    ck_assert_ptr_nonnull(strstr(logbuf, "kernel 'a' has no route to 'c'"));
    ck_assert_int_eq(ringk_send(ctx, a, "ghost", RINGK_MSG_DATA, "x", 1, 0), -ENOENT);
    ck_assert_int_eq(ringk_send(ctx, a, "b", RINGK_MSG_DATA, "x", 1, 0), -EPERM);
    ck_assert_ptr_nonnull(strstr(logbuf, "kernel 'b' does not subscribe to 'a'"));
    ck_assert_int_eq(ringk_send(ctx, NULL, "c", RINGK_MSG_DATA, big, 129, 0), -EMSGSIZE);
    ck_assert_ptr_nonnull(strstr(logbuf, "exceeds its max_in 128"));
    ck_assert_int_eq(ringk_send(ctx, NULL, "c", RINGK_MSG_DATA, NULL, 5, 0), -EINVAL);
    ck_assert_int_eq(ringk_send(ctx, NULL, "c", (ringk_msg_type_t)9, "x", 1, 0), -EINVAL);
    ck_assert_int_eq(ringk_send(NULL, NULL, "c", RINGK_MSG_DATA, "x", 1, 0), -EINVAL);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* Each of the @a n values @a bad of environment variable @a var makes ringk_ctx_create(@a p)
 * fail with -EINVAL, logging the value and the accepted @a range. */
static void env_refused(const ringk_ctx_params_t *p, const char *var, const char *const *bad,
                        unsigned n, const char *range)
{
    ringk_ctx_t *ctx;
    char want[128];
    unsigned i;

    for (i = 0; i < n; i++) {
        logbuf[0] = '\0';
        setenv(var, bad[i], 1);
        ck_assert_int_eq(ringk_ctx_create(p, &ctx), -EINVAL);
        snprintf(want, sizeof(want), "%s '%s' is not a number of milliseconds in %s", var,
                 bad[i], range);
        ck_assert_msg(strstr(logbuf, want) != NULL, "%s: log '%s'", bad[i], logbuf);
    }
}

/* RINGK_IDLE_WAKE_MS out of range or not a number: ctx_create refuses, naming it and the range. */
START_TEST(test_runtime_bad_idle_wake)
{
    static const char *bad[] = {"0", "-5", "60001", "abc", "10ms", "99999999999999999999"};
    ringk_ctx_params_t p = {
        .field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_PIN,
        .log        = log_hook,
        .pin        = 0
    };
    ringk_ctx_t *ctx;

    env_refused(&p, "RINGK_IDLE_WAKE_MS", bad, sizeof(bad) / sizeof(bad[0]), "1..60000");
    setenv("RINGK_IDLE_WAKE_MS", "60000", 1); /* the limit itself is accepted */
    ck_assert_int_eq(ringk_ctx_create(&p, &ctx), 0);
    ringk_ctx_destroy(ctx);
    unsetenv("RINGK_IDLE_WAKE_MS");
}
END_TEST

/* RINGK_RECV_INLINE other than 0 or 1: ctx_create refuses, naming it and the value. */
START_TEST(test_runtime_bad_recv_inline)
{
    static const char *bad[] = {"2", "-1", "yes", "01", " 1"};
    ringk_ctx_params_t p = {
        .field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_PIN,
        .log        = log_hook,
        .pin        = 0
    };
    ringk_ctx_t *ctx;
    char want[64];
    unsigned i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        logbuf[0] = '\0';
        setenv("RINGK_RECV_INLINE", bad[i], 1);
        ck_assert_int_eq(ringk_ctx_create(&p, &ctx), -EINVAL);
        snprintf(want, sizeof(want), "RINGK_RECV_INLINE '%s' is not 0 or 1", bad[i]);
        ck_assert_msg(strstr(logbuf, want) != NULL, "%s: log '%s'", bad[i], logbuf);
    }
    for (i = 0; i < 2; i++) {
        setenv("RINGK_RECV_INLINE", i ? "1" : "0", 1);
        ck_assert_int_eq(ringk_ctx_create(&p, &ctx), 0);
        ringk_ctx_destroy(ctx);
    }
    unsetenv("RINGK_RECV_INLINE");
}
END_TEST

/* A send that has waited RINGK_WAIT_WARN_MS for room says so through the log hook, naming the
 * sender and the receiver, and again each time as long again has passed; 0 turns it off
 * (_i == 1). Out-of-range values fail ctx_create, naming the variable and the range. */
START_TEST(test_runtime_wait_warn)
{
    static const char *bad[] = {"-1", "3600001", "x"};
    ringk_ctx_params_t cp = {
        .field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_PIN,
        .log        = log_hook,
        .pin        = 0
    };
    ringk_kernel_params_t p = counter_params("full", 4, 1); /* starts inactive */
    ringk_ctx_t *ctx;
    ringk_kernel_t *k;
    unsigned i, warnings = 0;
    const char *at;
    double t0;

    env_refused(&cp, "RINGK_WAIT_WARN_MS", bad, sizeof(bad) / sizeof(bad[0]), "0..3600000");
    setenv("RINGK_WAIT_WARN_MS", (_i == 0) ? "100" : "0", 1);
    ctx     = ctx_new();
    counted = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "full", RINGK_MSG_DATA, &i, 4, RINGK_WAIT_NONE),
                         0);
    }
    t0 = now_s();
    ck_assert_int_eq(ringk_send(ctx, NULL, "full", RINGK_MSG_DATA, &i, 4, 450), -ETIMEDOUT);
    ck_assert(now_s() - t0 >= 0.44);
    for (at = logbuf; (at = strstr(at, "has waited")) != NULL; at++) {
        warnings++;
    }
    if (_i == 0) {
        /* at 100, 200, 300 and 400 ms; a slow machine may see fewer, never more */
        ck_assert_msg((warnings >= 2) && (warnings <= 4), "%u warnings: '%s'", warnings, logbuf);
        ck_assert_msg(strstr(logbuf, "a thread outside the kernels has waited 0.") != NULL &&
                      strstr(logbuf, " s for room in 'full', which takes nothing in") != NULL,
                      "log '%s'", logbuf);
    } else {
        ck_assert_msg(warnings == 0, "warned although turned off: '%s'", logbuf);
    }
    ck_assert_int_eq(ringk_kernel_activate(k), 0);
    wait_for(&counted, 4);
    ringk_ctx_destroy(ctx);
    unsetenv("RINGK_WAIT_WARN_MS");
}
END_TEST

/* ---- P2P message queue ---------------------------------------------------------------------- */

typedef struct {
    uint64_t n;
    uint64_t check;
    uint8_t  fill[16];
} elem_t;

static ringk_p2pq_t *p2pq_new(unsigned capacity, size_t elem)
{
    ringk_p2pq_params_t p = {
        .field_mask = RINGK_P2PQ_PARAM_FIELD_CAPACITY | RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE,
        .capacity = capacity, .elem_size = elem
    };
    ringk_p2pq_t *q;

    ck_assert_int_eq(ringk_p2pq_create(&p, &q), 0);
    return q;
}

START_TEST(test_p2pq_semantics)
{
    ringk_p2pq_t *q = p2pq_new(8, sizeof(elem_t));
    elem_t e = {0}, out, batch[20];
    ringk_p2pq_stats_t st;
    unsigned n, i;

    ck_assert_uint_eq(ringk_p2pq_capacity(q), 8);
    ck_assert(ringk_p2pq_empty(q));
    ck_assert_int_eq(ringk_p2pq_receive(q, &out), -EAGAIN);
    ck_assert_int_eq(ringk_p2pq_try_peek(q, &out), -EAGAIN);
    for (i = 0; i < 8; i++) {
        e.n = i;
        ck_assert_int_eq(ringk_p2pq_send(q, &e), 0);
    }
    ck_assert(ringk_p2pq_full(q));
    ck_assert_uint_eq(ringk_p2pq_count(q), 8);
    ck_assert_int_eq(ringk_p2pq_send(q, &e), -EAGAIN);
    ck_assert_int_eq(ringk_p2pq_try_peek(q, &out), 0);
    ck_assert_uint_eq(out.n, 0);
    ck_assert_uint_eq(ringk_p2pq_count(q), 8); /* peek leaves it there */
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(ringk_p2pq_receive(q, &out), 0);
        ck_assert_uint_eq(out.n, i);
    }
    ck_assert_int_eq(ringk_p2pq_clear(q, &n), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert(ringk_p2pq_empty(q));
    /* batches wrap around the ring, in order */
    for (i = 0; i < 20; i++) {
        batch[i].n = 100 + i;
    }
    ck_assert_int_eq(ringk_p2pq_send_batch(q, batch, 20, &n), 0);
    ck_assert_uint_eq(n, 8);
    memset(batch, 0, sizeof(batch));
    ck_assert_int_eq(ringk_p2pq_receive_batch(q, batch, 20, &n), 0);
    ck_assert_uint_eq(n, 8);
    for (i = 0; i < 8; i++) {
        ck_assert_uint_eq(batch[i].n, 100 + i);
    }
    ck_assert_int_eq(ringk_p2pq_receive_batch(q, batch, 20, &n), -EAGAIN);
    ck_assert_int_eq(ringk_p2pq_stats_query(q, &st), 0);
    ck_assert_uint_eq(st.sent, 16);
    ck_assert_uint_eq(st.received, 11);
    ck_assert_uint_eq(st.cleared, 5);
    ck_assert_uint_eq(st.refused_full, 2);
    ck_assert_int_eq(st.mode, RINGK_P2PQ_MODE_HOST_MEMORY);
    ringk_p2pq_destroy(q);
}
END_TEST

START_TEST(test_p2pq_bad_params)
{
    ringk_p2pq_params_t p = {.field_mask = RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE, .elem_size = 0};
    ringk_p2pq_t *q = NULL;

    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
    p.elem_size = RINGK_P2PQ_ELEM_MAX + 1;
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
    p.elem_size  = 8;
    p.field_mask |= RINGK_P2PQ_PARAM_FIELD_CAPACITY;
    p.capacity   = 1000;
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
    p.capacity   = 64;
    p.field_mask |= RINGK_P2PQ_PARAM_FIELD_DEVICES;
    p.src_device = 0;
    p.dst_device = RINGK_P2PQ_HOST;
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -ENOTSUP);
    ck_assert_ptr_null(q);
    p.field_mask = RINGK_P2PQ_PARAM_FIELD_CAPACITY; /* no element size */
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
}
END_TEST

#define P2PQ_N 1000000

static void *p2pq_sender(void *arg)
{
    ringk_p2pq_t *q = arg;
    elem_t e;
    uint64_t i;

    memset(&e, 0, sizeof(e));
    for (i = 0; i < P2PQ_N; i++) {
        e.n     = i;
        e.check = i * 0x9e3779b97f4a7c15ull;
        memset(e.fill, (int)(i & 0xff), sizeof(e.fill));
        while (ringk_p2pq_send(q, &e) != 0) {
            sched_yield();
        }
    }
    return NULL;
}

START_TEST(test_p2pq_threads)
{
    ringk_p2pq_t *q = p2pq_new(256, sizeof(elem_t));
    uint64_t i = 0, bad = 0;
    pthread_t th;
    elem_t e;

    pthread_create(&th, NULL, p2pq_sender, q);
    while (i < P2PQ_N) {
        if (ringk_p2pq_receive(q, &e) != 0) {
            sched_yield();
            continue;
        }
        bad += (e.n != i) || (e.check != i * 0x9e3779b97f4a7c15ull) ||
               (e.fill[0] != (uint8_t)(i & 0xff)) || (e.fill[15] != (uint8_t)(i & 0xff));
        i++;
    }
    pthread_join(th, NULL);
    ck_assert_uint_eq(bad, 0);
    ck_assert(ringk_p2pq_empty(q));
    ringk_p2pq_destroy(q);
}
END_TEST

#define P2PQ_BIG_N 100000

/* Sends P2PQ_BIG_N elements of the largest size, each filled with its number's low byte. */
static void *p2pq_big_sender(void *arg)
{
    static uint8_t e[RINGK_P2PQ_ELEM_MAX];
    ringk_p2pq_t *q = arg;
    uint32_t i;

    for (i = 0; i < P2PQ_BIG_N; i++) {
        memset(e, (int)(i & 0xff), sizeof(e));
        while (ringk_p2pq_send(q, e) != 0) {
            sched_yield();
        }
    }
    return NULL;
}

/* From the consumer's thread, ringk_p2pq_count() counts only elements that can be received:
 * every one it counts, a receive then takes (the producer writes an element after it claims
 * its cell, and only a written one counts). */
START_TEST(test_p2pq_count_receivable)
{
    static uint8_t e[RINGK_P2PQ_ELEM_MAX];
    ringk_p2pq_t *q = p2pq_new(64, sizeof(e));
    uint32_t i = 0, n, j, refused = 0;
    pthread_t th;

    pthread_create(&th, NULL, p2pq_big_sender, q);
    while (i < P2PQ_BIG_N) {
        n = ringk_p2pq_count(q);
        for (j = 0; j < n; j++) {
            if (ringk_p2pq_receive(q, e) != 0) {
                refused++;
                break;
            }
            ck_assert_uint_eq(e[0], i & 0xff);
            ck_assert_uint_eq(e[sizeof(e) - 1], i & 0xff);
            i++;
        }
    }
    pthread_join(th, NULL);
    ck_assert_uint_eq(refused, 0);
    ck_assert_uint_eq(ringk_p2pq_count(q), 0);
    ringk_p2pq_destroy(q);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc;

    tc = tcase_create("clock");
    tcase_add_test(tc, test_hlc_monotonic);
    tcase_add_test(tc, test_hlc_causal);
    tcase_add_test(tc, test_hlc_concurrent_unique);
    tcase_add_test(tc, test_msg_helpers);
    suite_add_tcase(s, tc);

    tc = tcase_create("kernel");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_runtime_fifo_backpressure);
    tcase_add_loop_test(tc, test_runtime_batch_order_fairness, 0, 3);
    tcase_add_test(tc, test_runtime_batch_no_wait_holding);
    tcase_add_test(tc, test_runtime_batch_terminate);
    tcase_add_test(tc, test_runtime_kernel_ctx);
    tcase_add_test(tc, test_runtime_ctx_hwloc_unloadable);
    tcase_add_test(tc, test_runtime_route_lookup);
    tcase_add_test(tc, test_runtime_route_name_edge);
    tcase_add_test(tc, test_runtime_route_name_words);
    tcase_add_test(tc, test_runtime_batch_seq_delta);
    tcase_add_test(tc, test_runtime_send_route);
    tcase_add_loop_test(tc, test_runtime_wait_cycle, 0, 3);
    tcase_add_test(tc, test_runtime_wait_hands_back);
    tcase_add_test(tc, test_runtime_backpressure_counted);
    tcase_add_loop_test(tc, test_runtime_wakeup_never_lost, 0, 2);
    tcase_add_loop_test(tc, test_runtime_activate_deactivate_terminate, 0, 2);
    tcase_add_test(tc, test_runtime_terminate_message);
    tcase_add_test(tc, test_runtime_topic_fanout);
    tcase_add_loop_test(tc, test_runtime_barrier, 0, 2);
    tcase_add_test(tc, test_runtime_pool_send_wait);
    tcase_add_test(tc, test_runtime_barrier_warn);
    tcase_add_loop_test(tc, test_runtime_barrier_cancel, 0, 2);
    tcase_add_test(tc, test_runtime_latency_histogram);
    suite_add_tcase(s, tc);

    tc = tcase_create("p2pq");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_p2pq_semantics);
    tcase_add_test(tc, test_p2pq_bad_params);
    tcase_add_test(tc, test_p2pq_threads);
    tcase_add_test(tc, test_p2pq_count_receivable);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_loop_test(tc, test_runtime_bad_params, 0, sizeof(bad_params) / sizeof(bad_params[0]));
    tcase_add_test(tc, test_runtime_bad_sends);
    tcase_add_test(tc, test_runtime_bad_idle_wake);
    tcase_add_test(tc, test_runtime_bad_recv_inline);
    tcase_add_loop_test(tc, test_runtime_wait_warn, 0, 2);
    suite_add_tcase(s, tc);

    return test_run_suite(s);
}
