/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the libringk runtime: a kernel's lifecycle, topics and barriers, and sends from
 * the CPU executor's pool. */
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

/* The cases of this file. */
void test_runtime_topic_tests(TCase *tc)
{
    tcase_add_loop_test(tc, test_runtime_activate_deactivate_terminate, 0, 2);
    tcase_add_test(tc, test_runtime_terminate_message);
    tcase_add_test(tc, test_runtime_topic_fanout);
    tcase_add_loop_test(tc, test_runtime_barrier, 0, 2);
    tcase_add_test(tc, test_runtime_pool_send_wait);
    tcase_add_test(tc, test_runtime_barrier_warn);
    tcase_add_loop_test(tc, test_runtime_barrier_cancel, 0, 2);
}
