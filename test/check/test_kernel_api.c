/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of libringk's kernel API as a user sees it: a destroyed kernel's name and memory are
 * released (routes to it resolve again), placement pins a persistent kernel's thread,
 * timestamps stamp messages with the context's clock, statistics fill only the fields asked
 * for, and unknown parameter bits are refused. */
#define _GNU_SOURCE
#include "test_log.h"
#include "test_util.h"

#include <ringk/api/ringk.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char logbuf[16384];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_hook(void *arg, int level, const char *message)
{
    if (level <= RINGK_LOG_WARN) {
        test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
    }
}

static ringk_ctx_t *ctx_new(int pin)
{
    ringk_ctx_params_t p = {
        .field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_PIN,
        .log        = log_hook,
        .pin        = pin
    };
    ringk_ctx_t *ctx;

    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_ctx_create(&p, &ctx), 0);
    return ctx;
}

/* Waits up to 30 s for *counter to reach @a value. */
static void wait_for(uint64_t *counter, uint64_t value)
{
    test_wait_u64(counter, value, 30);
}

/* A handler that counts into the uint64_t its argument points to. */
static int count_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_fetch_add((uint64_t*)arg, 1, __ATOMIC_RELEASE);
    return 0;
}

static ringk_kernel_t *counter_new(ringk_ctx_t *ctx, const char *name, uint64_t *count)
{
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .name = name, .handler = count_handler, .arg = count
    };
    ringk_kernel_t *k;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    return k;
}

/* ---- destroy ---------------------------------------------------------------------------------- */

static int fwd_results[4];
static uint64_t fwd_calls;

/* Forwards each message to "dst" (its only route), recording the result. */
static int fwd_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t n = __atomic_load_n(&fwd_calls, __ATOMIC_RELAXED);

    fwd_results[n % 4] = ringk_send(ringk_kernel_ctx(k), k, "dst", RINGK_MSG_DATA,
                                    ringk_msg_payload(msg), msg->length, RINGK_WAIT_FOREVER);
    __atomic_store_n(&fwd_calls, n + 1, __ATOMIC_RELEASE);
    return 0;
}

static void host_send(ringk_ctx_t *ctx, const char *to, int expect)
{
    uint64_t v = 7;

    ck_assert_int_eq(ringk_send(ctx, NULL, to, RINGK_MSG_DATA, &v, sizeof(v), 1000), expect);
}

START_TEST(test_kernel_destroy_reuse)
{
    static const char *const routes[] = {"dst", NULL};
    ringk_kernel_params_t fp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "fwd", .handler = fwd_handler, .publishes_to = routes
    };
    ringk_ctx_t *ctx   = ctx_new(0);
    uint64_t first = 0, second = 0;
    ringk_kernel_t *fwd, *dst, *dst2;
    uint32_t id;

    fwd_calls = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &fp, &fwd), 0);
    dst = counter_new(ctx, "dst", &first);
    id  = ringk_kernel_id(dst);
    host_send(ctx, "fwd", 0);
    wait_for(&first, 1);
    wait_for(&fwd_calls, 1); /* its result is stored after the send */
    ck_assert_int_eq(fwd_results[0], 0);

    /* destroyed: its name is free at once, sends by name find nothing */
    ck_assert_int_eq(ringk_kernel_destroy(dst), 0);
    host_send(ctx, "dst", -ENOENT);
    /* the route of "fwd", resolved to the old kernel, resolves again and finds none */
    host_send(ctx, "fwd", 0);
    wait_for(&fwd_calls, 2);
    ck_assert_int_eq(fwd_results[1], -ENOENT);

    /* a new kernel under the same name (its id taken again, no job joined) gets what the
     * route sends from now on; the first counter never moves again */
    dst2 = counter_new(ctx, "dst", &second);
    ck_assert_uint_eq(ringk_kernel_id(dst2), id);
    host_send(ctx, "fwd", 0);
    wait_for(&second, 1);
    wait_for(&fwd_calls, 3);
    ck_assert_int_eq(fwd_results[2], 0);
    host_send(ctx, "dst", 0);
    wait_for(&second, 2);
    ck_assert_uint_eq(__atomic_load_n(&first, __ATOMIC_ACQUIRE), 1);
    ck_assert_msg(logbuf[0] == '\0' || strstr(logbuf, "no kernel named 'dst'") != NULL,
                  "log: %s", logbuf);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* More kernels created and destroyed in turn than a context holds at once: each destroy gives
 * its slot back. */
START_TEST(test_kernel_destroy_many)
{
    ringk_ctx_t *ctx = ctx_new(0);
    uint64_t count = 0;
    ringk_kernel_t *k;
    char name[32];
    unsigned i;

    for (i = 0; i < 600; i++) {
        snprintf(name, sizeof(name), "k%u", i % 3);
        k = counter_new(ctx, name, &count);
        host_send(ctx, name, 0);
        wait_for(&count, i + 1);
        ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    }
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A kernel's own handler terminates it (returns at once: it stops after the handler) or tries
 * to destroy it (refused). */
static int self_results[2];
static uint64_t self_calls;

static int self_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    self_results[0] = ringk_kernel_destroy(k);
    self_results[1] = ringk_kernel_terminate(k);
    __atomic_store_n(&self_calls, 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_kernel_terminate_self)
{
    ringk_ctx_t *ctx = ctx_new(0);
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .name = "self", .handler = self_handler
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_STATE |
                                             RINGK_KERNEL_STATS_FIELD_MSGS_IN};
    ringk_kernel_t *k;
    double deadline;

    self_calls = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    host_send(ctx, "self", 0);
    wait_for(&self_calls, 1);
    ck_assert_int_eq(self_results[0], -EDEADLK);
    ck_assert_int_eq(self_results[1], 0);
    ck_assert_msg(strstr(logbuf, "cannot destroy itself") != NULL, "log: %s", logbuf);
    deadline = test_now_s() + 30;
    do {
        ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
        ck_assert(test_now_s() < deadline);
    } while (st.state != RINGK_KERNEL_TERMINATED);
    ck_assert_uint_eq(st.msgs_in, 1);
    host_send(ctx, "self", -EPIPE);
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* ---- placement -------------------------------------------------------------------------------- */

static cpu_set_t placed[2];
static uint64_t placed_n[2];

static int affinity_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uintptr_t i = (uintptr_t)arg;

    pthread_getaffinity_np(pthread_self(), sizeof(placed[i]), &placed[i]);
    __atomic_store_n(&placed_n[i], 1, __ATOMIC_RELEASE);
    return 0;
}

/* The CPUs this process may run on; -1 when it cannot bind a thread to one alone. */
static int usable_cpus(cpu_set_t *all)
{
    cpu_set_t one;
    int cpu;

    if (sched_getaffinity(0, sizeof(*all), all) != 0) {
        return -1;
    }
    for (cpu = 0; (cpu < CPU_SETSIZE) && !CPU_ISSET(cpu, all); cpu++) {
    }
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
        return -1;
    }
    sched_setaffinity(0, sizeof(*all), all);
    return CPU_COUNT(all);
}

START_TEST(test_kernel_placement)
{
    ringk_ctx_t *ctx = ctx_new(1);
    ringk_kernel_t *k[2];
    cpu_set_t all, both;
    uintptr_t i;
    char name[8];
    int ncpus = usable_cpus(&all);

    if (ncpus < 2) {
        ringk_ctx_destroy(ctx);
        ck_assert_msg(ncpus != 0, "no usable CPU");
        fprintf(stderr, "# SKIP placement: %d usable CPUs, or binding refused\n", ncpus);
        return;
    }
    for (i = 0; i < 2; i++) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PLACEMENT,
            .name = name, .handler = affinity_handler, .arg = (void*)i,
            .placement = (int)i
        };
        snprintf(name, sizeof(name), "p%u", (unsigned)i);
        placed_n[i] = 0;
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[i]), 0);
        host_send(ctx, name, 0);
        wait_for(&placed_n[i], 1);
        /* pinned: fewer CPUs than the process has, all of them the process's */
        ck_assert_int_lt(CPU_COUNT(&placed[i]), ncpus);
        ck_assert_int_gt(CPU_COUNT(&placed[i]), 0);
        CPU_AND(&both, &placed[i], &all);
        ck_assert(CPU_EQUAL(&both, &placed[i]));
    }
    /* placements 0 and 1 are two cores */
    CPU_AND(&both, &placed[0], &placed[1]);
    ck_assert_int_eq(CPU_COUNT(&both), 0);
    ringk_ctx_destroy(ctx);

    /* without pinning, placement leaves the thread where the process may run */
    ctx = ctx_new(0);
    {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PLACEMENT,
            .name = "free", .handler = affinity_handler, .arg = (void*)0, .placement = 1
        };
        placed_n[0] = 0;
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), 0);
        host_send(ctx, "free", 0);
        wait_for(&placed_n[0], 1);
        ck_assert(CPU_EQUAL(&placed[0], &all));
    }
    ringk_ctx_destroy(ctx);
}
END_TEST

static const struct {
    int         placement;
    const char *log;
} bad_placement[] = {
    {-2, "placement -2 is out of range -1..4095"},
    {4096, "placement 4096 is out of range -1..4095"},
};

START_TEST(test_kernel_placement_bad)
{
    ringk_ctx_t *ctx = ctx_new(0);
    uint64_t count   = 0;
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PLACEMENT,
        .name = "k", .handler = count_handler, .arg = &count,
        .placement = bad_placement[_i].placement
    };
    ringk_kernel_t *k = (ringk_kernel_t*)0x1;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    ck_assert_ptr_eq(k, (ringk_kernel_t*)0x1);
    ck_assert_msg(strstr(logbuf, bad_placement[_i].log) != NULL, "log: %s", logbuf);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* Bits of field_mask that name no field (3, 13 and 19 named fields that were removed). */
START_TEST(test_kernel_params_unknown_bits)
{
    static const uint64_t bits[] = {1u << 3, 1u << 13, 1u << 19, 1ull << 40};
    ringk_ctx_t *ctx = ctx_new(0);
    uint64_t count   = 0;
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      bits[_i],
        .name = "k", .handler = count_handler, .arg = &count
    };
    ringk_kernel_t *k = (ringk_kernel_t*)0x1;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    ck_assert_ptr_eq(k, (ringk_kernel_t*)0x1);
    ck_assert_msg(strstr(logbuf, "field_mask") != NULL, "log: %s", logbuf);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* ---- timestamps ------------------------------------------------------------------------------- */

#define TS_N 50

static uint64_t ts_seen[TS_N], ts_n, ts_bad;

static int ts_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t n = __atomic_load_n(&ts_n, __ATOMIC_RELAXED);

    if (n < TS_N) {
        ts_seen[n] = msg->timestamp;
    } else {
        ts_bad++;
    }
    __atomic_store_n(&ts_n, n + 1, __ATOMIC_RELEASE);
    return 0;
}

static int ts_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;
    unsigned i;

    /* several sends in one handler call: with timestamps they are never batched */
    for (i = 0; i < 5; i++) {
        v = i;
        if (ringk_send(ringk_kernel_ctx(k), k, "sink", RINGK_MSG_DATA, &v, sizeof(v),
                       RINGK_WAIT_FOREVER) != 0) {
            ts_bad++;
        }
    }
    return 0;
}

/* _i = 0: the sender stamps (timestamps on at the sender); 1: neither end has them on */
START_TEST(test_kernel_timestamps)
{
    static const char *const routes[] = {"sink", NULL};
    ringk_ctx_t *ctx = ctx_new(0);
    ringk_kernel_params_t src = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_TIMESTAMPS,
        .name = "src", .handler = ts_source, .publishes_to = routes, .timestamps = (_i == 0)
    };
    ringk_kernel_params_t sink = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .name = "sink", .handler = ts_sink
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_BATCHED_IN};
    ringk_kernel_t *ks, *kd;
    uint64_t before;
    unsigned i;

    ts_n = ts_bad = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &sink, &kd), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &src, &ks), 0);
    before = ringk_hlc_tick(ringk_ctx_clock(ctx));
    for (i = 0; i < TS_N / 5; i++) {
        host_send(ctx, "src", 0);
    }
    wait_for(&ts_n, TS_N);
    ck_assert_uint_eq(ts_bad, 0);
    for (i = 0; i < TS_N; i++) {
        if (_i == 0) {
            /* from the context's clock, after what it read before, strictly increasing */
            ck_assert_uint_gt(ts_seen[i], before);
            ck_assert(i == 0 || ts_seen[i] > ts_seen[i - 1]);
        } else {
            ck_assert_uint_eq(ts_seen[i], 0);
        }
    }
    ck_assert_int_eq(ringk_kernel_stats_query(kd, &st), 0);
    if (_i == 0) {
        ck_assert_uint_eq(st.batched_in, 0);
        ck_assert_uint_gt(ringk_hlc_tick(ringk_ctx_clock(ctx)), ts_seen[TS_N - 1]);
    } else {
        ck_assert_uint_gt(st.batched_in, 0); /* the later sends of a call were batched */
    }
    ringk_ctx_destroy(ctx);
}
END_TEST

/* ---- statistics ------------------------------------------------------------------------------- */

START_TEST(test_kernel_stats_field_mask)
{
    ringk_ctx_t *ctx = ctx_new(0);
    uint64_t count   = 0;
    ringk_kernel_t *k = counter_new(ctx, "k", &count);
    ringk_kernel_stats_t st;
    double deadline;

    host_send(ctx, "k", 0);
    host_send(ctx, "k", 0);
    wait_for(&count, 2);
    /* msgs_in counts a message once its handler returned, after count moved */
    st.field_mask = RINGK_KERNEL_STATS_FIELD_MSGS_IN;
    deadline      = test_now_s() + 30;
    do {
        ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
        ck_assert(test_now_s() < deadline);
    } while (st.msgs_in < 2);

    /* only what was asked for is written */
    memset(&st, 0xa5, sizeof(st));
    st.field_mask = RINGK_KERNEL_STATS_FIELD_MSGS_IN | RINGK_KERNEL_STATS_FIELD_STATE;
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_uint_eq(st.msgs_in, 2);
    ck_assert_int_eq(st.state, RINGK_KERNEL_ACTIVE);
    ck_assert_uint_eq(st.msgs_out, 0xa5a5a5a5a5a5a5a5ull);
    ck_assert_uint_eq(st.latency_hist[0], 0xa5a5a5a5a5a5a5a5ull);
    ck_assert_uint_eq(st.field_mask, RINGK_KERNEL_STATS_FIELD_MSGS_IN |
                                     RINGK_KERNEL_STATS_FIELD_STATE);

    /* everything */
    st.field_mask = RINGK_KERNEL_STATS_FIELD_ALL;
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_uint_eq(st.msgs_out, 0);
    ck_assert_uint_eq(st.drops, 0);
    ck_assert_uint_eq(st.queue_depth, 0);

    /* nothing, and an unknown field */
    memset(&st, 0xa5, sizeof(st));
    st.field_mask = 0;
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_uint_eq(st.msgs_in, 0xa5a5a5a5a5a5a5a5ull);
    st.field_mask = (uint64_t)RINGK_KERNEL_STATS_FIELD_ALL + 1;
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), -EINVAL);
    ck_assert_uint_eq(st.msgs_in, 0xa5a5a5a5a5a5a5a5ull);
    ck_assert_int_eq(ringk_kernel_stats_query(NULL, &st), -EINVAL);
    ringk_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    const struct {
        const TTest *test;
        int          loops;   /* 0: a plain test, else a loop test over 0..loops-1 */
    } tests[] = {
        {test_kernel_destroy_reuse, 0},
        {test_kernel_destroy_many, 0},
        {test_kernel_terminate_self, 0},
        {test_kernel_placement, 0},
        {test_kernel_placement_bad, sizeof(bad_placement) / sizeof(bad_placement[0])},
        {test_kernel_params_unknown_bits, 4},
        {test_kernel_timestamps, 2},
        {test_kernel_stats_field_mask, 0},
    };
    Suite *s  = suite_create("kernel_api");
    TCase *tc = tcase_create("kernel_api");
    unsigned i;

    tcase_set_timeout(tc, 120);
    for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        if (tests[i].loops == 0) {
            tcase_add_test(tc, tests[i].test);
        } else {
            tcase_add_loop_test(tc, tests[i].test, 0, tests[i].loops);
        }
    }
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
