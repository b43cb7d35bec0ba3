/* SPDX-License-Identifier: BSD-3-Clause */
/* subscribes_to across processes (driven by test_job.sh): in rank 1, kernel "sink" subscribes
 * to "a" only; in rank 0, kernels "a" and "b" both publish to it and send N messages each,
 * interleaved, then "a" terminates it. The sink must get a's N in order and none of b's, and
 * rank 1 must log each of b's as refused. Prints one line per rank ending in OK or FAIL, then one
 * for the script: "RESULT job_subscribe rank=R size=2 ok=0|1 key=value ..." (ok=1: exit 0). */
#include <ringk/api/ringk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t from_a, from_b, bad, refused;

/* A line repeated within a few seconds is logged once, then as "(the line before was repeated
 * N more times: ...)" before the next other line or when the context goes. */
static void count_refusals(void *arg, int level, const char *message)
{
    unsigned more;

    if (strstr(message, "does not subscribe") == NULL) {
        return;
    }
    if (sscanf(message, "(the line before was repeated %u more times", &more) == 1) {
        __atomic_add_fetch(&refused, more, __ATOMIC_RELAXED);
    } else {
        __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
    }
}

static int sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;

    memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    if (v >= 1000) {
        from_b++;
    } else if (v != from_a++) {
        bad++;
    }
    return 0;
}

static int nop(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return 0;
}

int main(int argc, char **argv)
{
    static const char *to_sink[] = {"sink", NULL}, *only_a[] = {"a", NULL};
    const uint64_t n = (argc > 1) ? strtoull(argv[1], NULL, 10) : 20;
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = count_refusals};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER
    };
    ringk_kernel_t *a = NULL, *b = NULL, *k = NULL;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_ctx_t *ctx;
    int rank, fails = 0;
    uint64_t i, v;

    if ((n >= 1000) || (ringk_ctx_create(&cp, &ctx) != 0) || (ringk_ctx_size(ctx) != 2)) {
        return 2;
    }
    rank = ringk_ctx_rank(ctx);
    if (rank == 0) {
        p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
        p.handler      = nop;
        p.publishes_to = to_sink;
        p.name         = "a";
        fails += (ringk_kernel_create(ctx, &p, &a) != 0);
        p.name = "b";
        fails += (ringk_kernel_create(ctx, &p, &b) != 0);
    } else {
        p.field_mask   |= RINGK_KERNEL_PARAM_FIELD_SUBSCRIBES_TO;
        p.name          = "sink";
        p.handler       = sink;
        p.subscribes_to = only_a;
        fails += (ringk_kernel_create(ctx, &p, &k) != 0);
    }
    if (fails || (ringk_ctx_start(ctx) != 0)) {
        return 1;
    }
    if (rank == 0) { /* the main thread sends as a and b, one thread at a time */
        for (i = 0; i < n; i++) {
            v = 1000 + i;
            fails += (ringk_send(ctx, b, "sink", RINGK_MSG_DATA, &v, 8, RINGK_WAIT_FOREVER) != 0);
            fails += (ringk_send(ctx, a, "sink", RINGK_MSG_DATA, &i, 8, RINGK_WAIT_FOREVER) != 0);
        }
        fails += (ringk_send(ctx, a, "sink", RINGK_MSG_TERMINATE, NULL, 0,
                             RINGK_WAIT_FOREVER) != 0);
    } else {
        do {
            usleep(1000);
            ringk_kernel_stats_query(k, &st);
        } while (st.state != RINGK_KERNEL_TERMINATED);
    }
    ringk_ctx_destroy(ctx); /* says the count of repeated lines still held back */
    if (rank != 0) {
        /* b's messages came before a's terminate, on the same way */
        fails += (from_a != n) || (from_b != 0) || (bad != 0) ||
                 (__atomic_load_n(&refused, __ATOMIC_RELAXED) != n);
    }
    if (rank == 0) {
        printf("subscribe [rank 0 of 2]: sent %llu from a and %llu from b: %s\n",
               (unsigned long long)n, (unsigned long long)n, fails ? "FAIL" : "OK");
        printf("RESULT job_subscribe rank=0 size=2 ok=%d sent_a=%llu sent_b=%llu "
               "send_failures=%d\n", fails == 0, (unsigned long long)n, (unsigned long long)n,
               fails);
    } else {
        printf("subscribe [rank 1 of 2]: sink got %llu of %llu from a (%llu out of order), %llu "
               "from b, %llu refused and logged: %s\n", (unsigned long long)from_a,
               (unsigned long long)n, (unsigned long long)bad, (unsigned long long)from_b,
               (unsigned long long)refused, fails ? "FAIL" : "OK");
        printf("RESULT job_subscribe rank=1 size=2 ok=%d from_a=%llu expected=%llu "
               "out_of_order=%llu from_b=%llu refused=%llu\n", fails == 0,
               (unsigned long long)from_a, (unsigned long long)n, (unsigned long long)bad,
               (unsigned long long)from_b, (unsigned long long)refused);
    }
    return fails ? 1 : 0;
}
