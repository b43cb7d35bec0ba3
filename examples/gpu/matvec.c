/* SPDX-License-Identifier: BSD-3-Clause */
/* A matrix-vector product per message with a device kernel: "mv" (backends CPU | CUDA: on the
 * GPU when there is one, every thread of its block a share of the rows; else on the CPU, one
 * thread; built as host C, on the emulated device) holds an N x N matrix, which its first
 * message makes it fill; each further message brings a vector x, and the reply y = A x goes to a
 * CPU kernel "check", which compares it with the host's own product (to 1e-12, relative: the
 * GPU fuses multiply-adds). Ends with one line "RESULT gpu_matvec rank=0 size=1 ok=0|1
 * device=D key=value ..." for scripts; ok=1 (exit 0) when every reply came and matched.
 * Usage: matvec [N MESSAGES THREADS] */
#include "examples/example_job.h"
#include "examples/gpu/matvec.h"

#include <ringk/api/ringk.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n = 256, msgs = 2000, threads = 256;
static uint64_t replies, wrong;

/* The vector of message @a seq. */
static double mv_x(uint64_t seq, int j)
{
    return (double)((seq * 31 + (uint64_t)j * 17) % 101) / 50.0 - 1.0;
}

/* "mv" on the CPU: the device handler's work on one thread, sent with the host API. */
static int mv_cpu(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    mv_state_t *s      = arg;
    const mv_msg_t *in = ringk_msg_payload(msg);

    if ((msg->length == sizeof(mv_msg_t)) && (in->seq == 0)) {
        mv_fill(s, 0, 1);
        return 0;
    }
    if (msg->length != mv_len(s->n)) {
        s->bad++;
        return -1;
    }
    mv_rows(s, in->v, 0, 1);
    s->out->seq = in->seq;
    return ringk_send(ringk_kernel_ctx(k), k, "check", RINGK_MSG_DATA, s->out, mv_len(s->n),
                      RINGK_WAIT_FOREVER);
}

/* "check": each reply against the host's product of its message's vector. */
static int check(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const mv_msg_t *y = ringk_msg_payload(msg);
    int i, j, ok = (msg->length == mv_len(n)) && (y->seq >= 1) && (y->seq <= (uint64_t)msgs);

    for (i = 0; ok && (i < n); i++) {
        double ref = 0.0;

        for (j = 0; j < n; j++) {
            ref += mv_a(i, j) * mv_x(y->seq, j);
        }
        ok = (fabs(y->v[i] - ref) <= 1e-12 * (1.0 + fabs(ref)));
    }
    wrong += !ok;
    if (__atomic_add_fetch(&replies, 1, __ATOMIC_RELEASE) == (uint64_t)msgs) {
        example_notify();
    }
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    static const char *to_check[] = {"check", NULL};
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = example_log};
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_params_t p;
    ringk_kernel_t *kmv, *kc;
    mv_state_t *s, *s_dev;
    mv_msg_t *x;
    ringk_ctx_t *ctx;
    uint64_t seq;
    int j, ret, ok;

    if (argc > 3) {
        n = atoi(argv[1]); msgs = atoi(argv[2]); threads = atoi(argv[3]);
    }
    if ((n < 1) || (n > MV_N_MAX) || (msgs < 1) || (threads < 1) || (threads > 256)) {
        fprintf(stderr, "usage: matvec [N(1..%d) MESSAGES THREADS(1..256)]\n", MV_N_MAX);
        return 2;
    }
    /* everything before the kernels start */
    s = example_shared_alloc(sizeof(*s), (void**)&s_dev);
    x = malloc(mv_len(n));
    if ((s == NULL) || (x == NULL)) {
        fprintf(stderr, "matvec: out of memory\n");
        return 1;
    }
    s->n   = n;
    s->a   = example_device_alloc((size_t)n * n * sizeof(double));
    s->out = example_device_alloc(mv_len(n));
    if ((s->a == NULL) || (s->out == NULL) || (ringk_ctx_create(&cp, &ctx) != 0)) {
        fprintf(stderr, "matvec: out of memory\n");
        return 1;
    }
    memset(&p, 0, sizeof(p));
    p.field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                   RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.name       = "check";
    p.handler    = check;
    p.max_in     = mv_len(n);
    if (ringk_kernel_create(ctx, &p, &kc) != 0) {
        return 1;
    }
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_BACKENDS |
                     RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY | RINGK_KERNEL_PARAM_FIELD_THREADS |
                     RINGK_KERNEL_PARAM_FIELD_MAX_OUT;
    p.name         = "mv";
    p.handler      = mv_cpu;            /* the CPU, when there is no device */
    p.device_entry = &example_mv_entry; /* the device, when there is one */
    p.backends     = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
    p.threads      = (unsigned)threads; /* one block; the entry is bounded for 256 */
    p.max_out      = mv_len(n);
    p.publishes_to = to_check;
    p.arg          = s_dev;
    ret = ringk_kernel_create(ctx, &p, &kmv);
    if ((ret != 0) || (ringk_ctx_start(ctx) != 0)) {
        fprintf(stderr, "matvec: kernel 'mv': %s\n", strerror(-ret));
        return 1;
    }
    x->seq = 0; /* fill the matrix */
    ringk_send(ctx, NULL, "mv", RINGK_MSG_DATA, x, sizeof(*x), RINGK_WAIT_FOREVER);
    for (seq = 1; seq <= (uint64_t)msgs; seq++) {
        x->seq = seq;
        for (j = 0; j < n; j++) {
            x->v[j] = mv_x(seq, j);
        }
        ringk_send(ctx, NULL, "mv", RINGK_MSG_DATA, x, mv_len(n), RINGK_WAIT_FOREVER);
    }
    while (__atomic_load_n(&replies, __ATOMIC_ACQUIRE) < (uint64_t)msgs) {
        if (example_idle(ctx) != 0) {
            ringk_ctx_destroy(ctx);
            return 1;
        }
    }
    ringk_kernel_terminate(kmv); /* its counters are stored for the last time as it stops */
    ringk_kernel_stats_query(kmv, &st);
    ringk_ctx_destroy(ctx);
    ok = (wrong == 0) && (s->bad == 0) && (st.handler_errors == 0);
    printf("matvec: %dx%d matrix, %d products on the %s (%d threads), %llu replies, %llu wrong: "
           "%s\n", n, n, msgs, example_where(st.device), (s->threads_used > 0) ?
           s->threads_used : 1, (unsigned long long)replies, (unsigned long long)wrong,
           ok ? "OK" : "MISMATCH");
    /* device: mv's ringk_kernel_stats_t.device (a CUDA index, -2 emulated, -1 the CPU);
     * threads: the device threads that computed the rows (1 on the CPU) */
    printf("RESULT gpu_matvec rank=0 size=1 ok=%d device=%d n=%d msgs=%d replies=%llu wrong=%llu "
           "threads=%d\n", ok, st.device, n, msgs, (unsigned long long)replies,
           (unsigned long long)wrong, (s->threads_used > 0) ? s->threads_used : 1);
    example_device_free(s->a);
    example_device_free(s->out);
    example_shared_free(s);
    free(x);
    return ok ? 0 : 1;
}
