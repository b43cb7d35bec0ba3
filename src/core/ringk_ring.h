/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk ring protocol: the one definition of a ring's memory layout and of how producers publish
 * and the consumer takes cells. Header-only; compiles as C11 on the host and as CUDA C++ on the
 * device, so the transport, the CPU executor and GPU kernels run the same code. */
#ifndef RINGK_CORE_RING_H
#define RINGK_CORE_RING_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * A ring lives in memory that several processes (or a GPU) may map at different addresses, so
 * it holds offsets and sizes only, never pointers, and no locks: a producer may die at any
 * instruction without blocking the consumer or other producers' rings.
 *
 *   offset 0    +----------------------------------------------+
 *               | ringk_ring_shm_t: magic, version, log2 of    |  line 0: written once by the
 *               | the cell count, cell size, total bytes       |  creator, checked on attach
 *        64     +----------------------------------------------+
 *               | ringk_ring_line_t prod: tail (next position  |  line 1: producers only
 *               | to claim)                                    |
 *        128    +----------------------------------------------+
 *               | ringk_ring_line_t cons: head (next position  |  line 2: the consumer only
 *               | to consume), published after each release    |
 *        192    +----------------------------------------------+
 *               | cell 0 | cell 1 | ...        | cell N-1      |  N = 2^log2_ncells cells of
 *               +----------------------------------------------+  cell_size bytes each
 *
 *   message: | seq (8) | len (4) | ncells (2) | id (1) | flags (1) | payload ...              |
 *            the first cell's 16-byte header, then the payload, contiguous through the
 *            message's cells; a message never wraps around the ring's end (a skip cell pads).
 *
 * Positions are 64-bit and free-running; a message takes positions [p, p + ncells).
 * Producer: owns [p, p + ncells) once p + ncells - head <= N, where head is the consumer's
 *   index (read rarely: a producer keeps a cached copy and reloads it only when the ring looks
 *   full). It writes payload and header, then publishes with one release store seq = p + 1.
 * Consumer: at position c, the message is there when the cell at c alone says seq == c + 1
 *   (one cache line for a small message). It reads it in place and publishes
 *   head = c + ncells with a release store.
 * Stale words: in the next lap the consumer may read the first word of a cell that held
 *   payload (a continuation cell) before that cell is written again. That word must not equal
 *   the value that would mean "published" then (its position + N + 1). The producer, which has
 *   the payload in its cache, checks this before publishing and, in the rare case it holds,
 *   sets RINGK_CELL_FLAG_CLEAR so the consumer clears those words on release. Cells covered by
 *   a skip are cleared on release too (they are not rewritten in that lap).
 * No index is bumped before the data is there, and no index ever goes back.
 */

#define RINGK_RING_MAGIC        0x524b474eu /* "RKGN" */
#define RINGK_RING_VERSION      1u
#define RINGK_RING_LINE         64u         /* bytes; cache line */
#define RINGK_RING_HDR_BYTES    (3u * RINGK_RING_LINE)
#define RINGK_CELL_HDR_BYTES    16u         /* header of a message's first cell */
#define RINGK_CELL_FLAG_SKIP    0x80u       /* flags bit: padding to the ring's end */
#define RINGK_CELL_FLAG_CLEAR   0x40u       /* flags bit: clear continuation cells on release */
#define RINGK_CELL_FLAG_CANCEL  0x20u       /* flags bit: claimed cells given up, no message */
#define RINGK_CELL_FLAGS_USER   0x1fu       /* flags bits left to the user */
/* seq of a claimed cell not yet published, whose producer said who it is and how many cells it
 * took (ringk_ring_mark_claimed): never "published" in any lap (positions stay below 2^62) */
#define RINGK_CELL_SEQ_CLAIMED  (1ull << 62)
#define RINGK_RING_CELL_MIN     64u
#define RINGK_RING_CELL_MAX     4096u
#define RINGK_RING_LOG2_MAX     20u         /* at most 1M cells */
#define RINGK_RING_MSG_CELLS_MAX 0xffffu    /* ncells is 16 bits */

#include <core/ringk_ring_atomic.h>

/** Ring header in shared memory (line 0). Written once by the creator. */
typedef struct ringk_ring_shm {
    uint32_t magic;        /**< RINGK_RING_MAGIC */
    uint32_t version;      /**< RINGK_RING_VERSION */
    uint32_t log2_ncells;  /**< the ring has 2^log2_ncells cells */
    uint32_t cell_size;    /**< bytes per cell, a power of 2 */
    uint64_t ring_bytes;   /**< header + cells, bytes */
    uint8_t  pad[RINGK_RING_LINE - 24];
} ringk_ring_shm_t;

/** One cache line holding one index. */
typedef struct ringk_ring_line {
    uint64_t pos;
    uint8_t  pad[RINGK_RING_LINE - 8];
} ringk_ring_line_t;

/** Header of the first cell of a message. */
typedef struct ringk_cell_hdr {
    uint64_t seq;     /**< position + 1 once published; 0 after the consumer released it */
    uint32_t len;     /**< payload bytes of the whole message */
    uint16_t ncells;  /**< cells the message spans, >= 1 */
    uint8_t  id;      /**< user message type (UCT: the AM id) */
    uint8_t  flags;   /**< user flags (RINGK_CELL_FLAGS_USER) and RINGK_CELL_FLAG_* */
} ringk_cell_hdr_t;

#if !defined(__cplusplus)
_Static_assert(sizeof(ringk_ring_shm_t) == RINGK_RING_LINE, "ring header is one line");
_Static_assert(sizeof(ringk_ring_line_t) == RINGK_RING_LINE, "index lines are one line");
_Static_assert(sizeof(ringk_cell_hdr_t) == RINGK_CELL_HDR_BYTES, "cell header size");
#else
static_assert(sizeof(ringk_ring_shm_t) == RINGK_RING_LINE, "ring header is one line");
static_assert(sizeof(ringk_ring_line_t) == RINGK_RING_LINE, "index lines are one line");
static_assert(sizeof(ringk_cell_hdr_t) == RINGK_CELL_HDR_BYTES, "cell header size");
#endif

/** A process-local view of a ring: pointers and cached sizes, never in shared memory. */
typedef struct ringk_ring {
    ringk_ring_shm_t  *shm;
    ringk_ring_line_t *prod;
    ringk_ring_line_t *cons;
    uint8_t           *cells;
    uint64_t           mask;       /**< ncells - 1 */
    uint32_t           ncells;
    uint32_t           cell_size;
    uint32_t           log2_cell;
    uint32_t           scope;      /**< RINGK_RING_SCOPE_*: the scope of its atomics on a GPU */
} ringk_ring_t;

/* Which threads use a ring, for the scope of its atomics in device code (the host's C11 atomics
 * have no scope). A view starts at system scope; the owner of a ring that only kernels of one
 * GPU use (a device inbox) sets device scope after ringk_ring_view(). */
#define RINGK_RING_SCOPE_SYSTEM 0u  /**< the host or another GPU uses it too */
#define RINGK_RING_SCOPE_DEVICE 1u  /**< only threads of one GPU use it */

/* The ring operations' atomics at the ring's scope. On a GPU a system-scope release is a
 * fence.acq_rel.sys before the store, which waits until earlier writes are visible to the host
 * and other GPUs; between blocks of one GPU a device-scope release orders the same accesses for
 * every thread that can see the ring. The branch is on a word of the view that does not change,
 * the same for every message. */
#if defined(__CUDA_ARCH__)
#  define RINGK_RING_GPU_U64(p) \
       cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*(uint64_t*)(p))
RINGK_HD uint64_t ringk_ring_ld_acq(const ringk_ring_t *r, const uint64_t *p)
{
    return (r->scope == RINGK_RING_SCOPE_DEVICE) ?
           RINGK_RING_GPU_U64(p).load(cuda::memory_order_acquire) : ringk_load_acquire_u64(p);
}
RINGK_HD uint64_t ringk_ring_ld_rlx(const ringk_ring_t *r, const uint64_t *p)
{
    return (r->scope == RINGK_RING_SCOPE_DEVICE) ?
           RINGK_RING_GPU_U64(p).load(cuda::memory_order_relaxed) : ringk_load_relaxed_u64(p);
}
RINGK_HD void ringk_ring_st_rel(const ringk_ring_t *r, uint64_t *p, uint64_t v)
{
    if (r->scope == RINGK_RING_SCOPE_DEVICE) {
        RINGK_RING_GPU_U64(p).store(v, cuda::memory_order_release);
    } else {
        ringk_store_release_u64(p, v);
    }
}
RINGK_HD void ringk_ring_st_rlx(const ringk_ring_t *r, uint64_t *p, uint64_t v)
{
    if (r->scope == RINGK_RING_SCOPE_DEVICE) {
        RINGK_RING_GPU_U64(p).store(v, cuda::memory_order_relaxed);
    } else {
        ringk_store_relaxed_u64(p, v);
    }
}
/* a failed swap leaves the value it found in *expected */
RINGK_HD int ringk_ring_cas(const ringk_ring_t *r, uint64_t *p, uint64_t *expected,
                            uint64_t desired)
{
    if (r->scope == RINGK_RING_SCOPE_DEVICE) {
        return RINGK_RING_GPU_U64(p).compare_exchange_strong(
                   *expected, desired, cuda::memory_order_acq_rel, cuda::memory_order_relaxed);
    }
    return ringk_cas_u64(p, expected, desired);
}
/* a claim's compare-and-swap, which orders nothing: the producer read the head it claims
 * against with acquire (C2), and publishes its cells with the release of their header (P1) */
RINGK_HD int ringk_ring_cas_rlx(const ringk_ring_t *r, uint64_t *p, uint64_t *expected,
                                uint64_t desired)
{
    if (r->scope == RINGK_RING_SCOPE_DEVICE) {
        return RINGK_RING_GPU_U64(p).compare_exchange_strong(
                   *expected, desired, cuda::memory_order_relaxed, cuda::memory_order_relaxed);
    }
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).compare_exchange_strong(
               *expected, desired, cuda::memory_order_relaxed, cuda::memory_order_relaxed);
}
RINGK_HD uint64_t ringk_ring_fetch_or(const ringk_ring_t *r, uint64_t *p, uint64_t v)
{
    if (r->scope == RINGK_RING_SCOPE_DEVICE) {
        return RINGK_RING_GPU_U64(p).fetch_or(v, cuda::memory_order_acq_rel);
    }
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).fetch_or(
               v, cuda::memory_order_acq_rel);
}
#else
/* the scope a ring's atomics have on a GPU, for the tally */
#  define RINGK_RING_SCOPE_TALLY(r) \
       (((r)->scope == RINGK_RING_SCOPE_DEVICE) ? RINGK_TALLY_DEV : RINGK_TALLY_SYS)
RINGK_HD uint64_t ringk_ring_ld_acq(const ringk_ring_t *r, const uint64_t *p)
{
    (void)r;
    RINGK_RING_TALLY(p, RINGK_TALLY_LOAD | RINGK_TALLY_ORDERED | RINGK_RING_SCOPE_TALLY(r));
    return ringk_load_acquire_u64(p);
}
RINGK_HD uint64_t ringk_ring_ld_rlx(const ringk_ring_t *r, const uint64_t *p)
{
    (void)r;
    RINGK_RING_TALLY(p, RINGK_TALLY_LOAD | RINGK_RING_SCOPE_TALLY(r));
    return ringk_load_relaxed_u64(p);
}
RINGK_HD void ringk_ring_st_rel(const ringk_ring_t *r, uint64_t *p, uint64_t v)
{
    (void)r;
    RINGK_RING_TALLY(p, RINGK_TALLY_STORE | RINGK_TALLY_ORDERED | RINGK_RING_SCOPE_TALLY(r));
    ringk_store_release_u64(p, v);
}
RINGK_HD void ringk_ring_st_rlx(const ringk_ring_t *r, uint64_t *p, uint64_t v)
{
    (void)r;
    RINGK_RING_TALLY(p, RINGK_TALLY_STORE | RINGK_RING_SCOPE_TALLY(r));
    ringk_store_relaxed_u64(p, v);
}
RINGK_HD int ringk_ring_cas(const ringk_ring_t *r, uint64_t *p, uint64_t *expected,
                            uint64_t desired)
{
    (void)r;
    RINGK_RING_TALLY(p, RINGK_TALLY_RMW | RINGK_TALLY_ORDERED | RINGK_RING_SCOPE_TALLY(r));
    return ringk_cas_u64(p, expected, desired);
}
RINGK_HD int ringk_ring_cas_rlx(const ringk_ring_t *r, uint64_t *p, uint64_t *expected,
                                uint64_t desired)
{
    (void)r;
    RINGK_RING_TALLY(p, RINGK_TALLY_RMW | RINGK_RING_SCOPE_TALLY(r));
    return __atomic_compare_exchange_n(p, expected, desired, 0, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}
RINGK_HD uint64_t ringk_ring_fetch_or(const ringk_ring_t *r, uint64_t *p, uint64_t v)
{
    (void)r;
    RINGK_RING_TALLY(p, RINGK_TALLY_RMW | RINGK_TALLY_ORDERED | RINGK_RING_SCOPE_TALLY(r));
    return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);
}
#endif

/** Errors of ringk_ring_init() / ringk_ring_attach(); values are negative errno numbers. */
#define RINGK_RING_EINVAL  (-22)
#define RINGK_RING_EPROTO  (-71)

RINGK_HD uint32_t ringk_ring_log2(uint64_t v)
{
    uint32_t l = 0;
    while ((v >>= 1) != 0) {
        l++;
    }
    return l;
}

RINGK_HD int ringk_ring_is_pow2(uint64_t v)
{
    return (v != 0) && ((v & (v - 1)) == 0);
}

/** Bytes a ring of @a ncells cells of @a cell_size bytes takes, header included. */
RINGK_HD uint64_t ringk_ring_bytes(uint32_t ncells, uint32_t cell_size)
{
    return RINGK_RING_HDR_BYTES + (uint64_t)ncells * cell_size;
}

/** Payload bytes a message spanning @a ncells cells can carry. */
RINGK_HD uint64_t ringk_ring_capacity(uint32_t ncells, uint32_t cell_size)
{
    return (uint64_t)ncells * cell_size - RINGK_CELL_HDR_BYTES;
}

/** Cells a message of @a len payload bytes needs. */
RINGK_HD uint32_t ringk_ring_cells_for(uint64_t len, uint32_t cell_size)
{
    return (uint32_t)((len + RINGK_CELL_HDR_BYTES + cell_size - 1) / cell_size);
}

RINGK_HD void ringk_ring_view(ringk_ring_t *r, void *mem, uint32_t log2_ncells,
                              uint32_t cell_size)
{
    uint8_t *base = (uint8_t*)mem;

    r->shm       = (ringk_ring_shm_t*)base;
    r->prod      = (ringk_ring_line_t*)(base + RINGK_RING_LINE);
    r->cons      = (ringk_ring_line_t*)(base + 2 * RINGK_RING_LINE);
    r->cells     = base + RINGK_RING_HDR_BYTES;
    r->ncells    = 1u << log2_ncells;
    r->mask      = r->ncells - 1;
    r->cell_size = cell_size;
    r->log2_cell = ringk_ring_log2(cell_size);
    r->scope     = RINGK_RING_SCOPE_SYSTEM;
}

/**
 * Formats @a bytes of memory at @a mem as an empty ring. The memory must be 64-byte aligned and
 * not yet visible to any other party.
 * @return 0, or RINGK_RING_EINVAL when the sizes are not powers of 2 within limits or do not fit.
 */
RINGK_HD int ringk_ring_init(ringk_ring_t *r, void *mem, uint64_t bytes, uint32_t ncells,
                             uint32_t cell_size)
{
    if (!ringk_ring_is_pow2(ncells) || (ncells < 2) ||
        (ringk_ring_log2(ncells) > RINGK_RING_LOG2_MAX) || !ringk_ring_is_pow2(cell_size) ||
        (cell_size < RINGK_RING_CELL_MIN) || (cell_size > RINGK_RING_CELL_MAX) ||
        (((uintptr_t)mem & (RINGK_RING_LINE - 1)) != 0) ||
        (bytes < ringk_ring_bytes(ncells, cell_size))) {
        return RINGK_RING_EINVAL;
    }
    memset(mem, 0, ringk_ring_bytes(ncells, cell_size));
    ringk_ring_view(r, mem, ringk_ring_log2(ncells), cell_size);
    r->shm->log2_ncells = ringk_ring_log2(ncells);
    r->shm->cell_size   = cell_size;
    r->shm->ring_bytes  = ringk_ring_bytes(ncells, cell_size);
    r->shm->version     = RINGK_RING_VERSION;
    r->shm->magic       = RINGK_RING_MAGIC;
    return 0;
}

/**
 * Checks that @a bytes of memory at @a mem, written by someone else, hold a ring this code
 * understands, and builds a local view of it. Every size is checked against @a bytes, so a
 * corrupt header cannot make the view reach outside the mapping.
 * @return 0, RINGK_RING_EPROTO on a bad magic or version, RINGK_RING_EINVAL on bad sizes.
 */
RINGK_HD int ringk_ring_attach(ringk_ring_t *r, void *mem, uint64_t bytes)
{
    const ringk_ring_shm_t *shm = (const ringk_ring_shm_t*)mem;
    uint32_t log2_ncells, cell_size;

    if ((bytes < RINGK_RING_HDR_BYTES) || (((uintptr_t)mem & (RINGK_RING_LINE - 1)) != 0)) {
        return RINGK_RING_EINVAL;
    }
    if ((shm->magic != RINGK_RING_MAGIC) || (shm->version != RINGK_RING_VERSION)) {
        return RINGK_RING_EPROTO;
    }
    log2_ncells = shm->log2_ncells;
    cell_size   = shm->cell_size;
    if ((log2_ncells < 1) || (log2_ncells > RINGK_RING_LOG2_MAX) ||
        !ringk_ring_is_pow2(cell_size) || (cell_size < RINGK_RING_CELL_MIN) ||
        (cell_size > RINGK_RING_CELL_MAX) ||
        (shm->ring_bytes != ringk_ring_bytes(1u << log2_ncells, cell_size)) ||
        (shm->ring_bytes > bytes)) {
        return RINGK_RING_EINVAL;
    }
    ringk_ring_view(r, mem, log2_ncells, cell_size);
    return 0;
}

RINGK_HD ringk_cell_hdr_t *ringk_ring_cell(const ringk_ring_t *r, uint64_t pos)
{
    return (ringk_cell_hdr_t*)(r->cells + ((pos & r->mask) << r->log2_cell));
}

/* ---- producer side ------------------------------------------------------------------------ */

/** A producer's local state on a ring: its next position and its copy of the consumer's head. */
typedef struct ringk_ring_prod {
    uint64_t pos;
    uint64_t head;
} ringk_ring_prod_t;

/** Cells of padding a message of @a ncells cells needs at @a pos so that it does not wrap. */
RINGK_HD uint32_t ringk_ring_pad(const ringk_ring_t *r, uint64_t pos, uint32_t ncells)
{
    uint32_t idx = (uint32_t)(pos & r->mask);

    return (idx + ncells > r->ncells) ? r->ncells - idx : 0;
}

/* Publishes a cell that carries no message and covers @a ncells cells (skip or cancel). */
RINGK_HD void ringk_ring_publish_empty(const ringk_ring_t *r, uint64_t pos, uint32_t ncells,
                                       uint8_t flag)
{
    ringk_cell_hdr_t *cell = ringk_ring_cell(r, pos);

    RINGK_RING_TALLY(cell, RINGK_TALLY_STORE);
    cell->len    = 0;
    cell->ncells = (uint16_t)ncells;
    cell->id     = 0;
    cell->flags  = flag;
    /* P1: as in ringk_ring_publish(). */
    ringk_ring_st_rel(r, &cell->seq, pos + 1);
}

/** Writes and publishes a skip cell covering @a pad cells at @a pos. */
RINGK_HD void ringk_ring_publish_skip(const ringk_ring_t *r, uint64_t pos, uint32_t pad)
{
    ringk_ring_publish_empty(r, pos, pad, RINGK_CELL_FLAG_SKIP);
}

/**
 * Gives up the @a ncells cells claimed at @a pos (a copy into them failed, or the consumer went
 * away): publishes a cancel cell in place of a message, which ringk_ring_peek() passes over like
 * padding, so the messages claimed after it still arrive. The only way to give cells back:
 * a producer never rolls a position back, and a claim's cells must all be published once.
 */
RINGK_HD void ringk_ring_cancel(const ringk_ring_t *r, uint64_t pos, uint32_t ncells)
{
    ringk_ring_publish_empty(r, pos, ncells, RINGK_CELL_FLAG_CANCEL);
}

/**
 * Marks the @a ncells cells a multi-producer claim took at @a pos as claimed by @a owner (an id
 * of the caller's choosing), before the payload is written: len = @a owner, then (release)
 * seq = (pos + 1) | RINGK_CELL_SEQ_CLAIMED, which no consumer takes for a message. For rings
 * whose producers live in other processes: once the owner is known dead, the consumer gives
 * its cells up (ringk_ring_cancel(); a device kernel's loop: ringk_dev_give_up_dead()) instead
 * of waiting at them for ever. The owner unmarks before its publish (seq 0, a fence,
 * the header, seq), so a reader that finds the mark around its reads read the mark's fields.
 */
RINGK_HD void ringk_ring_mark_claimed(const ringk_ring_t *r, uint64_t pos, uint32_t ncells,
                                      uint32_t owner)
{
    ringk_cell_hdr_t *cell = ringk_ring_cell(r, pos);

    RINGK_RING_TALLY(cell, RINGK_TALLY_STORE);
    cell->len    = owner;
    cell->ncells = (uint16_t)ncells;
    ringk_ring_st_rel(r, &cell->seq, (pos + 1) | RINGK_CELL_SEQ_CLAIMED);
}

/**
 * Tells whether a producer at @a prod->pos could write @a need cells, reloading its copy of the
 * consumer's head only when the cached one says the ring is full.
 */
RINGK_HD int ringk_ring_room(const ringk_ring_t *r, ringk_ring_prod_t *prod, uint32_t need)
{
    if (prod->pos + need - prod->head <= r->ncells) {
        return 1;
    }
    /* C2: pairs with R1 in ringk_ring_release(): the consumer is done with these cells. */
    prod->head = ringk_ring_ld_acq(r, &r->cons->pos);
    return prod->pos + need - prod->head <= r->ncells;
}

/**
 * Single-producer claim: the lane's only producer keeps its position and its copy of the head in
 * @a prod (local memory, not shared) and claims without any atomic read-modify-write. A message
 * that would wrap is moved to the ring's start behind a skip cell.
 * @return 1 and the claimed position in @a claimed_p, or 0 when the ring is full.
 */
RINGK_HD int ringk_ring_sp_claim(ringk_ring_t *r, ringk_ring_prod_t *prod, uint32_t ncells,
                                 uint64_t *claimed_p)
{
    uint32_t pad = ringk_ring_pad(r, prod->pos, ncells);

    if ((ncells == 0) || (ncells > r->ncells) || !ringk_ring_room(r, prod, pad + ncells)) {
        return 0;
    }
    if (pad != 0) {
        ringk_ring_publish_skip(r, prod->pos, pad);
    }
    *claimed_p = prod->pos + pad;
    prod->pos += pad + ncells;
    /* Progress marker for observers and for the next owner of the lane. */
    ringk_ring_st_rlx(r, &r->prod->pos, prod->pos);
    return 1;
}

/** In the tail of a multi-producer ring its consumer closed (ringk_ring_close()): claims
 *  through ringk_ring_mp_claim_open() fail from then on. Positions never reach it. */
#define RINGK_RING_CLOSED (1ull << 63)

/* How ringk_ring_mp_claim_in() claims (bits). */
#define RINGK_RING_CLAIM_CLOSABLE 1u /* a tail with RINGK_RING_CLOSED fails the claim: -1 */
#define RINGK_RING_CLAIM_WRAPS    2u /* an LL ring: a message may run on across the ring's end,
                                        so no skip cell pads it */
#define RINGK_RING_CLAIM_RELAXED  4u /* the swap orders nothing (ringk_ring_cas_rlx()): for
                                        producers that publish with a release of the header */

/* ringk_ring_mp_claim_cached(), as @a how says. @a tail_cache, when not NULL, is the producer's
 * guess of the tail (where its last claim ended): the compare-and-swap starts from it instead
 * of a read of the tail, and a failed swap gives the tail it found, so a producer that no other
 * claim came between reads nothing before its swap. */
RINGK_HD int ringk_ring_mp_claim_in(ringk_ring_t *r, uint32_t ncells, uint64_t *head_cache,
                                    uint64_t *tail_cache, uint64_t *claimed_p, unsigned how)
{
    uint64_t tail, head, now;
    uint32_t pad;
    int won;

    if ((ncells == 0) || (ncells > r->ncells)) {
        return 0;
    }
    tail = (tail_cache != NULL) ? *tail_cache : ringk_ring_ld_rlx(r, &r->prod->pos);
    for (;;) {
        if ((how & RINGK_RING_CLAIM_CLOSABLE) && (tail & RINGK_RING_CLOSED)) {
            return -1;
        }
        pad  = (how & RINGK_RING_CLAIM_WRAPS) ? 0 : ringk_ring_pad(r, tail, ncells);
        /* A cached head is never ahead of the real one (it only grows), so room it shows is
         * real; the shared head line is read only when the cache says full. */
        head = *head_cache;
        if (tail + pad + ncells - head > r->ncells) {
            /* C2: as in ringk_ring_room(). */
            head        = ringk_ring_ld_acq(r, &r->cons->pos);
            *head_cache = head;
        }
        if (tail + pad + ncells - head > r->ncells) {
            /* full, or a guess of the tail that fell behind the head */
            if ((now = ringk_ring_ld_rlx(r, &r->prod->pos)) != tail) {
                tail = now; /* raced with another claim */
                continue;
            }
            return 0;
        }
        won = (how & RINGK_RING_CLAIM_RELAXED) ?
              ringk_ring_cas_rlx(r, &r->prod->pos, &tail, tail + pad + ncells) :
              ringk_ring_cas(r, &r->prod->pos, &tail, tail + pad + ncells);
        if (won) {
            if (pad != 0) {
                ringk_ring_publish_skip(r, tail, pad);
            }
            *claimed_p = tail + pad;
            if (tail_cache != NULL) {
                *tail_cache = tail + pad + ncells;
            }
            return 1;
        }
        /* tail: what the swap found there */
    }
}

/**
 * Multi-producer claim for a ring shared by several producers: reads the tail, checks room
 * against the producer's cached copy of the head (@a head_cache, reloaded when it says full)
 * and takes the cells with one compare-and-swap on the tail. The head only grows, so room seen
 * before the swap is still there after it.
 * @return 1 and the claimed position, or 0 when the ring is full.
 */
RINGK_HD int ringk_ring_mp_claim_cached(ringk_ring_t *r, uint32_t ncells, uint64_t *head_cache,
                                        uint64_t *claimed_p)
{
    return ringk_ring_mp_claim_in(r, ncells, head_cache, NULL, claimed_p, 0);
}

/** ringk_ring_mp_claim_cached() on a ring its consumer may close, with the producer's guess of
 *  the tail in @a tail_cache (0 at first; see ringk_ring_mp_claim_in()): 1 claimed, 0 full,
 *  -1 closed. */
RINGK_HD int ringk_ring_mp_claim_open(ringk_ring_t *r, uint32_t ncells, uint64_t *head_cache,
                                      uint64_t *tail_cache, uint64_t *claimed_p)
{
    return ringk_ring_mp_claim_in(r, ncells, head_cache, tail_cache, claimed_p,
                                  RINGK_RING_CLAIM_CLOSABLE);
}

/**
 * Closes a multi-producer ring to claims through ringk_ring_mp_claim_open(): one atomic OR of
 * RINGK_RING_CLOSED into the tail. Claims and the close are read-modify-writes of that one word,
 * so they are ordered without a fence: a claim made before the close is in the tail it returns,
 * one tried after it fails. Closing again returns the same tail.
 * @return the final tail (the position after the last claimed cell).
 */
RINGK_HD uint64_t ringk_ring_close(ringk_ring_t *r)
{
    return ringk_ring_fetch_or(r, &r->prod->pos, RINGK_RING_CLOSED) & ~RINGK_RING_CLOSED;
}

/** ringk_ring_mp_claim_cached() without a cache: reads the head every time. */
RINGK_HD int ringk_ring_mp_claim(ringk_ring_t *r, uint32_t ncells, uint64_t *claimed_p)
{
    uint64_t head = 0;

    return ringk_ring_mp_claim_cached(r, ncells, &head, claimed_p);
}

/** Payload of the message at @a pos: contiguous, ringk_ring_capacity(ncells) bytes. */
RINGK_HD void *ringk_ring_payload(const ringk_ring_t *r, uint64_t pos)
{
    return (uint8_t*)ringk_ring_cell(r, pos) + RINGK_CELL_HDR_BYTES;
}

/** Copies @a len bytes of @a src into the claimed message at @a pos, at payload offset @a off. */
RINGK_HD void ringk_ring_write(const ringk_ring_t *r, uint64_t pos, uint64_t off,
                               const void *src, uint64_t len)
{
    RINGK_RING_TALLY(ringk_ring_payload(r, pos), RINGK_TALLY_STORE);
    memcpy((uint8_t*)ringk_ring_payload(r, pos) + off, src, len);
}

/**
 * Publishes the message claimed at @a pos, after all of its payload was written, on a ring
 * whose consumer clears the first word of every continuation cell it passes
 * (ringk_ring_done() with RINGK_CELL_FLAG_CLEAR): the producer reads nothing. @a flags may hold
 * RINGK_CELL_FLAG_CLEAR besides the user's bits.
 */
RINGK_HD void ringk_ring_publish_hdr(const ringk_ring_t *r, uint64_t pos, uint32_t len,
                                     uint16_t ncells, uint8_t id, uint8_t flags)
{
    ringk_cell_hdr_t *cell = ringk_ring_cell(r, pos);

    RINGK_RING_TALLY(cell, RINGK_TALLY_STORE);
    cell->len    = len;
    cell->ncells = ncells;
    cell->id     = id;
    cell->flags  = flags & (RINGK_CELL_FLAGS_USER | RINGK_CELL_FLAG_CLEAR);
    /* P1: publish payload and header; pairs with C1 in ringk_ring_peek(). */
    ringk_ring_st_rel(r, &cell->seq, pos + 1);
}

/** Publishes the message claimed at @a pos, after all of its payload was written. */
RINGK_HD void ringk_ring_publish(const ringk_ring_t *r, uint64_t pos, uint32_t len,
                                 uint16_t ncells, uint8_t id, uint8_t flags)
{
    uint32_t i;

    flags &= RINGK_CELL_FLAGS_USER;
    /* A continuation cell whose first word reads as next lap's "published" needs clearing.
     * On a GPU the cells may be in mapped host memory (a device kernel's outbox): eight words
     * are compared before a branch, so that their loads cross the bus together, not one round
     * trip each. A CPU overlaps the loads of the plain loop by itself, and runs it faster. */
#ifdef __CUDA_ARCH__
    for (i = 1; i < ncells; i += 8) {
        uint32_t j, n = (ncells - i < 8) ? ncells - i : 8;
        int stale = 0;

#pragma unroll
        for (j = 0; j < 8; j++) {
            if (j < n) {
                stale |= (ringk_ring_cell(r, pos + i + j)->seq == pos + i + j + r->ncells + 1);
            }
        }
        if (stale) {
            flags |= RINGK_CELL_FLAG_CLEAR;
            break;
        }
    }
#else
    if (ncells > 1) {
        RINGK_RING_TALLY(ringk_ring_cell(r, pos + 1), RINGK_TALLY_LOAD);
    }
    for (i = 1; i < ncells; i++) {
        if (ringk_ring_cell(r, pos + i)->seq == pos + i + r->ncells + 1) {
            flags |= RINGK_CELL_FLAG_CLEAR;
            break;
        }
    }
#endif
    ringk_ring_publish_hdr(r, pos, len, ncells, id, flags);
}

/* ---- consumer side ------------------------------------------------------------------------ */

/**
 * Finishes with the @a ncells cells of the message at @a pos whose header flags are @a flags:
 * clears continuation cells when the producer asked for it (or for a skip or cancel cell, whose
 * other cells were never written, or for a message that failed its check: 0xff). The cells go
 * back to the producers with the next ringk_ring_release_to() past them.
 */
RINGK_HD void ringk_ring_done(const ringk_ring_t *r, uint64_t pos, uint32_t ncells, uint8_t flags)
{
    uint32_t i;

    if (flags & (RINGK_CELL_FLAG_CLEAR | RINGK_CELL_FLAG_SKIP | RINGK_CELL_FLAG_CANCEL)) {
        for (i = 1; i < ncells; i++) {
            ringk_ring_st_rlx(r, &ringk_ring_cell(r, pos + i)->seq, 0);
        }
    }
}

/**
 * Publishes the consumer's head @a head: every cell before it was passed to ringk_ring_done().
 * A consumer may do this once for a batch of messages, so that producers waiting for room see
 * the head's line change once a batch rather than once a message; it must not wait for new
 * messages while holding back a head.
 */
RINGK_HD void ringk_ring_release_to(const ringk_ring_t *r, uint64_t head)
{
    /* R1: the reads and clears before it come first; pairs with C2 in the producers' claims. */
    ringk_ring_st_rel(r, &r->cons->pos, head);
}

/** ringk_ring_done() and ringk_ring_release_to() of one message. */
RINGK_HD void ringk_ring_release(const ringk_ring_t *r, uint64_t pos, uint32_t ncells,
                                 uint8_t flags)
{
    ringk_ring_done(r, pos, ncells, flags);
    ringk_ring_release_to(r, pos + ncells);
}

/**
 * Whether the published cell at @a pos whose header says @a ncells and @a flags is one a
 * consumer passes over: a skip cell reaching the ring's end exactly, or a cancel cell of at
 * least one cell not crossing it. Anything else is returned as a message, for
 * ringk_ring_msg_check() to judge.
 */
RINGK_HD int ringk_ring_passes_over(const ringk_ring_t *r, uint64_t pos, uint32_t ncells,
                                    uint8_t flags)
{
    uint32_t to_end = r->ncells - (uint32_t)(pos & r->mask);

    return ((flags & RINGK_CELL_FLAG_SKIP) && (ncells == to_end)) ||
           ((flags & RINGK_CELL_FLAG_CANCEL) && !(flags & RINGK_CELL_FLAG_SKIP) &&
            (ncells >= 1) && (ncells <= to_end));
}

/**
 * Returns the message at *@a pos_p if one is published, else NULL, for a consumer that holds
 * back its head (cells before *@a pos_p handled but not yet handed back, or still in use):
 * skip cells (padding to the ring's end) and cancel cells (cells given up, not crossing the
 * ring's end) at *@a pos_p are passed to ringk_ring_done() and passed over (*@a pos_p moves
 * past them); they go back to the producers with the caller's next ringk_ring_release_to()
 * past them. The header is a producer's writing: the caller validates it with
 * ringk_ring_msg_check() before using it. A skip cell whose size does not reach the ring's end
 * exactly, or a cancel cell of no cells or crossing the end, is returned like a message, for
 * that check to refuse.
 */
RINGK_HD const ringk_cell_hdr_t *ringk_ring_peek_held(const ringk_ring_t *r, uint64_t *pos_p)
{
    const ringk_cell_hdr_t *cell;
    uint64_t pos = *pos_p;
    uint32_t skip;
    uint8_t flags;

    for (;;) {
        cell = ringk_ring_cell(r, pos);
        /* C1: pairs with P1 in ringk_ring_publish(); payload reads come after this load. */
        if (ringk_ring_ld_acq(r, &cell->seq) != pos + 1) {
            *pos_p = pos;
            return NULL;
        }
        /* the header is a producer's writing: read once, then judged */
        RINGK_RING_TALLY(cell, RINGK_TALLY_LOAD);
        skip  = cell->ncells;
        flags = cell->flags;
        if (!ringk_ring_passes_over(r, pos, skip, flags)) {
            *pos_p = pos;
            return cell;
        }
        ringk_ring_done(r, pos, skip, flags);
        pos += skip;
    }
}

/**
 * ringk_ring_peek_held() for a consumer that holds no cell: the skip and cancel cells passed
 * over go back to the producers at once (with every cell before them).
 */
RINGK_HD const ringk_cell_hdr_t *ringk_ring_peek(const ringk_ring_t *r, uint64_t *pos_p)
{
    uint64_t start = *pos_p;
    const ringk_cell_hdr_t *cell = ringk_ring_peek_held(r, pos_p);

    if (*pos_p != start) {
        ringk_ring_release_to(r, *pos_p);
    }
    return cell;
}

/**
 * Validates a published header (copied out by the caller) against the ring and the caller's
 * limit: not a skip or cancel cell, cell count within the ring, within @a max_cells and not
 * crossing the ring's end from @a pos, length within what the cells hold.
 * @return 0, or RINGK_RING_EPROTO for a malformed message.
 */
RINGK_HD int ringk_ring_msg_check(const ringk_ring_t *r, uint64_t pos, uint32_t len,
                                  uint32_t ncells, uint8_t flags, uint32_t max_cells)
{
    if ((flags & (RINGK_CELL_FLAG_SKIP | RINGK_CELL_FLAG_CANCEL)) || (ncells == 0) ||
        (ncells > max_cells) ||
        ((pos & r->mask) + ncells > r->ncells) ||
        (len > ringk_ring_capacity(ncells, r->cell_size))) {
        return RINGK_RING_EPROTO;
    }
    return 0;
}

/** Copies @a len payload bytes of the message at @a pos, from payload offset @a off. */
RINGK_HD void ringk_ring_read(const ringk_ring_t *r, uint64_t pos, uint64_t off, void *dst,
                              uint64_t len)
{
    RINGK_RING_TALLY(ringk_ring_payload(r, pos), RINGK_TALLY_LOAD);
    memcpy(dst, (const uint8_t*)ringk_ring_payload(r, pos) + off, len);
}

#endif
