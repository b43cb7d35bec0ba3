/* SPDX-License-Identifier: BSD-3-Clause */
/* Device kernels of many threads: the handler run by every thread of a block, and of every block
 * of a kernel, on each message; thread ids, barriers at each scope, per-thread and collective
 * sends, the collective receive, errors from part of the threads, and the launch's shape. On
 * the emulated device (test_device) and through the executor's CUDA branch on the stand-in
 * (test_device_streams), where each thread of a launch is a host thread; with nvcc's kernels
 * on a GPU (test_device_gpu, TEST_DEVICE_GPU), but for the calls made by part of a block,
 * which a GPU does not detect. */
#include "ringk_config.h"

#if !defined(TEST_DEVICE_GPU) || defined(HAVE_CUDA)
#include "test_device_util.h"
#include "test_device.h"
#ifdef TEST_DEVICE_STREAMS
#include "test_device_streams.h"
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef TEST_DEVICE_GPU
#include <cuda_runtime_api.h>

/* The test record in mapped memory (made before the test's first kernel: a pinned allocation
 * can wait for resident kernels): the host's address, the device's in *@a arg. */
static ringk_dev_btest_t *btest_new(ringk_dev_btest_t **arg)
{
    void *host, *dev;

    ck_assert_int_eq(cudaHostAlloc(&host, sizeof(ringk_dev_btest_t), cudaHostAllocMapped), 0);
    ck_assert_int_eq(cudaHostGetDevicePointer(&dev, host, 0), 0);
    memset(host, 0, sizeof(ringk_dev_btest_t));
    *arg = dev;
    return host;
}

static void btest_free(ringk_dev_btest_t *t)
{
    cudaFreeHost(t);
}
#else
static ringk_dev_btest_t *btest_new(ringk_dev_btest_t **arg)
{
    ringk_dev_btest_t *t = calloc(1, sizeof(*t));

    ck_assert_ptr_nonnull(t);
    *arg = t;
    return t;
}

static void btest_free(ringk_dev_btest_t *t)
{
    free(t);
}
#endif

static int cpu_nothing(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    (void)k;
    (void)msg;
    (void)arg;
    return 0;
}

/* Parameters of kernel @a name of @a entry with @a threads x @a blocks (0: the defaults), its
 * arg the test record @a t. */
static ringk_kernel_params_t block_params(const char *name, const ringk_device_entry_t *entry,
                                          ringk_dev_btest_t *t, unsigned threads,
                                          unsigned blocks)
{
    ringk_kernel_params_t p = dev_params(name, entry, NULL);

    p.arg = t;
    p.field_mask &= ~(uint64_t)(RINGK_KERNEL_PARAM_FIELD_THREADS |
                                RINGK_KERNEL_PARAM_FIELD_BLOCKS);
    if (threads != 0) {
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_THREADS;
        p.threads     = threads;
    }
    if (blocks != 0) {
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_BLOCKS;
        p.blocks      = blocks;
    }
    return p;
}

/* The kernel under test "blk" (@a threads x @a blocks) sending to "tally" (one thread). */
static void block_pair(ringk_ctx_t *ctx, ringk_dev_btest_t *t, unsigned threads,
                       unsigned blocks, ringk_kernel_t **blk, ringk_kernel_t **tally)
{
    static const char *const to[] = {"tally", NULL};
    ringk_kernel_params_t p = block_params("tally", &ringk_dev_test_tally, t, 1, 1);

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, tally), 0);
    p = block_params("blk", &ringk_dev_test_block, t, threads, blocks);
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.publishes_to = to;
    p.max_in       = 1024;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, blk), 0);
}

/* A send to "blk" that waits for room at most 10 s: one that finds none for that long fails
 * the test here, with the send's error, not at the test's timeout. */
static void block_send(ringk_ctx_t *ctx, const uint32_t *v, uint32_t words)
{
    ck_assert_int_eq(ringk_send(ctx, NULL, "blk", RINGK_MSG_DATA, v, 4 * words, 10000), 0);
}

/* Every operation of dev_block on a kernel of @a threads x @a blocks: each thread runs the
 * handler on each message; a reduction over all threads, barriers at each scope seen by
 * neighbours, per-thread sends in order per thread, one collective send per block, errors of
 * two threads counted once per message. */
static void block_run(unsigned threads, unsigned blocks)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_btest_t *a, *t = btest_new(&a);
    uint32_t all = threads * blocks, i, r, v[2 + 200];
    uint64_t msgs = 0, want = 0;
    ringk_kernel_t *blk, *tally;
    ringk_kernel_stats_t st;

    block_pair(ctx, a, threads, blocks, &blk, &tally);
    for (r = 0; r < 3; r++) { /* a reduction of 200 values */
        v[0] = RINGK_DEV_BTEST_SUM;
        v[1] = 200;
        for (i = 0; i < 200; i++) {
            v[2 + i] = r * 1000 + i * 7;
            want    += v[2 + i];
        }
        block_send(ctx, v, 202);
        msgs++;
    }
    for (r = 0; r < 5; r++) { /* barriers at each scope */
        block_send(ctx, (uint32_t[]){RINGK_DEV_BTEST_SYNC, r}, 2);
        msgs++;
    }
    for (r = 0; r < 3; r++) { /* per-thread sends */
        block_send(ctx, (uint32_t[]){RINGK_DEV_BTEST_SEND, r}, 2);
        msgs++;
    }
    for (r = 0; r < 2; r++) { /* collective sends, 40 words a block */
        block_send(ctx, (uint32_t[]){RINGK_DEV_BTEST_BSEND, r, 40}, 3);
        msgs++;
    }
    /* errors of the last thread and the first (or of thread 0 twice): one handler error */
    block_send(ctx, (uint32_t[]){RINGK_DEV_BTEST_ERR, all - 1, 0, 5, 7}, 5);
    msgs++;
    test_wait_u64(&t->count, msgs, 30);
    test_wait_u64(&t->tally, 3 * all + 2 * blocks, 30);
    st = STATS_AT(blk, msgs_in, msgs);
    ck_assert_uint_eq(st.msgs_in, msgs);
    ck_assert_uint_eq(STATS_AT(blk, handler_errors, 1).handler_errors, 1);
    ck_assert_uint_eq(t->shape[0], threads);
    ck_assert_uint_eq(t->shape[1], blocks);
    st = stats_of(blk); /* the statistics report the shape the kernel runs with */
    ck_assert_uint_eq(st.threads, threads);
    ck_assert_uint_eq(st.blocks, blocks);
#ifdef TEST_DEVICE_STREAMS
    /* the stand-in holds 256 blocks of any entry: the kernel's share, rounded up */
    ck_assert_uint_eq(st.block_share, (blocks * 1000000u + 255) / 256);
#elif !defined(TEST_DEVICE_GPU)
    ck_assert_uint_eq(st.block_share, 0); /* the emulated device has no block slots */
#else
    ck_assert_uint_gt(st.block_share, 0);
#endif
#ifdef TEST_DEVICE_STREAMS
    /* the path taken: the stand-in launched the shape asked for */
    ck_assert_uint_eq(__atomic_load_n(&tds_last_threads, __ATOMIC_RELAXED), threads);
    ck_assert_uint_eq(__atomic_load_n(&tds_last_blocks, __ATOMIC_RELAXED), blocks);
#endif
    ck_assert_uint_eq(STATS_AT(blk, msgs_out, 3 * all + 2 * blocks).msgs_out,
                      3 * all + 2 * blocks);
    /* what each thread recorded is read once the launches returned (the context's destroy
     * waits for them): a thread's record of the last message is not ordered before thread 0's
     * count */
    ck_assert_int_eq(ringk_kernel_destroy(blk), 0);
    ck_assert_int_eq(ringk_kernel_destroy(tally), 0);
    ringk_ctx_destroy(ctx);
    for (i = 0; i < all; i++) {
        ck_assert_msg(t->hits[i] == msgs, "thread %u ran the handler on %llu of %llu messages",
                      i, (unsigned long long)t->hits[i], (unsigned long long)msgs);
        ck_assert_uint_eq(t->tally_next[i], 3); /* its three sends, in order */
        ck_assert_int_eq(t->codes[i], 0);
    }
    for (; i < RINGK_DEV_BTEST_THREADS; i++) {
        ck_assert_uint_eq(t->hits[i], 0);
    }
    ck_assert_uint_eq(t->sum, want);
    ck_assert_uint_eq(t->bad, 0);
    ck_assert_uint_eq(t->tally_bad, 0);
    ck_assert_uint_eq(t->tally_blocks, 2 * blocks); /* one message per block and round */
    btest_free(t);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}

/* A handler on 1, 4 and 32 threads of one block. */
START_TEST(test_device_block_threads)
{
    static const unsigned shapes[] = {1, 4, 32};

    block_run(shapes[_i], 1);
}
END_TEST

/* A kernel of several blocks: every block runs the handler on every message (each with its
 * block index), barriers of the whole kernel span the blocks, one collective send per block;
 * blocks of a size that is not a multiple of the warp (a short last warp). */
START_TEST(test_device_block_blocks)
{
    block_run(_i ? 40 : 4, _i ? 2 : 3);
}
END_TEST

/* The kernel's threads take the next message together: every thread sees it, once. */
START_TEST(test_device_block_recv)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_btest_t *a, *t = btest_new(&a);
    ringk_kernel_t *blk, *tally;
    uint32_t i, r;

    block_pair(ctx, a, 32, 1, &blk, &tally);
    for (r = 0; r < 4; r++) {
        block_send(ctx, (uint32_t[]){RINGK_DEV_BTEST_RECV, 10 * r}, 2);
        block_send(ctx, (uint32_t[]){0, 10 * r + 1}, 2);
    }
    test_wait_u64(&t->count, 8, 30);
    ck_assert_uint_eq(STATS_AT(blk, msgs_in, 8).msgs_in, 8);
    ck_assert_int_eq(ringk_kernel_destroy(blk), 0);
    ck_assert_int_eq(ringk_kernel_destroy(tally), 0);
    ringk_ctx_destroy(ctx); /* the launches returned: every thread's record is read */
    ck_assert_uint_eq(t->bad, 0);
    for (i = 0; i < 32; i++) {
        ck_assert_int_eq(t->codes[i], 0);
        ck_assert_uint_eq(t->hits[i], 4); /* the handler ran on the four it was handed */
    }
    btest_free(t);
}
END_TEST

#ifndef TEST_DEVICE_GPU
/* A collective call made by one thread of four, the others returning from the handler: that
 * thread gets -EDEADLK (a sync of the block, a receive, a block's send), and the kernel goes
 * on with the next message. */
START_TEST(test_device_block_partial)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_btest_t *a, *t = btest_new(&a);
    ringk_kernel_t *blk, *tally;
    uint32_t which;

    block_pair(ctx, a, 4, 1, &blk, &tally);
    for (which = 0; which < 3; which++) {
        t->codes[1] = 0;
        block_send(ctx, (uint32_t[]){RINGK_DEV_BTEST_PARTIAL, which}, 2);
        /* the next message is handed over once every thread returned from this one */
        block_send(ctx, (uint32_t[]){RINGK_DEV_BTEST_SYNC, which}, 2);
        test_wait_u64(&t->count, 2 * which + 2, 30);
        ck_assert_msg(t->codes[1] == -EDEADLK, "call %u by part of the block: %d", which,
                      t->codes[1]);
    }
    ck_assert_uint_eq(t->bad, 0);
    ck_assert_uint_eq(t->tally, 0); /* the refused block send sent nothing */
    ck_assert_int_eq(ringk_kernel_destroy(blk), 0);
    ck_assert_int_eq(ringk_kernel_destroy(tally), 0);
    ringk_ctx_destroy(ctx);
    btest_free(t);
}
END_TEST
#endif

/* The shape's parameters: the default is a warp; out-of-range values are refused naming the
 * limit; more threads than the device runs at once is -E2BIG; the CPU executor ignores them. */
START_TEST(test_device_block_shape)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_btest_t *a, *t = btest_new(&a);
    ringk_kernel_params_t p = block_params("blk", &ringk_dev_test_block, a, 0, 0);
    ringk_kernel_t *k;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    block_send(ctx, (uint32_t[]){RINGK_DEV_BTEST_SYNC, 0}, 2);
    test_wait_u64(&t->count, 1, 30);
    ck_assert_uint_eq(t->shape[0], 32);
    ck_assert_uint_eq(t->shape[1], 1);
    ck_assert_uint_eq(t->bad, 0);
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    p = block_params("bad", &ringk_dev_test_block, a, 0, 0);
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_THREADS;
    p.threads     = 1025;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "threads 1025 is out of range 1..1024"));
    p.threads = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    p.threads     = 32;
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_BLOCKS;
    p.blocks      = 65536;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "blocks 65536 is out of range 1..65535"));
    logbuf[0] = '\0';
#if defined(TEST_DEVICE_STREAMS) || defined(TEST_DEVICE_GPU)
#  ifdef TEST_DEVICE_STREAMS
    p.blocks = tds_max_blocks + 1; /* more than the stand-in device holds at once */
#  else
    /* the test entry is built for at most RINGK_DEV_BTEST_THREADS threads a block
     * (__launch_bounds__): more is refused by what CUDA says of it */
    p.threads = 1024;
    p.blocks  = 1;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -E2BIG);
    ck_assert_msg(strstr(logbuf, "threads 1024 is above the") != NULL, "%s", logbuf);
    logbuf[0] = '\0';
    p.threads = RINGK_DEV_BTEST_THREADS;
    p.blocks  = 65535; /* more than any GPU holds at once */
#  endif
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -E2BIG);
    ck_assert_msg(strstr(logbuf, "holds at once") != NULL, "%s", logbuf);
#else
    p.blocks = 33; /* 1056 host threads */
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -E2BIG);
    ck_assert_ptr_nonnull(strstr(logbuf, "threads 32 x blocks 33"));
#endif
    /* the CPU executor: the shape is the device's, and ignored */
    p = (ringk_kernel_params_t){
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_THREADS | RINGK_KERNEL_PARAM_FIELD_BLOCKS,
        .name = "cpu", .handler = cpu_nothing, .threads = 1024, .blocks = 4
    };
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    {
        ringk_kernel_stats_t st = stats_of(k); /* one host thread runs its handler */

        ck_assert_uint_eq(st.threads, 1);
        ck_assert_uint_eq(st.blocks, 1);
        ck_assert_uint_eq(st.block_share, 0);
    }
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    ringk_ctx_destroy(ctx);
    btest_free(t);
}
END_TEST

#ifdef TEST_DEVICE_STREAMS
/* Kernels resident on one device share its block slots: on a stand-in that holds 8 blocks of
 * any entry, beside a kernel of 5 blocks one of 4 is refused (-E2BIG, both shares named), one
 * of 3 fits, and once the first is destroyed its slots are free again. */
START_TEST(test_device_block_resident)
{
    const uint32_t max_blocks = tds_max_blocks;
    ringk_ctx_t *ctx;
    ringk_dev_btest_t *a, *t = btest_new(&a);
    ringk_kernel_params_t p = block_params("five", &ringk_dev_test_block, a, 1, 5);
    ringk_kernel_t *five, *three, *k;

    tds_max_blocks = 8;
    ctx = ctx_new();
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &five), 0);
    ck_assert_uint_eq(stats_of(five).block_share, 625000); /* 5 of 8 */
    logbuf[0] = '\0';
    p = block_params("four", &ringk_dev_test_block, a, 1, 4);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -E2BIG);
    ck_assert_msg(strstr(logbuf, "its 4 blocks of 1 threads take 50.0%") != NULL &&
                  strstr(logbuf, "resident there take 62.5%") != NULL, "%s", logbuf);
    p = block_params("three", &ringk_dev_test_block, a, 1, 3);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &three), 0);
    ck_assert_uint_eq(stats_of(three).block_share, 375000);
    p = block_params("one", &ringk_dev_test_block, a, 1, 1);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -E2BIG); /* the device is full */
    ck_assert_int_eq(ringk_kernel_destroy(five), 0);
    p = block_params("four", &ringk_dev_test_block, a, 1, 4);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    /* the kernels still run: each handles a message on all its blocks */
    ck_assert_int_eq(ringk_send(ctx, NULL, "three", RINGK_MSG_DATA,
                                (uint32_t[]){RINGK_DEV_BTEST_SYNC, 0}, 8, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t->count, 1, 30);
    ck_assert_int_eq(ringk_send(ctx, NULL, "four", RINGK_MSG_DATA,
                                (uint32_t[]){RINGK_DEV_BTEST_SYNC, 0}, 8, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t->count, 2, 30);
    ck_assert_uint_eq(t->shape[1], 4);
    ck_assert_uint_eq(t->bad, 0);
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    ck_assert_int_eq(ringk_kernel_destroy(three), 0);
    ringk_ctx_destroy(ctx);
    btest_free(t);
    tds_max_blocks = max_blocks;
}
END_TEST
#endif

void test_device_block_cases(TCase *tc)
{
    tcase_add_loop_test(tc, test_device_block_threads, 0, 3);
    tcase_add_loop_test(tc, test_device_block_blocks, 0, 2);
    tcase_add_test(tc, test_device_block_recv);
#ifndef TEST_DEVICE_GPU
    tcase_add_test(tc, test_device_block_partial); /* a GPU would hang */
#endif
    tcase_add_test(tc, test_device_block_shape);
#ifdef TEST_DEVICE_STREAMS
    tcase_add_test(tc, test_device_block_resident);
#endif
}
#endif
