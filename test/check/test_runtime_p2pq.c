/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the libringk runtime: the P2P message queue. */
#include "test_runtime.h"
#include "test_log.h"
#include "test_util.h"

#include <ringk/api/ringk.h>
#include <ringk/api/ringk_p2pq_dev.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- P2P message queue ---------------------------------------------------------------------- */

typedef struct {
    uint64_t n;
    uint64_t check;
    uint8_t  fill[16];
} elem_t;

static ringk_p2pq_t *p2pq_new(unsigned capacity, size_t elem)
{
    ringk_p2pq_params_t p = {
        .field_mask = RINGK_P2PQ_PARAM_FIELD_CAPACITY | RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE,
        .capacity = capacity, .elem_size = elem
    };
    ringk_p2pq_t *q;

    ck_assert_int_eq(ringk_p2pq_create(&p, &q), 0);
    return q;
}

START_TEST(test_p2pq_semantics)
{
    ringk_p2pq_t *q = p2pq_new(8, sizeof(elem_t));
    elem_t e = {0}, out, batch[20];
    ringk_p2pq_stats_t st;
    unsigned n, i;

    ck_assert_uint_eq(ringk_p2pq_capacity(q), 8);
    ck_assert(ringk_p2pq_empty(q));
    ck_assert_int_eq(ringk_p2pq_receive(q, &out), -EAGAIN);
    ck_assert_int_eq(ringk_p2pq_try_peek(q, &out), -EAGAIN);
    for (i = 0; i < 8; i++) {
        e.n = i;
        ck_assert_int_eq(ringk_p2pq_send(q, &e), 0);
    }
    ck_assert(ringk_p2pq_full(q));
    ck_assert_uint_eq(ringk_p2pq_count(q), 8);
    ck_assert_int_eq(ringk_p2pq_send(q, &e), -EAGAIN);
    ck_assert_int_eq(ringk_p2pq_try_peek(q, &out), 0);
    ck_assert_uint_eq(out.n, 0);
    ck_assert_uint_eq(ringk_p2pq_count(q), 8); /* peek leaves it there */
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(ringk_p2pq_receive(q, &out), 0);
        ck_assert_uint_eq(out.n, i);
    }
    ck_assert_int_eq(ringk_p2pq_clear(q, &n), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert(ringk_p2pq_empty(q));
    /* batches wrap around the ring, in order */
    for (i = 0; i < 20; i++) {
        batch[i].n = 100 + i;
    }
    ck_assert_int_eq(ringk_p2pq_send_batch(q, batch, 20, &n), 0);
    ck_assert_uint_eq(n, 8);
    memset(batch, 0, sizeof(batch));
    ck_assert_int_eq(ringk_p2pq_receive_batch(q, batch, 20, &n), 0);
    ck_assert_uint_eq(n, 8);
    for (i = 0; i < 8; i++) {
        ck_assert_uint_eq(batch[i].n, 100 + i);
    }
    ck_assert_int_eq(ringk_p2pq_receive_batch(q, batch, 20, &n), -EAGAIN);
    ck_assert_int_eq(ringk_p2pq_stats_query(q, &st), 0);
    ck_assert_uint_eq(st.sent, 16);
    ck_assert_uint_eq(st.received, 11);
    ck_assert_uint_eq(st.cleared, 5);
    ck_assert_uint_eq(st.refused_full, 2);
    ck_assert_int_eq(st.mode, RINGK_P2PQ_MODE_HOST_MEMORY);
    ringk_p2pq_destroy(q);
}
END_TEST

START_TEST(test_p2pq_bad_params)
{
    ringk_p2pq_params_t p = {.field_mask = RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE, .elem_size = 0};
    ringk_p2pq_t *q = NULL;

    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
    p.elem_size = RINGK_P2PQ_ELEM_MAX + 1;
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
    p.elem_size  = 8;
    p.field_mask |= RINGK_P2PQ_PARAM_FIELD_CAPACITY;
    p.capacity   = 1000;
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
    p.capacity   = 64;
    p.field_mask |= RINGK_P2PQ_PARAM_FIELD_DEVICES;
    p.src_device = -3;
    p.dst_device = RINGK_P2PQ_HOST;
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
    ck_assert_ptr_null(q);
    if (access("/proc/driver/nvidia/version", F_OK) != 0) { /* no GPU: device 0 is none */
        p.src_device = 0;
        ck_assert_int_eq(ringk_p2pq_create(&p, &q), -ENODEV);
        ck_assert_ptr_null(q);
    }
    p.src_device = 0; /* a GPU and the emulated device: refused before CUDA is asked */
    p.dst_device = RINGK_P2PQ_EMULATED;
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
    ck_assert_ptr_null(q);
    p.field_mask = RINGK_P2PQ_PARAM_FIELD_CAPACITY; /* no element size */
    ck_assert_int_eq(ringk_p2pq_create(&p, &q), -EINVAL);
}
END_TEST

#define P2PQ_N 1000000

static void *p2pq_sender(void *arg)
{
    ringk_p2pq_t *q = arg;
    elem_t e;
    uint64_t i;

    memset(&e, 0, sizeof(e));
    for (i = 0; i < P2PQ_N; i++) {
        e.n     = i;
        e.check = i * 0x9e3779b97f4a7c15ull;
        memset(e.fill, (int)(i & 0xff), sizeof(e.fill));
        while (ringk_p2pq_send(q, &e) != 0) {
            sched_yield();
        }
    }
    return NULL;
}

START_TEST(test_p2pq_threads)
{
    ringk_p2pq_t *q = p2pq_new(256, sizeof(elem_t));
    uint64_t i = 0, bad = 0;
    pthread_t th;
    elem_t e;

    pthread_create(&th, NULL, p2pq_sender, q);
    while (i < P2PQ_N) {
        if (ringk_p2pq_receive(q, &e) != 0) {
            sched_yield();
            continue;
        }
        bad += (e.n != i) || (e.check != i * 0x9e3779b97f4a7c15ull) ||
               (e.fill[0] != (uint8_t)(i & 0xff)) || (e.fill[15] != (uint8_t)(i & 0xff));
        i++;
    }
    pthread_join(th, NULL);
    ck_assert_uint_eq(bad, 0);
    ck_assert(ringk_p2pq_empty(q));
    ringk_p2pq_destroy(q);
}
END_TEST

#define P2PQ_BIG_N 100000

/* Sends P2PQ_BIG_N elements of the largest size, each filled with its number's low byte. */
static void *p2pq_big_sender(void *arg)
{
    static uint8_t e[RINGK_P2PQ_ELEM_MAX];
    ringk_p2pq_t *q = arg;
    uint32_t i;

    for (i = 0; i < P2PQ_BIG_N; i++) {
        memset(e, (int)(i & 0xff), sizeof(e));
        while (ringk_p2pq_send(q, e) != 0) {
            sched_yield();
        }
    }
    return NULL;
}

/* From the consumer's thread, ringk_p2pq_count() counts only elements that can be received:
 * every one it counts, a receive then takes (the producer writes an element after it claims
 * its cell, and only a written one counts). */
START_TEST(test_p2pq_count_receivable)
{
    static uint8_t e[RINGK_P2PQ_ELEM_MAX];
    ringk_p2pq_t *q = p2pq_new(64, sizeof(e));
    uint32_t i = 0, n, j, refused = 0;
    pthread_t th;

    pthread_create(&th, NULL, p2pq_big_sender, q);
    while (i < P2PQ_BIG_N) {
        n = ringk_p2pq_count(q);
        for (j = 0; j < n; j++) {
            if (ringk_p2pq_receive(q, e) != 0) {
                refused++;
                break;
            }
            ck_assert_uint_eq(e[0], i & 0xff);
            ck_assert_uint_eq(e[sizeof(e) - 1], i & 0xff);
            i++;
        }
    }
    pthread_join(th, NULL);
    ck_assert_uint_eq(refused, 0);
    ck_assert_uint_eq(ringk_p2pq_count(q), 0);
    ringk_p2pq_destroy(q);
}
END_TEST

/* The cases of this file. */
/* ---- endpoints on the emulated device ------------------------------------------------------ */

/* The emulated device's side of a queue: code compiled as host C calling the device functions
 * on the queue's view, as a kernel would (here a host thread). */
typedef struct {
    struct ringk_p2pq_dev *in, *out;  /* receive from in, send what came to out (NULL: none) */
    uint64_t               n, bad;
} emu_side_t;

static void *emu_side(void *arg)
{
    emu_side_t *e = arg;
    uint64_t got = 0, sent = 0;
    elem_t x;

    memset(&x, 0, sizeof(x));
    while ((e->in != NULL) ? (got < e->n) : (sent < e->n)) {
        if (e->in != NULL) {
            if (ringk_p2pq_dev_receive(e->in, &x) != 0) {
                sched_yield();
                continue;
            }
            e->bad += (x.n != got) || (x.check != got * 0x9e3779b97f4a7c15ull);
            got++;
        } else {
            x.n     = sent;
            x.check = sent * 0x9e3779b97f4a7c15ull;
        }
        if (e->out != NULL) {
            while (ringk_p2pq_dev_send(e->out, &x) == RINGK_P2PQ_AGAIN) {
                sched_yield();
            }
            sent++;
        }
    }
    return NULL;
}

static ringk_p2pq_t *p2pq_dev_new(int src, int dst)
{
    ringk_p2pq_params_t p = {
        .field_mask = RINGK_P2PQ_PARAM_FIELD_CAPACITY | RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE |
                      RINGK_P2PQ_PARAM_FIELD_DEVICES,
        .capacity = 64, .elem_size = sizeof(elem_t), .src_device = src, .dst_device = dst
    };
    ringk_p2pq_info_t info = {.field_mask = RINGK_P2PQ_INFO_FIELD_MODE |
                              RINGK_P2PQ_INFO_FIELD_DEVICES | RINGK_P2PQ_INFO_FIELD_DIRECT_P2P |
                              RINGK_P2PQ_INFO_FIELD_REASON};
    ringk_p2pq_t *q;

    ck_assert_int_eq(ringk_p2pq_create(&p, &q), 0);
    ck_assert_int_eq(ringk_p2pq_info_query(q, &info), 0);
    ck_assert_int_eq(info.mode, RINGK_P2PQ_MODE_HOST_MEMORY);
    ck_assert_int_eq(info.src_device, src);
    ck_assert_int_eq(info.dst_device, dst);
    ck_assert_int_eq(info.direct_p2p, 0);
    ck_assert_str_eq(info.reason, "no GPU endpoint: host memory");
    return q;
}

/* host -> emulated device -> emulated device -> host: 20000 elements in order through three
 * queues of 64, the middle one between two emulated-device sides. */
START_TEST(test_p2pq_emulated)
{
    ringk_p2pq_t *h2e = p2pq_dev_new(RINGK_P2PQ_HOST, RINGK_P2PQ_EMULATED);
    ringk_p2pq_t *e2e = p2pq_dev_new(RINGK_P2PQ_EMULATED, RINGK_P2PQ_EMULATED);
    ringk_p2pq_t *e2h = p2pq_dev_new(RINGK_P2PQ_EMULATED, RINGK_P2PQ_HOST);
    emu_side_t a = {.n = 20000}, b = {.n = 20000};
    uint64_t sent = 0, got = 0, bad = 0;
    ringk_p2pq_stats_t st;
    pthread_t ta, tb;
    unsigned n;
    elem_t x;

    ck_assert_int_eq(ringk_p2pq_dev_view(h2e, &a.in), 0);
    ck_assert_int_eq(ringk_p2pq_dev_view(e2e, &a.out), 0);
    ck_assert_int_eq(ringk_p2pq_dev_view(e2e, &b.in), 0);
    ck_assert_int_eq(ringk_p2pq_dev_view(e2h, &b.out), 0);
    /* the host is not the emulated device's end of a queue */
    ck_assert_int_eq(ringk_p2pq_receive(h2e, &x), -EPERM);
    ck_assert_int_eq(ringk_p2pq_clear(h2e, &n), -EPERM);
    ck_assert_int_eq(ringk_p2pq_send(e2h, &x), -EPERM);
    ck_assert_int_eq(ringk_p2pq_send_batch(e2e, &x, 1, &n), -EPERM);
    ck_assert_int_eq(ringk_p2pq_try_peek(e2e, &x), -EPERM);
    pthread_create(&ta, NULL, emu_side, &a);
    pthread_create(&tb, NULL, emu_side, &b);
    memset(&x, 0, sizeof(x));
    while (got < 20000) {
        if (sent < 20000) {
            x.n     = sent;
            x.check = sent * 0x9e3779b97f4a7c15ull;
            sent += (ringk_p2pq_send(h2e, &x) == 0);
        }
        if (ringk_p2pq_receive(e2h, &x) == 0) {
            bad += (x.n != got) || (x.check != got * 0x9e3779b97f4a7c15ull);
            got++;
        }
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_uint_eq(bad + a.bad + b.bad, 0);
    ck_assert_int_eq(ringk_p2pq_stats_query(e2e, &st), 0); /* counted by the device code */
    ck_assert_uint_eq(st.sent, 20000);
    ck_assert_uint_eq(st.received, 20000);
    ck_assert_int_eq(st.mode, RINGK_P2PQ_MODE_HOST_MEMORY);
    ck_assert(ringk_p2pq_empty(e2e));
    ringk_p2pq_destroy(h2e);
    ringk_p2pq_destroy(e2e);
    ringk_p2pq_destroy(e2h);
}
END_TEST

/* The device calls other than send and receive, at both ends of a queue between two
 * emulated-device sides (one thread here): count, peek (the oldest element, not taken), clear
 * (everything queued, counted), and what each says of an empty queue; the host's statistics
 * and count see the device's. */
START_TEST(test_p2pq_emulated_peek_clear)
{
    ringk_p2pq_t *q = p2pq_dev_new(RINGK_P2PQ_EMULATED, RINGK_P2PQ_EMULATED);
    struct ringk_p2pq_dev *tx, *rx;
    ringk_p2pq_stats_t st;
    elem_t x, y;
    unsigned i;

    ck_assert_int_eq(ringk_p2pq_dev_view(q, &tx), 0);
    ck_assert_int_eq(ringk_p2pq_dev_view(q, &rx), 0);
    memset(&x, 0, sizeof(x));
    ck_assert_uint_eq(ringk_p2pq_dev_count(rx), 0);
    ck_assert_int_eq(ringk_p2pq_dev_peek(rx, &y), RINGK_P2PQ_AGAIN);
    ck_assert_uint_eq(ringk_p2pq_dev_clear(rx), 0);
    for (i = 0; i < 5; i++) {
        x.n     = i;
        x.check = i * 0x9e3779b97f4a7c15ull;
        ck_assert_int_eq(ringk_p2pq_dev_send(tx, &x), 0);
    }
    ck_assert_uint_eq(ringk_p2pq_dev_count(rx), 5);
    ck_assert_uint_eq(ringk_p2pq_count(q), 5);
    ck_assert_int_eq(ringk_p2pq_dev_peek(rx, &y), 0);
    ck_assert_uint_eq(y.n, 0);
    ck_assert_int_eq(ringk_p2pq_dev_peek(rx, &y), 0); /* still there */
    ck_assert_uint_eq(y.n, 0);
    ck_assert_uint_eq(ringk_p2pq_dev_count(rx), 5);
    ck_assert_int_eq(ringk_p2pq_dev_receive(rx, &y), 0);
    ck_assert_uint_eq(y.n, 0);
    ck_assert_int_eq(ringk_p2pq_dev_peek(rx, &y), 0);
    ck_assert_uint_eq(y.n, 1);
    ck_assert_uint_eq(y.check, 1 * 0x9e3779b97f4a7c15ull);
    ck_assert_uint_eq(ringk_p2pq_dev_clear(rx), 4);
    ck_assert_uint_eq(ringk_p2pq_dev_count(rx), 0);
    ck_assert_int_eq(ringk_p2pq_dev_peek(rx, &y), RINGK_P2PQ_AGAIN);
    ck_assert_int_eq(ringk_p2pq_dev_receive(rx, &y), RINGK_P2PQ_AGAIN);
    x.n = 7; /* the queue goes on after a clear */
    ck_assert_int_eq(ringk_p2pq_dev_send(tx, &x), 0);
    ck_assert_int_eq(ringk_p2pq_dev_receive(rx, &y), 0);
    ck_assert_uint_eq(y.n, 7);
    ck_assert_int_eq(ringk_p2pq_stats_query(q, &st), 0);
    ck_assert_uint_eq(st.sent, 6);
    ck_assert_uint_eq(st.received, 2);
    ck_assert_uint_eq(st.cleared, 4);
    ck_assert(ringk_p2pq_empty(q));
    ringk_p2pq_destroy(q);
}
END_TEST

void test_runtime_p2pq_tests(TCase *tc)
{
    tcase_add_test(tc, test_p2pq_emulated);
    tcase_add_test(tc, test_p2pq_emulated_peek_clear);
    tcase_add_test(tc, test_p2pq_semantics);
    tcase_add_test(tc, test_p2pq_bad_params);
    tcase_add_test(tc, test_p2pq_threads);
    tcase_add_test(tc, test_p2pq_count_receivable);
}
