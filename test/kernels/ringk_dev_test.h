/* SPDX-License-Identifier: BSD-3-Clause */
/* The device kernels of the device executor's tests (test/kernels/ringk_dev_test.cu), for the host
 * programs that start them. */
#ifndef RINGK_DEV_TEST_H
#define RINGK_DEV_TEST_H

#include <ringk/api/ringk_device.h>

#define RINGK_DEV_TEST_PRODUCERS 8
#define RINGK_DEV_TEST_BIG       512   /* above the max_out the tests give dev_bad */

/* What a test kernel saw; its argument points to one. */
typedef struct ringk_dev_test {
    uint64_t count;                       /* messages handled */
    uint64_t sum;                         /* of the producers' counters */
    uint64_t out_of_order, bad, stamped;
    uint32_t next[RINGK_DEV_TEST_PRODUCERS];
    int      last_error;
    int      codes[8];
    uint32_t ring_scopes;                 /* the kernel's rings' scopes: inbox | ingress << 8 |
                                             outbox << 16 (RINGK_RING_SCOPE_*) */
    uint64_t staged;                      /* messages handed over in the staging buffer */
    uint64_t tail_sum;                    /* of the payload bytes after the first 8 */
    uint64_t hlc;                         /* echo: its clock (ringk_dev_hlc_tick) at its last
                                             message */
} ringk_dev_test_t;

/* The block-level tests: a kernel of up to RINGK_DEV_BTEST_THREADS threads in all. */
#define RINGK_DEV_BTEST_THREADS 256
#define RINGK_DEV_BTEST_BLOCKS  4
#define RINGK_DEV_BTEST_WORDS   64    /* words of a block's collective send */

/* What the block of dev_block (the kernel under test) and dev_tally (its sink) saw. */
typedef struct ringk_dev_btest {
    uint64_t count;                              /* messages handled (by the loop's thread) */
    uint64_t sum;                                /* OP_SUM: the kernel's reduction */
    uint64_t bad;                                /* a thread saw what it should not have */
    uint64_t hits[RINGK_DEV_BTEST_THREADS];      /* per thread (block * threads + thread): the
                                                    messages it ran the handler on */
    uint64_t part[RINGK_DEV_BTEST_THREADS];      /* OP_SUM's partial sums */
    uint32_t slot[RINGK_DEV_BTEST_THREADS];      /* OP_SYNC's values */
    uint32_t shape[4];                           /* threads, blocks as the handler saw them */
    int      codes[RINGK_DEV_BTEST_THREADS];     /* per thread: a call's result */
    uint32_t words[RINGK_DEV_BTEST_BLOCKS][RINGK_DEV_BTEST_WORDS]; /* OP_BSEND: each block's
                                                    payload, written by its threads */
    union {
        ringk_msg_t m;
        uint8_t     bytes[sizeof(ringk_msg_t) + 64];
    } in;                                        /* OP_RECV: the message the kernel took */
    /* the sink's */
    uint64_t tally;                              /* messages */
    uint64_t tally_next[RINGK_DEV_BTEST_THREADS];/* per sender thread: its next round */
    uint64_t tally_bad;                          /* out of order, or a wrong word */
    uint64_t tally_blocks;                       /* collective messages, all words right */
} ringk_dev_btest_t;

/* dev_block's operations: the payload's first word. */
#define RINGK_DEV_BTEST_SUM     1u  /* {op, n, v0..}: sum v by all threads, sync, thread 0 adds */
#define RINGK_DEV_BTEST_SYNC    2u  /* {op, round}: each scope's sync seen by neighbours */
#define RINGK_DEV_BTEST_ERR     3u  /* {op, ta, tb, ea, eb}: threads ta, tb (kernel-wide
                                       indices) return -ea, -eb */
#define RINGK_DEV_BTEST_SEND    4u  /* {op, round}: every thread sends {its index, round} */
#define RINGK_DEV_BTEST_BSEND   5u  /* {op, round, n}: each block sends n words, collectively */
#define RINGK_DEV_BTEST_RECV    6u  /* {op, v}: the kernel takes the next message (v + 1) */
#define RINGK_DEV_BTEST_PARTIAL 7u  /* {op, which}: only thread 1 calls a collective (which:
                                       0 sync of the block, 1 recv, 2 a block's send); its
                                       result in codes[1] (the emulated device only: on a GPU
                                       it would hang) */
#define RINGK_DEV_BTEST_BARRIER 8u  /* {op}: the kernel waits at barrier "b", codes[t] */

#ifdef __cplusplus
extern "C" {
#endif
extern const ringk_device_entry_t ringk_dev_test_block;
extern const ringk_device_entry_t ringk_dev_test_quiet;
extern const ringk_device_entry_t ringk_dev_test_burst;
extern const ringk_device_entry_t ringk_dev_test_bounce;
extern const ringk_device_entry_t ringk_dev_test_tally;
extern const ringk_device_entry_t ringk_dev_test_count;
extern const ringk_device_entry_t ringk_dev_test_echo;
extern const ringk_device_entry_t ringk_dev_test_forward;
extern const ringk_device_entry_t ringk_dev_test_publish;
extern const ringk_device_entry_t ringk_dev_test_bad;
extern const ringk_device_entry_t ringk_dev_test_barrier;
extern const ringk_device_entry_t ringk_dev_test_recv;
/* nvcc only: the arg check's rules (ringk_device_cuda.h) on an account of a pointer built by
 * the test, and whether an address is in a mapping of the process */
int ringk_dev_test_judge(int device, const void *p, int type, int owner, const void *dev_ptr,
                         int pageable, int host_ptr, char *why, size_t why_len);
int ringk_dev_test_mapped_here(const void *p);
#ifdef __cplusplus
}
#endif

#endif
