/* SPDX-License-Identifier: BSD-3-Clause */
/* What the device executor's tests share (test_device on the emulated device, test_device_gpu
 * on a GPU): a context whose log lines up to TEST_DEVICE_LOG_LEVEL (default RINGK_LOG_WARN)
 * land in logbuf, the parameters of a device kernel, its statistics, and host sends. */
#ifndef RINGK_TEST_DEVICE_UTIL_H
#define RINGK_TEST_DEVICE_UTIL_H

#include "test_log.h"
#include "test_util.h"

#include "test/kernels/ringk_dev_test_params.h"
#include <ringk/api/ringk.h>

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

#ifndef TEST_DEVICE_LOG_LEVEL
#define TEST_DEVICE_LOG_LEVEL RINGK_LOG_WARN
#endif

static char logbuf[16384];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_hook(void *arg, int level, const char *message)
{
    if (level <= TEST_DEVICE_LOG_LEVEL) {
        test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
    }
}

static ringk_ctx_t *ctx_new(void)
{
    ringk_ctx_params_t p = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = log_hook};
    ringk_ctx_t *ctx;

    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_ctx_create(&p, &ctx), 0);
    return ctx;
}

/* A kernel's statistics, every field. */
static inline ringk_kernel_stats_t stats_of(ringk_kernel_t *k)
{
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};

    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    return st;
}

/* The statistics of device kernel @a k once the counter at offset @a off reaches @a want, or
 * after 30 s (the caller's checks then fail): the loop stores its counters in its upkeep
 * (every RINGK_DEV_CHORE_NS busy, and once idle that long), so they may come after what its
 * handler did. */
static inline ringk_kernel_stats_t stats_at(ringk_kernel_t *k, size_t off, uint64_t want)
{
    double deadline = test_now_s() + 30;
    ringk_kernel_stats_t st = stats_of(k);

    while ((*(const uint64_t*)((const char*)&st + off) != want) && (test_now_s() < deadline)) {
        usleep(100);
        st = stats_of(k);
    }
    return st;
}
#define STATS_AT(k, field, want) stats_at(k, offsetof(ringk_kernel_stats_t, field), want)

/* Sends {producer, n} from the host. */
static inline int host_send(ringk_ctx_t *ctx, const char *to, uint32_t producer, uint32_t n,
                            int wait)
{
    uint32_t v[2] = {producer, n};

    return ringk_send(ctx, NULL, to, RINGK_MSG_DATA, v, sizeof(v), wait);
}

/* The life cycle of a device kernel named "count" of entry ringk_dev_test_count, made here from
 * @a p (its arg: the result block, which the host reads at @a t) with an inbox of 64 cells and
 * inactive: sends that must not wait fill the inbox and are then refused with -EAGAIN, a
 * bounded wait times out, nothing is taken; activated, it takes exactly what was accepted. Then
 * @a rounds times: deactivated, 20 messages queue untouched; activated again and taken, but in
 * the last round terminate drains them. At the end the kernel is terminated, took every message
 * once and in order, and refuses a send with -EPIPE. Returns the kernel. */
static inline ringk_kernel_t *lifecycle_run(ringk_ctx_t *ctx, ringk_kernel_params_t p,
                                            ringk_dev_test_t *t, unsigned rounds)
{
    uint32_t accepted = 0, refused = 0, i, round;
    ringk_kernel_stats_t st;
    ringk_kernel_t *k;
    int ret;

    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_START_INACTIVE |
                    RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.inbox_size  = 64;
    p.max_in      = 64; /* the inbox is 64 cells: 64 messages fill it */
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 1000; i++) {
        ret = host_send(ctx, "count", 0, accepted, RINGK_WAIT_NONE);
        ck_assert(ret == 0 || ret == -EAGAIN);
        accepted += (ret == 0);
        refused  += (ret == -EAGAIN);
    }
    ck_assert_uint_eq(accepted, 64);
    ck_assert_uint_eq(accepted + refused, 1000);
    ck_assert_int_eq(host_send(ctx, "count", 0, accepted, 20), -ETIMEDOUT);
    usleep(20000);
    st = stats_of(k);
    ck_assert_int_eq(st.state, RINGK_KERNEL_INACTIVE);
    ck_assert_uint_eq(st.msgs_in, 0);
    ck_assert_uint_eq(st.queue_depth, accepted);
    ck_assert_uint_ge(st.refused_full, refused);
    ck_assert_int_eq(ringk_kernel_activate(k), 0);
    test_wait_u64(&t->count, accepted, 30);
    for (round = 0; round < rounds; round++) {
        ck_assert_int_eq(ringk_kernel_deactivate(k), 0);
        usleep(10000); /* the loop reads the new state */
        for (i = 0; i < 20; i++) {
            ck_assert_int_eq(host_send(ctx, "count", 0, accepted + i, RINGK_WAIT_NONE), 0);
        }
        usleep(20000);
        ck_assert_uint_eq(STATS_AT(k, msgs_in, accepted).msgs_in, accepted);
        ck_assert_uint_eq(__atomic_load_n(&t->count, __ATOMIC_ACQUIRE), accepted);
        if (round + 1 < rounds) {
            ck_assert_int_eq(ringk_kernel_activate(k), 0);
            test_wait_u64(&t->count, accepted + 20, 30);
        } else {
            ck_assert_int_eq(ringk_kernel_terminate(k), 0); /* drains the 20 */
        }
        accepted += 20;
    }
    st = stats_of(k);
    ck_assert_int_eq(st.state, RINGK_KERNEL_TERMINATED);
    ck_assert_uint_eq(st.msgs_in, accepted);
    ck_assert_uint_eq(__atomic_load_n(&t->count, __ATOMIC_ACQUIRE), accepted);
    ck_assert_uint_eq(t->out_of_order, 0);
    ck_assert_int_eq(host_send(ctx, "count", 0, 0, RINGK_WAIT_NONE), -EPIPE);
    return k;
}

static uint64_t cpu_subs[2];

static int sub_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_add_fetch((uint64_t*)arg, 1, __ATOMIC_RELEASE);
    return (msg->receiver == RINGK_MSG_BROADCAST) ? 0 : -1;
}

/* A device kernel "pub" of ringk_dev_test_publish (its result block at @a tp_arg, read by the
 * host at @a tp) publishes 500 messages to topic "t", which two CPU kernels and a device kernel
 * "dsub" of ringk_dev_test_count (@a td_arg, @a td) subscribe to: each gets every message once,
 * the device subscriber in order, and the publisher's msgs_out counts each publish once per
 * subscriber. The four kernels go to @a k. */
static inline void fanout_run(ringk_ctx_t *ctx, ringk_dev_test_t *tp_arg, ringk_dev_test_t *tp,
                              ringk_dev_test_t *td_arg, ringk_dev_test_t *td, ringk_kernel_t **k)
{
    static const char *const topics[] = {"t", NULL};
    ringk_kernel_params_t p = dev_params("pub", &ringk_dev_test_publish, tp_arg);
    ringk_kernel_params_t cp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB,
        .handler = sub_handler, .topics_sub = topics
    };
    uint32_t i;

    cpu_subs[0] = cpu_subs[1] = 0;
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_TOPICS_PUB;
    p.topics_pub  = topics;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), 0);
    for (i = 0; i < 2; i++) {
        cp.name = i ? "sub1" : "sub0";
        cp.arg  = &cpu_subs[i];
        ck_assert_int_eq(ringk_kernel_create(ctx, &cp, &k[1 + i]), 0);
    }
    p = dev_params("dsub", &ringk_dev_test_count, td_arg);
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB;
    p.topics_sub  = topics;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[3]), 0);
    for (i = 0; i < 500; i++) {
        ck_assert_int_eq(host_send(ctx, "pub", 0, i, 10000), 0);
    }
    test_wait_u64(&cpu_subs[0], 500, 30);
    test_wait_u64(&cpu_subs[1], 500, 30);
    test_wait_u64(&td->count, 500, 30);
    test_wait_u64(&tp->count, 500, 30);
    usleep(10000);
    ck_assert_uint_eq(cpu_subs[0], 500);
    ck_assert_uint_eq(cpu_subs[1], 500);
    ck_assert_uint_eq(__atomic_load_n(&td->count, __ATOMIC_ACQUIRE), 500);
    ck_assert_uint_eq(td->out_of_order, 0);
    ck_assert_uint_eq(td->bad, 0);
    ck_assert_int_eq(tp->last_error, 0);
    ck_assert_uint_eq(STATS_AT(k[0], msgs_out, 3 * 500).msgs_out, 3 * 500);
}

static uint64_t cpu_barrier_calls;
static int cpu_barrier_codes[8];

/* The CPU side of the barrier test: waits at "b" for each message. */
static int cpu_barrier_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t n = __atomic_load_n(&cpu_barrier_calls, __ATOMIC_RELAXED);

    cpu_barrier_codes[n % 8] = ringk_barrier_wait(k, "b", 10000);
    __atomic_store_n(&cpu_barrier_calls, n + 1, __ATOMIC_RELEASE);
    return 0;
}

/* A named barrier "b" across a CPU kernel and two device kernels of ringk_dev_test_barrier
 * (their result blocks at @a t_arg, read by the host at @a t): five generations pass with every
 * participant; then, with the CPU kernel away, a device kernel's bounded wait times out and it
 * leaves the barrier; and a wait without a bound does not hold a terminate (the kernel leaves
 * with -ECANCELED, terminated). The three kernels go to @a k. */
static inline void barrier_run(ringk_ctx_t *ctx, ringk_dev_test_t *const *t_arg,
                               ringk_dev_test_t *const *t, ringk_kernel_t **k)
{
    static const char *const bars[] = {"b", NULL};
    ringk_kernel_params_t p;
    ringk_kernel_params_t cp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_BARRIERS,
        .name = "cpu", .handler = cpu_barrier_handler, .barriers = bars
    };
    uint32_t i, j, timeout = 10000;

    cpu_barrier_calls = 0;
    for (j = 0; j < 2; j++) {
        p = dev_params(j ? "dev1" : "dev0", &ringk_dev_test_barrier, t_arg[j]);
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_BARRIERS;
        p.barriers    = bars;
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[j]), 0);
    }
    ck_assert_int_eq(ringk_kernel_create(ctx, &cp, &k[2]), 0);
    for (i = 0; i < 5; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "cpu", RINGK_MSG_DATA, NULL, 0, 1000), 0);
        for (j = 0; j < 2; j++) {
            ck_assert_int_eq(ringk_send(ctx, NULL, j ? "dev1" : "dev0", RINGK_MSG_DATA, &timeout,
                                        sizeof(timeout), 1000), 0);
        }
    }
    test_wait_u64(&cpu_barrier_calls, 5, 30);
    for (j = 0; j < 2; j++) {
        test_wait_u64(&t[j]->count, 5, 30);
        for (i = 0; i < 5; i++) {
            ck_assert_int_eq(t[j]->codes[i], 0);
        }
        ck_assert_uint_eq(t[j]->bad, 0);
    }
    for (i = 0; i < 5; i++) {
        ck_assert_int_eq(cpu_barrier_codes[i], 0);
    }
    timeout = 50;
    ck_assert_int_eq(ringk_send(ctx, NULL, "dev0", RINGK_MSG_DATA, &timeout, sizeof(timeout),
                                1000), 0);
    test_wait_u64(&t[0]->count, 6, 30);
    ck_assert_int_eq(t[0]->codes[5], -ETIMEDOUT);
    timeout = (uint32_t)RINGK_WAIT_FOREVER;
    ck_assert_int_eq(ringk_send(ctx, NULL, "dev1", RINGK_MSG_DATA, &timeout, sizeof(timeout),
                                1000), 0);
    ck_assert_int_eq(ringk_kernel_terminate(k[1]), 0);
    test_wait_u64(&t[1]->count, 6, 30);
    ck_assert_int_eq(t[1]->codes[5], -ECANCELED);
    ck_assert_int_eq(stats_of(k[1]).state, RINGK_KERNEL_TERMINATED);
}

/* ringk_dev_recv from the handler of device kernel "r" of ringk_dev_test_recv (its result block
 * at @a t_arg, read by the host at @a t): groups of four taken in order with a bound, the
 * documented failures (nothing queued, a bound that passes, a NULL buffer, a buffer too small
 * for the next message, which stays first), and a handler that takes every message the host
 * sent (copies: it holds none of the host ingress ring's cells) until its bound passes; a
 * terminate its recv takes ends the kernel; every message counted once. Returns the kernel. */
static inline ringk_kernel_t *recv_run(ringk_ctx_t *ctx, ringk_dev_test_t *t_arg,
                                       ringk_dev_test_t *t)
{
    ringk_kernel_params_t p = dev_params("r", &ringk_dev_test_recv, t_arg);
    ringk_kernel_t *k;
    uint32_t i, v[2];

    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.inbox_size  = 256;
    p.max_in      = 64; /* a message is one cell: the inbox is 256 cells */
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 40; i++) {
        ck_assert_int_eq(host_send(ctx, "r", 0, i, 1000), 0);
    }
    test_wait_u64(&t->count, 40, 30);
    ck_assert_uint_eq(t->out_of_order, 0);
    ck_assert_int_eq(t->last_error, 0);
    ck_assert_int_eq(host_send(ctx, "r", 1, 0, 1000), 0);
    test_wait_u64(&t->count, 41, 30);
    ck_assert_int_eq(t->codes[0], -EAGAIN);
    ck_assert_int_eq(t->codes[1], -ETIMEDOUT);
    ck_assert_int_eq(t->codes[2], -EINVAL);
    ck_assert_int_eq(host_send(ctx, "r", 2, 0, 1000), 0);
    ck_assert_int_eq(host_send(ctx, "r", 4, 0, 1000), 0);
    test_wait_u64(&t->count, 43, 30);
    ck_assert_int_eq(t->codes[3], -EMSGSIZE);
    ck_assert_int_eq(t->codes[4], 8);
    ck_assert_int_eq(t->codes[5], 0);
    ck_assert_int_eq(host_send(ctx, "r", 3, 0, 1000), 0);
    for (i = 0; i < 200; i++) {
        v[0] = 4;
        v[1] = i;
        ck_assert_int_eq(ringk_send(ctx, NULL, "r", RINGK_MSG_DATA, v, sizeof(v),
                                    10000), 0);
    }
    test_wait_u64(&t->count, 244, 30);
    ck_assert_msg(t->codes[6] == -ETIMEDOUT, "code %d after %d", t->codes[6], t->codes[7]);
    ck_assert_int_eq(t->codes[7], 200);
    ck_assert_uint_eq(STATS_AT(k, msgs_in, 244).msgs_in, 244);
    ck_assert_uint_eq(stats_of(k).bad_cells, 0);
    /* a terminate taken by the handler's recv: the kernel terminates, and it counts */
    ck_assert_int_eq(host_send(ctx, "r", 3, 0, 1000), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "r", RINGK_MSG_TERMINATE, NULL, 0, 1000), 0);
    test_wait_u64(&t->count, 245, 30);
    ck_assert_int_eq(t->codes[6], -ECANCELED);
    ck_assert_int_eq(t->codes[7], 0);
    ck_assert_uint_eq(STATS_AT(k, msgs_in, 246).msgs_in, 246);
    return k;
}

#endif
