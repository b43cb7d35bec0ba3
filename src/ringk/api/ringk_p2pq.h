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

#define RINGK_P2PQ_HOST      (-1)   /**< endpoint device: a host thread */
#define RINGK_P2PQ_EMULATED  (-2)   /**< endpoint device: code compiled for the emulated device
                                         (host C), which calls the ringk_p2pq_dev_* functions */
#define RINGK_P2PQ_ELEM_MAX  4080u  /**< largest element, bytes (one 4 KiB cell) */

/** Where the ring is, which says how elements travel. */
typedef enum ringk_p2pq_mode {
    RINGK_P2PQ_MODE_HOST_MEMORY   = 0, /**< host memory: host threads or the emulated device at
                                            both ends, one copy each way */
    RINGK_P2PQ_MODE_PINNED_HOST   = 1, /**< pinned host memory that a GPU endpoint reaches over
                                            its bus: a host endpoint and a GPU, or two GPUs whose
                                            path the policy stages through host memory */
    RINGK_P2PQ_MODE_DEVICE_MEMORY = 2  /**< the receiving GPU's memory, written by a kernel of
                                            the same GPU, or of another GPU over peer access
                                            (direct P2P) */
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
    int      src_device;   /**< the sender: RINGK_P2PQ_HOST (default), RINGK_P2PQ_EMULATED or
                                a CUDA device ordinal */
    int      dst_device;   /**< the receiver, likewise */
} ringk_p2pq_params_t;

/** Statistics of a queue. */
typedef struct ringk_p2pq_stats {
    uint64_t          sent, received, refused_full, empty_polls, cleared;
    ringk_p2pq_mode_t mode;
} ringk_p2pq_stats_t;

/** Creates a queue; the ring goes where its endpoints reach it best (ringk_p2pq_mode_t).
 *  @return 0; -EINVAL a bad or missing parameter (a GPU with the emulated device); -ENODEV a
 *  GPU that does not exist or no usable CUDA; -EBUSY GPU memory while ringk device kernels are
 *  resident (the allocation would wait for them); -ENOMEM; -EIO. */
int ringk_p2pq_create(const ringk_p2pq_params_t *params, ringk_p2pq_t **queue_p);
/** Frees the queue and what it holds; neither end may use it any more. @return 0, -EINVAL;
 *  -EBUSY for GPU or pinned memory while ringk device kernels are resident (kept). Kernels the
 *  program launched itself are not counted: freeing GPU or pinned memory waits for every
 *  kernel of the device, so the program lets those that use the queue return first. */
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
/* The sending and receiving calls below are a host endpoint's: where the sender (receiver) is
 * a GPU or the emulated device, its code calls ringk_p2pq_dev_send() (ringk_p2pq_dev_receive()
 * ...) on ringk_p2pq_dev_view() instead, and these refuse with -EPERM. The count, statistics
 * and information calls serve every queue (of a ring in GPU memory, by a copy). */

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

enum ringk_p2pq_info_field {
    RINGK_P2PQ_INFO_FIELD_MODE       = 1u << 0,
    RINGK_P2PQ_INFO_FIELD_DEVICES    = 1u << 1,
    RINGK_P2PQ_INFO_FIELD_DIRECT_P2P = 1u << 2,
    RINGK_P2PQ_INFO_FIELD_REASON     = 1u << 3
};

#define RINGK_P2PQ_REASON_LEN 256

/** Where a queue's ring is and why (fields as field_mask asks). */
typedef struct ringk_p2pq_info {
    uint64_t          field_mask;
    ringk_p2pq_mode_t mode;
    int               src_device, dst_device;  /**< as created */
    int               direct_p2p;  /**< two GPUs: 1 when they reach each other's memory
                                        directly (the queue then is in DEVICE_MEMORY), else 0 */
    char              reason[RINGK_P2PQ_REASON_LEN];
} ringk_p2pq_info_t;

/** Fills what info_p->field_mask asks. @return 0, or -EINVAL (NULL, unknown bits). */
int ringk_p2pq_info_query(const ringk_p2pq_t *queue, ringk_p2pq_info_t *info_p);

struct ringk_p2pq_dev;

/**
 * The queue's shared state for its device endpoints (ringk_p2pq_dev.h): an address in the
 * receiving GPU's memory (DEVICE_MEMORY) or in host memory both endpoints reach, to pass to
 * the kernels (or emulated-device code) that call ringk_p2pq_dev_send() / _receive().
 * @return 0, or -EINVAL.
 */
int ringk_p2pq_dev_view(ringk_p2pq_t *queue, struct ringk_p2pq_dev **view_p);

#ifdef __cplusplus
}
#endif

#endif
