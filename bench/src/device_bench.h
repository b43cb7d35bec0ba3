/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/device_bench: what its host program (device_bench.c) calls in its CUDA file
 * (device_bench_kernels.cu): the ring kernels' device entries and the raw references. */
#ifndef RINGK_BENCH_DEVICE_BENCH_H
#define RINGK_BENCH_DEVICE_BENCH_H

#include <ringk/api/ringk_device.h>

#include <stdint.h>

#define BENCH_STOP   UINT64_MAX  /* the raw flag ping-pong's stop value */
#define BENCH_PAYLOAD 16u        /* K2K message payload, bytes */

/* a device kernel's ball: {op, value, limit} */
#define BENCH_OP_BALL  1u
#define BENCH_OP_BURST 2u
typedef struct {
    uint64_t op, value, limit;
} bench_ball_t;

/* the K2K sink's state, in device memory; 'done' points to mapped memory the host polls */
typedef struct {
    uint64_t  count, next, errors;
    uint64_t *done;
} bench_sink_t;

/* Handler work: a message {seq, iters} makes each thread of the kernel (all its blocks) run
 * iters dependent multiply-adds on its own element, then the kernel meets at a barrier and
 * thread 0 of block 0 stores seq to *done (mapped memory the host polls). The same work as a
 * ring kernel's handler and as a kernel launched per message. */
#define BENCH_WORK_THREADS 1024
typedef struct {
    double    v[BENCH_WORK_THREADS];  /* device memory */
    uint64_t *done;                   /* mapped */
} bench_work_t;

/* One thread's share of a message's work. */
RINGK_DEVICE static inline void bench_work_elem(bench_work_t *w, uint32_t me, uint64_t iters)
{
    double x = w->v[me];
    uint64_t j;

    for (j = 0; j < iters; j++) {
        x = x * 0.999999 + 1e-6;
    }
    w->v[me] = x;
}

#ifdef __cplusplus
extern "C" {
#endif
extern const ringk_device_entry_t bench_echo_entry;  /* echoes on route 0 */
extern const ringk_device_entry_t bench_k2k_a_entry; /* ball to route 0 (b) / burst to route 1 */
extern const ringk_device_entry_t bench_sink_entry;  /* counts bursts, in order */
extern const ringk_device_entry_t bench_work_entry;  /* handler work (bench_work_t) */

/* The raw references; each returns 0 or -1 with the CUDA error printed. */
int bench_cuda_init(int *ndev, char *name, size_t name_len);
void *bench_mapped_alloc(size_t bytes, void **dev_p);
void *bench_device_alloc(size_t bytes);
/* device memory of CUDA device @a dev (the calling thread's device is kept) */
void *bench_device_alloc_on(int dev, size_t bytes);
int bench_copy_to_device(void *dst, const void *src, size_t bytes);
int bench_copy_from_device(void *dst, const void *src, size_t bytes);
/* a resident kernel answering host_flag's values in dev_flag (both mapped) until BENCH_STOP */
int bench_flag_pong_start(uint64_t *host_flag_d, uint64_t *dev_flag_d, void **stream_p);
int bench_stream_sync(void *stream);
/* one kernel launch writing value + 1 to *out_d (mapped), waited for: the reply */
int bench_launch_one(void *stream, uint64_t *out_d, uint64_t value);
/* two blocks of one launch: an SPSC ring in device memory, block 0 -> block 1, msgs messages
 * of BENCH_PAYLOAD bytes; *errors_d (mapped) counts messages out of order */
int bench_raw_ring(void *stream, void *ring_d, uint32_t ncells, uint64_t msgs, uint64_t *errors_d);
/* two blocks bouncing a counter n times through two words of device memory */
int bench_raw_pingpong(void *stream, uint64_t *words_d, uint64_t n);
/* the handler work of message seq as a launch of @a blocks blocks of @a threads, waited for */
int bench_launch_work(void *stream, bench_work_t *w_d, uint32_t threads, uint32_t blocks,
                      uint64_t iters, uint64_t seq);
/* the work of n messages in one launch: what the work itself costs (each block on its own:
 * a block's barrier a message, not the grid's) */
int bench_work_loop(void *stream, bench_work_t *w_d, uint32_t threads, uint32_t blocks,
                    uint64_t iters, uint64_t n);
#ifdef __cplusplus
}
#endif

#endif
