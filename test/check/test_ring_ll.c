/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of LL rings (src/core/ringk_ring_ll.h), part of test_ring: a message written and read
 * whole in one read, across the ring's end; words not yet written, or of another position,
 * never taken for the message's; headers no producer writes refused; cancel cells; the
 * consumer's zeroing; and producers against a consumer that reads each message's words in one
 * go, in an order of its own, with every byte checked. */
#include "test_util.h"

#include <core/ringk_ring_ll.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LL_CELL  256u
#define LL_WORDS (LL_CELL / 8)

void test_ring_ll_cases(Suite *s);

static void *ll_ring(ringk_ring_t *r, uint32_t ncells)
{
    uint64_t bytes = ringk_ring_bytes(ncells, LL_CELL);
    void *mem = NULL;

    ck_assert_int_eq(posix_memalign(&mem, RINGK_RING_LINE, bytes), 0);
    ck_assert_int_eq(ringk_ring_init(r, mem, bytes, ncells, LL_CELL), 0);
    return mem;
}

/* Reads @a n words of the message at @a pos into @a w (in any order: last to first). */
static void ll_read(const ringk_ring_t *r, uint64_t pos, uint64_t *w, uint32_t n)
{
    uint32_t i;

    for (i = n; i-- > 0;) {
        w[i] = __atomic_load_n(ringk_ring_ll_word(r, pos, i), __ATOMIC_RELAXED);
    }
}

/* Claims, writes and publishes a message of @a len bytes of @a src at the tail: its position. */
static uint64_t ll_send(ringk_ring_t *r, const void *src, uint32_t len, uint8_t id)
{
    uint32_t nc = ringk_ring_ll_cells(len, r->cell_size);
    uint64_t head = 0, pos;

    ck_assert_int_eq(ringk_ring_mp_claim_in(r, nc, &head, NULL, &pos, RINGK_RING_CLAIM_WRAPS),
                     1);
    ringk_ring_ll_write(r, pos, RINGK_RING_LL_HDR_WORDS, src, len);
    ringk_ring_ll_publish(r, pos, len, (uint16_t)nc, id, 3);
    return pos;
}

/* A message whole in one read, decoded; across the ring's end, with no skip cell; zeroed
 * after, then found no more. */
START_TEST(test_ring_ll_roundtrip)
{
    ringk_ring_t r;
    void *mem = ll_ring(&r, 4);
    uint64_t w[4 * LL_WORDS], pos, head = 0, filler = 0;
    uint8_t msg[240], out[240];
    ringk_ring_ll_hdr_t h;
    uint32_t i, round;

    for (i = 0; i < sizeof(msg); i++) {
        msg[i] = (uint8_t)(i * 7 + 3);
    }
    for (round = 0; round < 6; round++) {
        /* 1 cell of filler, then 240 bytes: 63 words, two cells, across the end each lap */
        pos = ll_send(&r, &filler, 8, 1);
        ll_read(&r, pos, w, LL_WORDS);
        ck_assert_int_eq(ringk_ring_ll_judge(&r, pos, w, 4, &h), RINGK_RING_LL_MSG);
        ringk_ring_ll_done(&r, pos, h.words);
        head = pos + h.ncells;
        pos = ll_send(&r, msg, sizeof(msg), 9);
        ck_assert_uint_eq(pos, head); /* no padding */
        ll_read(&r, pos, w, 2 * LL_WORDS);
        ck_assert_int_eq(ringk_ring_ll_judge(&r, pos, w, 4, &h), RINGK_RING_LL_MSG);
        ck_assert_uint_eq(h.len, sizeof(msg));
        ck_assert_uint_eq(h.ncells, 2);
        ck_assert_uint_eq(h.id, 9);
        ck_assert_uint_eq(h.flags, 3);
        ck_assert_uint_eq(h.words, RINGK_RING_LL_HDR_WORDS + 60);
        ck_assert(ringk_ring_ll_whole(pos, w + RINGK_RING_LL_HDR_WORDS,
                                      h.words - RINGK_RING_LL_HDR_WORDS));
        memset(out, 0, sizeof(out));
        ringk_ring_ll_decode(out, w + RINGK_RING_LL_HDR_WORDS, h.len);
        ck_assert_mem_eq(out, msg, sizeof(msg));
        ringk_ring_ll_done(&r, pos, h.words);
        ll_read(&r, pos, w, h.words);
        for (i = 0; i < h.words; i++) {
            ck_assert_uint_eq(w[i], 0);
        }
        ck_assert_int_eq(ringk_ring_ll_judge(&r, pos, w, 4, &h), RINGK_RING_LL_NONE);
        ringk_ring_release_to(&r, pos + 2);
    }
    free(mem);
}
END_TEST

/* What a consumer may see before every store of a message landed: a word not written yet (0)
 * or of another position fails the check of that word, never passes for the message's. */
START_TEST(test_ring_ll_partial)
{
    ringk_ring_t r;
    void *mem = ll_ring(&r, 4);
    uint64_t w[LL_WORDS], pos;
    uint32_t data[20];
    ringk_ring_ll_hdr_t h;

    memset(data, 0x5a, sizeof(data));
    pos = ll_send(&r, data, sizeof(data), 0);
    ll_read(&r, pos, w, LL_WORDS);
    ck_assert_int_eq(ringk_ring_ll_judge(&r, pos, w, 4, &h), RINGK_RING_LL_MSG);
    /* a data word still 0: the header passes, the message is not whole */
    w[5] = 0;
    ck_assert(!ringk_ring_ll_whole(pos, w + 3, h.words - 3));
    /* a word of the message one position on: not this one's */
    w[5] = ((uint64_t)ringk_ring_ll_flag(pos + 1) << 32) | 0x5a5a5a5au;
    ck_assert(!ringk_ring_ll_whole(pos, w + 3, h.words - 3));
    /* the header's words missing or of another lap: nothing there yet */
    ll_read(&r, pos, w, LL_WORDS);
    w[2] = 0;
    ck_assert_int_eq(ringk_ring_ll_judge(&r, pos, w, 4, &h), RINGK_RING_LL_NONE);
    ll_read(&r, pos, w, LL_WORDS);
    w[0] = pos + 1 + r.ncells;
    ck_assert_int_eq(ringk_ring_ll_judge(&r, pos, w, 4, &h), RINGK_RING_LL_NONE);
    /* and the same words judged at the next lap's position: not a message there */
    ll_read(&r, pos, w, LL_WORDS);
    ck_assert_int_eq(ringk_ring_ll_judge(&r, pos + r.ncells, w, 4, &h), RINGK_RING_LL_NONE);
    ck_assert_uint_ne(ringk_ring_ll_flag(pos), 0);
    ck_assert_uint_ne(ringk_ring_ll_flag(UINT32_MAX), 0); /* (pos + 1) mod 2^32 == 0 */
    free(mem);
}
END_TEST

/* Headers with the flag that no producer writes: refused, named bad. */
static const struct {
    uint32_t len, ncells, id, flags, max_cells;
    int      expect;
} judge_cases[] = {
    {40, 1, 0, 0, 4, RINGK_RING_LL_MSG},
    {40, 0, 0, 0, 4, RINGK_RING_LL_BAD},                        /* no cells */
    {40, 2, 0, 0, 4, RINGK_RING_LL_BAD},                        /* not the cells its length needs */
    {500, 3, 0, 0, 2, RINGK_RING_LL_BAD},                       /* above what the consumer takes */
    {40, 1, 0, RINGK_CELL_FLAG_SKIP, 4, RINGK_RING_LL_BAD},     /* no skip cells in an LL ring */
    {40, 1, 0, RINGK_CELL_FLAG_CLEAR, 4, RINGK_RING_LL_BAD},
    {0, 2, 0, RINGK_CELL_FLAG_CANCEL, 4, RINGK_RING_LL_CANCEL},
    {8, 2, 0, RINGK_CELL_FLAG_CANCEL, 4, RINGK_RING_LL_BAD},    /* a cancel carries nothing */
    {0, 9, 0, RINGK_CELL_FLAG_CANCEL, 4, RINGK_RING_LL_BAD},    /* more cells than taken */
};

START_TEST(test_ring_ll_judge_bad)
{
    ringk_ring_t r;
    void *mem = ll_ring(&r, 4);
    uint64_t w[3], pos = 6;
    uint32_t flag = ringk_ring_ll_flag(pos);
    ringk_ring_ll_hdr_t h;

    w[0] = pos + 1;
    w[1] = ((uint64_t)flag << 32) | judge_cases[_i].len;
    w[2] = ((uint64_t)flag << 32) | judge_cases[_i].ncells | (judge_cases[_i].id << 16) |
           (judge_cases[_i].flags << 24);
    ck_assert_int_eq(ringk_ring_ll_judge(&r, pos, w, judge_cases[_i].max_cells, &h),
                     judge_cases[_i].expect);
    free(mem);
}
END_TEST

/* A producer that found the consumer gone gives its cells up: an LL cancel cell, which the
 * consumer passes over (and zeroes whole). */
START_TEST(test_ring_ll_cancel)
{
    ringk_ring_t r;
    void *mem = ll_ring(&r, 4);
    uint64_t w[LL_WORDS], head = 0, pos;
    ringk_ring_ll_hdr_t h;
    uint32_t i;

    ck_assert_int_eq(ringk_ring_mp_claim_in(&r, 2, &head, NULL, &pos, RINGK_RING_CLAIM_WRAPS), 1);
    ringk_ring_ll_put(&r, pos, 40, ringk_ring_ll_flag(pos), 77); /* part written, then given up */
    ringk_ring_ll_cancel(&r, pos, 2);
    ll_read(&r, pos, w, LL_WORDS);
    ck_assert_int_eq(ringk_ring_ll_judge(&r, pos, w, 4, &h), RINGK_RING_LL_CANCEL);
    ck_assert_uint_eq(h.ncells, 2);
    ringk_ring_ll_done(&r, pos, (uint64_t)h.ncells * LL_WORDS);
    for (i = 0; i < 2 * LL_WORDS; i++) {
        ck_assert_uint_eq(*ringk_ring_ll_word(&r, pos, i), 0);
    }
    free(mem);
}
END_TEST

/* ---- producers against a consumer that reads each message in one go --------------------- */

#define LL_THREAD_MSGS 100000u

typedef struct {
    ringk_ring_t *r;
    uint32_t      producer;
} ll_arg_t;

static uint32_t ll_len(uint64_t m)
{
    return 8 + (uint32_t)((m * 37) % 400);
}

static void *ll_producer(void *p)
{
    ll_arg_t *a = p;
    uint8_t buf[420];
    uint64_t m, head = 0, pos;
    uint32_t len, nc, i;

    for (m = 0; m < LL_THREAD_MSGS; m++) {
        len = ll_len(m);
        nc  = ringk_ring_ll_cells(len, a->r->cell_size);
        memcpy(buf, &m, 8);
        for (i = 8; i < len; i++) {
            buf[i] = (uint8_t)(m * 131u + i * 7u + a->producer);
        }
        while (!ringk_ring_mp_claim_in(a->r, nc, &head, NULL, &pos, RINGK_RING_CLAIM_WRAPS)) {
            sched_yield();
        }
        ringk_ring_ll_write(a->r, pos, RINGK_RING_LL_HDR_WORDS, buf, len);
        ringk_ring_ll_publish(a->r, pos, len, (uint16_t)nc, (uint8_t)a->producer, 0);
    }
    return NULL;
}

/* Three producers, one consumer: each message read in one pass of loads (last word first, so
 * that the seq word, stored last, is read last), judged and checked by its flags alone; a read
 * that finds it in part is made again. Every message once, in order per producer, intact. */
START_TEST(test_ring_ll_threads)
{
    enum { P = 3 };
    ringk_ring_t r;
    void *mem = ll_ring(&r, 16);
    uint64_t w[8 * LL_WORDS], cons = 0, rel = 0, expect[P] = {0}, total = 0, partial = 0, m;
    uint8_t buf[420];
    pthread_t th[P];
    ll_arg_t args[P];
    ringk_ring_ll_hdr_t h;
    uint32_t i, len;
    int p, got, bad;

    for (p = 0; p < P; p++) {
        args[p] = (ll_arg_t){&r, (uint32_t)p};
        ck_assert_int_eq(pthread_create(&th[p], NULL, ll_producer, &args[p]), 0);
    }
    while (total < (uint64_t)P * LL_THREAD_MSGS) {
        ll_read(&r, cons, w, 8 * LL_WORDS);
        got = ringk_ring_ll_judge(&r, cons, w, 8, &h);
        if (got == RINGK_RING_LL_NONE) {
            sched_yield();
            continue;
        }
        if ((got != RINGK_RING_LL_MSG) || (h.id >= P)) {
            ck_abort_msg("message %" PRIu64 ": judged %d, id %u", cons, got, h.id);
        }
        if (!ringk_ring_ll_whole(cons, w + 3, h.words - 3)) {
            partial++; /* on its way: read again */
            continue;
        }
        ringk_ring_ll_decode(buf, w + 3, h.len);
        memcpy(&m, buf, 8);
        p   = h.id;
        len = h.len;
        bad = (m != expect[p]) || (len != ll_len(m));
        for (i = 8; !bad && (i < len); i++) {
            bad = (buf[i] != (uint8_t)(m * 131u + i * 7u + (uint32_t)p));
        }
        if (bad) {
            ck_abort_msg("producer %d message %" PRIu64 " (expected %" PRIu64 ") corrupt", p, m,
                         expect[p]);
        }
        expect[p]++;
        ringk_ring_ll_done(&r, cons, h.words);
        cons += h.ncells;
        if (cons - rel >= 4) { /* cells back in batches, as the device loop gives them */
            ringk_ring_release_to(&r, cons);
            rel = cons;
        }
        total++;
    }
    for (p = 0; p < P; p++) {
        pthread_join(th[p], NULL);
        ck_assert_uint_eq(expect[p], LL_THREAD_MSGS);
    }
    printf("# %" PRIu64 " messages, %" PRIu64 " read again for words on their way\n", total,
           partial);
    free(mem);
}
END_TEST

void test_ring_ll_cases(Suite *s)
{
    TCase *tc = tcase_create("ll");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ring_ll_roundtrip);
    tcase_add_test(tc, test_ring_ll_partial);
    tcase_add_loop_test(tc, test_ring_ll_judge_bad, 0,
                        sizeof(judge_cases) / sizeof(judge_cases[0]));
    tcase_add_test(tc, test_ring_ll_cancel);
    tcase_add_test(tc, test_ring_ll_threads);
    suite_add_tcase(s, tc);
}
