/* SPDX-License-Identifier: BSD-3-Clause */
/* A named barrier across the processes of a job (driven by test_job.sh): every rank has two
 * kernels taking part in barrier "step"; in each of R rounds a kernel tells a checker in rank 0
 * that it arrived, waits at the barrier, then tells it that it passed. The checker fails if any
 * kernel passes round r before all kernels of all ranks arrived at round r.
 *   job_barrier left|lost: rank 1's kernels never arrive, and after 300 ms rank 1 leaves the
 *   job (ringk_ctx_destroy) or exits without leaving; rank 0's kernels, waiting at the barrier
 *   without a timeout, must each get -EPIPE instead of waiting for ever.
 * Every process ends with one line for the script, "RESULT job_barrier rank=R size=N ok=0|1
 * key=value ..." (ok=1: exit 0); rank 1 of lost prints it just before it exits. */
#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PER_RANK 2
#define ROUNDS   10

typedef struct {
    int32_t round;
    int32_t passed;
} note_t;

static ringk_ctx_t *ctx;
static int total, arrived[ROUNDS], early, passed_total, done, errors;

static int member(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    note_t n;
    int r;

    for (r = 0; r < ROUNDS; r++) {
        n.round  = r;
        n.passed = 0;
        if (ringk_send(ctx, k, "checker", RINGK_MSG_DATA, &n, sizeof(n), RINGK_WAIT_FOREVER) ||
            ringk_barrier_wait(k, "step", 30000)) {
            __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
            return -1;
        }
        n.passed = 1;
        if (ringk_send(ctx, k, "checker", RINGK_MSG_DATA, &n, sizeof(n), RINGK_WAIT_FOREVER)) {
            return -1;
        }
    }
    return 0;
}

/* gone mode: one wait without a timeout, its result counted */
static int gone_epipe, gone_other, gone_done;

static int gone_member(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    int ret = ringk_barrier_wait(k, "step", RINGK_WAIT_FOREVER);

    __atomic_fetch_add((ret == -EPIPE) ? &gone_epipe : &gone_other, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&gone_done, 1, __ATOMIC_RELEASE);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* rank 1 goes (leaves or dies) while rank 0's kernels wait at the barrier */
static int gone_main(int rank, int size, int die, const char *const *names)
{
    double t0, waited;
    int j, ok;

    if (rank != 0) {
        usleep(300000);
        if (die) {
            printf("RESULT job_barrier rank=%d size=%d ok=1 left=0\n", rank, size);
            fflush(stdout);
            _exit(0); /* without leaving: the others must count this process lost */
        }
        ringk_ctx_destroy(ctx);
        printf("barrier %s [rank %d of %d]: left\n", die ? "lost" : "left", rank, size);
        printf("RESULT job_barrier rank=%d size=%d ok=1 left=1\n", rank, size);
        return 0;
    }
    for (j = 0; j < PER_RANK; j++) {
        ringk_send(ctx, NULL, names[j], RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_FOREVER);
    }
    t0 = now_s();
    while ((__atomic_load_n(&gone_done, __ATOMIC_ACQUIRE) < PER_RANK) && (now_s() - t0 < 20)) {
        usleep(1000);
    }
    waited = now_s() - t0;
    ok     = (gone_epipe == PER_RANK) && (gone_other == 0);
    printf("barrier %s [rank 0 of %d]: %d of %d kernels left the barrier with EPIPE (%d other) "
           "after %.2f s: %s\n", die ? "lost" : "left", size, gone_epipe, PER_RANK, gone_other,
           waited, ok ? "OK" : "FAIL");
    /* epipe, other: the kernels' waits that ended with -EPIPE, with anything else */
    printf("RESULT job_barrier rank=0 size=%d ok=%d kernels=%d epipe=%d other=%d waited_ms=%d\n",
           size, ok, PER_RANK, gone_epipe, gone_other, (int)(waited * 1000));
    if (ok) {
        ringk_ctx_destroy(ctx);
    }
    return ok ? 0 : 1;
}

static int checker(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const note_t *n = ringk_msg_payload(msg);

    if ((n->round < 0) || (n->round >= ROUNDS)) {
        return -1;
    }
    if (!n->passed) {
        arrived[n->round]++;
    } else {
        early += (arrived[n->round] != total);
        if (++passed_total == total * ROUNDS) {
            __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const int gone = (argc > 1) && (!strcmp(argv[1], "left") || !strcmp(argv[1], "lost"));
    static const char *bar[] = {"step", NULL}, *to_checker[] = {"checker", NULL};
    const char *all[64 + 1];
    char names[64][16];
    ringk_kernel_t *k[PER_RANK], *kc = NULL;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    int rank, size, r, j, fails = 0, handler_errors = 0;

    if (ringk_ctx_create(NULL, &ctx) != 0) {
        return 1;
    }
    rank  = ringk_ctx_rank(ctx);
    size  = ringk_ctx_size(ctx);
    total = size * PER_RANK;
    for (r = 0; r < size; r++) {
        for (j = 0; j < PER_RANK; j++) {
            snprintf(names[r * PER_RANK + j], sizeof(names[0]), "m%d_%d", r, j);
            all[r * PER_RANK + j] = names[r * PER_RANK + j];
        }
    }
    all[total] = NULL;
    for (j = 0; j < PER_RANK; j++) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_BARRIERS | RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
            .name = names[rank * PER_RANK + j], .handler = gone ? gone_member : member,
            .barriers = bar,
            .publishes_to = to_checker
        };
        if (ringk_kernel_create(ctx, &p, &k[j]) != 0) {
            return 1;
        }
    }
    if (rank == 0) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
            .name = "checker", .handler = checker, .publishes_to = all
        };
        if (ringk_kernel_create(ctx, &p, &kc) != 0) {
            return 1;
        }
    }
    if (ringk_ctx_start(ctx) != 0) {
        return 1;
    }
    if (gone) {
        return gone_main(rank, size, !strcmp(argv[1], "lost"), all + rank * PER_RANK);
    }
    for (j = 0; j < PER_RANK; j++) {
        ringk_send(ctx, NULL, names[rank * PER_RANK + j], RINGK_MSG_DATA, NULL, 0,
                   RINGK_WAIT_FOREVER);
    }
    if (rank == 0) {
        while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
            usleep(1000);
        }
        for (r = 0; r < total; r++) {
            ringk_send(ctx, kc, all[r], RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
        }
        fails += (early != 0);
    }
    for (j = 0; j < PER_RANK; j++) {
        do {
            usleep(1000);
            ringk_kernel_stats_query(k[j], &st);
        } while (st.state != RINGK_KERNEL_TERMINATED);
        handler_errors += (int)st.handler_errors;
        fails          += (st.handler_errors != 0);
    }
    fails += errors;
    ringk_ctx_destroy(ctx);
    printf("barrier [rank %d of %d]: %d kernels x %d rounds, %d passed early: %s\n", rank, size,
           PER_RANK, ROUNDS, early, fails ? "FAIL" : "OK");
    /* early: kernels that passed a round before all arrived (counted in rank 0); wait_errors:
     * sends or barrier waits that failed */
    printf("RESULT job_barrier rank=%d size=%d ok=%d kernels=%d rounds=%d early=%d "
           "handler_errors=%d wait_errors=%d\n", rank, size, fails == 0, PER_RANK, ROUNDS, early,
           handler_errors, errors);
    return fails ? 1 : 0;
}
