/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk side of bench/runtime_vs.sh: local K2K one-way throughput (a source kernel streams N
 * 8-byte messages to a sink kernel) or ping-pong (two kernels bounce a counter N times).
 * Prints "RESULT <msgs/s | us per round trip>". */
#include <ringk/api/ringk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static ringk_ctx_t *ctx;
static uint64_t n = 2000000, done;
/* The sink's counters, on a cache line of their own (the type's alignment pads it to 64 bytes):
 * the source reads ctx and n on every send, and a line the sink writes per message would make
 * every one of those reads a miss. */
struct sink_counts {
    uint64_t got, bad;
} __attribute__((aligned(64)));
static struct sink_counts sc;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int sink(ringk_kernel_t *k, const ringk_msg_t *m, void *a)
{
    uint64_t v;
    memcpy(&v, ringk_msg_payload(m), 8);
    sc.bad += (v != sc.got);
    if (++sc.got == n) {
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    }
    return 0;
}

/* sends by route number (looked up once) */
static int source_by_route(ringk_kernel_t *k, const ringk_msg_t *m, void *a)
{
    int route = ringk_route_find(ctx, k, "sink");
    uint64_t i;
    for (i = 0; i < n; i++) {
        ringk_send_route(ctx, k, route, RINGK_MSG_DATA, &i, 8, RINGK_WAIT_FOREVER);
    }
    return 0;
}

/* sends by name */
static int source(ringk_kernel_t *k, const ringk_msg_t *m, void *a)
{
    uint64_t i;
    for (i = 0; i < n; i++) {
        ringk_send(ctx, k, "sink", RINGK_MSG_DATA, &i, 8, RINGK_WAIT_FOREVER);
    }
    return 0;
}

static int ball(ringk_kernel_t *k, const ringk_msg_t *m, void *a)
{
    uint64_t v;
    memcpy(&v, ringk_msg_payload(m), 8);
    if (v >= n) {
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
        return 0;
    }
    v++;
    return ringk_send(ctx, k, (const char*)a, RINGK_MSG_DATA, &v, 8, RINGK_WAIT_FOREVER);
}

int main(int argc, char **argv)
{
    static const char *to_sink[] = {"sink", NULL}, *to_a[] = {"a", NULL}, *to_b[] = {"b", NULL};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_PROCESSING,
        .max_in = 64, .inbox_size = 1024, .processing = RINGK_PROCESSING_BATCH
    };
    int pingpong = (argc > 1) && !strcmp(argv[1], "pingpong");
    int by_route = (argc > 1) && !strcmp(argv[1], "throughput_route");
    ringk_kernel_t *k;
    uint64_t zero = 0;
    double t0;

    if (argc > 2) {
        n = strtoull(argv[2], NULL, 10);
    }
    if (ringk_ctx_create(NULL, &ctx) != 0) {
        return 1;
    }
    if (!pingpong) {
        p.name = "sink"; p.handler = sink; p.publishes_to = NULL;
        ringk_kernel_create(ctx, &p, &k);
        p.name = "source"; p.handler = by_route ? source_by_route : source;
        p.publishes_to = to_sink;
        ringk_kernel_create(ctx, &p, &k);
        t0 = now();
        ringk_send(ctx, NULL, "source", RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_FOREVER);
    } else {
        p.processing = RINGK_PROCESSING_CONTINUOUS;
        p.name = "a"; p.handler = ball; p.arg = "b"; p.publishes_to = to_b;
        ringk_kernel_create(ctx, &p, &k);
        p.name = "b"; p.handler = ball; p.arg = "a"; p.publishes_to = to_a;
        ringk_kernel_create(ctx, &p, &k);
        t0 = now();
        ringk_send(ctx, NULL, "a", RINGK_MSG_DATA, &zero, 8, RINGK_WAIT_FOREVER);
    }
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        usleep(200);
    }
    t0 = now() - t0;
    ringk_ctx_destroy(ctx);
    if (sc.bad) {
        fprintf(stderr, "k2k_ringk: %llu out of order\n", (unsigned long long)sc.bad);
        return 1;
    }
    /* ping-pong: n hops = n/2 round trips */
    printf("RESULT %.4f\n", pingpong ? t0 / (n / 2.0) * 1e6 : n / t0);
    return 0;
}
