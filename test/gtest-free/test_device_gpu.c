/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the device executor with the kernels of kernels/ringk_dev_test.cu compiled by nvcc.
 * Without a GPU: a CUDA-only kernel is refused with -ENODEV and the reason, CPU | CUDA runs on
 * the CPU. With a GPU: the emulated-device scenarios again on the device (every message once in
 * order, CPU <-> GPU ping-pong, GPU-to-GPU sends with relaunch), and the runtime's CUDA-touching
 * calls (kernel create and destroy) made while resident kernels run, each with a bounded wait. */
#include "ringk_config.h"
#include "test_log.h"
#include "test_util.h"

#include <errno.h>
#include <string.h>

#ifdef HAVE_CUDA
#include "kernels/ringk_dev_test.h"
#include <ringk/api/ringk.h>

#include <cuda_runtime_api.h>

static char logbuf[16384];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int ndevices;

static void log_hook(void *arg, int level, const char *message)
{
    if (level <= RINGK_LOG_INFO) {
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

static ringk_kernel_params_t dev_params(const char *name, const ringk_device_entry_t *entry,
                                        ringk_dev_test_t *t)
{
    ringk_kernel_params_t p = {
        .field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_BACKENDS |
                        RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY,
        .name         = name,
        .backends     = RINGK_BACKEND_CUDA,
        .device_entry = entry,
        .arg          = t
    };

    return p;
}

static uint64_t cpu_count;

static int cpu_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_add_fetch(&cpu_count, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Without a GPU, a CUDA-only kernel of a CUDA entry is -ENODEV with the reason; with one, a
 * placement past the devices is. CPU | CUDA falls back to the CPU handler then. */
START_TEST(test_device_gpu_nodev)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t p = dev_params("k", &ringk_dev_test_count, NULL);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_DEVICE};
    ringk_kernel_t *k;

    if (ndevices > 0) {
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_PLACEMENT;
        p.placement   = ndevices;
    }
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -ENODEV);
    ck_assert_msg((strstr(logbuf, "no CUDA device") != NULL) ||
                  (strstr(logbuf, "no NVIDIA driver") != NULL) ||
                  (strstr(logbuf, "CUDA devices") != NULL), "log: %s", logbuf);
    cpu_count     = 0;
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_HANDLER;
    p.backends    = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
    p.handler     = cpu_handler;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_int_eq(st.device, RINGK_DEVICE_NONE);
    ck_assert_int_eq(ringk_send(ctx, NULL, "k", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    test_wait_u64(&cpu_count, 1, 30);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A result block in mapped memory: the host's address, and the device's in *dev_p. */
static ringk_dev_test_t *test_block(ringk_dev_test_t **dev_p)
{
    void *host, *dev;

    ck_assert_int_eq(cudaHostAlloc(&host, sizeof(ringk_dev_test_t), cudaHostAllocMapped), 0);
    ck_assert_int_eq(cudaHostGetDevicePointer(&dev, host, 0), 0);
    memset(host, 0, sizeof(ringk_dev_test_t));
    *dev_p = dev;
    return host;
}

/* Host threads' sends reach a GPU kernel in order; two GPU kernels forward into it device to
 * device; an event-driven GPU kernel is relaunched by its messages; and while they are resident,
 * more device kernels are created and destroyed (each call bounded by the test's timeout). */
START_TEST(test_device_gpu_scenarios)
{
    static const char *const to_sink[] = {"sink", NULL};
    enum { N = 2000 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t *ts_d, *tf_d, *tx_d;
    ringk_dev_test_t *ts = test_block(&ts_d), *tf = test_block(&tf_d), *tx = test_block(&tx_d);
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, ts_d);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *sink, *fwd, *extra;
    uint32_t i, v[2];

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), 0);
    p = dev_params("fwd", &ringk_dev_test_forward, tf_d);
    p.field_mask    |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MODE |
                       RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS;
    p.publishes_to   = to_sink;
    p.mode           = RINGK_MODE_EVENT_DRIVEN;
    p.max_iterations = 1000;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &fwd), 0);
    for (i = 0; i < N; i++) {
        v[0] = i % 2;
        v[1] = i / 2;
        ck_assert_int_eq(ringk_send(ctx, NULL, (i % 2) ? "fwd" : "sink", RINGK_MSG_DATA, v,
                                    sizeof(v), RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&ts->count, N, 60);
    ck_assert_uint_eq(ts->out_of_order, 0);
    ck_assert_uint_eq(tf->count, N / 2);
    ck_assert_int_eq(tf->last_error, 0);
    ck_assert_int_eq(ringk_kernel_stats_query(fwd, &st), 0);
    ck_assert_int_eq(st.device, 0);
    ck_assert_uint_eq(st.sent_direct, N / 2);
    /* resident kernels run: create and destroy another (slabs taken before they ran) */
    p = dev_params("extra", &ringk_dev_test_count, tx_d);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &extra), 0);
    v[0] = 0;
    v[1] = 0;
    ck_assert_int_eq(ringk_send(ctx, NULL, "extra", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&tx->count, 1, 30);
    ck_assert_int_eq(ringk_kernel_destroy(extra), 0);
    ck_assert_ptr_null(strstr(logbuf, "allocated while"));
    ringk_ctx_destroy(ctx);
}
END_TEST

static uint64_t pongs;

static int ping_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint32_t v[2];

    memcpy(v, ringk_msg_payload(msg), sizeof(v));
    if (++v[1] < 1000) {
        ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_DATA, v, sizeof(v),
                         RINGK_WAIT_FOREVER);
    }
    __atomic_add_fetch(&pongs, 1, __ATOMIC_RELEASE);
    return 0;
}

/* A CPU kernel and a GPU kernel bounce a message 1000 times. */
START_TEST(test_device_gpu_pingpong)
{
    static const char *const to_echo[] = {"echo", NULL}, *const to_ping[] = {"ping", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t *t_d, *t = test_block(&t_d);
    ringk_kernel_params_t p = dev_params("echo", &ringk_dev_test_echo, t_d);
    ringk_kernel_params_t cp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "ping", .handler = ping_handler, .publishes_to = to_echo
    };
    ringk_kernel_t *echo, *ping;
    uint32_t v[2] = {0, 0};

    pongs = 0;
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_ping;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &echo), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &cp, &ping), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "echo", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&pongs, 1000, 60);
    ck_assert_int_eq(t->last_error, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("device_gpu");
    TCase *tc = tcase_create("device_gpu");

    if (cudaGetDeviceCount(&ndevices) != cudaSuccess) {
        ndevices = 0;
    }
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_device_gpu_nodev);
    if (ndevices > 0) {
        tcase_add_test(tc, test_device_gpu_scenarios);
        tcase_add_test(tc, test_device_gpu_pingpong);
    } else {
        printf("# no CUDA device: the GPU scenarios are not run (test_device runs them on the "
               "emulated device)\n");
    }
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
#else
int main(void)
{
    return test_skip_all("built without CUDA (configure --without-cuda or no CUDA Toolkit)");
}
#endif
