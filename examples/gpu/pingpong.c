/* SPDX-License-Identifier: BSD-3-Clause */
/* Ping-pong between a CPU ring kernel and a device ring kernel: "ping" (a CPU kernel) and
 * "pong" (backends CPU | CUDA: a kernel on the GPU when there is one, else the CPU kernel with
 * the same logic; built as host C, the emulated device) bounce a counter ROUNDS times; every
 * value is checked and the round-trip time printed. In one process, or in a job of two
 * (RINGK_ROOT=host:port RINGK_RANK=0|1 RINGK_SIZE=2): rank 0 runs ping, rank 1 pong. Each
 * process ends with one line "RESULT gpu_pingpong rank=R size=N ok=0|1 device=D key=value"
 * for scripts; ok=1 (exit 0) when every ball arrived with the value expected.
 * Usage: pingpong [ROUNDS] */
#include "examples/example_job.h"
#include "examples/gpu/pingpong.h"

#include <ringk/api/ringk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rounds = 20000, done, ping_errors;
static struct timespec t_last;

static int ping(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;

    if (msg->length != sizeof(v)) {
        ping_errors++;
        return -1;
    }
    memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    if (v == rounds) {
        clock_gettime(CLOCK_MONOTONIC, &t_last);
        /* pong drains, then stops (in whichever process and on whichever device it runs) */
        ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_TERMINATE, NULL, 0,
                         RINGK_WAIT_FOREVER);
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
        example_notify();
        return 0;
    }
    v++;
    return ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_DATA, &v, sizeof(v),
                            RINGK_WAIT_FOREVER);
}

/* pong on the CPU: the device handler's logic (pong_ball), sent with the host API */
static int pong_cpu(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return pong_ball(arg, ringk_msg_payload(msg), msg->length) ?
           ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_DATA, ringk_msg_payload(msg),
                            msg->length, RINGK_WAIT_FOREVER) : -1;
}

int main(int argc, char **argv)
{
    static const char *to_pong[] = {"pong", NULL}, *to_ping[] = {"ping", NULL};
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = example_log};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                      RINGK_KERNEL_PARAM_FIELD_MAX_OUT,
        .max_in = 64, .max_out = 64
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *kping = NULL, *kpong = NULL;
    pong_state_t *pong_host = NULL;
    void *pong_dev = NULL;
    struct timespec t0, t1;
    uint64_t one = 1, seen = 0, errors;
    int rank, size, ret;
    double us;
    ringk_ctx_t *ctx;

    example_job_begin(&cp, &argc, &argv);
    if (argc > 1) {
        rounds = strtoull(argv[1], NULL, 10);
    }
    if ((rounds == 0) || (ringk_ctx_create(&cp, &ctx) != 0)) {
        fprintf(stderr, "usage: pingpong [ROUNDS >= 1]\n");
        return 2;
    }
    rank = ringk_ctx_rank(ctx);
    size = ringk_ctx_size(ctx);
    if (size > 2) {
        fprintf(stderr, "pingpong: runs as 1 or 2 processes, not %d\n", size);
        return 2;
    }
    if (rank == 0) {
        p.name         = "ping";
        p.handler      = ping;
        p.publishes_to = to_pong;
        if (ringk_kernel_create(ctx, &p, &kping) != 0) {
            return 1;
        }
    }
    if ((size == 1) || (rank == 1)) {
        /* allocated before any device kernel runs */
        pong_host = example_shared_alloc(sizeof(*pong_host), &pong_dev);
        if (pong_host == NULL) {
            fprintf(stderr, "pingpong: cannot allocate pong's state\n");
            return 1;
        }
        p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_BACKENDS | RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY |
                         RINGK_KERNEL_PARAM_FIELD_THREADS;
        p.threads      = 1;                   /* pong's handler is one thread's */
        p.name         = "pong";
        p.handler      = pong_cpu;            /* the CPU, when there is no device */
        p.device_entry = &example_pong_entry; /* the device, when there is one */
        p.backends     = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
        p.publishes_to = to_ping;
        p.arg          = pong_dev; /* without a device, a host address: the CPU's too */
        ret = ringk_kernel_create(ctx, &p, &kpong);
        if (ret != 0) {
            fprintf(stderr, "pingpong: pong: %s\n", strerror(-ret));
            return 1;
        }
        ringk_kernel_stats_query(kpong, &st);
        printf("pingpong: pong runs on the %s\n", example_where(st.device));
    }
    if (ringk_ctx_start(ctx) != 0) {
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (rank == 0) {
        /* the host serves the first ball to pong as if ping had sent it */
        if (ringk_send(ctx, NULL, "pong", RINGK_MSG_DATA, &one, sizeof(one), RINGK_WAIT_FOREVER)) {
            return 1;
        }
        while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
            if (example_idle(ctx) != 0) {
                ringk_ctx_destroy(ctx);
                return 1;
            }
        }
    }
    if ((kpong != NULL) && (example_wait_terminated(ctx, &kpong, 1) != 0)) {
        ringk_ctx_destroy(ctx);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rank == 0) {
        t1 = t_last;
    }
    us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3;
    if (kpong != NULL) {
        ringk_kernel_stats_query(kpong, &st);
    }
    ringk_ctx_destroy(ctx);
    errors = ping_errors;
    if (pong_host != NULL) {
        seen    = pong_host->seen;
        errors += pong_host->errors;
        example_shared_free(pong_host);
        if (seen != rounds) {
            errors++;
        }
    }
    if (rank == 0) {
        printf("pingpong%s: %llu round trips between a CPU kernel and pong (%s), %llu errors, "
               "%.3f us per round trip\n", (size > 1) ? " [rank 0 of 2]" : "",
               (unsigned long long)rounds, (kpong != NULL) ? example_where(st.device) :
               "in rank 1", (unsigned long long)errors, us / rounds);
    }
    /* device: pong's ringk_kernel_stats_t.device (a CUDA index, -2 emulated, -1 the CPU; -3 in
     * the process without pong) */
    printf("RESULT gpu_pingpong rank=%d size=%d ok=%d device=%d rounds=%llu seen=%llu "
           "errors=%llu launches=%llu\n", rank, size, errors == 0, (kpong == NULL) ? -3 : st.device,
           (unsigned long long)rounds, (unsigned long long)seen, (unsigned long long)errors,
           (unsigned long long)st.launches);
    example_job_end();
    return errors ? 1 : 0;
}
