/* SPDX-License-Identifier: BSD-3-Clause */
/* 2-D heat stencil on ring kernels: the grid is cut into horizontal strips, one kernel per
 * strip; every step each kernel sends its edge rows to its neighbours (halo exchange), waits for
 * theirs, and updates its strip (Jacobi). At the end every strip sends its rows to a collector
 * kernel in rank 0, which compares the grid bit for bit with a sequential computation. In a job,
 * strip i runs in rank i % size. Each process ends with one line "RESULT heat rank=R size=N
 * ok=0|1 key=value ..." for scripts; in rank 0, ok=1 (exit 0) when no cell differs.
 * Usage: heat [ROWS COLS STEPS STRIPS] */
#include "example_job.h"

#include <ringk/api/ringk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_STRIPS 16

typedef struct {
    int      step;      /* the step the halo row belongs to */
    int      from_up;   /* 1: the row above this strip, 0: the row below */
    double   row[];
} halo_t;

typedef struct {
    int     index, r0, nrows;   /* global rows [r0, r0 + nrows) */
    double *cur, *next;         /* (nrows + 2) x cols, with a halo row above and below */
    int     step;               /* steps done */
    /* halos received for step s land in slot s % 2 (a neighbour is at most one step ahead) */
    double *halo[2][2];         /* [slot][0: below, 1: above] */
    int     have[2][2];
    char    up[16], down[16];
} strip_t;

typedef struct {
    int    row;
    double v[];
} row_msg_t;

static int rows = 256, cols = 256, steps = 100, nstrips = 4, rows_in;
static strip_t strips[MAX_STRIPS];
static double *grid; /* rank 0: the rows collected from the strips */

static double initial(int r, int c)
{
    /* a hot spot and a warm edge */
    if ((r - rows / 3) * (r - rows / 3) + (c - cols / 2) * (c - cols / 2) < rows * cols / 64) {
        return 100.0;
    }
    return (c == 0) ? 50.0 : 0.0;
}

/* One Jacobi step of rows 1..nrows of @a cur into @a next; rows 0 and nrows+1 are halos and the
 * global boundary (first and last rows and columns) stays fixed. */
static void update(const double *cur, double *next, int r0, int nrows)
{
    int r, c, g;

    for (r = 1; r <= nrows; r++) {
        g = r0 + r - 1;
        for (c = 0; c < cols; c++) {
            const double *p = &cur[r * cols + c];
            if ((g == 0) || (g == rows - 1) || (c == 0) || (c == cols - 1)) {
                next[r * cols + c] = *p;
            } else {
                next[r * cols + c] = 0.25 * (p[-cols] + p[cols] + p[-1] + p[1]);
            }
        }
    }
}

static int send_halos(ringk_kernel_t *k, strip_t *s)
{
    size_t len = sizeof(halo_t) + cols * sizeof(double);
    halo_t *h = malloc(len);
    int ret = 0;

    h->step = s->step;
    if (s->up[0]) { /* our top row is the row below the upper neighbour */
        h->from_up = 0;
        memcpy(h->row, &s->cur[1 * cols], cols * sizeof(double));
        ret = ringk_send(ringk_kernel_ctx(k), k, s->up, RINGK_MSG_DATA, h, len, RINGK_WAIT_FOREVER);
    }
    if ((ret == 0) && s->down[0]) {
        h->from_up = 1;
        memcpy(h->row, &s->cur[s->nrows * cols], cols * sizeof(double));
        ret = ringk_send(ringk_kernel_ctx(k), k, s->down, RINGK_MSG_DATA, h, len,
                         RINGK_WAIT_FOREVER);
    }
    free(h);
    return ret;
}

/* Steps as long as the halos of the current step are there. */
static int advance(ringk_kernel_t *k, strip_t *s)
{
    double *t;
    int slot;

    if (s->step == steps) {
        return 0; /* done already: a late message */
    }
    while (s->step < steps) {
        slot = s->step % 2;
        if ((s->up[0] && !s->have[slot][1]) || (s->down[0] && !s->have[slot][0])) {
            return 0;
        }
        if (s->up[0]) {
            memcpy(&s->cur[0], s->halo[slot][1], cols * sizeof(double));
        }
        if (s->down[0]) {
            memcpy(&s->cur[(s->nrows + 1) * cols], s->halo[slot][0], cols * sizeof(double));
        }
        s->have[slot][0] = s->have[slot][1] = 0;
        update(s->cur, s->next, s->r0, s->nrows);
        t = s->cur; s->cur = s->next; s->next = t;
        s->step++;
        if (s->step < steps) {
            int ret = send_halos(k, s);
            if (ret != 0) {
                return ret;
            }
        }
    }
    /* done: every row to the collector in rank 0 */
    {
        size_t len = sizeof(row_msg_t) + cols * sizeof(double);
        row_msg_t *m = malloc(len);
        int r, ret = 0;

        for (r = 0; (r < s->nrows) && (ret == 0); r++) {
            m->row = s->r0 + r;
            memcpy(m->v, &s->cur[(r + 1) * cols], cols * sizeof(double));
            ret = ringk_send(ringk_kernel_ctx(k), k, "collector", RINGK_MSG_DATA, m, len,
                             RINGK_WAIT_FOREVER);
        }
        free(m);
        return ret;
    }
}

static int collector(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const row_msg_t *m = ringk_msg_payload(msg);

    if ((msg->length != sizeof(row_msg_t) + cols * sizeof(double)) || (m->row < 0) ||
        (m->row >= rows)) {
        return -1;
    }
    memcpy(&grid[(size_t)m->row * cols], m->v, cols * sizeof(double));
    if (__atomic_add_fetch(&rows_in, 1, __ATOMIC_RELEASE) == rows) {
        example_notify();
    }
    return 0;
}

static int strip_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    strip_t *s = arg;
    const halo_t *h;

    if (msg->length == 0) { /* start */
        int ret = send_halos(k, s);
        return ret ? ret : advance(k, s);
    }
    h = ringk_msg_payload(msg);
    if ((msg->length != sizeof(halo_t) + cols * sizeof(double)) || (h->step < s->step) ||
        (h->step > s->step + 1)) {
        fprintf(stderr, "heat: strip %d got a bad halo (step %d at step %d)\n", s->index,
                h->step, s->step);
        return -1;
    }
    memcpy(s->halo[h->step % 2][h->from_up], h->row, cols * sizeof(double));
    s->have[h->step % 2][h->from_up] = 1;
    return advance(k, s);
}

int main(int argc, char **argv)
{
    ringk_ctx_t *ctx;
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = example_log};
    ringk_kernel_t *mine[MAX_STRIPS], *kc;
    const char *all[MAX_STRIPS + 1];
    char names[MAX_STRIPS][16];
    double *a, *b, *t, maxdiff = 0;
    int i, r, c, base, extra, mismatches = 0, rank, size, nmine = 0;

    example_job_begin(&cp, &argc, &argv);
    if (argc > 4) {
        rows = atoi(argv[1]); cols = atoi(argv[2]); steps = atoi(argv[3]); nstrips = atoi(argv[4]);
    }
    if ((nstrips < 1) || (nstrips > MAX_STRIPS) || (rows < 2 * nstrips) || (cols < 3) ||
        (steps < 1) || (cols * sizeof(double) + sizeof(halo_t) > 60000)) {
        fprintf(stderr, "usage: heat [ROWS COLS STEPS STRIPS(1..%d)]\n", MAX_STRIPS);
        return 2;
    }
    if (ringk_ctx_create(&cp, &ctx) != 0) {
        return 1;
    }
    rank  = ringk_ctx_rank(ctx);
    size  = ringk_ctx_size(ctx);
    base  = rows / nstrips;
    extra = rows % nstrips;
    for (i = 0, r = 0; i < nstrips; i++) {
        strip_t *s = &strips[i];
        s->index = i;
        s->r0    = r;
        s->nrows = base + (i < extra);
        r       += s->nrows;
        snprintf(names[i], sizeof(names[i]), "strip%d", i);
        all[i] = names[i];
        if (i > 0) {
            snprintf(s->up, sizeof(s->up), "strip%d", i - 1);
        }
        if (i < nstrips - 1) {
            snprintf(s->down, sizeof(s->down), "strip%d", i + 1);
        }
        if (i % size != rank) {
            continue; /* another process runs it */
        }
        s->cur   = calloc((size_t)(s->nrows + 2) * cols, sizeof(double));
        s->next  = calloc((size_t)(s->nrows + 2) * cols, sizeof(double));
        for (int j = 0; j < 4; j++) {
            s->halo[j / 2][j % 2] = calloc(cols, sizeof(double));
        }
        for (int rr = 0; rr < s->nrows; rr++) {
            for (c = 0; c < cols; c++) {
                s->cur[(rr + 1) * cols + c] = initial(s->r0 + rr, c);
            }
        }
    }
    all[nstrips] = NULL;
    if (rank == 0) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
            .name = "collector", .handler = collector, .publishes_to = all
        };
        grid = calloc((size_t)rows * cols, sizeof(double));
        if (ringk_kernel_create(ctx, &p, &kc) != 0) {
            return 1;
        }
    }
    for (i = 0; i < nstrips; i++) {
        const char *routes[4] = {"collector", NULL, NULL, NULL};
        int nr = 1;
        if (i % size != rank) {
            continue;
        }
        if (strips[i].up[0]) routes[nr++] = strips[i].up;
        if (strips[i].down[0]) routes[nr++] = strips[i].down;
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MODE,
            .name = names[i], .handler = strip_handler, .arg = &strips[i], .publishes_to = routes,
            .mode = RINGK_MODE_EVENT_DRIVEN
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
        for (i = 0; i < nstrips; i++) {
            free(strips[i].cur);
            free(strips[i].next);
            for (int j = 0; j < 4; j++) {
                free(strips[i].halo[j / 2][j % 2]);
            }
        }
        printf("heat [rank %d of %d]: %d strip kernel(s) done\n", rank, size, nmine);
        printf("RESULT heat rank=%d size=%d ok=1 kernels=%d\n", rank, size, nmine);
        example_job_end();
        return 0;
    }
    for (i = 0; i < nstrips; i++) {
        ringk_send(ctx, NULL, names[i], RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_FOREVER);
    }
    while (__atomic_load_n(&rows_in, __ATOMIC_ACQUIRE) < rows) {
        if (example_idle(ctx) != 0) {
            ringk_ctx_destroy(ctx);
            return 1;
        }
    }
    for (i = 0; i < nstrips; i++) { /* strips in other processes stop */
        ringk_send(ctx, kc, names[i], RINGK_MSG_TERMINATE, NULL, 0, RINGK_WAIT_FOREVER);
    }
    ringk_ctx_destroy(ctx);

    /* the same steps, sequentially */
    a = calloc((size_t)(rows + 2) * cols, sizeof(double));
    b = calloc((size_t)(rows + 2) * cols, sizeof(double));
    for (r = 0; r < rows; r++) {
        for (c = 0; c < cols; c++) {
            a[(r + 1) * cols + c] = initial(r, c);
        }
    }
    for (i = 0; i < steps; i++) {
        update(a, b, 0, rows);
        t = a; a = b; b = t;
    }
    for (r = 0; r < rows; r++) {
        for (c = 0; c < cols; c++) {
            double x = grid[(size_t)r * cols + c], y = a[(r + 1) * cols + c];
            if (x != y) {
                mismatches++;
                if ((x - y > maxdiff) || (y - x > maxdiff)) {
                    maxdiff = (x > y) ? x - y : y - x;
                }
            }
        }
    }
    printf("heat%s: %dx%d grid, %d steps, %d strip kernels with halo exchange in %d process(es): "
           "%d of %d cells differ from the sequential result (max diff %g): %s\n",
           (size > 1) ? " [rank 0]" : "", rows, cols, steps, nstrips, size, mismatches,
           rows * cols, maxdiff, mismatches ? "MISMATCH" : "OK");
    printf("RESULT heat rank=0 size=%d ok=%d kernels=%d rows=%d cols=%d steps=%d strips=%d "
           "cells=%d differ=%d match=%d\n", size, mismatches == 0, nmine, rows, cols, steps,
           nstrips, rows * cols, mismatches, mismatches == 0);
    for (i = 0; i < nstrips; i++) {
        free(strips[i].cur);
        free(strips[i].next);
        for (int j = 0; j < 4; j++) {
            free(strips[i].halo[j / 2][j % 2]);
        }
    }
    free(grid);
    free(a);
    free(b);
    example_job_end();
    return mismatches ? 1 : 0;
}
