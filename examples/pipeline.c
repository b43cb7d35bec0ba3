/* SPDX-License-Identifier: BSD-3-Clause */
/* Pipeline of ring kernels: a producer deals N work items round-robin to W worker kernels, the
 * workers transform them and send the results to an aggregator, which sums them. The sum is
 * compared with a sequential computation. In a job, the producer and aggregator run in rank 0
 * and worker i in rank i % size. Each process ends with one line "RESULT pipeline rank=R size=N
 * ok=0|1 key=value ..." for scripts; in rank 0, ok=1 (exit 0) when the sum matches.
 * Usage: pipeline [N [W]] */
#include "example_job.h"

#include <ringk/api/ringk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_WORKERS 16

static uint64_t n = 200000, sum, got, done;
static unsigned workers = 4;
static char worker_names[MAX_WORKERS][16];

static uint64_t work(uint64_t x)
{
    return (x * x + 7 * x) % 1000003; /* the same function for the sequential check */
}

static int producer(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t x;
    int ret;

    for (x = 1; x <= n; x++) {
        ret = ringk_send(ringk_kernel_ctx(k), k, worker_names[x % workers], RINGK_MSG_DATA, &x,
                         sizeof(x), RINGK_WAIT_FOREVER);
        if (ret != 0) {
            return ret;
        }
    }
    return 0;
}

static int worker(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t x;

    memcpy(&x, ringk_msg_payload(msg), sizeof(x));
    x = work(x);
    return ringk_send(ringk_kernel_ctx(k), k, "aggregator", RINGK_MSG_DATA, &x, sizeof(x),
                      RINGK_WAIT_FOREVER);
}

static int aggregator(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t y;
    unsigned i;

    memcpy(&y, ringk_msg_payload(msg), sizeof(y));
    sum += y;
    if (++got == n) {
        /* the workers may run in other processes: stop them */
        for (i = 0; i < workers; i++) {
            ringk_send(ringk_kernel_ctx(k), k, worker_names[i], RINGK_MSG_TERMINATE, NULL, 0,
                       RINGK_WAIT_FOREVER);
        }
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
        example_notify();
    }
    return 0;
}

int main(int argc, char **argv)
{
    ringk_ctx_t *ctx;
    static const char *to_agg[] = {"aggregator", NULL};
    const char *to_workers[MAX_WORKERS + 1];
    ringk_kernel_t *mine[MAX_WORKERS];
    unsigned nmine = 0;
    int rank, size;
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = example_log};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                      RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_PROCESSING,
        .max_in = 64, .processing = RINGK_PROCESSING_BATCH
    };
    uint64_t expect = 0, x;
    ringk_kernel_t *k;
    unsigned i;

    example_job_begin(&cp, &argc, &argv);
    if (argc > 1) {
        n = strtoull(argv[1], NULL, 10);
    }
    if (argc > 2) {
        workers = (unsigned)atoi(argv[2]);
    }
    if ((workers < 1) || (workers > MAX_WORKERS) || (n < 1)) {
        fprintf(stderr, "usage: pipeline [N>=1 [WORKERS 1..%d]]\n", MAX_WORKERS);
        return 2;
    }
    if (ringk_ctx_create(&cp, &ctx) != 0) {
        return 1;
    }
    rank = ringk_ctx_rank(ctx);
    size = ringk_ctx_size(ctx);
    for (i = 0; i < workers; i++) {
        snprintf(worker_names[i], sizeof(worker_names[i]), "worker%u", i);
        to_workers[i] = worker_names[i];
    }
    to_workers[workers] = NULL;
    if (rank == 0) {
        p.name = "aggregator"; p.handler = aggregator; p.mode = RINGK_MODE_PERSISTENT;
        p.publishes_to = to_workers; /* for the final TERMINATE */
        if (ringk_kernel_create(ctx, &p, &k) != 0) {
            return 1;
        }
    }
    /* workers are event-driven: run by the pool when items arrive */
    for (i = 0; i < workers; i++) {
        if ((int)(i % size) != rank) {
            continue;
        }
        p.name = worker_names[i]; p.handler = worker; p.mode = RINGK_MODE_EVENT_DRIVEN;
        p.publishes_to = to_agg;
        if (ringk_kernel_create(ctx, &p, &mine[nmine++]) != 0) {
            return 1;
        }
    }
    if (rank == 0) {
        p.name = "producer"; p.handler = producer; p.mode = RINGK_MODE_PERSISTENT;
        p.publishes_to = to_workers;
        if (ringk_kernel_create(ctx, &p, &k) != 0) {
            return 1;
        }
    }
    if (ringk_ctx_start(ctx) != 0) {
        return 1;
    }
    if (rank != 0) {
        if (example_serve(ctx, mine, nmine) != 0) {
            return 1;
        }
        printf("pipeline [rank %d of %d]: %u worker kernel(s) done\n", rank, size, nmine);
        printf("RESULT pipeline rank=%d size=%d ok=1 kernels=%u\n", rank, size, nmine);
        example_job_end();
        return 0;
    }
    if (ringk_send(ctx, NULL, "producer", RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_FOREVER) != 0) {
        return 1;
    }
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        if (example_idle(ctx) != 0) {
            ringk_ctx_destroy(ctx);
            return 1;
        }
    }
    ringk_ctx_destroy(ctx);
    for (x = 1; x <= n; x++) {
        expect += work(x);
    }
    printf("pipeline%s: %llu items through %u workers in %d process(es), sum %llu, sequential "
           "%llu: %s\n", (size > 1) ? " [rank 0]" : "", (unsigned long long)n, workers, size,
           (unsigned long long)sum, (unsigned long long)expect, (sum == expect) ? "OK" : "MISMATCH");
    printf("RESULT pipeline rank=0 size=%d ok=%d kernels=%u items=%llu workers=%u sum=%llu "
           "sequential=%llu match=%d\n", size, sum == expect, nmine, (unsigned long long)n,
           workers, (unsigned long long)sum, (unsigned long long)expect, sum == expect);
    example_job_end();
    return (sum == expect) ? 0 : 1;
}
