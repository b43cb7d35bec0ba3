/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: a point-to-point queue of fixed-size elements between one sending and one
 * receiving thread, on the core ring protocol; usable without a context. */
#ifndef RINGK_API_RINGK_P2PQ_H
#define RINGK_API_RINGK_P2PQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- P2P message queue ---------------------------------------------------------------------- */

/**
 * A queue of fixed-size elements from one endpoint (the sender) to another (the receiver): one
 * sending thread and one receiving thread, no locks, no atomic read-modify-write.
 */
typedef struct ringk_p2pq ringk_p2pq_t;

#define RINGK_P2PQ_HOST      (-1)   /**< endpoint device: host memory */
#define RINGK_P2PQ_ELEM_MAX  4080u  /**< largest element, bytes (one 4 KiB cell) */

/** How elements actually travel. */
typedef enum ringk_p2pq_mode {
    RINGK_P2PQ_MODE_HOST_MEMORY = 0  /**< both endpoints on the host: one copy each way */
} ringk_p2pq_mode_t;

enum ringk_p2pq_param_field {
    RINGK_P2PQ_PARAM_FIELD_CAPACITY  = 1u << 0,
    RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE = 1u << 1,
    RINGK_P2PQ_PARAM_FIELD_DEVICES   = 1u << 2
};

typedef struct ringk_p2pq_params {
    uint64_t field_mask;
    unsigned capacity;     /**< elements, a power of 2 from 2 to 1048576, default 1024 */
    size_t   elem_size;    /**< bytes, 1..RINGK_P2PQ_ELEM_MAX (required) */
    int      src_device;   /**< RINGK_P2PQ_HOST (default) or a GPU index (not yet) */
    int      dst_device;
} ringk_p2pq_params_t;

/** Statistics of a queue. */
typedef struct ringk_p2pq_stats {
    uint64_t          sent, received, refused_full, empty_polls, cleared;
    ringk_p2pq_mode_t mode;
} ringk_p2pq_stats_t;

/** Creates a queue. @return 0; -EINVAL a bad or missing parameter; -ENOTSUP a GPU endpoint
 *  (not in this release); -ENOMEM. */
int ringk_p2pq_create(const ringk_p2pq_params_t *params, ringk_p2pq_t **queue_p);
/** Frees the queue and what it holds; neither end may use it any more. @return 0, -EINVAL. */
int ringk_p2pq_destroy(ringk_p2pq_t *queue);
/** Elements the queue holds at most. */
unsigned ringk_p2pq_capacity(const ringk_p2pq_t *queue);
/** Elements written and not yet received: from the receiver's thread, each one counted can be
 *  received (an element being written is not counted yet); from the sender's thread, none is
 *  counted that was not sent (one received meanwhile may still be); a snapshot from elsewhere. */
unsigned ringk_p2pq_count(const ringk_p2pq_t *queue);
/** 1 when nothing is queued, else 0 (as ringk_p2pq_count()). */
int ringk_p2pq_empty(const ringk_p2pq_t *queue);
/** 1 when a send would find no room, else 0 (as ringk_p2pq_count()). */
int ringk_p2pq_full(const ringk_p2pq_t *queue);
/** Sender side. @return 0, or -EAGAIN when full. */
int ringk_p2pq_send(ringk_p2pq_t *queue, const void *elem);
/** Sends up to @a n elements in order; *sent_p says how many. @return 0, or -EAGAIN if none. */
int ringk_p2pq_send_batch(ringk_p2pq_t *queue, const void *elems, unsigned n, unsigned *sent_p);
/** Receiver side. @return 0, or -EAGAIN when empty. */
int ringk_p2pq_receive(ringk_p2pq_t *queue, void *elem);
/** Receives up to @a max elements in order into @a elems; *got_p says how many.
 *  @return 0, or -EAGAIN when there was none. */
int ringk_p2pq_receive_batch(ringk_p2pq_t *queue, void *elems, unsigned max, unsigned *got_p);
/** Copies the oldest element without removing it. @return 0, or -EAGAIN when empty. */
int ringk_p2pq_try_peek(ringk_p2pq_t *queue, void *elem);
/** Receiver side: discards everything queued now; *cleared_p says how many. */
int ringk_p2pq_clear(ringk_p2pq_t *queue, unsigned *cleared_p);
/** Copies the queue's statistics (counters since creation). @return 0, or -EINVAL. */
int ringk_p2pq_stats_query(const ringk_p2pq_t *queue, ringk_p2pq_stats_t *stats_p);

#ifdef __cplusplus
}
#endif

#endif
