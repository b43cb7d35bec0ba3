/* SPDX-License-Identifier: BSD-3-Clause */
/* 2-D heat stencil with device kernels: the grid is cut into horizontal strips, one ring
 * kernel per strip (backends CPU | CUDA: on the GPU when there is one, where the strips send
 * their halo rows straight into each other's device inboxes; else on the CPU, with the same
 * logic, examples/gpu/heat.h; built as host C, on the emulated device). Every step each strip
 * sends its edge rows to its neighbours, waits for theirs and updates (Jacobi); at the end
 * every strip sends its rows to a collector CPU kernel, and the grid is compared bit for bit
 * with a sequential computation. Ends with one line "RESULT gpu_heat rank=0 size=1 ok=0|1
 * device=D key=value ..." for scripts; ok=1 (exit 0) when no cell differs.
 * Usage: heat [ROWS COLS STEPS STRIPS] */
#include "examples/example_job.h"
#include "examples/gpu/heat.h"

#include <ringk/api/ringk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rows = 128, cols = 128, steps = 50, nstrips = 4, rows_in, bad_rows;
static double *grid;

/* A strip on the CPU: the device handler's logic, sent with the host API. */
static int strip_cpu(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    heat_strip_t *s = arg;
    uint32_t len;
    int to, ret;

    if (strip_event(s, ringk_msg_payload(msg), msg->length) != 0) {
        return -1;
    }
    while (strip_next(s, &to, &len)) {
        ret = ringk_send(ringk_kernel_ctx(k), k, s->name[to], RINGK_MSG_DATA, s->out, len,
                         RINGK_WAIT_FOREVER);
        if (ret != 0) {
            return ret;
        }
    }
    return 0;
}

static int collector(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const heat_msg_t *m = ringk_msg_payload(msg);

    if ((msg->length != sizeof(heat_msg_t) + cols * sizeof(double)) || (m->kind != HEAT_ROW) ||
        (m->row < 0) || (m->row >= rows)) {
        bad_rows++;
        return -1;
    }
    memcpy(&grid[(size_t)m->row * cols], m->v, cols * sizeof(double));
    if (__atomic_add_fetch(&rows_in, 1, __ATOMIC_RELEASE) == rows) {
        example_notify();
    }
    return 0;
}

/* The strips' shared blocks and arrays, allocated before any kernel starts. */
static int strips_alloc(heat_strip_t **host, heat_strip_t **dev)
{
    size_t plane = (size_t)cols * sizeof(double);
    int i, r = 0, j;

    for (i = 0; i < nstrips; i++) {
        heat_strip_t *s = example_shared_alloc(sizeof(*s), (void**)&dev[i]);

        if (s == NULL) {
            return -1;
        }
        host[i]  = s;
        s->rows  = rows;
        s->cols  = cols;
        s->steps = steps;
        s->index = i;
        s->r0    = r;
        s->nrows = rows / nstrips + (i < rows % nstrips);
        r       += s->nrows;
        s->has_up   = (i > 0);
        s->has_down = (i < nstrips - 1);
        snprintf(s->name[HEAT_UP], sizeof(s->name[0]), "strip%d", i - 1);
        snprintf(s->name[HEAT_DOWN], sizeof(s->name[0]), "strip%d", i + 1);
        snprintf(s->name[HEAT_COLLECT], sizeof(s->name[0]), "collector");
        s->cur  = example_device_alloc((size_t)(s->nrows + 2) * plane);
        s->next = example_device_alloc((size_t)(s->nrows + 2) * plane);
        s->out  = example_device_alloc(sizeof(heat_msg_t) + plane);
        for (j = 0; j < 4; j++) {
            s->halo[j / 2][j % 2] = example_device_alloc(plane);
        }
        if ((s->cur == NULL) || (s->next == NULL) || (s->out == NULL)) {
            return -1;
        }
    }
    return 0;
}

static void strips_free(heat_strip_t **host)
{
    int i, j;

    for (i = 0; i < nstrips; i++) {
        if (host[i] == NULL) {
            continue;
        }
        example_device_free(host[i]->cur);
        example_device_free(host[i]->next);
        example_device_free(host[i]->out);
        for (j = 0; j < 4; j++) {
            example_device_free(host[i]->halo[j / 2][j % 2]);
        }
        example_shared_free(host[i]);
    }
}

/* The same steps, sequentially: the number of cells of @a grid that differ. */
static int sequential_check(double *maxdiff)
{
    double *a = calloc((size_t)(rows + 2) * cols, sizeof(double));
    double *b = calloc((size_t)(rows + 2) * cols, sizeof(double)), *t;
    int r, c, i, differ = 0;

    for (r = 0; r < rows; r++) {
        for (c = 0; c < cols; c++) {
            a[(r + 1) * cols + c] = heat_initial(rows, cols, r, c);
        }
    }
    for (i = 0; i < steps; i++) {
        heat_update(a, b, rows, cols, 0, rows);
        t = a; a = b; b = t;
    }
    *maxdiff = 0;
    for (r = 0; r < rows; r++) {
        for (c = 0; c < cols; c++) {
            double x = grid[(size_t)r * cols + c], y = a[(r + 1) * cols + c];
            double d = (x > y) ? x - y : y - x;

            differ   += (x != y);
            *maxdiff  = (d > *maxdiff) ? d : *maxdiff;
        }
    }
    free(a);
    free(b);
    return differ;
}

int main(int argc, char **argv)
{
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = example_log};
    heat_strip_t *host[HEAT_MAX_STRIPS] = {NULL}, *dev[HEAT_MAX_STRIPS];
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *ks[HEAT_MAX_STRIPS], *kc;
    const char *all[HEAT_MAX_STRIPS + 1];
    uint64_t direct = 0, errors = 0;
    int i, differ, device = RINGK_DEVICE_NONE, threads = 0;
    double maxdiff;
    ringk_ctx_t *ctx;

    if (argc > 4) {
        rows = atoi(argv[1]); cols = atoi(argv[2]); steps = atoi(argv[3]); nstrips = atoi(argv[4]);
    }
    if ((nstrips < 1) || (nstrips > HEAT_MAX_STRIPS) || (rows < 2 * nstrips) || (cols < 3) ||
        (steps < 1) || (cols * sizeof(double) + sizeof(heat_msg_t) > 60000)) {
        fprintf(stderr, "usage: heat [ROWS COLS STEPS STRIPS(1..%d)]\n", HEAT_MAX_STRIPS);
        return 2;
    }
    grid = calloc((size_t)rows * cols, sizeof(double));
    if ((strips_alloc(host, dev) != 0) || (ringk_ctx_create(&cp, &ctx) != 0)) {
        fprintf(stderr, "heat: out of memory\n");
        return 1;
    }
    {
        static char names[HEAT_MAX_STRIPS][16];
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
            .name = "collector", .handler = collector
        };

        for (i = 0; i < nstrips; i++) {
            snprintf(names[i], sizeof(names[i]), "strip%d", i);
            all[i] = names[i];
        }
        all[nstrips] = NULL;
        if (ringk_kernel_create(ctx, &p, &kc) != 0) {
            return 1;
        }
        for (i = 0; i < nstrips; i++) {
            const char *routes[4] = {"collector", NULL, NULL, NULL};
            int nr = 1, ret;

            if (host[i]->has_up) {
                routes[nr++] = host[i]->name[HEAT_UP];
            }
            if (host[i]->has_down) {
                routes[nr++] = host[i]->name[HEAT_DOWN];
            }
            p.field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                             RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO |
                             RINGK_KERNEL_PARAM_FIELD_BACKENDS |
                             RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY |
                             RINGK_KERNEL_PARAM_FIELD_THREADS | RINGK_KERNEL_PARAM_FIELD_BLOCKS;
            /* a device strip's cells are updated by all its threads: 64 per block, and two
             * blocks for a strip of more than 16384 cells (the CPU handler is one thread) */
            p.threads      = 64;
            p.blocks       = (host[i]->nrows * cols > 16384) ? 2 : 1;
            p.name         = names[i];
            p.handler      = strip_cpu;                 /* the CPU, when there is no device */
            p.device_entry = &example_heat_strip_entry; /* the device, when there is one */
            p.backends     = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
            p.arg          = dev[i];
            p.publishes_to = routes;
            ret = ringk_kernel_create(ctx, &p, &ks[i]);
            if (ret != 0) {
                fprintf(stderr, "heat: %s: %s\n", names[i], strerror(-ret));
                return 1;
            }
        }
    }
    if (ringk_ctx_start(ctx) != 0) {
        return 1;
    }
    for (i = 0; i < nstrips; i++) {
        uint32_t start = HEAT_START;

        ringk_send(ctx, NULL, all[i], RINGK_MSG_DATA, &start, sizeof(start), RINGK_WAIT_FOREVER);
    }
    while (__atomic_load_n(&rows_in, __ATOMIC_ACQUIRE) < rows) {
        if (example_idle(ctx) != 0) {
            ringk_ctx_destroy(ctx);
            return 1;
        }
    }
    for (i = 0; i < nstrips; i++) {
        /* stopped first: a device kernel's loop stores its counters for the host between
         * turns, and for the last time before it stops */
        ringk_kernel_terminate(ks[i]);
        ringk_kernel_stats_query(ks[i], &st);
        direct += st.sent_direct;
        errors += st.handler_errors + st.bad_cells;
        device  = st.device;
    }
    ringk_ctx_destroy(ctx);
    for (i = 0; i < nstrips; i++) {
        errors += host[i]->errors;
        /* a device strip: the threads that updated it (the fewest over the strips) */
        if ((host[i]->threads_used > 0) &&
            ((threads == 0) || (host[i]->threads_used < threads))) {
            threads = host[i]->threads_used;
        }
    }
    errors += bad_rows;
    differ  = sequential_check(&maxdiff);
    printf("heat: %dx%d grid, %d steps, %d strip kernels on the %s, %llu halo rows sent device "
           "to device: %d of %d cells differ from the sequential result (max diff %g), %llu "
           "errors: %s\n", rows, cols, steps, nstrips, example_where(device),
           (unsigned long long)direct, differ, rows * cols, maxdiff, (unsigned long long)errors,
           (differ || errors) ? "MISMATCH" : "OK");
    /* device: the strips' ringk_kernel_stats_t.device (a CUDA index, -2 emulated, -1 the CPU) */
    /* threads: the device threads that updated a strip (its kernel's threads x blocks; 1 on
     * the CPU) */
    printf("RESULT gpu_heat rank=0 size=1 ok=%d device=%d rows=%d cols=%d steps=%d strips=%d "
           "differ=%d errors=%llu direct=%llu threads=%d\n", !differ && !errors, device, rows,
           cols, steps, nstrips, differ, (unsigned long long)errors, (unsigned long long)direct,
           (threads > 0) ? threads : 1);
    strips_free(host);
    free(grid);
    return (differ || errors) ? 1 : 0;
}
