/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk messages and the hybrid logical clock. */
#include "ringk_config.h"

#include "ringk_log.h"

#include <ringk/api/ringk.h>

#include <string.h>
#include <time.h>

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void ringk_hlc_init(ringk_hlc_t *clock)
{
    if (clock == NULL) {
        ringk_log_bad_arg(NULL, __func__, "clock is NULL");
        return;
    }
    __atomic_store_n(&clock->word, wall_ms() << 16, __ATOMIC_RELAXED);
}

/* Both parts live in one word and change in one compare-and-swap. A logical counter that runs
 * past 16 bits carries into the physical part: the clock then runs at most a few ms ahead of
 * the wall clock, which catches up. */
uint64_t ringk_hlc_tick(ringk_hlc_t *clock)
{
    uint64_t pt = wall_ms() << 16, old, next;

    if (clock == NULL) {
        ringk_log_bad_arg(NULL, __func__, "clock is NULL");
        return 0;
    }
    old = __atomic_load_n(&clock->word, __ATOMIC_RELAXED);
    do {
        next = (pt > old) ? pt : old + 1;
    } while (!__atomic_compare_exchange_n(&clock->word, &old, next, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return next;
}

uint64_t ringk_hlc_recv(ringk_hlc_t *clock, uint64_t remote)
{
    uint64_t pt = wall_ms() << 16, old, next, m;

    if (clock == NULL) {
        ringk_log_bad_arg(NULL, __func__, "clock is NULL");
        return 0;
    }
    old = __atomic_load_n(&clock->word, __ATOMIC_RELAXED);
    do {
        m    = (old > remote) ? old : remote;
        next = (pt > m) ? pt : m + 1;
    } while (!__atomic_compare_exchange_n(&clock->word, &old, next, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return next;
}

void ringk_msg_init(ringk_msg_t *msg, ringk_msg_type_t type, uint32_t sender, uint32_t receiver,
                    uint32_t length)
{
    if (msg == NULL) {
        ringk_log_bad_arg(NULL, __func__, "msg is NULL");
        return;
    }
    if ((unsigned)type > RINGK_MSG_TERMINATE) {
        ringk_log_bad_arg(NULL, __func__, "type %d is not data (0), control (1) or terminate "
                          "(2): the header is left as it was", (int)type);
        return;
    }
    memset(msg, 0, sizeof(*msg));
    msg->type     = type;
    msg->sender   = sender;
    msg->receiver = receiver;
    msg->length   = length;
}

int ringk_msg_equal(const ringk_msg_t *a, const ringk_msg_t *b)
{
    if ((a == NULL) || (b == NULL)) {
        ringk_log_bad_arg(NULL, __func__, "%s is NULL", (a == NULL) ? "a" : "b");
        return 0;
    }
    return (a->sender == b->sender) && (a->receiver == b->receiver) && (a->type == b->type) &&
           (a->flags == b->flags) && (a->length == b->length) && (a->seq == b->seq) &&
           (a->timestamp == b->timestamp) &&
           !memcmp(ringk_msg_payload(a), ringk_msg_payload(b), a->length);
}
