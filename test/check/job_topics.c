/* SPDX-License-Identifier: BSD-3-Clause */
/* Topic fan-out across the processes of a job (driven by test_job.sh): every rank has two
 * subscribers of "news"; rank 0 publishes M messages; each publish must reach all 2 x size
 * subscribers (one active message per other process), and every subscriber must get all M in
 * order. Prints one line per rank ending in OK or FAIL, then one for the script: "RESULT
 * job_topics rank=R size=N ok=0|1 key=value ..." (ok=1: exit 0). */
#include <ringk/api/ringk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUBS 2

static uint64_t got[SUBS], bad;

static int sub_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uintptr_t j = (uintptr_t)arg;
    uint64_t v;

    memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    if ((msg->receiver != RINGK_MSG_BROADCAST) || (v != got[j])) {
        bad++;
    }
    got[j]++;
    return 0;
}

static int nop(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return 0;
}

int main(int argc, char **argv)
{
    static const char *sub[] = {"news", NULL};
    const uint64_t m = (argc > 1) ? strtoull(argv[1], NULL, 10) : 1000;
    ringk_kernel_t *k[SUBS], *stopper;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    const char *all[64 + 1];
    char names[64][16];
    ringk_ctx_t *ctx;
    unsigned delivered, j;
    int rank, size, r, ret, fails = 0, short_publishes = 0;
    uint64_t i;

    if (ringk_ctx_create(NULL, &ctx) != 0) {
        return 1;
    }
    rank = ringk_ctx_rank(ctx);
    size = ringk_ctx_size(ctx);
    if (size * SUBS > 64) {
        return 2;
    }
    for (r = 0; r < size; r++) {
        for (j = 0; j < SUBS; j++) {
            snprintf(names[r * SUBS + j], sizeof(names[0]), "sub%d_%u", r, j);
            all[r * SUBS + j] = names[r * SUBS + j];
        }
    }
    all[size * SUBS] = NULL;
    for (j = 0; j < SUBS; j++) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB | RINGK_KERNEL_PARAM_FIELD_MODE |
                          RINGK_KERNEL_PARAM_FIELD_MAX_IN,
            .name = names[rank * SUBS + j], .handler = sub_handler, .arg = (void*)(uintptr_t)j,
            .topics_sub = sub, .mode = RINGK_MODE_EVENT_DRIVEN, .max_in = 64
        };
        if (ringk_kernel_create(ctx, &p, &k[j]) != 0) {
            return 1;
        }
    }
    if (rank == 0) { /* a kernel allowed to send TERMINATE to every subscriber */
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
            .name = "stopper", .handler = nop, .publishes_to = all
        };
        if (ringk_kernel_create(ctx, &p, &stopper) != 0) {
            return 1;
        }
    }
    if (ringk_ctx_start(ctx) != 0) {
        return 1;
    }
    if (rank == 0) {
        for (i = 0; i < m; i++) {
            ret = ringk_publish(ctx, NULL, "news", &i, sizeof(i), RINGK_WAIT_FOREVER, &delivered);
            if ((ret != size * SUBS) || (delivered != (unsigned)(size * SUBS))) {
                fprintf(stderr, "publish %llu reached %u of %d (ret %d)\n",
                        (unsigned long long)i, delivered, size * SUBS, ret);
                short_publishes++;
            }
        }
        for (r = 0; r < size * SUBS; r++) {
            ringk_send(ctx, stopper, all[r], RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
        }
    }
    for (j = 0; j < SUBS; j++) {
        do {
            usleep(1000);
            ringk_kernel_stats_query(k[j], &st);
        } while (st.state != RINGK_KERNEL_TERMINATED);
        fails += (got[j] != m);
    }
    fails += (bad != 0) + short_publishes;
    ringk_ctx_destroy(ctx);
    printf("topics [rank %d of %d]: %d subscribers got %llu and %llu of %llu, %llu out of order: "
           "%s\n", rank, size, SUBS, (unsigned long long)got[0], (unsigned long long)got[1],
           (unsigned long long)m, (unsigned long long)bad, fails ? "FAIL" : "OK");
    /* short: rank 0's publishes that reached fewer than all subscribers */
    printf("RESULT job_topics rank=%d size=%d ok=%d subscribers=%d got0=%llu got1=%llu "
           "expected=%llu out_of_order=%llu short=%d\n", rank, size, fails == 0, SUBS,
           (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)m,
           (unsigned long long)bad, short_publishes);
    return fails ? 1 : 0;
}
