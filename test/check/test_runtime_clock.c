/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the libringk runtime: the hybrid logical clock and the message helpers. */
#include "test_runtime.h"
#include "test_log.h"
#include "test_util.h"

#include <ringk/api/ringk.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- clock -------------------------------------------------------------------------------- */

START_TEST(test_hlc_monotonic)
{
    ringk_hlc_t c;
    uint64_t prev, t;
    int i;

    int bad = 0;

    ringk_hlc_init(&c);
    prev = ringk_hlc_tick(&c);
    /* plain comparisons in the loop: ck_assert reports each check to the parent process */
    for (i = 0; i < 1000000; i++) {
        t = ringk_hlc_tick(&c);
        bad += (t <= prev);
        prev = t;
    }
    ck_assert_int_eq(bad, 0);
    /* the physical part stays near the wall clock */
    ck_assert_uint_ge(RINGK_HLC_PHYSICAL_MS(prev), (uint64_t)time(NULL) * 1000 - 1000);
    ck_assert_uint_le(RINGK_HLC_PHYSICAL_MS(prev), (uint64_t)time(NULL) * 1000 + 5000);
}
END_TEST

START_TEST(test_hlc_causal)
{
    ringk_hlc_t a, b;
    uint64_t sent, recvd, ahead, later;

    ringk_hlc_init(&a);
    ringk_hlc_init(&b);
    sent  = ringk_hlc_tick(&a);
    recvd = ringk_hlc_recv(&b, sent);
    ck_assert_uint_gt(recvd, sent);                   /* receive after send */
    /* a sender whose clock runs 10 s ahead: the receiver moves past it, logically */
    ahead = ((RINGK_HLC_PHYSICAL_MS(sent) + 10000) << 16) | 7;
    recvd = ringk_hlc_recv(&b, ahead);
    ck_assert_uint_gt(recvd, ahead);
    ck_assert_uint_eq(RINGK_HLC_PHYSICAL_MS(recvd), RINGK_HLC_PHYSICAL_MS(ahead));
    ck_assert_uint_eq(RINGK_HLC_LOGICAL(recvd), 8);
    later = ringk_hlc_tick(&b);
    ck_assert_uint_gt(later, recvd);                  /* and stays monotonic */
}
END_TEST

#define HLC_THREADS 4
#define HLC_TICKS   100000

static ringk_hlc_t shared_clock;
static uint64_t hlc_values[HLC_THREADS][HLC_TICKS];

static void *hlc_thread(void *arg)
{
    uint64_t *out = arg;
    int i;

    for (i = 0; i < HLC_TICKS; i++) {
        out[i] = ringk_hlc_tick(&shared_clock);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return (x > y) - (x < y);
}

START_TEST(test_hlc_concurrent_unique)
{
    pthread_t th[HLC_THREADS];
    static uint64_t all[HLC_THREADS * HLC_TICKS];
    int i, j, bad = 0, dup = 0;

    ringk_hlc_init(&shared_clock);
    for (i = 0; i < HLC_THREADS; i++) {
        pthread_create(&th[i], NULL, hlc_thread, hlc_values[i]);
    }
    for (i = 0; i < HLC_THREADS; i++) {
        pthread_join(th[i], NULL);
        for (j = 1; j < HLC_TICKS; j++) {
            bad += (hlc_values[i][j] <= hlc_values[i][j - 1]);
        }
        memcpy(&all[i * HLC_TICKS], hlc_values[i], sizeof(hlc_values[i]));
    }
    ck_assert_int_eq(bad, 0); /* monotonic in every thread */
    qsort(all, HLC_THREADS * HLC_TICKS, sizeof(all[0]), cmp_u64);
    for (i = 1; i < HLC_THREADS * HLC_TICKS; i++) {
        dup += (all[i] == all[i - 1]);
    }
    ck_assert_int_eq(dup, 0); /* one atomic word: no two events alike */
}
END_TEST

START_TEST(test_msg_helpers)
{
    struct {
        ringk_msg_t hdr;
        char        data[8];
    } a, b;

    ringk_msg_init(&a.hdr, RINGK_MSG_CONTROL, 3, RINGK_MSG_BROADCAST, 8);
    ck_assert_uint_eq(a.hdr.type, RINGK_MSG_CONTROL);
    ck_assert_uint_eq(a.hdr.receiver, RINGK_MSG_BROADCAST);
    memcpy(a.data, "payload!", 8);
    b = a;
    ck_assert(ringk_msg_equal(&a.hdr, &b.hdr));
    b.data[7] = '?';
    ck_assert(!ringk_msg_equal(&a.hdr, &b.hdr));
    b = a;
    b.hdr.seq = 1;
    ck_assert(!ringk_msg_equal(&a.hdr, &b.hdr));
}
END_TEST

/* The cases of this file. */
void test_runtime_clock_tests(TCase *tc)
{
    tcase_add_test(tc, test_hlc_monotonic);
    tcase_add_test(tc, test_hlc_causal);
    tcase_add_test(tc, test_hlc_concurrent_unique);
    tcase_add_test(tc, test_msg_helpers);
}
