/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk staged copies: data moved between two memories that cannot reach each other through
 * bounce buffers, chunk by chunk, so that the copy into one buffer overlaps the copy out of
 * another. The schedule and the buffer pool are here, without CUDA; the copies are the
 * caller's (ringk_cuda_peer.c queues them on two CUDA streams). */
#ifndef RINGK_CORE_STAGE_H
#define RINGK_CORE_STAGE_H

#include <stddef.h>

#define RINGK_STAGE_BUFS  4          /**< bounce buffers of a pool */
#define RINGK_STAGE_CHUNK (1u << 20) /**< bytes of each */

/** Bounce buffers shared by the copies of a process: a buffer is taken for one chunk and
 *  given back once that chunk has left it (from any thread, e.g. a CUDA host callback). */
typedef struct ringk_stage_pool {
    void  *buf[RINGK_STAGE_BUFS];
    size_t chunk;                   /**< bytes of each buffer */
    int    busy[RINGK_STAGE_BUFS];  /**< 1 while a chunk is in it */
    unsigned wait_ms;               /**< longest wait for a free buffer (0: RINGK_STAGE_WAIT_MS) */
} ringk_stage_pool_t;

/** A staged copy's operations on its chunks. */
typedef struct ringk_stage_ops {
    void               *arg;
    ringk_stage_pool_t *pool;
    /** Queues the copy of source bytes [off, off + len) into buffer @a buf: 0 or an error. */
    int (*copy_in)(void *arg, unsigned buf, size_t off, size_t len);
    /** Queues the copy of buffer @a buf, after its copy in, to destination bytes [off, off +
     *  len), and the buffer's release (ringk_stage_release()) after that: 0; or an error, and
     *  then gives the buffer back itself once its copy in can no longer write it. */
    int (*copy_out)(void *arg, unsigned buf, size_t off, size_t len);
} ringk_stage_ops_t;

/** How long ringk_stage_acquire() waits for a buffer: each busy one is freed by a copy already
 *  queued, but on an application's stream that copy may wait for the application. */
#define RINGK_STAGE_WAIT_MS 30000u

/** A free buffer of @a pool, marked busy, in *@a buf_p: 0; waits (yielding the core) while all
 *  are busy, at most the pool's wait_ms: then -ETIMEDOUT. */
int ringk_stage_acquire(ringk_stage_pool_t *pool, unsigned *buf_p);

/** Gives buffer @a buf back to @a pool. */
void ringk_stage_release(ringk_stage_pool_t *pool, unsigned buf);

/** Buffers of @a pool busy now. */
unsigned ringk_stage_busy(ringk_stage_pool_t *pool);

/**
 * Queues a copy of @a len bytes in chunks of the pool's size: each chunk takes a free buffer,
 * is copied in and then out; a chunk's copy in does not wait for the chunk before to be copied
 * out, only for a free buffer. Returns once every chunk is queued (or at the first error of an
 * operation, with nothing queued after it and the chunk's buffer given back).
 * @return 0, the operation's error, or -ETIMEDOUT (no buffer came free: nothing queued after).
 */
int ringk_stage_run(const ringk_stage_ops_t *ops, size_t len);

#endif
