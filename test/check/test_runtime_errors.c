/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the libringk runtime: statistics, and what bad input gets. */
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

/* The statistics cases of this file. */
void test_runtime_stats_tests(TCase *tc)
{
    tcase_add_test(tc, test_runtime_latency_histogram);
}

/* The bad-input cases of this file. */
void test_runtime_errors_tests(TCase *tc)
{
    tcase_add_loop_test(tc, test_runtime_bad_params, 0, sizeof(bad_params) / sizeof(bad_params[0]));
    tcase_add_test(tc, test_runtime_bad_sends);
    tcase_add_test(tc, test_runtime_bad_idle_wake);
    tcase_add_test(tc, test_runtime_bad_recv_inline);
    tcase_add_loop_test(tc, test_runtime_wait_warn, 0, 2);
}
