/* SPDX-License-Identifier: BSD-3-Clause */
/* A bounded soak of libringk across the processes of a job (driven by contrib/soak.sh): for
 * SECONDS every rank's source streams checksummed messages of varying length to the two sinks of
 * the next rank and publishes to a topic every sink subscribes to; sinks check order, length and
 * content. At the end every count must match exactly, nothing may be corrupt, and RSS must stay
 * flat after a warm-up. Prints progress every 5 s and one line per rank ending in OK or FAIL.
 *
 * Usage: ringk_soak SECONDS [PAYLOAD_MAX]   (rank and size from RINGK_ROOT/RINGK_RANK/RINGK_SIZE)
 *
 * The end is a handshake, so that no message is sent to a kernel that already stopped: each
 * source sends FIN (with its count) to its sinks and publishes TOPIC_FIN; a sink that has seen
 * its FIN and a TOPIC_FIN from every rank ACKs to the source that feeds it, with what it got; a
 * source that has both ACKs sends TERMINATE to its sinks; a rank whose sinks terminated leaves. */
#include <ringk/api/ringk.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SOAK_K            2        /* sinks per rank */
#define SOAK_MAX_RANKS    64
#define SOAK_TOPIC        "soak"
#define SOAK_TOPIC_EVERY  16       /* iterations per publish; env SOAK_TOPIC_EVERY, 0: no topic */
#define SOAK_MAGIC        0x6b616f73u /* "soak" */
#define SOAK_RANK_SHIFT   20       /* ringk_msg_t.sender is rank << 20 | kernel id */
#define SOAK_TOPIC_DST    UINT32_MAX  /* the dst of a publish, in the pattern and the header */
#define SOAK_PAYLOAD_DEF  1024u    /* bytes of pattern at most, by default */
#define SOAK_PROGRESS_S   5.0      /* seconds between progress lines */
#define SOAK_WARMUP_S     10.0     /* seconds before the RSS baseline (half the run if shorter) */
#define SOAK_RSS_MAX_KIB  8192     /* allowed RSS growth after the warm-up; env SOAK_RSS_MAX_KIB */
#define SOAK_RETRY_MS     100      /* a blocked send is retried at this period, checking peers */
#define SOAK_STALL_S      30.0     /* no send accepted for this long: give up, something hangs */
#define SOAK_END_S        20.0     /* longest wait for ACKs or for our sinks to terminate */

enum soak_kind { SOAK_DATA = 1, SOAK_FIN, SOAK_TOPIC_MSG, SOAK_TOPIC_FIN, SOAK_ACK };

/** The head of every payload; the pattern bytes follow. csum covers header (csum = 0) and body. */
typedef struct soak_hdr {
    uint32_t magic;
    uint16_t kind;     /**< enum soak_kind */
    uint16_t src;      /**< rank of the sending process */
    uint32_t dst;      /**< global sink index rank * SOAK_K + j, or SOAK_TOPIC_DST */
    uint32_t len;      /**< pattern bytes after the header */
    uint64_t seq;      /**< per (src, dst) for DATA, per src for TOPIC_MSG */
    uint64_t count;    /**< FIN / TOPIC_FIN: messages sent before it; ACK: data delivered */
    uint64_t aux;      /**< ACK: bad messages seen by that sink, plus count mismatches */
    uint64_t csum;
} soak_hdr_t;

_Static_assert(sizeof(soak_hdr_t) % 8 == 0, "csum_update() continues across the header");

/** A sink: written only by the thread running its handler; the counters main reads while it
 *  runs are stored atomically (relaxed: they are statistics until the sink has terminated, and
 *  the TERMINATED state, stored with release by the runtime, orders the final values). */
typedef struct soak_sink {
    ringk_ctx_t *ctx;
    int          rank, size;
    uint32_t     index;                        /**< rank * SOAK_K + j */
    char         name[32], feeder[32];         /**< ours, and the source that feeds us */
    uint64_t     next_seq;                     /**< DATA seq expected from the feeder */
    uint64_t     delivered, bad, topic_got;
    uint64_t     expected;                     /**< the feeder's FIN count */
    int          fin;
    uint64_t     topic_next[SOAK_MAX_RANKS];   /**< TOPIC_MSG seq expected per rank */
    uint64_t     topic_fin[SOAK_MAX_RANKS];    /**< TOPIC_FIN count + 1 per rank, 0: not yet */
    int          topic_fins;
    int          ack_ret;                      /**< 1 before the ACK, then ringk_send's result */
    unsigned     reports;                      /**< errors printed, capped: no flood */
} soak_sink_t;

/** The source's view of the next rank's sinks, filled by its handler from their ACKs. */
typedef struct soak_source {
    int      rank, size;
    uint64_t ack_delivered[SOAK_K], ack_bad[SOAK_K];
    int      acks;      /**< ACKs received; released after the fields above */
    uint64_t bad_acks;
} soak_source_t;

static size_t   payload_max = SOAK_PAYLOAD_DEF;
static unsigned topic_every = SOAK_TOPIC_EVERY; /* set before the kernels exist, then read-only */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* splitmix64's finalizer: every input bit reaches every output bit */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t pattern_seed(uint32_t src, uint32_t dst, uint64_t seq)
{
    return mix64(mix64(((uint64_t)src << 32) | dst) ^ seq);
}

/* Pattern bytes of message (src, dst, seq): half of the messages fit one 224-byte inbox cell,
 * the others are spread up to payload_max so multi-cell messages and wrap-around are hit too. */
static uint32_t pattern_len(uint64_t seed)
{
    const size_t small = (payload_max < 160) ? payload_max : 160;
    const uint64_t h = mix64(seed ^ 0x5bd1e995u);

    if (h & 1) {
        return (uint32_t)(8 + (h >> 1) % (small - 8 + 1));
    }
    return (uint32_t)(8 + (h >> 1) % (payload_max - 8 + 1));
}

static void pattern_fill(uint8_t *p, uint32_t len, uint64_t seed)
{
    uint32_t i;
    uint64_t w;

    for (i = 0; i < len; i += 8) {
        w = mix64(seed + i);
        memcpy(p + i, &w, (len - i < 8) ? len - i : 8);
    }
}

static int pattern_check(const uint8_t *p, uint32_t len, uint64_t seed)
{
    uint32_t i;
    uint64_t w;

    for (i = 0; i < len; i += 8) {
        w = mix64(seed + i);
        if (memcmp(p + i, &w, (len - i < 8) ? len - i : 8)) {
            return -1;
        }
    }
    return 0;
}

/* FNV-1a over 64-bit words (bytes for the tail): cheap, catches any changed byte, and can be
 * continued across pieces that end on a word */
static uint64_t csum_update(uint64_t h, const uint8_t *p, size_t len)
{
    uint64_t w;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

#define SOAK_CSUM_INIT 0xcbf29ce484222325ull

/* Builds a message in @a buf; returns its length in bytes. */
static size_t soak_build(uint8_t *buf, uint16_t kind, int src, uint32_t dst, uint64_t seq,
                         uint64_t count, uint64_t aux, int with_pattern)
{
    const uint64_t seed = pattern_seed((uint32_t)src, dst, seq);
    soak_hdr_t h = {
        .magic = SOAK_MAGIC, .kind = kind, .src = (uint16_t)src, .dst = dst,
        .len = with_pattern ? pattern_len(seed) : 0, .seq = seq, .count = count, .aux = aux
    };

    memcpy(buf, &h, sizeof(h));
    pattern_fill(buf + sizeof(h), h.len, seed);
    h.csum = csum_update(SOAK_CSUM_INIT, buf, sizeof(h) + h.len);
    memcpy(buf + offsetof(soak_hdr_t, csum), &h.csum, sizeof(h.csum));
    return sizeof(h) + h.len;
}

/* Parses and checks a received payload: 0 with *h filled, or -1 when it is corrupt. */
static int soak_parse(const ringk_msg_t *msg, soak_hdr_t *h)
{
    const uint8_t *p = ringk_msg_payload(msg);
    uint8_t copy[sizeof(*h)];
    uint64_t c, seed;

    if (msg->length < sizeof(*h)) {
        return -1;
    }
    memcpy(h, p, sizeof(*h));
    if ((h->magic != SOAK_MAGIC) || (h->len != msg->length - sizeof(*h)) ||
        ((msg->sender >> SOAK_RANK_SHIFT) != h->src)) {
        return -1;
    }
    /* the checksum was computed with its own field 0; the header is whole words, so hashing
     * it and the body apart equals hashing them together */
    memcpy(copy, p, sizeof(copy));
    memset(copy + offsetof(soak_hdr_t, csum), 0, sizeof(h->csum));
    c = csum_update(csum_update(SOAK_CSUM_INIT, copy, sizeof(copy)), p + sizeof(*h), h->len);
    if (c != h->csum) {
        return -1;
    }
    if ((h->kind != SOAK_DATA) && (h->kind != SOAK_TOPIC_MSG)) {
        return (h->len == 0) ? 0 : -1;
    }
    /* the length and every byte are those of this (src, dst, seq): a message delivered in
     * place of another is caught even when it is intact */
    seed = pattern_seed(h->src, h->dst, h->seq);
    return ((h->len == pattern_len(seed)) && !pattern_check(p + sizeof(*h), h->len, seed)) ? 0 :
           -1;
}

static void add_relaxed(uint64_t *c, uint64_t v)
{
    /* single writer: a plain add, stored atomically for main's racy reads */
    __atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
}

/* Once the sink has its FIN and every rank's TOPIC_FIN, it tells its feeder what it got. */
static void sink_maybe_ack(ringk_kernel_t *k, soak_sink_t *s)
{
    uint8_t buf[sizeof(soak_hdr_t)];
    uint64_t aux;
    size_t len;
    int r;

    if (!s->fin || (s->topic_fins < (topic_every ? s->size : 0)) || (s->ack_ret != 1)) {
        return;
    }
    aux = s->bad + (s->delivered != s->expected);
    for (r = 0; topic_every && (r < s->size); r++) {
        aux += (s->topic_next[r] != s->topic_fin[r] - 1);
    }
    len = soak_build(buf, SOAK_ACK, s->rank, s->index, 0, s->delivered, aux, 0);
    /* the source has room for every ACK it waits for: this does not wait on a full inbox,
     * only fails when the feeder's process is gone */
    __atomic_store_n(&s->ack_ret, ringk_send(s->ctx, k, s->feeder, RINGK_MSG_DATA, buf, len,
                                             (int)(SOAK_END_S * 1000)), __ATOMIC_RELAXED);
}

static int sink_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    soak_sink_t *s  = arg;
    const int  prev = (s->rank + s->size - 1) % s->size;
    soak_hdr_t h;
    int good;

    if (soak_parse(msg, &h) != 0) {
        if (s->reports++ < 10) {
            fprintf(stderr, "soak [rank %d]: %s: corrupt message of %u bytes from 0x%x\n",
                    s->rank, s->name, msg->length, msg->sender);
        }
        add_relaxed(&s->bad, 1);
        return 0;
    }
    switch (h.kind) {
    case SOAK_DATA:
        good = (h.src == prev) && (h.dst == s->index) && (msg->receiver != RINGK_MSG_BROADCAST) &&
               (h.seq == s->next_seq) && !s->fin;
        if (!good && (s->reports++ < 10)) {
            fprintf(stderr, "soak [rank %d]: %s: bad DATA from %u to %u seq %llu (expected %llu "
                    "from %d)\n", s->rank, s->name, h.src, h.dst, (unsigned long long)h.seq,
                    (unsigned long long)s->next_seq, prev);
        }
        add_relaxed(&s->bad, !good);
        s->next_seq = h.seq + 1; /* resynchronise: one gap is one error, not all that follow */
        add_relaxed(&s->delivered, 1);
        break;
    case SOAK_FIN:
        if ((h.src != prev) || (h.dst != s->index) || s->fin) {
            add_relaxed(&s->bad, 1);
            break;
        }
        __atomic_store_n(&s->expected, h.count, __ATOMIC_RELAXED);
        __atomic_store_n(&s->fin, 1, __ATOMIC_RELAXED);
        sink_maybe_ack(k, s);
        break;
    case SOAK_TOPIC_MSG:
        good = (h.src < s->size) && (h.dst == SOAK_TOPIC_DST) &&
               (msg->receiver == RINGK_MSG_BROADCAST) && (s->topic_fin[h.src] == 0) &&
               (h.seq == s->topic_next[h.src]);
        if (!good) {
            if (s->reports++ < 10) {
                fprintf(stderr, "soak [rank %d]: %s: bad publish from %u seq %llu\n", s->rank,
                        s->name, h.src, (unsigned long long)h.seq);
            }
            add_relaxed(&s->bad, 1);
            if (h.src >= s->size) {
                break;
            }
        }
        s->topic_next[h.src] = h.seq + 1;
        add_relaxed(&s->topic_got, 1);
        break;
    case SOAK_TOPIC_FIN:
        if ((h.src >= s->size) || (s->topic_fin[h.src] != 0)) {
            add_relaxed(&s->bad, 1);
            break;
        }
        s->topic_fin[h.src] = h.count + 1;
        s->topic_fins++;
        sink_maybe_ack(k, s);
        break;
    default:
        add_relaxed(&s->bad, 1);
    }
    return 0;
}

static int source_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    soak_source_t *src = arg;
    const int next = (src->rank + 1) % src->size;
    soak_hdr_t h;
    uint32_t j;

    if ((soak_parse(msg, &h) != 0) || (h.kind != SOAK_ACK) || (h.src != next) ||
        (h.dst < (uint32_t)next * SOAK_K) || (h.dst >= (uint32_t)(next + 1) * SOAK_K)) {
        __atomic_add_fetch(&src->bad_acks, 1, __ATOMIC_RELAXED);
        return 0;
    }
    j = h.dst - (uint32_t)next * SOAK_K;
    src->ack_delivered[j] = h.count;
    src->ack_bad[j]       = h.aux;
    /* A1: publishes the fields above; pairs with A2 in main() */
    __atomic_add_fetch(&src->acks, 1, __ATOMIC_RELEASE);
    return 0;
}

static void soak_log(void *arg, int level, const char *message)
{
    if (level <= RINGK_LOG_WARN) {
        fprintf(stderr, "soak [rank %d]: ringk: %s\n", *(const int*)arg, message);
    }
}

static long rss_kib(void)
{
    long size, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2) {
            resident = -1;
        }
        fclose(f);
    }
    return (resident < 0) ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The main loop's state, for the progress lines. */
typedef struct soak_run {
    ringk_ctx_t    *ctx;
    int             rank, size;
    soak_sink_t    *sinks;
    ringk_kernel_t *kernels[SOAK_K + 1]; /**< the sinks, then the source */
    uint64_t        sent, published, eagain, etimedout;
    double          t0, last_t, warmup;
    uint64_t        last_sent, last_delivered;
    long            rss_first, rss_last;
} soak_run_t;

static uint64_t sinks_delivered(const soak_run_t *run)
{
    uint64_t d = 0;
    int j;

    for (j = 0; j < SOAK_K; j++) {
        d += __atomic_load_n(&run->sinks[j].delivered, __ATOMIC_RELAXED);
    }
    return d;
}

static void progress(soak_run_t *run, double t)
{
    const uint64_t delivered = sinks_delivered(run);
    const double dt = t - run->last_t;
    uint64_t bad = 0, topic = 0;
    int j;

    for (j = 0; j < SOAK_K; j++) {
        bad   += __atomic_load_n(&run->sinks[j].bad, __ATOMIC_RELAXED);
        topic += __atomic_load_n(&run->sinks[j].topic_got, __ATOMIC_RELAXED);
    }
    run->rss_last = rss_kib();
    if ((run->rss_first < 0) && (t - run->t0 >= run->warmup - 0.01)) {
        run->rss_first = run->rss_last;
    }
    printf("soak [rank %d of %d] %6.1f s: sent %llu (%.0f msg/s), delivered %llu (%.0f msg/s), "
           "topic msgs %llu, bad %llu, refused %llu/%llu, RSS %ld KiB\n", run->rank, run->size,
           t - run->t0, (unsigned long long)(run->sent - run->last_sent),
           (run->sent - run->last_sent) / dt, (unsigned long long)(delivered - run->last_delivered),
           (delivered - run->last_delivered) / dt, (unsigned long long)topic,
           (unsigned long long)bad, (unsigned long long)run->eagain,
           (unsigned long long)run->etimedout, run->rss_last);
    run->last_t         = t;
    run->last_sent      = run->sent;
    run->last_delivered = delivered;
}

static int peers_lost(soak_run_t *run, const char *while_)
{
    int lost = ringk_ctx_peers_lost(run->ctx);

    if (lost > 0) {
        fprintf(stderr, "soak [rank %d]: the job lost %d process(es) while %s; giving up\n",
                run->rank, lost, while_);
    }
    return lost;
}

/* One line on stderr per step of the end, so that a rank that hangs or dies there shows how
 * far it got (contrib/soak.sh prints these for a rank without its final line). */
static void phase(const soak_run_t *run, const char *what)
{
    fprintf(stderr, "soak [rank %d]: %s at %.1f s\n", run->rank, what, now_s() - run->t0);
}

/* What this rank's kernels say when a send or publish gave up: the next run's clue. */
static void stall_report(const soak_run_t *run)
{
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    int i;

    for (i = 0; i <= SOAK_K; i++) {
        if (ringk_kernel_stats_query(run->kernels[i], &st) != 0) {
            continue;
        }
        fprintf(stderr, "soak [rank %d]: %s: state %d, in %llu (direct %llu, inline %llu), "
                "out %llu, queued %llu cells, refused %llu, deferred %llu (failed %llu)\n",
                run->rank, (i < SOAK_K) ? run->sinks[i].name : "source", (int)st.state,
                (unsigned long long)st.msgs_in,
                (unsigned long long)st.direct_in, (unsigned long long)st.inline_in,
                (unsigned long long)st.msgs_out, (unsigned long long)st.queue_depth,
                (unsigned long long)st.refused_full, (unsigned long long)st.deferred,
                (unsigned long long)st.deferred_failed);
    }
}

/* Sends without dropping: a refused send (no room, no credit) is retried until it is accepted,
 * a peer is lost, or nothing was accepted for SOAK_STALL_S. Also prints progress on time. */
static int send_reliably(soak_run_t *run, ringk_kernel_t *from, const char *to, int type,
                         const void *buf, size_t len)
{
    /* the first try does not wait, so -EAGAIN is exercised; then waits of SOAK_RETRY_MS */
    int ret = ringk_send(run->ctx, from, to, type, buf, len, RINGK_WAIT_NONE);
    double stuck = 0, t;

    while ((ret == -EAGAIN) || (ret == -ETIMEDOUT)) {
        if (ret == -EAGAIN) {
            run->eagain++;
        } else {
            run->etimedout++;
        }
        t = now_s();
        if (stuck == 0) {
            stuck = t;
        } else if (t - stuck > SOAK_STALL_S) {
            fprintf(stderr, "soak [rank %d]: no send to '%s' accepted for %.0f s; giving up\n",
                    run->rank, to, SOAK_STALL_S);
            return -ETIMEDOUT;
        }
        if (t - run->last_t >= SOAK_PROGRESS_S) {
            progress(run, t);
        }
        if (peers_lost(run, "sending") > 0) {
            return -EPIPE;
        }
        ret = ringk_send(run->ctx, from, to, type, buf, len, SOAK_RETRY_MS);
    }
    if (ret != 0) {
        fprintf(stderr, "soak [rank %d]: send to '%s' failed: %s\n", run->rank, to,
                strerror(-ret));
    }
    return ret;
}

static int publish(soak_run_t *run, ringk_kernel_t *from, const void *buf, size_t len)
{
    const int want = run->size * SOAK_K;
    unsigned delivered = 0;
    /* a publish that timed out may have reached some subscribers: it cannot be retried
     * without duplicates, so it waits long and a timeout is a failure */
    int ret = ringk_publish(run->ctx, from, SOAK_TOPIC, buf, len, (int)(SOAK_STALL_S * 1000),
                            &delivered);

    if (ret != want) {
        fprintf(stderr, "soak [rank %d]: publish reached %u of %d subscribers: %s\n", run->rank,
                delivered, want, (ret < 0) ? strerror(-ret) : "wrong count");
        return (ret < 0) ? ret : -EIO;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char *topics[] = {SOAK_TOPIC, NULL};
    const double seconds = (argc > 1) ? atof(argv[1]) : 0;
    double exit_after = 0;
    int exit_rank = -1;
    soak_sink_t sinks[SOAK_K];
    soak_source_t source;
    soak_run_t run;
    ringk_ctx_params_t cp;
    ringk_kernel_t *sink_k[SOAK_K], *src_k;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    char src_name[32], next_names[SOAK_K][32];
    const char *next_sinks[SOAK_K + 1], *feeder[2];
    uint64_t seqs[SOAK_K] = {0}, delivered = 0, expected = 0, bad = 0, topic = 0, iter = 0;
    uint8_t *buf;
    const char *env;
    long rss_max = SOAK_RSS_MAX_KIB;
    int rank_holder = -1, rank, size, next, prev, j, ret = 0, ok, ack_ok;
    int terminated[SOAK_K] = {0}, stalled = 0;
    double t, t_end;
    size_t len;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((seconds <= 0) || (argc > 3)) {
        fprintf(stderr, "usage: ringk_soak SECONDS [PAYLOAD_MAX]  (in a job: RINGK_ROOT, "
                "RINGK_RANK, RINGK_SIZE)\n");
        return 2;
    }
    if (argc > 2) {
        payload_max = strtoul(argv[2], NULL, 10);
        if ((payload_max < 8) || (payload_max > RINGK_MSG_MAX_DEFAULT - sizeof(soak_hdr_t))) {
            fprintf(stderr, "PAYLOAD_MAX %s is not in 8..%zu\n", argv[2],
                    RINGK_MSG_MAX_DEFAULT - sizeof(soak_hdr_t));
            return 2;
        }
    }
    env = getenv("SOAK_RSS_MAX_KIB");
    if (env != NULL) {
        rss_max = atol(env);
    }
    env = getenv("SOAK_TOPIC_EVERY");
    if (env != NULL) {
        topic_every = (unsigned)strtoul(env, NULL, 10);
    }
    /* fault injection (contrib/faults.sh): rank SOAK_EXIT_RANK leaves with _exit(0) after
     * SOAK_EXIT_AFTER_S seconds of traffic, without destroying anything */
    env = getenv("SOAK_EXIT_AFTER_S");
    if (env != NULL) {
        exit_after = atof(env);
        exit_rank  = getenv("SOAK_EXIT_RANK") ? atoi(getenv("SOAK_EXIT_RANK")) : 0;
    }
    /* the job itself comes from the environment; the hook needs the rank, known only later.
     * Not pinned: every process would pin its first persistent kernel to the same core. */
    memset(&cp, 0, sizeof(cp));
    cp.field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_PIN;
    cp.log        = soak_log;
    cp.log_arg    = &rank_holder;
    cp.pin        = 0;
    if (ringk_ctx_create(&cp, &run.ctx) != 0) {
        fprintf(stderr, "soak: ringk_ctx_create failed\n");
        return 1;
    }
    rank = rank_holder = ringk_ctx_rank(run.ctx);
    size = ringk_ctx_size(run.ctx);
    if ((size < 2) || (size > SOAK_MAX_RANKS)) {
        fprintf(stderr, "ringk_soak needs 2 to %d processes (RINGK_SIZE), not %d\n",
                SOAK_MAX_RANKS, size);
        return 2;
    }
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;
    buf  = malloc(sizeof(soak_hdr_t) + payload_max);
    if (buf == NULL) {
        return 1;
    }

    /* sinks: j = 0 persistent, j = 1 event-driven, so both executors run */
    memset(sinks, 0, sizeof(sinks));
    for (j = 0; j < SOAK_K; j++) {
        soak_sink_t *s = &sinks[j];
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_MAX_IN |
                          RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO |
                          RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB,
            .handler = sink_handler, .arg = s,
            .mode = (j == 0) ? RINGK_MODE_PERSISTENT : RINGK_MODE_EVENT_DRIVEN,
            .max_in = (unsigned)(sizeof(soak_hdr_t) + payload_max), .publishes_to = feeder,
            .topics_sub = topics
        };

        s->ctx     = run.ctx;
        s->rank    = rank;
        s->size    = size;
        s->index   = (uint32_t)(rank * SOAK_K + j);
        s->ack_ret = 1;
        snprintf(s->name, sizeof(s->name), "sink%d_%d", rank, j);
        snprintf(s->feeder, sizeof(s->feeder), "src%d", prev);
        feeder[0] = s->feeder;
        feeder[1] = NULL;
        p.name    = s->name;
        if (ringk_kernel_create(run.ctx, &p, &sink_k[j]) != 0) {
            return 1;
        }
    }
    /* the source: sends from main() under its name; its handler takes the ACKs */
    memset(&source, 0, sizeof(source));
    source.rank = rank;
    source.size = size;
    for (j = 0; j < SOAK_K; j++) {
        snprintf(next_names[j], sizeof(next_names[j]), "sink%d_%d", next, j);
        next_sinks[j] = next_names[j];
    }
    next_sinks[SOAK_K] = NULL;
    snprintf(src_name, sizeof(src_name), "src%d", rank);
    {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO |
                          RINGK_KERNEL_PARAM_FIELD_TOPICS_PUB,
            .name = src_name, .handler = source_handler, .arg = &source,
            .mode = RINGK_MODE_EVENT_DRIVEN, .publishes_to = next_sinks, .topics_pub = topics
        };
        if (ringk_kernel_create(run.ctx, &p, &src_k) != 0) {
            return 1;
        }
    }
    if (ringk_ctx_start(run.ctx) != 0) {
        fprintf(stderr, "soak [rank %d]: ringk_ctx_start failed\n", rank);
        return 1;
    }
    fprintf(stderr, "soak [rank %d of %d]: joined; streaming for %.0f s\n", rank, size, seconds);

    run.rank   = rank;
    run.size   = size;
    run.sinks  = sinks;
    for (j = 0; j < SOAK_K; j++) {
        run.kernels[j] = sink_k[j];
    }
    run.kernels[SOAK_K] = src_k;
    run.sent   = run.published = run.eagain = run.etimedout = 0;
    run.t0     = run.last_t = now_s();
    run.warmup = (seconds >= 2 * SOAK_WARMUP_S) ? SOAK_WARMUP_S : seconds / 2;
    run.last_sent = run.last_delivered = 0;
    run.rss_first = -1;
    run.rss_last  = rss_kib();
    t_end = run.t0 + seconds;

    /* 1. stream until the time is up */
    for (t = run.t0; (ret == 0) && (t < t_end); iter++) {
        for (j = 0; (ret == 0) && (j < SOAK_K); j++) {
            len = soak_build(buf, SOAK_DATA, rank, (uint32_t)(next * SOAK_K + j), seqs[j], 0, 0,
                             1);
            ret = send_reliably(&run, src_k, next_sinks[j], RINGK_MSG_DATA, buf, len);
            if (ret == 0) {
                seqs[j]++;
                run.sent++;
            }
        }
        if ((ret == 0) && topic_every && (iter % topic_every == 0)) {
            len = soak_build(buf, SOAK_TOPIC_MSG, rank, SOAK_TOPIC_DST, run.published, 0, 0, 1);
            ret = publish(&run, src_k, buf, len);
            run.published += (ret == 0);
        }
        t = now_s();
        if ((exit_after > 0) && (rank == exit_rank) && (t - run.t0 >= exit_after)) {
            fprintf(stderr, "soak [rank %d]: exiting without cleanup (SOAK_EXIT_AFTER_S)\n",
                    rank);
            _exit(0);
        }
        if ((t - run.last_t >= SOAK_PROGRESS_S) ||
            ((run.rss_first < 0) && (t - run.t0 >= run.warmup))) {
            progress(&run, t);
        }
        if ((iter & 255) == 0) {
            ret = ((ret == 0) && (peers_lost(&run, "sending") > 0)) ? -EPIPE : ret;
        }
    }
    progress(&run, now_s());
    if (ret != 0) {
        stall_report(&run);
        stalled = 1;
    }
    phase(&run, (ret == 0) ? "streaming done; sending FIN" : "streaming failed");

    /* 2. FIN to our sinks, TOPIC_FIN to everyone, then wait for both ACKs */
    for (j = 0; (ret == 0) && (j < SOAK_K); j++) {
        len = soak_build(buf, SOAK_FIN, rank, (uint32_t)(next * SOAK_K + j), 0, seqs[j], 0, 0);
        ret = send_reliably(&run, src_k, next_sinks[j], RINGK_MSG_DATA, buf, len);
    }
    if ((ret == 0) && topic_every) {
        len = soak_build(buf, SOAK_TOPIC_FIN, rank, SOAK_TOPIC_DST, 0, run.published, 0, 0);
        ret = publish(&run, src_k, buf, len);
    }
    if (ret == 0) {
        phase(&run, "FIN sent; waiting for ACKs");
    }
    t = now_s();
    /* A2: pairs with A1 in source_handler(): the ACK fields are complete */
    while ((ret == 0) && (__atomic_load_n(&source.acks, __ATOMIC_ACQUIRE) < SOAK_K)) {
        if ((peers_lost(&run, "waiting for ACKs") > 0) || (now_s() - t > SOAK_END_S)) {
            fprintf(stderr, "soak [rank %d]: %d of %d ACKs from rank %d\n", rank,
                    __atomic_load_n(&source.acks, __ATOMIC_ACQUIRE), SOAK_K, next);
            ret = -ETIMEDOUT;
            break;
        }
        usleep(1000);
    }
    /* 3. the next rank's sinks have everything: stop them */
    if (ret == 0) {
        phase(&run, "ACKs in; terminating the next rank's sinks");
    }
    for (j = 0; (ret == 0) && (j < SOAK_K); j++) {
        ret = send_reliably(&run, src_k, next_sinks[j], RINGK_MSG_TERMINATE, NULL, 0);
    }
    /* 4. ours are stopped by the previous rank's source */
    phase(&run, "waiting for this rank's sinks to terminate");
    t = now_s();
    for (j = 0; j < SOAK_K; j++) {
        for (;;) {
            ringk_kernel_stats_query(sink_k[j], &st);
            if (st.state == RINGK_KERNEL_TERMINATED) {
                terminated[j] = 1;
                break;
            }
            if ((peers_lost(&run, "waiting for the sinks to terminate") > 0) ||
                (now_s() - t > SOAK_END_S)) {
                fprintf(stderr, "soak [rank %d]: sink %s did not terminate\n", rank,
                        sinks[j].name);
                ret = (ret == 0) ? -ETIMEDOUT : ret;
                break;
            }
            usleep(1000);
        }
    }
    run.rss_last = rss_kib();
    if (run.rss_first < 0) {
        run.rss_first = run.rss_last;
    }

    /* 5. tally: a sink that terminated has handled its last message (the runtime stores
     * TERMINATED with release after it), so its plain fields are final; one that did not is a
     * failure, and only its atomic counters are read */
    ok = (ret == 0) && (ringk_ctx_peers_lost(run.ctx) == 0);
    for (j = 0; j < SOAK_K; j++) {
        soak_sink_t *s = &sinks[j];
        int r, topic_ok;

        delivered += __atomic_load_n(&s->delivered, __ATOMIC_RELAXED);
        expected  += __atomic_load_n(&s->expected, __ATOMIC_RELAXED);
        bad       += __atomic_load_n(&s->bad, __ATOMIC_RELAXED);
        topic     += __atomic_load_n(&s->topic_got, __ATOMIC_RELAXED);
        if (!terminated[j]) {
            ok = 0;
            continue;
        }
        topic_ok = (s->topic_fins == (topic_every ? size : 0));
        for (r = 0; topic_every && (r < size); r++) {
            topic_ok = topic_ok && (s->topic_next[r] + 1 == s->topic_fin[r]);
        }
        if (!s->fin || (s->delivered != s->expected) || !topic_ok || (s->ack_ret != 0)) {
            fprintf(stderr, "soak [rank %d]: %s: FIN %s, delivered %llu of %llu, topics %s, "
                    "ACK %s\n", rank, s->name, s->fin ? "seen" : "missing",
                    (unsigned long long)s->delivered, (unsigned long long)s->expected,
                    topic_ok ? "complete" : "incomplete",
                    (s->ack_ret == 1) ? "not sent" : (s->ack_ret == 0) ? "sent" :
                    strerror(-s->ack_ret));
            ok = 0;
        }
    }
    if (!ok && !stalled) {
        stall_report(&run); /* the receiving side of a stall: its sinks' inboxes and states */
    }
    /* joins every runtime thread: the source's ACK fields are final too */
    phase(&run, "destroying the context");
    ringk_ctx_destroy(run.ctx);
    ack_ok = (__atomic_load_n(&source.acks, __ATOMIC_ACQUIRE) == SOAK_K) &&
             (__atomic_load_n(&source.bad_acks, __ATOMIC_RELAXED) == 0);
    for (j = 0; ack_ok && (j < SOAK_K); j++) {
        ack_ok = (source.ack_delivered[j] == seqs[j]) && (source.ack_bad[j] == 0);
    }
    ok = ok && ack_ok && (bad == 0) && (run.rss_last - run.rss_first < rss_max);
    printf("soak [rank %d of %d]: to rank %d: %llu + %llu sent, their sinks confirm %llu + %llu "
           "with %llu + %llu errors; %llu publishes; refused %llu times without waiting, timed "
           "out %llu times\n", rank, size, next, (unsigned long long)seqs[0],
           (unsigned long long)seqs[1], (unsigned long long)source.ack_delivered[0],
           (unsigned long long)source.ack_delivered[1], (unsigned long long)source.ack_bad[0],
           (unsigned long long)source.ack_bad[1], (unsigned long long)run.published,
           (unsigned long long)run.eagain, (unsigned long long)run.etimedout);
    free(buf);
    printf("soak [rank %d of %d]: sent %llu, delivered %llu (expected %llu), bad %llu, topic msgs "
           "%llu, RSS first %ld KiB last %ld KiB growth %ld KiB (max %ld): %s\n", rank, size,
           (unsigned long long)run.sent, (unsigned long long)delivered,
           (unsigned long long)expected, (unsigned long long)bad, (unsigned long long)topic,
           run.rss_first, run.rss_last, run.rss_last - run.rss_first, rss_max,
           ok ? "OK" : "FAIL");
    return ok ? 0 : 1;
}
