/* SPDX-License-Identifier: BSD-3-Clause */
/* The P2P queue (ringk_p2pq) side by side with a bare ring, in one run of interleaved rounds
 * (elements of 64 bytes, a queue of 1024):
 *   hh_tput    host thread -> host thread through the queue, elements a second
 *   hh_raw     the same through a bare single-producer ring of the same geometry (C11 atomics,
 *              one copy in, one copy out, no statistics): the limit
 *   hh_lat     one-way latency, host thread <-> host thread: a ping-pong over two queues
 *   hh_rawlat  the same over two bare rings
 * With CUDA and a GPU (one GPU thread at the GPU's end, ringk_p2pq_dev.h):
 *   hg_tput    host -> GPU 0            gh_tput   GPU 0 -> host
 *   hg_rt      host -> GPU 0 -> host round trip (the GPU thread forwards between two queues)
 *   gg_tput    GPU 0 -> GPU 1 (two GPUs), in the mode the queue picks (printed, with whether
 *              the GPUs reach each other directly)
 * Figures are medians over the rounds; ratios to the bare ring for the host methods. Lines
 * "RESULT p2pq_bench method value unit" are for scripts.
 *   p2pq_bench [-r ROUNDS]                    (run through contrib/ringk-run) */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "bench/src/p2pq_bench.h"

#include <ringk/api/ringk_p2pq.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef BENCH_P2PQ_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_ROUNDS 64
#define CAPACITY   1024u
#define N_TPUT     2000000u
#define N_LAT      100000u
#define N_GPU      200000u
#define N_GPU_RT   20000u

enum { HH_TPUT, HH_RAW, HH_LAT, HH_RAWLAT, HG_TPUT, GH_TPUT, HG_RT, GG_TPUT, NMETHODS };
static const char *names[NMETHODS] = {"hh_tput", "hh_raw", "hh_lat", "hh_rawlat", "hg_tput",
                                      "gh_tput", "hg_rt", "gg_tput"};
static const char *units[NMETHODS] = {"Melem/s", "Melem/s", "us", "us", "Melem/s", "Melem/s",
                                      "us", "Melem/s"};
static double results[NMETHODS][MAX_ROUNDS];

#define DIE(...) do { fprintf(stderr, "p2pq_bench: " __VA_ARGS__); fputc('\n', stderr); \
                      exit(1); } while (0)

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the bare ring: one producer, one consumer, a slot per element ----------------------- */

typedef struct {
    uint64_t          tail __attribute__((aligned(64)));  /* written by the producer */
    uint64_t          head __attribute__((aligned(64)));  /* written by the consumer */
    bench_p2pq_elem_t slot[CAPACITY] __attribute__((aligned(64)));
} raw_ring_t;

static int raw_send(raw_ring_t *r, const bench_p2pq_elem_t *e)
{
    uint64_t t = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);

    if (t - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == CAPACITY) {
        return -EAGAIN;
    }
    r->slot[t % CAPACITY] = *e;
    __atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
    return 0;
}

static int raw_receive(raw_ring_t *r, bench_p2pq_elem_t *e)
{
    uint64_t h = __atomic_load_n(&r->head, __ATOMIC_RELAXED);

    if (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) == h) {
        return -EAGAIN;
    }
    *e = r->slot[h % CAPACITY];
    __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
    return 0;
}

/* ---- the two ends of the host methods -------------------------------------------------------- */

/* One end of a host method: which calls it makes on which queue or ring. */
typedef struct {
    int               raw;        /* bare rings, else queues */
    ringk_p2pq_t     *q[2];       /* [0] one way, [1] back (latency) */
    raw_ring_t       *r[2];
    unsigned          n;
    int               echo;       /* latency: the far end sends each element back */
    unsigned          bad;
} end_t;

static int end_send(end_t *e, int way, const bench_p2pq_elem_t *x)
{
    return e->raw ? raw_send(e->r[way], x) : ringk_p2pq_send(e->q[way], x);
}

static int end_receive(end_t *e, int way, bench_p2pq_elem_t *x)
{
    return e->raw ? raw_receive(e->r[way], x) : ringk_p2pq_receive(e->q[way], x);
}

/* The far end: receives n elements on way 0, checks them, and with echo sends each back. */
static void *far_main(void *arg)
{
    end_t *e = arg;
    bench_p2pq_elem_t x;
    unsigned i;

    for (i = 0; i < e->n; i++) {
        while (end_receive(e, 0, &x) != 0) {
        }
        e->bad += (x.n != i) || (x.check != BENCH_P2PQ_CHECK(i));
        while (e->echo && (end_send(e, 1, &x) != 0)) {
        }
    }
    return NULL;
}

static ringk_p2pq_t *queue_new(int src, int dst)
{
    ringk_p2pq_params_t p = {
        .field_mask = RINGK_P2PQ_PARAM_FIELD_CAPACITY | RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE |
                      RINGK_P2PQ_PARAM_FIELD_DEVICES,
        .capacity = CAPACITY, .elem_size = sizeof(bench_p2pq_elem_t), .src_device = src,
        .dst_device = dst
    };
    ringk_p2pq_t *q;
    int ret = ringk_p2pq_create(&p, &q);

    if (ret != 0) {
        DIE("ringk_p2pq_create(%d -> %d): %s", src, dst, strerror(-ret));
    }
    return q;
}

/* One host method: throughput (elements a second) or, with echo, one-way latency (us). */
static double host_method(int raw, int echo)
{
    end_t e = {.raw = raw, .n = echo ? N_LAT : N_TPUT, .echo = echo};
    bench_p2pq_elem_t x = {0};
    pthread_t far;
    unsigned i;
    double t0, t;
    int w;

    for (w = 0; w < 2; w++) {
        if (raw && ((e.r[w] = aligned_alloc(64, sizeof(raw_ring_t))) == NULL)) {
            DIE("out of memory");
        }
        if (raw) {
            memset(e.r[w], 0, sizeof(raw_ring_t));
        } else {
            e.q[w] = queue_new(RINGK_P2PQ_HOST, RINGK_P2PQ_HOST);
        }
    }
    if (pthread_create(&far, NULL, far_main, &e) != 0) {
        DIE("pthread_create failed");
    }
    t0 = now();
    for (i = 0; i < e.n; i++) {
        x.n     = i;
        x.check = BENCH_P2PQ_CHECK(i);
        while (end_send(&e, 0, &x) != 0) {
        }
        while (echo && (end_receive(&e, 1, &x) != 0)) {
        }
    }
    pthread_join(far, NULL);
    t = now() - t0;
    if (e.bad != 0) {
        DIE("%s %s: %u elements arrived wrong", raw ? "bare ring" : "queue",
            echo ? "ping-pong" : "stream", e.bad);
    }
    for (w = 0; w < 2; w++) {
        if (raw) {
            free(e.r[w]);
        } else {
            ringk_p2pq_destroy(e.q[w]);
        }
    }
    return echo ? t * 1e6 / (2.0 * e.n) : e.n / t / 1e6;
}

/* ---- GPU methods ----------------------------------------------------------------------------- */

#ifdef BENCH_P2PQ_CUDA
static int   ngpus;
static int  *status;        /* [2], mapped memory the GPU threads answer in */
static void *streams[2];

static struct ringk_p2pq_dev *view_of(ringk_p2pq_t *q)
{
    struct ringk_p2pq_dev *v = NULL;

    if (ringk_p2pq_dev_view(q, &v) != 0) {
        DIE("ringk_p2pq_dev_view failed");
    }
    return v;
}

static void gpu_wait(int which, const char *what)
{
    if (cudaStreamSynchronize((cudaStream_t)streams[which]) != cudaSuccess) {
        DIE("%s: the GPU thread failed: %s", what, cudaGetErrorString(cudaGetLastError()));
    }
    if (__atomic_load_n(&status[which], __ATOMIC_ACQUIRE) != 0) {
        DIE("%s: the GPU thread answered %d (1: a bad element, 2: it waited 20 s)", what,
            status[which]);
    }
}

static void gpu_go(int dev, int which, ringk_p2pq_t *in, ringk_p2pq_t *out, uint64_t n)
{
    status[which] = -1;
    if (bench_p2pq_gpu_move(dev, (in != NULL) ? view_of(in) : NULL,
                            (out != NULL) ? view_of(out) : NULL, n, &status[which],
                            streams[which]) != 0) {
        DIE("launch on CUDA device %d failed", dev);
    }
}

/* The host's side of a GPU method spins on its queue; every 2^20 polls it checks that the GPU
 * thread (status[0]) has not given up and that @a what has not taken 60 s. */
static void host_spin(unsigned *polls, double t0, const char *what)
{
    if ((++*polls & 0xfffffu) != 0) {
        return;
    }
    if (__atomic_load_n(&status[0], __ATOMIC_ACQUIRE) > 0) {
        DIE("%s: the GPU thread gave up (status %d: 1 a bad element, 2 it waited 20 s)", what,
            status[0]);
    }
    if (now() - t0 > 60) {
        DIE("%s: not done after 60 s", what);
    }
}

/* host -> GPU 0 (to_gpu) or GPU 0 -> host: elements a second */
static double gpu_stream(int to_gpu)
{
    ringk_p2pq_t *q = to_gpu ? queue_new(RINGK_P2PQ_HOST, 0) : queue_new(0, RINGK_P2PQ_HOST);
    const char *what = to_gpu ? "host -> GPU" : "GPU -> host";
    bench_p2pq_elem_t x = {0};
    unsigned i, polls = 0;
    double t0 = now(), t;

    gpu_go(0, 0, to_gpu ? q : NULL, to_gpu ? NULL : q, N_GPU);
    for (i = 0; i < N_GPU; i++) {
        if (to_gpu) {
            x.n     = i;
            x.check = BENCH_P2PQ_CHECK(i);
            while (ringk_p2pq_send(q, &x) != 0) {
                host_spin(&polls, t0, what);
            }
        } else {
            while (ringk_p2pq_receive(q, &x) != 0) {
                host_spin(&polls, t0, what);
            }
            if ((x.n != i) || (x.check != BENCH_P2PQ_CHECK(i))) {
                DIE("GPU -> host: element %u arrived wrong", i);
            }
        }
    }
    gpu_wait(0, what);
    t = now() - t0;
    ringk_p2pq_destroy(q);
    return N_GPU / t / 1e6;
}

/* host -> GPU 0 -> host: the round trip, us */
static double gpu_round_trip(void)
{
    ringk_p2pq_t *in = queue_new(RINGK_P2PQ_HOST, 0), *out = queue_new(0, RINGK_P2PQ_HOST);
    bench_p2pq_elem_t x = {0};
    unsigned i, polls = 0;
    double t0, t;

    gpu_go(0, 0, in, out, N_GPU_RT);
    t0 = now();
    for (i = 0; i < N_GPU_RT; i++) {
        x.n     = i;
        x.check = BENCH_P2PQ_CHECK(i);
        while (ringk_p2pq_send(in, &x) != 0) {
            host_spin(&polls, t0, "round trip");
        }
        while (ringk_p2pq_receive(out, &x) != 0) {
            host_spin(&polls, t0, "round trip");
        }
        if (x.n != i) {
            DIE("round trip: element %u came back as %llu", i, (unsigned long long)x.n);
        }
    }
    t = now() - t0;
    gpu_wait(0, "round trip");
    ringk_p2pq_destroy(in);
    ringk_p2pq_destroy(out);
    return t * 1e6 / N_GPU_RT;
}

/* GPU 0 -> GPU 1: elements a second; the queue's mode in *info */
static double gpu_to_gpu(ringk_p2pq_info_t *info)
{
    ringk_p2pq_t *q = queue_new(0, 1);
    double t0 = now(), t;

    info->field_mask = RINGK_P2PQ_INFO_FIELD_MODE | RINGK_P2PQ_INFO_FIELD_DIRECT_P2P |
                       RINGK_P2PQ_INFO_FIELD_REASON;
    ringk_p2pq_info_query(q, info);
    gpu_go(1, 1, q, NULL, N_GPU); /* the receiver first: it waits for the sender */
    gpu_go(0, 0, NULL, q, N_GPU);
    gpu_wait(0, "GPU 0 -> GPU 1 (sender)");
    gpu_wait(1, "GPU 0 -> GPU 1 (receiver)");
    t = now() - t0;
    ringk_p2pq_destroy(q);
    return N_GPU / t / 1e6;
}

/* CUDA devices, the mapped status words and a stream per GPU used: 0 GPUs without them. */
static void gpu_init(void)
{
    int i;

    if ((cudaGetDeviceCount(&ngpus) != cudaSuccess) || (ngpus < 1)) {
        cudaGetLastError();
        ngpus = 0;
        return;
    }
    if (cudaHostAlloc((void**)&status, 2 * sizeof(int),
                      cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
        DIE("cudaHostAlloc failed");
    }
    for (i = 0; i < 2; i++) {
        if ((cudaSetDevice((i < ngpus) ? i : 0) != cudaSuccess) ||
            (cudaStreamCreateWithFlags((cudaStream_t*)&streams[i], cudaStreamNonBlocking) !=
             cudaSuccess)) {
            DIE("cannot make a stream on CUDA device %d", i);
        }
    }
    cudaSetDevice(0);
}
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

static double median(int m, int rounds)
{
    double v[MAX_ROUNDS];

    memcpy(v, results[m], (size_t)rounds * sizeof(double));
    qsort(v, (size_t)rounds, sizeof(double), cmp_double);
    return (rounds % 2) ? v[rounds / 2] : (v[rounds / 2 - 1] + v[rounds / 2]) / 2;
}

int main(int argc, char **argv)
{
    int opt, rounds = 5, r, m, nmethods = HG_TPUT;
    double med[NMETHODS];
    char gg[RINGK_P2PQ_REASON_LEN + 64] = "";

    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed at its time limit keeps its lines */
    while ((opt = getopt(argc, argv, "r:")) != -1) {
        if ((opt != 'r') || ((rounds = atoi(optarg)) < 1) || (rounds > MAX_ROUNDS)) {
            fprintf(stderr, "usage: p2pq_bench [-r ROUNDS (1..%d)]\n", MAX_ROUNDS);
            return 2;
        }
    }
#ifdef BENCH_P2PQ_CUDA
    gpu_init();
    nmethods = (ngpus >= 2) ? NMETHODS : (ngpus == 1) ? GG_TPUT : HG_TPUT;
#endif
    printf("p2pq_bench: %d rounds, medians; elements of %zu bytes, queues of %u; %s\n", rounds,
           sizeof(bench_p2pq_elem_t), CAPACITY, (nmethods > HG_TPUT) ? "GPU methods too" :
           "host methods only (no CUDA device, or built without CUDA)");
    fflush(stdout);
    for (r = 0; r < rounds; r++) {
        results[HH_TPUT][r]   = host_method(0, 0);
        results[HH_RAW][r]    = host_method(1, 0);
        results[HH_LAT][r]    = host_method(0, 1);
        results[HH_RAWLAT][r] = host_method(1, 1);
#ifdef BENCH_P2PQ_CUDA
        if (nmethods > HG_TPUT) {
            results[HG_TPUT][r] = gpu_stream(1);
            results[GH_TPUT][r] = gpu_stream(0);
            results[HG_RT][r]   = gpu_round_trip();
        }
        if (nmethods > GG_TPUT) {
            ringk_p2pq_info_t info;

            results[GG_TPUT][r] = gpu_to_gpu(&info);
            snprintf(gg, sizeof(gg), "mode %d, direct P2P %d: %s", (int)info.mode,
                     info.direct_p2p, info.reason);
        }
#endif
        fprintf(stderr, "p2pq_bench: round %d of %d: queue %.2f Melem/s (bare %.2f), %.2f us "
                "(bare %.2f)\n", r + 1, rounds, results[HH_TPUT][r], results[HH_RAW][r],
                results[HH_LAT][r], results[HH_RAWLAT][r]);
    }
    for (m = 0; m < nmethods; m++) {
        med[m] = median(m, rounds);
    }
    printf("host -> host throughput: queue %.2f Melem/s, bare ring %.2f Melem/s: %.2fx\n",
           med[HH_TPUT], med[HH_RAW], med[HH_TPUT] / med[HH_RAW]);
    printf("host <-> host one-way latency: queue %.3f us, bare ring %.3f us: %.2fx\n",
           med[HH_LAT], med[HH_RAWLAT], med[HH_LAT] / med[HH_RAWLAT]);
    if (nmethods > HG_TPUT) {
        printf("host -> GPU0 %.2f Melem/s, GPU0 -> host %.2f Melem/s, host -> GPU0 -> host "
               "round trip %.2f us\n", med[HG_TPUT], med[GH_TPUT], med[HG_RT]);
    }
    if (nmethods > GG_TPUT) {
        printf("GPU0 -> GPU1 %.2f Melem/s (%s)\n", med[GG_TPUT], gg);
    }
    for (m = 0; m < nmethods; m++) {
        printf("RESULT p2pq_bench %s %.4f %s\n", names[m], med[m], units[m]);
    }
    return 0;
}
