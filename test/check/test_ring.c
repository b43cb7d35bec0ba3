/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the ring protocol (src/core/ringk_ring.h): layout checks, wrap-around, full and empty,
 * multi-cell messages, malformed headers, and concurrent producers and consumer with every byte
 * checked; LL rings in test_ring_ll.c. */
#include "test_util.h"

#include <core/ringk_ring.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* test_ring_ll.c: the LL rings' cases (TCase "ll") */
void test_ring_ll_cases(Suite *s);

static void *ring_alloc(uint32_t ncells, uint32_t cell_size, uint64_t *bytes_p)
{
    uint64_t bytes = ringk_ring_bytes(ncells, cell_size);
    void *mem = NULL;

    ck_assert_int_eq(posix_memalign(&mem, RINGK_RING_LINE, bytes), 0);
    *bytes_p = bytes;
    return mem;
}

static uint8_t pattern(uint64_t msg, uint64_t i)
{
    return (uint8_t)(msg * 131u + i * 7u + 1u);
}

/* ---- layout ----------------------------------------------------------------------------- */

static const struct {
    uint32_t ncells, cell_size;
    int      expect;
} init_cases[] = {
    {256, 64, 0},        {2, 64, 0},          {1u << 20, 64, 0},  {16, 4096, 0},
    {0, 64, -EINVAL},    {1, 64, -EINVAL},    {1000, 64, -EINVAL}, {256, 32, -EINVAL},
    {256, 96, -EINVAL},  {256, 8192, -EINVAL}, {1u << 21, 64, -EINVAL},
};

START_TEST(test_ring_init_sizes)
{
    uint32_t nc = init_cases[_i].ncells < 2 ? 2 : init_cases[_i].ncells;
    uint32_t cs = init_cases[_i].cell_size < 64 ? 64 : init_cases[_i].cell_size;
    uint64_t bytes = ringk_ring_bytes(nc, cs);
    ringk_ring_t r;
    void *mem = NULL;

    ck_assert_int_eq(posix_memalign(&mem, RINGK_RING_LINE, bytes), 0);
    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, init_cases[_i].ncells,
                                     init_cases[_i].cell_size), init_cases[_i].expect);
    free(mem);
}
END_TEST

START_TEST(test_ring_init_too_small)
{
    uint64_t bytes;
    void *mem = ring_alloc(16, 64, &bytes);
    ringk_ring_t r;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes - 1, 16, 64), -EINVAL);
    ck_assert_int_eq(ringk_ring_init(&r, (char*)mem + 8, bytes, 8, 64), -EINVAL);
    free(mem);
}
END_TEST

START_TEST(test_ring_attach_validates)
{
    uint64_t bytes;
    void *mem = ring_alloc(16, 64, &bytes);
    ringk_ring_t r, a;
    ringk_ring_shm_t *shm = (ringk_ring_shm_t*)mem;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 16, 64), 0);
    ck_assert_int_eq(ringk_ring_attach(&a, mem, bytes), 0);
    ck_assert_uint_eq(a.ncells, 16);
    ck_assert_uint_eq(a.cell_size, 64);
    /* a mapping shorter than the ring claims */
    ck_assert_int_eq(ringk_ring_attach(&a, mem, bytes - 64), -EINVAL);
    shm->magic ^= 1;
    ck_assert_int_eq(ringk_ring_attach(&a, mem, bytes), -EPROTO);
    shm->magic ^= 1;
    shm->version = 99;
    ck_assert_int_eq(ringk_ring_attach(&a, mem, bytes), -EPROTO);
    shm->version = RINGK_RING_VERSION;
    shm->log2_ncells = 30;
    ck_assert_int_eq(ringk_ring_attach(&a, mem, bytes), -EINVAL);
    shm->log2_ncells = 4;
    shm->cell_size = 100;
    ck_assert_int_eq(ringk_ring_attach(&a, mem, bytes), -EINVAL);
    shm->cell_size = 128; /* consistent power of 2, but ring_bytes no longer matches */
    ck_assert_int_eq(ringk_ring_attach(&a, mem, bytes), -EINVAL);
    free(mem);
}
END_TEST

/* ---- single-threaded semantics ----------------------------------------------------------- */

START_TEST(test_ring_full_empty_wrap)
{
    uint64_t bytes, cons = 0, pos;
    void *mem = ring_alloc(8, 64, &bytes);
    ringk_ring_prod_t prod = {0, 0};
    ringk_ring_t r;
    uint64_t v;
    int lap, i;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 8, 64), 0);
    ck_assert_ptr_null(ringk_ring_peek(&r, &cons));
    /* 5 laps around an 8-cell ring, filling it completely each time */
    for (lap = 0; lap < 5; lap++) {
        for (i = 0; i < 8; i++) {
            ck_assert(ringk_ring_sp_claim(&r, &prod, 1, &pos));
            v = pos * 3;
            ringk_ring_write(&r, pos, 0, &v, sizeof(v));
            ringk_ring_publish(&r, pos, sizeof(v), 1, 7, 0);
        }
        ck_assert(!ringk_ring_sp_claim(&r, &prod, 1, &pos)); /* full */
        for (i = 0; i < 8; i++) {
            const ringk_cell_hdr_t *h = ringk_ring_peek(&r, &cons);
            ck_assert_ptr_nonnull(h);
            ck_assert_uint_eq(h->len, sizeof(v));
            ck_assert_uint_eq(h->id, 7);
            ringk_ring_read(&r, cons, 0, &v, sizeof(v));
            ck_assert_uint_eq(v, cons * 3);
            ringk_ring_release(&r, cons, 1, h->flags);
            cons++;
        }
        ck_assert_ptr_null(ringk_ring_peek(&r, &cons)); /* empty */
    }
    ck_assert_uint_eq(cons, 40);
    ck_assert_uint_eq(r.cons->pos, 40);
    ck_assert_uint_eq(r.prod->pos, 40);
    free(mem);
}
END_TEST

START_TEST(test_ring_multicell_wraps)
{
    uint64_t bytes, cons = 0, pos;
    void *mem = ring_alloc(16, 64, &bytes);
    ringk_ring_prod_t prod = {0, 0};
    uint8_t in[1000], out[1000];
    const ringk_cell_hdr_t *h;
    ringk_ring_t r;
    uint32_t len, nc, m, i, skips = 0;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 16, 64), 0);
    ck_assert_uint_eq(ringk_ring_capacity(1, 64), 48);
    ck_assert_uint_eq(ringk_ring_cells_for(48, 64), 1);
    ck_assert_uint_eq(ringk_ring_cells_for(49, 64), 2);
    ck_assert_uint_eq(ringk_ring_cells_for(0, 64), 1);
    /* lengths that need 1 to 8 cells (half the ring: always claimable when it is empty),
     * misaligned to the ring so that messages keep meeting its end */
    for (m = 0; m < 500; m++) {
        len = (m * 53) % (uint32_t)(ringk_ring_capacity(8, 64) + 1);
        nc  = ringk_ring_cells_for(len, 64);
        ck_assert_uint_le(len, ringk_ring_capacity(nc, 64));
        for (i = 0; i < len; i++) {
            in[i] = pattern(m, i);
        }
        skips += (ringk_ring_pad(&r, prod.pos, nc) != 0);
        ck_assert(ringk_ring_sp_claim(&r, &prod, nc, &pos));
        ck_assert_uint_le((pos & r.mask) + nc, 16); /* contiguous: never wraps */
        ringk_ring_write(&r, pos, 0, in, len);
        ringk_ring_publish(&r, pos, len, nc, m & 0x7f, 0);
        h = ringk_ring_peek(&r, &cons); /* passes over a skip cell */
        ck_assert_ptr_nonnull(h);
        ck_assert_uint_eq(cons, pos);
        ck_assert_int_eq(ringk_ring_msg_check(&r, cons, h->len, h->ncells, h->flags, 16), 0);
        memset(out, 0, sizeof(out));
        ringk_ring_read(&r, cons, 0, out, len);
        ck_assert_mem_eq(in, out, len);
        ck_assert_mem_eq(in, ringk_ring_payload(&r, cons), len); /* in place, contiguous */
        ringk_ring_release(&r, cons, nc, h->flags);
        cons += nc;
    }
    ck_assert_uint_gt(skips, 10);
    ck_assert_uint_eq(r.cons->pos, cons);
    free(mem);
}
END_TEST

/* Sends @a len bytes of @a payload as one message of @a ncells cells through @a r and takes it
 * at *@a cons (moved past it): the flags its producer published. */
static uint8_t stale_round(ringk_ring_t *r, ringk_ring_prod_t *prod, uint64_t *cons,
                           const void *payload, uint32_t len, uint16_t ncells)
{
    const ringk_cell_hdr_t *h;
    uint64_t pos;
    uint8_t flags;

    ck_assert(ringk_ring_sp_claim(r, prod, ncells, &pos));
    ck_assert_uint_eq(pos, *cons);
    ringk_ring_write(r, pos, 0, payload, len);
    ringk_ring_publish(r, pos, len, ncells, 1, 0);
    h = ringk_ring_peek(r, cons);
    ck_assert_ptr_nonnull(h);
    flags = h->flags;
    ringk_ring_release(r, *cons, ncells, flags);
    *cons += ncells;
    return flags;
}

/* The producer finds such a word in any continuation cell of a long message (cell 10 of 12:
 * past the first eight, which a GPU compares together), and asks for no clearing where none
 * is. */
START_TEST(test_ring_stale_word_far)
{
    uint64_t bytes, cons = 0, v;
    void *mem = ring_alloc(32, 64, &bytes);
    ringk_ring_prod_t prod = {0, 0};
    uint8_t payload[12 * 64 - 16] = {0};
    ringk_ring_t r;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 32, 64), 0);
    ck_assert_uint_eq(stale_round(&r, &prod, &cons, payload, sizeof(payload), 12) &
                      RINGK_CELL_FLAG_CLEAR, 0);
    /* cell 10 of the next one (position 22) starts at payload offset 10 * 64 - 16 */
    v = 22 + 32 + 1;
    memcpy(payload + 10 * 64 - 16, &v, 8);
    ck_assert(stale_round(&r, &prod, &cons, payload, sizeof(payload), 12) &
              RINGK_CELL_FLAG_CLEAR);
    free(mem);
}
END_TEST

/* A continuation cell whose payload happens to read as next lap's "published" value must not
 * be taken for a message when the consumer reaches that position again. */
START_TEST(test_ring_stale_word_cleared)
{
    uint64_t bytes, cons = 0, pos, v;
    void *mem = ring_alloc(16, 64, &bytes);
    ringk_ring_prod_t prod = {0, 0};
    const ringk_cell_hdr_t *h;
    uint8_t payload[100] = {0};
    ringk_ring_t r;
    int i;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 16, 64), 0);
    /* 2-cell message at 0; cell 1's first word sits at payload offset 64 - 16 = 48 */
    v = 1 + 16 + 1; /* position 1 + N + 1: "published" for position 17 */
    memcpy(payload + 48, &v, 8);
    ck_assert(stale_round(&r, &prod, &cons, payload, sizeof(payload), 2) &
              RINGK_CELL_FLAG_CLEAR);
    /* single-cell messages up to position 16 (cell 0 again), consumed: head reaches 17 */
    for (i = 2; i <= 16; i++) {
        ck_assert(ringk_ring_sp_claim(&r, &prod, 1, &pos));
        ringk_ring_publish(&r, pos, 0, 1, 2, 0);
        h = ringk_ring_peek(&r, &cons);
        ck_assert_ptr_nonnull(h);
        ck_assert_uint_eq(h->flags & RINGK_CELL_FLAG_CLEAR, 0);
        ringk_ring_release(&r, cons, 1, h->flags);
        cons++;
    }
    ck_assert_uint_eq(cons, 17);
    ck_assert_ptr_null(ringk_ring_peek(&r, &cons)); /* nothing published at 17 */
    free(mem);
}
END_TEST

START_TEST(test_ring_bad_skip_refused)
{
    uint64_t bytes, cons = 0, pos;
    void *mem = ring_alloc(16, 64, &bytes);
    ringk_ring_prod_t prod = {0, 0};
    const ringk_cell_hdr_t *h;
    ringk_ring_t r;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 16, 64), 0);
    /* a skip cell that does not reach the ring's end is handed to the consumer, whose check
     * refuses it */
    ck_assert(ringk_ring_sp_claim(&r, &prod, 1, &pos));
    ringk_ring_publish_skip(&r, pos, 3);
    h = ringk_ring_peek(&r, &cons);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(ringk_ring_msg_check(&r, cons, h->len, h->ncells, h->flags, 16), -EPROTO);
    free(mem);
}
END_TEST

/* Cells given up with ringk_ring_cancel() are passed over, mid-ring and up to the ring's end,
 * and the messages claimed after them arrive; their unwritten cells are cleared, so a stale
 * word cannot read as a later lap's message. A cancel cell of no cells or crossing the ring's
 * end is handed to the consumer, whose check refuses it. */
START_TEST(test_ring_cancel_passed)
{
    uint64_t bytes, cons = 0, pos, v;
    void *mem = ring_alloc(16, 64, &bytes);
    ringk_ring_prod_t prod = {0, 0};
    const ringk_cell_hdr_t *h;
    ringk_ring_t r;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 16, 64), 0);
    /* 3 cells at 0 given up, a 2-cell message at 3 */
    ck_assert(ringk_ring_sp_claim(&r, &prod, 3, &pos));
    ck_assert_uint_eq(pos, 0);
    v = 1 + 16 + 1; /* cell 1's first word reads as "published" for position 17 */
    memcpy(ringk_ring_cell(&r, 1), &v, 8);
    ringk_ring_cancel(&r, pos, 3);
    ck_assert(ringk_ring_sp_claim(&r, &prod, 2, &pos));
    ck_assert_uint_eq(pos, 3);
    ringk_ring_publish(&r, pos, 70, 2, 5, 0);
    h = ringk_ring_peek(&r, &cons);
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(cons, 3);
    ck_assert_uint_eq(h->id, 5);
    ck_assert_int_eq(ringk_ring_msg_check(&r, cons, h->len, h->ncells, h->flags, 16), 0);
    ck_assert_uint_eq(ringk_ring_cell(&r, 1)->seq, 0);
    ringk_ring_release(&r, cons, 2, h->flags);
    cons += 2;
    /* the 11 cells up to the ring's end given up, then a message at the ring's start */
    ck_assert(ringk_ring_sp_claim(&r, &prod, 11, &pos));
    ck_assert_uint_eq(pos, 5);
    ringk_ring_cancel(&r, pos, 11);
    ck_assert(ringk_ring_sp_claim(&r, &prod, 1, &pos));
    ck_assert_uint_eq(pos, 16);
    ringk_ring_publish(&r, pos, 8, 1, 6, 0);
    h = ringk_ring_peek(&r, &cons);
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(cons, 16);
    ck_assert_uint_eq(h->id, 6);
    ringk_ring_release(&r, cons, 1, h->flags);
    cons++;
    ck_assert_uint_eq(r.cons->pos, 17);
    /* malformed: a cancel of 0 cells, and one crossing the ring's end (at 30, 4 cells) */
    ck_assert(ringk_ring_sp_claim(&r, &prod, 1, &pos));
    ringk_ring_cancel(&r, pos, 0);
    h = ringk_ring_peek(&r, &cons);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(ringk_ring_msg_check(&r, cons, h->len, h->ncells, h->flags, 16), -EPROTO);
    ringk_ring_release(&r, cons, 1, 0xff);
    cons++;
    ck_assert(ringk_ring_sp_claim(&r, &prod, 12, &pos));
    ringk_ring_release(&r, cons, 12, 0); /* as if a 12-cell message had been consumed */
    cons += 12;
    ck_assert_uint_eq(cons, 30);
    ck_assert(ringk_ring_sp_claim(&r, &prod, 1, &pos));
    ck_assert_uint_eq(pos, 30);
    ringk_ring_cancel(&r, pos, 4);
    h = ringk_ring_peek(&r, &cons);
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(cons, 30);
    ck_assert_int_eq(ringk_ring_msg_check(&r, cons, h->len, h->ncells, h->flags, 16), -EPROTO);
    free(mem);
}
END_TEST

/* A claim marked with its owner is not a message, in no lap: the consumer waits at it. Given
 * up (a cancel cell in its place, as the loop of a device kernel gives up a dead sender's:
 * test_dev_slab), the message claimed after it arrives; a publish overwrites a mark. */
START_TEST(test_ring_claimed_marked)
{
    uint64_t bytes, cons = 0, pos, head_cache = 0;
    void *mem = ring_alloc(16, 64, &bytes);
    const ringk_cell_hdr_t *h;
    ringk_ring_t r;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 16, 64), 0);
    ck_assert_int_eq(ringk_ring_mp_claim_open(&r, 3, &head_cache, NULL, &pos), 1);
    ringk_ring_mark_claimed(&r, pos, 3, (7u << 20) | 5u);
    ck_assert_ptr_null(ringk_ring_peek(&r, &cons)); /* no message there */
    ck_assert_uint_eq(ringk_ring_cell(&r, pos)->seq, (pos + 1) | RINGK_CELL_SEQ_CLAIMED);
    ck_assert_uint_eq(ringk_ring_cell(&r, pos)->len, (7u << 20) | 5u);
    ck_assert_uint_eq(ringk_ring_cell(&r, pos)->ncells, 3);
    /* a second claim, marked and published: the publish is a message; the first still waits */
    ck_assert_int_eq(ringk_ring_mp_claim_open(&r, 1, &head_cache, NULL, &pos), 1);
    ringk_ring_mark_claimed(&r, pos, 1, 9);
    ringk_ring_publish(&r, pos, 8, 1, 4, 0);
    ck_assert_uint_eq(ringk_ring_cell(&r, pos)->seq, pos + 1);
    ck_assert_ptr_null(ringk_ring_peek(&r, &cons));
    ringk_ring_cancel(&r, 0, 3);
    h = ringk_ring_peek(&r, &cons);
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(cons, 3);
    ck_assert_uint_eq(h->id, 4);
    ck_assert_int_eq(ringk_ring_msg_check(&r, cons, h->len, h->ncells, h->flags, 16), 0);
    free(mem);
}
END_TEST

/* A producer's guess of the tail (the end of its last claim) stands in for a read of the
 * tail: a stale guess (another producer claimed since), one behind the consumer's head, or the
 * first guess (0) each fail one swap and claim at the real tail. */
START_TEST(test_ring_claim_tail_guess)
{
    uint64_t bytes, pos, cons = 0, ha = 0, hb = 0, ta = 0, tb = 0;
    void *mem = ring_alloc(8, 64, &bytes);
    ringk_ring_t r;
    int i;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 8, 64), 0);
    ck_assert_int_eq(ringk_ring_mp_claim_open(&r, 1, &ha, &ta, &pos), 1);
    ck_assert_uint_eq(pos, 0);
    ck_assert_uint_eq(ta, 1);
    ringk_ring_publish(&r, pos, 0, 1, 0, 0);
    for (i = 0; i < 21; i++) { /* b claims, the consumer takes each: the head passes a's guess */
        ck_assert_ptr_nonnull(ringk_ring_peek(&r, &cons));
        ringk_ring_release(&r, cons, 1, 0);
        cons++;
        if (i < 20) {
            ck_assert_int_eq(ringk_ring_mp_claim_open(&r, 1, &hb, &tb, &pos), 1);
            ck_assert_uint_eq(pos, (uint64_t)i + 1);
            ck_assert_uint_eq(tb, (uint64_t)i + 2);
            ringk_ring_publish(&r, pos, 0, 1, 0, 0);
        }
    }
    ha = cons; /* a saw the head since: its guess (1) is behind it (the room check wraps) */
    ck_assert_int_eq(ringk_ring_mp_claim_open(&r, 2, &ha, &ta, &pos), 1);
    ck_assert_uint_eq(pos, 21);
    ck_assert_uint_eq(ta, 23);
    ck_assert_int_eq(ringk_ring_mp_claim_open(&r, 1, &hb, &tb, &pos), 1); /* b's is stale */
    ck_assert_uint_eq(pos, 23);
    ck_assert_uint_eq(tb, 24);
    free(mem);
}
END_TEST

START_TEST(test_ring_oversized_claim_refused)
{
    uint64_t bytes, pos;
    void *mem = ring_alloc(8, 64, &bytes);
    ringk_ring_prod_t prod = {0, 0};
    ringk_ring_t r;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 8, 64), 0);
    ck_assert(!ringk_ring_sp_claim(&r, &prod, 9, &pos));
    ck_assert(!ringk_ring_mp_claim(&r, 9, &pos));
    ck_assert(!ringk_ring_sp_claim(&r, &prod, 0, &pos));
    ck_assert_uint_eq(prod.pos, 0);
    free(mem);
}
END_TEST

static const struct {
    uint64_t pos;
    uint32_t len, ncells;
    uint8_t  flags;
    uint32_t max_cells;
    int      expect;
} check_cases[] = {
    {0, 0, 1, 0, 16, 0},           {0, 48, 1, 0, 16, 0},            {0, 49, 1, 0, 16, -EPROTO},
    {0, 112, 2, 0, 16, 0},         {0, 113, 2, 0, 16, -EPROTO},     {0, 0, 0, 0, 16, -EPROTO},
    {0, 10, 17, 0, 32, -EPROTO},   {0, 10, 4, 0, 3, -EPROTO},
    {0, 0xffffffffu, 16, 0, 16, -EPROTO},
    {14, 10, 2, 0, 16, 0},         {14, 10, 3, 0, 16, -EPROTO},     /* crosses the ring's end */
    {30, 10, 2, 0, 16, 0},         {0, 0, 1, RINGK_CELL_FLAG_SKIP, 16, -EPROTO},
};

START_TEST(test_ring_msg_check_malformed)
{
    uint64_t bytes;
    void *mem = ring_alloc(16, 64, &bytes);
    ringk_ring_t r;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 16, 64), 0);
    ck_assert_int_eq(ringk_ring_msg_check(&r, check_cases[_i].pos, check_cases[_i].len,
                                          check_cases[_i].ncells, check_cases[_i].flags,
                                          check_cases[_i].max_cells), check_cases[_i].expect);
    free(mem);
}
END_TEST

/* ---- concurrency ------------------------------------------------------------------------- */

#define THREAD_MSGS 1000000

typedef struct {
    ringk_ring_t *r;
    int           producer;   /* producer index, stored in the message */
    int           nproducers;
    int           mp;         /* use the multi-producer claim */
} thread_arg_t;

static void *producer_thread(void *p)
{
    thread_arg_t *a = p;
    uint8_t buf[300];
    ringk_ring_prod_t prod = {0, 0};
    uint64_t pos, m;
    uint32_t len, nc, i;

    for (m = 0; m < THREAD_MSGS; m++) {
        len = 8 + (uint32_t)((m * 29) % 240);
        nc  = ringk_ring_cells_for(len, a->r->cell_size);
        memcpy(buf, &m, 8);
        for (i = 8; i < len; i++) {
            buf[i] = pattern(m + a->producer, i);
        }
        while (!(a->mp ? ringk_ring_mp_claim(a->r, nc, &pos)
                       : ringk_ring_sp_claim(a->r, &prod, nc, &pos))) {
            sched_yield(); /* more threads than cores: let the consumer run */
        }
        ringk_ring_write(a->r, pos, 0, buf, len);
        ringk_ring_publish(a->r, pos, len, nc, (uint8_t)a->producer, 0);
    }
    return NULL;
}

static void run_threads(int nproducers, int mp)
{
    uint64_t bytes, cons = 0, expect[8] = {0}, m, total = 0;
    void *mem = ring_alloc(64, 64, &bytes);
    pthread_t th[8];
    thread_arg_t args[8];
    uint8_t buf[300];
    ringk_ring_t r;
    const ringk_cell_hdr_t *h;
    uint32_t i, len, nc;
    uint8_t flags;
    int p, bad;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 64, 64), 0);
    for (p = 0; p < nproducers; p++) {
        args[p] = (thread_arg_t){.r = &r, .producer = p, .nproducers = nproducers, .mp = mp};
        ck_assert_int_eq(pthread_create(&th[p], NULL, producer_thread, &args[p]), 0);
    }
    while (total < (uint64_t)nproducers * THREAD_MSGS) {
        h = ringk_ring_peek(&r, &cons);
        if (h == NULL) {
            sched_yield();
            continue;
        }
        len   = h->len;
        nc    = h->ncells;
        p     = h->id;
        flags = h->flags;
        /* Plain comparisons in the loop: each ck_assert reports to the parent process (a
         * syscall), so the hot loop counts mismatches and asserts once. */
        if ((p >= nproducers) ||
            (ringk_ring_msg_check(&r, cons, len, nc, flags, r.ncells) != 0)) {
            ck_abort_msg("malformed message at %" PRIu64 ": id %d len %u ncells %u", cons, p,
                         len, nc);
        }
        ringk_ring_read(&r, cons, 0, buf, len);
        memcpy(&m, buf, 8);
        /* FIFO per producer, and every byte intact */
        bad = (m != expect[p]) || (len != 8 + (m * 29) % 240);
        for (i = 8; !bad && (i < len); i++) {
            bad = (buf[i] != pattern(m + p, i));
        }
        if (bad) {
            ck_abort_msg("producer %d message %" PRIu64 " (expected %" PRIu64 ") corrupt", p, m,
                         expect[p]);
        }
        expect[p]++;
        /* the header belongs to the producers again once released: use the local copy */
        ringk_ring_release(&r, cons, nc, flags);
        cons += nc;
        total++;
    }
    for (p = 0; p < nproducers; p++) {
        pthread_join(th[p], NULL);
        ck_assert_uint_eq(expect[p], THREAD_MSGS);
    }
    ck_assert_ptr_null(ringk_ring_peek(&r, &cons));
    free(mem);
}

START_TEST(test_ring_spsc_threads)
{
    run_threads(1, 0);
}
END_TEST

START_TEST(test_ring_mpsc_threads)
{
    run_threads(3, 1);
}
END_TEST

/* ---- closing a multi-producer ring --------------------------------------------------------- */

#define CLOSE_PRODUCERS 3

typedef struct {
    ringk_ring_t *r;
    int           producer;
    uint64_t      sent;     /* claims that succeeded (each published) */
    int           refused;  /* 1: a claim found the ring closed */
} close_arg_t;

static void *close_producer(void *p)
{
    close_arg_t *a = p;
    uint64_t head_cache = 0, tail_cache = 0, pos, m;
    int ret;

    for (m = 0;; m++) {
        while ((ret = ringk_ring_mp_claim_open(a->r, 1, &head_cache, &tail_cache, &pos)) == 0) {
            sched_yield();
        }
        if (ret < 0) {
            a->refused = 1;
            return NULL;
        }
        ringk_ring_write(a->r, pos, 0, &m, sizeof(m));
        ringk_ring_publish(a->r, pos, sizeof(m), 1, (uint8_t)a->producer, 0);
        a->sent = m + 1;
    }
}

/* Producers claim until the ring is closed under them: the consumer closes it after a while
 * and takes messages up to the tail the close returned. Every claim made before the close is
 * in that tail (the consumer gets each message, in order per producer), every producer's next
 * claim is refused, and a claim that does not know closing (ringk_ring_mp_claim) finds no room. */
START_TEST(test_ring_close_threads)
{
    uint64_t bytes, cons = 0, tail = 0, got[CLOSE_PRODUCERS] = {0}, m, head_cache = 0, pos;
    uint64_t tail_cache = 0;
    void *mem = ring_alloc(64, 64, &bytes);
    close_arg_t args[CLOSE_PRODUCERS];
    pthread_t th[CLOSE_PRODUCERS];
    const ringk_cell_hdr_t *h;
    ringk_ring_t r;
    int p, closed = 0;

    ck_assert_int_eq(ringk_ring_init(&r, mem, bytes, 64, 64), 0);
    for (p = 0; p < CLOSE_PRODUCERS; p++) {
        args[p] = (close_arg_t){.r = &r, .producer = p};
        ck_assert_int_eq(pthread_create(&th[p], NULL, close_producer, &args[p]), 0);
    }
    while (!closed || (cons != tail)) {
        if (!closed && (cons >= 200000)) {
            tail   = ringk_ring_close(&r);
            closed = 1;
            ck_assert_uint_eq(ringk_ring_close(&r), tail); /* again: the same tail */
        }
        h = ringk_ring_peek(&r, &cons);
        if (h == NULL) {
            sched_yield();
            continue;
        }
        p = h->id;
        ck_assert_int_lt(p, CLOSE_PRODUCERS);
        ringk_ring_read(&r, cons, 0, &m, sizeof(m));
        if (m != got[p]) {
            ck_abort_msg("producer %d: message %" PRIu64 ", expected %" PRIu64, p, m, got[p]);
        }
        got[p]++;
        ringk_ring_release(&r, cons, 1, h->flags);
        cons++;
    }
    for (p = 0; p < CLOSE_PRODUCERS; p++) {
        pthread_join(th[p], NULL);
        ck_assert_int_eq(args[p].refused, 1);
        ck_assert_uint_eq(args[p].sent, got[p]); /* nothing claimed was left out */
    }
    ck_assert_ptr_null(ringk_ring_peek(&r, &cons));
    ck_assert_int_eq(ringk_ring_mp_claim_open(&r, 1, &head_cache, &tail_cache, &pos), -1);
    ck_assert_int_eq(ringk_ring_mp_claim(&r, 1, &pos), 0);
    free(mem);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ring");
    TCase *tc;

    tc = tcase_create("layout");
    tcase_add_loop_test(tc, test_ring_init_sizes, 0, sizeof(init_cases) / sizeof(init_cases[0]));
    tcase_add_test(tc, test_ring_init_too_small);
    tcase_add_test(tc, test_ring_attach_validates);
    suite_add_tcase(s, tc);

    tc = tcase_create("message");
    tcase_add_test(tc, test_ring_full_empty_wrap);
    tcase_add_test(tc, test_ring_multicell_wraps);
    tcase_add_test(tc, test_ring_oversized_claim_refused);
    tcase_add_test(tc, test_ring_claim_tail_guess);
    tcase_add_test(tc, test_ring_bad_skip_refused);
    tcase_add_test(tc, test_ring_cancel_passed);
    tcase_add_test(tc, test_ring_claimed_marked);
    tcase_add_test(tc, test_ring_stale_word_cleared);
    tcase_add_test(tc, test_ring_stale_word_far);
    tcase_add_loop_test(tc, test_ring_msg_check_malformed, 0,
                        sizeof(check_cases) / sizeof(check_cases[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ring_spsc_threads);
    tcase_add_test(tc, test_ring_mpsc_threads);
    tcase_add_test(tc, test_ring_close_threads);
    suite_add_tcase(s, tc);

    test_ring_ll_cases(s);
    return test_run_suite(s);
}
