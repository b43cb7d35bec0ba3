/* SPDX-License-Identifier: BSD-3-Clause */
/* The cases only test_device_streams runs: the device executor's CUDA branch on the CUDA
 * stand-in (test_device_streams.h) — the stream pool, resident kernels and the program's CUDA
 * calls, stream capture, status errors, blocking launches, faults, a dead target, failed
 * creates, hardware queues, the kernel's argument, entries loaded and unloaded, a stuck launch.
 * The shared scenarios are in test_device.c, built into this program too. */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "test_device_util.h"
#include "test_device.h"
#include "test_device_streams.h"
#include "core/ringk_cuda.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* What the stuck-launch test leaves allocated on purpose (one process runs every test with
 * CK_FORK=no). */
static unsigned long live_kept;

/* Nothing a GPU would have blocked on happened during the test, and the runtime freed what it
 * allocated on the device. */
void streams_teardown(void)
{
    tds_pageable = 1;
    ck_assert_uint_eq(__atomic_load_n(&tds_violations, __ATOMIC_RELAXED), 0);
    ck_assert_uint_eq(__atomic_load_n(&tds_live, __ATOMIC_RELAXED), live_kept);
}

/* The kernels' streams are made with the device's slabs, before any kernel runs, and reused: a
 * stream made while a kernel is resident could share its hardware queue (a violation, which the
 * teardown looks for). */
START_TEST(test_device_streams_pool)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t[2];
    ringk_kernel_params_t p;
    ringk_kernel_t *a, *b;
    unsigned long made;
    uint32_t i;

    memset(t, 0, sizeof(t));
    p = dev_params("a", &ringk_dev_test_count, &t[0]);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &a), 0);
    ck_assert_int_eq(host_send(ctx, "a", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t[0].count, 1, 30);
    made = __atomic_load_n(&tds_streams_made, __ATOMIC_RELAXED);
    for (i = 0; i < 5; i++) { /* "a" is resident all along */
        p = dev_params("b", &ringk_dev_test_count, &t[1]);
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &b), 0);
        ck_assert_int_eq(host_send(ctx, "b", 0, i, RINGK_WAIT_FOREVER), 0);
        test_wait_u64(&t[1].count, i + 1, 30);
        ck_assert_int_eq(ringk_kernel_destroy(b), 0);
    }
    ck_assert_uint_eq(__atomic_load_n(&tds_streams_made, __ATOMIC_RELAXED), made);
    ck_assert_uint_eq(t[1].out_of_order, 0);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* While device kernels are resident, ringk_device_kernels() counts them, and the transport's
 * calls that would wait for the device are not made: the P2P canary is refused (the path is
 * left unverified) and GPU staging takes pageable memory instead of pinning it. */
START_TEST(test_device_streams_resident)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    ringk_kernel_t *k;
    char why[256] = "";
    int pinned = 1;
    void *stage;

    ck_assert_int_eq(ringk_device_kernels(0), 0);
    ck_assert_int_eq(ringk_cuda_resident(-1), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(host_send(ctx, "count", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t.count, 1, 30);
    ck_assert_int_eq(ringk_device_kernels(0), 1);
    ck_assert_int_eq(ringk_device_kernels(1), 0);
    ck_assert_int_eq(ringk_device_kernels(1000), 0);
    ck_assert_int_eq(ringk_cuda_resident(0), 1);
    ck_assert_int_eq(ringk_cuda_resident(-1), 1);
#ifdef HAVE_CUDA
    ck_assert_int_eq(ringk_cuda_p2p_canary("0000:07:00.0", "0000:08:00.0", why, sizeof(why)),
                     -EBUSY);
    ck_assert_str_eq(why, "this process has 1 ringk device kernels on its GPUs: the canary's "
                          "allocations would wait for them");
#else /* no canary at all */
    ck_assert_int_eq(ringk_cuda_p2p_canary("0000:07:00.0", "0000:08:00.0", why, sizeof(why)),
                     -ENODEV);
#endif
    stage = ringk_cuda_stage_get(1 << 20, &pinned);
    ck_assert_ptr_nonnull(stage);
    ck_assert_int_eq(pinned, 0);
    memset(stage, 1, 1 << 20);
    ringk_cuda_stage_put(stage, 1 << 20, pinned);
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    ck_assert_int_eq(ringk_device_kernels(0), 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* While the program captures a stream (global mode) in another thread, kernels are made, take
 * messages and are destroyed: libringk's queries and setup copies are made in relaxed mode,
 * which the capture does not forbid (a forbidden call would fail, invalidate the capture and,
 * taken for a fault, mark the kernel terminated while its launch runs on). */
START_TEST(test_device_streams_capture)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    ringk_kernel_t *k;
    uint32_t i;

    __atomic_store_n(&tds_capture, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; i < 100; i++) {
        ck_assert_int_eq(host_send(ctx, "count", 0, i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&t.count, 100, 30);
    usleep(50000); /* the proxy looks at the kernel's stream every millisecond */
    ck_assert_int_eq(stats_of(k).state, RINGK_KERNEL_ACTIVE);
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    ringk_ctx_destroy(ctx);
    __atomic_store_n(&tds_capture, 0, __ATOMIC_RELEASE);
    ck_assert_uint_eq(t.out_of_order, 0);
    ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf);
}
END_TEST

/* A query of a kernel's stream that fails with an error that does not end the context says
 * nothing of the launch: logged once, and the kernel goes on (only a sticky error is a fault). */
START_TEST(test_device_streams_status_error)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    ringk_kernel_t *k;
    uint32_t i;

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(host_send(ctx, "count", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t.count, 1, 30);
    __atomic_store_n(&tds_status_errors, 20, __ATOMIC_RELEASE);
    for (i = 0; (i < 10000) && (__atomic_load_n(&tds_status_errors, __ATOMIC_ACQUIRE) > 0); i++) {
        usleep(1000);
    }
    ck_assert_uint_eq(__atomic_load_n(&tds_status_errors, __ATOMIC_ACQUIRE), 0);
    ck_assert_int_eq(stats_of(k).state, RINGK_KERNEL_ACTIVE);
    for (i = 1; i < 100; i++) {
        ck_assert_int_eq(host_send(ctx, "count", 0, i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&t.count, 100, 30);
    ck_assert_msg(strstr(logbuf, "kernel 'count': CUDA could not say whether its launch on CUDA "
                         "device 0 runs (the device kernel's stream: stand-in error that is not "
                         "sticky): not taken for a fault") != NULL, "log: %s", logbuf);
    ck_assert_ptr_null(strstr(strstr(logbuf, "not taken for a fault") + 1,
                              "not taken for a fault")); /* once */
    ck_assert_ptr_null(strstr(logbuf, "failed on CUDA device"));
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* With CUDA_LAUNCH_BLOCKING=1 a launch returns only once its kernel did: device kernels are
 * refused with the reason (a create would hang), or run on the CPU where they may. */
START_TEST(test_device_streams_launch_blocking)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t), cpu;
    ringk_kernel_t *k;

    setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EDEADLK);
    ck_assert_msg(strstr(logbuf, "kernel 'count' (CUDA backend only): CUDA_LAUNCH_BLOCKING=1 "
                         "makes a launch return only once its kernel finished") != NULL,
                  "log: %s", logbuf);
    logbuf[0] = '\0';
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_MODE;
    p.mode        = RINGK_MODE_EVENT_DRIVEN;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EDEADLK);
    cpu = cpu_sink_params;
    cpu.field_mask  |= RINGK_KERNEL_PARAM_FIELD_BACKENDS | RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY;
    cpu.backends     = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
    cpu.device_entry = &ringk_dev_test_count;
    cpu_sink_count   = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &cpu, &k), 0);
    ck_assert_int_eq(stats_of(k).device, RINGK_DEVICE_NONE);
    ck_assert_msg(strstr(logbuf, "kernel 'sink' runs on the CPU: CUDA_LAUNCH_BLOCKING=1") != NULL,
                  "log: %s", logbuf);
    ck_assert_int_eq(host_send(ctx, "sink", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&cpu_sink_count, 1, 30);
    unsetenv("CUDA_LAUNCH_BLOCKING");
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A create that fails once the kernel's memory is laid out (-EDEADLK here: an entry libringk
 * did not know, asked for while a device kernel runs) gives that memory back: 40 such failures
 * in slabs of 1 MiB (about 12 small kernels), then 8 kernels more fit. */
START_TEST(test_device_streams_failed_create_memory)
{
    static ringk_device_entry_t unknown; /* a name no other test uses: unknown in one process */
    ringk_ctx_t *ctx;
    ringk_dev_test_t t = {0}, tb = {0}, tk[8];
    ringk_kernel_params_t p;
    ringk_kernel_t *k, *ks[8];
    char name[16];
    unsigned i;

    unknown      = ringk_dev_test_count;
    unknown.name = "unknown_mem";
    slabs_mb("1"); /* unset again by slabs_teardown */
    ctx = ctx_new();
    p = small_params("count", &ringk_dev_test_count, &t);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(host_send(ctx, "count", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t.count, 1, 30); /* launched and running */
    p = small_params("unknown", &unknown, &tb);
    for (i = 0; i < 40; i++) {
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &ks[0]), -EDEADLK);
    }
    memset(tk, 0, sizeof(tk));
    for (i = 0; i < 8; i++) {
        snprintf(name, sizeof(name), "k%u", i);
        p = small_params(name, &ringk_dev_test_count, &tk[i]);
        ck_assert_msg(ringk_kernel_create(ctx, &p, &ks[i]) == 0, "kernel %u: %s", i, logbuf);
    }
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A launch that faults: the proxy finds the error on its stream, logs it and marks the kernel
 * terminated, so that a terminate and the context's destroy return. */
START_TEST(test_device_streams_fault)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    ringk_kernel_t *k;
    int i;

    tds_fault_next = 1;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; (i < 10000) && (strstr(logbuf, "failed on CUDA device 0") == NULL); i++) {
        usleep(1000);
    }
    ck_assert_msg(strstr(logbuf, "failed on CUDA device 0 (the device kernel: stand-in "
                         "fault)") != NULL, "log: %s", logbuf);
    ck_assert_int_eq(stats_of(k).state, RINGK_KERNEL_TERMINATED);
    ck_assert_uint_eq(t.count, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* Host memory registered with CUDA and given back while a device kernel is resident stays
 * mapped (its unregistration could wait for the kernel) and is left for later; once the
 * context's kernels are gone, the next flush gives it back, unregistered and unmapped. (This
 * program has its own copy of the core functions, as the transport has: libringk's release
 * flushes libringk's copy, the transport's next area flushes its own.) */
START_TEST(test_device_streams_host_release)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    ringk_kernel_t *k;
    void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int i, ret;

    ck_assert_ptr_ne(m, MAP_FAILED);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    for (i = 0; (i < 10000) && (ringk_cuda_resident(-1) == 0); i++) {
        usleep(1000);
    }
    ck_assert_int_gt(ringk_cuda_resident(-1), 0);
    ret = ringk_cuda_host_release(m, m, 8192);
    if (ret == 1) { /* no CUDA runtime: nothing was registered, so it is unmapped at once */
        printf("# test_device_streams_host_release: no CUDA runtime in this process: released "
               "at once\n");
        ck_assert_uint_eq(ringk_cuda_host_deferred(), 0);
        ringk_ctx_destroy(ctx);
        ck_assert_int_eq(test_is_mapped(m), 0);
        return;
    }
    ck_assert_int_eq(ret, 0);
    ck_assert_uint_eq(ringk_cuda_host_deferred(), 1);
    ((volatile uint8_t*)m)[8191] = 1; /* still mapped */
    ck_assert_int_eq(test_is_mapped(m), 1);
    ck_assert_uint_eq(ringk_cuda_host_flush(), 0); /* the kernel still runs */
    ck_assert_uint_eq(ringk_cuda_host_deferred(), 1);
    ringk_ctx_destroy(ctx);
    ck_assert_uint_eq(ringk_cuda_resident(-1), 0);
    ck_assert_uint_eq(ringk_cuda_ipc_flush(), 1);
    ck_assert_uint_eq(ringk_cuda_host_deferred(), 0);
    ck_assert_int_eq(test_is_mapped(m), 0); /* unmapped */
}
END_TEST

/* A direct target whose launch faulted never closes: a sender waiting for room in its inbox
 * reads the route again while it waits, and once the target is destroyed (its route dropped)
 * sends through the host, to the CPU kernel that took the name; nothing hangs. */
START_TEST(test_device_streams_dead_target)
{
    static const char *const to_sink[] = {"sink", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t ts = {0}, tf = {0};
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, &ts);
    ringk_kernel_t *sink, *fwd;
    uint32_t i;

    cpu_sink_count = 0;
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN;
    p.inbox_size   = 16;
    p.max_in       = 64;
    tds_fault_next = 1;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), 0);
    p = dev_params("fwd", &ringk_dev_test_forward, &tf);
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_sink;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &fwd), 0);
    for (i = 0; i < 64; i++) { /* more than the dead inbox holds: fwd waits for room */
        ck_assert_int_eq(host_send(ctx, "fwd", 0, i, RINGK_WAIT_FOREVER), 0);
    }
    for (i = 0; (i < 10000) && (stats_of(fwd).sent_direct == 0); i++) {
        usleep(1000);
    }
    ck_assert_uint_gt(stats_of(fwd).sent_direct, 0); /* the route was direct */
    ck_assert_int_eq(ringk_kernel_destroy(sink), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &cpu_sink_params, &sink), 0);
    for (i = 0; i < 10; i++) {
        ck_assert_int_eq(host_send(ctx, "fwd", 0, 100 + i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&cpu_sink_count, 10, 30);
    ck_assert_int_eq(tf.last_error, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A launch that has not returned 10 s after its loop finished: the kernel's destroy and the
 * context's return after the bound, and neither frees what the launch may still use (the
 * stand-in counts a free while a launch runs as a violation). */
START_TEST(test_device_streams_stuck)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    unsigned long queues;
    ringk_kernel_t *k;
    int i;

    tds_hang_next_ms = 13000;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(host_send(ctx, "count", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t.count, 1, 30);
    ck_assert_int_eq(ringk_kernel_destroy(k), 0);
    ck_assert_msg(strstr(logbuf, "kernel 'count': its launch on CUDA device 0 still runs 10 s "
                         "after it finished") != NULL, "log: %s", logbuf);
    ringk_ctx_destroy(ctx);
    ck_assert_msg(strstr(logbuf, "CUDA device 0: 1 launches that may write its memory") !=
                  NULL, "log: %s", logbuf);
    /* the slabs stay for the next contexts, which take what lies past the stuck kernel's
     * memory again: one after another, five kernels of 2 MiB of mapped memory each fit the
     * 8 MiB slab (three would without that) */
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE;
    p.inbox_size  = 4096;
    for (i = 0; i < 5; i++) {
        ctx = ctx_new();
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
        ringk_ctx_destroy(ctx);
        ck_assert_msg(logbuf[0] == '\0', "log: %s", logbuf); /* logged once, above */
    }
    for (i = 0; (i < 10000) && (__atomic_load_n(&tds_running, __ATOMIC_ACQUIRE) > 0); i++) {
        usleep(1000); /* the launch returns: later tests of this process start clean */
    }
    ck_assert_uint_eq(__atomic_load_n(&tds_running, __ATOMIC_ACQUIRE), 0);
    /* left: the device memory and mapped memory of the slot, its setup stream and the streams
     * of its kernels (one per hardware queue but two) */
    ck_assert_ptr_nonnull(getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
    queues = (unsigned long)atoi(getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
    ck_assert_uint_eq(__atomic_load_n(&tds_live, __ATOMIC_RELAXED), live_kept + 3 + queues - 2);
    live_kept += 3 + queues - 2;
}
END_TEST

/* A CUDA device takes as many device kernels as its hardware queues less two (the setup
 * stream's and one for the process's other streams): the next is refused with -ENOSPC, naming
 * the limit, and a kernel destroyed makes room. The count is read when the device's slabs are
 * allocated (this test's first kernel). */
START_TEST(test_device_streams_queues)
{
    const char *was = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    char *old = (was != NULL) ? strdup(was) : NULL;
    ringk_dev_test_t t[3];
    ringk_kernel_params_t p, cpu;
    ringk_kernel_t *k[3];
    ringk_ctx_t *ctx;

    memset(t, 0, sizeof(t));
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4", 1);
    ctx = ctx_new();
    p   = dev_params("q0", &ringk_dev_test_count, &t[0]);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[0]), 0);
    p = dev_params("q1", &ringk_dev_test_count, &t[1]);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[1]), 0);
    p = dev_params("q2", &ringk_dev_test_count, &t[2]);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[2]), -ENOSPC);
    ck_assert_msg(strstr(logbuf, "kernel 'q2' (CUDA backend only): CUDA device 0 has 2 device "
                         "kernels, the most its 4 hardware queues take") != NULL,
                  "log: %s", logbuf);
    /* a kernel that may run on the CPU too runs there */
    cpu = cpu_sink_params;
    cpu.field_mask  |= RINGK_KERNEL_PARAM_FIELD_BACKENDS | RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY;
    cpu.backends     = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
    cpu.device_entry = &ringk_dev_test_count;
    cpu_sink_count   = 0;
    ck_assert_int_eq(ringk_kernel_create(ctx, &cpu, &k[2]), 0);
    ck_assert_int_eq(stats_of(k[2]).device, RINGK_DEVICE_NONE);
    ck_assert_int_eq(host_send(ctx, "sink", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&cpu_sink_count, 1, 30);
    ck_assert_int_eq(ringk_kernel_destroy(k[2]), 0);
    ck_assert_int_eq(ringk_kernel_destroy(k[0]), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k[2]), 0);
    ck_assert_int_eq(host_send(ctx, "q2", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t[2].count, 1, 30);
    ringk_ctx_destroy(ctx);
    if (old != NULL) {
        setenv("CUDA_DEVICE_MAX_CONNECTIONS", old, 1);
        free(old);
    } else {
        unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
    }
}
END_TEST

/* On a device without pageable memory access a kernel's arg must be memory the device reads (a
 * fault there would end the process's CUDA context): a host address is refused with -EFAULT
 * and the reason, a kernel that may run on the CPU runs there instead, NULL is not looked at,
 * and mapped memory at its device address is taken (the handler counts through it). */
START_TEST(test_device_streams_arg)
{
    const ringk_device_cuda_ops_t *ops = ringk_dev_test_count.cuda;
    ringk_dev_test_t t = {0}, *th;
    ringk_kernel_params_t p, cpu;
    ringk_kernel_t *k;
    ringk_ctx_t *ctx;
    char why[160];
    void *h, *d;

    tds_pageable = 0; /* back to 1 by streams_teardown */
    ck_assert_int_eq(ops->alloc_mapped(0, &h, &d, sizeof(t), why, sizeof(why)), 0);
    th = memset(h, 0, sizeof(t));
    ctx = ctx_new();
    p   = dev_params("host", &ringk_dev_test_count, &t);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -EFAULT);
    ck_assert_msg(strstr(logbuf, "kernel 'host' (CUDA backend only): stand-in: arg 0x") != NULL,
                  "log: %s", logbuf);
    cpu = cpu_sink_params;
    cpu.field_mask  |= RINGK_KERNEL_PARAM_FIELD_BACKENDS | RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY;
    cpu.backends     = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
    cpu.device_entry = &ringk_dev_test_count;
    cpu.arg          = &t;
    ck_assert_int_eq(ringk_kernel_create(ctx, &cpu, &k), 0);
    ck_assert_int_eq(stats_of(k).device, RINGK_DEVICE_NONE);
    ck_assert_msg(strstr(logbuf, "kernel 'sink' runs on the CPU: stand-in: arg 0x") != NULL,
                  "log: %s", logbuf); /* a warning: the program's mistake */
    p = dev_params("none", &ringk_dev_test_echo, NULL);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(stats_of(k).device, TEST_DEVICE_INDEX);
    p = dev_params("mapped", &ringk_dev_test_count, d);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(host_send(ctx, "mapped", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&th->count, 1, 30);
    ringk_ctx_destroy(ctx);
    ops->free_mapped(h);
}
END_TEST

/* An entry's library unloaded (its destructor calls ringk_device_entry_unregister) while
 * another entry's kernel still runs on the device: the device's own calls (slabs, setup
 * stream), which went through the first entry's ops, go through the other's from then on, and
 * a kernel's stream calls through its own entry's. The unloaded ops are wiped here: a call
 * through them would crash the test. */
START_TEST(test_device_streams_entry_unloaded)
{
    static ringk_device_cuda_ops_t ops;
    static ringk_device_entry_t lib;
    ringk_dev_test_t ta = {0}, tb = {0};
    ringk_kernel_params_t p;
    ringk_kernel_t *a, *b;
    ringk_ctx_t *ctx;
    uint32_t i;

    ops      = *ringk_dev_test_count.cuda;
    lib      = ringk_dev_test_count;
    lib.name = "lib";
    lib.cuda = &ops;
    ck_assert_int_eq(ringk_device_entry_register(&lib), 0);
    ctx = ctx_new();
    p   = dev_params("a", &lib, &ta); /* the device's first kernel: its calls are lib's */
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &a), 0);
    p = dev_params("b", &ringk_dev_test_count, &tb);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &b), 0);
    ck_assert_int_eq(host_send(ctx, "a", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&ta.count, 1, 30);
    ck_assert_int_eq(ringk_kernel_destroy(a), 0);
    ringk_device_entry_unregister(&lib);
    memset(&ops, 0, sizeof(ops)); /* its library is gone */
    for (i = 0; i < 100; i++) {
        ck_assert_int_eq(host_send(ctx, "b", 0, i, RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&tb.count, 100, 30);
    ck_assert_uint_eq(tb.out_of_order, 0);
    ringk_ctx_destroy(ctx); /* the slabs freed through ringk_dev_test_count's ops */
}
END_TEST

/* Loading kernels and sizing the stack, which on a GPU wait for every running kernel: before
 * the first device kernel starts, every registered entry (RINGK_DEVICE_ENTRY) is loaded and the
 * stack limit raised to the largest need (ringk_dev_test_recv's 2 KiB); one whose load fails
 * (ringk_dev_test_bad here) is left out, and a kernel of it is then refused. An entry libringk
 * did not know then is refused while kernels run (-EDEADLK), unless CUDA loads eagerly, and then
 * only if it fits the stack (-E2BIG); once no kernel runs, it is loaded like the others. */
START_TEST(test_device_streams_entries)
{
    static const char *const names[] = {"ringk_dev_test_count", "ringk_dev_test_echo",
        "ringk_dev_test_forward", "ringk_dev_test_publish", "ringk_dev_test_barrier",
        "ringk_dev_test_recv"};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t t = {0}, tl = {0};
    ringk_kernel_params_t p = dev_params("count", &ringk_dev_test_count, &t);
    /* the same kernel as entries libringk does not know (known once used: kept for the
     * process, as an entry is) */
    static ringk_device_entry_t late, big, late2;
    ringk_kernel_t *k, *kl;
    unsigned i;

    late       = ringk_dev_test_count;
    late.name  = "late";
    big        = late;
    big.name   = "big";
    late2      = late;
    late2.name = "late2";
    ck_assert_int_eq(ringk_device_entry_register(NULL), -EINVAL);
    tds_load_fails = "ringk_dev_test_bad";
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    tds_load_fails = NULL;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        ck_assert_msg(tds_is_loaded(names[i]), "%s not loaded", names[i]);
    }
    ck_assert(!tds_is_loaded("ringk_dev_test_bad"));
    ck_assert_msg(strstr(logbuf, "device_entry 'ringk_dev_test_bad' on CUDA device 0: stand-in: "
                         "no kernel image for this device") != NULL, "log: %s", logbuf);
    ck_assert_uint_eq(tds_stack_limit, 2048);
    ck_assert_int_eq(host_send(ctx, "count", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&t.count, 1, 30); /* launched and running */

    p = dev_params("bad", &ringk_dev_test_bad, &tl);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &kl), -EDEADLK);
    p = dev_params("late", &late, &tl);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &kl), -EDEADLK);
    ck_assert_msg(strstr(logbuf, "kernel 'late': device_entry 'late' was not loaded on CUDA "
                         "device 0 before device kernels started there") != NULL, "log: %s",
                  logbuf);
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &kl), 0); /* eager, 512 bytes */
    p = dev_params("big", &big, &tl);
    tds_stack_need_next = 4096;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -E2BIG);
    ck_assert_msg(strstr(logbuf, "kernel 'big': device_entry 'big' needs 4096 bytes of stack "
                         "per thread, more than CUDA device 0's limit of 2048") != NULL,
                  "log: %s", logbuf);
    unsetenv("CUDA_MODULE_LOADING");
    ck_assert_int_eq(host_send(ctx, "late", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&tl.count, 1, 30);
    ringk_ctx_destroy(ctx);

    /* no device kernel of the process left: an unknown entry is loaded before it starts */
    ctx = ctx_new();
    memset(&tl, 0, sizeof(tl));
    p = dev_params("late2", &late2, &tl);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &kl), 0);
    ck_assert_int_eq(host_send(ctx, "late2", 0, 0, RINGK_WAIT_FOREVER), 0);
    test_wait_u64(&tl.count, 1, 30);
    ringk_ctx_destroy(ctx);
}
END_TEST

void test_device_streams_first(TCase *tc)
{
    tcase_add_test(tc, test_device_streams_entries);
    tcase_add_test(tc, test_device_streams_queues); /* before any launch sticks */
    tcase_add_test(tc, test_device_streams_arg);
    tcase_add_test(tc, test_device_streams_entry_unloaded);
    tcase_add_test(tc, test_device_streams_fault);
    tcase_add_test(tc, test_device_streams_host_release);
    tcase_add_test(tc, test_device_streams_dead_target);
    tcase_add_test(tc, test_device_streams_failed_create_memory);
    tcase_add_test(tc, test_device_streams_pool);
    tcase_add_test(tc, test_device_streams_resident);
    tcase_add_test(tc, test_device_streams_capture);
    tcase_add_test(tc, test_device_streams_status_error);
    tcase_add_test(tc, test_device_streams_launch_blocking);
}

void test_device_streams_last(TCase *tc)
{
    /* last: in one process, the device's slabs stay for the rest of it after a stuck launch,
     * and test_device_two_contexts must see them allocated and freed */
    tcase_add_test(tc, test_device_streams_stuck);
}
