/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk runtime, CPU executor: contexts, ring kernels with inboxes on the core ring protocol,
 * K2K sends with routes and backpressure, lifecycle, topics and statistics (named barriers:
 * ringk_barrier.c). */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_internal.h"
#include "ringk_job.h"
#include "ringk_wire.h"

#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ------------------------------------------------------------------------------ */

void ringk_log_msg(ringk_ctx_t *ctx, int level, const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    if ((ctx == NULL) || (ctx->log == NULL)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_arg, level, buf);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int load_i(const int *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void add_u64(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static int copy_list(ringk_ctx_t *ctx, const char *kernel, const char *what,
                     const char *const *src, name_list_t *dst)
{
    unsigned i;

    dst->count = 0;
    for (; (src != NULL) && (*src != NULL); src++) {
        if (dst->count == RINGK_LIST_MAX) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s has more than %d entries", kernel, what,
                   RINGK_LIST_MAX);
            return -EINVAL;
        }
        if ((**src == '\0') || (strlen(*src) >= RINGK_NAME_MAX)) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s entry '%s' is empty or longer than %d "
                   "characters", kernel, what, *src, RINGK_NAME_MAX - 1);
            return -EINVAL;
        }
        for (i = 0; i < dst->count; i++) {
            if (!strcmp(dst->names[i], *src)) {
                ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s lists '%s' twice", kernel,
                              what, *src);
                return -EINVAL;
            }
        }
        strcpy(dst->names[dst->count++], *src);
    }
    return 0;
}

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RINGK_HAVE_VALGRIND_H 1
#endif
#endif

/* Set once, when the library is loaded under valgrind: routes then compare names byte by byte
 * (route_name_init), since memcheck would report the bytes route_name_eq()'s word loads read
 * past a name's end. */
static int names_bytewise;

static void __attribute__((constructor)) names_check_valgrind(void)
{
#ifdef RINGK_HAVE_VALGRIND_H
    names_bytewise = (RUNNING_ON_VALGRIND != 0);
#else
    const char *pre = getenv("LD_PRELOAD");

    names_bytewise = (pre != NULL) && (strstr(pre, "vgpreload") != NULL);
#endif
}

/* x86-64 only: little-endian, and no memory tagging (on aarch64 with MTE or under HWASan, a
 * load past a name's end into another allocation's 16-byte granule faults even in one page) */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define RINGK_NAME_WORDS 1
#endif

/* Sets the words route_name_eq() compares a name with: the name @a name (a zero-padded
 * ringk_name_t) of route @a rt if it has fewer than 16 characters, else byte by byte. */
static void route_name_init(route_t *rt, const char *name)
{
    rt->name_len  = (uint32_t)strlen(name);
    rt->name_m[0] = rt->name_m[1] = 0;
    memcpy(rt->name_w, name, sizeof(rt->name_w)); /* RINGK_NAME_MAX > 16 */
    if ((rt->name_len < 8) && !names_bytewise) {
        rt->name_m[0] = ~UINT64_C(0) >> (8 * (7 - rt->name_len));
    } else if ((rt->name_len < 16) && !names_bytewise) {
        rt->name_m[0] = ~UINT64_C(0);
        rt->name_m[1] = ~UINT64_C(0) >> (8 * (15 - rt->name_len));
    }
    rt->name_w[0] &= rt->name_m[0];
    rt->name_w[1] &= rt->name_m[1];
}

/* strcmp(b, name) == 0, stopping at b's first character that differs: never reads past b's
 * end. */
static __attribute__((noinline)) int route_name_eq_bytes(const char *name, uint32_t len,
                                                         const char *b)
{
    uint32_t j;

    for (j = 0; j < len; j++) {
        if (b[j] != name[j]) {
            return 0;
        }
    }
    return b[len] == '\0';
}

/* Whether @a b names route @a rt (@a name: its name). A name under 16 characters is compared
 * as two 8-byte words with the bytes past its terminating zero masked off, when b's first 16
 * bytes lie in one page: the loads can read past the end of a shorter b, but never into
 * another page, as the C library's own string functions do (by name, the local one-way
 * throughput spent 38 of its 130 instructions a message in the byte loop). Otherwise byte by
 * byte, stopping at b's first character that differs; always so under ASan or TSan, under
 * valgrind (names_bytewise), and off x86-64. */
static inline int route_name_eq(const route_t *rt, const char *name, const char *b)
{
#ifdef RINGK_NAME_WORDS
    if (__builtin_expect((rt->name_m[0] != 0) && (((uintptr_t)b & 4095u) <= 4096u - 16u), 1)) {
        uint64_t x0, x1;

        memcpy(&x0, b, 8);
        memcpy(&x1, b + 8, 8);
        return ((((x0 & rt->name_m[0]) ^ rt->name_w[0]) |
                 ((x1 & rt->name_m[1]) ^ rt->name_w[1])) == 0);
    }
#endif
    return route_name_eq_bytes(name, rt->name_len, b);
}

/* strcmp() == 0 for the short names of the send path, without a call into the C library */
static inline int name_eq(const char *a, const char *b)
{
    while (*a == *b) {
        if (*a == '\0') {
            return 1;
        }
        a++;
        b++;
    }
    return 0;
}

/* ---- the consumer side: one iteration of a kernel's dispatch loop ------------------------- */

static int inbox_empty(ringk_kernel_t *k)
{
    return __atomic_load_n(&k->inbox.prod->pos, __ATOMIC_ACQUIRE) ==
           __atomic_load_n(&k->head, __ATOMIC_RELAXED);
}

/* The kernel whose dispatch loop runs on this thread: its sends may go into batch cells, which
 * the loop publishes (batch_flush_all). */
static __thread ringk_kernel_t *tls_running __attribute__((tls_model("initial-exec")));
/* the kernel whose idle thread is polling the worker (see ringk_deliver_direct) */
static __thread ringk_kernel_t *tls_polling __attribute__((tls_model("initial-exec")));
/* the context whose worker this kernel thread polled since it last slept or waited, or NULL
 * (the progress thread naps meanwhile; see ringk_remote_unpoll) */
static __thread ringk_ctx_t *tls_polled __attribute__((tls_model("initial-exec")));
__thread ringk_kernel_t *ringk_tls_inline __attribute__((tls_model("initial-exec")));

static void batch_flush_all(ringk_kernel_t *from);
static void deferred_run(ringk_kernel_t *k);

/* Before this thread waits for anything: publishes the batch cells of the kernel whose handler
 * runs here, so that it never waits holding claimed cells their reader may need to pass. */
static inline void flush_running(void)
{
    if ((tls_running != NULL) && (tls_running->open_batches != 0)) {
        batch_flush_all(tls_running);
    }
}

/* flush_running(), and the inbox cells the dispatch loop has finished with (it hands them back
 * 32 at a time) go back to their senders: for a thread about to wait, since a kernel it waits
 * for may itself be waiting for room in this inbox. Only forward: the head published when the
 * loop passed a wrap-around skip may be ahead of k->head. */
void ringk_wait_prepare(void)
{
    ringk_kernel_t *k = tls_running;
    uint64_t head;

    if (tls_polled != NULL) {
        /* a kernel thread that polled the worker may now wait long: the progress thread
         * takes over */
        ringk_remote_unpoll(tls_polled);
        tls_polled = NULL;
    }
    if (k == NULL) {
        return;
    }
    flush_running();
    head = __atomic_load_n(&k->head, __ATOMIC_RELAXED);
    if ((int64_t)(head - ringk_load_relaxed_u64(&k->inbox.cons->pos)) > 0) {
        ringk_ring_release_to(&k->inbox, head);
    }
}

/* Counts a sampled message, enqueued at @a enq_ns, in the latency histogram. */
static void lat_record(ringk_kernel_t *k, uint64_t enq_ns)
{
    uint64_t lat    = ringk_now_ns() - enq_ns;
    unsigned bucket = (lat == 0) ? 0 : (63 - __builtin_clzll(lat));

    add_u64(&k->latency_hist[bucket > 31 ? 31 : bucket], 1);
}

/* Hands one message to the kernel's handler (or takes a terminate), with its accounting. */
static inline __attribute__((always_inline)) void dispatch(ringk_kernel_t *k,
                                                          const ringk_msg_t *msg)
{
    int rc;

    if (msg->timestamp != 0) {
        ringk_hlc_recv(&k->ctx->clock, msg->timestamp);
    }
    if (msg->enq_ns != 0) {
        lat_record(k, msg->enq_ns);
    }
    if (msg->type != RINGK_MSG_TERMINATE) {
        rc = k->handler(k, msg, k->arg);
        if (rc < 0) {
            add_u64(&k->handler_errors, 1);
        }
    } else {
        /* a terminate message: everything before it is handled; stop taking more */
        int expect = RINGK_KERNEL_ACTIVE;
        __atomic_compare_exchange_n(&k->state, &expect, RINGK_KERNEL_TERMINATING, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
        expect = RINGK_KERNEL_INACTIVE;
        __atomic_compare_exchange_n(&k->state, &expect, RINGK_KERNEL_TERMINATING, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
    }
    /* only the consumer writes it: a plain increment, read racily by stats */
    __atomic_store_n(&k->msgs_in, k->msgs_in + 1, __ATOMIC_RELAXED);
}

/* Handles entries of the batch cell at @a cell (@a len bytes after the cell header), from
 * k->batch_next on, up to @a budget of them; returns how many, and 1 in *done_p once the cell is
 * finished. Only this process writes inboxes, but every offset is checked all the same. */
static unsigned batch_dispatch(ringk_kernel_t *k, const ringk_cell_hdr_t *cell, uint32_t len,
                               unsigned budget, int *done_p)
{
    const uint8_t *base = (const uint8_t*)cell + RINGK_CELL_HDR_BYTES;
    const ringk_batch_hdr_t *bh = (const ringk_batch_hdr_t*)base;
    const ringk_batch_entry_t *e;
    struct {
        ringk_msg_t msg;
        uint8_t     payload[RINGK_BATCH_MAX_LEN];
    } m;
    uint32_t off = k->batch_next ? k->batch_next : sizeof(*bh);
    unsigned n = 0;

    *done_p = 0;
    if ((len < sizeof(*bh)) || (len > RINGK_CELL - RINGK_CELL_HDR_BYTES)) {
        ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': malformed batch cell (length %u)",
                      k->name, len);
        *done_p = 1;
        return 0;
    }
    /* what every entry of the cell shares; per entry only its own fields change */
    m.msg.sender    = bh->sender;
    m.msg.receiver  = k->id;
    m.msg.flags     = 0;
    m.msg.timestamp = 0; /* batches are not used with timestamps */
    m.msg.enq_ns    = 0;
    if ((off == sizeof(*bh)) && (bh->enq_ns != 0)) {
        m.msg.enq_ns = bh->enq_ns; /* the first entry was sampled for the latency histogram */
        lat_record(k, bh->enq_ns);
    }
    while (n < budget) {
        if (off + sizeof(*e) > len) {
            *done_p = 1;
            break;
        }
        e = (const ringk_batch_entry_t*)(base + off);
        if ((e->length > RINGK_BATCH_MAX_LEN) || (off + RINGK_BATCH_ENTRY(e->length) > len) ||
            (e->type >= RINGK_MSG_TERMINATE)) {
            ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': malformed batch entry at offset "
                          "%u (type %u, payload %u bytes, cell %u bytes)", k->name, off, e->type,
                          e->length, len);
            *done_p = 1;
            break;
        }
        m.msg.type   = e->type;
        m.msg.length = e->length;
        m.msg.seq    = bh->seq + e->seq_delta;
        if (e->length == sizeof(uint64_t)) {
            memcpy(m.payload, e + 1, sizeof(uint64_t)); /* the common case, inlined */
        } else {
            memcpy(m.payload, e + 1, e->length);
        }
        off += RINGK_BATCH_ENTRY(e->length);
        /* never a terminate (batch_send() sends those alone): straight to the handler */
        if (k->handler(k, &m.msg, k->arg) < 0) {
            add_u64(&k->handler_errors, 1);
        }
        m.msg.enq_ns = 0;
        n++;
        if (off + sizeof(*e) > len) {
            *done_p = 1;
            break;
        }
    }
    /* only the consumer writes them: plain increments, read racily by stats */
    __atomic_store_n(&k->msgs_in, k->msgs_in + n, __ATOMIC_RELAXED);
    __atomic_store_n(&k->batched_in, k->batched_in + n, __ATOMIC_RELAXED);
    k->batch_next = *done_p ? 0 : off;
    return n;
}

/* Handles up to the processing mode's number of messages; returns how many. Only the kernel's
 * executor calls it (its thread, or the pool thread holding k->running). */
static unsigned kernel_iteration(ringk_kernel_t *k)
{
    /* the consumer's own copy: other threads read k->head (atomically) for depth and stats */
    uint64_t head = __atomic_load_n(&k->head, __ATOMIC_RELAXED), released = head;
    unsigned limit, n = 0;
    const ringk_cell_hdr_t *cell;
    uint32_t len, ncells;
    uint8_t flags;

    tls_running   = k;
    k->iter_sends = 0; /* the first send of an iteration goes out at once, later ones batched */

    switch (k->processing) {
    case RINGK_PROCESSING_CONTINUOUS:
        limit = 1;
        break;
    case RINGK_PROCESSING_ADAPTIVE:
        /* the producers' line is read only in this mode */
        if (__atomic_load_n(&k->inbox.prod->pos, __ATOMIC_RELAXED) - k->head <= 16) {
            limit = 1;
            break;
        }
        /* fall through */
    default:
        limit = k->max_per_iteration ? k->max_per_iteration : UINT32_MAX;
        break;
    }
    while (n < limit) {
        cell = ringk_ring_peek(&k->inbox, &head);
        if (cell == NULL) {
            /* skip cells passed over count as consumed */
            __atomic_store_n(&k->head, head, __ATOMIC_RELAXED);
            break;
        }
        len    = cell->len;
        ncells = cell->ncells;
        flags  = cell->flags;
        if ((ringk_ring_msg_check(&k->inbox, head, len, ncells, flags, k->inbox.ncells) != 0) ||
            ((len < sizeof(ringk_msg_t)) && (cell->id != RINGK_CELL_BATCH))) {
            /* Only this process writes inboxes: a bad cell is a bug, reported, never used. */
            ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': malformed inbox cell at %llu "
                   "(length %u, cells %u)", k->name, (unsigned long long)head, len, ncells);
            ringk_ring_release(&k->inbox, head, 1, 0xff);
            head++;
            __atomic_store_n(&k->head, head, __ATOMIC_RELAXED);
            continue;
        }
        if (cell->id == RINGK_CELL_BATCH) {
            int done;

            n += batch_dispatch(k, cell, len, limit - n, &done);
            if (!done) {
                break; /* the fairness limit: the rest of the cell next time */
            }
        } else {
            dispatch(k, ringk_ring_payload(&k->inbox, head));
            n++;
        }
        ringk_ring_done(&k->inbox, head, ncells, flags);
        head += ncells;
        __atomic_store_n(&k->head, head, __ATOMIC_RELAXED);
        if (head - released >= RINGK_RELEASE_BATCH) {
            ringk_ring_release_to(&k->inbox, head);
            released = head;
            if (k->open_batches != 0) {
                batch_flush_all(k); /* what the handlers sent so far goes out */
            }
        }
    }
    if (head != released) {
        /* before the executor may wait: senders waiting for room must see it */
        ringk_ring_release_to(&k->inbox, head);
    }
    if (k->open_batches != 0) {
        batch_flush_all(k);
    }
    tls_running = NULL;
    return n;
}

/* Handles the message ringk_deliver_direct() left in the kernel's direct slot. */
static void kernel_direct(ringk_kernel_t *k)
{
    tls_running   = k;
    k->iter_sends = 0;
    dispatch(k, &k->direct.msg);
    k->direct_full = 0;
    __atomic_store_n(&k->direct_in, k->direct_in + 1, __ATOMIC_RELAXED);
    if (k->open_batches != 0) {
        batch_flush_all(k);
    }
    tls_running = NULL;
}

/* A handler call in the receive callback holds the worker's lock, so that no other thread of
 * the process can send to or receive from another process meanwhile: a kernel whose handler
 * took longer than RINGK_INLINE_MAX_NS there (one call in RINGK_LAT_SAMPLE is timed) has its
 * messages handled from its loop from now on. */
static __attribute__((noinline)) void inline_stop(ringk_kernel_t *k, uint64_t ns)
{
    k->recv_inline = 0;
    ringk_log_msg(k->ctx, RINGK_LOG_INFO, "kernel '%s': a handler call took %.1f us in a receive "
                  "callback (more than %u): its messages are handled from its loop from now on",
                  k->name, ns / 1e3, RINGK_INLINE_MAX_NS / 1000);
}

int ringk_deliver_direct(ringk_kernel_t *to, const wire_msg_t *w, const void *payload,
                         size_t len)
{
    ringk_msg_t *msg = &to->direct.msg;
    uint64_t t0;

    /* FIFO: an empty inbox holds nothing older from the same sender; the slot is handled
     * before the inbox is looked at again */
    if ((tls_polling != to) || to->direct_full || (len > RINGK_DIRECT_MAX) ||
        (len > to->max_in) || (load_i(&to->state) != RINGK_KERNEL_ACTIVE) || !inbox_empty(to)) {
        return -EAGAIN;
    }
    msg->sender    = w->sender;
    msg->receiver  = w->dst;
    msg->type      = w->type;
    msg->flags     = 0;
    msg->length    = (uint32_t)len;
    msg->seq       = w->seq;
    msg->timestamp = w->timestamp;
    msg->enq_ns    = ((w->seq % RINGK_LAT_SAMPLE) == 0) ? ringk_now_ns() : 0;
    if ((len >= 8) && (len <= 16)) {
        /* the usual small message: two 8-byte copies (overlapping below 16), no call */
        memcpy(to->direct.payload, payload, 8);
        memcpy(to->direct.payload + len - 8, (const uint8_t*)payload + len - 8, 8);
    } else if (len > 0) {
        memcpy(to->direct.payload, payload, len);
    }
    if (!to->recv_inline) {
        to->direct_full = 1; /* for kernel_direct(), once the poll returned */
        return 0;
    }
    /* the handler runs here, in the receive callback: its reply leaves before the worker's
     * progress call unwinds (cross-process ping-pong: 1.66 -> 1.36 times raw UCP AM in a first
     * trial, medians of 7 interleaved rounds). What it cannot do without waiting is deferred
     * (ringk_tls_inline). What kernel_direct() does, without its call. */
    t0               = msg->enq_ns;
    to->direct_full  = 1; /* the slot is in use until the handler returned */
    ringk_tls_inline = to;
    tls_running      = to;
    to->iter_sends   = 0;
    dispatch(to, msg);
    to->direct_full  = 0;
    /* counted apart from direct_in (ringk_kernel_stats_query adds them up) */
    __atomic_store_n(&to->inline_in, to->inline_in + 1, __ATOMIC_RELAXED);
    if (to->open_batches != 0) {
        batch_flush_all(to);
    }
    tls_running      = NULL;
    ringk_tls_inline = NULL;
    if ((t0 != 0) && (ringk_now_ns() - t0 > RINGK_INLINE_MAX_NS)) {
        inline_stop(to, ringk_now_ns() - t0);
    }
    return 0;
}

/* A terminating kernel stops once every claimed cell was consumed: T2 reads the tail after the
 * state was set, and a sender that claims later sees the state (T1) and cancels. */
static int kernel_try_finish(ringk_kernel_t *k)
{
    if (load_i(&k->state) != RINGK_KERNEL_TERMINATING) {
        return 0;
    }
    /* T2: pairs with T1 in deliver(). */
    if (__atomic_load_n(&k->inbox.prod->pos, __ATOMIC_SEQ_CST) !=
        __atomic_load_n(&k->head, __ATOMIC_RELAXED)) {
        return 0;
    }
    pthread_mutex_lock(&k->mu);
    __atomic_store_n(&k->state, RINGK_KERNEL_TERMINATED, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return 1;
}

/* Pins the calling thread to core @a index (modulo the cores hwloc sees). Persistent kernels
 * get cores in creation order, so two kernels created one after the other never share a core
 * while another is free; pool threads are left to the scheduler. */
static void pin_thread(ringk_ctx_t *ctx, unsigned index)
{
    hwloc_obj_t core;
    int ncores;

    if (!ctx->pin || (ctx->topo == NULL)) {
        return;
    }
    ncores = hwloc_get_nbobjs_by_type(ctx->topo, HWLOC_OBJ_CORE);
    if (ncores <= 0) {
        return;
    }
    core = hwloc_get_obj_by_type(ctx->topo, HWLOC_OBJ_CORE, index % ncores);
    if ((core != NULL) &&
        (hwloc_set_cpubind(ctx->topo, core->cpuset, HWLOC_CPUBIND_THREAD) != 0)) {
        ringk_log_msg(ctx, RINGK_LOG_DEBUG, "cannot pin a thread to core %u", core->logical_index);
    }
}

/* Sleeps until woken by a sender or a state change; W1 pairs with W2 in sleeping_seen(). */
static void kernel_sleep(ringk_kernel_t *k)
{
    struct timespec ts;

    pthread_mutex_lock(&k->mu);
    __atomic_store_n(&k->sleeping, 1, __ATOMIC_RELAXED);
    /* W1: 'sleeping' before re-reading the inbox and the state. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if ((inbox_empty(k) || (load_i(&k->state) == RINGK_KERNEL_INACTIVE)) &&
        (load_i(&k->state) != RINGK_KERNEL_TERMINATING)) {
        /* a bounded sleep (RINGK_IDLE_WAKE_MS): senders and state changes signal */
        ringk_timespec_in_ms(&ts, k->ctx->idle_wake_ms);
        pthread_cond_timedwait(&k->cv, &k->mu, &ts);
    }
    __atomic_store_n(&k->sleeping, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&k->mu);
}

static void *persistent_main(void *arg)
{
    ringk_kernel_t *k = arg;
    unsigned idle = 0;
    int state;

    pin_thread(k->ctx, k->core);
    for (;;) {
        state = load_i(&k->state);
        if (state == RINGK_KERNEL_TERMINATED) {
            break;
        }
        if (state == RINGK_KERNEL_INACTIVE) {
            ringk_wait_prepare();
            kernel_sleep(k);
            continue;
        }
        if (kernel_iteration(k) > 0) {
            idle = 0;
            continue;
        }
        if (kernel_try_finish(k)) {
            break;
        }
        if (ringk_remote_of(k->ctx) != NULL) {
            unsigned j, got = 0;

            /* a few polls of the worker between looks at the inbox (a load): a message from
             * another process is seen sooner, one from this process as soon */
            tls_polling = k;
            for (j = 0; (j < RINGK_REMOTE_POLLS) && !got && ((j == 0) || inbox_empty(k)); j++) {
                got = ringk_remote_poll(k->ctx);
            }
            tls_polling = NULL;
            tls_polled  = k->ctx;
            if (k->defer_head != NULL) {
                deferred_run(k);
            }
            if (k->direct_full) {
                kernel_direct(k);
            }
            if (got) {
                idle = 0;
                continue;
            }
        }
        if (++idle < RINGK_SPIN_POLLS) {
            /* spin briefly, then yield: a thread sharing our core gets to run. A kernel that
             * polls the worker spins without a pause: the polls are the pause, and one more
             * only delays seeing the next message (cross-process ping-pong 0.321 -> 0.300 us,
             * medians of 9 interleaved runs) */
            if (idle < 128) {
                if (ringk_remote_of(k->ctx) == NULL) {
                    cpu_relax();
                }
            } else {
                sched_yield();
            }
            continue;
        }
        idle = 0;
        ringk_wait_prepare();
        kernel_sleep(k);
    }
    ringk_wait_prepare();
    return NULL;
}

/* Whether an event-driven kernel has messages, or must finish terminating. */
static int pool_has_work(ringk_ctx_t *ctx)
{
    unsigned i, count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);
    ringk_kernel_t *k;
    int state;

    for (i = 0; i < count; i++) {
        k = ctx->kernels[i];
        if ((k == NULL) || (k->mode != RINGK_MODE_EVENT_DRIVEN)) {
            continue;
        }
        state = load_i(&k->state);
        if ((state == RINGK_KERNEL_TERMINATING) ||
            ((state == RINGK_KERNEL_ACTIVE) && !inbox_empty(k))) {
            return 1;
        }
    }
    return 0;
}

void *ringk_pool_main(void *arg)
{
    ringk_ctx_t *ctx = arg;
    unsigned i, n, it, did, idle = 0, count, event_driven;
    struct timespec ts;
    ringk_kernel_t *k;
    int state;

    while (!load_i(&ctx->stop)) {
        did   = 0;
        event_driven = 0;
        count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);
        for (i = 0; i < count; i++) {
            k = ctx->kernels[i];
            if ((k == NULL) || (k->mode != RINGK_MODE_EVENT_DRIVEN)) {
                continue;
            }
            event_driven++;
            state = load_i(&k->state);
            if ((state == RINGK_KERNEL_INACTIVE) || (state == RINGK_KERNEL_TERMINATED) ||
                (inbox_empty(k) && (state != RINGK_KERNEL_TERMINATING))) {
                continue;
            }
            if (__atomic_exchange_n(&k->running, 1, __ATOMIC_ACQUIRE)) {
                continue; /* another pool thread has it */
            }
            for (it = 0; it < k->max_iterations; it++) {
                n = kernel_iteration(k);
                if (n == 0) {
                    break;
                }
                did += n;
            }
            kernel_try_finish(k);
            __atomic_store_n(&k->running, 0, __ATOMIC_RELEASE);
        }
        if (did > 0) {
            idle = 0;
            continue;
        }
        /* with no event-driven kernel there is nothing to spin for: the yields would only
         * take turns from persistent kernels on a busy machine */
        if ((event_driven > 0) && (++idle < RINGK_SPIN_POLLS / 4)) {
            sched_yield();
            continue;
        }
        idle = 0;
        pthread_mutex_lock(&ctx->pool_mu);
        __atomic_store_n(&ctx->pool_sleeping, 1, __ATOMIC_RELAXED);
        /* W1 (pool): as in kernel_sleep(), then the inboxes are read again: a sender that
         * claimed before is seen here, one that claims after sees the flag (W2). Each pool
         * thread does this before it sleeps, so one that is awake always looks again. */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (!load_i(&ctx->stop) && !pool_has_work(ctx)) {
            ringk_timespec_in_ms(&ts, ctx->idle_wake_ms); /* bounded, as kernel_sleep() */
            pthread_cond_timedwait(&ctx->pool_cv, &ctx->pool_mu, &ts);
        }
        __atomic_store_n(&ctx->pool_sleeping, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&ctx->pool_mu);
    }
    return NULL;
}

/* Whether the executor of @a k sleeps, or is about to: W2, pairs with W1 in kernel_sleep(),
 * which stores 'sleeping', fences, then reads the tail (inbox_empty). The caller has either
 * claimed cells (a seq_cst read-modify-write on the tail, ringk_cas_u64) or fenced just before:
 * then either this read sees the flag or the sleeper's read sees the claim and does not sleep. */
static int sleeping_seen(ringk_kernel_t *k)
{
    return (k->mode == RINGK_MODE_PERSISTENT) ?
           __atomic_load_n(&k->sleeping, __ATOMIC_SEQ_CST) :
           __atomic_load_n(&k->ctx->pool_sleeping, __ATOMIC_SEQ_CST);
}

/* Signals the executor of @a k, seen sleeping by sleeping_seen(). */
static void wake_signal(ringk_kernel_t *k)
{
    ringk_ctx_t *ctx = k->ctx;

    if (k->mode == RINGK_MODE_PERSISTENT) {
        pthread_mutex_lock(&k->mu);
        pthread_cond_signal(&k->cv);
        pthread_mutex_unlock(&k->mu);
    } else {
        pthread_mutex_lock(&ctx->pool_mu);
        pthread_cond_broadcast(&ctx->pool_cv);
        pthread_mutex_unlock(&ctx->pool_mu);
    }
}

/* Wakes the executor of @a k if it sleeps, after a state change (not a claim): fences first. */
static void wake(ringk_kernel_t *k)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (sleeping_seen(k)) {
        wake_signal(k);
    }
}

/* ---- the producer side ---------------------------------------------------------------------- */

/* Waits for room without a timeout can close a cycle: a kernel whose executor waits for room in
 * the inbox of a kernel whose executor waits for room in the first one's (or a longer chain)
 * will never get it, as only a kernel's executor empties its inbox. Such a waiter publishes
 * blocked_on, a new block_gen per wait, and block_fails, its failed claims in this wait.
 * wait_cycle() follows blocked_on from @a to and returns 1 when it comes back to @a self, with
 * *sig_p a signature of the waits on the cycle and *min_p the lowest kernel id on it; it
 * records each member's block_fails in @a fails (by kernel id), or with @a check set, tells in
 * *progressed_p whether every member has failed again since they were recorded. */
static int wait_cycle(ringk_kernel_t *self, ringk_kernel_t *to, uint64_t *sig_p, uint32_t *min_p,
                      uint64_t *fails, int check, int *progressed_p)
{
    ringk_kernel_t *k = to;
    uint64_t sig = 0, f;
    uint32_t min = self->id;
    unsigned n;
    int progressed = 1;

    for (n = 0; (n < RINGK_MAX_KERNELS) && (k != NULL); n++) {
        if (k == self) {
            *sig_p        = sig;
            *min_p        = min;
            *progressed_p = progressed;
            return 1;
        }
        sig = (sig ^ ((uint64_t)k->id << 40) ^ __atomic_load_n(&k->block_gen, __ATOMIC_ACQUIRE)) *
              0x9e3779b97f4a7c15ull;
        min = (k->id < min) ? k->id : min;
        f   = __atomic_load_n(&k->block_fails, __ATOMIC_RELAXED);
        if (!check) {
            fails[k->id] = f;
        } else if (f == fails[k->id]) {
            progressed = 0;
        }
        k = __atomic_load_n(&k->blocked_on, __ATOMIC_ACQUIRE);
    }
    return 0;
}

/* The wait of inbox_claim() once the inbox was found full: 0 with the cells claimed, or an
 * error. A cycle of waits without a timeout (wait_cycle) that stays the same for
 * RINGK_DEADLOCK_MS, in which every member has tried to claim and failed again since the cycle
 * was first seen, is a deadlock (nobody on it consumes, so no room can come): the kernel with
 * the lowest id on it gives up (-EDEADLK), so that it goes back to its inbox and the others get
 * room. */
static __attribute__((noinline)) int
inbox_wait(ringk_kernel_t *to, uint32_t ncells, int timeout_ms, uint64_t *head_cache,
           uint64_t *pos_p)
{
    ringk_kernel_t *self = (timeout_ms == RINGK_WAIT_FOREVER) ? tls_running : NULL;
    uint64_t deadline, now, start, warn_next = 0, sig = 0, cycle_sig = 0, cycle_since = 0;
    char what[sizeof(to->name) + 2];
    uint64_t fails[RINGK_MAX_KERNELS + 1];
    unsigned spins = 0;
    int ret, progressed;
    uint32_t min;

    if (timeout_ms == RINGK_WAIT_NONE) {
        add_u64(&to->refused_full, 1);
        return -EAGAIN;
    }
    if (ringk_tls_inline != NULL) {
        return RINGK_WOULD_WAIT; /* to's executor may itself wait for the worker's lock */
    }
    ringk_wait_prepare();
    start    = ringk_now_ns();
    deadline = (timeout_ms < 0) ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000u;
    if (self != NULL) {
        /* (to == self is a cycle of one: only this executor empties that inbox) */
        __atomic_store_n(&self->block_fails, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&self->block_gen, self->block_gen + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&self->blocked_on, to, __ATOMIC_RELEASE);
    }
    for (;;) {
        if (ringk_ring_mp_claim_cached(&to->inbox, ncells, head_cache, pos_p)) {
            ret = 0;
            break;
        }
        if ((spins & 63) == 0) {
            now = ringk_now_ns();
            if (now > deadline) {
                add_u64(&to->refused_full, 1);
                ret = -ETIMEDOUT;
                break;
            }
            if (load_i(&to->state) >= RINGK_KERNEL_TERMINATING) {
                ret = -EPIPE;
                break;
            }
            if ((to->ctx->wait_warn_ms != 0) && ((warn_next == 0) || (now >= warn_next))) {
                snprintf(what, sizeof(what), "'%s'", to->name);
                ringk_wait_warn(to->ctx, start, now, &warn_next, what);
            }
            if (self == NULL) {
                /* no cycle detection */
            } else if (!wait_cycle(self, to, &sig, &min, fails, cycle_since != 0, &progressed)) {
                cycle_since = 0;
            } else if ((cycle_since == 0) || (sig != cycle_sig)) {
                /* a new cycle: (again) record its members' failed claims */
                if ((cycle_since == 0) ||
                    wait_cycle(self, to, &sig, &min, fails, 0, &progressed)) {
                    cycle_sig   = sig;
                    cycle_since = now;
                } else {
                    cycle_since = 0;
                }
            } else if ((now - cycle_since > RINGK_DEADLOCK_MS * 1000000ull) &&
                       (min == self->id) && progressed) {
                add_u64(&to->refused_full, 1);
                ringk_log_msg(self->ctx, RINGK_LOG_ERROR, "deadlock: kernel '%s' waits without "
                              "a timeout for room in '%s', which waits, directly or through "
                              "others, for room in '%s'; this send fails with EDEADLK",
                              self->name, to->name, self->name);
                ret = -EDEADLK;
                break;
            }
            if (self != NULL) {
                /* read by the other members: this one claimed and failed again */
                __atomic_store_n(&self->block_fails, self->block_fails + 1, __ATOMIC_RELAXED);
            }
        }
        if (++spins < 256) {
            cpu_relax();
        } else {
            sched_yield();
        }
    }
    if (self != NULL) {
        __atomic_store_n(&self->blocked_on, NULL, __ATOMIC_RELEASE);
    }
    return ret;
}

/* Claims @a ncells cells of @a to's inbox, waiting for room as @a timeout_ms says; *sleeper_p:
 * the executor of @a to slept, so the publish must wake it.
 * @return 0, -EAGAIN, -ETIMEDOUT, or -EPIPE (terminating). */
static inline __attribute__((always_inline)) int
inbox_claim(ringk_kernel_t *to, uint32_t ncells, int timeout_ms, uint64_t *head_cache,
            uint64_t *pos_p, int *sleeper_p)
{
    int state, ret;

    /* Fast refusal; the check that counts comes after the claim (T1). */
    state = load_i(&to->state);
    if ((state == RINGK_KERNEL_TERMINATING) || (state == RINGK_KERNEL_TERMINATED)) {
        return -EPIPE;
    }
    if (!ringk_ring_mp_claim_cached(&to->inbox, ncells, head_cache, pos_p)) {
        ret = inbox_wait(to, ncells, timeout_ms, head_cache, pos_p);
        if (ret != 0) {
            return ret;
        }
    }
    /* W2 (see sleeping_seen): right after the claim, so that no fence is needed */
    *sleeper_p = sleeping_seen(to);
    /* T1: the claim (a compare-and-swap on the tail) comes before this read of the state;
     * pairs with T2 in kernel_try_finish(), which reads the state, then the tail. A sender that
     * finds the kernel terminating here gives its cells up (the consumer passes over them)
     * and is told. */
    state = __atomic_load_n(&to->state, __ATOMIC_SEQ_CST);
    if ((state == RINGK_KERNEL_TERMINATING) || (state == RINGK_KERNEL_TERMINATED)) {
        ringk_ring_cancel(&to->inbox, *pos_p, ncells);
        return -EPIPE;
    }
    return 0;
}

/* Publishes route @a i's open batch cell, and wakes its target if it slept at the claim. */
static void batch_flush(ringk_kernel_t *from, unsigned i)
{
    route_t *rt = &from->routes[i];
    ringk_kernel_t *to = rt->target;

    ringk_ring_publish(&to->inbox, rt->batch_pos, sizeof(ringk_batch_hdr_t) + rt->batch_bytes, 1,
                       RINGK_CELL_BATCH, 0);
    rt->batch_bytes   = 0;
    from->open_batches &= ~(1u << i);
    if (rt->batch_sleeper) {
        wake_signal(to);
    }
}

static void batch_flush_all(ringk_kernel_t *from)
{
    while (from->open_batches != 0) {
        batch_flush(from, (unsigned)__builtin_ctz(from->open_batches));
    }
}

/* Claims a new batch cell on route @a i of @a from and writes its header; the first entry will
 * carry sequence number @a seq. */
static __attribute__((noinline)) int batch_open(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                unsigned i, uint64_t seq, int timeout_ms)
{
    route_t *rt = &from->routes[i];
    ringk_batch_hdr_t *bh;
    int ret;

    ret = inbox_claim(rt->target, 1, timeout_ms, &rt->head_cache, &rt->batch_pos,
                      &rt->batch_sleeper);
    if (ret != 0) {
        return ret;
    }
    bh           = ringk_ring_payload(&rt->target->inbox, rt->batch_pos);
    bh->sender   = ((uint32_t)ctx->job.rank << RINGK_RANK_SHIFT) | from->id;
    bh->reserved = 0;
    bh->seq      = seq;
    /* the latency histogram samples about one message in RINGK_LAT_SAMPLE, as unbatched */
    bh->enq_ns = 0;
    if (seq >= from->next_sample) {
        bh->enq_ns        = ringk_now_ns();
        from->next_sample = seq + RINGK_LAT_SAMPLE;
    }
    rt->batch_hdr       = bh;
    rt->batch_seq       = seq;
    rt->batch_bytes     = 0;
    from->open_batches |= 1u << i;
    return 0;
}

/* Whether the open batch cell of @a rt has room for an entry of @a need bytes with sequence
 * number @a seq: not full, and the entry's 16-bit sequence delta holds it. */
static inline __attribute__((always_inline)) int batch_fits(const route_t *rt, uint64_t seq,
                                                            uint32_t need)
{
    return (rt->batch_bytes + need <= RINGK_BATCH_ROOM) &&
           (seq - rt->batch_seq <= RINGK_BATCH_MAX_DELTA);
}

/* Appends an entry (sequence number @a seq, @a need bytes) to the open batch cell of @a rt, a
 * route of @a from, which has room for it and a delta that holds it. The payload is copied last,
 * so nothing is live across a memcpy call. */
static inline __attribute__((always_inline)) void
batch_append(ringk_kernel_t *from, route_t *rt, uint64_t seq, ringk_msg_type_t type,
             const void *payload, size_t length, uint32_t need)
{
    ringk_batch_hdr_t *bh  = rt->batch_hdr;
    ringk_batch_entry_t *e = (ringk_batch_entry_t*)((uint8_t*)(bh + 1) + rt->batch_bytes);

    ringk_batch_entry_t entry = {
        .seq_delta = (uint16_t)(seq - rt->batch_seq), .type = (uint8_t)type,
        .length    = (uint8_t)length
    };

    memcpy(e, &entry, sizeof(entry)); /* one 4-byte store */
    rt->batch_bytes += need;
    __atomic_store_n(&from->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&from->msgs_out, from->msgs_out + 1, __ATOMIC_RELAXED);
    if (length == sizeof(uint64_t)) {
        memcpy(e + 1, payload, sizeof(uint64_t)); /* the common case, inlined */
    } else if (length > 0) {
        memcpy(e + 1, payload, length);
    }
}

/* Sends a small message of @a from (whose dispatch loop runs on this thread) to the local target
 * of its route @a i: appended to the route's open batch cell, or to a new one. */
static inline __attribute__((always_inline)) int
batch_send(ringk_ctx_t *ctx, ringk_kernel_t *from, unsigned i, ringk_msg_type_t type,
           const void *payload, size_t length, int timeout_ms)
{
    route_t *rt     = &from->routes[i];
    uint32_t need   = RINGK_BATCH_ENTRY(length);
    uint64_t seq    = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);
    int ret;

    if (from->open_batches & (1u << i)) {
        if (load_i(&rt->target->state) >= RINGK_KERNEL_TERMINATING) {
            /* what the cell holds was sent before the terminate: it is handled */
            batch_flush(from, i);
            return -EPIPE;
        }
        if (!batch_fits(rt, seq, need)) {
            batch_flush(from, i);
        }
    }
    if (!(from->open_batches & (1u << i))) {
        ret = batch_open(ctx, from, i, seq, timeout_ms);
        if (ret != 0) {
            return ret;
        }
    }
    batch_append(from, rt, seq, type, payload, length, need);
    return 0;
}

/* Puts one message into @a to's inbox, waiting for room as @a timeout_ms says. */
static int deliver(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_kernel_t *to,
                   ringk_msg_type_t type, uint32_t receiver, const void *payload, size_t length,
                   int timeout_ms, uint64_t *head_cache, const ringk_msg_t *remote_hdr)
{
    uint64_t local_head = 0;
    uint32_t ncells = RINGK_MSG_CELLS(length);
    uint64_t pos = 0;
    ringk_msg_t *msg;
    int ret, sleeper;

    if (head_cache == NULL) {
        head_cache = &local_head;
    }
    ret = inbox_claim(to, ncells, timeout_ms, head_cache, &pos, &sleeper);
    if (ret != 0) {
        return ret;
    }
    msg = ringk_ring_payload(&to->inbox, pos);
    msg->receiver  = receiver;
    msg->type      = type;
    msg->flags     = 0;
    msg->length    = (uint32_t)length;
    if (remote_hdr != NULL) {
        /* from another process: its sender, sequence and clock */
        msg->sender    = remote_hdr->sender;
        msg->seq       = remote_hdr->seq;
        msg->timestamp = remote_hdr->timestamp;
    } else {
        msg->sender    = ((uint32_t)ctx->job.rank << RINGK_RANK_SHIFT) | (from ? from->id : 0);
        msg->seq       = from ? ringk_kernel_next_seq(from)
                              : __atomic_fetch_add(&ctx->host_seq, 1, __ATOMIC_RELAXED);
        msg->timestamp = ((from && from->timestamps) || to->timestamps) ?
                         ringk_hlc_tick(&ctx->clock) : 0;
    }
    /* the latency histogram samples: a clock read on every message would cost more than the
     * rest of the send */
    msg->enq_ns    = ((msg->seq % RINGK_LAT_SAMPLE) == 0) ? ringk_now_ns() : 0;
    if (length > 0) {
        memcpy(msg + 1, payload, length);
    }
    ringk_ring_publish(&to->inbox, pos, sizeof(*msg) + length, ncells, (uint8_t)type, 0);
    if (from != NULL) {
        /* only the sender's executor sends as it: a plain increment, read racily by stats */
        __atomic_store_n(&from->msgs_out, from->msgs_out + 1, __ATOMIC_RELAXED);
    }
    if (sleeper) {
        /* it sees a claimed cell, so it waits for the publish rather than sleeping again */
        wake_signal(to);
    }
    return 0;
}

int ringk_deliver_hdr(ringk_ctx_t *ctx, ringk_kernel_t *to, const ringk_msg_t *hdr,
                      const void *payload, int timeout_ms)
{
    if (hdr->length > to->max_in) {
        return -EMSGSIZE;
    }
    return deliver(ctx, NULL, to, (ringk_msg_type_t)hdr->type, hdr->receiver, payload,
                   hdr->length, timeout_ms, NULL, hdr);
}

static ringk_kernel_t *lookup(ringk_ctx_t *ctx, const char *name)
{
    ringk_kernel_t *k = NULL;
    unsigned i;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->nkernels; i++) {
        if ((ctx->kernels[i] != NULL) && !strcmp(ctx->kernels[i]->name, name)) {
            k = ctx->kernels[i];
            break;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return k;
}

#define RINGK_MIN(a, b) (((a) < (b)) ? (a) : (b))

/* The number of @a from's route to kernel @a to_name, or -EPERM (logged) when it has none. */
static int route_index(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name)
{
    unsigned i;

    for (i = 0; i < from->publishes_to.count; i++) {
        if (name_eq(from->publishes_to.names[i], to_name)) {
            return (int)i;
        }
    }
    ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' has no route to '%s' (publishes_to)",
                  from->name, to_name);
    return -EPERM;
}

/* Resolves route @a i of @a from on its first use: its kernel in this process or another;
 * -ENOENT (logged) when there is none yet. */
static __attribute__((noinline)) int route_resolve(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                   unsigned i)
{
    const char *to_name = from->publishes_to.names[i];
    route_t *route = &from->routes[i];
    ringk_kernel_t *to;

    to = lookup(ctx, to_name);
    if (to != NULL) {
        route->allowed = (to->subscribes_to.count == 0) ||
                         ringk_list_has(&to->subscribes_to, from->name);
        /* what batch_send() may take on this route, checked once here */
        route->batch_lim =
            (route->allowed && !from->timestamps && !to->timestamps) ?
            RINGK_MIN(RINGK_MIN(RINGK_BATCH_MAX_LEN, to->max_in), from->max_out) + 1 : 0;
        __atomic_store_n(&route->target, to, __ATOMIC_RELEASE);
    } else if ((ringk_remote_of(ctx) != NULL) &&
               (ringk_remote_lookup(ctx, to_name, &route->rank, &route->remote_id) == 0)) {
        route->allowed = 1; /* the receiving process checks its subscribes_to */
        ringk_remote_route_init(ctx, from, route);
    } else {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: no kernel named '%s' (from '%s')",
                      to_name, from->name);
        return -ENOENT;
    }
    return 0;
}

/* ringk_send() of a kernel (not the host), once its arguments were checked. */
static __attribute__((noinline)) int send_from(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                               unsigned i, ringk_msg_type_t type,
                                               const void *payload, size_t length, int timeout_ms)
{
    route_t *route = &from->routes[i];
    ringk_kernel_t *to;

    if (length > from->max_out) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "message of %zu bytes from '%s' exceeds its max_out %u",
                      length, from->name, from->max_out);
        return -EMSGSIZE;
    }
    flush_running(); /* a remote send may wait for a credit */
    to = route->target;
    if (to == NULL) {
        return ringk_remote_send(ctx, from, route->rank, route->remote_id, type, payload, length,
                                 timeout_ms);
    }
    if (!route->allowed) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' does not subscribe to '%s'", to->name,
                      from->name);
        return -EPERM;
    }
    if (length > to->max_in) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "message of %zu bytes to '%s' exceeds its max_in %u",
                      length, to->name, to->max_in);
        return -EMSGSIZE;
    }
    return deliver(ctx, from, to, type, to->id, payload, length, timeout_ms, &route->head_cache,
                   NULL);
}

/* ringk_send() of the host (no sending kernel). */
static __attribute__((noinline)) int send_from_host(ringk_ctx_t *ctx, const char *to_name,
                                                    ringk_msg_type_t type, const void *payload,
                                                    size_t length, int timeout_ms)
{
    ringk_kernel_t *to = lookup(ctx, to_name);
    uint32_t id;
    int rank;

    if (to == NULL) {
        if ((ringk_remote_of(ctx) != NULL) && (ringk_remote_lookup(ctx, to_name, &rank, &id) == 0)) {
            return ringk_remote_send(ctx, NULL, rank, id, type, payload, length, timeout_ms);
        }
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: no kernel named '%s'", to_name);
        return -ENOENT;
    }
    if (length > to->max_in) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "message of %zu bytes to '%s' exceeds its max_in %u",
                      length, to->name, to->max_in);
        return -EMSGSIZE;
    }
    return deliver(ctx, NULL, to, type, to->id, payload, length, timeout_ms, NULL, NULL);
}

/* ringk_send() on route @a i of @a from once its arguments were checked: resolves the route if
 * it has not been, then batches the send or sends it alone. */
static int send_route(ringk_ctx_t *ctx, ringk_kernel_t *from, unsigned i, ringk_msg_type_t type,
                      const void *payload, size_t length, int timeout_ms)
{
    int ret;

    if ((from->routes[i].target == NULL) && (from->routes[i].rank < 0)) {
        ret = route_resolve(ctx, from, i);
        if (ret != 0) {
            return ret;
        }
    }
    __atomic_store_n(&from->last_rt, &from->routes[i], __ATOMIC_RELAXED);
    if ((tls_running == from) && (from->iter_sends++ > 0) && (type != RINGK_MSG_TERMINATE) &&
        (length < from->routes[i].batch_lim)) {
        /* sent from the sender's own handler, small, to a local kernel: batched with its other
         * sends (batch_send); batch_lim holds the route's checks (max_out, max_in, allowed) */
        return batch_send(ctx, from, i, type, payload, length, timeout_ms);
    }
    return send_from(ctx, from, i, type, payload, length, timeout_ms);
}

static int send_args_ok(ringk_ctx_t *ctx, const void *payload, size_t length,
                        ringk_msg_type_t type, int timeout_ms)
{
    return (ctx != NULL) && ((payload != NULL) || (length == 0)) &&
           ((unsigned)type <= RINGK_MSG_TERMINATE) && (timeout_ms >= RINGK_WAIT_FOREVER);
}

/* ---- calls deferred from a handler run in a receive callback (ringk_tls_inline) ---- */

typedef enum { DEFER_SEND, DEFER_SEND_ROUTE, DEFER_PUBLISH, DEFER_TERMINATE } defer_kind_t;

typedef struct ringk_deferred {
    struct ringk_deferred *next;
    defer_kind_t           kind;
    ringk_ctx_t           *ctx;       /* the context the call was made on */
    ringk_kernel_t        *from;      /* the sender (NULL: the host), or the kernel to terminate */
    int                    route;     /* DEFER_SEND_ROUTE */
    const char            *name;      /* kernel (DEFER_SEND) or topic (DEFER_PUBLISH), in data */
    ringk_msg_type_t       type;
    int                    timeout_ms;
    size_t                 length;
    uint8_t                data[];    /* the payload, then the name */
} ringk_deferred_t;

/* Queues a call of the handler running in the receive callback, to be made once the callback
 * returned (deferred_run): 0, or -ENOMEM. */
static __attribute__((noinline)) int defer_call(ringk_ctx_t *ctx, defer_kind_t kind,
                                                ringk_kernel_t *from, int route,
                                                const char *name, ringk_msg_type_t type,
                                                const void *payload, size_t length,
                                                int timeout_ms)
{
    ringk_kernel_t *k   = ringk_tls_inline;
    size_t name_len     = (name != NULL) ? strlen(name) + 1 : 0;
    ringk_deferred_t *d = malloc(sizeof(*d) + length + name_len);

    if (d == NULL) {
        return -ENOMEM;
    }
    d->next       = NULL;
    d->ctx        = ctx;
    d->kind       = kind;
    d->from       = from;
    d->route      = route;
    d->type       = type;
    d->timeout_ms = timeout_ms;
    d->length     = length;
    if (length > 0) {
        memcpy(d->data, payload, length);
    }
    d->name = NULL;
    if (name != NULL) {
        memcpy(d->data + length, name, name_len);
        d->name = (const char*)(d->data + length);
    }
    if (k->open_batches != 0) {
        /* what the handler batched so far goes out now: ringk_send()'s batched path, which
         * does not look at defer_head, then finds no open cell */
        batch_flush_all(k);
    }
    if (k->defer_tail != NULL) {
        k->defer_tail->next = d;
    } else {
        k->defer_head = d;
    }
    k->defer_tail = d;
    __atomic_store_n(&k->deferred, k->deferred + 1, __ATOMIC_RELAXED);
    return 0;
}

/* A send from a handler running in the receive callback while earlier calls of it wait to be
 * made: queued behind them (FIFO), or -EAGAIN for a send that must not wait. */
static int defer_behind(ringk_ctx_t *ctx, defer_kind_t kind, ringk_kernel_t *from, int route,
                        const char *name, ringk_msg_type_t type, const void *payload,
                        size_t length, int timeout_ms)
{
    if (timeout_ms == RINGK_WAIT_NONE) {
        return -EAGAIN;
    }
    return defer_call(ctx, kind, from, route, name, type, payload, length, timeout_ms);
}

/* Makes the calls that kernel @a k's handler deferred in a receive callback, in order, on k's
 * thread, as its handler would have (batched sends, waits): the failures are counted and
 * logged, since the handler was told 0. */
static __attribute__((noinline)) void deferred_run(ringk_kernel_t *k)
{
    ringk_deferred_t *d;
    unsigned reached;
    int ret;

    tls_running   = k;
    k->iter_sends = 0;
    while ((d = k->defer_head) != NULL) {
        k->defer_head = d->next;
        switch (d->kind) {
        case DEFER_SEND:
            ret = ringk_send(d->ctx, d->from, d->name, d->type, d->data, d->length,
                             d->timeout_ms);
            break;
        case DEFER_SEND_ROUTE:
            ret = ringk_send_route(d->ctx, d->from, d->route, d->type, d->data, d->length,
                                   d->timeout_ms);
            break;
        case DEFER_PUBLISH:
            ret = ringk_publish(d->ctx, d->from, d->name, d->data, d->length, d->timeout_ms,
                                &reached);
            break;
        default:
            ret = ringk_kernel_terminate(d->from);
            break;
        }
        if (ret < 0) {
            __atomic_store_n(&k->deferred_failed, k->deferred_failed + 1, __ATOMIC_RELAXED);
            ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': a %s its handler made in a "
                          "receive callback, deferred until the callback returned, failed: %s",
                          k->name, (d->kind == DEFER_PUBLISH) ? "publish" :
                          (d->kind == DEFER_TERMINATE) ? "terminate" : "send", strerror(-ret));
        }
        free(d);
    }
    k->defer_tail = NULL;
    if (k->open_batches != 0) {
        batch_flush_all(k);
    }
    tls_running = NULL;
}

static int send_named(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name,
                      ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms);

/* ringk_send() but for its fast path. */
static __attribute__((noinline)) int send_slow(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                               const char *to_name, ringk_msg_type_t type,
                                               const void *payload, size_t length,
                                               int timeout_ms)
{
    int ret;

    if (!send_args_ok(ctx, payload, length, type, timeout_ms) || (to_name == NULL)) {
        return -EINVAL;
    }
    if (ringk_tls_inline != NULL) {
        if (ringk_tls_inline->defer_head != NULL) {
            return defer_behind(ctx, DEFER_SEND, from, -1, to_name, type, payload, length,
                                timeout_ms);
        }
        ret = send_named(ctx, from, to_name, type, payload, length, timeout_ms);
        return (ret != RINGK_WOULD_WAIT) ? ret :
               defer_call(ctx, DEFER_SEND, from, -1, to_name, type, payload, length, timeout_ms);
    }
    return send_named(ctx, from, to_name, type, payload, length, timeout_ms);
}

/* ringk_send() once its arguments were checked. */
static int send_named(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name,
                      ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms)
{
    unsigned i;
    int ret;

    if (from == NULL) {
        return send_from_host(ctx, to_name, type, payload, length, timeout_ms);
    }
    /* a kernel usually sends where it sent last: that route is tried first */
    i = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED)->index;
    if ((i >= from->publishes_to.count) ||
        !route_name_eq(&from->routes[i], from->publishes_to.names[i], to_name)) {
        ret = route_index(ctx, from, to_name);
        if (ret < 0) {
            return ret;
        }
        i = (unsigned)ret;
    }
    return send_route(ctx, from, i, type, payload, length, timeout_ms);
}

/* The fast path of ringk_send() and ringk_send_route(): appends to the open batch cell of route
 * @a rt of @a from, whose handler runs on this thread (a cell opens only at the handler's second
 * or later send of a dispatch-loop iteration, see send_route(), and is published when the
 * iteration ends). Returns 1 when it did; 0 when the send needs the full path (the cell is
 * full or not open, the message is too long or a terminate, the receiver is terminating),
 * having changed nothing. */
static inline __attribute__((always_inline)) int
batch_fast(ringk_kernel_t *from, route_t *rt, ringk_msg_type_t type, const void *payload,
           size_t length)
{
    uint32_t need;
    uint64_t seq;

    if (!(from->open_batches & rt->bit) || (length >= rt->batch_lim) ||
        ((unsigned)type >= RINGK_MSG_TERMINATE)) {
        return 0;
    }
    need = RINGK_BATCH_ENTRY(length);
    seq  = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);
    if (!batch_fits(rt, seq, need) || (load_i(&rt->target->state) >= RINGK_KERNEL_TERMINATING)) {
        return 0;
    }
    batch_append(from, rt, seq, type, payload, length, need);
    return 1;
}

/* The fast path of a send from a kernel's own handler on route @a i, resolved to a kernel of
 * another process: what send_route() and send_from() would check and do, without their calls
 * (the cross-process ping-pong spent 180 instructions a message in them). Returns 1 with the
 * result in *ret_p, or 0 when the send needs the full path, having changed nothing. */
static inline __attribute__((always_inline)) int
remote_fast(ringk_ctx_t *ctx, ringk_kernel_t *from, unsigned i, ringk_msg_type_t type,
            const void *payload, size_t length, int timeout_ms, int *ret_p)
{
    const route_t *rt = &from->routes[i];

    if ((rt->target != NULL) || (rt->rank < 0) || ((unsigned)type > RINGK_MSG_TERMINATE) ||
        (length > from->max_out)) {
        return 0;
    }
    __atomic_store_n(&from->last_rt, &from->routes[i], __ATOMIC_RELAXED);
    from->iter_sends++;
    if (from->open_batches != 0) {
        batch_flush_all(from); /* a remote send may wait for a credit */
    }
    *ret_p = ringk_remote_send(ctx, from, rt->rank, rt->remote_id, type, payload, length,
                               timeout_ms);
    return 1;
}

/* ringk_send() whose batched fast path did not take the message, though the sender's own
 * handler sends on the route it used last (from->last_rt, which names @a to_name): the
 * remote fast path, or send_slow(). */
static __attribute__((noinline)) int send_last_route(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                     const char *to_name, ringk_msg_type_t type,
                                                     const void *payload, size_t length,
                                                     int timeout_ms)
{
    unsigned i = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED)->index;
    int ret;

    if (from->defer_head != NULL) {
        return send_slow(ctx, from, to_name, type, payload, length, timeout_ms);
    }
    if ((from->routes[i].target != NULL) && (from->iter_sends != 0) &&
        ((unsigned)type < RINGK_MSG_TERMINATE) && (length < from->routes[i].batch_lim) &&
        (ringk_tls_inline == NULL)) {
        /* its batch cell is full (or the receiver terminating): what send_route() would do */
        from->iter_sends++;
        return batch_send(ctx, from, i, type, payload, length, timeout_ms);
    }
    if (remote_fast(ctx, from, i, type, payload, length, timeout_ms, &ret)) {
        return (ret != RINGK_WOULD_WAIT) ? ret :
               defer_call(ctx, DEFER_SEND, from, -1, to_name, type, payload, length, timeout_ms);
    }
    return send_slow(ctx, from, to_name, type, payload, length, timeout_ms);
}

int ringk_send_last_full(ringk_kernel_t *from, ringk_msg_type_t type, const void *payload,
                         size_t length, int timeout_ms)
{
    unsigned i = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED)->index;

    return send_last_route(from->ctx, from, from->publishes_to.names[i], type, payload, length,
                           timeout_ms);
}

/* The fast paths (batch_fast(), or ringk_remote_send_last() when the route the kernel used
 * last leads to another process) or send_slow(), which checks everything again. The batched
 * path makes no call (the others are tail calls), so it runs without saving registers: the
 * local one-way throughput is bound by it. */
int ringk_send(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name,
               ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms)
{
    route_t *rt;

    if ((from != NULL) && (tls_running == from) && (ctx != NULL) && (to_name != NULL) &&
        ((payload != NULL) || (length == 0)) && (timeout_ms >= RINGK_WAIT_FOREVER)) {
        /* a route past publishes_to.count is named "" and never opens a cell: the checks of
         * send_last_route() and send_slow() refuse it */
        rt = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED);
        if (route_name_eq(rt, from->publishes_to.names[rt->index], to_name)) {
            /* no cell is open while calls of the handler wait to be made (defer_call) */
            if (batch_fast(from, rt, type, payload, length)) {
                return 0;
            }
            if (rt->remote_ep != NULL) {
                return ringk_remote_send_last(from, type, payload, length, timeout_ms);
            }
            return send_last_route(ctx, from, to_name, type, payload, length, timeout_ms);
        }
    }
    return send_slow(ctx, from, to_name, type, payload, length, timeout_ms);
}

int ringk_route_find(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name)
{
    if ((ctx == NULL) || (from == NULL) || (to_name == NULL)) {
        return -EINVAL;
    }
    return route_index(ctx, from, to_name);
}

/* ringk_send_route() but for its fast path. */
static __attribute__((noinline)) int send_route_slow(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                     int route, ringk_msg_type_t type,
                                                     const void *payload, size_t length,
                                                     int timeout_ms)
{
    int ret;

    if (!send_args_ok(ctx, payload, length, type, timeout_ms) || (from == NULL)) {
        return -EINVAL;
    }
    if ((route < 0) || ((unsigned)route >= from->publishes_to.count)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': route %d does not exist (it has %u)",
                      from->name, route, from->publishes_to.count);
        return -EINVAL;
    }
    if ((ringk_tls_inline != NULL) && (ringk_tls_inline->defer_head != NULL)) {
        return defer_behind(ctx, DEFER_SEND_ROUTE, from, route, NULL, type, payload, length,
                            timeout_ms);
    }
    ret = send_route(ctx, from, (unsigned)route, type, payload, length, timeout_ms);
    return (ret != RINGK_WOULD_WAIT) ? ret :
           defer_call(ctx, DEFER_SEND_ROUTE, from, route, NULL, type, payload, length, timeout_ms);
}

/* ringk_send_route() from the sender's own handler whose batched path did not take the
 * message: the remote fast path, or send_route_slow(). */
static __attribute__((noinline)) int send_route_other(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                      int route, ringk_msg_type_t type,
                                                      const void *payload, size_t length,
                                                      int timeout_ms)
{
    int ret;

    if ((from->defer_head == NULL) &&
        remote_fast(ctx, from, (unsigned)route, type, payload, length, timeout_ms, &ret)) {
        return (ret != RINGK_WOULD_WAIT) ? ret :
               defer_call(ctx, DEFER_SEND_ROUTE, from, route, NULL, type, payload, length,
                          timeout_ms);
    }
    return send_route_slow(ctx, from, route, type, payload, length, timeout_ms);
}

/* As ringk_send(): the batched path makes no call, the others are tail calls. */
int ringk_send_route(ringk_ctx_t *ctx, ringk_kernel_t *from, int route, ringk_msg_type_t type,
                     const void *payload, size_t length, int timeout_ms)
{
    if ((from != NULL) && (tls_running == from) && (ctx != NULL) &&
        ((unsigned)route < from->publishes_to.count) && ((payload != NULL) || (length == 0)) &&
        (timeout_ms >= RINGK_WAIT_FOREVER)) {
        /* no cell is open while calls of the handler wait to be made (defer_call) */
        if (batch_fast(from, &from->routes[route], type, payload, length)) {
            return 0;
        }
        if (from->routes[route].remote_ep != NULL) {
            __atomic_store_n(&from->last_rt, &from->routes[route], __ATOMIC_RELAXED);
            return ringk_remote_send_last(from, type, payload, length, timeout_ms);
        }
        return send_route_other(ctx, from, route, type, payload, length, timeout_ms);
    }
    return send_route_slow(ctx, from, route, type, payload, length, timeout_ms);
}

int ringk_publish(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *topic, const void *payload,
                  size_t length, int timeout_ms, unsigned *delivered_p)
{
    ringk_kernel_t *subs[RINGK_MAX_KERNELS];
    unsigned nsubs, i, done = 0;
    int ret = 0;

    if ((ctx == NULL) || (topic == NULL) || ((payload == NULL) && (length > 0))) {
        return -EINVAL;
    }
    if ((from != NULL) && !ringk_list_has(&from->topics_pub, topic)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' does not publish to topic '%s' (topics_pub)",
               from->name, topic);
        return -EPERM;
    }
    if ((from != NULL) && (length > from->max_out)) {
        return -EMSGSIZE;
    }
    if (ringk_tls_inline != NULL) {
        /* a publish may wait (room, credits, its active messages): after the callback */
        if (delivered_p != NULL) {
            *delivered_p = 0;
        }
        return defer_call(ctx, DEFER_PUBLISH, from, -1, topic, RINGK_MSG_DATA, payload, length,
                          timeout_ms);
    }
    flush_running();
    nsubs = ringk_topic_subscribers(ctx, topic, subs);
    for (i = 0; i < nsubs; i++) {
        if (length > subs[i]->max_in) {
            ret = -EMSGSIZE;
            break;
        }
    }
    for (i = 0; (ret == 0) && (i < nsubs); i++) {
        ret = deliver(ctx, from, subs[i], RINGK_MSG_DATA, RINGK_MSG_BROADCAST, payload, length,
                      timeout_ms, NULL, NULL);
        done += (ret == 0);
    }
    if ((ret == 0) && (ringk_remote_of(ctx) != NULL)) {
        unsigned reached = 0;

        ret   = ringk_remote_publish(ctx, from, topic, payload, length, timeout_ms, &reached);
        done += reached;
    }
    if (delivered_p != NULL) {
        *delivered_p = done;
    }
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "publish to topic '%s' reached %u subscribers (of them "
               "%u in this process, which has %u) before: %s", topic, done,
               (done < nsubs) ? done : nsubs, nsubs, strerror(-ret));
        return ret;
    }
    return (int)done;
}

/* ---- context -------------------------------------------------------------------------------- */

/* A number of milliseconds in @a min..@a max from environment variable @a name, @a def when it
 * is unset: 0, or -EINVAL (logged with the value and the limits). */
void ringk_wait_warn(ringk_ctx_t *ctx, uint64_t since_ns, uint64_t now_ns, uint64_t *next_ns,
                     const char *what)
{
    const ringk_kernel_t *self = tls_running;
    const uint64_t every       = (uint64_t)ctx->wait_warn_ms * 1000000u;

    if (every == 0) {
        return;
    }
    if (*next_ns == 0) {
        *next_ns = since_ns + every;
    }
    if (now_ns < *next_ns) {
        return;
    }
    *next_ns = now_ns + every;
    ringk_log_msg(ctx, RINGK_LOG_WARN, "%s%s%s has waited %.1f s for room in %s, which takes "
                  "nothing in (inactive, busy, or itself waiting for room somewhere on a "
                  "cycle?)", self ? "kernel '" : "a thread outside the kernels",
                  self ? self->name : "", self ? "'" : "", (double)(now_ns - since_ns) / 1e9,
                  what);
}

void ringk_kernel_free(ringk_kernel_t *k)
{
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    free(k->inbox_mem);
    free(k);
}

/* ---- kernels -------------------------------------------------------------------------------- */

static int check_pow2(ringk_ctx_t *ctx, const char *kernel, const char *what, unsigned v)
{
    if ((v < 2) || (v > 65536) || (v & (v - 1))) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s %u is not a power of 2 between 2 and 65536",
               kernel, what, v);
        return -EINVAL;
    }
    return 0;
}

static int check_size(ringk_ctx_t *ctx, const char *kernel, const char *what, unsigned v)
{
    if ((v < 1) || (v > RINGK_MAX_PAYLOAD)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s %u is out of range 1..%u", kernel, what, v,
               RINGK_MAX_PAYLOAD);
        return -EINVAL;
    }
    return 0;
}

/* Validates the parameters into @a k; every refusal names the value and the limit. */
static int kernel_params(ringk_ctx_t *ctx, const ringk_kernel_params_t *p, ringk_kernel_t *k)
{
    const uint64_t f = p->field_mask;
    const char *name;
    int ret;

    if (!(f & RINGK_KERNEL_PARAM_FIELD_NAME) || (p->name == NULL) || (*p->name == '\0')) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "a kernel needs a name (RINGK_KERNEL_PARAM_FIELD_NAME)");
        return -EINVAL;
    }
    if (strlen(p->name) >= RINGK_NAME_MAX) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel name '%.20s...' is longer than %d characters",
               p->name, RINGK_NAME_MAX - 1);
        return -EINVAL;
    }
    strcpy(k->name, p->name);
    name = k->name;
    if (!(f & RINGK_KERNEL_PARAM_FIELD_HANDLER) || (p->handler == NULL)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' needs a handler", name);
        return -EINVAL;
    }
    k->handler           = p->handler;
    k->arg               = p->arg;
    k->capacity          = (f & RINGK_KERNEL_PARAM_FIELD_CAPACITY) ? p->capacity : 1024;
    k->inbox_size        = (f & RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE) ? p->inbox_size : 256;
    k->outbox_size       = (f & RINGK_KERNEL_PARAM_FIELD_OUTBOX_SIZE) ? p->outbox_size : 256;
    k->max_in            = (f & RINGK_KERNEL_PARAM_FIELD_MAX_IN) ? p->max_in
                                                                 : RINGK_MSG_MAX_DEFAULT;
    k->max_out           = (f & RINGK_KERNEL_PARAM_FIELD_MAX_OUT) ? p->max_out
                                                                  : RINGK_MSG_MAX_DEFAULT;
    k->mode              = (f & RINGK_KERNEL_PARAM_FIELD_MODE) ? p->mode : RINGK_MODE_PERSISTENT;
    k->max_iterations    = (f & RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS) ? p->max_iterations
                                                                         : 1000;
    k->processing        = (f & RINGK_KERNEL_PARAM_FIELD_PROCESSING) ? p->processing
                                                                     : RINGK_PROCESSING_CONTINUOUS;
    k->max_per_iteration = (f & RINGK_KERNEL_PARAM_FIELD_MAX_PER_ITER) ? p->max_per_iteration : 0;
    k->timestamps        = (f & RINGK_KERNEL_PARAM_FIELD_TIMESTAMPS) ? !!p->timestamps : 0;
    k->peer_events       = (f & RINGK_KERNEL_PARAM_FIELD_PEER_EVENTS) ? !!p->peer_events : 0;
    if ((k->capacity < 1) || (k->capacity > (1u << 20))) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': capacity %u is out of range 1..%u", name,
               k->capacity, 1u << 20);
        return -EINVAL;
    }
    if (((ret = check_pow2(ctx, name, "inbox_size", k->inbox_size)) != 0) ||
        ((ret = check_pow2(ctx, name, "outbox_size", k->outbox_size)) != 0) ||
        ((ret = check_size(ctx, name, "max_in", k->max_in)) != 0) ||
        ((ret = check_size(ctx, name, "max_out", k->max_out)) != 0)) {
        return ret;
    }
    if ((unsigned)k->mode > RINGK_MODE_EVENT_DRIVEN) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': mode %d is not persistent (0) or "
               "event-driven (1)", name, (int)k->mode);
        return -EINVAL;
    }
    if ((unsigned)k->processing > RINGK_PROCESSING_ADAPTIVE) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': processing %d is not continuous (0), batch (1)"
               " or adaptive (2)", name, (int)k->processing);
        return -EINVAL;
    }
    if ((k->max_iterations < 1) || (k->max_iterations > 100000000)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': max_iterations %u is out of range 1..100000000",
               name, k->max_iterations);
        return -EINVAL;
    }
    if ((f & RINGK_KERNEL_PARAM_FIELD_DOMAIN) && ((unsigned)p->domain > RINGK_DOMAIN_ACTOR)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': domain %d is not one of 0..3", name,
               (int)p->domain);
        return -EINVAL;
    }
    if (f & RINGK_KERNEL_PARAM_FIELD_BACKENDS) {
        if (p->backends & ~(unsigned)(RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA)) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': backends 0x%x has unknown bits", name,
                   p->backends);
            return -EINVAL;
        }
        if (!(p->backends & RINGK_BACKEND_CPU)) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': backends 0x%x: only the CPU backend is "
                   "available in this release", name, p->backends);
            return -ENOTSUP;
        }
    }
    if (((f & RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO) &&
         (ret = copy_list(ctx, name, "publishes_to", p->publishes_to, &k->publishes_to))) ||
        ((f & RINGK_KERNEL_PARAM_FIELD_SUBSCRIBES_TO) &&
         (ret = copy_list(ctx, name, "subscribes_to", p->subscribes_to, &k->subscribes_to))) ||
        ((f & RINGK_KERNEL_PARAM_FIELD_TOPICS_PUB) &&
         (ret = copy_list(ctx, name, "topics_pub", p->topics_pub, &k->topics_pub))) ||
        ((f & RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB) &&
         (ret = copy_list(ctx, name, "topics_sub", p->topics_sub, &k->topics_sub))) ||
        ((f & RINGK_KERNEL_PARAM_FIELD_BARRIERS) &&
         (ret = copy_list(ctx, name, "barriers", p->barriers, &k->barriers)))) {
        return ret;
    }
    return 0;
}

/* Adds @a k to its topics and barriers; under ctx->lock. */
static int kernel_register(ringk_ctx_t *ctx, ringk_kernel_t *k)
{
    int ret = ringk_topic_join(ctx, k);

    return (ret != 0) ? ret : ringk_barrier_join(ctx, k);
}

int ringk_kernel_create(ringk_ctx_t *ctx, const ringk_kernel_params_t *params,
                        ringk_kernel_t **kernel_p)
{
    uint32_t ncells, big;
    uint64_t bytes;
    ringk_kernel_t *k;
    unsigned i;
    int ret;

    if ((ctx == NULL) || (params == NULL) || (kernel_p == NULL)) {
        return -EINVAL;
    }
    if (posix_memalign((void**)&k, 64, sizeof(*k)) != 0) {
        return -ENOMEM;
    }
    memset(k, 0, sizeof(*k));
    k->ctx = ctx;
    ret    = kernel_params(ctx, params, k);
    if (ret != 0) {
        free(k);
        return ret;
    }
    /* The inbox holds inbox_size messages of up to 224 payload bytes (one cell each) and at
     * least two of the largest. */
    big    = RINGK_MSG_CELLS(k->max_in);
    ncells = k->inbox_size;
    while (ncells < 2 * big) {
        ncells *= 2;
    }
    bytes = ringk_ring_bytes(ncells, RINGK_CELL);
    if ((posix_memalign(&k->inbox_mem, 4096, bytes) != 0) ||
        (ringk_ring_init(&k->inbox, k->inbox_mem, bytes, ncells, RINGK_CELL) != 0)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': cannot allocate an inbox of %llu bytes",
               k->name, (unsigned long long)bytes);
        free(k->inbox_mem);
        free(k);
        return -ENOMEM;
    }
    for (i = 0; i < RINGK_LIST_MAX; i++) {
        k->routes[i].rank     = -1;
        route_name_init(&k->routes[i], k->publishes_to.names[i]);
        k->routes[i].index = i;
        k->routes[i].bit   = 1u << i;
    }
    k->last_rt = &k->routes[0];
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    k->state = (params->field_mask & RINGK_KERNEL_PARAM_FIELD_START_INACTIVE) ?
               RINGK_KERNEL_INACTIVE : RINGK_KERNEL_ACTIVE;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->nkernels; i++) {
        if ((ctx->kernels[i] != NULL) && !strcmp(ctx->kernels[i]->name, k->name)) {
            pthread_mutex_unlock(&ctx->lock);
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "a kernel named '%s' exists already", k->name);
            ringk_kernel_free(k);
            return -EEXIST;
        }
    }
    if (ctx->nkernels == RINGK_MAX_KERNELS) {
        pthread_mutex_unlock(&ctx->lock);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "more than %d kernels in one context", RINGK_MAX_KERNELS);
        ringk_kernel_free(k);
        return -ENOSPC;
    }
    ret = kernel_register(ctx, k);
    if (ret != 0) {
        pthread_mutex_unlock(&ctx->lock);
        ringk_kernel_free(k);
        return ret;
    }
    k->id                     = ctx->nkernels + 1;
    ctx->kernels[ctx->nkernels] = k;
    __atomic_store_n(&ctx->nkernels, ctx->nkernels + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->lock);

    if (k->mode == RINGK_MODE_PERSISTENT) {
        /* its handler may run in a receive callback (ringk_deliver_direct), unless it could
         * need a wait there that cannot be deferred (a barrier) or it publishes */
        k->recv_inline = ctx->recv_inline && (k->barriers.count == 0) &&
                         (k->topics_pub.count == 0);
        /* processes of one job on one host start at different cores */
        k->core = __atomic_fetch_add(&ctx->next_core, 1, __ATOMIC_RELAXED) + ctx->job.rank;
        if (pthread_create(&k->thread, NULL, persistent_main, k) != 0) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': cannot start its thread", k->name);
            __atomic_store_n(&k->state, RINGK_KERNEL_TERMINATED, __ATOMIC_RELEASE);
            return -EAGAIN;
        }
        k->has_thread = 1;
    }
    ringk_log_msg(ctx, RINGK_LOG_DEBUG, "kernel '%s' (id %u) launched: %s, inbox %u cells of %u bytes",
           k->name, k->id, (k->mode == RINGK_MODE_PERSISTENT) ? "persistent" : "event-driven",
           ncells, RINGK_CELL);
    *kernel_p = k;
    return 0;
}

static int set_state(ringk_kernel_t *k, int from, int to)
{
    int expect = from;

    if (!__atomic_compare_exchange_n(&k->state, &expect, to, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_RELAXED)) {
        return (expect == to) ? 0 : -EINVAL;
    }
    pthread_mutex_lock(&k->mu);
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    wake(k);
    return 0;
}

int ringk_kernel_activate(ringk_kernel_t *k)
{
    return (k == NULL) ? -EINVAL : set_state(k, RINGK_KERNEL_INACTIVE, RINGK_KERNEL_ACTIVE);
}

int ringk_kernel_deactivate(ringk_kernel_t *k)
{
    return (k == NULL) ? -EINVAL : set_state(k, RINGK_KERNEL_ACTIVE, RINGK_KERNEL_INACTIVE);
}

int ringk_kernel_terminate(ringk_kernel_t *k)
{
    int state;

    if (k == NULL) {
        return -EINVAL;
    }
    if (ringk_tls_inline != NULL) {
        /* it waits for @a k, which may wait for the worker's lock: after the callback */
        return defer_call(k->ctx, DEFER_TERMINATE, k, -1, NULL, RINGK_MSG_DATA, NULL, 0, 0);
    }
    ringk_wait_prepare(); /* it waits for @a k to drain */
    state = load_i(&k->state);
    if ((state == RINGK_KERNEL_ACTIVE) || (state == RINGK_KERNEL_INACTIVE)) {
        /* an inactive kernel is resumed to drain */
        __atomic_compare_exchange_n(&k->state, &state, RINGK_KERNEL_TERMINATING, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
        pthread_mutex_lock(&k->mu);
        pthread_cond_broadcast(&k->cv);
        pthread_mutex_unlock(&k->mu);
        wake(k);
    }
    pthread_mutex_lock(&k->mu);
    while (load_i(&k->state) != RINGK_KERNEL_TERMINATED) {
        struct timespec ts;
        ringk_timespec_in_ms(&ts, 10);
        pthread_cond_timedwait(&k->cv, &k->mu, &ts);
    }
    pthread_mutex_unlock(&k->mu);
    if (k->has_thread) {
        pthread_join(k->thread, NULL);
        k->has_thread = 0;
    }
    return 0;
}

int ringk_kernel_destroy(ringk_kernel_t *k)
{
    ringk_ctx_t *ctx;

    if (k == NULL) {
        return -EINVAL;
    }
    ctx = k->ctx;
    ringk_kernel_terminate(k);
    /* The memory stays until the context goes: other kernels may hold routes to it, and a
     * send to it keeps failing with -EPIPE instead of touching freed memory. */
    (void)ctx;
    return 0;
}

uint32_t ringk_kernel_id(const ringk_kernel_t *k)
{
    return k->id;
}

ringk_ctx_t *ringk_kernel_ctx(const ringk_kernel_t *k)
{
    return k->ctx;
}

const char *ringk_kernel_name(const ringk_kernel_t *k)
{
    return k->name;
}

int ringk_kernel_stats_query(ringk_kernel_t *k, ringk_kernel_stats_t *s)
{
    unsigned i;

    if ((k == NULL) || (s == NULL)) {
        return -EINVAL;
    }
    memset(s, 0, sizeof(*s));
    s->state          = (ringk_kernel_state_t)load_i(&k->state);
    s->msgs_in        = __atomic_load_n(&k->msgs_in, __ATOMIC_RELAXED);
    s->msgs_out       = __atomic_load_n(&k->msgs_out, __ATOMIC_RELAXED);
    s->refused_full   = __atomic_load_n(&k->refused_full, __ATOMIC_RELAXED);
    s->handler_errors = __atomic_load_n(&k->handler_errors, __ATOMIC_RELAXED);
    s->batched_in     = __atomic_load_n(&k->batched_in, __ATOMIC_RELAXED);
    s->inline_in      = __atomic_load_n(&k->inline_in, __ATOMIC_RELAXED);
    s->direct_in      = __atomic_load_n(&k->direct_in, __ATOMIC_RELAXED) + s->inline_in;
    s->deferred       = __atomic_load_n(&k->deferred, __ATOMIC_RELAXED);
    s->deferred_failed = __atomic_load_n(&k->deferred_failed, __ATOMIC_RELAXED);
    s->drops          = 0;
    s->queue_depth    = __atomic_load_n(&k->inbox.prod->pos, __ATOMIC_RELAXED) -
                        __atomic_load_n(&k->head, __ATOMIC_RELAXED);
    for (i = 0; i < 32; i++) {
        s->latency_hist[i] = __atomic_load_n(&k->latency_hist[i], __ATOMIC_RELAXED);
    }
    return 0;
}
