/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the device executor on the emulated device: the kernels of test/kernels/ringk_dev_test.cu,
 * compiled as host C, run the device loop, ring operations and device API on host threads that
 * stand in for GPU blocks. Multi-producer inboxes (host threads and device kernels at once, every
 * message once, FIFO per pair), backpressure with every message counted, activate / deactivate /
 * terminate, event-driven relaunch, a CPU kernel <-> device kernel ping-pong, device-to-device
 * sends without the host, topic fan-out, a barrier across CPU and device kernels, bad input, and
 * the rule that nothing is allocated once device kernels run.
 *
 * Built a second time as test_device_streams (TEST_DEVICE_STREAMS): the same kernels are then
 * CUDA entries whose CUDA calls run on host threads (test_device_streams.h), so every scenario
 * also goes through the executor's CUDA branch; what would block on a GPU fails the test. The
 * cases only that program has (streams, faults, stuck launches, entries) are in
 * test_device_streams.c. */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "test_device_util.h"
#include "test_device.h"
#ifdef TEST_DEVICE_STREAMS
#include "test_device_streams.h"
#include "core/ringk_cuda.h"
#endif

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

/* The host's wall clock, ns since the epoch. */
static uint64_t wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Makes device kernel "sink" of parameters @a sp (results in @a ts) and "fwd", which forwards
 * to it (results in @a tf; @a sp's sizes, persistent), then sends @a n messages through fwd: all
 * of them device to device (sent_direct). */
static void sink_fwd_new(ringk_ctx_t *ctx, const ringk_kernel_params_t *sp, ringk_dev_test_t *ts,
                         ringk_dev_test_t *tf, uint32_t n, ringk_kernel_t **sink,
                         ringk_kernel_t **fwd)
{
    static const char *const to_sink[] = {"sink", NULL};
    ringk_kernel_params_t p = *sp;
    uint32_t i;

    ck_assert_msg(ringk_kernel_create(ctx, sp, sink) == 0, "sink: %s", logbuf);
    p.field_mask  &= ~(uint64_t)(RINGK_KERNEL_PARAM_FIELD_MODE |
                                 RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS);
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.name         = "fwd";
    p.device_entry = &ringk_dev_test_forward;
    p.arg          = tf;
    p.publishes_to = to_sink;
    ck_assert_msg(ringk_kernel_create(ctx, &p, fwd) == 0, "fwd: %s", logbuf);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(host_send(ctx, "fwd", 0, i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&ts->count, n, 30);
    ck_assert_uint_eq(STATS_AT(*fwd, sent_direct, n).sent_direct, n);
}

/* ---- placement, statistics, the allocation rule ------------------------------------------- */

START_TEST(test_device_runs_emulated)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    ringk_kernel_t *k;
    ringk_kernel_stats_t st;
    uint8_t big[1000];
    uint64_t big_sum = 0;
    uint32_t i;
#ifdef TEST_DEVICE_STREAMS
    unsigned long launched = __atomic_load_n(&tds_launches, __ATOMIC_RELAXED);
#endif

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 1000; i++) {
        ck_assert_int_eq(host_send(ctx, "count", 0, i, RINGK_WAIT_FOREVER), 0);
    }
    /* messages of several cells, staged in two copies (the first cell, then the rest); one
     * of the five comes after a skip cell at the ring's end */
    memcpy(big, (uint32_t[2]){1, 0}, 8); /* producer 1, its messages 0..4 */
    for (i = 8; i < sizeof(big); i++) {
        big[i]   = (uint8_t)(i * 13 + 5);
        big_sum += big[i];
    }
    for (i = 0; i < 5; i++) {
        ((uint32_t*)big)[1] = i;
        ck_assert_int_eq(ringk_send(ctx, NULL, "count", RINGK_MSG_DATA, big, sizeof(big),
                                    RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&t.count, 1005, 30);
    st = STATS_AT(k, msgs_in, 1005);
    ck_assert_int_eq(st.device, TEST_DEVICE_INDEX);
#ifdef TEST_DEVICE_STREAMS
    /* the path taken: launches through the entry's CUDA ops */
    ck_assert_uint_eq(__atomic_load_n(&tds_launches, __ATOMIC_RELAXED) - launched, st.launches);
#endif
    ck_assert_uint_eq(st.msgs_in, 1005);
    ck_assert_uint_ge(st.launches, 1);
    ck_assert_uint_eq(st.bad_cells, 0);
    ck_assert_uint_eq(t.out_of_order, 0);
    ck_assert_uint_eq(t.sum, 999ull * 1000 / 2 + 10);
    ck_assert_uint_eq(t.tail_sum, 5 * big_sum);
    /* the path taken: every message from the host handed over as the staged copy */
    ck_assert_uint_eq(t.staged, 1005);
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    ringk_ctx_destroy(ctx);
    /* no allocation was made while a device kernel ran, nothing else was logged */
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* ---- multi-producer inbox -------------------------------------------------------------------- */

typedef struct {
    ringk_ctx_t *ctx;
    uint32_t     producer, n;
} producer_arg_t;

static void *producer_main(void *arg)
{
    producer_arg_t *a = arg;
    uint32_t i;

    for (i = 0; i < a->n; i++) {
        ck_assert_int_eq(host_send(a->ctx, "sink", a->producer, i, RINGK_WAIT_FOREVER), 0);
    }
    return NULL;
}

/* Four host threads send to "sink" while two device kernels forward what they get into it
 * (device to device, no host): every message arrives once, in order per sender. The forwarders'
 * producers use ids 4 and 5. */
START_TEST(test_device_multi_producer)
{
    static const char *const to_sink[] = {"sink", NULL};
    enum { N = 3000, HOSTS = 4, FWDS = 2 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t ts = {0}, tf[FWDS];
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &ts);
    ringk_kernel_t *sink, *fwd[FWDS];
    producer_arg_t pa[HOSTS];
    pthread_t th[HOSTS];
    char name[16];
    uint32_t i, j;

    memset(tf, 0, sizeof(tf));
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_PROCESSING;
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.inbox_size = 64; /* small: producers meet a full inbox often */
    p.max_in     = 64;
    /* loop 0: the sink batches, the forwarders take one at a time; loop 1: all adaptive (one
     * at a time while both inboxes are short) */
    p.processing = (_i == 0) ? RINGK_PROCESSING_BATCH : RINGK_PROCESSING_ADAPTIVE;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), 0);
    for (j = 0; j < FWDS; j++) {
        snprintf(name, sizeof(name), "fwd%u", j);
        p = dev_params(name, &ringk_dev_test_forward, &tf[j]);
        p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO |
                         RINGK_KERNEL_PARAM_FIELD_PROCESSING;
        p.publishes_to = to_sink;
        p.processing   = (_i == 0) ? RINGK_PROCESSING_CONTINUOUS : RINGK_PROCESSING_ADAPTIVE;
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &fwd[j]), 0);
    }
    for (i = 0; i < HOSTS; i++) {
        pa[i] = (producer_arg_t){ctx, i, N};
        ck_assert_int_eq(pthread_create(&th[i], NULL, producer_main, &pa[i]), 0);
    }
    for (i = 0; i < N; i++) {
        for (j = 0; j < FWDS; j++) {
            snprintf(name, sizeof(name), "fwd%u", j);
            ck_assert_int_eq(host_send(ctx, name, HOSTS + j, i, RINGK_WAIT_FOREVER), 0);
        }
    }
    for (i = 0; i < HOSTS; i++) {
        pthread_join(th[i], NULL);
    }
    test_wait_u64(&ts.count, (uint64_t)N * (HOSTS + FWDS), 60);
    for (j = 0; j < FWDS; j++) {
        ck_assert_int_eq(tf[j].last_error, 0);
        /* the path taken: every forward went device to device, none through the host */
        ringk_kernel_stats_t st = STATS_AT(fwd[j], msgs_out, N);

        ck_assert_uint_eq(st.send_failed, 0);
        ck_assert_uint_eq(st.sent_direct, N);
        ck_assert_uint_eq(st.msgs_out, N);
    }
    ck_assert_uint_eq(ts.out_of_order, 0);
    ck_assert_uint_eq(ts.bad, 0);
    ck_assert_uint_eq(ts.sum, (uint64_t)(HOSTS + FWDS) * N * (N - 1) / 2);
    /* the host's messages were staged, the forwarders' (device inbox) were not */
    ck_assert_uint_eq(ts.staged, (uint64_t)HOSTS * N);
    /* the scopes the sink's loop used on a GPU: device for its device inbox, system for the
     * rings the host uses too */
    ck_assert_uint_eq(ts.ring_scopes, RINGK_RING_SCOPE_DEVICE | (RINGK_RING_SCOPE_SYSTEM << 8) |
                                      (RINGK_RING_SCOPE_SYSTEM << 16));
    for (i = 0; i < HOSTS + FWDS; i++) {
        ck_assert_uint_eq(ts.next[i], N);
    }
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* ---- backpressure and life cycle ------------------------------------------------------------ */

/* An inactive device kernel takes nothing: sends that must not wait fill its inbox and are then
 * refused with -EAGAIN, a bounded wait times out; once active it handles exactly what was
 * accepted. Deactivated again, messages queue; terminate drains them. */
START_TEST(test_device_backpressure_lifecycle)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};

    lifecycle_run(ctx, dev_params("count", &ringk_dev_test_count, &t), &t, 1);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A terminate message ends a device kernel after what came before it. */
START_TEST(test_device_terminate_message)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    ringk_kernel_t *k;
    uint32_t i;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 100; i++) {
        ck_assert_int_eq(host_send(ctx, "count", 0, i, RINGK_WAIT_FOREVER), 0);
    }
    ck_assert_int_eq(ringk_send(ctx, NULL, "count", RINGK_MSG_TERMINATE, NULL, 0, 1000), 0);
    for (i = 0; (i < 3000) && (stats_of(k).state != RINGK_KERNEL_TERMINATED); i++) {
        usleep(1000);
    }
    ck_assert_int_eq(stats_of(k).state, RINGK_KERNEL_TERMINATED);
    ck_assert_uint_eq(__atomic_load_n(&t.count, __ATOMIC_ACQUIRE), 100);
    ck_assert_uint_eq(stats_of(k).msgs_in, 101); /* the terminate counts, as on the CPU */
    ringk_ctx_destroy(ctx);
}
END_TEST

/* An event-driven device kernel returns after max_iterations idle iterations; a message
 * relaunches it, from the host or from another device kernel (its doorbell). */
START_TEST(test_device_event_driven)
{
    static const char *const to_sink[] = {"sink", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t ts = {0}, tf = {0};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &ts);
    ringk_kernel_t *sink, *fwd;
    uint64_t launches;
    uint32_t i, j;

    p.field_mask    |= RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS;
    p.mode           = RINGK_MODE_EVENT_DRIVEN;
    p.max_iterations = 50;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), 0);
    p = dev_params("fwd", &ringk_dev_test_forward, &tf);
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_sink;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &fwd), 0);
    for (i = 0; i < 10; i++) {
        for (j = 0; (j < 10000) && !stats_of(sink).parked; j++) {
            usleep(1000); /* idle long enough, its loop returns */
        }
        /* 'parked' is set just before the loop looks at its inboxes a last time: past that
         * look, the launch has returned */
        usleep(20000);
        ck_assert_int_eq(stats_of(sink).parked, 1);
        launches = stats_of(sink).launches;
        if (i % 2) {
            ck_assert_int_eq(host_send(ctx, "sink", 0, i / 2, RINGK_WAIT_FOREVER), 0);
        } else {
            ck_assert_int_eq(host_send(ctx, "fwd", 1, i / 2, RINGK_WAIT_FOREVER), 0);
        }
        test_wait_u64(&ts.count, i + 1, 30);
        ck_assert_uint_gt(stats_of(sink).launches, launches);
    }
    ck_assert_uint_eq(ts.out_of_order, 0);
    ck_assert_int_eq(tf.last_error, 0);
    /* relaunched by its doorbell */
    ck_assert_uint_eq(STATS_AT(fwd, sent_direct, 5).sent_direct, 5);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* A wake that comes after a kernel finished and was joined (here a device sender that rings
 * the doorbell late, as one whose compare-and-swap on 'idle' raced the host's may) launches
 * nothing: the launch would outlive the join and run on memory a later kernel may take. */
START_TEST(test_device_no_launch_after_join)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t ts = {0}, tf = {0};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &ts);
    ringk_kernel_t *sink, *fwd;
    uint32_t ring = 1;
    uint64_t launches;

    p.field_mask    |= RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS;
    p.mode           = RINGK_MODE_EVENT_DRIVEN;
    p.max_iterations = 50;
    sink_fwd_new(ctx, &p, &ts, &tf, 1, &sink, &fwd);
    ck_assert_int_eq(ringk_kernel_terminate(sink), 0);
    launches = stats_of(sink).launches;
    ck_assert_int_eq(ringk_send(ctx, NULL, "fwd", RINGK_MSG_DATA, &ring, sizeof(ring),
                                RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&tf.count, 2, 30);
    ck_assert_int_eq(tf.codes[1], 1); /* it rang */
    usleep(100000); /* the proxy looks at every doorbell many times meanwhile */
    ck_assert_uint_eq(stats_of(sink).launches, launches);
    ck_assert_int_eq(stats_of(sink).state, RINGK_KERNEL_TERMINATED);
    ck_assert_int_eq(ringk_kernel_destroy(sink), 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* Device senders keep sending to a device kernel while it is terminated, and after: each
 * forward is either handled by it (once, in order) or refused with -EPIPE (the target closed
 * its inbox), never taken and lost. */
START_TEST(test_device_terminate_senders)
{
    static const char *const to_sink[] = {"sink", NULL};
    enum { N = 3000, LATE = 100, FWDS = 2 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t ts = {0}, tf[FWDS];
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &ts);
    ringk_kernel_t *sink, *fwd[FWDS];
    uint64_t forwarded = 0, refused = 0;
    char name[16];
    uint32_t i, j;

    memset(tf, 0, sizeof(tf));
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), 0);
    for (j = 0; j < FWDS; j++) {
        snprintf(name, sizeof(name), "fwd%u", j);
        p = dev_params(name, &ringk_dev_test_forward, &tf[j]);
        p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO |
                         RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE;
        p.publishes_to = to_sink;
        p.inbox_size   = 4096; /* the host's sends all fit: none waits for the forwarder */
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &fwd[j]), 0);
    }
    for (i = 0; i < N; i++) {
        for (j = 0; j < FWDS; j++) {
            snprintf(name, sizeof(name), "fwd%u", j);
            ck_assert_int_eq(host_send(ctx, name, j, i, RINGK_WAIT_FOREVER), 0);
        }
    }
    test_wait_u64(&ts.count, N / 4, 30);
    ck_assert_int_eq(ringk_kernel_terminate(sink), 0); /* while the forwarders send */
    for (i = 0; i < LATE; i++) { /* and after: refused */
        for (j = 0; j < FWDS; j++) {
            snprintf(name, sizeof(name), "fwd%u", j);
            ck_assert_int_eq(host_send(ctx, name, j, N + i, RINGK_WAIT_FOREVER), 0);
        }
    }
    for (j = 0; j < FWDS; j++) {
        ringk_kernel_stats_t st;

        ck_assert_int_eq(ringk_kernel_terminate(fwd[j]), 0); /* drains its inbox, then stops */
        st = stats_of(fwd[j]);
        ck_assert_uint_eq(st.msgs_in, N + LATE);
        ck_assert_uint_eq(tf[j].count + st.handler_errors, N + LATE);
        ck_assert_uint_ge(st.handler_errors, LATE);
        ck_assert_int_eq(tf[j].last_error, -EPIPE);
        forwarded += tf[j].count;
        refused   += st.handler_errors;
    }
    ck_assert_uint_ge(refused, FWDS * LATE);
    ck_assert_uint_eq(ts.count, forwarded); /* every forward that succeeded was handled */
    ck_assert_uint_eq(ts.out_of_order, 0);
    ck_assert_uint_eq(ts.bad, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A handler's burst of device-to-device sends writes no counter across the bus: the loop
 * stores the kernel's counters between turns (idle here, after the burst), and the host then
 * sees every send. */
START_TEST(test_device_counters_stored)
{
    static const char *const to_sink[] = {"sink", NULL};
    enum { B = 300 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t ts = {0}, tf = {0};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &ts);
    ringk_kernel_t *sink, *fwd;
    ringk_kernel_stats_t st;
    uint32_t burst[3] = {3, 0, B};

    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE;
    p.inbox_size  = 1024; /* room for the burst: a wait for room would store the counters */
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), 0);
    p = dev_params("fwd", &ringk_dev_test_forward, &tf);
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_sink;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &fwd), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "fwd", RINGK_MSG_DATA, burst, sizeof(burst), 1000),
                     0);
    test_wait_u64(&ts.count, B, 30);
    test_wait_u64(&tf.count, 1, 30);
    ck_assert_int_eq(tf.last_error, 0);
    ck_assert_int_eq(tf.codes[0], B); /* none of the burst's sends stored during it */
    st = STATS_AT(fwd, msgs_out, B);
    ck_assert_uint_eq(st.msgs_out, B);
    ck_assert_uint_eq(st.sent_direct, B);
    ck_assert_uint_eq(STATS_AT(sink, msgs_in, B).msgs_in, B);
    ck_assert_uint_eq(ts.out_of_order, 0);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* Two contexts of one process share a device's slabs: the second context's first kernel
 * allocates nothing while the first context's kernel runs, and the first context's destroy
 * frees nothing while the second's runs (on a GPU either would wait for the resident kernel for
 * ever; the streams stand-in counts both). The last context frees them. */
START_TEST(test_device_two_contexts)
{
    ringk_ctx_params_t cpar = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = log_hook};
    ringk_ctx_t *ca = ctx_new(), *cb;
    ringk_dev_test_t ta = {0}, tb = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &ta);
    ringk_kernel_t *ka, *kb;
    uint32_t i;

    ck_assert_int_eq(ringk_kernel_create(ca, &p, &ka), 0);
    ck_assert_int_eq(host_send(ca, "count", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&ta.count, 1, 30);
    ck_assert_int_eq(ringk_ctx_create(&cpar, &cb), 0); /* logbuf kept: a's threads run */
    p.arg = &tb;
    ck_assert_int_eq(ringk_kernel_create(cb, &p, &kb), 0);
    ck_assert_int_eq(stats_of(kb).device, stats_of(ka).device);
    for (i = 0; i < 100; i++) {
        ck_assert_int_eq(host_send(ca, "count", 0, i + 1, RINGK_WAIT_FOREVER), 0);
        ck_assert_int_eq(host_send(cb, "count", 0, i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&ta.count, 101, 30);
    test_wait_u64(&tb.count, 100, 30);
    ringk_ctx_destroy(ca);
    for (i = 0; i < 100; i++) { /* its memory is still there */
        ck_assert_int_eq(host_send(cb, "count", 0, 100 + i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&tb.count, 200, 30);
    ck_assert_uint_eq(ta.out_of_order + tb.out_of_order, 0);
    ck_assert_uint_eq(STATS_AT(kb, msgs_in, 200).msgs_in, 200);
    ringk_ctx_destroy(cb);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
#ifdef TEST_DEVICE_STREAMS
    ck_assert_uint_eq(__atomic_load_n(&tds_violations, __ATOMIC_RELAXED), 0);
#endif
}
END_TEST

/* ---- with CPU kernels ------------------------------------------------------------------------- */

static uint64_t pongs;

/* The CPU end of a ping-pong: each reply from "echo" sends the next ping until 2000. */
static int ping_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint32_t v[2];

    memcpy(v, ringk_msg_payload(msg), sizeof(v));
    if (v[1] + 1 < 2000) {
        v[1]++;
        if (ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_DATA, v, sizeof(v),
                             RINGK_WAIT_FOREVER) != 0) {
            return -1;
        }
    }
    __atomic_add_fetch(&pongs, 1, __ATOMIC_RELEASE);
    return 0;
}

/* A CPU kernel and a device kernel bounce a message 2000 times (host ingress one way, the
 * outbox and the proxy the other), with timestamps on. */
START_TEST(test_device_cpu_pingpong)
{
    static const char *const to_echo[] = {"echo", NULL}, *const to_ping[] = {"ping", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("echo", &ringk_dev_test_echo, &t);
    ringk_kernel_params_t cp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_TIMESTAMPS,
        .name = "ping", .handler = ping_handler, .publishes_to = to_echo, .timestamps = 1
    };
    ringk_kernel_t *echo, *ping;
    uint32_t v[2] = {0, 0};

    pongs = 0;
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_TIMESTAMPS;
    p.publishes_to = to_ping;
    p.timestamps   = 1;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &echo), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &cp, &ping), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "echo", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&pongs, 2000, 60);
    ck_assert_uint_eq(__atomic_load_n(&t.count, __ATOMIC_ACQUIRE), 2000);
    ck_assert_int_eq(t.last_error, 0);
    ck_assert_uint_eq(STATS_AT(echo, msgs_out, 2000).msgs_out, 2000);
    ck_assert_uint_eq(stats_of(echo).sent_direct, 0); /* a CPU target: through the proxy */
    ck_assert_uint_eq(stats_of(ping).handler_errors, 0);
    /* the device clock's physical part is the host's wall clock (the launch's offset) */
    ck_assert_int_lt(llabs((long long)(t.hlc >> 16) - (long long)(wall_ns() / 1000000)), 2000);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

uint64_t cpu_sink_count;

static int cpu_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_add_fetch(&cpu_sink_count, 1, __ATOMIC_RELEASE);
    return 0;
}

/* a CPU kernel named "sink" that counts what it handles, taking a device kernel's name */
const ringk_kernel_params_t cpu_sink_params = {
    .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
    .name = "sink", .handler = cpu_sink
};

/* A device sender keeps its copy of a direct route's target for the launch: when the target is
 * destroyed and a CPU kernel takes its name, the sender finds the old one closing, reads the
 * route again (no longer direct) and sends through the host to the new one: nothing refused. */
START_TEST(test_device_route_target_replaced)
{
    enum { N = 200 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t ts = {0}, tf = {0};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &ts);
    ringk_kernel_t *sink, *fwd;
    uint32_t i;

    cpu_sink_count = 0;
    sink_fwd_new(ctx, &p, &ts, &tf, N, &sink, &fwd);
    ck_assert_int_eq(ringk_kernel_destroy(sink), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &cpu_sink_params, &sink), 0);
    for (i = 0; i < N; i++) {
        ck_assert_int_eq(host_send(ctx, "fwd", 0, N + i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&tf.count, 2 * N, 30);
    test_wait_u64(&cpu_sink_count, N, 30);
    ck_assert_int_eq(tf.last_error, 0);
    ck_assert_uint_eq(STATS_AT(fwd, msgs_out, 2 * N).msgs_out, 2 * N);
    ck_assert_uint_eq(stats_of(fwd).sent_direct, N); /* the second N through the host */
    ck_assert_uint_eq(stats_of(fwd).send_failed, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* Sets RINGK_DEVICE_MAPPED_MB and RINGK_DEVICE_MEM_MB to @a mb (NULL: unsets them); read when
 * a device's slabs are allocated, at the first device kernel of the process's contexts. */
void slabs_mb(const char *mb)
{
    if (mb != NULL) {
        setenv("RINGK_DEVICE_MAPPED_MB", mb, 1);
        setenv("RINGK_DEVICE_MEM_MB", mb, 1);
    } else {
        unsetenv("RINGK_DEVICE_MAPPED_MB");
        unsetenv("RINGK_DEVICE_MEM_MB");
    }
}

/* Parameters of a small device kernel: a 16-cell inbox, 200-byte messages (about 80 KiB of
 * mapped memory, most of it the outbox, and 11 KiB of device memory). */
ringk_kernel_params_t small_params(const char *name, const ringk_device_entry_t *entry,
                                          ringk_dev_test_t *t)
{
    ringk_kernel_params_t p = dev_params(name, entry, t);

    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                    RINGK_KERNEL_PARAM_FIELD_MAX_OUT;
    p.inbox_size = 16;
    p.max_in     = 200;
    p.max_out    = 200;
    return p;
}

/* A pair of kernels, a target and a sender with a direct route to it, made and destroyed
 * again and again in one context, in slabs of 1 MiB: far more pairs than the slabs hold at
 * once (about 6), so each pair takes the memory of the ones before. */
START_TEST(test_device_memory_reused)
{
    enum { ROUNDS = 100 };
    ringk_ctx_t *ctx;
    ringk_dev_test_t ts, tf;
    ringk_kernel_params_t p;
    ringk_kernel_t *sink, *fwd;
    unsigned r;

    slabs_mb("1"); /* unset again by slabs_teardown, also when the test fails */
    ctx = ctx_new();
    for (r = 0; r < ROUNDS; r++) {
        memset(&ts, 0, sizeof(ts));
        memset(&tf, 0, sizeof(tf));
        p = small_params("sink", &ringk_dev_test_count, &ts);
        sink_fwd_new(ctx, &p, &ts, &tf, 1, &sink, &fwd);
        ck_assert_int_eq(ringk_kernel_destroy(sink), 0);
        ck_assert_int_eq(ringk_kernel_destroy(fwd), 0);
    }
    /* a kernel whose rings alone are above a slab: refused, the log names the slab */
    p        = small_params("big", &ringk_dev_test_count, &ts);
    p.max_in = 1u << 20;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), -ENOMEM);
    ck_assert_msg(strstr(logbuf, "kernel 'big': the device slabs are full: no room for ") != NULL,
                  "log: %s", logbuf);
    ck_assert_msg(strstr(logbuf, "bytes in the 1 MiB of mapped memory (RINGK_DEVICE_MAPPED_MB)")
                  != NULL, "log: %s", logbuf);
    ringk_ctx_destroy(ctx);
}
END_TEST

void slabs_teardown(void)
{
    slabs_mb(NULL);
}

/* A sender's launch keeps its copy of a direct route's target, so the target's memory is not
 * taken again while the sender lives: a kernel made after the target is destroyed gets other
 * memory (first-fit would give it the target's), and what the sender sends on the route goes
 * through the host (no kernel of that name: counted as failed), never into the new kernel. */
START_TEST(test_device_memory_held_by_route)
{
    enum { N = 50 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t ts = {0}, tf = {0}, to = {0};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &ts);
    ringk_kernel_t *sink, *fwd, *other;
    uint32_t i;

    sink_fwd_new(ctx, &p, &ts, &tf, N, &sink, &fwd);
    ck_assert_int_eq(ringk_kernel_destroy(sink), 0);
    p = dev_params("other", &ringk_dev_test_count, &to);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &other), 0);
    for (i = 0; i < N; i++) {
        ck_assert_int_eq(host_send(ctx, "fwd", 0, N + i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&tf.count, 2 * N, 30);
    ck_assert_uint_eq(STATS_AT(fwd, send_failed, N).send_failed, N);
    ck_assert_uint_eq(stats_of(fwd).sent_direct, N);
    ck_assert_uint_eq(__atomic_load_n(&to.count, __ATOMIC_ACQUIRE), 0);
    ck_assert_uint_eq(stats_of(other).msgs_in, 0);
    ck_assert_uint_eq(stats_of(other).bad_cells, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

static uint64_t bursts;

/* Sends 20 small messages {1, n} to route 0 per call: a CPU kernel's handler sending in a burst
 * (what the CPU dispatch loop packs into batch cells when the target is a CPU kernel). */
static int burst_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint32_t v[2] = {1, 0}, i;

    for (i = 0; i < 20; i++) {
        v[1] = (uint32_t)bursts * 20 + i;
        if (ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_DATA, v, sizeof(v),
                             RINGK_WAIT_FOREVER) != 0) {
            return -1;
        }
    }
    __atomic_add_fetch(&bursts, 1, __ATOMIC_RELEASE);
    return 0;
}

/* A CPU kernel's bursts of small sends reach a device kernel as single messages, every one in
 * order (no batch cell, which the device loop would count as a bad cell). */
START_TEST(test_device_cpu_burst)
{
    static const char *const to_sink[] = {"sink", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &t);
    ringk_kernel_params_t cp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "burst", .handler = burst_handler, .publishes_to = to_sink
    };
    ringk_kernel_t *sink, *burst;
    uint32_t i;

    bursts = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &cp, &burst), 0);
    for (i = 0; i < 50; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "burst", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    }
    test_wait_u64(&bursts, 50, 60);
    test_wait_u64(&t.count, 50 * 20, 60);
    ck_assert_uint_eq(t.out_of_order, 0);
    ck_assert_uint_eq(t.bad, 0);
    ck_assert_uint_eq(STATS_AT(sink, msgs_in, 50 * 20).msgs_in, 50 * 20);
    ck_assert_uint_eq(stats_of(sink).bad_cells, 0);
    ck_assert_uint_eq(stats_of(burst).handler_errors, 0);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* A device kernel publishes to a topic that two CPU kernels and a device kernel subscribe to:
 * each gets every message once. */
START_TEST(test_device_topic_fanout)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t tp = {0}, td = {0};
    ringk_kernel_t *k[4];

    fanout_run(ctx, &tp, &tp, &td, &td, k);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* A named barrier across a CPU kernel and two device kernels: five generations pass with
 * every participant; then, with the CPU kernel away, a device kernel's bounded wait times out
 * and it leaves the barrier. */
START_TEST(test_device_barrier)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t[2], *tp[2] = {&t[0], &t[1]};
    ringk_kernel_t *k[3];

    memset(t, 0, sizeof(t));
    barrier_run(ctx, tp, tp, k);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* ---- receiving from a handler ----------------------------------------------------------- */

/* ringk_dev_recv from a device handler: groups of four taken in order with a bound, the
 * documented failures (nothing queued, a bound that passes, a NULL buffer, a buffer too small
 * for the next message, which stays first), and a handler that takes every message the host
 * sent (copies: it holds none of the host ingress ring's cells) until its bound passes;
 * every message counted once. */
START_TEST(test_device_recv)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};

    recv_run(ctx, &t, &t);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

static int no_allgather(void *arg, const void *in, void *out, size_t len)
{
    return -EIO;
}

/* ringk_dev_recv from a handler whose message came from the device inbox: the cells it takes
 * there are held until it returns, so it takes until they fill half the inbox (-ENOBUFS after
 * 127 of 256 cells, the loop's batch before its message given back first); the rest, fillers,
 * are handled by the next calls. */
START_TEST(test_device_recv_held)
{
    static const char *const to_sink[] = {"sink", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t tr = {0}, tf = {0};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_recv, &tr);
    uint32_t take[3] = {3, 0, 1}, fill[3] = {4, 1, 199};
    ringk_kernel_t *kr, *kf;

    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.inbox_size  = 256;
    p.max_in      = 64; /* a message is one cell: the inbox is 256 cells */
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &kr), 0);
    p = dev_params("fwd", &ringk_dev_test_forward, &tf);
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_sink;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &kf), 0);
    /* fwd sends {3, 0} ("take until recv fails", its bound 300 ms), then {4, 1..199}
     * (fillers) to sink, device to device */
    ck_assert_int_eq(ringk_send(ctx, NULL, "fwd", RINGK_MSG_DATA, take, sizeof(take),
                                RINGK_WAIT_FOREVER), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "fwd", RINGK_MSG_DATA, fill, sizeof(fill),
                                RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&tr.count, 128, 30);
    ck_assert_msg(tr.codes[6] == -ENOBUFS, "code %d after %d", tr.codes[6], tr.codes[7]);
    ck_assert_int_eq(tr.codes[7], 127);
    test_wait_u64(&tr.count, 200, 30);
    ck_assert_uint_eq(STATS_AT(kf, sent_direct, 200).sent_direct, 200);
    ck_assert_uint_eq(STATS_AT(kr, msgs_in, 200).msgs_in, 200);
    ck_assert_uint_eq(stats_of(kr).bad_cells, 0);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* In a job of several processes, device kernels created before ringk_ctx_start are launched
 * by it (starting the network layer may allocate pinned memory, which must come before any
 * resident kernel): until then their inbox holds what is sent; a context destroyed without a
 * start launches them to drain and stop. */
START_TEST(test_device_job_deferred)
{
    ringk_ctx_params_t cp = {
        .field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_JOB, .log = log_hook,
        .job = {.rank = 0, .size = 2, .allgather = no_allgather}
    };
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    ringk_kernel_t *k;
    ringk_ctx_t *ctx;

    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_ctx_create(&cp, &ctx), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(host_send(ctx, "count", 0, 0, 1000), 0);
    usleep(20000);
    ck_assert_uint_eq(stats_of(k).launches, 0);
    ck_assert_uint_eq(__atomic_load_n(&t.count, __ATOMIC_ACQUIRE), 0);
    ringk_ctx_destroy(ctx);
    ck_assert_uint_eq(t.count, 1);
}
END_TEST

/* ---- bad input -------------------------------------------------------------------------------- */

/* The device API refuses what a handler gets wrong with the documented codes. */
START_TEST(test_device_bad_calls)
{
    static const char *const to_x[] = {"x", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("bad", &ringk_dev_test_bad, &t);
    ringk_kernel_t *k;

    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MAX_OUT;
    p.publishes_to = to_x;
    p.max_out      = 256;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(host_send(ctx, "bad", 0, 0, 1000), 0);
    test_wait_u64(&t.count, 1, 30);
    ck_assert_int_eq(t.codes[0], -EINVAL);   /* route 5 of 1 */
    ck_assert_int_eq(t.codes[1], -EPERM);    /* not in publishes_to */
    ck_assert_int_eq(t.codes[2], -EPERM);    /* not in topics_pub */
    ck_assert_int_eq(t.codes[3], -EMSGSIZE); /* 512 bytes, max_out 256 */
    ck_assert_int_eq(t.codes[4], -EINVAL);   /* message type 77 */
    ck_assert_int_eq(t.codes[5], (int)ringk_kernel_id(k));
    ck_assert_int_eq(t.codes[6], 1);
    ringk_ctx_destroy(ctx);
}
END_TEST

static int fake_count(char *why, size_t why_len)
{
    snprintf(why, why_len, "no CUDA device");
    return -ENODEV;
}

/* A CUDA backend needs a device entry; a CUDA entry without a device is -ENODEV with the reason
 * logged, unless the CPU backend is allowed too (then the CPU runs the handler). */
START_TEST(test_device_bad_params)
{
    static const ringk_device_cuda_ops_t ops = {.device_count = fake_count};
    static const ringk_device_entry_t cuda_entry = {
        RINGK_DEVICE_ENTRY_MAGIC, RINGK_DEV_ABI, RINGK_DEVICE_ENTRY_CUDA, "fake", NULL, &ops
    };
    ringk_device_entry_t old = ringk_dev_test_count;
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("k", NULL, &t);
    ringk_kernel_t *k;
    uint64_t n = 0;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "needs a device_entry"));
    old.abi = RINGK_DEV_ABI + 1;
    p.device_entry = &old;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "rebuild it"));
    /* a message longer than a 16-bit cell count of the host ingress ring (an LL ring) holds */
    p.device_entry = &ringk_dev_test_count;
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.max_in       = 9u << 20;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    ck_assert_msg(strstr(logbuf, "max_in 9437184 is above the 8388428 bytes a message to a "
                         "device kernel carries") != NULL, "log: %s", logbuf);
    p.field_mask  &= ~(uint64_t)RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.device_entry = &cuda_entry;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -ENODEV);
    ck_assert_ptr_nonnull(strstr(logbuf, "no CUDA device"));
    /* CPU | CUDA without a device: the CPU handler */
    p = dev_params("k", &cuda_entry, NULL);
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_HANDLER;
    p.backends    = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
    p.handler     = sub_handler;
    p.arg         = &n;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(stats_of(k).device, RINGK_DEVICE_NONE);
    ck_assert_int_eq(ringk_send(ctx, NULL, "k", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    test_wait_u64(&n, 1, 30);
    p.backends = 4;
    p.name     = "k2";
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    ringk_ctx_destroy(ctx);
}
END_TEST


int main(void)
{
    Suite *s  = suite_create("device");
    TCase *tc = tcase_create("device");

    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, slabs_teardown);
#ifdef TEST_DEVICE_STREAMS
    tcase_add_checked_fixture(tc, NULL, streams_teardown);
    /* first: in one process (CK_FORK=no), the stuck launch's kernel stays counted on the
     * device, and an unknown entry is then refused for the rest of the process */
    test_device_streams_first(tc);
#endif
    tcase_add_test(tc, test_device_runs_emulated);
    tcase_add_loop_test(tc, test_device_multi_producer, 0, 2);
    tcase_add_test(tc, test_device_backpressure_lifecycle);
    tcase_add_test(tc, test_device_terminate_message);
    tcase_add_test(tc, test_device_event_driven);
    tcase_add_test(tc, test_device_terminate_senders);
    tcase_add_test(tc, test_device_no_launch_after_join);
    tcase_add_test(tc, test_device_counters_stored);
    tcase_add_test(tc, test_device_two_contexts);
    tcase_add_test(tc, test_device_cpu_pingpong);
    tcase_add_test(tc, test_device_cpu_burst);
    tcase_add_test(tc, test_device_route_target_replaced);
    tcase_add_test(tc, test_device_memory_reused);
    tcase_add_test(tc, test_device_memory_held_by_route);
    tcase_add_test(tc, test_device_topic_fanout);
    tcase_add_test(tc, test_device_barrier);
    tcase_add_test(tc, test_device_recv);
    tcase_add_test(tc, test_device_recv_held);
    tcase_add_test(tc, test_device_job_deferred);
    tcase_add_test(tc, test_device_bad_calls);
    tcase_add_test(tc, test_device_bad_params);
    test_device_block_cases(tc);
#ifdef TEST_DEVICE_STREAMS
    test_device_budget_cases(tc); /* in this TCase: before the last one, in one process */
    test_device_streams_last(tc);
#endif
    suite_add_tcase(s, tc);
#ifndef TEST_DEVICE_STREAMS
    /* a TCase of their own: CK_RUN_CASE=budget runs them alone */
    tc = tcase_create("budget");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, slabs_teardown);
    test_device_budget_cases(tc);
    suite_add_tcase(s, tc);
#endif
    return test_run_suite(s);
}
