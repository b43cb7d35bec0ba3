/* SPDX-License-Identifier: BSD-3-Clause */
/* PageRank with vertex-centric ring kernels: the vertices of a generated graph are split into P
 * partition kernels (vertex v belongs to partition v % P). Every superstep each partition sends
 * one batch message to every partition with the contributions rank[v] / outdeg(v) along its
 * edges, waits for the P batches of that superstep and computes the new ranks. After STEPS
 * supersteps the ranks go to a collector kernel in rank 0, which compares them with a
 * sequential computation. In a job, partition i runs in rank i % size. Each process ends with
 * one line "RESULT pagerank rank=R size=N ok=0|1 key=value ..." for scripts; in rank 0, ok=1
 * (exit 0) when every rank is within 1e-12 of the sequential one.
 * Usage: pagerank [VERTICES STEPS PARTITIONS] */
#include "example_job.h"

#include <ringk/api/ringk.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PARTS  16
#define OUTDEG     3
#define DAMPING    0.85
#define MAX_PAIRS  4000  /* contributions per message: 4000 x 16 bytes stays under 64 KiB */

typedef struct {
    uint32_t dst;
    uint32_t pad;
    double   value;
} contrib_t;

typedef struct {
    int32_t   step;     /* superstep, or -1 for final ranks to the collector */
    int32_t   from;     /* sending partition */
    int32_t   last;     /* 1: the last message of this batch */
    int32_t   count;
    contrib_t pairs[];
} batch_t;

typedef struct {
    int     index;
    int     step;
    double *rank;            /* by local vertex index (v / P) */
    double *acc[2];          /* contributions being summed, by superstep parity */
    int     batches[2];      /* complete batches received, by parity */
    unsigned nlocal;
} part_t;

static unsigned nv = 20000, steps = 20, nparts = 4;
static part_t parts[MAX_PARTS];
static char names[MAX_PARTS][16];
static double *final_rank;
static unsigned final_in;

static uint32_t edge(uint32_t v, int e)
{
    static const uint32_t mul[OUTDEG] = {7, 13, 1}, add[OUTDEG] = {1, 5, 1};
    return (uint32_t)(((uint64_t)v * mul[e] + add[e]) % nv);
}

static int send_batch(ringk_kernel_t *k, const char *to, batch_t *b, int last)
{
    b->last = last;
    return ringk_send(ringk_kernel_ctx(k), k, to, RINGK_MSG_DATA, b,
                      sizeof(*b) + (size_t)b->count * sizeof(contrib_t), RINGK_WAIT_FOREVER);
}

/* Sends this superstep's contributions, one batch (maybe split) per destination partition. */
static int scatter(ringk_kernel_t *k, part_t *p)
{
    batch_t *out[MAX_PARTS];
    unsigned i, q;
    int e, ret = 0;

    for (q = 0; q < nparts; q++) {
        out[q] = malloc(sizeof(batch_t) + MAX_PAIRS * sizeof(contrib_t));
        out[q]->step  = p->step;
        out[q]->from  = p->index;
        out[q]->count = 0;
    }
    for (i = 0; (i < p->nlocal) && (ret == 0); i++) {
        uint32_t v = i * nparts + p->index;
        for (e = 0; e < OUTDEG; e++) {
            uint32_t d = edge(v, e);
            batch_t *b = out[d % nparts];
            b->pairs[b->count].dst   = d;
            b->pairs[b->count].value = p->rank[i] / OUTDEG;
            if (++b->count == MAX_PAIRS) {
                ret = send_batch(k, names[d % nparts], b, 0);
                b->count = 0;
            }
        }
    }
    for (q = 0; q < nparts; q++) {
        if (ret == 0) {
            ret = send_batch(k, names[q], out[q], 1);
        }
        free(out[q]);
    }
    return ret;
}

/* Completes supersteps while all their batches are in. */
static int advance(ringk_kernel_t *k, part_t *p)
{
    unsigned i;
    int slot, ret;

    while (p->step < (int)steps) {
        slot = p->step % 2;
        if (p->batches[slot] < (int)nparts) {
            return 0;
        }
        for (i = 0; i < p->nlocal; i++) {
            p->rank[i]       = (1.0 - DAMPING) / nv + DAMPING * p->acc[slot][i];
            p->acc[slot][i]  = 0;
        }
        p->batches[slot] = 0;
        p->step++;
        if (p->step < (int)steps) {
            ret = scatter(k, p);
            if (ret != 0) {
                return ret;
            }
        }
    }
    /* done: the ranks to the collector, in batches with dst = vertex */
    {
        batch_t *b = malloc(sizeof(batch_t) + MAX_PAIRS * sizeof(contrib_t));
        ret = 0;
        b->step  = -1;
        b->from  = p->index;
        b->count = 0;
        for (i = 0; (i < p->nlocal) && (ret == 0); i++) {
            b->pairs[b->count].dst   = i * nparts + p->index;
            b->pairs[b->count].value = p->rank[i];
            if ((++b->count == MAX_PAIRS) || (i + 1 == p->nlocal)) {
                ret = send_batch(k, "collector", b, i + 1 == p->nlocal);
                b->count = 0;
            }
        }
        free(b);
        p->step++; /* past the end: late messages are ignored */
        return ret;
    }
}

static int part_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    part_t *p = arg;
    const batch_t *b;
    int i;

    if (msg->length == 0) { /* start */
        int ret = scatter(k, p);
        return ret ? ret : advance(k, p);
    }
    b = ringk_msg_payload(msg);
    if ((msg->length < sizeof(*b)) || (b->count < 0) ||
        (msg->length != sizeof(*b) + (size_t)b->count * sizeof(contrib_t)) ||
        (b->step < p->step) || (b->step > p->step + 1)) {
        fprintf(stderr, "pagerank: partition %d got a bad batch\n", p->index);
        return -1;
    }
    for (i = 0; i < b->count; i++) {
        uint32_t d = b->pairs[i].dst;
        if ((d >= nv) || (d % nparts != (uint32_t)p->index)) {
            return -1;
        }
        p->acc[b->step % 2][d / nparts] += b->pairs[i].value;
    }
    if (b->last) {
        p->batches[b->step % 2]++;
    }
    return advance(k, p);
}

static int collector(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const batch_t *b = ringk_msg_payload(msg);
    int i;

    for (i = 0; i < b->count; i++) {
        if (b->pairs[i].dst < nv) {
            final_rank[b->pairs[i].dst] = b->pairs[i].value;
            if (__atomic_add_fetch(&final_in, 1, __ATOMIC_RELEASE) == nv) {
                example_notify();
            }
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    ringk_ctx_t *ctx;
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = example_log};
    ringk_kernel_t *mine[MAX_PARTS], *kc = NULL;
    const char *routes[MAX_PARTS + 2];
    double *r0, *r1, maxdiff = 0, sum = 0;
    unsigned i, q, s;
    int rank, size, nmine = 0, e, match;

    example_job_begin(&cp, &argc, &argv);
    if (argc > 3) {
        nv = (unsigned)atoi(argv[1]); steps = (unsigned)atoi(argv[2]);
        nparts = (unsigned)atoi(argv[3]);
    }
    if ((nparts < 1) || (nparts > MAX_PARTS) || (nv < nparts) || (steps < 1)) {
        fprintf(stderr, "usage: pagerank [VERTICES STEPS PARTITIONS(1..%d)]\n", MAX_PARTS);
        return 2;
    }
    if (ringk_ctx_create(&cp, &ctx) != 0) {
        return 1;
    }
    rank = ringk_ctx_rank(ctx);
    size = ringk_ctx_size(ctx);
    routes[0] = "collector";
    for (q = 0; q < nparts; q++) {
        snprintf(names[q], sizeof(names[q]), "part%u", q);
        routes[q + 1] = names[q];
    }
    routes[nparts + 1] = NULL;
    if (rank == 0) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
            .name = "collector", .handler = collector, .publishes_to = routes + 1
        };
        final_rank = calloc(nv, sizeof(double));
        if (ringk_kernel_create(ctx, &p, &kc) != 0) {
            return 1;
        }
    }
    for (q = 0; q < nparts; q++) {
        part_t *pt = &parts[q];
        if ((int)(q % size) != rank) {
            continue;
        }
        pt->index  = (int)q;
        pt->nlocal = (nv - q + nparts - 1) / nparts;
        pt->rank   = malloc(pt->nlocal * sizeof(double));
        pt->acc[0] = calloc(pt->nlocal, sizeof(double));
        pt->acc[1] = calloc(pt->nlocal, sizeof(double));
        for (i = 0; i < pt->nlocal; i++) {
            pt->rank[i] = 1.0 / nv;
        }
        /* Every partition sends to every other each superstep, and a partition may run one
         * superstep ahead: the inbox holds two supersteps of batches, so no send waits (a
         * blocking send between event-driven kernels sharing pool threads, or around a cycle
         * of full inboxes, could wait forever). */
        uint64_t need = 2 * ((uint64_t)nv * OUTDEG / nparts * sizeof(contrib_t) / 256 +
                             2 * nparts + 2) + 2 * 257;
        unsigned inbox = 256;
        while (inbox < need) {
            inbox *= 2;
        }
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MODE |
                          RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE,
            .name = names[q], .handler = part_handler, .arg = pt, .publishes_to = routes,
            .mode = RINGK_MODE_EVENT_DRIVEN, .inbox_size = inbox
        };
        if (ringk_kernel_create(ctx, &p, &mine[nmine++]) != 0) {
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
        for (q = 0; q < nparts; q++) {
            free(parts[q].rank);
            free(parts[q].acc[0]);
            free(parts[q].acc[1]);
        }
        printf("pagerank [rank %d of %d]: %d partition kernel(s) done\n", rank, size, nmine);
        printf("RESULT pagerank rank=%d size=%d ok=1 kernels=%d\n", rank, size, nmine);
        example_job_end();
        return 0;
    }
    for (q = 0; q < nparts; q++) {
        ringk_send(ctx, NULL, names[q], RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_FOREVER);
    }
    while (__atomic_load_n(&final_in, __ATOMIC_ACQUIRE) < nv) {
        if (example_idle(ctx) != 0) {
            ringk_ctx_destroy(ctx);
            return 1;
        }
    }
    for (q = 0; q < nparts; q++) {
        ringk_send(ctx, kc, names[q], RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
    }
    ringk_ctx_destroy(ctx);

    /* sequential PageRank, the same supersteps */
    r0 = malloc(nv * sizeof(double));
    r1 = calloc(nv, sizeof(double));
    for (i = 0; i < nv; i++) {
        r0[i] = 1.0 / nv;
    }
    for (s = 0; s < steps; s++) {
        memset(r1, 0, nv * sizeof(double));
        for (i = 0; i < nv; i++) {
            for (e = 0; e < OUTDEG; e++) {
                r1[edge(i, e)] += r0[i] / OUTDEG;
            }
        }
        for (i = 0; i < nv; i++) {
            r0[i] = (1.0 - DAMPING) / nv + DAMPING * r1[i];
        }
    }
    for (i = 0; i < nv; i++) {
        double d = fabs(final_rank[i] - r0[i]);
        maxdiff = (d > maxdiff) ? d : maxdiff;
        sum += final_rank[i];
    }
    /* sums arrive in another order than the sequential loop adds them: equal to rounding */
    match = maxdiff < 1e-12;
    printf("pagerank%s: %u vertices, %u supersteps, %u partition kernels in %d process(es): rank "
           "sum %.12f, max difference from sequential %.3g: %s\n", (size > 1) ? " [rank 0]" : "",
           nv, steps, nparts, size, sum, maxdiff, match ? "OK" : "MISMATCH");
    printf("RESULT pagerank rank=0 size=%d ok=%d kernels=%d vertices=%u supersteps=%u "
           "partitions=%u match=%d\n", size, match, nmine, nv, steps, nparts, match);
    for (q = 0; q < nparts; q++) {
        free(parts[q].rank);
        free(parts[q].acc[0]);
        free(parts[q].acc[1]);
    }
    free(final_rank);
    free(r0);
    free(r1);
    example_job_end();
    return match ? 0 : 1;
}
