/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the device executor with the kernels of test/kernels/ringk_dev_test.cu compiled by nvcc.
 * Without a GPU: a CUDA-only kernel is refused with -ENODEV and the reason, CPU | CUDA runs on
 * the CPU. Where the NVIDIA driver shows a GPU (nvidia-smi -L, /proc/driver/nvidia/gpus) that
 * CUDA cannot use, or the build has no CUDA, the binary fails and says why: it never passes by
 * running nothing. With a GPU (TCase "gpu"): the emulated-device scenarios of test_device again
 * on the device (every message once in order, CPU <-> GPU ping-pong, GPU-to-GPU sends into a
 * persistent and into an event-driven kernel that parks between bursts, publish, barrier waits,
 * ringk_dev_recv, terminate by message, deactivate / activate), each ending with nothing logged
 * at ERROR and no failed send, bad cell or failed handler call; and the runtime's and the
 * transport's CUDA-touching calls (kernel create and destroy; copies, IPC export, and the import
 * of another process's device memory) made while resident kernels run, each with a bounded
 * wait. RINGK_DEVICE_GPU_ONLY=name[,name...] runs only those GPU tests. */
#include "ringk_config.h"
#include "test_log.h"
#include "test_util.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>

/* The GPUs the NVIDIA driver shows, asked without CUDA: up to 512 bytes naming the first. */
static char listed[512];
static int  nlisted;

/* Counts the GPUs that 'nvidia-smi -L' lists (at most 20 s), or else the entries of
 * /proc/driver/nvidia/gpus (one per GPU the driver holds), and names the first in @a list. */
static int gpus_listed(char *list, size_t len)
{
    FILE *f = popen("timeout 20 nvidia-smi -L 2>/dev/null", "r");
    char line[256];
    glob_t g;
    int n = 0;

    list[0] = '\0';
    while ((f != NULL) && (fgets(line, sizeof(line), f) != NULL)) {
        if (strncmp(line, "GPU ", 4) == 0) {
            line[strcspn(line, "\n")] = '\0';
            if (n++ == 0) {
                snprintf(list, len, "nvidia-smi -L: %s", line);
            }
        }
    }
    if (f != NULL) {
        pclose(f);
    }
    if ((n == 0) && (glob("/proc/driver/nvidia/gpus/*", 0, NULL, &g) == 0)) {
        n = (int)g.gl_pathc;
        snprintf(list, len, "%s", g.gl_pathv[0]);
        globfree(&g);
    }
    return n;
}

#ifdef HAVE_CUDA
#define TEST_DEVICE_LOG_LEVEL RINGK_LOG_INFO
#include "core/ringk_cuda.h"
#include <ringk/api/ringk_peer.h>
#include "test_device_util.h"
#include "test_device.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int  ndevices;
static char cuda_why[256]; /* why CUDA found no device */

/* Whether the driver's library can be loaded (a machine with an NVIDIA driver has it). */
static int libcuda_loadable(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY);

    if (lib != NULL) {
        dlclose(lib);
    }
    return lib != NULL;
}

/* ---- what every GPU scenario checks -------------------------------------------------------- */

/* The lines logged at RINGK_LOG_ERROR, kept apart from logbuf (which also gets INFO lines). */
static char errbuf[4096];

static void gpu_log_hook(void *arg, int level, const char *message)
{
    if (level == RINGK_LOG_ERROR) {
        test_log_append(errbuf, sizeof(errbuf), &log_mu, message);
    }
    log_hook(arg, level, message);
}

/* A context whose log goes to logbuf, its ERROR lines also to errbuf. */
static ringk_ctx_t *gpu_ctx_new(void)
{
    ringk_ctx_params_t p = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = gpu_log_hook};
    ringk_ctx_t *ctx;

    logbuf[0] = '\0';
    errbuf[0] = '\0';
    ck_assert_int_eq(ringk_ctx_create(&p, &ctx), 0);
    return ctx;
}


/* Waits up to @a seconds for kernel @a k to reach @a state; fails the test naming both. */
static void wait_state(ringk_kernel_t *k, ringk_kernel_state_t state, double seconds)
{
    double deadline = test_now_s() + seconds;

    while (stats_of(k).state != state) {
        ck_assert_msg(test_now_s() < deadline, "kernel '%s': state %d after %.0f s, not %d",
                      ringk_kernel_name(k), stats_of(k).state, seconds, state);
        usleep(100);
    }
}

/* The end of every GPU scenario, before its context is destroyed: none of kernels @a ks
 * counted a send or publish the proxy could not make, a malformed inbox cell or a handler call
 * that failed. */
static void assert_no_errors(ringk_kernel_t *const *ks, int n)
{
    ringk_kernel_stats_t st;
    int i;

    for (i = 0; i < n; i++) {
        st = stats_of(ks[i]);
        ck_assert_msg((st.send_failed == 0) && (st.bad_cells == 0) && (st.handler_errors == 0),
                      "kernel '%s': send_failed %llu, bad_cells %llu, handler_errors %llu; "
                      "log: %s", ringk_kernel_name(ks[i]), (unsigned long long)st.send_failed,
                      (unsigned long long)st.bad_cells, (unsigned long long)st.handler_errors,
                      logbuf);
    }
}

/* ... and after it: nothing was logged at ERROR, and no launch was left running (the destroy
 * waits for each launch at most 10 s and says "still runs" of one that did not return). */
static void assert_log_clean(void)
{
    ck_assert_msg(errbuf[0] == '\0', "logged at ERROR: %s", errbuf);
    ck_assert_msg(strstr(logbuf, "still run") == NULL, "a launch did not return: %s", logbuf);
}

/* How long a send of the test's own thread waits for room, in ms: a kernel that stopped taking
 * messages fails the test at that send, not at the test's timeout. */
enum { SEND_WAIT_MS = 10000 };


/* Whether libringk said, in this context's log, that device kernels of CUDA device @a from
 * send straight into the inboxes of CUDA device @a to (at the setup of either device). */
static int peer_said_direct(int from, int to)
{
    char line[128];

    snprintf(line, sizeof(line), "CUDA device %d: device kernels of CUDA device %d send into "
             "its inboxes directly", to, from);
    return strstr(logbuf, line) != NULL;
}

/* The scope of the atomics of device inboxes made now on CUDA device @a dev: system once a
 * device kernel of another GPU may write them (libringk says so at a device's setup), else
 * device. */
static uint32_t inbox_scope(int dev)
{
    int j;

    for (j = 0; j < ndevices; j++) {
        if ((j != dev) && peer_said_direct(j, dev)) {
            return RINGK_RING_SCOPE_SYSTEM;
        }
    }
    return RINGK_RING_SCOPE_DEVICE;
}

/* A result block in mapped memory: the host's address, and the device's in *dev_p. Pinned
 * allocations can wait for resident kernels: every test makes its blocks before its first
 * kernel. */
static ringk_dev_test_t *test_block(ringk_dev_test_t **dev_p)
{
    void *host, *dev;

    ck_assert_int_eq(cudaHostAlloc(&host, sizeof(ringk_dev_test_t),
                                   cudaHostAllocMapped | cudaHostAllocPortable), 0);
    ck_assert_int_eq(cudaHostGetDevicePointer(&dev, host, 0), 0);
    memset(host, 0, sizeof(ringk_dev_test_t));
    *dev_p = dev;
    return host;
}

/* ---- without a GPU -------------------------------------------------------------------------- */

static uint64_t cpu_count;

static int cpu_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_add_fetch(&cpu_count, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Where the driver shows a GPU, CUDA must find it: a driver older than the CUDA runtime, or
 * one that lost its GPU, would otherwise pass this binary by running none of the GPU tests. */
START_TEST(test_device_gpu_usable)
{
    ck_assert_msg(ndevices > 0, "the NVIDIA driver shows %d GPU(s) (%s) but CUDA finds no "
                  "device: %s", nlisted, listed, cuda_why);
}
END_TEST

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
    ck_assert_msg(ringk_kernel_create(ctx, &p, &k) == -ENODEV, "log: %s", logbuf);
    ck_assert_msg((strstr(logbuf, "no CUDA device") != NULL) ||
                  (strstr(logbuf, "no NVIDIA driver") != NULL) ||
                  (strstr(logbuf, "CUDA devices") != NULL), "log: %s", logbuf);
    if ((access("/proc/driver/nvidia/version", R_OK) != 0) && !libcuda_loadable()) {
        /* no driver at all: said so, not as CUDA's "driver version is insufficient" */
        ck_assert_msg((strstr(logbuf, "no NVIDIA driver (libcuda.so.1 not found)") != NULL) &&
                      (strstr(logbuf, "insufficient") == NULL), "log: %s", logbuf);
    }
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

/* The arg check's rules on CUDA's account of a pointer (no GPU needed): managed memory and the
 * kernel's device's own memory pass, another device's does not; pinned memory passes at the
 * address the device uses (at the host's only where the device reads that too), not where it
 * is not mapped for the device; other host memory only with pageable memory access; an
 * address in no mapping of the process is no memory at all (an integer). */
START_TEST(test_device_gpu_arg_rules)
{
    static int word;
    const void *p = &word, *q = (const void*)((uintptr_t)&word + 4096);
    char why[256];
    int local = 0;

#define JUDGE(dev, type, owner, dp, pageable, host_ptr) \
    ringk_dev_test_judge(dev, p, type, owner, dp, pageable, host_ptr, why, sizeof(why))
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeManaged, 0, p, 0, 0), 1);
    ck_assert_int_eq(JUDGE(1, cudaMemoryTypeDevice, 1, p, 0, 0), 1);
    ck_assert_int_eq(JUDGE(1, cudaMemoryTypeDevice, 0, p, 1, 1), 0);
    ck_assert_msg(strstr(why, "is memory of CUDA device 0, not of device 1") != NULL, "%s", why);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeHost, 0, p, 0, 0), 1);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeHost, 0, q, 1, 0), 0);
    ck_assert_msg(strstr(why, "pinned host memory at its host address: CUDA device 0 reads it "
                              "at") != NULL, "%s", why);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeHost, 0, q, 0, 1), 1);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeHost, 0, NULL, 1, 1), 0);
    ck_assert_msg(strstr(why, "not mapped for CUDA device 0") != NULL, "%s", why);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeUnregistered, -2, NULL, 0, 1), 0);
    ck_assert_msg(strstr(why, "host memory that CUDA device 0 cannot read") != NULL, "%s", why);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeUnregistered, -2, NULL, 1, 0), 1);
#undef JUDGE
    ck_assert_int_eq(ringk_dev_test_mapped_here(&word), 1);
    ck_assert_int_eq(ringk_dev_test_mapped_here(&local), 1);
    ck_assert_int_eq(ringk_dev_test_mapped_here((const void*)(uintptr_t)42), 0);
}
END_TEST

/* ---- on a GPU ------------------------------------------------------------------------------- */

/* A kernel's arg in ordinary host memory: refused with -EFAULT and the reason where the GPU has
 * no pageable memory access (a fault would end the context), taken and used where it has;
 * mapped memory at its device address is taken either way. */
START_TEST(test_device_gpu_arg)
{
    static ringk_dev_test_t plain;
    ringk_dev_test_t *t_d, *t = test_block(&t_d);
    ringk_ctx_t *ctx = gpu_ctx_new();
    ringk_kernel_params_t p;
    ringk_kernel_t *k[2];
    uint32_t v[2] = {0, 0}; /* producer 0's first message */
    int pageable = 0, n = 0;

    ck_assert_int_eq(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0),
                     cudaSuccess);
    printf("# CUDA device 0: pageable memory access %d\n", pageable);
    memset(&plain, 0, sizeof(plain));
    p = dev_params("plain", &ringk_dev_test_count, &plain);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), pageable ? 0 : -EFAULT);
    if (pageable) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "plain", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
        test_wait_u64(&plain.count, 1, 30);
        n++;
    } else {
        ck_assert_msg(strstr(logbuf, "kernel 'plain' (CUDA backend only): arg 0x") != NULL,
                      "log: %s", logbuf);
        errbuf[0] = '\0'; /* that refusal is logged at ERROR, on purpose */
    }
    p = dev_params("mapped", &ringk_dev_test_count, t_d);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[n]), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "mapped", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&t->count, 1, 30);
    assert_no_errors(k, n + 1);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
    cudaFreeHost(t);
}
END_TEST

/* Host threads' sends reach a GPU kernel in order; two GPU kernels forward into it device to
 * device; an event-driven GPU kernel is relaunched by its messages; and while they are resident,
 * more device kernels are created and destroyed (each call bounded by the test's timeout). */
START_TEST(test_device_gpu_scenarios)
{
    static const char *const to_sink[] = {"sink", NULL};
    enum { N = 2000 };
    ringk_dev_test_t *ts_d, *tf_d, *tx_d;
    ringk_dev_test_t *ts = test_block(&ts_d), *tf = test_block(&tf_d), *tx = test_block(&tx_d);
    ringk_ctx_t *ctx = gpu_ctx_new();
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, ts_d);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k[2], *extra;
    uint32_t i, v[2];

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), 0);
    p = dev_params("fwd", &ringk_dev_test_forward, tf_d);
    p.field_mask    |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MODE |
                       RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS;
    p.publishes_to   = to_sink;
    p.mode           = RINGK_MODE_EVENT_DRIVEN;
    p.max_iterations = 1000;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[1]), 0);
    for (i = 0; i < N; i++) {
        v[0] = i % 2;
        v[1] = i / 2;
        ck_assert_int_eq(ringk_send(ctx, NULL, (i % 2) ? "fwd" : "sink", RINGK_MSG_DATA, v,
                                    sizeof(v), SEND_WAIT_MS), 0);
    }
    test_wait_u64(&ts->count, N, 60);
    ck_assert_uint_eq(ts->out_of_order, 0);
    ck_assert_uint_eq(ts->ring_scopes, inbox_scope(0) | (RINGK_RING_SCOPE_SYSTEM << 8) |
                                       (RINGK_RING_SCOPE_SYSTEM << 16));
    /* the host's messages came as the staged copy in device memory, the forwarded ones not */
    ck_assert_uint_eq(ts->staged, N / 2);
    /* messages of several cells: the staged copy's first cell and the rest, byte for byte */
    {
        uint8_t big[1003];
        uint64_t big_sum = 0;

        memcpy(big, (uint32_t[2]){2, 0}, 8); /* producer 2, its messages 0..2 */
        for (i = 8; i < sizeof(big); i++) {
            big[i]   = (uint8_t)(i * 13 + 5);
            big_sum += big[i];
        }
        for (i = 0; i < 3; i++) {
            ((uint32_t*)big)[1] = i;
            ck_assert_int_eq(ringk_send(ctx, NULL, "sink", RINGK_MSG_DATA, big, sizeof(big),
                                        SEND_WAIT_MS), 0);
        }
        test_wait_u64(&ts->count, N + 3, 60);
        ck_assert_uint_eq(ts->tail_sum, 3 * big_sum);
        ck_assert_uint_eq(ts->staged, N / 2 + 3);
        ck_assert_uint_eq(ts->out_of_order, 0);
    }
    /* fwd counts a message after its send returned: the sink may have counted it first */
    test_wait_u64(&tf->count, N / 2, 30);
    ck_assert_int_eq(tf->last_error, 0);
    for (i = 0; i < 30000; i++) {
        ck_assert_int_eq(ringk_kernel_stats_query(k[1], &st), 0);
        if (st.sent_direct == N / 2) {
            break;
        }
        usleep(1000);
    }
    ck_assert_int_eq(st.device, 0);
    ck_assert_uint_eq(st.sent_direct, N / 2);
    /* resident kernels run: create and destroy another, twice (its memory comes from the slabs
     * allocated before they ran, the second time the first one's memory again); a create or
     * destroy that waited for them would hang here, and the test's timeout fails it */
    for (i = 0; i < 2; i++) {
        p = dev_params("extra", &ringk_dev_test_count, tx_d);
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &extra), 0);
        v[0] = 0;
        v[1] = i;
        ck_assert_int_eq(ringk_send(ctx, NULL, "extra", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
        test_wait_u64(&tx->count, i + 1, 30);
        assert_no_errors(&extra, 1);
        ck_assert_int_eq(ringk_kernel_destroy(extra), 0);
    }
    ck_assert_uint_eq(tx->out_of_order, 0);
    assert_no_errors(k, 2);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
}
END_TEST

/* A device sender wakes an event-driven device kernel straight through its inbox (the sender's
 * compare-and-swap on the target's 'idle', its doorbell, the proxy's relaunch): "fwd" sends
 * bursts of 1 to 16 messages into "sink", each burst once "sink" has parked again. Every
 * fourth burst comes 20 ms after the park showed, when its launch has returned: it must be
 * relaunched; the others come 0 to 300 us after, when the loop's last look at its inboxes and
 * its return race the sender (the park's take-back). Every message arrives once, in order, all
 * device to device. */
START_TEST(test_device_gpu_event_wake)
{
    static const char *const to_sink[] = {"sink", NULL};
    enum { ROUNDS = 200 };
    ringk_dev_test_t *ts_d, *tf_d;
    ringk_dev_test_t *ts = test_block(&ts_d), *tf = test_block(&tf_d);
    ringk_ctx_t *ctx = gpu_ctx_new();
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, ts_d);
    ringk_kernel_t *k[2];
    uint64_t launches, sent = 0;
    uint32_t r, burst[3];

    p.field_mask    |= RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS;
    p.mode           = RINGK_MODE_EVENT_DRIVEN;
    p.max_iterations = 50;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), 0);
    p = dev_params("fwd", &ringk_dev_test_forward, tf_d);
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_sink;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[1]), 0);
    for (r = 0; r < ROUNDS; r++) {
        double deadline = test_now_s() + 10;

        while (!stats_of(k[0]).parked) {
            ck_assert_msg(test_now_s() < deadline, "round %u: 'sink' did not park in 10 s", r);
            usleep(100);
        }
        if (r % 4 == 0) {
            /* 'parked' is set just before the loop looks at its inboxes a last time: past
             * that look, the launch has returned */
            usleep(20000);
            ck_assert_int_eq(stats_of(k[0]).parked, 1);
        } else {
            usleep((r % 7) * 50);
        }
        launches = stats_of(k[0]).launches;
        burst[0] = 1; /* producer 1, its messages sent.. */
        burst[1] = (uint32_t)sent;
        burst[2] = 1 + r % 16;
        ck_assert_int_eq(ringk_send(ctx, NULL, "fwd", RINGK_MSG_DATA, burst, sizeof(burst),
                                    1000), 0);
        sent += burst[2];
        test_wait_u64(&ts->count, sent, 10);
        if (r % 4 == 0) {
            ck_assert_msg(stats_of(k[0]).launches > launches, "round %u: handled without a "
                          "relaunch after its launch returned", r);
        }
    }
    test_wait_u64(&tf->count, ROUNDS, 10);
    ck_assert_int_eq(tf->last_error, 0);
    ck_assert_uint_eq(ts->out_of_order, 0);
    ck_assert_uint_eq(ts->bad, 0);
    ck_assert_uint_eq(ts->next[1], sent);
    ck_assert_uint_eq(STATS_AT(k[1], sent_direct, sent).sent_direct, sent);
    ck_assert_uint_eq(STATS_AT(k[0], msgs_in, sent).msgs_in, sent);
    ck_assert_uint_gt(stats_of(k[0]).launches, ROUNDS / 4);
    assert_no_errors(k, 2);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
}
END_TEST

/* A GPU kernel publishes to a topic that two CPU kernels and a GPU kernel subscribe to: each
 * gets every message once (the GPU subscriber in order). */
START_TEST(test_device_gpu_publish)
{
    ringk_dev_test_t *tp_d, *td_d;
    ringk_dev_test_t *tp = test_block(&tp_d), *td = test_block(&td_d);
    ringk_ctx_t *ctx = gpu_ctx_new();
    ringk_kernel_t *k[4];

    fanout_run(ctx, tp_d, tp, td_d, td, k);
    assert_no_errors(k, 4);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
}
END_TEST

/* A named barrier across a CPU kernel and two GPU kernels: five generations pass with every
 * participant; then, with the CPU kernel away, a GPU kernel's bounded wait times out; and a
 * wait without a bound does not hold a terminate (the kernel leaves with -ECANCELED). */
START_TEST(test_device_gpu_barrier)
{
    ringk_dev_test_t *t_d[2], *t[2];
    ringk_kernel_t *k[3];
    ringk_ctx_t *ctx;

    t[0] = test_block(&t_d[0]);
    t[1] = test_block(&t_d[1]);
    ctx  = gpu_ctx_new();
    barrier_run(ctx, t_d, t, k);
    assert_no_errors(k, 3);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
}
END_TEST

/* ringk_dev_recv from a GPU handler: groups of four taken in order with a bound, the
 * documented failures (nothing queued, a bound that passes, a NULL buffer, a buffer too small
 * for the next message, which stays first), and a handler that takes every message the host
 * sent (copies: it holds none of the host ingress ring's cells) until its bound passes; a
 * terminate its recv takes ends the kernel; every message counted once. */
START_TEST(test_device_gpu_recv)
{
    ringk_dev_test_t *t_d, *t = test_block(&t_d);
    ringk_ctx_t *ctx = gpu_ctx_new();
    ringk_kernel_t *k = recv_run(ctx, t_d, t);

    wait_state(k, RINGK_KERNEL_TERMINATED, 10);
    assert_no_errors(&k, 1);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
}
END_TEST

/* A terminate message ends a GPU kernel after what came before it. */
START_TEST(test_device_gpu_terminate_message)
{
    ringk_dev_test_t *t_d, *t = test_block(&t_d);
    ringk_ctx_t *ctx = gpu_ctx_new();
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, t_d);
    ringk_kernel_t *k;
    uint32_t i;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 100; i++) {
        ck_assert_int_eq(host_send(ctx, "count", 0, i, SEND_WAIT_MS), 0);
    }
    ck_assert_int_eq(ringk_send(ctx, NULL, "count", RINGK_MSG_TERMINATE, NULL, 0, 1000), 0);
    wait_state(k, RINGK_KERNEL_TERMINATED, 10);
    ck_assert_uint_eq(__atomic_load_n(&t->count, __ATOMIC_ACQUIRE), 100);
    ck_assert_uint_eq(t->out_of_order, 0);
    ck_assert_uint_eq(stats_of(k).msgs_in, 101); /* the terminate counts, as on the CPU */
    ck_assert_int_eq(host_send(ctx, "count", 0, 100, RINGK_WAIT_NONE), -EPIPE);
    assert_no_errors(&k, 1);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
}
END_TEST

/* A GPU kernel made inactive takes nothing: sends that must not wait fill its inbox and are
 * then refused with -EAGAIN, a bounded wait times out; activated, it handles exactly what was
 * accepted. Deactivated while it runs, messages queue; activated again, it takes them;
 * deactivated once more, terminate drains what queued. */
START_TEST(test_device_gpu_lifecycle)
{
    ringk_dev_test_t *t_d, *t = test_block(&t_d);
    ringk_ctx_t *ctx = gpu_ctx_new();
    ringk_kernel_t *k = lifecycle_run(ctx, dev_params("count", &ringk_dev_test_count, t_d), t, 2);

    assert_no_errors(&k, 1);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
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
    ringk_dev_test_t *t_d, *t = test_block(&t_d);
    ringk_ctx_t *ctx = gpu_ctx_new();
    ringk_kernel_params_t p = dev_params("echo", &ringk_dev_test_echo, t_d);
    ringk_kernel_params_t cp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "ping", .handler = ping_handler, .publishes_to = to_echo
    };
    ringk_kernel_t *k[2];
    uint32_t v[2] = {0, 0};

    pongs = 0;
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_ping;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &cp, &k[1]), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "echo", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&pongs, 1000, 60);
    ck_assert_int_eq(t->last_error, 0);
    ck_assert_uint_eq(STATS_AT(k[0], msgs_out, 1000).msgs_out, 1000);
    /* the device clock's physical part (%globaltimer plus the launch's offset) is the host's
     * wall clock, within the launch's latency */
    {
        struct timespec now;
        long long dev_ms = (long long)(__atomic_load_n(&t->hlc, __ATOMIC_ACQUIRE) >> 16);

        clock_gettime(CLOCK_REALTIME, &now);
        ck_assert_msg(llabs(dev_ms - ((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000)) <
                      2000, "the device clock reads %lld ms since the epoch, the host %lld",
                      dev_ms, (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
    }
    assert_no_errors(k, 2);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
}
END_TEST

/* Device kernels on two GPUs (SKIP below two), in each direction: "fwd" on one GPU forwards
 * bursts the host sends it into "sink" on the other, which is event-driven and parks between
 * bursts (so the sender's wake crosses too). The test uses both GPUs before its first kernel
 * (as a program that pairs them does), so where the pair has peer access (CUDA and the
 * topology agree) with native atomics, libringk must say at the sink's setup that the
 * forwarder's GPU sends directly, and every forwarded message goes device to device
 * (sent_direct) into an inbox of system scope; else all through the host proxy
 * (RINGK_DEVICE_PEER=0 too). Every message arrives once, in order. */
START_TEST(test_device_gpu_peer)
{
    static const char *const to_sink[] = {"sink", NULL};
    enum { BURSTS = 120, BURST = 16 };
    ringk_dev_test_t *t_d[4], *t[4];
    ringk_kernel_params_t p;
    const char *env = getenv("RINGK_DEVICE_PEER");
    ringk_peer_info_t info;
    ringk_kernel_t *k[2];
    ringk_ctx_t *ctx;
    uint32_t b, burst[3];
    int i, dst, can, usable, direct;

    for (i = 1; i >= 0; i--) { /* a context on each GPU, device 0 current after */
        ck_assert_int_eq(cudaSetDevice(i), 0);
        ck_assert_int_eq(cudaFree(NULL), 0);
    }
    for (i = 0; i < 4; i++) {
        t[i] = test_block(&t_d[i]);
    }
    for (dst = 0; dst < 2; dst++) { /* the sink's device; the forwarder is on the other */
        ringk_dev_test_t *sink = t[2 * dst], *fwd = t[2 * dst + 1];

        can    = 0;
        usable = (ringk_peer_can_access(1 - dst, dst, &info) == 0) && info.can_access &&
                 (info.native_atomics == 1) &&
                 (cudaDeviceCanAccessPeer(&can, 1 - dst, dst) == 0) && can &&
                 ((env == NULL) || (strcmp(env, "0") != 0));
        ctx = gpu_ctx_new();
        p = dev_params("sink", &ringk_dev_test_count, t_d[2 * dst]);
        p.field_mask    |= RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_PLACEMENT |
                           RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS;
        p.mode           = RINGK_MODE_EVENT_DRIVEN;
        p.max_iterations = 50;
        p.placement      = dst;
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), 0);
        /* said at the sink's setup, before any kernel of the forwarder's GPU ran */
        direct = peer_said_direct(1 - dst, dst);
        ck_assert_msg(direct == usable, "GPU%d -> GPU%d: peer access %d, native atomics %d, "
                      "path %s (%s): libringk %s; log: %s", 1 - dst, dst, can,
                      info.native_atomics, ringk_peer_path_name(info.path), info.reason,
                      direct ? "sends directly" : "does not send directly", logbuf);
        printf("# GPU%d -> GPU%d: %s (path %s, native atomics %d: %s)\n", 1 - dst, dst,
               direct ? "device to device" : "through the host",
               ringk_peer_path_name(info.path), info.native_atomics, info.reason);
        p = dev_params("fwd", &ringk_dev_test_forward, t_d[2 * dst + 1]);
        p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_PLACEMENT;
        p.publishes_to = to_sink;
        p.placement    = 1 - dst;
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[1]), 0);
        for (b = 0; b < BURSTS; b++) {
            if (b % 10 == 9) {
                usleep(20000); /* "sink" parks: the next burst's first send wakes it */
            }
            burst[0] = 1;
            burst[1] = b * BURST;
            burst[2] = BURST;
            ck_assert_int_eq(ringk_send(ctx, NULL, "fwd", RINGK_MSG_DATA, burst, sizeof(burst),
                                        SEND_WAIT_MS), 0);
        }
        test_wait_u64(&sink->count, BURSTS * BURST, 60);
        test_wait_u64(&fwd->count, BURSTS, 10);
        ck_assert_int_eq(fwd->last_error, 0);
        ck_assert_uint_eq(sink->out_of_order, 0);
        ck_assert_uint_eq(sink->bad, 0);
        ck_assert_uint_eq(sink->next[1], BURSTS * BURST);
        ck_assert_uint_eq(sink->ring_scopes & 0xff,
                          direct ? RINGK_RING_SCOPE_SYSTEM : inbox_scope(dst));
        ck_assert_uint_eq(STATS_AT(k[1], msgs_out, BURSTS * BURST).msgs_out, BURSTS * BURST);
        ck_assert_uint_eq(stats_of(k[1]).sent_direct, direct ? BURSTS * BURST : 0);
        ck_assert_int_eq(stats_of(k[0]).device, dst);
        ck_assert_int_eq(stats_of(k[1]).device, 1 - dst);
        assert_no_errors(k, 2);
        ringk_ctx_destroy(ctx);
        assert_log_clean();
    }
}
END_TEST

/* ---- no deadlock with resident kernels ------------------------------------------------------ */

enum { OP_COPY, OP_IPC_EXPORT, OP_IPC_OPEN, OP_IPC_CLOSE, OP_IPC_FLUSH, OP_STAGE, OP_CANARY };

typedef struct {
    int     op;
    void   *dst, *src;
    size_t  len;
    uint8_t handle[RINGK_CUDA_IPC_HANDLE_LEN];
    int     ret, done;
    char    why[160];
} cuda_call_t;

static void *call_main(void *arg)
{
    cuda_call_t *c = arg;
    uint64_t base, size;

    switch (c->op) {
    case OP_COPY:
        c->ret = ringk_cuda_copy(c->dst, c->src, c->len, c->why, sizeof(c->why));
        break;
    case OP_IPC_EXPORT:
        c->ret = ringk_cuda_ipc_export(c->src, c->handle, &base, &size, c->why, sizeof(c->why));
        break;
    case OP_IPC_OPEN: /* another process's allocation of c->len bytes, mapped to c->dst */
        c->ret = ringk_cuda_ipc_open(c->handle, c->len, &c->dst, c->why, sizeof(c->why));
        break;
    case OP_IPC_CLOSE:
        ringk_cuda_ipc_close(c->src);
        c->ret = 0;
        break;
    case OP_IPC_FLUSH: /* ret: how many mappings were unmapped */
        c->ret = (int)ringk_cuda_ipc_flush();
        break;
    case OP_STAGE: /* the transport's staging buffer: ret is 1 when it is pinned */
        c->dst = ringk_cuda_stage_get(c->len, &c->ret);
        break;
    case OP_CANARY: /* the P2P canary of device 0 with itself */
        c->ret = ringk_cuda_p2p_canary((const char*)c->handle, (const char*)c->handle, c->why,
                                       sizeof(c->why));
        break;
    }
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Makes @a c on a thread of its own and waits for it at most 10 s: a call that waits for the
 * resident kernels fails the test, naming itself (its thread is left behind). */
static int bounded_call(cuda_call_t *c, const char *what)
{
    struct timespec ts = {0, 1000000};
    pthread_t th;
    int i;

    c->done = 0;
    ck_assert_int_eq(pthread_create(&th, NULL, call_main, c), 0);
    for (i = 0; (i < 10000) && !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE); i++) {
        nanosleep(&ts, NULL);
    }
    ck_assert_msg(__atomic_load_n(&c->done, __ATOMIC_ACQUIRE), "%s did not return in 10 s with "
                  "resident kernels running", what);
    pthread_join(th, NULL);
    return c->ret;
}

enum { IPC_LEN = 1 << 20 }; /* bytes of the exporting process's allocation */

/* What the exporting process sends back: ringk_cuda_ipc_export's result for its allocation. */
typedef struct {
    int      ret;
    uint8_t  handle[RINGK_CUDA_IPC_HANDLE_LEN];
    uint64_t size;   /* of the allocation */
    uint64_t offset; /* of the pattern in it */
    char     why[160];
} ipc_export_t;

/* The pattern the exporting process writes: byte @a i of it. */
static uint8_t ipc_byte(size_t i)
{
    return (uint8_t)(i * 131 + 17);
}

/* The exporting process (a child forked before its parent used CUDA): IPC_LEN bytes of device
 * memory holding the pattern, exported; the result goes to @a res_fd, then it keeps the memory
 * until @a go_fd gives a byte or is closed, at most 120 s. Exits 0 when all went well. */
static void ipc_exporter(int res_fd, int go_fd)
{
    ipc_export_t e;
    uint8_t *host = malloc(IPC_LEN), *dev = NULL;
    uint64_t base = 0;
    cudaError_t err;
    size_t i;
    char c;

    alarm(120); /* never outlives a parent that hangs */
    memset(&e, 0, sizeof(e));
    for (i = 0; (host != NULL) && (i < IPC_LEN); i++) {
        host[i] = ipc_byte(i);
    }
    if (host == NULL) {
        e.ret = -ENOMEM;
        snprintf(e.why, sizeof(e.why), "malloc(%d) failed", IPC_LEN);
    } else if (((err = cudaMalloc((void**)&dev, IPC_LEN)) != cudaSuccess) ||
               ((err = cudaMemcpy(dev, host, IPC_LEN, cudaMemcpyHostToDevice)) != cudaSuccess)) {
        e.ret = -EIO;
        snprintf(e.why, sizeof(e.why), "cudaMalloc / cudaMemcpy: %s", cudaGetErrorString(err));
    } else {
        e.ret    = ringk_cuda_ipc_export(dev, e.handle, &base, &e.size, e.why, sizeof(e.why));
        e.offset = (uintptr_t)dev - base;
    }
    if (write(res_fd, &e, sizeof(e)) != sizeof(e)) {
        _exit(2);
    }
    if (read(go_fd, &c, 1) < 0) {
        e.ret = -EIO;
    }
    if (dev != NULL) {
        cudaFree(dev);
    }
    _exit((e.ret == 0) ? 0 : 1);
}

/* Reads @a len bytes from @a fd within @a ms milliseconds; 0, or -1 on EOF, error or timeout. */
static int read_bounded(int fd, void *buf, size_t len, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    double deadline = test_now_s() + ms / 1000.0;
    size_t got = 0;
    ssize_t n;

    while (got < len) {
        if ((test_now_s() > deadline) || (poll(&pfd, 1, 100) < 0)) {
            return -1;
        }
        if (pfd.revents == 0) {
            continue;
        }
        n = read(fd, (char*)buf + got, len - got);
        if (n <= 0) {
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

/* With persistent device kernels resident (one taking messages all along), the transport's
 * CUDA calls each return within a bound and do their work: copies host -> device, device ->
 * device and device -> pageable host, the IPC export of this process's device memory, and the
 * import of another process's (cudaIpcOpenMemHandle with lazy peer access), whose bytes are
 * copied out and compared before it is unmapped. The kernel still takes messages after. */
START_TEST(test_device_gpu_no_deadlock)
{
    enum { LEN = 1 << 20 };
    int res[2], go[2], status = 0, i;
    ringk_dev_test_t *t_d, *t;
    ringk_ctx_t *ctx;
    ringk_kernel_params_t p;
    ringk_kernel_t *k[2];
    uint8_t *dev_a, *dev_b, *pinned, *pageable = malloc(LEN);
    void *mapped;
    ipc_export_t e;
    cuda_call_t c;
    uint32_t v[2] = {0, 0};
    pid_t child, w;

    /* the exporting process first: CUDA in a forked child of a process that used it is
     * undefined (this test's process has not, unless CK_FORK=no ran others before it) */
    ck_assert_msg(ringk_cuda_ctx_exists(0) != 1, "CUDA is in use in this process already: run "
                  "this test in a process of its own (CK_FORK unset)");
    ck_assert_int_eq(pipe(res), 0);
    ck_assert_int_eq(pipe(go), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        close(res[0]);
        close(go[1]);
        ipc_exporter(res[1], go[0]);
    }
    close(res[1]);
    close(go[0]);
    ck_assert_msg(read_bounded(res[0], &e, sizeof(e), 30000) == 0, "the exporting process said "
                  "nothing in 30 s");
    ck_assert_msg(e.ret == 0, "the exporting process: %s", e.why);
    ck_assert_uint_ge(e.size, e.offset + IPC_LEN);

    /* every buffer before any kernel runs */
    t = test_block(&t_d);
    ck_assert_int_eq(cudaMalloc((void**)&dev_a, LEN), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void**)&dev_b, LEN), cudaSuccess);
    ck_assert_int_eq(cudaMallocHost((void**)&pinned, LEN), cudaSuccess);
    ck_assert_ptr_nonnull(pageable);
    for (i = 0; i < LEN; i++) {
        pinned[i] = (uint8_t)(i * 7 + 1);
    }
    ctx = gpu_ctx_new();
    p   = dev_params("sink", &ringk_dev_test_count, t_d);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), 0);
    p = dev_params("other", &ringk_dev_test_count, NULL);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[1]), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "sink", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&t->count, 1, 30); /* resident and taking messages */

    /* what the transport asks before its calls that would wait for the device: the staging
     * buffer is pageable, the canary is not run */
    ck_assert_int_eq(ringk_device_kernels(0), 2);
    memset(&c, 0, sizeof(c));
    c.op = OP_STAGE; c.len = LEN;
    ck_assert_msg(bounded_call(&c, "staging buffer (ringk_cuda_stage_get)") == 0, "pinned "
                  "while device kernels are resident");
    ck_assert_ptr_nonnull(c.dst);
    ringk_cuda_stage_put(c.dst, LEN, 0);
    memset(&c, 0, sizeof(c));
    c.op = OP_CANARY;
    ck_assert_int_eq(cudaDeviceGetPCIBusId((char*)c.handle, sizeof(c.handle), 0), cudaSuccess);
    ck_assert_int_eq(bounded_call(&c, "P2P canary (ringk_cuda_p2p_canary)"), -EBUSY);

    memset(&c, 0, sizeof(c));
    c.op = OP_COPY; c.dst = dev_a; c.src = pinned; c.len = LEN;
    ck_assert_msg(bounded_call(&c, "copy host -> device (ringk_cuda_copy)") == 0, "%s", c.why);
    c.op = OP_COPY; c.dst = dev_b; c.src = dev_a; c.len = LEN;
    ck_assert_msg(bounded_call(&c, "copy device -> same device (ringk_cuda_copy)") == 0, "%s",
                  c.why);
    c.op = OP_COPY; c.dst = pageable; c.src = dev_b; c.len = LEN;
    ck_assert_msg(bounded_call(&c, "copy device -> pageable host (ringk_cuda_copy)") == 0, "%s",
                  c.why);
    ck_assert_int_eq(memcmp(pageable, pinned, LEN), 0);
    memset(&c, 0, sizeof(c));
    c.op = OP_IPC_EXPORT; c.src = dev_a;
    ck_assert_msg(bounded_call(&c, "IPC export (ringk_cuda_ipc_export)") == 0, "%s", c.why);

    /* the other process's memory: mapped, read, unmapped */
    memset(&c, 0, sizeof(c));
    memcpy(c.handle, e.handle, sizeof(e.handle));
    c.op = OP_IPC_OPEN; c.len = e.size;
    ck_assert_msg(bounded_call(&c, "IPC open of another process's memory (ringk_cuda_ipc_open)")
                  == 0, "%s", c.why);
    mapped = c.dst;
    memset(pageable, 0, LEN);
    c.op = OP_COPY; c.dst = pageable; c.src = (uint8_t*)mapped + e.offset; c.len = IPC_LEN;
    ck_assert_msg(bounded_call(&c, "copy from another process's memory (ringk_cuda_copy)") == 0,
                  "%s", c.why);
    for (i = 0; (i < IPC_LEN) && (pageable[i] == ipc_byte(i)); i++) {
    }
    ck_assert_msg(i == IPC_LEN, "byte %d of the other process's memory: %u, not %u", i,
                  pageable[i], ipc_byte(i));
    /* unmapping waits for the device's work: kept for when no kernel is resident */
    c.op = OP_IPC_CLOSE; c.src = mapped;
    bounded_call(&c, "IPC close (ringk_cuda_ipc_close)");
    ck_assert_uint_eq(ringk_cuda_ipc_deferred(), 1);

    for (i = 1; i < 100; i++) { /* the kernel kept running through all of it */
        v[1] = i;
        ck_assert_int_eq(ringk_send(ctx, NULL, "sink", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    }
    test_wait_u64(&t->count, 100, 30);
    ck_assert_uint_eq(t->out_of_order, 0);
    assert_no_errors(k, 2);
    ringk_ctx_destroy(ctx);
    assert_log_clean();
    /* no kernel left: the staging buffer is pinned again */
    ck_assert_int_eq(ringk_device_kernels(0), 0);
    memset(&c, 0, sizeof(c));
    c.op = OP_STAGE; c.len = LEN;
    ck_assert_int_eq(bounded_call(&c, "staging buffer (ringk_cuda_stage_get)"), 1);
    ringk_cuda_stage_put(c.dst, LEN, 1);
    /* and the mapping kept is unmapped now, before its exporter frees the memory */
    memset(&c, 0, sizeof(c));
    c.op = OP_IPC_FLUSH;
    ck_assert_int_eq(bounded_call(&c, "unmapping what was kept (ringk_cuda_ipc_flush)"), 1);
    ck_assert_uint_eq(ringk_cuda_ipc_deferred(), 0);
    ck_assert_int_eq(write(go[1], "q", 1), 1);
    close(go[1]);
    for (i = 0; ((w = waitpid(child, &status, WNOHANG)) == 0) && (i < 20000); i++) {
        usleep(1000);
    }
    ck_assert_msg(w == child, "the exporting process did not exit in 20 s");
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0), "the exporting process: "
                  "status 0x%x", status);
    cudaFree(dev_a);
    cudaFree(dev_b);
    cudaFreeHost(pinned);
    cudaFreeHost(t);
    free(pageable);
    close(res[0]);
}
END_TEST

/* The device count, asked in a child, with the reason in @a why when there is none: CUDA must
 * not be initialised in this process before Check forks the test processes from it (CUDA in a
 * forked child of a process that used it is undefined). A child that says nothing in 60 s (a
 * driver that hangs) is killed. */
static int device_count_in_child(char *why, size_t why_len)
{
    struct {
        int  n;
        char why[200];
    } r;
    int fds[2], status;
    cudaError_t err;
    pid_t pid;

    snprintf(why, why_len, "cannot start the child that asks CUDA");
    if (pipe(fds) != 0) {
        return 0;
    }
    pid = fork();
    if (pid == 0) {
        memset(&r, 0, sizeof(r));
        err = cudaGetDeviceCount(&r.n);
        if (err != cudaSuccess) {
            r.n = 0;
            snprintf(r.why, sizeof(r.why), "cudaGetDeviceCount: %s (%s)", cudaGetErrorName(err),
                     cudaGetErrorString(err));
        } else if (r.n == 0) {
            snprintf(r.why, sizeof(r.why), "cudaGetDeviceCount: 0 devices");
        }
        _exit((write(fds[1], &r, sizeof(r)) == sizeof(r)) ? 0 : 1);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return 0;
    }
    if (read_bounded(fds[0], &r, sizeof(r), 60000) != 0) {
        r.n = 0;
        snprintf(why, why_len, "the child that asks cudaGetDeviceCount said nothing in 60 s, "
                 "or died");
        kill(pid, SIGKILL);
    } else {
        r.why[sizeof(r.why) - 1] = '\0';
        snprintf(why, why_len, "%s", r.why);
    }
    close(fds[0]);
    waitpid(pid, &status, 0);
    return r.n;
}

/* Whether @a name is one of the comma-separated names of @a list. */
static int in_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    const char *s;

    for (s = list; s != NULL; s = strchr(s, ',')) {
        s += (*s == ',');
        if (!strncmp(s, name, len) && ((s[len] == ',') || (s[len] == '\0'))) {
            return 1;
        }
    }
    return 0;
}

int main(void)
{
    const struct {
        const char  *name; /* for RINGK_DEVICE_GPU_ONLY */
        const TTest *test;
    } gpu_tests[] = {
        {"scenarios", test_device_gpu_scenarios},
        {"event_wake", test_device_gpu_event_wake},
        {"publish", test_device_gpu_publish},
        {"barrier", test_device_gpu_barrier},
        {"recv", test_device_gpu_recv},
        {"terminate_message", test_device_gpu_terminate_message},
        {"lifecycle", test_device_gpu_lifecycle},
        {"pingpong", test_device_gpu_pingpong},
        {"no_deadlock", test_device_gpu_no_deadlock},
        {"arg", test_device_gpu_arg},
        {"peer", test_device_gpu_peer},
    };
    const size_t ntests = sizeof(gpu_tests) / sizeof(gpu_tests[0]);
    /* RINGK_DEVICE_GPU_ONLY=name[,name...]: those GPU tests alone (compute-sanitizer
     * serializes kernel launches, so only one resident kernel at a time can run under it) */
    const char *only = getenv("RINGK_DEVICE_GPU_ONLY");
    Suite *s = suite_create("device_gpu");
    /* "gpu": the tests that run on a GPU (the bundle counts them); "host": the others */
    TCase *host = tcase_create("host"), *gpu = tcase_create("gpu");
    const char *name;
    int nadded = 0, known, items;
    size_t i;

    if (only != NULL) {
        for (i = 0, known = in_list(only, "block"); i < ntests; i++) {
            known += in_list(only, gpu_tests[i].name);
        }
        for (name = only, items = 1; (name = strchr(name, ',')) != NULL; name++) {
            items++;
        }
        if (known < items) {
            printf("Bail out! RINGK_DEVICE_GPU_ONLY='%s' names a test that does not exist "
                   "(scenarios, event_wake, publish, barrier, recv, terminate_message, "
                   "lifecycle, pingpong, no_deadlock, arg, peer, block)\n", only);
            return EXIT_FAILURE;
        }
    }
    nlisted  = gpus_listed(listed, sizeof(listed));
    ndevices = device_count_in_child(cuda_why, sizeof(cuda_why));
    /* short: a test that hangs costs the lent GPU's time (CK_TIMEOUT_MULTIPLIER scales it) */
    tcase_set_timeout(host, 60);
    tcase_set_timeout(gpu, 60);
    if (nlisted > 0) {
        tcase_add_test(host, test_device_gpu_usable);
        nadded++;
    }
    if (only == NULL) {
        tcase_add_test(host, test_device_gpu_nodev);
        tcase_add_test(host, test_device_gpu_arg_rules);
        nadded += 2;
    }
    if (ndevices > 0) {
        for (i = 0; i < ntests; i++) {
            if ((gpu_tests[i].test == test_device_gpu_peer) && (ndevices < 2)) {
                printf("# %d CUDA device(s): peer (device kernels on two GPUs) is not run\n",
                       ndevices);
            } else if ((only == NULL) || in_list(only, gpu_tests[i].name)) {
                tcase_add_test(gpu, gpu_tests[i].test);
                nadded++;
            }
        }
        if ((only == NULL) || in_list(only, "block")) {
            test_device_block_cases(gpu); /* test_device_block.c: kernels of many threads */
            nadded++;
        }
    } else {
        printf("# no CUDA device (%s): the GPU scenarios are not run (test_device runs them on "
               "the emulated device)\n", cuda_why);
    }
    if (nadded == 0) {
        return test_skip_all("no CUDA device: RINGK_DEVICE_GPU_ONLY names GPU tests only");
    }
    suite_add_tcase(s, host);
    suite_add_tcase(s, gpu);
    return test_run_suite(s);
}
#else
/* Built without CUDA where the NVIDIA driver shows a GPU: the GPU tests cannot run, and that
 * is a failure, not a skip. */
START_TEST(test_device_gpu_cuda_build)
{
    ck_abort_msg("built without CUDA, but the NVIDIA driver shows %d GPU(s) (%s): configure "
                 "found no CUDA Toolkit (configure --with-cuda=DIR)", nlisted, listed);
}
END_TEST

int main(void)
{
    Suite *s;
    TCase *tc;

    nlisted = gpus_listed(listed, sizeof(listed));
    if (nlisted == 0) {
        return test_skip_all("built without CUDA (configure --without-cuda or no CUDA Toolkit)");
    }
    s  = suite_create("device_gpu");
    tc = tcase_create("host");
    tcase_add_test(tc, test_device_gpu_cuda_build);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
#endif
