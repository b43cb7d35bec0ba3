/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk ring protocol: LL rings, whose messages a consumer across a bus (a GPU polling pinned
 * host memory) reads in one round trip. Header-only, C11 on the host and CUDA on the device,
 * as core/ringk_ring.h, whose rings (layout, positions, claims) these are. */
#ifndef RINGK_CORE_RING_LL_H
#define RINGK_CORE_RING_LL_H

#include <core/ringk_ring.h>

/* ---- LL rings: a message a consumer across a bus reads in one round trip -------------------
 *
 * An LL ring ("low latency", after the protocol NCCL's LL is named for) is a ring whose
 * consumer reads it across a bus (a GPU polling pinned host memory). There a plain ring costs
 * two dependent round trips a message: the header's seq, then, ordered after it, the payload.
 * In an LL ring each 8-byte word of a message carries 4 bytes of it and a 32-bit flag of the
 * message's position, and is written with one store, so a consumer that reads all the words of
 * a message at once (loads in flight together, seen in any order) knows from each word alone
 * that it holds the message:
 *
 *   word 0      seq: pos + 1, stored last with a release, as in a plain ring
 *   word 1      len: bytes of the message (what a plain cell header's len says) | flag << 32
 *   word 2      ncells | id << 16 | flags << 24                                 | flag << 32
 *   word 3 ...  the message, 4 bytes a word (the last one zero-padded)          | flag << 32
 *   flag = ringk_ring_ll_flag(pos), never 0
 *
 * A message's words run on across the ring's end (no skip cells: producers claim with
 * RINGK_RING_CLAIM_WRAPS). The consumer zeroes every word it read before the cells go back to
 * the producers (ringk_ring_ll_done()), so a word not yet written reads 0 and never a flag: a
 * word with the flag holds this message, whatever other words a read saw. A cancel cell is an
 * LL header with len 0 and RINGK_CELL_FLAG_CANCEL. Positions, the head, the tail and the claim
 * are a plain ring's.
 */
#define RINGK_RING_LL_HDR_WORDS 3u

/** The flag of every word of the LL message at @a pos but its seq. */
RINGK_HD uint32_t ringk_ring_ll_flag(uint64_t pos)
{
    return (uint32_t)(pos + 1) | 0x80000000u;
}

/** Words of an LL message of @a len bytes, its header included. */
RINGK_HD uint64_t ringk_ring_ll_words(uint64_t len)
{
    return RINGK_RING_LL_HDR_WORDS + (len + 3) / 4;
}

/** Cells of @a cell_size bytes an LL message of @a len bytes takes. */
RINGK_HD uint32_t ringk_ring_ll_cells(uint64_t len, uint32_t cell_size)
{
    return (uint32_t)((8 * ringk_ring_ll_words(len) + cell_size - 1) / cell_size);
}

/** Word @a w of the LL message at @a pos (words run on across the ring's end). */
RINGK_HD uint64_t *ringk_ring_ll_word(const ringk_ring_t *r, uint64_t pos, uint64_t w)
{
    uint64_t bytes = (uint64_t)r->ncells << r->log2_cell;

    return (uint64_t*)(r->cells + ((((pos & r->mask) << r->log2_cell) + 8 * w) & (bytes - 1)));
}

/* One word of an LL message: @a data under @a flag, one store. */
RINGK_HD void ringk_ring_ll_put(const ringk_ring_t *r, uint64_t pos, uint64_t w, uint32_t flag,
                                uint32_t data)
{
    ringk_ring_st_rlx(r, ringk_ring_ll_word(r, pos, w), ((uint64_t)flag << 32) | data);
}

/**
 * Writes @a len bytes of @a src as words @a w, @a w + 1, ... of the LL message claimed at
 * @a pos (word 3 is the message's first byte; a piece that does not end the message must be a
 * multiple of 4 bytes long).
 */
RINGK_HD void ringk_ring_ll_write(const ringk_ring_t *r, uint64_t pos, uint64_t w,
                                  const void *src, uint32_t len)
{
    const uint8_t *s = (const uint8_t*)src;
    uint32_t flag = ringk_ring_ll_flag(pos), i, d;

    for (i = 0; i + 4 <= len; i += 4, w++) {
        memcpy(&d, s + i, 4);
        ringk_ring_ll_put(r, pos, w, flag, d);
    }
    if (i < len) {
        d = 0;
        memcpy(&d, s + i, len - i);
        ringk_ring_ll_put(r, pos, w, flag, d);
    }
}

/** Publishes the LL message of @a len bytes claimed at @a pos once its words were written. */
RINGK_HD void ringk_ring_ll_publish(const ringk_ring_t *r, uint64_t pos, uint32_t len,
                                    uint16_t ncells, uint8_t id, uint8_t flags)
{
    uint32_t flag = ringk_ring_ll_flag(pos);

    ringk_ring_ll_put(r, pos, 1, flag, len);
    ringk_ring_ll_put(r, pos, 2, flag, (uint32_t)ncells | ((uint32_t)id << 16) |
                                       ((uint32_t)(flags & RINGK_CELL_FLAGS_USER) << 24));
    /* P1: as in ringk_ring_publish(); a reader of the whole message needs only the flags */
    ringk_ring_st_rel(r, ringk_ring_ll_word(r, pos, 0), pos + 1);
}

/** Gives up the @a ncells cells claimed at @a pos of an LL ring (ringk_ring_cancel()). */
RINGK_HD void ringk_ring_ll_cancel(const ringk_ring_t *r, uint64_t pos, uint32_t ncells)
{
    uint32_t flag = ringk_ring_ll_flag(pos);

    ringk_ring_ll_put(r, pos, 1, flag, 0);
    ringk_ring_ll_put(r, pos, 2, flag, ncells | ((uint32_t)RINGK_CELL_FLAG_CANCEL << 24));
    ringk_ring_st_rel(r, ringk_ring_ll_word(r, pos, 0), pos + 1);
}

/** What ringk_ring_ll_judge() found at a position. */
#define RINGK_RING_LL_NONE   0  /* nothing there yet, or not all of its header */
#define RINGK_RING_LL_MSG    1  /* a message's header */
#define RINGK_RING_LL_CANCEL 2  /* cells given up: pass over them */
#define RINGK_RING_LL_BAD    3  /* a header with the flag that no producer writes */

/** An LL message's header, as ringk_ring_ll_judge() read it. */
typedef struct ringk_ring_ll_hdr {
    uint32_t len;
    uint32_t ncells;
    uint32_t words;  /**< of the message, its header included */
    uint8_t  id, flags;
} ringk_ring_ll_hdr_t;

/**
 * Judges words 0 to 2 @a w of position @a pos of LL ring @a r, read in one go (the header of a
 * message, or not yet): RINGK_RING_LL_NONE until word 0 is pos + 1 and words 1 and 2 carry the
 * flag; RINGK_RING_LL_CANCEL with *@a h (ncells) for a cancel cell of 1 to @a max_cells cells;
 * RINGK_RING_LL_MSG with *@a h for a message whose cell count is the one its length needs, at
 * most @a max_cells; RINGK_RING_LL_BAD for anything else with the flag (a producer's writing is
 * checked, never trusted).
 */
RINGK_HD int ringk_ring_ll_judge(const ringk_ring_t *r, uint64_t pos, const uint64_t *w,
                                 uint32_t max_cells, ringk_ring_ll_hdr_t *h)
{
    uint32_t flag = ringk_ring_ll_flag(pos), meta;

    if ((w[0] != pos + 1) || ((uint32_t)(w[1] >> 32) != flag) ||
        ((uint32_t)(w[2] >> 32) != flag)) {
        return RINGK_RING_LL_NONE;
    }
    meta      = (uint32_t)w[2];
    h->len    = (uint32_t)w[1];
    h->ncells = meta & 0xffffu;
    h->id     = (uint8_t)(meta >> 16);
    h->flags  = (uint8_t)(meta >> 24);
    h->words  = RINGK_RING_LL_HDR_WORDS;
    if ((h->ncells == 0) || (h->ncells > max_cells) || (max_cells > r->ncells)) {
        return RINGK_RING_LL_BAD;
    }
    if (h->flags == RINGK_CELL_FLAG_CANCEL) {
        return (h->len == 0) ? RINGK_RING_LL_CANCEL : RINGK_RING_LL_BAD;
    }
    if ((h->flags & ~RINGK_CELL_FLAGS_USER) ||
        (h->ncells != ringk_ring_ll_cells(h->len, r->cell_size))) {
        return RINGK_RING_LL_BAD;
    }
    h->words = (uint32_t)ringk_ring_ll_words(h->len);
    return RINGK_RING_LL_MSG;
}

/** Whether the @a n words @a w (words of the LL message at @a pos) all carry its flag. */
RINGK_HD int ringk_ring_ll_whole(uint64_t pos, const uint64_t *w, uint32_t n)
{
    uint32_t flag = ringk_ring_ll_flag(pos), i, bad = 0;

    for (i = 0; i < n; i++) {
        bad |= (uint32_t)(w[i] >> 32) ^ flag;
    }
    return bad == 0;
}

/** Copies the @a bytes bytes the words @a w carry to @a dst. */
RINGK_HD void ringk_ring_ll_decode(void *dst, const uint64_t *w, uint32_t bytes)
{
    uint8_t *d = (uint8_t*)dst;
    uint32_t i, v;

    for (i = 0; i + 4 <= bytes; i += 4) {
        v = (uint32_t)w[i / 4];
        memcpy(d + i, &v, 4);
    }
    if (i < bytes) {
        v = (uint32_t)w[i / 4];
        memcpy(d + i, &v, bytes - i);
    }
}

/**
 * Zeroes the first @a words words of position @a pos of LL ring @a r (a message's, or every
 * word of a cancel's or a bad header's cells), before the consumer gives them back with
 * ringk_ring_release_to(), whose release orders these stores before the producers' next
 * writes there.
 */
RINGK_HD void ringk_ring_ll_done(const ringk_ring_t *r, uint64_t pos, uint64_t words)
{
    uint64_t i;

    for (i = 0; i < words; i++) {
        ringk_ring_st_rlx(r, ringk_ring_ll_word(r, pos, i), 0);
    }
}

#endif
