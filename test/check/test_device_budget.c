/* SPDX-License-Identifier: BSD-3-Clause */
/* What a message costs the device loop, counted and held to budgets (docs/gpu.md, "What a
 * message costs"): device code compiled as C tallies its reads and writes of mapped host memory
 * (across the bus on a GPU), its system-scope operations and its device-scope ordered ones, by
 * the part of its work (ringk_device_tally_t). The cases here run on the emulated device
 * (test_device) and through the executor's CUDA branch on the CUDA stand-in
 * (test_device_streams), with handlers that touch nothing across the bus themselves:
 *   - a host message is read in one round trip (its poll), nothing else on its path;
 *   - a reply through the outbox reads nothing across the bus;
 *   - K2K between two kernels of one device, as a ping-pong and as a burst, touches no host
 *     memory and makes no system-scope operation on its path; host polls while it runs are
 *     spaced RINGK_DEV_POLL_BUSY_NS apart, upkeep RINGK_DEV_CHORE_NS apart, cells go back in
 *     batches, the claim orders nothing;
 *   - a burst into an inbox that stays full reads its route across the bus at most every
 *     RINGK_DEV_ROUTE_NS;
 *   - an idle kernel polls the host at most once per RINGK_DEV_POLL_NS, fewer as it naps.
 * Time-based bounds are counted from the wall clock of the measured window, so a slow machine
 * (sanitizers) gets larger ones, never a failure. */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "test_device_util.h"
#include "test_device.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A device kernel's tally now. */
static ringk_device_tally_t tally_of(ringk_kernel_t *k)
{
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_DEVICE_TALLY};

    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    return st.tally;
}

/* @a a less @a b, counter by counter. */
static ringk_device_tally_t tally_less(ringk_device_tally_t a, ringk_device_tally_t b)
{
    uint64_t *x = (uint64_t*)&a;
    const uint64_t *y = (const uint64_t*)&b;
    size_t i;

    for (i = 0; i < sizeof(a) / sizeof(uint64_t); i++) {
        x[i] -= y[i];
    }
    return a;
}

static void part_print(const char *what, const char *name, const ringk_device_tally_part_t *p)
{
    printf("# %s %s: %llu host reads, %llu host writes, %llu system-scope, %llu device syncs\n",
           what, name, (unsigned long long)p->host_reads, (unsigned long long)p->host_writes,
           (unsigned long long)p->sys_ops, (unsigned long long)p->dev_syncs);
}

/* Prints @a d, the tally of kernel @a what over a window of @a secs and @a msgs messages. */
static void tally_print(const char *what, const ringk_device_tally_t *d, double secs,
                        uint64_t msgs)
{
    /* a failed assertion ends the test's process without flushing: each line flushed */
    printf("# %s: %llu messages in %.1f ms; %llu polls (%llu found a message whole, %llu "
           "rereads)\n", what, (unsigned long long)msgs, secs * 1e3,
           (unsigned long long)d->polls, (unsigned long long)d->poll_hits,
           (unsigned long long)d->poll_rereads);
    part_print(what, "path", &d->path);
    part_print(what, "poll", &d->poll);
    part_print(what, "wait", &d->wait);
    part_print(what, "chore", &d->chore);
    fflush(stdout);
}

/* How many periods of @a period_ns a window of @a secs holds, rounded up. */
static uint64_t periods(double secs, uint32_t period_ns)
{
    return (uint64_t)(secs * 1e9 / period_ns) + 1;
}

/* Nothing on the path of the window's messages crossed the bus or took system scope. */
static void assert_path_local(const char *what, const ringk_device_tally_t *d)
{
    ck_assert_msg((d->path.host_reads == 0) && (d->path.host_writes == 0) &&
                  (d->path.sys_ops == 0), "%s: path: %llu host reads, %llu host writes, %llu "
                  "system-scope operations (budget: 0)", what,
                  (unsigned long long)d->path.host_reads, (unsigned long long)d->path.host_writes,
                  (unsigned long long)d->path.sys_ops);
}

/* The upkeep ran at most once per RINGK_DEV_CHORE_NS of the window's @a secs while busy and
 * once per as long idle (each: the counters' store, 9 words, and a read of the outbox's head),
 * and each of its @a routes through the host was looked at once per RINGK_DEV_ROUTE_NS (a
 * read, two where it turned direct). */
static void assert_chores_paced(const char *what, const ringk_device_tally_t *d, double secs,
                                unsigned routes)
{
    uint64_t chores = 2 * periods(secs, RINGK_DEV_CHORE_NS) + 2;
    uint64_t reads  = chores + 2 * routes * periods(secs, RINGK_DEV_ROUTE_NS);

    ck_assert_msg(d->chore.host_writes <= 9 * chores, "%s: %llu host writes in chores over "
                  "%.1f ms (budget %llu)", what, (unsigned long long)d->chore.host_writes,
                  secs * 1e3, (unsigned long long)(9 * chores));
    ck_assert_msg(d->chore.host_reads <= reads, "%s: %llu host reads in chores over %.1f ms "
                  "(budget %llu)", what, (unsigned long long)d->chore.host_reads, secs * 1e3,
                  (unsigned long long)reads);
}

/* A device kernel of @a entry named @a name (no result block: its handler writes nothing),
 * sending on route 0 to @a to when not NULL; messages of up to 256 bytes, inboxes and outbox
 * of 256 cells. */
static ringk_kernel_t *budget_kernel(ringk_ctx_t *ctx, const char *name,
                                     const ringk_device_entry_t *entry, const char *to,
                                     uint64_t extra_fields)
{
    static const char *routes[8][2];
    static unsigned next;
    ringk_kernel_params_t p = dev_params(name, entry, NULL);
    ringk_kernel_t *k;

    p.field_mask |= extra_fields | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                    RINGK_KERNEL_PARAM_FIELD_MAX_OUT | RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE;
    p.max_in      = 256;
    p.max_out     = 256; /* an outbox of 256 cells: a test's replies run it round */
    p.inbox_size  = 256;
    if (to != NULL) {
        routes[next % 8][0] = to;
        routes[next % 8][1] = NULL;
        p.field_mask       |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
        p.publishes_to      = routes[next++ % 8];
    }
    ck_assert_msg(ringk_kernel_create(ctx, &p, &k) == 0, "%s: %s", name, logbuf);
    return k;
}

static void send_u32(ringk_ctx_t *ctx, const char *to, uint32_t v)
{
    ck_assert_int_eq(ringk_send(ctx, NULL, to, RINGK_MSG_DATA, &v, sizeof(v),
                                RINGK_WAIT_FOREVER), 0);
}

/* Host -> device: every host message found whole by the one poll that found it (the state read
 * with it), nothing read across the bus elsewhere on its path; a message longer than one poll
 * reads costs one read more. Fails without the LL ring (a read of the header, then one of the
 * message) and with a read of the state apart from the poll. */
START_TEST(test_device_budget_host_message)
{
    enum { M = 200 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_t *k = budget_kernel(ctx, "q", &ringk_dev_test_quiet, NULL, 0);
    ringk_device_tally_t t0, d;
    uint8_t big[150];
    double s0;
    uint32_t i;

    send_u32(ctx, "q", 0);
    ck_assert_uint_eq(STATS_AT(k, tally.poll_hits, 1).tally.poll_hits, 1);
    t0 = tally_of(k);
    s0 = test_now_s();
    for (i = 1; i <= M; i++) { /* one at a time: each found by a poll of its own */
        send_u32(ctx, "q", i);
        ck_assert_uint_eq(STATS_AT(k, tally.poll_hits, 1 + i).tally.poll_hits, 1 + i);
    }
    d = tally_less(tally_of(k), t0);
    tally_print("host -> device", &d, test_now_s() - s0, M);
    ck_assert_uint_ge(t0.launches, 1);
    ck_assert_uint_eq(d.poll_hits, M);
    ck_assert_msg(d.poll_rereads == 0, "%llu rereads (budget: 0, one read a host message)",
                  (unsigned long long)d.poll_rereads);
    ck_assert_msg(d.path.host_reads == 0, "%llu host reads on the path (budget: 0)",
                  (unsigned long long)d.path.host_reads);
    ck_assert_uint_eq(d.wait.host_reads, 0);
    /* each poll one round trip: the state and the ring's words together (a poll under way as
     * the tally is read has its event counted, its read not yet) */
    ck_assert_uint_le(d.poll.host_reads, d.polls + 1);
    /* a message of 40 + 150 bytes: 51 words, one poll's 32 and one read more */
    memset(big, 7, sizeof(big));
    t0 = tally_of(k);
    ck_assert_int_eq(ringk_send(ctx, NULL, "q", RINGK_MSG_DATA, big, sizeof(big),
                                RINGK_WAIT_FOREVER), 0);
    ck_assert_uint_eq(STATS_AT(k, tally.poll_hits, 2 + M).tally.poll_hits, 2 + M);
    d = tally_less(tally_of(k), t0);
    ck_assert_uint_eq(d.poll_rereads, 1);
    ck_assert_uint_eq(d.path.host_reads, 0);
    ck_assert_uint_eq(stats_of(k).bad_cells, 0);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

static uint64_t pong_calls, pong_zero;

/* CPU kernel "pong": bounces {n, ...} back as {n - 1, ...} (as long) while n > 0; counts its
 * calls, and the 0. */
static int pong(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint32_t ball[64];
    size_t len = (msg->length < sizeof(ball)) ? msg->length : sizeof(ball);

    (void)arg;
    memcpy(ball, ringk_msg_payload(msg), len);
    __atomic_add_fetch(&pong_calls, 1, __ATOMIC_RELEASE);
    if (ball[0] == 0) {
        __atomic_add_fetch(&pong_zero, 1, __ATOMIC_RELEASE);
        return 0;
    }
    ball[0]--;
    return ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_DATA, ball, len,
                            RINGK_WAIT_FOREVER);
}

/* A ball of @a bytes (at least 4) starting at @a n, sent to "dev" from the host; returns once
 * it ended at pong (@a ends: the balls ended so far). */
static void ball_run(ringk_ctx_t *ctx, uint32_t n, size_t bytes, uint64_t ends)
{
    uint32_t ball[64] = {n};

    ck_assert_int_eq(ringk_send(ctx, NULL, "dev", RINGK_MSG_DATA, ball, bytes,
                                RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&pong_zero, ends, 30);
}

/* Device -> host: a device kernel's replies to a CPU kernel (its outbox, the proxy) read nothing
 * across the bus, of one cell or two: the claim finds room by the head its upkeep read, its
 * route is known through the host without a read a message, the publish reads no cell first.
 * Fails with a read of the route's 'direct' on each send, a claim that reads the outbox's head
 * when its copy runs out, or the publish's look at the cells after the first (replies of 240
 * bytes take two). */
START_TEST(test_device_budget_reply)
{
    enum { N = 401 }; /* odd: the 0 ends at pong */
    static const char *to_dev[] = {"dev", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t cp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "pong", .handler = pong, .publishes_to = to_dev
    };
    ringk_kernel_t *kc, *kd = budget_kernel(ctx, "dev", &ringk_dev_test_bounce, "pong", 0);
    ringk_device_tally_t t0, d;
    double s0, secs;

    pong_calls = pong_zero = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &cp, &kc), 0);
    ball_run(ctx, 21, 4, 1); /* warm: routes looked at, the outbox's head read */
    t0 = tally_of(kd);
    s0 = test_now_s();
    ball_run(ctx, N, 4, 2);
    secs = test_now_s() - s0;
    d    = tally_less(tally_of(kd), t0);
    tally_print("device -> host replies", &d, secs, (N + 1) / 2);
    ck_assert_uint_ge(t0.launches, 1);
    ck_assert_uint_eq(__atomic_load_n(&pong_calls, __ATOMIC_ACQUIRE), 11 + (N + 1) / 2);
    ck_assert_msg(d.path.host_reads == 0, "%llu host reads on the path of %d replies (budget: 0)",
                  (unsigned long long)d.path.host_reads, (N + 1) / 2);
    ck_assert_msg(d.wait.host_reads <= 1 + N / 128, "%llu host reads waiting for the outbox",
                  (unsigned long long)d.wait.host_reads);
    /* its messages from pong came through its host ingress ring: one read each */
    ck_assert_uint_eq(d.poll_hits, (N + 1) / 2);
    ck_assert_uint_eq(d.poll_rereads, 0);
    assert_chores_paced("dev", &d, secs, 1);
    /* replies of two cells */
    t0 = tally_of(kd);
    s0 = test_now_s();
    ball_run(ctx, 101, 240, 3);
    secs = test_now_s() - s0;
    d    = tally_less(tally_of(kd), t0);
    tally_print("device -> host replies of 240 bytes", &d, secs, 51);
    ck_assert_msg(d.path.host_reads == 0, "%llu host reads on the path of 51 replies of two cells "
                  "(budget: 0)", (unsigned long long)d.path.host_reads);
    ck_assert_uint_eq(d.poll_hits, 51);
    ck_assert_uint_eq(d.poll_rereads, 2 * 51); /* 280 bytes, 73 words: two reads more each */
    ck_assert_uint_eq(__atomic_load_n(&pong_calls, __ATOMIC_ACQUIRE), 11 + (N + 1) / 2 + 51);
    ck_assert_uint_eq(stats_of(kd).send_failed, 0);
    {
        /* a CPU kernel has no device code: its tally is zeros, whatever the buffer held */
        ringk_kernel_stats_t st;

        memset(&st, 0xff, sizeof(st));
        st.field_mask = RINGK_KERNEL_STATS_FIELD_DEVICE_TALLY;
        ck_assert_int_eq(ringk_kernel_stats_query(kc, &st), 0);
        ck_assert_uint_eq(st.tally.launches + st.tally.polls + st.tally.path.host_reads +
                          st.tally.chore.host_writes, 0);
    }
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* K2K ping-pong between two device kernels of one device: on the path of every message no host
 * memory and no system-scope operation; each kernel polls the host at most every
 * RINGK_DEV_POLL_BUSY_NS while device messages keep it busy, and does its upkeep at most every
 * RINGK_DEV_CHORE_NS. Fails when the loop polls the host every turn (or every few), or reads
 * its state on its own, or stores its counters each time it finds nothing to take. */
START_TEST(test_device_budget_k2k_pingpong)
{
    enum { N = 2001, WARM = 101 }; /* odd: the 0 ends at b */
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_t *ka = budget_kernel(ctx, "a", &ringk_dev_test_bounce, "b", 0);
    ringk_kernel_t *kb = budget_kernel(ctx, "b", &ringk_dev_test_bounce, "a", 0);
    ringk_device_tally_t ta, tb, da, db;
    uint64_t b_in = (WARM + 1) / 2;
    double s0, secs;

    send_u32(ctx, "a", WARM);
    ck_assert_uint_eq(STATS_AT(kb, msgs_in, b_in).msgs_in, b_in);
    ck_assert_uint_eq(STATS_AT(kb, sent_direct, WARM / 2).sent_direct, WARM / 2);
    ta = tally_of(ka);
    tb = tally_of(kb);
    s0 = test_now_s();
    send_u32(ctx, "a", N);
    b_in += (N + 1) / 2;
    ck_assert_uint_eq(STATS_AT(kb, msgs_in, b_in).msgs_in, b_in);
    secs = test_now_s() - s0;
    da   = tally_less(tally_of(ka), ta);
    db   = tally_less(tally_of(kb), tb);
    tally_print("K2K ping-pong a", &da, secs, (N + 1) / 2);
    tally_print("K2K ping-pong b", &db, secs, (N + 1) / 2);
    ck_assert_uint_ge(ta.launches, 1);
    ck_assert_uint_eq(STATS_AT(ka, sent_direct, WARM / 2 + N / 2 + 2).sent_direct,
                      WARM / 2 + N / 2 + 2);
    assert_path_local("a", &da);
    assert_path_local("b", &db);
    ck_assert_uint_eq(da.wait.host_reads + db.wait.host_reads, 0);
    /* the ball from the host: one poll that found it, one after (then device messages) */
    ck_assert_msg(da.polls <= periods(secs, RINGK_DEV_POLL_BUSY_NS) + 4, "a polled the host %llu "
                  "times in %.1f ms (budget %llu: every %u ns)", (unsigned long long)da.polls,
                  secs * 1e3, (unsigned long long)periods(secs, RINGK_DEV_POLL_BUSY_NS) + 4,
                  RINGK_DEV_POLL_BUSY_NS);
    ck_assert_msg(db.polls <= periods(secs, RINGK_DEV_POLL_BUSY_NS) + 4, "b polled the host %llu "
                  "times in %.1f ms (budget %llu)", (unsigned long long)db.polls, secs * 1e3,
                  (unsigned long long)periods(secs, RINGK_DEV_POLL_BUSY_NS) + 4);
    assert_chores_paced("a", &da, secs, 0);
    assert_chores_paced("b", &db, secs, 0);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* A K2K burst of one handler call into a kernel of the same device: no host memory and no
 * system-scope operation on the path of either; the sender's path makes one ordered operation
 * a message (its publish: the claim orders nothing), the receiver's about one per
 * RINGK_DEV_RELEASE_CELLS (it gives cells back in batches). Fails with an ordered claim, or a
 * release of the head per message. */
START_TEST(test_device_budget_k2k_burst)
{
    enum { N = 20000, WARM = 100 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_t *kf = budget_kernel(ctx, "fwd", &ringk_dev_test_burst, "sink", 0);
    ringk_kernel_t *ks = budget_kernel(ctx, "sink", &ringk_dev_test_quiet, NULL, 0);
    ringk_device_tally_t tf, ts, df, dsk;
    double s0, secs;

    send_u32(ctx, "fwd", WARM);
    ck_assert_uint_eq(STATS_AT(ks, msgs_in, WARM).msgs_in, WARM);
    tf = tally_of(kf);
    ts = tally_of(ks);
    s0 = test_now_s();
    send_u32(ctx, "fwd", N);
    ck_assert_uint_eq(STATS_AT(ks, msgs_in, WARM + N).msgs_in, WARM + N);
    secs = test_now_s() - s0;
    df   = tally_less(tally_of(kf), tf);
    dsk  = tally_less(tally_of(ks), ts);
    tally_print("K2K burst fwd", &df, secs, N);
    tally_print("K2K burst sink", &dsk, secs, N);
    ck_assert_uint_eq(STATS_AT(kf, sent_direct, WARM + N).sent_direct, WARM + N);
    assert_path_local("fwd", &df);
    assert_path_local("sink", &dsk);
    ck_assert_msg(df.path.dev_syncs <= N + N / 8, "fwd: %llu device-scope ordered operations for "
                  "%d sends (budget %d: the publishes)", (unsigned long long)df.path.dev_syncs,
                  N, N + N / 8);
    /* (the releases of an idle loop are upkeep: at most one per RINGK_DEV_POLL_NS idle) */
    ck_assert_msg(dsk.path.dev_syncs <= N / 16, "sink: %llu device-scope ordered operations for "
                  "%d messages (budget %d: a release every %u cells)",
                  (unsigned long long)dsk.path.dev_syncs, N, N / 16, RINGK_DEV_RELEASE_CELLS);
    ck_assert_uint_le(dsk.chore.dev_syncs, 2 * periods(secs, RINGK_DEV_POLL_NS));
    ck_assert_uint_le(df.wait.host_reads, periods(secs, RINGK_DEV_ROUTE_NS) + 2);
    assert_chores_paced("fwd", &df, secs, 0);
    assert_chores_paced("sink", &dsk, secs, 0);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* A burst into an inbox that stays full (its kernel inactive for 100 ms): the sender waits,
 * and reads its route's 'direct' across the bus at most every RINGK_DEV_ROUTE_NS of the wait
 * (a target destroyed without closing is seen that late at most). Fails when each look at the
 * full inbox reads it. */
START_TEST(test_device_budget_full_inbox)
{
    enum { N = 2000 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_t *kf = budget_kernel(ctx, "fwd", &ringk_dev_test_burst, "sink", 0);
    ringk_kernel_t *ks = budget_kernel(ctx, "sink", &ringk_dev_test_quiet, NULL,
                                       RINGK_KERNEL_PARAM_FIELD_START_INACTIVE);
    ringk_device_tally_t tf, df;
    double s0, secs;

    send_u32(ctx, "fwd", 1); /* warm: the route made direct, its target copied */
    ck_assert_uint_eq(STATS_AT(kf, sent_direct, 1).sent_direct, 1);
    tf = tally_of(kf);
    s0 = test_now_s();
    send_u32(ctx, "fwd", N); /* 2000 messages into 256 cells */
    usleep(100000);
    ck_assert_uint_lt(stats_of(kf).sent_direct, N + 1); /* still waiting */
    ck_assert_int_eq(ringk_kernel_activate(ks), 0);
    ck_assert_uint_eq(STATS_AT(ks, msgs_in, N + 1).msgs_in, N + 1);
    secs = test_now_s() - s0;
    df   = tally_less(tally_of(kf), tf);
    tally_print("burst into a full inbox", &df, secs, N);
    assert_path_local("fwd", &df);
    ck_assert_msg(df.wait.host_reads <= periods(secs, RINGK_DEV_ROUTE_NS) + 2, "fwd read %llu "
                  "times across the bus while waiting %.1f ms (budget %llu: every %u ns)",
                  (unsigned long long)df.wait.host_reads, secs * 1e3,
                  (unsigned long long)periods(secs, RINGK_DEV_ROUTE_NS) + 2, RINGK_DEV_ROUTE_NS);
    ck_assert_uint_le(df.wait.host_writes, 9 * (periods(secs, RINGK_DEV_CHORE_NS) + 2));
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* An idle kernel: at most one host poll per RINGK_DEV_POLL_NS, fewer as its naps grow (to
 * RINGK_DEV_NAP_MAX_NS), each one round trip; nothing else across the bus but its upkeep. Fails
 * without the idle loop's back-off, or with a poll that reads the state apart. */
START_TEST(test_device_budget_idle)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_t *k = budget_kernel(ctx, "q", &ringk_dev_test_quiet, NULL, 0);
    ringk_device_tally_t t0, d;
    double s0, secs;

    send_u32(ctx, "q", 0);
    ck_assert_uint_eq(STATS_AT(k, tally.poll_hits, 1).tally.poll_hits, 1);
    usleep(20000);
    t0 = tally_of(k);
    s0 = test_now_s();
    usleep(200000);
    d    = tally_less(tally_of(k), t0);
    secs = test_now_s() - s0;
    tally_print("idle", &d, secs, 0);
    ck_assert_uint_ge(d.polls, 1);
    ck_assert_uint_eq(d.poll_hits, 0);
    ck_assert_uint_le(d.polls, periods(secs, RINGK_DEV_POLL_NS));
    ck_assert_msg(d.polls <= periods(secs, RINGK_DEV_NAP_MAX_NS / 2) + RINGK_DEV_SPINS + 20,
                  "%llu polls in %.1f ms idle (budget %llu: the naps grow to %u ns)",
                  (unsigned long long)d.polls, secs * 1e3,
                  (unsigned long long)periods(secs, RINGK_DEV_NAP_MAX_NS / 2) +
                  RINGK_DEV_SPINS + 20, RINGK_DEV_NAP_MAX_NS);
    ck_assert_uint_le(d.poll.host_reads, d.polls + 1); /* one round trip each */
    assert_path_local("idle", &d);
    assert_chores_paced("idle", &d, secs, 0);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

void test_device_budget_cases(TCase *tc)
{
    tcase_add_test(tc, test_device_budget_host_message);
    tcase_add_test(tc, test_device_budget_reply);
    tcase_add_test(tc, test_device_budget_k2k_pingpong);
    tcase_add_test(tc, test_device_budget_k2k_burst);
    tcase_add_test(tc, test_device_budget_full_inbox);
    tcase_add_test(tc, test_device_budget_idle);
}
