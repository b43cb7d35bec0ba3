/* SPDX-License-Identifier: BSD-3-Clause */
/* examples/gpu/heat: a 2-D Jacobi heat stencil whose strips are device kernels exchanging halo
 * rows device to device. The strip's logic is written once here (EXAMPLE_HD: device and host
 * code), for the device handler (heat_kernels.cu) and the CPU handler (heat.c) alike: an event
 * (start, or a halo row) goes in with strip_event(), and strip_next() gives the messages it
 * makes one at a time, which each handler sends with its own API. */
#ifndef RINGK_EXAMPLE_GPU_HEAT_H
#define RINGK_EXAMPLE_GPU_HEAT_H

#include "examples/gpu/example_gpu.h"

#define HEAT_MAX_STRIPS 16
#define HEAT_START 0u   /* message kinds: the first word of a payload */
#define HEAT_HALO  1u
#define HEAT_ROW   2u
#define HEAT_UP    0    /* strip_next()'s targets */
#define HEAT_DOWN  1
#define HEAT_COLLECT 2

/* halo row of step 'step' (from_up 1: the row above the receiver), or a finished row */
typedef struct {
    uint32_t kind;
    int32_t  step, from_up, row;
    double   v[];
} heat_msg_t;

/* A strip: configuration written by the host before the kernels start; arrays in memory of
 * the place it runs (device memory on a GPU); the state only its kernel touches. */
typedef struct {
    int32_t  rows, cols, steps;          /* the grid */
    int32_t  index, r0, nrows;           /* global rows [r0, r0 + nrows) */
    int32_t  has_up, has_down;
    char     name[3][16];                /* HEAT_UP, HEAT_DOWN, HEAT_COLLECT targets */
    double  *cur, *next;                 /* (nrows + 2) x cols, halo rows above and below */
    double  *halo[2][2];                 /* [step % 2][from_up] */
    heat_msg_t *out;                     /* the message strip_next() made */
    /* its kernel's state */
    int32_t  step, started, pend_up, pend_down, rows_sent;
    int32_t  have[2][2];
    uint32_t errors;                     /* bad messages */
    /* a device kernel's threads: what the loop's thread decided for all (HEAT_ACT_*), and the
     * error of a send that failed */
    int32_t  act, err;
    int32_t  threads_used;               /* a device kernel: the threads its updates took */
} heat_strip_t;

#define HEAT_ACT_UPDATE 1   /* every thread updates its share of the strip */
#define HEAT_ACT_DONE   2   /* nothing more for this message */
#define HEAT_ACT_ERROR  3   /* the message was bad, or a send failed (err) */

EXAMPLE_HD double heat_initial(int rows, int cols, int r, int c)
{
    /* a hot spot and a warm edge */
    if ((r - rows / 3) * (r - rows / 3) + (c - cols / 2) * (c - cols / 2) < rows * cols / 64) {
        return 100.0;
    }
    return (c == 0) ? 50.0 : 0.0;
}

/* Part @a part of @a parts of one Jacobi step of rows 1..nrows of @a cur into @a next (rows 0
 * and nrows + 1 are halos): the cells part, part + parts, ... (one thread's share; all of them
 * for part 0 of 1). The grid's first and last rows and columns stay fixed. */
EXAMPLE_HD void heat_update_part(const double *cur, double *next, int rows, int cols, int r0,
                                 int nrows, int part, int parts)
{
    int i, r, c, g;

    for (i = part; i < nrows * cols; i += parts) {
        r = 1 + i / cols;
        c = i % cols;
        g = r0 + r - 1;
        if ((g == 0) || (g == rows - 1) || (c == 0) || (c == cols - 1)) {
            next[r * cols + c] = cur[r * cols + c];
        } else {
            const double *p = &cur[r * cols + c];
            next[r * cols + c] = 0.25 * (p[-cols] + p[cols] + p[-1] + p[1]);
        }
    }
}

EXAMPLE_HD void heat_update(const double *cur, double *next, int rows, int cols, int r0,
                            int nrows)
{
    heat_update_part(cur, next, rows, cols, r0, nrows, 0, 1);
}

EXAMPLE_HD void heat_copy_row(double *dst, const double *src, int cols)
{
    int c;

    for (c = 0; c < cols; c++) {
        dst[c] = src[c];
    }
}

EXAMPLE_HD uint32_t heat_msg_len(const heat_strip_t *s)
{
    return (uint32_t)(sizeof(heat_msg_t) + (size_t)s->cols * sizeof(double));
}

/* An event at strip @a s: 0, or -1 for a message that does not belong (counted). */
EXAMPLE_HD int strip_event(heat_strip_t *s, const void *payload, uint32_t len)
{
    const heat_msg_t *m = (const heat_msg_t*)payload;
    int r, c;

    if ((len >= sizeof(uint32_t)) && (m->kind == HEAT_START) && !s->started) {
        for (r = 0; r < s->nrows; r++) {
            for (c = 0; c < s->cols; c++) {
                s->cur[(r + 1) * s->cols + c] = heat_initial(s->rows, s->cols, s->r0 + r, c);
            }
        }
        s->started   = 1;
        s->pend_up   = s->has_up;
        s->pend_down = s->has_down;
        return 0;
    }
    /* a neighbour is at most one step ahead: its halo of step s or s + 1 */
    if ((len != heat_msg_len(s)) || (m->kind != HEAT_HALO) || (m->step < s->step) ||
        (m->step > s->step + 1) || (m->from_up < 0) || (m->from_up > 1) ||
        s->have[m->step % 2][m->from_up]) {
        s->errors++;
        return -1;
    }
    heat_copy_row(s->halo[m->step % 2][m->from_up], m->v, s->cols);
    s->have[m->step % 2][m->from_up] = 1;
    return 0;
}

/* The step's end once its update is done: the new grid is current, the next step's edge rows
 * are to be sent. */
EXAMPLE_HD void strip_stepped(heat_strip_t *s)
{
    double *t = s->cur;

    s->cur  = s->next;
    s->next = t;
    s->step++;
    if (s->step < s->steps) {
        s->pend_up   = s->has_up;
        s->pend_down = s->has_down;
    }
}

/* What strip @a s does next: 1, a message to send, in s->out (*len_p bytes, to target *to_p);
 * 2, the current step's update (its halos are in place): the caller updates the strip
 * (heat_update_part() over its threads), then calls strip_stepped(); 0, it waits for halos
 * or is done. */
EXAMPLE_HD int strip_next_step(heat_strip_t *s, int *to_p, uint32_t *len_p)
{
    int slot;

    *len_p = heat_msg_len(s);
    if (!s->started) {
        return 0;
    }
    if (s->pend_up || s->pend_down) { /* our edge rows are the neighbours' halos */
        *to_p          = s->pend_up ? HEAT_UP : HEAT_DOWN;
        s->out->kind   = HEAT_HALO;
        s->out->step   = s->step;
        s->out->from_up = s->pend_up ? 0 : 1;
        s->out->row    = -1;
        heat_copy_row(s->out->v, &s->cur[(s->pend_up ? 1 : s->nrows) * s->cols], s->cols);
        if (s->pend_up) {
            s->pend_up = 0;
        } else {
            s->pend_down = 0;
        }
        return 1;
    }
    if (s->step == s->steps) { /* done: every row to the collector */
        if (s->rows_sent == s->nrows) {
            return 0;
        }
        *to_p         = HEAT_COLLECT;
        s->out->kind  = HEAT_ROW;
        s->out->step  = s->step;
        s->out->from_up = 0;
        s->out->row   = s->r0 + s->rows_sent;
        heat_copy_row(s->out->v, &s->cur[(s->rows_sent + 1) * s->cols], s->cols);
        s->rows_sent++;
        return 1;
    }
    slot = s->step % 2;
    if ((s->has_up && !s->have[slot][1]) || (s->has_down && !s->have[slot][0])) {
        return 0;
    }
    if (s->has_up) {
        heat_copy_row(&s->cur[0], s->halo[slot][1], s->cols);
    }
    if (s->has_down) {
        heat_copy_row(&s->cur[(s->nrows + 1) * s->cols], s->halo[slot][0], s->cols);
    }
    s->have[slot][0] = s->have[slot][1] = 0;
    return 2;
}

/* The next message strip @a s sends, updating by itself (one thread): 1 with it in s->out
 * (*len_p bytes, to target *to_p), or 0 when it waits for halos or is done. Steps as long as
 * the halos of the current step are in. */
EXAMPLE_HD int strip_next(heat_strip_t *s, int *to_p, uint32_t *len_p)
{
    int r;

    while ((r = strip_next_step(s, to_p, len_p)) == 2) {
        heat_update(s->cur, s->next, s->rows, s->cols, s->r0, s->nrows);
        strip_stepped(s);
    }
    return r;
}

#ifdef __cplusplus
extern "C" {
#endif
extern const ringk_device_entry_t example_heat_strip_entry;
#ifdef __cplusplus
}
#endif

#endif
