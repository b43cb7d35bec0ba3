/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: a ring whose cells (and producer tail) were written by a hostile producer.
 * The consumer logic every ringk consumer uses (peek, msg_check, read, release) must stay inside
 * the ring whatever the bytes say; ringk_ring_attach must refuse bad headers. */
#include <core/ringk_ring.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NCELLS 16
#define CELL   64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t mem[RINGK_RING_HDR_BYTES + NCELLS * CELL] __attribute__((aligned(64)));
    uint8_t out[NCELLS * CELL];
    const ringk_cell_hdr_t *h;
    ringk_ring_t r, a;
    uint64_t pos = 0;
    uint32_t len, nc;
    uint8_t flags;
    int i;

    /* 1. a header written by someone else */
    memset(mem, 0, sizeof(mem));
    memcpy(mem, data, size < RINGK_RING_HDR_BYTES ? size : RINGK_RING_HDR_BYTES);
    if (ringk_ring_attach(&a, mem, sizeof(mem)) == 0) {
        /* accepted: then it describes a ring inside the mapping */
        if ((uint64_t)a.ncells * a.cell_size + RINGK_RING_HDR_BYTES > sizeof(mem)) {
            abort();
        }
    }
    /* 2. a valid ring whose cells hold the fuzzer's bytes */
    if (ringk_ring_init(&r, mem, sizeof(mem), NCELLS, CELL) != 0) {
        abort();
    }
    if (size > 8) {
        memcpy(r.cells, data + 8, (size - 8) < NCELLS * CELL ? size - 8 : NCELLS * CELL);
        memcpy(&pos, data, 8);
        pos %= 4 * NCELLS; /* where the consumer stands */
    }
    for (i = 0; i < 4 * NCELLS; i++) {
        h = ringk_ring_peek(&r, &pos);
        if (h == NULL) {
            break;
        }
        len   = h->len;
        nc    = h->ncells;
        flags = h->flags;
        if (ringk_ring_msg_check(&r, pos, len, nc, flags, NCELLS / 2) != 0) {
            ringk_ring_release(&r, pos, 1, 0xff);
            pos++;
            continue;
        }
        ringk_ring_read(&r, pos, 0, out, len);
        ringk_ring_release(&r, pos, nc, flags);
        pos += nc;
    }
    return 0;
}
