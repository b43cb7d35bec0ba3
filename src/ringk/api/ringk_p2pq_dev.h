/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the P2P message queue's shared state and its send and receive, as inline functions
 * that compile as CUDA (for kernels: an endpoint on a GPU) and as C (libringk's own host calls,
 * and code compiled for the emulated device). A queue's state lives where its ring does (host
 * memory, pinned host memory, or the receiving GPU's memory); both endpoints reach it at the
 * same address (CUDA's unified addressing). ringk_p2pq_dev_view() gives it to a kernel. */
#ifndef RINGK_API_RINGK_P2PQ_DEV_H
#define RINGK_API_RINGK_P2PQ_DEV_H

#include <core/ringk_ring.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#  define RINGK_P2PQ_FN static __host__ __device__ __forceinline__
#else
#  define RINGK_P2PQ_FN static inline
#endif

#define RINGK_P2PQ_DEV_MAGIC 0x51503250u /* "P2PQ" */
#define RINGK_P2PQ_AGAIN     (-11)       /* -EAGAIN, which device code has no errno.h for */

/** The sender's part of a queue: written by the sending endpoint only. */
typedef struct ringk_p2pq_tx {
    ringk_ring_prod_t prod;
    uint64_t          published;    /**< the position after the last element written (release):
                                         the ring's producer position moves at the claim */
    uint64_t          sent, refused_full;
} __attribute__((aligned(RINGK_RING_LINE))) ringk_p2pq_tx_t;

/** The receiver's part: written by the receiving endpoint only. */
typedef struct ringk_p2pq_rx {
    uint64_t head;
    uint64_t received, empty_polls, cleared;
} __attribute__((aligned(RINGK_RING_LINE))) ringk_p2pq_rx_t;

/** A queue's shared state (ringk_p2pq_dev_view()). */
typedef struct ringk_p2pq_dev {
    ringk_ring_t    ring;       /**< the ring, at the endpoints' addresses */
    uint32_t        magic;      /**< RINGK_P2PQ_DEV_MAGIC */
    uint32_t        elem_size;
    ringk_p2pq_tx_t tx;
    ringk_p2pq_rx_t rx;
} ringk_p2pq_dev_t;

/* one layout for the host's C and the GPU's CUDA compilation, which read the same bytes */
#ifdef __cplusplus
static_assert(sizeof(ringk_p2pq_dev_t) == 3 * RINGK_RING_LINE, "p2pq state: three lines");
static_assert(offsetof(ringk_p2pq_dev_t, tx) == RINGK_RING_LINE, "p2pq tx: the second line");
static_assert(offsetof(ringk_p2pq_dev_t, rx) == 2 * RINGK_RING_LINE, "p2pq rx: the third line");
#else
_Static_assert(sizeof(ringk_p2pq_dev_t) == 3 * RINGK_RING_LINE, "p2pq state: three lines");
_Static_assert(offsetof(ringk_p2pq_dev_t, tx) == RINGK_RING_LINE, "p2pq tx: the second line");
_Static_assert(offsetof(ringk_p2pq_dev_t, rx) == 2 * RINGK_RING_LINE,
               "p2pq rx: the third line");
#endif

/** Sends one element (elem_size bytes at @a elem): 0, or RINGK_P2PQ_AGAIN when full. From the
 *  sending endpoint only (one thread). */
RINGK_P2PQ_FN int ringk_p2pq_dev_send(ringk_p2pq_dev_t *q, const void *elem)
{
    uint64_t pos;

    /* one element per cell: never a skip cell, the count is tail - head */
    if (!ringk_ring_sp_claim(&q->ring, &q->tx.prod, 1, &pos)) {
        q->tx.refused_full++;
        return RINGK_P2PQ_AGAIN;
    }
    memcpy(ringk_ring_payload(&q->ring, pos), elem, q->elem_size);
    ringk_ring_publish(&q->ring, pos, q->elem_size, 1, 0, 0);
    ringk_ring_st_rel(&q->ring, &q->tx.published, pos + 1);
    q->tx.sent++;
    return 0;
}

/** The element at the receiver's head after checking its cell, or NULL. */
RINGK_P2PQ_FN const void *ringk_p2pq_dev_head(ringk_p2pq_dev_t *q)
{
    const ringk_cell_hdr_t *cell = ringk_ring_peek(&q->ring, &q->rx.head);

    if ((cell == NULL) || (cell->len != q->elem_size) || (cell->ncells != 1)) {
        return NULL;
    }
    return ringk_ring_payload(&q->ring, q->rx.head);
}

/** Receives one element into @a elem: 0, or RINGK_P2PQ_AGAIN when empty. From the receiving
 *  endpoint only (one thread). */
RINGK_P2PQ_FN int ringk_p2pq_dev_receive(ringk_p2pq_dev_t *q, void *elem)
{
    const void *src = ringk_p2pq_dev_head(q);

    if (src == NULL) {
        q->rx.empty_polls++;
        return RINGK_P2PQ_AGAIN;
    }
    memcpy(elem, src, q->elem_size);
    ringk_ring_release(&q->ring, q->rx.head, 1, 0);
    q->rx.head++;
    q->rx.received++;
    return 0;
}

/** Copies the oldest element without taking it: 0, or RINGK_P2PQ_AGAIN. Receiving endpoint. */
RINGK_P2PQ_FN int ringk_p2pq_dev_peek(ringk_p2pq_dev_t *q, void *elem)
{
    const void *src = ringk_p2pq_dev_head(q);

    if (src == NULL) {
        return RINGK_P2PQ_AGAIN;
    }
    memcpy(elem, src, q->elem_size);
    return 0;
}

/** Discards everything queued now; returns how many. Receiving endpoint. */
RINGK_P2PQ_FN unsigned ringk_p2pq_dev_clear(ringk_p2pq_dev_t *q)
{
    unsigned n = 0;

    while (ringk_p2pq_dev_head(q) != NULL) {
        ringk_ring_release(&q->ring, q->rx.head, 1, 0);
        q->rx.head++;
        n++;
    }
    q->rx.cleared += n;
    return n;
}

/** Elements written and not yet received (as ringk_p2pq_count()). */
RINGK_P2PQ_FN unsigned ringk_p2pq_dev_count(ringk_p2pq_dev_t *q)
{
    uint64_t tail = ringk_ring_ld_acq(&q->ring, &q->tx.published);
    uint64_t head = ringk_ring_ld_acq(&q->ring, &q->ring.cons->pos);

    return (tail > head) ? (unsigned)(tail - head) : 0;
}

#endif
