/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the libringk runtime: routes by name and by number, the names a route takes, and
 * the sequence deltas of batch cells. */
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

/* Route lookup: ringk_send() tries the route of the kernel's last send first. Names that share
 * prefixes, sent from one buffer whose contents change between sends, must each reach their own
 * kernel; a name the kernel does not publish to (a longer one, the empty one) is refused, and a
 * message over the receiver's max_in is refused whether or not it would have been batched. */
static const char *route_names[] = {"rx", "rxy", "r", NULL};
static const unsigned route_seq[] = {0, 1, 2, 1, 0, 0, 2, 2, 1, 0, 1, 2};
static uint64_t route_got[3], route_bad;
static int route_err[4];

static int route_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t v = UINT64_MAX;

    if (msg->length == sizeof(v)) {
        memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    }
    if (v != me) {
        __atomic_fetch_add(&route_bad, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&route_got[me], 1, __ATOMIC_RELEASE);
    return 0;
}

static int route_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    char name[16];
    uint8_t big[16] = {0};
    uint64_t v;
    unsigned i;

    for (i = 0; i < sizeof(route_seq) / sizeof(route_seq[0]); i++) {
        v = route_seq[i];
        strcpy(name, route_names[v]);
        if (ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) {
            return -1;
        }
    }
    strcpy(name, "rxyz");
    route_err[0] = ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000);
    name[0] = '\0';
    route_err[1] = ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000);
    strcpy(name, "r"); /* its max_in is 8 */
    route_err[2] = ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, big, sizeof(big), 1000);
    v = 2;
    route_err[3] = ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000);
    return 0;
}

/* Creates a kernel of batch_ctx from @a p as @a name, with @a handler and routes to @a routes,
 * and sends it the empty message that starts it. */
static ringk_kernel_t *source_start(ringk_kernel_params_t *p, const char *name,
                                    ringk_handler_t handler, const char *const *routes)
{
    ringk_kernel_t *k;

    p->name         = name;
    p->handler      = handler;
    p->field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p->publishes_to = routes;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, p, &k), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, name, RINGK_MSG_DATA, NULL, 0, 1000), 0);
    return k;
}

START_TEST(test_runtime_route_lookup)
{
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_MAX_IN,
        .handler = route_sink, .max_in = 64
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k[3];
    unsigned i;

    batch_ctx = ctx_new();
    memset(route_got, 0, sizeof(route_got));
    route_bad = 0;
    for (i = 0; i < 3; i++) {
        p.name   = route_names[i];
        p.arg    = (void*)(uintptr_t)i;
        p.max_in = (i == 2) ? 8 : 64;
        ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k[i]), 0);
    }
    (void)source_start(&p, "rsrc", route_source, route_names);
    wait_for(&route_got[0], 4);
    wait_for(&route_got[1], 4);
    wait_for(&route_got[2], 5);
    ck_assert_uint_eq(route_bad, 0);
    ck_assert_int_eq(route_err[0], -EPERM);
    ck_assert_int_eq(route_err[1], -EPERM);
    ck_assert_int_eq(route_err[2], -EMSGSIZE);
    ck_assert_int_eq(route_err[3], 0);
    ck_assert_int_eq(ringk_kernel_stats_query(k[0], &st), 0);
    ck_assert_uint_ge(st.batched_in, 1); /* later sends of the handler call were batched */
    ringk_ctx_destroy(batch_ctx);
}
END_TEST

/* The send path compares a name with the route the kernel used last (route_name_eq) and must
 * never read past the name's end: names whose NUL is the last byte before an inaccessible page,
 * at each of the 8 alignments, reach their kernels, and a shorter name placed the same way right
 * after each is refused without a fault. Names of 2, 5, 7 and 8 characters. (A word-at-a-time
 * compare that read the aligned word after a name before checking the name's bytes in the
 * first faulted here.) route_name_eq() loads two words of b only when b's first 16 bytes lie
 * in its page: these names are compared byte by byte but for "e1234567" with its NUL 7 bytes
 * before the page's end, whose 16 bytes end right there; test_runtime_route_name_words covers
 * the words. */
static const char *edge_names[] = {"e1", "e1234", "e123456", "e1234567", NULL};
/* what name_sink() got, by kernel (its arg), and how many messages reached the wrong one */
static uint64_t name_got[8], name_bad, edge_refused;
static char *edge_page; /* a page, followed by one that is not accessible */
static long edge_pagesize;

static int name_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v = UINT64_MAX;

    if (msg->length == sizeof(v)) {
        memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    }
    if (v != (uintptr_t)arg) {
        __atomic_fetch_add(&name_bad, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&name_got[(uintptr_t)arg], 1, __ATOMIC_RELEASE);
    return 0;
}

/* Copies @a name so that its NUL is @a back bytes before the end of edge_page. */
static const char *edge_place(const char *name, unsigned back)
{
    char *at = edge_page + edge_pagesize - back - strlen(name) - 1;

    memcpy(at, name, strlen(name) + 1);
    return at;
}

static int edge_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;
    unsigned back;

    for (back = 0; back < 8; back++) {
        for (v = 0; v < 4; v++) {
            if (ringk_send(batch_ctx, k, edge_place(edge_names[v], back), RINGK_MSG_DATA, &v,
                           sizeof(v), 1000) != 0) {
                return -1;
            }
            /* shorter than the route just used, at the page's end: refused */
            if (ringk_send(batch_ctx, k, edge_place("e", back), RINGK_MSG_DATA, &v, sizeof(v),
                           1000) != 0) {
                edge_refused++;
            }
        }
    }
    return 0;
}

/* Creates batch_ctx with a name_sink kernel for each of @a names (arg: its index) and a source
 * kernel @a src_name that runs @a handler with routes to all of them; waits until each got
 * @a each messages, checks that none reached the wrong kernel and that the source's handler
 * never failed, and destroys the context. */
static void names_run(const char *const *names, const char *src_name, ringk_handler_t handler,
                      uint64_t each)
{
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .handler = name_sink
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *k;
    unsigned i;

    batch_ctx = ctx_new();
    memset(name_got, 0, sizeof(name_got));
    name_bad = 0;
    for (i = 0; names[i] != NULL; i++) {
        p.name = names[i];
        p.arg  = (void*)(uintptr_t)i;
        ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k), 0);
    }
    k = source_start(&p, src_name, handler, names);
    for (i = 0; names[i] != NULL; i++) {
        wait_for(&name_got[i], each);
    }
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_uint_eq(st.handler_errors, 0);
    ck_assert_uint_eq(name_bad, 0);
    ringk_ctx_destroy(batch_ctx);
}

START_TEST(test_runtime_route_name_edge)
{
    edge_pagesize = sysconf(_SC_PAGESIZE);
    edge_page     = mmap(NULL, 2 * edge_pagesize, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(edge_page != MAP_FAILED);
    ck_assert_int_eq(mprotect(edge_page + edge_pagesize, edge_pagesize, PROT_NONE), 0);
    edge_refused = 0;
    names_run(edge_names, "esrc", edge_source, 8);
    ck_assert_uint_eq(edge_refused, 32);
    munmap(edge_page, 2 * edge_pagesize);
}
END_TEST

/* Names under 16 characters are compared with a route as two masked 8-byte words
 * (route_name_eq): names of 1, 7, 8, 9, 15 and 16 characters (the last one byte by byte) are
 * sent from a buffer whose bytes past the name are garbage, each after a send on another route
 * and again right after one on its own; names one character shorter or longer than a route, or
 * differing from it in its last character, are refused; none reaches the wrong kernel. */
static const char *word_names[] = {"w", "w123456", "w1234567", "w12345678", "w12345678901234",
                                   "w123456789012345", NULL};
static const char *word_bad[] = {"", "w12345", "w12345678x", "w1234567890123", "w1234567890123x",
                                 "w1234567890123456", "w12345678901234x", "v", NULL};
static uint64_t word_refused;

static int word_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    char name[32];
    uint64_t v;
    unsigned i, j;

    for (v = 0; v < 6; v++) {
        for (j = 0; j < 2; j++) { /* j == 1: the route just used is tried first */
            memset(name, 'w' + (int)v + (int)j, sizeof(name));
            memcpy(name, word_names[v], strlen(word_names[v]) + 1);
            if (ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) {
                return -1;
            }
        }
        for (i = 0; word_bad[i] != NULL; i++) {
            memset(name, '1', sizeof(name));
            memcpy(name, word_bad[i], strlen(word_bad[i]) + 1);
            if (ringk_send(batch_ctx, k, name, RINGK_MSG_DATA, &v, sizeof(v), 1000) == -EPERM) {
                word_refused++;
            }
        }
    }
    return 0;
}

START_TEST(test_runtime_route_name_words)
{
    word_refused = 0;
    names_run(word_names, "wsrc", word_source, 2);
    ck_assert_uint_eq(word_refused, 6 * 8);
}
END_TEST

/* A batch entry holds its sequence number as a 16-bit delta from its cell's first. A handler
 * opens a batch cell to "da", sends 70000 messages to "db" (whose inbox never fills, so the cell
 * to "da" stays open), then sends to "da" again: that message must not go into the old cell with
 * a wrapped delta, and "da" must see the sequence numbers that were sent. */
#define DELTA_GAP 70000
static uint64_t delta_seen[3], delta_n, delta_b;

static int delta_a(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    if (delta_n < 3) {
        delta_seen[delta_n] = msg->seq;
    }
    __atomic_fetch_add(&delta_n, 1, __ATOMIC_RELEASE);
    return 0;
}

static int delta_count(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_fetch_add(&delta_b, 1, __ATOMIC_RELEASE);
    return 0;
}

static int delta_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v = 0;
    unsigned i;

    if ((ringk_send(batch_ctx, k, "da", RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) ||
        (ringk_send(batch_ctx, k, "da", RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0)) {
        return -1;
    }
    for (i = 0; i < DELTA_GAP; i++) {
        if (ringk_send(batch_ctx, k, "db", RINGK_MSG_DATA, &v, sizeof(v), 1000) != 0) {
            return -1;
        }
    }
    return ringk_send(batch_ctx, k, "da", RINGK_MSG_DATA, &v, sizeof(v), 1000);
}

START_TEST(test_runtime_batch_seq_delta)
{
    static const char *to[] = {"da", "db", NULL};
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_MAX_IN | RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE,
        .max_in = 64, .inbox_size = 64
    };
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *a, *k;

    batch_ctx = ctx_new();
    delta_n = delta_b = 0;
    p.name = "da"; p.handler = delta_a;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &a), 0);
    p.name = "db"; p.handler = delta_count; p.inbox_size = 8192; /* 147456 batched messages */
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k), 0);
    p.name = "dsrc"; p.handler = delta_source; p.publishes_to = to;
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &k), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "dsrc", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    wait_for(&delta_n, 3);
    wait_for(&delta_b, DELTA_GAP);
    ck_assert_uint_eq(delta_seen[1], delta_seen[0] + 1);
    ck_assert_uint_eq(delta_seen[2], delta_seen[0] + 2 + DELTA_GAP);
    ck_assert_int_eq(ringk_kernel_stats_query(a, &st), 0);
    ck_assert_uint_eq(st.msgs_in, 3);
    ck_assert_uint_eq(st.batched_in, 2); /* both later sends to "da" came in batch cells */
    ck_assert_uint_eq(st.handler_errors, 0);
    ringk_ctx_destroy(batch_ctx);
}
END_TEST

/* Sends by route number (ringk_route_find, ringk_send_route) and by name to one kernel are one
 * FIFO: "bsink" sees values and sequence numbers in order, through batch cells (batched_in). A
 * route number the sender lacks, a name it does not publish to and a route to a kernel that
 * does not exist yet give their errors; once that kernel exists, the same route number reaches
 * it. */
static int rnum_err[6];
static uint64_t rnum_calls;

static int rnum_source(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    int to_sink = ringk_route_find(batch_ctx, k, "bsink");
    int to_late = ringk_route_find(batch_ctx, k, "rlate");
    uint64_t v;
    int ret;

    if ((to_sink != 0) || (to_late != 1)) {
        return -1;
    }
    if (__atomic_load_n(&rnum_calls, __ATOMIC_ACQUIRE) == 0) {
        for (v = 0; v < BATCH_N; v++) {
            ret = (v % 3 == 1) ?
                  ringk_send(batch_ctx, k, "bsink", RINGK_MSG_DATA, &v, sizeof(v),
                             RINGK_WAIT_FOREVER) :
                  ringk_send_route(batch_ctx, k, to_sink, RINGK_MSG_DATA, &v, sizeof(v),
                                   RINGK_WAIT_FOREVER);
            if (ret != 0) {
                return ret;
            }
        }
        rnum_err[0] = ringk_route_find(batch_ctx, k, "nobody");
        rnum_err[1] = ringk_send_route(batch_ctx, k, 2, RINGK_MSG_DATA, &v, sizeof(v), 1000);
        rnum_err[2] = ringk_send_route(batch_ctx, k, -1, RINGK_MSG_DATA, &v, sizeof(v), 1000);
        rnum_err[3] = ringk_send_route(batch_ctx, k, to_late, RINGK_MSG_DATA, &v, sizeof(v),
                                       1000);
    } else {
        /* the host created "rlate" since */
        rnum_err[4] = ringk_send_route(batch_ctx, k, to_late, RINGK_MSG_DATA, NULL, 0, 1000);
        rnum_err[5] = ringk_send_route(batch_ctx, k, to_late, RINGK_MSG_DATA, NULL, 0, 1000);
    }
    __atomic_fetch_add(&rnum_calls, 1, __ATOMIC_RELEASE);
    return 0;
}

START_TEST(test_runtime_send_route)
{
    static const char *to[] = {"bsink", "rlate", NULL};
    static const char *twice[] = {"bsink", "rlate", "bsink", NULL};
    ringk_kernel_params_t sp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN,
        .name = "bsink", .handler = batch_sink, .inbox_size = 8, .max_in = 64
    };
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "rsource", .handler = rnum_source, .publishes_to = to
    };
    ringk_kernel_params_t lp = counter_params("rlate", 64, 0);
    ringk_kernel_t *sink, *src, *late;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    uint64_t v = 0;

    batch_ctx = ctx_new();
    batch_got = batch_bad = batch_next_v = batch_next_seq = 0;
    rnum_calls = 0;
    counted    = 0;
    memset(rnum_err, 1, sizeof(rnum_err));
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &sp, &sink), 0);
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &src), 0);
    /* the host has no routes */
    ck_assert_int_eq(ringk_route_find(batch_ctx, NULL, "bsink"), -EINVAL);
    ck_assert_int_eq(ringk_send_route(batch_ctx, NULL, 0, RINGK_MSG_DATA, &v, sizeof(v), 0),
                     -EINVAL);
    ck_assert_int_eq(ringk_route_find(batch_ctx, src, NULL), -EINVAL);
    ck_assert_int_eq(ringk_send_route(NULL, src, 0, RINGK_MSG_DATA, &v, sizeof(v), 0), -EINVAL);
    ck_assert_int_eq(ringk_send_route(batch_ctx, src, 0, RINGK_MSG_DATA, NULL, 8, 0), -EINVAL);

    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "rsource", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    wait_for(&rnum_calls, 1);
    wait_for(&batch_got, BATCH_N);
    ck_assert_uint_eq(batch_bad, 0);
    ck_assert_int_eq(ringk_kernel_stats_query(sink, &st), 0);
    ck_assert_uint_eq(st.msgs_in, BATCH_N);
    ck_assert_uint_eq(st.batched_in, BATCH_N - 1);
    ck_assert_int_eq(rnum_err[0], -EPERM);
    ck_assert_int_eq(rnum_err[1], -EINVAL);
    ck_assert_int_eq(rnum_err[2], -EINVAL);
    ck_assert_int_eq(rnum_err[3], -ENOENT);
    ck_assert_ptr_nonnull(strstr(logbuf, "route 2 does not exist (it has 2)"));

    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &lp, &late), 0);
    ck_assert_int_eq(ringk_send(batch_ctx, NULL, "rsource", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    wait_for(&rnum_calls, 2);
    wait_for(&counted, 2);
    ck_assert_int_eq(rnum_err[4], 0);
    ck_assert_int_eq(rnum_err[5], 0);
    ck_assert_int_eq(ringk_kernel_stats_query(src, &st), 0);
    ck_assert_uint_eq(st.msgs_out, BATCH_N + 2);
    /* a name listed twice would make two route numbers for one kernel: refused */
    p.name = "rtwice"; p.publishes_to = twice;
    ck_assert_int_eq(ringk_kernel_create(batch_ctx, &p, &src), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "kernel 'rtwice': publishes_to lists 'bsink' twice"));
    ringk_ctx_destroy(batch_ctx);
}
END_TEST

/* The cases of this file. */
void test_runtime_route_tests(TCase *tc)
{
    tcase_add_test(tc, test_runtime_route_lookup);
    tcase_add_test(tc, test_runtime_route_name_edge);
    tcase_add_test(tc, test_runtime_route_name_words);
    tcase_add_test(tc, test_runtime_batch_seq_delta);
    tcase_add_test(tc, test_runtime_send_route);
}
