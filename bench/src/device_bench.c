/* SPDX-License-Identifier: BSD-3-Clause */
/* Ring kernels on a GPU, side by side with what the hardware allows, in one run:
 *   rt_ringk       CPU kernel -> GPU kernel -> CPU kernel round trip (host ingress ring, the
 *                  device loop, the outbox and the proxy)
 *   rt_launch      the same reply from a kernel launch per message (launch + synchronize)
 *   rt_flag        a resident kernel answering a mapped host flag: the limit of a round trip
 *   k2k_lat_ringk  one-way latency between two ring kernels of the GPU (direct device inbox)
 *   k2k_lat_raw    two blocks of one launch bouncing a counter in device memory
 *   k2k_tput_ringk messages of BENCH_PAYLOAD bytes per second, ring kernel to ring kernel
 *   k2k_tput_raw   an SPSC ring between two blocks of one launch: the limit
 *   (with -p DEV the K2K ringk methods run across two GPUs: kernels "b" and "sink" on CUDA
 *   device DEV, "a" on device 0: device to device by peer access where the pair allows it,
 *   else through the host proxy; the line says which, the raw references stay on device 0)
 *   work_*_T<n>    handler work (WORK_ITERS dependent multiply-adds per thread and message,
 *                  then a barrier of the kernel) on a kernel of one block of n threads (1, 32,
 *                  256, 1024), and of 4 blocks of 256 (_T256x4: the cost of a grid-wide
 *                  barrier a message): ringk (messages from the host, per second), its round trip,
 *                  a kernel launch per message doing the same work (launch + synchronize),
 *                  and the work alone (n messages' work in one launch: the per-message
 *                  overhead of the ring kernel is its time per message less this)
 * Each round runs every method once (interleaved: the ring kernels in a context created for
 * the round, then the raw references with no ring kernel resident); the figures are medians
 * over the rounds, with the ratios the targets name. Lines "RESULT device_bench method value
 * unit" are for scripts. Exits 77 without a GPU.
 * Built with BENCH_EMULATED (device_bench_emu), the ring-kernel half runs on the emulated
 * device and the raw references are left out: a check of the benchmark where there is no GPU,
 * its figures those of host threads, not of a GPU.
 *   device_bench [-r ROUNDS] [-p DEV]        (run through contrib/ringk-run) */
#define _GNU_SOURCE
#include "bench/src/device_bench.h"

#include <ringk/api/ringk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 64
#define N_RT       20000     /* round trips per round */
#define N_LAUNCH   2000
#define N_FLAG     100000
#define N_K2K_LAT  20000
#define N_K2K_TPUT 200000
#define N_RAW_TPUT 2000000
#define RAW_CELLS  1024

enum { RT_RINGK, RT_LAUNCH, RT_FLAG, K2K_LAT_RINGK, K2K_LAT_RAW, K2K_TPUT_RINGK, K2K_TPUT_RAW,
       NMETHODS };
static const char *names[NMETHODS] = {"rt_ringk", "rt_launch", "rt_flag", "k2k_lat_ringk",
                                      "k2k_lat_raw", "k2k_tput_ringk", "k2k_tput_raw"};
static const char *units[NMETHODS] = {"us", "us", "us", "us", "us", "Mmsg/s", "Mmsg/s"};

/* the handler-work methods, per block size: results[WM(size, kind)] */
#define WORK_ITERS 2000
#ifdef BENCH_EMULATED
static const uint32_t work_threads[] = {1, 4, 2}; /* a smoke check: host threads */
static const uint32_t work_blocks[]  = {1, 1, 2};
#define N_WORK     200
#define N_WORK_LAT 50
#else
static const uint32_t work_threads[] = {1, 32, 256, 1024, 256};
static const uint32_t work_blocks[]  = {1, 1, 1, 1, 4}; /* the last: 1024 threads in 4 blocks */
#define N_WORK     20000
#define N_WORK_LAT 2000
#endif
#define N_WORK_LAUNCH 2000
#define NWT ((int)(sizeof(work_threads) / sizeof(work_threads[0])))
enum { W_RINGK, W_LAT, W_LAUNCH, W_PURE, NW };
static const char *wnames[NW] = {"work_ringk", "work_lat_ringk", "work_launch", "work_alone"};
static const char *wunits[NW] = {"kmsg/s", "us", "kmsg/s", "us"};
#define WM(ti, kind) (NMETHODS + (ti) * NW + (kind))
#define NWT_MAX 5
static double results[NMETHODS + NWT_MAX * NW][MAX_ROUNDS];

/* _exit: exit() would run the CUDA runtime's teardown, which waits for resident kernels */
#define QUIT() do { fflush(NULL); _exit(1); } while (0)
#define DIE(...) do { fprintf(stderr, "device_bench: " __VA_ARGS__); fputc('\n', stderr); \
                      QUIT(); } while (0)

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t load_acq(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* waits for *p to reach v, at most 60 s */
static void wait_for(const uint64_t *p, uint64_t v, const char *what)
{
    double t0 = now();

    while (load_acq(p) < v) {
        if (now() - t0 > 60) {
            DIE("%s: waited 60 s (%llu of %llu)", what, (unsigned long long)load_acq(p),
                (unsigned long long)v);
        }
    }
}

/* ---- the ring kernels ------------------------------------------------------------------------ */

static uint64_t pongs, pong_limit;

static int ping(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t n = __atomic_load_n(&pongs, __ATOMIC_RELAXED) + 1;

    __atomic_store_n(&pongs, n, __ATOMIC_RELEASE);
    if (n >= pong_limit) {
        return 0;
    }
    return ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_DATA, &n, sizeof(n),
                            RINGK_WAIT_FOREVER);
}

/* -p: the CUDA device of kernels "b" and "sink" (-1: device 0, with "a") */
static int peer_dev = -1;
/* of kernel "a"'s sends in the last round, those that went device to device */
static unsigned long long k2k_direct, k2k_sent;

typedef struct {
    uint64_t     *a_done, *a_done_d;     /* mapped: "a" stores the ball's last value */
    uint64_t     *sink_done, *sink_done_d;
    bench_sink_t *sink_d;                /* device memory */
} ringk_bufs_t;

static ringk_kernel_t *dev_kernel_of(ringk_ctx_t *ctx, const char *name,
                                     const ringk_device_entry_t *entry, const char **to,
                                     void *arg, uint32_t threads, uint32_t blocks)
{
    ringk_kernel_params_t p;
    ringk_kernel_t *k;
    int ret;

    memset(&p, 0, sizeof(p));
    p.field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_BACKENDS |
                     RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                     RINGK_KERNEL_PARAM_FIELD_PROCESSING | RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE |
                     RINGK_KERNEL_PARAM_FIELD_THREADS | RINGK_KERNEL_PARAM_FIELD_BLOCKS |
                     ((to != NULL) ? RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO : 0);
    p.threads      = threads;
    p.blocks       = blocks;
    p.name         = name;
    p.backends     = RINGK_BACKEND_CUDA;
    p.device_entry = entry;
    p.publishes_to = to;
    p.max_in       = 64;
    p.inbox_size   = 1024;
    p.processing   = RINGK_PROCESSING_ADAPTIVE;
    p.arg          = arg;
    if ((peer_dev >= 0) && ((strcmp(name, "b") == 0) || (strcmp(name, "sink") == 0))) {
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_PLACEMENT;
        p.placement   = peer_dev;
    }
    ret = ringk_kernel_create(ctx, &p, &k);
    if (ret != 0) {
        DIE("kernel '%s': %s", name, strerror(-ret));
    }
    return k;
}

/* A device kernel of one thread (the handlers of the latency and throughput methods). */
static ringk_kernel_t *dev_kernel(ringk_ctx_t *ctx, const char *name,
                                  const ringk_device_entry_t *entry, const char **to, void *arg)
{
    return dev_kernel_of(ctx, name, entry, to, arg, 1, 1);
}

/* the handler-work kernels' buffers, per block size: device memory, and a mapped word */
typedef struct {
    bench_work_t *w_d[NWT_MAX];
    uint64_t     *done[NWT_MAX], *done_d[NWT_MAX];
    uint64_t      seq[NWT_MAX];     /* the last message's */
} work_bufs_t;

/* Sends the work of messages seq + 1 .. seq + n to kernel @a name, waiting for each answer
 * when @a one_by_one: the time taken. */
static double work_send(ringk_ctx_t *ctx, const char *name, work_bufs_t *b, int ti, uint64_t n,
                        int one_by_one)
{
    uint64_t v[2] = {0, WORK_ITERS}, i;
    double t0 = now();

    for (i = 0; i < n; i++) {
        v[0] = ++b->seq[ti];
        if (ringk_send(ctx, NULL, name, RINGK_MSG_DATA, v, sizeof(v), RINGK_WAIT_FOREVER) != 0) {
            DIE("work: a send to '%s' failed", name);
        }
        if (one_by_one) {
            wait_for(b->done[ti], b->seq[ti], "work round trip");
        }
    }
    wait_for(b->done[ti], b->seq[ti], "work messages");
    return now() - t0;
}

/* One round of the handler-work methods on ring kernels, in a context of its own. */
static void round_work_ringk(int r, work_bufs_t *b)
{
    ringk_ctx_params_t cp = {.field_mask = 0};
    ringk_ctx_t *ctx;
    char name[16];
    int ti;

    if (ringk_ctx_create(&cp, &ctx) != 0) {
        DIE("ringk_ctx_create failed");
    }
    for (ti = 0; ti < NWT; ti++) {
        snprintf(name, sizeof(name), "w%d", ti);
        dev_kernel_of(ctx, name, &bench_work_entry, NULL, b->w_d[ti], work_threads[ti],
                      work_blocks[ti]);
    }
    if (ringk_ctx_start(ctx) != 0) {
        DIE("ringk_ctx_start failed");
    }
    for (ti = 0; ti < NWT; ti++) {
        snprintf(name, sizeof(name), "w%d", ti);
        work_send(ctx, name, b, ti, 10, 1); /* warm */
        results[WM(ti, W_RINGK)][r] = N_WORK / work_send(ctx, name, b, ti, N_WORK, 0) / 1e3;
        results[WM(ti, W_LAT)][r]   = work_send(ctx, name, b, ti, N_WORK_LAT, 1) * 1e6 /
                                      N_WORK_LAT;
    }
    ringk_ctx_destroy(ctx);
}

/* One round of the ring-kernel methods, in a context of its own. */
static void round_ringk(int r, ringk_bufs_t *b)
{
    static const char *to_ping[] = {"ping", NULL}, *to_echo[] = {"echo", NULL};
    static const char *to_b_sink[] = {"b", "sink", NULL}, *to_a[] = {"a", NULL};
    ringk_ctx_params_t cp = {.field_mask = 0};
    ringk_kernel_params_t p;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *ka;
    bench_sink_t s0 = {0, 0, 0, b->sink_done_d};
    bench_ball_t ball = {BENCH_OP_BALL, 0, N_K2K_LAT};
    ringk_kernel_t *k;
    ringk_ctx_t *ctx;
    uint64_t one = 0;
    double t0;

    if (bench_copy_to_device(b->sink_d, &s0, sizeof(s0)) != 0) { /* no kernel runs yet */
        QUIT();
    }
    *b->a_done    = 0;
    *b->sink_done = 0;
    if (ringk_ctx_create(&cp, &ctx) != 0) {
        DIE("ringk_ctx_create failed");
    }
    memset(&p, 0, sizeof(p));
    p.field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                     RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.name         = "ping";
    p.handler      = ping;
    p.publishes_to = to_echo;
    p.max_in       = 64;
    if (ringk_kernel_create(ctx, &p, &k) != 0) {
        DIE("kernel 'ping'");
    }
    dev_kernel(ctx, "echo", &bench_echo_entry, to_ping, NULL);
    ka = dev_kernel(ctx, "a", &bench_k2k_a_entry, to_b_sink, b->a_done_d);
    dev_kernel(ctx, "b", &bench_echo_entry, to_a, NULL);
    dev_kernel(ctx, "sink", &bench_sink_entry, NULL, b->sink_d);
    if (ringk_ctx_start(ctx) != 0) {
        DIE("ringk_ctx_start failed");
    }
    /* warm: the kernels run, the routes resolve */
    pongs      = 0;
    pong_limit = 100;
    ringk_send(ctx, NULL, "echo", RINGK_MSG_DATA, &one, sizeof(one), RINGK_WAIT_FOREVER);
    wait_for(&pongs, 100, "warm-up round trips");

    pongs      = 0;
    pong_limit = N_RT;
    t0 = now();
    ringk_send(ctx, NULL, "echo", RINGK_MSG_DATA, &one, sizeof(one), RINGK_WAIT_FOREVER);
    wait_for(&pongs, N_RT, "round trips");
    results[RT_RINGK][r] = (now() - t0) * 1e6 / N_RT;

    t0 = now();
    ringk_send(ctx, NULL, "a", RINGK_MSG_DATA, &ball, sizeof(ball), RINGK_WAIT_FOREVER);
    wait_for(b->a_done, N_K2K_LAT, "K2K ping-pong");
    /* N_K2K_LAT round trips a -> b -> a: twice as many one-way trips */
    results[K2K_LAT_RINGK][r] = (now() - t0) * 1e6 / (2.0 * N_K2K_LAT);

    ball.op    = BENCH_OP_BURST;
    ball.limit = N_K2K_TPUT;
    t0 = now();
    ringk_send(ctx, NULL, "a", RINGK_MSG_DATA, &ball, sizeof(ball), RINGK_WAIT_FOREVER);
    wait_for(b->sink_done, N_K2K_TPUT, "K2K burst");
    results[K2K_TPUT_RINGK][r] = N_K2K_TPUT / (now() - t0) / 1e6;
    /* the path measured: every send of "a" (to "b" and to the sink) device to device; its
     * loop stores its counters once idle after the burst, and the host may see one counter's
     * store before the other's: looked at until both agree, 10 s at most */
    t0 = now();
    while ((ringk_kernel_stats_query(ka, &st) == 0) &&
           ((st.msgs_out < N_K2K_TPUT) || (st.sent_direct != st.msgs_out)) &&
           (now() - t0 < 10)) {
        usleep(1000);
    }
    k2k_direct = (unsigned long long)st.sent_direct;
    k2k_sent   = (unsigned long long)st.msgs_out;
    /* across two GPUs a pair without peer access goes through the host: said, not refused */
    if ((st.msgs_out < N_K2K_TPUT) || ((peer_dev < 0) && (st.sent_direct != st.msgs_out))) {
        DIE("K2K: %llu of kernel a's %llu sends went device to device, not all",
            (unsigned long long)st.sent_direct, (unsigned long long)st.msgs_out);
    }
    ringk_ctx_destroy(ctx);
    /* the kernels are gone: the sink's state can be read back */
    if (bench_copy_from_device(&s0, b->sink_d, sizeof(s0)) != 0) {
        QUIT();
    }
    if ((s0.count != N_K2K_TPUT) || (s0.errors != 0)) {
        DIE("K2K burst: the sink counted %llu of %d messages, %llu out of order",
            (unsigned long long)s0.count, N_K2K_TPUT, (unsigned long long)s0.errors);
    }
}

/* ---- the raw references ---------------------------------------------------------------------- */

typedef struct {
    void     *stream;
    uint64_t *flags, *flags_d;     /* mapped: [0] host's flag, [1] device's answer, [2] errors */
    uint64_t *words_d;             /* device memory */
    void     *ring_d;
} raw_bufs_t;

#ifndef BENCH_EMULATED
static void round_raw(int r, raw_bufs_t *b)
{
    uint64_t i;
    double t0;

    /* a resident kernel answering a mapped flag */
    __atomic_store_n(&b->flags[0], 0, __ATOMIC_RELEASE);
    __atomic_store_n(&b->flags[1], 0, __ATOMIC_RELEASE);
    if (bench_flag_pong_start(&b->flags_d[0], &b->flags_d[1], &b->stream) != 0) {
        QUIT();
    }
    __atomic_store_n(&b->flags[0], 1, __ATOMIC_RELEASE);
    wait_for(&b->flags[1], 1, "flag kernel start");
    t0 = now();
    for (i = 2; i < N_FLAG + 2; i++) {
        uint64_t spins = 0;

        __atomic_store_n(&b->flags[0], i, __ATOMIC_RELEASE);
        while (load_acq(&b->flags[1]) != i) {
            /* the clock read only now and then: it would cost more than the answer */
            if (((++spins & 0xfffff) == 0) && (now() - t0 > 60)) {
                DIE("flag ping-pong: no answer to %llu after 60 s", (unsigned long long)i);
            }
        }
    }
    results[RT_FLAG][r] = (now() - t0) * 1e6 / N_FLAG;
    __atomic_store_n(&b->flags[0], BENCH_STOP, __ATOMIC_RELEASE);
    if (bench_stream_sync(b->stream) != 0) {
        QUIT();
    }

    /* a launch per message */
    t0 = now();
    for (i = 0; i < N_LAUNCH; i++) {
        if ((bench_launch_one(b->stream, &b->flags_d[1], i) != 0) ||
            (load_acq(&b->flags[1]) != i + 1)) {
            DIE("launch per message: a wrong reply");
        }
    }
    results[RT_LAUNCH][r] = (now() - t0) * 1e6 / N_LAUNCH;

    t0 = now();
    if (bench_raw_pingpong(b->stream, b->words_d, N_K2K_LAT / 2) != 0) {
        QUIT();
    }
    results[K2K_LAT_RAW][r] = (now() - t0) * 1e6 / N_K2K_LAT;

    b->flags[2] = UINT64_MAX;
    t0 = now();
    if (bench_raw_ring(b->stream, b->ring_d, RAW_CELLS, N_RAW_TPUT, &b->flags_d[2]) != 0) {
        QUIT();
    }
    results[K2K_TPUT_RAW][r] = N_RAW_TPUT / (now() - t0) / 1e6;
    if (load_acq(&b->flags[2]) != 0) {
        DIE("raw ring: %llu messages out of order", (unsigned long long)b->flags[2]);
    }
}

/* One round of the handler-work references: a launch per message, and the work alone. */
static void round_work_raw(int r, void *stream, work_bufs_t *b)
{
    uint64_t i;
    double t0;
    int ti;

    for (ti = 0; ti < NWT; ti++) {
        t0 = now();
        for (i = 0; i < N_WORK_LAUNCH; i++) {
            if ((bench_launch_work(stream, b->w_d[ti], work_threads[ti], work_blocks[ti],
                                   WORK_ITERS,
                                   ++b->seq[ti]) != 0) ||
                (load_acq(b->done[ti]) != b->seq[ti])) {
                DIE("work launch per message: a wrong answer");
            }
        }
        results[WM(ti, W_LAUNCH)][r] = N_WORK_LAUNCH / (now() - t0) / 1e3;
        t0 = now();
        if (bench_work_loop(stream, b->w_d[ti], work_threads[ti], work_blocks[ti], WORK_ITERS,
                            N_WORK) != 0) {
            QUIT();
        }
        results[WM(ti, W_PURE)][r] = (now() - t0) * 1e6 / N_WORK;
    }
}

#else
/* the emulated device: plain memory, no raw references */
int bench_cuda_init(int *ndev, char *name, size_t name_len)
{
    *ndev = 1;
    snprintf(name, name_len, "the emulated device (host threads)");
    return 0;
}

void *bench_mapped_alloc(size_t bytes, void **dev_p)
{
    *dev_p = calloc(1, bytes);
    return *dev_p;
}

void *bench_device_alloc(size_t bytes)
{
    return calloc(1, bytes);
}

void *bench_device_alloc_on(int dev, size_t bytes)
{
    return (dev == 0) ? calloc(1, bytes) : NULL; /* one emulated device */
}

int bench_copy_to_device(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return 0;
}

int bench_copy_from_device(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return 0;
}
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

/* The work buffers of every block size, before any kernel runs: v[] at 1, done at 0. */
static void work_bufs_init(work_bufs_t *b)
{
    static bench_work_t w; /* static: 8 KiB */
    int ti, i;

    memset(b, 0, sizeof(*b));
    for (ti = 0; ti < NWT; ti++) {
        b->done[ti] = bench_mapped_alloc(sizeof(uint64_t), (void**)&b->done_d[ti]);
        b->w_d[ti]  = bench_device_alloc(sizeof(bench_work_t));
        if ((b->done[ti] == NULL) || (b->w_d[ti] == NULL)) {
            DIE("cannot allocate the work buffers");
        }
        for (i = 0; i < BENCH_WORK_THREADS; i++) {
            w.v[i] = 1.0;
        }
        w.done = b->done_d[ti];
        if (bench_copy_to_device(b->w_d[ti], &w, sizeof(w)) != 0) {
            QUIT();
        }
    }
}

/* The handler-work figures: per block size, ringk against a launch per message, and the ring
 * kernel's time per message beyond the work's. */
static void work_print(const double *med)
{
    int ti;

    printf("handler work (%d dependent multiply-adds a thread, a barrier of the kernel) per "
           "message:\n"
           "  threads x blocks  ringk kmsg/s  launch kmsg/s  ringk/launch  work us  ringk us/msg  "
           "overhead us  round trip us\n", WORK_ITERS);
    for (ti = 0; ti < NWT; ti++) {
        const double *m = med + WM(ti, 0);
        double per = 1e3 / m[W_RINGK];

        printf("  %7u x %6u  %12.1f  %13.1f  %11.1fx  %7.2f  %12.2f  %11.2f  %13.2f\n",
               work_threads[ti], work_blocks[ti], m[W_RINGK], m[W_LAUNCH],
               (m[W_LAUNCH] > 0) ? m[W_RINGK] / m[W_LAUNCH] : 0.0, m[W_PURE], per,
               per - m[W_PURE], m[W_LAT]);
    }
#ifndef BENCH_EMULATED
    printf("  target (256 threads, a few us of work): ringk/launch >= 10x, overhead <= 2 us\n");
#endif
}

static double median(int m, int rounds)
{
    double v[MAX_ROUNDS];

    memcpy(v, results[m], rounds * sizeof(double));
    qsort(v, rounds, sizeof(double), cmp_double);
    return (rounds % 2) ? v[rounds / 2] : (v[rounds / 2 - 1] + v[rounds / 2]) / 2;
}

int main(int argc, char **argv)
{
    ringk_bufs_t rb;
    raw_bufs_t xb;
    work_bufs_t wb;
    double med[NMETHODS + NWT_MAX * NW];
    char gpu[256] = "";
    int opt, rounds = 5, ndev = 0, r, m;

    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed at its time limit keeps its lines */
    while ((opt = getopt(argc, argv, "r:p:")) != -1) {
        if (((opt == 'r') && ((rounds = atoi(optarg)) >= 1) && (rounds <= MAX_ROUNDS)) ||
            ((opt == 'p') && ((peer_dev = atoi(optarg)) >= 1))) {
            continue;
        }
        fprintf(stderr, "usage: device_bench [-r ROUNDS (1..%d)] [-p DEV (a CUDA device "
                "other than 0)]\n", MAX_ROUNDS);
        return 2;
    }
    if ((bench_cuda_init(&ndev, gpu, sizeof(gpu)) != 0) || (ndev == 0)) {
        printf("device_bench: no CUDA device: skipped\n");
        return 77;
    }
    if (peer_dev >= ndev) {
        printf("device_bench: -p %d: this process sees %d CUDA device(s): skipped\n", peer_dev,
               ndev);
        return 77;
    }
    /* every buffer before any kernel runs */
    memset(&xb, 0, sizeof(xb));
    rb.a_done    = bench_mapped_alloc(sizeof(uint64_t), (void**)&rb.a_done_d);
    rb.sink_done = bench_mapped_alloc(sizeof(uint64_t), (void**)&rb.sink_done_d);
    rb.sink_d    = bench_device_alloc_on((peer_dev >= 0) ? peer_dev : 0, sizeof(bench_sink_t));
    xb.flags     = bench_mapped_alloc(4 * sizeof(uint64_t), (void**)&xb.flags_d);
    xb.words_d   = bench_device_alloc(2 * sizeof(uint64_t));
    xb.ring_d    = bench_device_alloc((RAW_CELLS + 1) * 64);
    if (!rb.a_done || !rb.sink_done || !rb.sink_d || !xb.flags || !xb.words_d || !xb.ring_d) {
        DIE("cannot allocate the buffers");
    }
    work_bufs_init(&wb);
    printf("device_bench: %s, %d rounds, medians; K2K messages of %u payload bytes\n", gpu,
           rounds, BENCH_PAYLOAD);
    fflush(stdout);
    for (r = 0; r < rounds; r++) {
        round_ringk(r, &rb);
        round_work_ringk(r, &wb);
#ifndef BENCH_EMULATED
        round_raw(r, &xb);
        round_work_raw(r, xb.stream, &wb);
#endif
        fprintf(stderr, "device_bench: round %d of %d: round trip %.2f us (flag %.2f, launch "
                "%.2f), K2K %.2f us, %.2f Mmsg/s\n", r + 1, rounds, results[RT_RINGK][r],
                results[RT_FLAG][r], results[RT_LAUNCH][r], results[K2K_LAT_RINGK][r],
                results[K2K_TPUT_RINGK][r]);
    }
    for (m = 0; m < NMETHODS + NWT * NW; m++) {
        med[m] = median(m, rounds);
    }
#ifdef BENCH_EMULATED
    printf("round trip CPU kernel -> device kernel -> CPU kernel: %.2f us\n"
           "device K2K one-way latency: %.2f us\ndevice K2K throughput: %.2f Mmsg/s\n",
           med[RT_RINGK], med[K2K_LAT_RINGK], med[K2K_TPUT_RINGK]);
#else
    printf("round trip CPU kernel -> GPU kernel -> CPU kernel: %.2f us (target <= 2, stretch 1.5)\n"
           "  a kernel launch per message:                     %.2f us: ringk %.1fx faster "
           "(target >= 10x)\n"
           "  raw mapped-flag ping-pong (the limit):           %.2f us: ringk %.2fx of it\n",
           med[RT_RINGK], med[RT_LAUNCH], med[RT_LAUNCH] / med[RT_RINGK], med[RT_FLAG],
           med[RT_RINGK] / med[RT_FLAG]);
    if (peer_dev >= 0) {
        printf("K2K GPU0 <-> GPU%d: %llu of the last round's %llu sends device to device "
               "(the rest through the host proxy); the raw references on GPU0\n", peer_dev,
               k2k_direct, k2k_sent);
    }
    printf("%s K2K one-way latency: ringk %.2f us, raw block ping-pong %.2f us (%.2fx)\n",
           (peer_dev >= 0) ? "cross-GPU" : "same-GPU", med[K2K_LAT_RINGK], med[K2K_LAT_RAW],
           med[K2K_LAT_RINGK] / med[K2K_LAT_RAW]);
    printf("%s K2K throughput: ringk %.2f Mmsg/s, raw SPSC ring %.2f Mmsg/s: %.2fx "
           "(target >= 0.5 on one GPU)\n", (peer_dev >= 0) ? "cross-GPU" : "same-GPU",
           med[K2K_TPUT_RINGK], med[K2K_TPUT_RAW], med[K2K_TPUT_RINGK] / med[K2K_TPUT_RAW]);
#endif
    work_print(med);
    for (m = 0; m < NMETHODS; m++) {
#ifdef BENCH_EMULATED
        if ((m != RT_RINGK) && (m != K2K_LAT_RINGK) && (m != K2K_TPUT_RINGK)) {
            continue;
        }
#endif
        printf("RESULT device_bench %s %.4f %s\n", names[m], med[m], units[m]);
    }
    for (m = 0; m < NWT * NW; m++) {
#ifdef BENCH_EMULATED
        if ((m % NW == W_LAUNCH) || (m % NW == W_PURE)) {
            continue;
        }
#endif
        printf("RESULT device_bench %s_T%u", wnames[m % NW], work_threads[m / NW]);
        if (work_blocks[m / NW] > 1) {
            printf("x%u", work_blocks[m / NW]);
        }
        printf(" %.4f %s\n", med[NMETHODS + m], wunits[m % NW]);
    }
    return 0;
}
