/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API: what a ring kernel of the CUDA backend runs on the GPU. A user writes the
 * handler as a device function in a .cu file, includes this header, and defines the kernel's
 * entry with RINGK_DEVICE_ENTRY(); the same file compiled as C for the host (no __CUDACC__)
 * runs on the emulated device: host threads stand in for GPU blocks and plain memory for
 * device memory, with the same loop, ring operations and atomics.
 *
 * Header-only: nothing here needs relocatable device code. The loop, the device-side ring
 * operations and the calls below are all inline in the user's translation unit. */
#ifndef RINGK_API_RINGK_DEVICE_H
#define RINGK_API_RINGK_DEVICE_H

#include <ringk/api/ringk_device_abi.h>
#include <ringk/api/ringk_device_sync.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Adds @a n to counter @a f of the launch's own copies. The loop stores them to the control
 * block (ringk_dev_own_store) in its upkeep (every RINGK_DEV_CHORE_NS while busy, and once it
 * found nothing to take for that long), in a wait that lasts that long, and before the launch
 * returns: a message costs no write across the bus for its counters. */
#define RINGK_DEV_COUNT(k, f, n) \
    ((k)->own.f += (n), (k)->own_changed = 1u)

/* Stores the launch's counters and clock to the control block if any changed since the last
 * store (the loop is their only writer, so nothing is read back). Relaxed stores: the host
 * reads them as statistics and orders nothing by them, and the next launch, which reads them
 * back, is ordered after this one by its stream; a release store would put a system-wide fence
 * (a wait for every earlier write to cross the bus) in front of each. */
RINGK_DEV_FN void ringk_dev_own_store(ringk_dev_kernel_t *k)
{
    ringk_dev_ctl_t *c = k->ctl;
    const ringk_dev_own_t *o = &k->own;

    if (!k->own_changed) {
        return;
    }
    k->own_changed = 0;
    ringk_dev_store_rlx_sys_u64(&c->handler_errors, o->handler_errors);
    ringk_dev_store_rlx_sys_u64(&c->bad_cells, o->bad_cells);
    ringk_dev_store_rlx_sys_u64(&c->iterations, o->iterations);
    ringk_dev_store_rlx_sys_u64(&c->msgs_direct, o->msgs_direct);
    ringk_dev_store_rlx_sys_u64(&c->seq, o->seq);
    ringk_dev_store_rlx_sys_u64(&c->hlc, o->hlc);
    ringk_dev_store_rlx_sys_u64(&c->barrier_req, o->barrier_req);
    ringk_dev_store_rlx_sys_u64(&c->msgs_out, o->msgs_out);
    ringk_dev_store_rlx_sys_u64(&c->msgs_in, o->msgs_in);
}

/* ---- the device API ------------------------------------------------------------------------ */

/** The kernel's id (as ringk_kernel_id on the host). */
RINGK_DEV_FN uint32_t ringk_dev_id(const ringk_dev_kernel_t *k)
{
    return k->own.id;
}

/** The payload of a message. */
RINGK_DEV_FN const void *ringk_dev_msg_payload(const ringk_msg_t *msg)
{
    return (const void*)(msg + 1);
}

/* ringk_dev_hlc_tick() with the kernel's lock held, or in one thread. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_tick_in(ringk_dev_kernel_t *k)
{
    uint64_t now  = ((ringk_dev_now_ns() + k->clock_off) / 1000000u) << 16;
    uint64_t last = k->own.hlc;
    uint64_t t    = (now > last) ? now : last + 1;

    k->own.hlc     = t; /* stored to the control block with the counters */
    k->own_changed = 1u;
    return t;
}

/* ringk_dev_hlc_recv() with the kernel's lock held, or in one thread. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_merge(ringk_dev_kernel_t *k, uint64_t remote)
{
    uint64_t t = ringk_dev_hlc_tick_in(k);

    if (remote >= t) {
        t = k->own.hlc = remote + 1;
    }
    return t;
}

/** Per thread: the kernel's hybrid logical clock now (a local event), in ringk_hlc_t's format:
 *  milliseconds since the epoch above 16 bits of logical counter. The kernel has one clock;
 *  its threads take turns at it. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_tick(ringk_dev_kernel_t *k)
{
    uint64_t t;

    ringk_dev_turn_take(k);
    t = ringk_dev_hlc_tick_in(k);
    ringk_dev_turn_give(k);
    return t;
}

/** Per thread: a receive of a message stamped @a remote. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_recv(ringk_dev_kernel_t *k, uint64_t remote)
{
    uint64_t t;

    ringk_dev_turn_take(k);
    t = ringk_dev_hlc_merge(k, remote);
    ringk_dev_turn_give(k);
    return t;
}

/** Per thread: the clock's last value, without an event. */
RINGK_DEV_FN uint64_t ringk_dev_hlc_now(ringk_dev_kernel_t *k)
{
    uint64_t t;

    ringk_dev_turn_take(k);
    t = k->own.hlc;
    ringk_dev_turn_give(k);
    return t;
}

/* Nanoseconds from @a t0 to @a now, 0 when the clock stepped back past @a t0. */
RINGK_DEV_FN uint64_t ringk_dev_elapsed_ns(uint64_t t0, uint64_t now)
{
    return (now > t0) ? now - t0 : 0;
}

/* Whether a wait begun at @a t0 with @a timeout_ms is over (RINGK_WAIT_FOREVER: never). */
RINGK_DEV_FN int ringk_dev_wait_over(uint64_t t0, int timeout_ms)
{
    return (timeout_ms != RINGK_WAIT_FOREVER) &&
           (ringk_dev_elapsed_ns(t0, ringk_dev_now_ns()) >= (uint64_t)timeout_ms * 1000000u);
}

/* One step of a wait of kernel @a k for room or a message that @a timeout_ms bounds: -EAGAIN
 * at once for RINGK_WAIT_NONE, -ETIMEDOUT once the bound passed, else 0 after a nap (doubling
 * from RINGK_DEV_NAP_MIN_NS to RINGK_DEV_NAP_MAX_NS). *@a t0_p (0 at first) and *@a nap_p (the
 * first nap) are the wait's state. A wait that lasts RINGK_DEV_CHORE_NS stores the kernel's
 * counters (the host sees them as they are while it waits); a short one (a burst that found
 * its target's inbox full for a moment) stores nothing across the bus. */
RINGK_DEV_FN int ringk_dev_wait_step(ringk_dev_kernel_t *k, int timeout_ms, uint64_t *t0_p,
                                     uint32_t *nap_p)
{
    uint64_t now;

    if (timeout_ms == RINGK_WAIT_NONE) {
        return -EAGAIN;
    }
    now = ringk_dev_now_ns();
    if (*t0_p == 0) {
        *t0_p = now;
    } else if (ringk_dev_wait_over(*t0_p, timeout_ms)) {
        return -ETIMEDOUT;
    } else if ((*nap_p >= RINGK_DEV_NAP_MAX_NS / 2) &&
               (ringk_dev_elapsed_ns(k->chore_at, now) >= RINGK_DEV_CHORE_NS)) {
        ringk_dev_own_store(k);
        k->chore_at = now;
    }
    ringk_dev_nap(*nap_p);
    *nap_p = (*nap_p < RINGK_DEV_NAP_MAX_NS / 2) ? 2 * *nap_p : RINGK_DEV_NAP_MAX_NS;
    return 0;
}

/* Fills the message header at @a m for a send of @a k. */
RINGK_DEV_FN void ringk_dev_msg_fill(ringk_dev_kernel_t *k, ringk_msg_t *m, uint32_t receiver,
                                     uint32_t type, uint32_t len)
{
    m->sender    = k->own.sender;
    m->receiver  = receiver;
    m->type      = (uint16_t)type;
    m->flags     = 0;
    m->length    = len;
    m->seq       = k->own.seq;
    m->timestamp = k->own.timestamps ? ringk_dev_hlc_tick_in(k) : 0;
    m->enq_ns    = 0;
    RINGK_DEV_COUNT(k, seq, 1);
}

/* Copies @a len bytes: on the device a loop of 8-byte words where both sides and the length
 * allow (payloads start 8-byte aligned in cells), else of bytes; memcpy on the host. For a
 * source in mapped memory, ringk_dev_fetch(). */
RINGK_DEV_FN void ringk_dev_copy(void *dst, const void *src, uint32_t len)
{
#if defined(__CUDA_ARCH__)
    uint8_t *d = (uint8_t*)dst;
    const uint8_t *s = (const uint8_t*)src;
    uint32_t i = 0;

    if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
        for (; i + 8 <= len; i += 8) {
            *(uint64_t*)(d + i) = *(const uint64_t*)(s + i);
        }
    }
    for (; i < len; i++) {
        d[i] = s[i];
    }
#else
    if (len > 0) { /* a message without payload may come with a NULL one */
        RINGK_DEV_TALLY(src, RINGK_TALLY_LOAD);
        RINGK_DEV_TALLY(dst, RINGK_TALLY_STORE);
        memcpy(dst, src, len);
    }
#endif
}

/* ringk_dev_copy() from mapped memory, where each load crosses the bus (about a microsecond
 * on PCIe) and a store waits for the load it stores: on the device in blocks of
 * RINGK_DEV_FETCH_WORDS 8-byte words whose loads all come before their stores, so that they
 * are in flight together (a cell of 256 bytes is one block). Not inlined: the block's
 * registers are its own. */
#define RINGK_DEV_FETCH_WORDS 32u
RINGK_DEV_CALL_FN void ringk_dev_fetch(void *dst, const void *src, uint32_t len)
{
#if defined(__CUDA_ARCH__)
    uint8_t *d = (uint8_t*)dst;
    const uint8_t *s = (const uint8_t*)src;
    uint64_t w[RINGK_DEV_FETCH_WORDS];
    uint32_t i = 0, j, n;

    if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
        while (i + 8 <= len) {
            n = (len - i) / 8;
            n = (n < RINGK_DEV_FETCH_WORDS) ? n : RINGK_DEV_FETCH_WORDS;
#pragma unroll
            for (j = 0; j < RINGK_DEV_FETCH_WORDS; j++) {
                if (j < n) {
                    w[j] = *(const uint64_t*)(s + i + 8 * j);
                }
            }
#pragma unroll
            for (j = 0; j < RINGK_DEV_FETCH_WORDS; j++) {
                if (j < n) {
                    *(uint64_t*)(d + i + 8 * j) = w[j];
                }
            }
            i += 8 * n;
        }
    }
    for (; i < len; i++) {
        d[i] = s[i];
    }
#else
    ringk_dev_copy(dst, src, len);
#endif
}

/* Copies part @a part of @a parts of @a len bytes (a collective copy: each thread of a block
 * one part): 8-byte words where both sides allow, word i by part i mod @a parts, the bytes
 * after the last whole word by part 0. */
RINGK_DEV_FN void ringk_dev_copy_part(void *dst, const void *src, uint32_t len, uint32_t part,
                                      uint32_t parts)
{
    uint8_t *d = (uint8_t*)dst;
    const uint8_t *s = (const uint8_t*)src;
    uint32_t i, words = 0;

    if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
        words = len / 8;
        for (i = part; i < words; i += parts) {
            ((uint64_t*)d)[i] = ((const uint64_t*)s)[i];
        }
    }
    if (part == 0) {
        for (i = 8 * words; i < len; i++) {
            d[i] = s[i];
        }
    }
}

/* Runs @a call in the loop's thread for a collective call of the whole kernel (tag @a tag):
 * the kernel's threads meet, the loop's thread makes the call while the others wait, and every
 * thread returns its result. */
#define RINGK_DEV_KERNEL_CALL(k, tag, call) \
    do { \
        int r_; \
        if ((r_ = ringk_dev_sync_tag((k), RINGK_DEV_SYNC_KERNEL, (tag))) != 0) { \
            return r_; \
        } \
        if (ringk_dev_leader()) { \
            (k)->coll_ret = (call); \
        } \
        ringk_dev_sync_tag((k), RINGK_DEV_SYNC_KERNEL, (tag)); \
        return (k)->coll_ret; \
    } while (0)

#ifdef __cplusplus
}
#endif

#include <ringk/api/ringk_device_send.h>
#include <ringk/api/ringk_device_poll.h>
#include <ringk/api/ringk_device_recv.h>
#include <ringk/api/ringk_device_loop.h>
#include <ringk/api/ringk_device_cuda.h>

#endif
