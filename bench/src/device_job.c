/* SPDX-License-Identifier: BSD-3-Clause */
/* Device kernel to device kernel between two processes, against the same kernels in one
 * process, on the emulated device (the ring kernels of device_bench_ring.cu compiled as host
 * C: device_job_emu) or, built with BENCH_GPU (device_job_gpu), on GPU 0 (the kernels compiled
 * by nvcc; their words in mapped memory, the sink's state in device memory, read back once its
 * kernels are gone). Run by bench/device_job.sh, which interleaves the three ways and prints
 * medians:
 *   one process (no RINGK_SIZE): "a", "b" and "sink" in it, device inbox to device inbox;
 *   a job of two: "a" in rank 0, "b" and "sink" in rank 1: a writes b's and sink's device
 *   inboxes in the other process directly, or, with RINGK_DEVICE_REMOTE=0, through both hosts.
 * Latency: a ball bounced a -> b -> a N times (one-way time: half a round trip). Throughput: a
 * sends M messages of BENCH_PAYLOAD bytes to sink, timed until the sink has the last (in a
 * job, rank 1 tells rank 0's CPU kernel "done", once). Rank 0 (or the one process) prints
 * "RESULT device_job lat_us=X tput_mmsg=Y sent=S direct=D errors=E": D of a's S sends went
 * straight into a device inbox (the path measured), E messages out of order at the sink.
 * With -p DEV (GPU build), "b" and "sink" run on CUDA device DEV, "a" on device 0: the sends
 * cross from one GPU to the other (peer access), in one process or between two.
 *   device_job [-n N] [-m M] [-p DEV] */
#define _GNU_SOURCE
#include "bench/src/device_bench.h"

#include <ringk/api/ringk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DIE(...) do { fprintf(stderr, "device_job: " __VA_ARGS__); fputc('\n', stderr); \
                      exit(1); } while (0)

static uint64_t done_msg, far_errors;
static int far_dev; /* the CUDA device of "b" and "sink" (-p) */
/* what the kernels store and the host polls (a_done, sink_done), and the kernels' arguments */
static uint64_t *a_done, *sink_done;
static void *a_arg, *sink_arg;
#ifndef BENCH_GPU
static uint64_t a_done_v, sink_done_v;
static bench_sink_t sink_st = {.done = &sink_done_v};
#endif

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits for *@a v to reach @a want, napping 20 us between looks: on a machine with few cores a
 * spinning waiter takes a core from the kernels it waits for (once per measurement: it adds at
 * most a nap to a run of thousands of messages). */
static void wait_for(const uint64_t *v, uint64_t want, const char *what)
{
    double t0 = now();

    while (__atomic_load_n(v, __ATOMIC_ACQUIRE) < want) {
        usleep(20);
        if (now() - t0 > 120) {
            DIE("%s: %llu of %llu after 120 s", what,
                (unsigned long long)__atomic_load_n(v, __ATOMIC_ACQUIRE),
                (unsigned long long)want);
        }
    }
}

/* Rank 1's word: {messages, errors} of its sink. */
static int done_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v[2];

    if (msg->length != sizeof(v)) {
        return -1;
    }
    memcpy(v, ringk_msg_payload(msg), sizeof(v));
    far_errors = v[1];
    __atomic_store_n(&done_msg, 1, __ATOMIC_RELEASE);
    return 0;
}

static ringk_kernel_t *dev_kernel(ringk_ctx_t *ctx, const char *name,
                                  const ringk_device_entry_t *e, const char *const *to, void *arg)
{
    ringk_kernel_params_t p = {
        .field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_BACKENDS |
                        RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY | RINGK_KERNEL_PARAM_FIELD_THREADS |
                        RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = name, .backends = RINGK_BACKEND_CUDA, .device_entry = e, .threads = 1,
        .publishes_to = to, .arg = arg
    };
    ringk_kernel_t *k;

    if ((far_dev > 0) && (strcmp(name, "a") != 0)) {
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_PLACEMENT;
        p.placement   = far_dev;
    }
    if (ringk_kernel_create(ctx, &p, &k) != 0) {
        DIE("kernel '%s' not created", name);
    }
    return k;
}

static void send_a(ringk_ctx_t *ctx, const bench_ball_t *ball)
{
    if (ringk_send(ctx, NULL, "a", RINGK_MSG_DATA, ball, sizeof(*ball), RINGK_WAIT_FOREVER) != 0) {
        DIE("a send to 'a' failed");
    }
}

/* The far side: "b" and "sink" (rank 1 of a job, or the one process), in @a k. */
static void far_side(ringk_ctx_t *ctx, ringk_kernel_t **k)
{
    static const char *const to_a[] = {"a", NULL};

    k[0] = dev_kernel(ctx, "b", &bench_echo_entry, to_a, NULL);
    k[1] = dev_kernel(ctx, "sink", &bench_sink_entry, NULL, sink_arg);
}

/* The words and the sink's state, before any kernel runs. */
static void words_init(void)
{
#ifdef BENCH_GPU
    bench_sink_t s0 = {0, 0, 0, NULL};
    char gpu[256];
    int ndev = 0;

    if ((bench_cuda_init(&ndev, gpu, sizeof(gpu)) != 0) || (ndev == 0)) {
        fprintf(stderr, "device_job: no usable CUDA device\n");
        exit(77); /* device_job.sh: a skip */
    }
    if (far_dev >= ndev) {
        fprintf(stderr, "device_job: -p %d: this process sees %d CUDA device(s)\n", far_dev,
                ndev);
        exit(77);
    }
    if (far_dev > 0) { /* the path measured needs peer access with native atomics */
        const char *env = getenv("RINGK_DEVICE_PEER");
        ringk_peer_info_t info;

        memset(&info, 0, sizeof(info));
        if ((ringk_peer_can_access(0, far_dev, &info) != 0) || !info.can_access ||
            (info.native_atomics != 1) || ((env != NULL) && (strcmp(env, "0") == 0))) {
            fprintf(stderr, "device_job: GPU 0 -> GPU %d: no direct path to measure (path %s, "
                    "native atomics %d, RINGK_DEVICE_PEER=%s: %s)\n", far_dev,
                    ringk_peer_path_name(info.path), info.native_atomics,
                    (env != NULL) ? env : "auto", info.reason);
            exit(77);
        }
    }
    a_done    = bench_mapped_alloc(sizeof(uint64_t), &a_arg);
    sink_done = bench_mapped_alloc(sizeof(uint64_t), (void**)&s0.done);
    sink_arg  = bench_device_alloc_on(far_dev, sizeof(s0)); /* on the sink's GPU */
    if ((a_done == NULL) || (sink_done == NULL) || (sink_arg == NULL) ||
        (bench_copy_to_device(sink_arg, &s0, sizeof(s0)) != 0)) {
        DIE("CUDA allocations failed");
    }
#else
    if (far_dev != 0) {
        DIE("-p %d: the emulated device is one device", far_dev);
    }
    a_done    = a_arg = &a_done_v;
    sink_done = &sink_done_v;
    sink_arg  = &sink_st;
#endif
}

/* Messages out of order at the sink, read once no kernel of the process runs (on a GPU a copy
 * would wait for them). */
static uint64_t sink_errors(void)
{
#ifdef BENCH_GPU
    bench_sink_t s;

    if (bench_copy_from_device(&s, sink_arg, sizeof(s)) != 0) {
        DIE("the sink's state could not be read back");
    }
    return s.errors;
#else
    return sink_st.errors;
#endif
}

int main(int argc, char **argv)
{
    static const char *const to_b_sink[] = {"b", "sink", NULL};
    ringk_kernel_params_t dp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .name = "done", .handler = done_handler
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_ctx_params_t cp = {.field_mask = 0};
    uint64_t n = 20000, m = 200000;
    bench_ball_t ball = {BENCH_OP_BALL, 0, 100};
    ringk_kernel_t *a = NULL, *done, *far[2] = {NULL, NULL};
    ringk_ctx_t *ctx;
    double t0, lat, tput;
    int opt, rank, size;
    uint64_t errors;
    char *end;

    while ((opt = getopt(argc, argv, "n:m:p:")) != -1) {
        if (opt == 'n') {
            n = strtoull(optarg, NULL, 10);
        } else if (opt == 'm') {
            m = strtoull(optarg, NULL, 10);
        } else if ((opt == 'p') && ((far_dev = (int)strtol(optarg, &end, 10)) >= 1) &&
                   (far_dev < 64) && (*end == '\0')) {
            continue;
        } else {
            DIE("usage: device_job [-n N] [-m M] [-p DEV (a CUDA device other than 0)]");
        }
    }
    if ((n <= ball.limit) || (m == 0)) {
        DIE("bad arguments (N > 100, M > 0)");
    }
    words_init();
    if (ringk_ctx_create(&cp, &ctx) != 0) {
        DIE("no context");
    }
    rank = ringk_ctx_rank(ctx);
    size = ringk_ctx_size(ctx);
    if ((size == 1) || (rank == 1)) {
        far_side(ctx, far);
    }
    if (rank == 0) {
        a = dev_kernel(ctx, "a", &bench_k2k_a_entry, to_b_sink, a_arg);
        if (ringk_kernel_create(ctx, &dp, &done) != 0) {
            DIE("kernel 'done' not created");
        }
    }
    if (ringk_ctx_start(ctx) != 0) {
        DIE("ringk_ctx_start failed");
    }
    if (rank == 1) {
        uint64_t v[2];

        wait_for(sink_done, m, "the sink's messages");
        /* the sink's state is read once its kernels are gone (the ping-pong is over) */
        if ((ringk_kernel_terminate(far[1]) != 0) || (ringk_kernel_terminate(far[0]) != 0)) {
            DIE("rank 1's kernels did not terminate");
        }
        v[0] = *sink_done;
        v[1] = sink_errors();
        if (ringk_send(ctx, NULL, "done", RINGK_MSG_DATA, v, sizeof(v), RINGK_WAIT_FOREVER) != 0) {
            DIE("rank 1 could not tell rank 0");
        }
        ringk_ctx_destroy(ctx);
        return 0;
    }
    send_a(ctx, &ball);
    wait_for(a_done, ball.limit, "warm-up ping-pong");
    ball.limit = n;
    t0 = now();
    send_a(ctx, &ball);
    wait_for(a_done, n, "ping-pong");
    lat = (now() - t0) * 1e6 / (2.0 * (double)n);
    ball.op    = BENCH_OP_BURST;
    ball.limit = m;
    t0 = now();
    send_a(ctx, &ball);
    wait_for((size == 1) ? sink_done : &done_msg, (size == 1) ? m : 1, "the burst");
    tput = (double)m / (now() - t0) / 1e6;
    /* stopped first: a device kernel's loop stores its counters for the last time as it
     * stops, and in its upkeep before that, so a query while it runs may lag */
    if ((ringk_kernel_terminate(a) != 0) || (ringk_kernel_stats_query(a, &st) != 0)) {
        DIE("no statistics of 'a'");
    }
    ringk_ctx_destroy(ctx);
    errors = (size == 1) ? sink_errors() : far_errors;
    printf("RESULT device_job size=%d lat_us=%.3f tput_mmsg=%.3f sent=%llu direct=%llu "
           "errors=%llu\n", size, lat, tput, (unsigned long long)st.msgs_out,
           (unsigned long long)st.sent_direct, (unsigned long long)errors);
    return 0;
}
