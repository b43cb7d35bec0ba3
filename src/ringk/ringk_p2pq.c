/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk P2P message queue: fixed-size elements from one sender to one receiver over a ring of
 * the core protocol, one element per cell. */
#include "ringk_config.h"

#include "ringk_log.h"

#include <core/ringk_ring.h>
#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ringk_p2pq {
    /* sender's line */
    ringk_ring_prod_t prod;
    uint64_t          sent, refused_full;
    uint64_t          published;   /* the position after the last element written (release):
                                      the ring's producer position moves at the claim, before
                                      the element is written */
    uint8_t           pad0[RINGK_RING_LINE - 40];
    /* receiver's line */
    uint64_t          head;
    uint64_t          received, empty_polls, cleared;
    uint8_t           pad1[RINGK_RING_LINE - 32];
    /* read-only after create */
    ringk_ring_t      ring;
    size_t            elem_size;
    unsigned          capacity;
    void             *mem;
};

int ringk_p2pq_create(const ringk_p2pq_params_t *params, ringk_p2pq_t **queue_p)
{
    unsigned capacity = 1024, cell = RINGK_RING_CELL_MIN;
    ringk_p2pq_t *q;
    uint64_t bytes;

    const uint64_t known = RINGK_P2PQ_PARAM_FIELD_CAPACITY | RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE |
                           RINGK_P2PQ_PARAM_FIELD_DEVICES;

    if ((params == NULL) || (queue_p == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL",
                                 (params == NULL) ? "params" : "queue_p");
    }
    if (params->field_mask & ~known) {
        return ringk_log_bad_arg(NULL, __func__, "field_mask 0x%llx has unknown bits (known: "
                                 "0x%llx)", (unsigned long long)params->field_mask,
                                 (unsigned long long)known);
    }
    if (!(params->field_mask & RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE) ||
        (params->elem_size < 1) || (params->elem_size > RINGK_P2PQ_ELEM_MAX)) {
        return ringk_log_bad_arg(NULL, __func__, "elem_size %zu is not in 1..%u (required: "
                                 "RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE)",
                                 (params->field_mask & RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE) ?
                                 params->elem_size : 0, RINGK_P2PQ_ELEM_MAX);
    }
    if (params->field_mask & RINGK_P2PQ_PARAM_FIELD_CAPACITY) {
        capacity = params->capacity;
        if ((capacity < 2) || (capacity > (1u << 20)) || (capacity & (capacity - 1))) {
            return ringk_log_bad_arg(NULL, __func__, "capacity %u is not a power of 2 in "
                                     "2..1048576", capacity);
        }
    }
    if ((params->field_mask & RINGK_P2PQ_PARAM_FIELD_DEVICES) &&
        ((params->src_device != RINGK_P2PQ_HOST) || (params->dst_device != RINGK_P2PQ_HOST))) {
        /* device endpoints come with the CUDA executor */
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_p2pq_create: devices %d -> %d: GPU endpoints "
                      "are not supported in this release (only RINGK_P2PQ_HOST, -1)",
                      params->src_device, params->dst_device);
        return -ENOTSUP;
    }
    while (cell < RINGK_CELL_HDR_BYTES + params->elem_size) {
        cell *= 2;
    }
    if (posix_memalign((void**)&q, RINGK_RING_LINE, sizeof(*q)) != 0) {
        return -ENOMEM;
    }
    memset(q, 0, sizeof(*q));
    bytes = ringk_ring_bytes(capacity, cell);
    if ((posix_memalign(&q->mem, 4096, bytes) != 0) ||
        (ringk_ring_init(&q->ring, q->mem, bytes, capacity, cell) != 0)) {
        free(q->mem);
        free(q);
        return -ENOMEM;
    }
    q->elem_size = params->elem_size;
    q->capacity  = capacity;
    *queue_p     = q;
    return 0;
}

int ringk_p2pq_destroy(ringk_p2pq_t *q)
{
    if (q == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "queue is NULL");
    }
    free(q->mem);
    free(q);
    return 0;
}

unsigned ringk_p2pq_capacity(const ringk_p2pq_t *q)
{
    if (q == NULL) {
        ringk_log_bad_arg(NULL, __func__, "queue is NULL");
        return 0;
    }
    return q->capacity;
}

/* Elements written and not yet taken: from the consumer's thread each of them can be received
 * (one just written may not be counted yet), from the producer's each of them is queued or was
 * taken since the consumer's last release. */
static unsigned p2pq_count(const ringk_p2pq_t *q)
{
    uint64_t tail = __atomic_load_n(&q->published, __ATOMIC_ACQUIRE);
    uint64_t head = __atomic_load_n(&q->ring.cons->pos, __ATOMIC_ACQUIRE);

    return (tail > head) ? (unsigned)(tail - head) : 0;
}

unsigned ringk_p2pq_count(const ringk_p2pq_t *q)
{
    if (q == NULL) {
        ringk_log_bad_arg(NULL, __func__, "queue is NULL");
        return 0;
    }
    return p2pq_count(q);
}

int ringk_p2pq_empty(const ringk_p2pq_t *q)
{
    if (q == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "queue is NULL");
    }
    return p2pq_count(q) == 0;
}

int ringk_p2pq_full(const ringk_p2pq_t *q)
{
    if (q == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "queue is NULL");
    }
    return p2pq_count(q) >= q->capacity;
}

static inline int p2pq_send(ringk_p2pq_t *q, const void *elem)
{
    uint64_t pos;

    /* one element per cell: never a skip cell, count is tail - head */
    if (!ringk_ring_sp_claim(&q->ring, &q->prod, 1, &pos)) {
        q->refused_full++;
        return -EAGAIN;
    }
    memcpy(ringk_ring_payload(&q->ring, pos), elem, q->elem_size);
    ringk_ring_publish(&q->ring, pos, (uint32_t)q->elem_size, 1, 0, 0);
    __atomic_store_n(&q->published, pos + 1, __ATOMIC_RELEASE);
    q->sent++;
    return 0;
}

int ringk_p2pq_send(ringk_p2pq_t *q, const void *elem)
{
    if ((q == NULL) || (elem == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "elem");
    }
    return p2pq_send(q, elem);
}

int ringk_p2pq_send_batch(ringk_p2pq_t *q, const void *elems, unsigned n, unsigned *sent_p)
{
    const uint8_t *p = elems;
    unsigned i;

    if ((q == NULL) || ((elems == NULL) && (n > 0))) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "elems");
    }
    for (i = 0; i < n; i++) {
        if (p2pq_send(q, p + (size_t)i * q->elem_size) != 0) {
            break;
        }
    }
    if (sent_p != NULL) {
        *sent_p = i;
    }
    return ((i == 0) && (n > 0)) ? -EAGAIN : 0;
}

/* The element at the head, after checking its header, or NULL. */
static const void *head_elem(ringk_p2pq_t *q)
{
    const ringk_cell_hdr_t *cell = ringk_ring_peek(&q->ring, &q->head);

    if ((cell == NULL) || (cell->len != q->elem_size) || (cell->ncells != 1)) {
        return NULL;
    }
    return ringk_ring_payload(&q->ring, q->head);
}

static inline int p2pq_receive(ringk_p2pq_t *q, void *elem)
{
    const void *src = head_elem(q);

    if (src == NULL) {
        q->empty_polls++;
        return -EAGAIN;
    }
    memcpy(elem, src, q->elem_size);
    ringk_ring_release(&q->ring, q->head, 1, 0);
    q->head++;
    q->received++;
    return 0;
}

int ringk_p2pq_receive(ringk_p2pq_t *q, void *elem)
{
    if ((q == NULL) || (elem == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "elem");
    }
    return p2pq_receive(q, elem);
}

int ringk_p2pq_receive_batch(ringk_p2pq_t *q, void *elems, unsigned max, unsigned *got_p)
{
    uint8_t *p = elems;
    unsigned i;

    if ((q == NULL) || ((elems == NULL) && (max > 0))) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "elems");
    }
    for (i = 0; i < max; i++) {
        if (p2pq_receive(q, p + (size_t)i * q->elem_size) != 0) {
            break;
        }
    }
    if (got_p != NULL) {
        *got_p = i;
    }
    return ((i == 0) && (max > 0)) ? -EAGAIN : 0;
}

int ringk_p2pq_try_peek(ringk_p2pq_t *q, void *elem)
{
    const void *src;

    if ((q == NULL) || (elem == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "elem");
    }
    src = head_elem(q);
    if (src == NULL) {
        return -EAGAIN;
    }
    memcpy(elem, src, q->elem_size);
    return 0;
}

int ringk_p2pq_clear(ringk_p2pq_t *q, unsigned *cleared_p)
{
    unsigned n = 0;

    if (q == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "queue is NULL");
    }
    while (head_elem(q) != NULL) {
        ringk_ring_release(&q->ring, q->head, 1, 0);
        q->head++;
        n++;
    }
    q->cleared += n;
    if (cleared_p != NULL) {
        *cleared_p = n;
    }
    return 0;
}

int ringk_p2pq_stats_query(const ringk_p2pq_t *q, ringk_p2pq_stats_t *s)
{
    if ((q == NULL) || (s == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "stats_p");
    }
    s->sent         = __atomic_load_n(&q->sent, __ATOMIC_RELAXED);
    s->refused_full = __atomic_load_n(&q->refused_full, __ATOMIC_RELAXED);
    s->received     = __atomic_load_n(&q->received, __ATOMIC_RELAXED);
    s->empty_polls  = __atomic_load_n(&q->empty_polls, __ATOMIC_RELAXED);
    s->cleared      = __atomic_load_n(&q->cleared, __ATOMIC_RELAXED);
    s->mode         = RINGK_P2PQ_MODE_HOST_MEMORY;
    return 0;
}
