/* SPDX-License-Identifier: BSD-3-Clause */
/* Device kernels of two processes sending to each other (driven by test_job.sh), on the
 * emulated device (test/kernels/ringk_dev_test.cu compiled as host C): in rank 0, device kernel
 * "fwd" forwards each message the host gives it to "sink"; in rank 1, device kernel "sink"
 * (inbox of 64 messages: the sender meets it full) counts them and checks their order. The
 * host of rank 0 feeds N messages {0, i}; rank 1's host, once sink has them all, terminates it
 * and tells CPU kernel "done" of rank 0, which then leaves (FIFO holds per sender only: a
 * terminate from rank 0's host could overtake fwd's messages on their way through the host).
 * Usage: job_device N [persistent|event|subscribe|die]: event makes sink event-driven (it
 * returns when idle, and fwd's sends ring its doorbell from the other process); subscribe makes
 * sink take messages from fwd only (the host checks that, so the sends go through it); die
 * leaves sink inactive and ends rank 1 without leaving the job 2 s after start, while fwd waits
 * for room in sink's full inbox: fwd's route goes back to the host, whose sends fail. The
 * sender dies instead in abandon (fwd claims cells in sink's inbox and never fills them: rank 1
 * must give them up, or sink could never terminate) and in nowake (fwd publishes into the inbox
 * of event-driven sink, parked, without waking it: rank 1 must wake it).
 * Whether the route was direct is read from fwd's statistics (sent_direct) and sink's counter
 * of messages that came through the host (staged), and from the log line rank 0 writes about
 * the route. Ends with "RESULT job_device rank=R size=2 ok=0|1 key=value ...".
 * Built with JOB_DEVICE_GPU (job_device_gpu, driven by test_job_gpu.sh), the same kernels
 * compiled by nvcc run on GPU 0 in both processes (sink on GPU JOB_DEVICE_SINK_GPU where that
 * is set), their result blocks in mapped memory; mode probe prints "gpus=N" and exits 0 where a
 * GPU is usable, 77 where not. */
#include "test/kernels/ringk_dev_test_params.h"

#include <ringk/api/ringk.h>

#ifdef JOB_DEVICE_GPU
#include <cuda_runtime_api.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t routes_direct, routes_host, routes_dropped, repaired, relaunched;
static ringk_dev_test_t *t_arg; /* the kernels' result block as the device addresses it */
static uint64_t done_got;

static int done_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_store_n(&done_got, 1, __ATOMIC_RELEASE);
    return 0;
}

static void count_routes(void *arg, int level, const char *message)
{
    if (strstr(message, "go straight into its device inbox") != NULL) {
        __atomic_add_fetch(&routes_direct, 1, __ATOMIC_RELAXED);
    } else if (strstr(message, "claimed and did not fill before it was lost") != NULL) {
        __atomic_add_fetch(&repaired, 1, __ATOMIC_RELAXED);
    } else if (strstr(message, "no launch runs while a process of the job is lost") != NULL) {
        __atomic_add_fetch(&relaunched, 1, __ATOMIC_RELAXED);
    } else if (strstr(message, "go through the host again") != NULL) {
        __atomic_add_fetch(&routes_dropped, 1, __ATOMIC_RELAXED);
    } else if (strstr(message, "go through the host") != NULL) {
        __atomic_add_fetch(&routes_host, 1, __ATOMIC_RELAXED);
    }
    if (level <= RINGK_LOG_WARN) {
        fprintf(stderr, "[ringk] %s\n", message);
    }
}

/* Waits up to 60 s for *@a v to reach @a want: 0, or -1. */
static int wait_u64(const uint64_t *v, uint64_t want)
{
    int ms;

    for (ms = 0; ms < 60000; ms++) {
        if (__atomic_load_n(v, __ATOMIC_ACQUIRE) >= want) {
            return 0;
        }
        usleep(1000);
    }
    return -1;
}

/* Rank 0 in abandon and nowake: fwd claims cells of sink's inbox and leaves them unfilled
 * (abandon: a payload of 16 bytes), or publishes {0, n} there without waking sink (nowake: 20
 * bytes, once sink parked), then the process ends without leaving the job. */
static void fwd_dies(ringk_ctx_t *ctx, uint64_t n, const char *mode, ringk_dev_test_t *tf)
{
    uint32_t v[5] = {0, (uint32_t)n, 0, 0, 0};
    int nowake    = (strcmp(mode, "nowake") == 0);
    int ok;

    /* nowake: rank 1 says when sink has parked (it is event-driven, with 50 idle turns) */
    ok = (!nowake || (wait_u64(&done_got, 1) == 0)) &&
         (ringk_send(ctx, NULL, "fwd", RINGK_MSG_DATA, v, nowake ? 20 : 16,
                     RINGK_WAIT_FOREVER) == 0) && (wait_u64(&tf->count, n + 1) == 0) &&
         (tf->codes[nowake ? 3 : 2] == 1);
    printf("job_device [rank 0 of 2]: fwd %s in sink's inbox; rank 0 ends now: %s\n",
           nowake ? "published a message without waking sink" : "left cells claimed", ok ? "OK" :
           "FAIL");
    printf("RESULT job_device rank=0 size=2 ok=%d direct=%d\n", ok, tf->codes[nowake ? 3 : 2]);
    fflush(stdout);
    _exit(ok ? 0 : 1); /* without leaving the job: rank 1 finds it lost */
}

/* fwd's statistics once its msgs_out reaches @a n, or after 60 s: a device kernel's loop
 * stores its counters in its upkeep (ringk_kernel_stats_query(3)), so they may come after sink
 * counted the last message. 0, or -1 (no statistics). */
static int fwd_stats(ringk_kernel_t *fwd, ringk_kernel_stats_t *st, uint64_t n)
{
    int ms;

    for (ms = 0; ms < 60000; ms++) {
        if (ringk_kernel_stats_query(fwd, st) != 0) {
            return -1;
        }
        if (st->msgs_out >= n) {
            break;
        }
        usleep(1000);
    }
    return 0;
}

static int run_fwd(ringk_ctx_t *ctx, uint64_t n, const char *mode, ringk_dev_test_t *tf,
                   ringk_kernel_stats_t *st)
{
    int die = (strcmp(mode, "die") == 0);

    static const char *const to_sink[] = {"sink", NULL};
    ringk_kernel_params_t p = dev_params("fwd", &ringk_dev_test_forward, t_arg);
    ringk_kernel_params_t dp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .name = "done", .handler = done_handler
    };
    ringk_kernel_t *fwd, *done;
    uint32_t v[2] = {0, 0};
    int fails = 0;

    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_sink;
    if ((ringk_kernel_create(ctx, &p, &fwd) != 0) || (ringk_kernel_create(ctx, &dp, &done) != 0) ||
        (ringk_ctx_start(ctx) != 0)) {
        return 1;
    }
    for (v[1] = 0; v[1] < n; v[1]++) {
        fails += (ringk_send(ctx, NULL, "fwd", RINGK_MSG_DATA, v, sizeof(v),
                             RINGK_WAIT_FOREVER) != 0);
    }
    fails += (wait_u64(&tf->count, n) != 0);
    fails += (fwd_stats(fwd, st, n) != 0);
    if ((fails == 0) && ((strcmp(mode, "abandon") == 0) || (strcmp(mode, "nowake") == 0))) {
        fwd_dies(ctx, n, mode, tf);
    }
    if (die) {
        /* every send is accounted for: into sink's inbox before rank 1 ended, or failed (the
         * proxy's sends through the host fail after fwd handed them over) */
        for (v[0] = 0; (v[0] < 60000) && (st->sent_direct + st->send_failed < n); v[0]++) {
            usleep(1000);
            fails += (ringk_kernel_stats_query(fwd, st) != 0);
        }
        return fails + ((st->sent_direct + st->send_failed != n) || (st->sent_direct >= n));
    }
    return fails + (wait_u64(&done_got, 1) != 0); /* rank 1 has them all */
}

static int run_sink(ringk_ctx_t *ctx, uint64_t n, const char *mode, ringk_dev_test_t *ts,
                    ringk_kernel_stats_t *st)
{
    static const char *const only_fwd[] = {"fwd", NULL};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, t_arg);
    const char *gpu = getenv("JOB_DEVICE_SINK_GPU");
    ringk_kernel_t *sink;

    if (gpu != NULL) { /* another GPU than fwd's: its route reaches it by peer access */
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_PLACEMENT;
        p.placement   = atoi(gpu);
    }
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.inbox_size  = 64;
    p.max_in      = 64;
    if ((strcmp(mode, "event") == 0) || (strcmp(mode, "nowake") == 0)) {
        p.field_mask    |= RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS;
        p.mode           = RINGK_MODE_EVENT_DRIVEN;
        p.max_iterations = 50;
    } else if (strcmp(mode, "subscribe") == 0) {
        p.field_mask   |= RINGK_KERNEL_PARAM_FIELD_SUBSCRIBES_TO;
        p.subscribes_to = only_fwd;
    }
    if ((ringk_kernel_create(ctx, &p, &sink) != 0) ||
        ((strcmp(mode, "die") == 0) && (ringk_kernel_deactivate(sink) != 0)) ||
        (ringk_ctx_start(ctx) != 0)) {
        return 1;
    }
    if (strcmp(mode, "die") == 0) {
        sleep(2);
        printf("job_device [rank 1 of 2]: sink took nothing; rank 1 ends now: OK\n");
        printf("RESULT job_device rank=1 size=2 ok=1 died=1\n");
        fflush(stdout);
        _exit(0); /* without leaving the job: rank 0 finds it lost */
    }
    if (strcmp(mode, "nowake") == 0) { /* the message rank 0 published and did not wake for */
        int ms, fails = (wait_u64(&ts->count, n) != 0);

        for (ms = 0; (ms < 60000) && (ringk_kernel_stats_query(sink, st) == 0) && !st->parked;
             ms++) {
            usleep(1000);
        }
        usleep(50000); /* parked: its launch returns (a look at its inbox after 'idle') */
        fails += !st->parked || (ringk_send(ctx, NULL, "done", RINGK_MSG_DATA, &ts->count,
                                            sizeof(ts->count), RINGK_WAIT_FOREVER) != 0);
        return fails + (wait_u64(&ts->count, n + 1) != 0) + (ringk_kernel_terminate(sink) != 0) +
               (ringk_kernel_stats_query(sink, st) != 0);
    }
    wait_u64(&ts->count, n);
    if (strcmp(mode, "abandon") == 0) { /* sink terminates once the cells are given up */
        return (wait_u64(&repaired, 1) != 0) + (ringk_kernel_terminate(sink) != 0) +
               (ringk_kernel_stats_query(sink, st) != 0);
    }
    return (ringk_kernel_terminate(sink) != 0) + (ringk_kernel_stats_query(sink, st) != 0) +
           (ringk_send(ctx, NULL, "done", RINGK_MSG_DATA, &ts->count, sizeof(ts->count),
                       RINGK_WAIT_FOREVER) != 0);
}

int main(int argc, char **argv)
{
    const uint64_t n = (argc > 1) ? strtoull(argv[1], NULL, 10) : 1000;
    const char *mode = (argc > 2) ? argv[2] : "persistent";
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = count_routes};
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    static ringk_dev_test_t t_emu; /* the kernel's argument: memory it may write until it is
                                      gone */
    ringk_dev_test_t *tp = &t_emu;
    ringk_ctx_t *ctx;
    int rank, fails;

#ifdef JOB_DEVICE_GPU
    void *host = NULL, *dev = NULL;
    int ngpu = 0;

    if ((cudaGetDeviceCount(&ngpu) != cudaSuccess) || (ngpu < 1)) {
        printf("job_device_gpu: no usable CUDA device\n");
        return 77;
    }
    if (strcmp(mode, "probe-peer") == 0) {
        /* 0: device kernels of GPU 0 can write GPU 1's memory (the topology's path is peer
         * access, with native atomics, CUDA agrees, and RINGK_DEVICE_PEER allows it) */
        const char *env = getenv("RINGK_DEVICE_PEER");
        ringk_peer_info_t info;
        int can = 0, usable;

        memset(&info, 0, sizeof(info));
        usable = (ngpu >= 2) && (ringk_peer_can_access(0, 1, &info) == 0) && info.can_access &&
                 (info.native_atomics == 1) && (cudaDeviceCanAccessPeer(&can, 0, 1) == 0) &&
                 can && ((env == NULL) || (strcmp(env, "0") != 0));
        printf("GPU0 -> GPU1: %s (path %s, native atomics %d: %s)\n",
               usable ? "peer access" : "no peer access", ringk_peer_path_name(info.path),
               info.native_atomics, info.reason);
        return !usable;
    }
    if (strcmp(mode, "probe") == 0) {
        printf("gpus=%d\n", ngpu);
        return 0;
    }
    /* before the context: a pinned allocation may wait for resident kernels */
    if ((cudaHostAlloc(&host, sizeof(ringk_dev_test_t),
                       cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) ||
        (cudaHostGetDevicePointer(&dev, host, 0) != cudaSuccess)) {
        return 2;
    }
    memset(host, 0, sizeof(ringk_dev_test_t));
    tp    = host;
    t_arg = dev;
#else
    t_arg = tp;
#endif
    if ((ringk_ctx_create(&cp, &ctx) != 0) || (ringk_ctx_size(ctx) != 2)) {
        return 2;
    }
    rank  = ringk_ctx_rank(ctx);
    fails = (rank == 0) ? run_fwd(ctx, n, mode, tp, &st) : run_sink(ctx, n, mode, tp, &st);
    ringk_ctx_destroy(ctx);
    if (rank == 0) {
        fails += (tp->last_error != 0);
        printf("job_device [rank 0 of 2]: fwd forwarded %llu of %llu, %llu of them straight "
               "into sink's device inbox: %s\n", (unsigned long long)tp->count,
               (unsigned long long)n, (unsigned long long)st.sent_direct, fails ? "FAIL" : "OK");
        printf("RESULT job_device rank=0 size=2 ok=%d sent=%llu expected=%llu sent_direct=%llu "
               "send_failed=%llu last_error=%d routes_direct=%llu routes_host=%llu "
               "routes_dropped=%llu\n", fails == 0, (unsigned long long)tp->count,
               (unsigned long long)n, (unsigned long long)st.sent_direct,
               (unsigned long long)st.send_failed, tp->last_error,
               (unsigned long long)routes_direct, (unsigned long long)routes_host,
               (unsigned long long)routes_dropped);
    } else {
        /* nowake: and the message rank 0 published before it ended */
        uint64_t want = n + (strcmp(mode, "nowake") == 0);

        fails += (tp->count != want) || (tp->out_of_order != 0) || (tp->bad != 0) ||
                 (tp->next[0] != want);
        printf("job_device [rank 1 of 2]: sink (%s) got %llu of %llu, %llu out of order, %llu "
               "through the host, %llu launches: %s\n", mode, (unsigned long long)tp->count,
               (unsigned long long)want, (unsigned long long)tp->out_of_order,
               (unsigned long long)tp->staged, (unsigned long long)st.launches,
               fails ? "FAIL" : "OK");
        printf("RESULT job_device rank=1 size=2 ok=%d got=%llu expected=%llu out_of_order=%llu "
               "bad=%llu staged=%llu launches=%llu repaired=%llu relaunched=%llu\n", fails == 0,
               (unsigned long long)tp->count, (unsigned long long)want,
               (unsigned long long)tp->out_of_order, (unsigned long long)tp->bad,
               (unsigned long long)tp->staged, (unsigned long long)st.launches,
               (unsigned long long)repaired, (unsigned long long)relaunched);
    }
    return fails ? 1 : 0;
}
