/* SPDX-License-Identifier: BSD-3-Clause */
/* Leaving a job cleanly (driven by test_job.sh and test_netns.sh): rank 0 sends M numbered
 * messages and a TERMINATE to a sink kernel in every other rank and destroys its context at once,
 * without waiting. Every sink must still get all M in order (nothing in flight is lost when a
 * process leaves), and the other ranks must see rank 0 leave - sends to it fail with -EPIPE -
 * without counting it as lost (ringk_ctx_peers_lost() stays 0); a watch kernel created with
 * peer_events gets exactly one RINGK_PEER_LEFT event for rank 0.
 * With "die" after M, rank 0 exits without leaving (as a crash would): the others must count it
 * lost and their watch kernels get one RINGK_PEER_LOST event for rank 0 within 30 s.
 * Prints one line per rank ending in OK or FAIL, then one for the scripts: "RESULT job_leave
 * rank=R size=N ok=0|1 key=value ..." (ok=1: exit 0). In the other ranks, peers_lost is
 * ringk_ctx_peers_lost() once rank 0 died, or the sum of its readings while rank 0 leaves;
 * events counts the watch kernel's events about rank 0, event_left / event_lost / event_rank
 * describe the last one (event_rank -1: none); sends_epipe says a send to rank 0 failed with
 * -EPIPE. */
#include "job_seq.h"

#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static job_seq_t seq;

static int nop(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return 0;
}

/* peer events about rank 0 seen by the watch kernel: how many, and the last kind (events about
 * other ranks, which leave when they are done, are valid and not counted) */
static int nevents, ev_kind, ev_rank = -1;

static int watch_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_peer_event_t ev;

    if ((msg->type != RINGK_MSG_CONTROL) || (msg->length != sizeof(ev))) {
        return -1;
    }
    memcpy(&ev, ringk_msg_payload(msg), sizeof(ev));
    if (ev.rank != 0) {
        return 0;
    }
    __atomic_store_n(&ev_kind, (int)ev.kind, __ATOMIC_RELAXED);
    __atomic_store_n(&ev_rank, ev.rank, __ATOMIC_RELAXED);
    __atomic_add_fetch(&nevents, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Waits up to @a ms for the watch kernel's first event, then a little longer for a second. */
static void wait_event(int ms)
{
    int i;

    for (i = 0; (i < ms) && (__atomic_load_n(&nevents, __ATOMIC_ACQUIRE) == 0); i++) {
        usleep(1000);
    }
    usleep(200000);
}

int main(int argc, char **argv)
{
    const uint64_t m = (argc > 1) ? strtoull(argv[1], NULL, 10) : 10000;
    const int die    = (argc > 2) && !strcmp(argv[2], "die");
    const char *sinks[64 + 1];
    char names[64][16], me[16];
    ringk_kernel_t *k;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_ctx_t *ctx;
    int rank, size, r, ret = 0, lost = 0, waited, epipe, ok;
    uint64_t i;

    if (ringk_ctx_create(NULL, &ctx) != 0) {
        return 1;
    }
    rank = ringk_ctx_rank(ctx);
    size = ringk_ctx_size(ctx);
    if ((size < 2) || (size > 64)) {
        fprintf(stderr, "job_leave needs 2 to 64 processes, not %d\n", size);
        return 2;
    }
    for (r = 1; r < size; r++) {
        snprintf(names[r - 1], sizeof(names[0]), "sink%d", r);
        sinks[r - 1] = names[r - 1];
    }
    sinks[size - 1] = NULL;
    if (rank == 0) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
            .name = "source", .handler = nop, .publishes_to = sinks
        };
        ret = ringk_kernel_create(ctx, &p, &k);
    } else {
        static const char *back[] = {"source", NULL};
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
            .handler = job_seq_handler, .arg = &seq, .mode = RINGK_MODE_EVENT_DRIVEN, .max_in = 64,
            .publishes_to = back
        };
        ringk_kernel_params_t w = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_PEER_EVENTS,
            .name = "watch", .handler = watch_handler, .mode = RINGK_MODE_EVENT_DRIVEN,
            .peer_events = 1
        };
        ringk_kernel_t *wk;

        snprintf(me, sizeof(me), "sink%d", rank);
        p.name = me;
        ret = ringk_kernel_create(ctx, &p, &k);
        if (ret == 0) {
            ret = ringk_kernel_create(ctx, &w, &wk);
        }
    }
    if ((ret != 0) || (ringk_ctx_start(ctx) != 0)) {
        return 1;
    }
    if (rank == 0) {
        for (i = 0; (ret == 0) && (i < m); i++) {
            for (r = 0; (ret == 0) && (r < size - 1); r++) {
                ret = ringk_send(ctx, k, sinks[r], RINGK_MSG_DATA, &i, sizeof(i),
                                 RINGK_WAIT_FOREVER);
            }
        }
        if (die) {
            printf("leave [rank 0 of %d]: sent %llu to each of %d sinks, exiting without "
                   "leaving: %s\n", size, (unsigned long long)m, size - 1,
                   (ret == 0) ? "OK" : "FAIL");
            printf("RESULT job_leave rank=0 size=%d ok=%d sent=%llu sinks=%d left=0\n", size,
                   ret == 0, (unsigned long long)m, size - 1);
            fflush(stdout);
            _exit((ret == 0) ? 0 : 1);
        }
        for (r = 0; (ret == 0) && (r < size - 1); r++) {
            ret = ringk_send(ctx, k, sinks[r], RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
        }
        ringk_ctx_destroy(ctx); /* at once: the sinks may still be busy */
        printf("leave [rank 0 of %d]: sent %llu to each of %d sinks and left: %s\n", size,
               (unsigned long long)m, size - 1, (ret == 0) ? "OK" : "FAIL");
        printf("RESULT job_leave rank=0 size=%d ok=%d sent=%llu sinks=%d left=1\n", size,
               ret == 0, (unsigned long long)m, size - 1);
        return (ret == 0) ? 0 : 1;
    }
    if (die) {
        /* rank 0 is gone without a word: counted lost, told to the watch kernel, sends fail */
        wait_event(30000);
        lost = ringk_ctx_peers_lost(ctx);
        ret  = ringk_send(ctx, k, "source", RINGK_MSG_DATA, &seq.got, sizeof(seq.got), 0);
        ringk_ctx_destroy(ctx);
        epipe = (ret == -EPIPE);
        ok    = (lost == 1) && (nevents == 1) && (ev_kind == RINGK_PEER_LOST) &&
                (ev_rank == 0) && epipe;
        printf("leave [rank %d of %d]: rank 0 died; peers lost %d, %d event(s), last %s for rank "
               "%d, sends %s: %s\n", rank, size, lost, nevents,
               (ev_kind == RINGK_PEER_LOST) ? "LOST" : (ev_kind == RINGK_PEER_LEFT) ? "LEFT" :
               "none", ev_rank, epipe ? "fail" : "still succeed", ok ? "OK" : "FAIL");
        printf("RESULT job_leave rank=%d size=%d ok=%d peers_lost=%d events=%d event_left=%d "
               "event_lost=%d event_rank=%d sends_epipe=%d\n", rank, size, ok, lost, nevents,
               ev_kind == RINGK_PEER_LEFT, ev_kind == RINGK_PEER_LOST, ev_rank, epipe);
        return ok ? 0 : 1;
    }
    /* the sink terminates after all M: anything lost in rank 0's leaving would hang it here,
     * until test_job.sh's timeout */
    do {
        usleep(1000);
        ringk_kernel_stats_query(k, &st);
        lost += ringk_ctx_peers_lost(ctx);
    } while (st.state != RINGK_KERNEL_TERMINATED);
    /* rank 0 has left or is leaving: within 10 s a send to it fails with -EPIPE; it never
     * counts as lost */
    for (waited = 0; waited < 10000; waited++) {
        ret = ringk_send(ctx, k, "source", RINGK_MSG_DATA, &seq.got, sizeof(seq.got), 0);
        lost += ringk_ctx_peers_lost(ctx);
        if (ret == -EPIPE) {
            break;
        }
        usleep(1000);
    }
    for (i = 0; i < 200; i++) { /* and stays so, after its endpoint has closed */
        usleep(1000);
        lost += ringk_ctx_peers_lost(ctx);
    }
    wait_event(10000);
    ringk_ctx_destroy(ctx);
    epipe = (ret == -EPIPE);
    ret   = ((seq.got == m) && (seq.bad == 0) && epipe && (lost == 0) && (nevents == 1) &&
             (ev_kind == RINGK_PEER_LEFT) && (ev_rank == 0)) ? 0 : 1;
    printf("leave [rank %d of %d]: got %llu of %llu, %llu out of order, rank 0 left (%s), "
           "counted lost %d times, %d peer event(s) (%s for rank %d): %s\n", rank, size,
           (unsigned long long)seq.got, (unsigned long long)m, (unsigned long long)seq.bad,
           epipe ? "sends fail" : "sends still succeed", lost, nevents,
           (ev_kind == RINGK_PEER_LEFT) ? "LEFT" : (ev_kind == RINGK_PEER_LOST) ? "LOST" : "none",
           ev_rank, (ret == 0) ? "OK" : "FAIL");
    printf("RESULT job_leave rank=%d size=%d ok=%d got=%llu expected=%llu out_of_order=%llu "
           "peers_lost=%d events=%d event_left=%d event_lost=%d event_rank=%d sends_epipe=%d\n",
           rank, size, ret == 0, (unsigned long long)seq.got, (unsigned long long)m,
           (unsigned long long)seq.bad, lost, nevents, ev_kind == RINGK_PEER_LEFT,
           ev_kind == RINGK_PEER_LOST, ev_rank, epipe);
    return ret;
}
