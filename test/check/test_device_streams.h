/* SPDX-License-Identifier: BSD-3-Clause */
/* A CUDA device made of host threads, for test_device_streams: compiled as host C with this file
 * included first (-include), test/kernels/ringk_dev_test.cu defines CUDA entries (kind
 * RINGK_DEVICE_ENTRY_CUDA) whose CUDA calls are the functions below. The executor then takes its
 * CUDA branch (slots of CUDA devices, streams, copies to device memory, launches through the
 * entry's ops, the proxy's fault checks) on a machine without a GPU, running the scenarios of
 * test_device.c.
 *
 * What a real GPU would do and the stand-in does too:
 * - a stream runs its launches one after another (each launch a thread that starts when the one
 *   before it returned);
 * - device memory has no host address and starts as garbage (filled with 0xa5);
 * - mapped memory has two addresses, one for the host and one for the device (one memfd mapped
 *   twice), so a pointer handed to the wrong side still works but the two are never equal;
 *   under ThreadSanitizer, which orders atomics by address and would see no order between a
 *   release through one mapping and an acquire through the other, they are one.
 * The stand-in counts what it allocated and what was freed (tds_live), so a test sees what the
 * runtime did not free; it allocates with mmap, which LeakSanitizer does not follow, because a
 * test leaves memory on purpose (a launch that does not return).
 * - kernels are loaded lazily, as CUDA does by default: an entry's kernel at its first launch or
 *   load (op load), every kernel at once under CUDA_MODULE_LOADING=EAGER;
 * - each thread's stack is a device-wide limit (1 KiB at first) that a load reports against and
 *   a launch of a kernel that needs more grows; the test kernels need 512 bytes, 2 KiB for
 *   ringk_dev_test_recv (a handler with a larger frame).
 * - a launch copies the kernel from the mapped memory the host wrote into the kernel's device
 *   memory and runs there (the CUDA entry's launch);
 * - with CUDA_LAUNCH_BLOCKING=1, a launch returns only once its kernel did;
 * - while tds_capture is set, the program captures a stream in global mode: a query or a
 *   synchronizing call from a thread whose capture mode is not relaxed fails (-EAGAIN, as CUDA's
 *   cudaErrorStreamCaptureImplicit) and would invalidate the program's capture.
 * What would block, deadlock or break the program's capture on a GPU is counted in
 * tds_violations and logged on stderr: allocating or freeing device or mapped memory while a
 * launch runs (docs/gpu.md, "Implicit synchronization"), copying on a stream whose launch runs,
 * destroying a stream with a launch that does not return, making a stream while a launch runs
 * (it may be given the hardware queue of a resident kernel), loading a kernel or growing the
 * stack limit while a launch runs, a launch that did not return within 3 s under
 * CUDA_LAUNCH_BLOCKING=1, a call that a global capture forbids. */
#ifndef RINGK_TEST_DEVICE_STREAMS_H
#define RINGK_TEST_DEVICE_STREAMS_H

#if defined(TEST_DEVICE_STREAMS_IMPL) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* memfd_create; this file is included before any other */
#endif

#include <ringk/api/ringk_device_abi.h>

/** What a GPU would have blocked on (see above); read by the tests, 0 after each. */
extern unsigned long tds_violations;
/** Launches made through the stand-in's ops (each through the entry it was made for). */
extern unsigned long tds_launches;
/** Set to make the next launch fault: it does not run, and its stream reports -EIO. */
extern int tds_fault_next;
/** Set to make the next launch return this many ms after its loop did (a launch stuck on the
 * device after the loop finished). */
extern unsigned tds_hang_next_ms;
/** Launches started and not returned, all streams. */
extern unsigned tds_running;
/** Device and mapped allocations and streams not freed. */
extern unsigned long tds_live;
/** Kernels loaded (each entry's once), and the device's stack limit per thread. */
extern unsigned tds_loads;
extern size_t tds_stack_limit;
/** Set to make the next load report this stack need. */
extern size_t tds_stack_need_next;
/** Set to make the loads of this entry fail (a kernel built for another GPU). */
extern const char *tds_load_fails;
/** Whether entry @a name's kernel is loaded. */
int tds_is_loaded(const char *name);
/** Set to 0 for a device without pageable memory access: a kernel's arg must then point into
 * device memory or at the device's address of mapped memory (op reaches). */
extern int tds_pageable;
/** Set while the program captures a stream in global mode (see above). */
extern int tds_capture;
/** Set to make this many stream queries fail with an error that says nothing of the launch
 * (-EAGAIN). */
extern unsigned tds_status_errors;
/** Streams made, in all. */
extern unsigned long tds_streams_made;
/** The blocks the stand-in device holds at once (op fit), for any entry and block size; and
 *  the shape of the last launch. */
extern uint32_t tds_max_blocks;
extern uint32_t tds_last_threads, tds_last_blocks;

#ifdef TEST_DEVICE_STREAMS_IMPL
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

unsigned long tds_violations;
unsigned long tds_launches;
int tds_fault_next;
unsigned tds_hang_next_ms;
unsigned tds_running;
unsigned long tds_live;
unsigned tds_loads;
size_t tds_stack_limit = 1024;
size_t tds_stack_need_next;
const char *tds_load_fails;
int tds_pageable = 1;
int tds_capture;
unsigned tds_status_errors;
unsigned long tds_streams_made;
uint32_t tds_max_blocks = 256;
uint32_t tds_last_threads, tds_last_blocks;
static __thread int tds_mode; /* the thread's capture mode: 0 global (CUDA's default) */

/* what the device reads at its own addresses: device memory, mapped memory's device side */
static struct {
    const char *lo, *hi;
} tds_ranges[64];
static unsigned tds_nranges;
static pthread_mutex_t tds_range_mu = PTHREAD_MUTEX_INITIALIZER;

/* the kernels loaded, by entry name (under tds_load_mu) */
static const char *tds_loaded[64];
static unsigned tds_nloaded;
static pthread_mutex_t tds_load_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct tds_stream {
    pthread_mutex_t mu;
    pthread_cond_t  cond;
    uint64_t        queued, finished; /* launches put on the stream; returned, in order */
    int             fault;            /* a launch faulted: the stream reports it */
} tds_stream_t;

typedef struct tds_launch {
    tds_stream_t       *s;
    uint64_t            seq;
    void              (*run)(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state);
    const ringk_dev_kernel_t *src;
    ringk_dev_kernel_t *state;
    int                 fault;
    unsigned            hang_ms;
    uint32_t            threads, blocks;
} tds_launch_t;

static void tds_violation(const char *what)
{
    __atomic_add_fetch(&tds_violations, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "test_device_streams: %s while %u launches run (a GPU would block)\n", what,
            __atomic_load_n(&tds_running, __ATOMIC_ACQUIRE));
}

static void tds_check_idle(const char *what)
{
    if (__atomic_load_n(&tds_running, __ATOMIC_ACQUIRE) > 0) {
        tds_violation(what);
    }
}

static size_t tds_stack_need_of(const char *name)
{
    return (strcmp(name, "ringk_dev_test_recv") == 0) ? 2048 : 512;
}

/* Loads entry @a name's kernel unless it is: what CUDA does at its first launch or attribute
 * query when it loads lazily. */
static void tds_load_kernel(const char *name)
{
    const char *mode = getenv("CUDA_MODULE_LOADING");
    unsigned i;

    pthread_mutex_lock(&tds_load_mu);
    for (i = 0; (i < tds_nloaded) && (strcmp(tds_loaded[i], name) != 0); i++) {
    }
    if ((i == tds_nloaded) && (tds_nloaded < 64)) {
        if ((mode == NULL) || (strcmp(mode, "EAGER") != 0)) { /* else loaded at start */
            tds_check_idle("a kernel loaded");
        }
        tds_loaded[tds_nloaded++] = name;
        __atomic_add_fetch(&tds_loads, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&tds_load_mu);
}

int tds_is_loaded(const char *name)
{
    unsigned i;
    int found = 0;

    pthread_mutex_lock(&tds_load_mu);
    for (i = 0; i < tds_nloaded; i++) {
        found |= (strcmp(tds_loaded[i], name) == 0);
    }
    pthread_mutex_unlock(&tds_load_mu);
    return found;
}

/* Grows the stack limit to @a need: a GPU waits for every running kernel first. */
static void tds_stack_grow(size_t need, const char *what)
{
    pthread_mutex_lock(&tds_load_mu);
    if (need > tds_stack_limit) {
        tds_check_idle(what);
        tds_stack_limit = need;
    }
    pthread_mutex_unlock(&tds_load_mu);
}

static int tds_load(const char *name, int device, size_t *stack_need, char *why,
                    size_t why_len)
{
    size_t next = __atomic_exchange_n(&tds_stack_need_next, 0, __ATOMIC_ACQ_REL);

    if (device != 0) {
        snprintf(why, why_len, "stand-in: no device %d", device);
        return -ENODEV;
    }
    if ((tds_load_fails != NULL) && (strcmp(tds_load_fails, name) == 0)) {
        snprintf(why, why_len, "stand-in: no kernel image for this device");
        return -EIO;
    }
    tds_load_kernel(name);
    *stack_need = (next != 0) ? next : tds_stack_need_of(name);
    return 0;
}

/* The stand-in device holds tds_max_blocks blocks of any entry, of up to 1024 threads (a test
 * may lower it, to fill the device with few host threads). */
static int tds_fit(int device, uint32_t threads, uint32_t *max_blocks, uint32_t *max_threads,
                   char *why, size_t why_len)
{
    (void)threads;
    if (device != 0) {
        snprintf(why, why_len, "stand-in: no device %d", device);
        return -ENODEV;
    }
    *max_blocks  = tds_max_blocks;
    *max_threads = RINGK_DEV_THREADS_MAX;
    return 0;
}

static int tds_stack_raise(int device, size_t need, size_t *limit, char *why, size_t why_len)
{
    if (device != 0) {
        snprintf(why, why_len, "stand-in: no device %d", device);
        return -ENODEV;
    }
    tds_stack_grow(need, "the stack limit raised");
    pthread_mutex_lock(&tds_load_mu);
    *limit = tds_stack_limit;
    pthread_mutex_unlock(&tds_load_mu);
    return 0;
}

static void *tds_launch_main(void *arg)
{
    tds_launch_t *l = arg;
    tds_stream_t *s = l->s;

    pthread_mutex_lock(&s->mu);
    while (s->finished + 1 < l->seq) { /* stream order: after the launch before it */
        pthread_cond_wait(&s->cond, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    if (!l->fault && (ringk_dev_emu_launch(l->run, l->src, l->state, l->threads,
                                           l->blocks) != 0)) {
        tds_violation("a launch's threads could not be made");
    }
    if (l->hang_ms > 0) {
        usleep(l->hang_ms * 1000u);
    }
    pthread_mutex_lock(&s->mu);
    s->finished = l->seq;
    s->fault   |= l->fault;
    __atomic_sub_fetch(&tds_running, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    free(l);
    return NULL;
}

/* One entry's launch: the run function of the entry it was made for (loaded first, and the
 * stack grown to its need, as CUDA would). */
/* A call that a global-mode capture of the program's forbids on a thread not in relaxed mode:
 * 1 (a violation) when it would be refused. */
static int tds_captured(const char *what)
{
    if (!__atomic_load_n(&tds_capture, __ATOMIC_ACQUIRE) ||
        (tds_mode == RINGK_DEV_CAPTURE_RELAXED)) {
        return 0;
    }
    __atomic_add_fetch(&tds_violations, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "test_device_streams: %s while the program captures a stream (global "
            "mode): refused, and the capture invalidated\n", what);
    return 1;
}

static void tds_capture_mode(int *mode)
{
    int old = tds_mode;

    tds_mode = *mode;
    *mode    = old;
}

static int tds_launch(const char *name,
                      void (*run)(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state),
                      const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state, int device,
                      void *stream, uint32_t threads, uint32_t blocks, char *why,
                      size_t why_len)
{
    tds_stream_t *s = stream;
    tds_launch_t *l = calloc(1, sizeof(*l));
    pthread_attr_t attr;
    uint64_t l_seq;
    pthread_t th;
    int ret;

    if ((l == NULL) || (device != 0) || (s == NULL) || (threads < 1) ||
        (threads > RINGK_DEV_THREADS_MAX) || (blocks < 1) || (blocks > tds_max_blocks)) {
        free(l);
        snprintf(why, why_len, "stand-in launch: device %d, stream %p, %u x %u threads",
                 device, stream, threads, blocks);
        return -EINVAL;
    }
    __atomic_store_n(&tds_last_threads, threads, __ATOMIC_RELAXED);
    __atomic_store_n(&tds_last_blocks, blocks, __ATOMIC_RELAXED);
    tds_load_kernel(name);
    tds_stack_grow(tds_stack_need_of(name), "a launch grew the stack limit");
    l->s     = s;
    l->run   = run;
    l->src   = src;
    l->state = state;
    l->threads = threads;
    l->blocks  = blocks;
    l->fault   = __atomic_exchange_n(&tds_fault_next, 0, __ATOMIC_ACQ_REL);
    l->hang_ms = __atomic_exchange_n(&tds_hang_next_ms, 0, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&s->mu);
    l->seq = l_seq = ++s->queued;
    pthread_mutex_unlock(&s->mu);
    __atomic_add_fetch(&tds_running, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&tds_launches, 1, __ATOMIC_RELAXED);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    ret = pthread_create(&th, &attr, tds_launch_main, l);
    pthread_attr_destroy(&attr);
    if (ret != 0) {
        /* the sequence number stays taken: count it finished so later launches run */
        pthread_mutex_lock(&s->mu);
        s->finished++;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        __atomic_sub_fetch(&tds_running, 1, __ATOMIC_RELEASE);
        free(l);
        snprintf(why, why_len, "stand-in launch: no thread");
        return -EAGAIN;
    }
    if ((getenv("CUDA_LAUNCH_BLOCKING") != NULL) &&
        (strcmp(getenv("CUDA_LAUNCH_BLOCKING"), "1") == 0)) {
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 3;
        pthread_mutex_lock(&s->mu);
        while ((s->finished < l_seq) &&
               (pthread_cond_timedwait(&s->cond, &s->mu, &until) == 0)) {
        }
        ret = (s->finished < l_seq);
        pthread_mutex_unlock(&s->mu);
        if (ret) {
            __atomic_add_fetch(&tds_violations, 1, __ATOMIC_RELAXED);
            fprintf(stderr, "test_device_streams: a launch under CUDA_LAUNCH_BLOCKING=1 did "
                    "not return in 3 s (on a GPU it would not return)\n");
        }
    }
    return 0;
}

static int tds_device_count(char *why, size_t why_len)
{
    return 1;
}

/* The stand-in has device 0 only. */
static int tds_no_device(int device, char *why, size_t why_len)
{
    if (device != 0) {
        snprintf(why, why_len, "stand-in: no device %d", device);
        return -ENODEV;
    }
    return 0;
}

static void tds_range_add(const void *lo, size_t len)
{
    pthread_mutex_lock(&tds_range_mu);
    if (tds_nranges < 64) {
        tds_ranges[tds_nranges].lo   = lo;
        tds_ranges[tds_nranges++].hi = (const char*)lo + len;
    }
    pthread_mutex_unlock(&tds_range_mu);
}

static void tds_range_del(const void *lo)
{
    unsigned i;

    pthread_mutex_lock(&tds_range_mu);
    for (i = 0; i < tds_nranges; i++) {
        if (tds_ranges[i].lo == lo) {
            tds_ranges[i] = tds_ranges[--tds_nranges];
            break;
        }
    }
    pthread_mutex_unlock(&tds_range_mu);
}

static int tds_reaches(int device, const void *p, char *why, size_t why_len)
{
    unsigned i;
    int in = tds_pageable;

    pthread_mutex_lock(&tds_range_mu);
    for (i = 0; (i < tds_nranges) && !in; i++) {
        in = ((const char*)p >= tds_ranges[i].lo) && ((const char*)p < tds_ranges[i].hi);
    }
    pthread_mutex_unlock(&tds_range_mu);
    if (!in) {
        snprintf(why, why_len, "stand-in: arg %p is host memory that device %d cannot read", p,
                 device);
    }
    return in ? 0 : -EFAULT;
}

/* Anonymous memory with its length in the page before it. */
static void *tds_map(size_t bytes)
{
    size_t page = (size_t)getpagesize(), len = (bytes + page - 1) / page * page + page;
    char *p     = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        return NULL;
    }
    *(size_t*)p = len;
    __atomic_add_fetch(&tds_live, 1, __ATOMIC_RELAXED);
    return p + page;
}

static void tds_unmap(void *p)
{
    char *h = (char*)p - getpagesize();

    __atomic_sub_fetch(&tds_live, 1, __ATOMIC_RELAXED);
    munmap(h, *(size_t*)h);
}

static int tds_alloc_device(int device, void **p, size_t bytes, char *why, size_t why_len)
{
    if (tds_no_device(device, why, why_len) != 0) {
        return -ENODEV;
    }
    tds_check_idle("device memory allocated");
    if ((*p = tds_map(bytes)) == NULL) {
        snprintf(why, why_len, "stand-in: no %zu bytes", bytes);
        return -ENOMEM;
    }
    memset(*p, 0xa5, bytes);
    tds_range_add(*p, bytes);
    return 0;
}

/* Mapped memory: the host's and the device's mappings of one memfd, the length in a word
 * before the host's address (the page before it is part of the host mapping). */
static int tds_alloc_mapped(int device, void **host, void **dev, size_t bytes, char *why,
                            size_t why_len)
{
    size_t page = (size_t)getpagesize(), len = (bytes + page - 1) / page * page + page;
    int fd;
    char *h, *d;

    if (tds_no_device(device, why, why_len) != 0) {
        return -ENODEV;
    }
    tds_check_idle("mapped memory allocated");
    fd = memfd_create("tds-mapped", 0);
    if ((fd < 0) || (ftruncate(fd, (off_t)len) != 0)) {
        if (fd >= 0) {
            close(fd);
        }
        snprintf(why, why_len, "stand-in: memfd of %zu bytes: %m", len);
        return -ENOMEM;
    }
    h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
#if defined(__SANITIZE_THREAD__)
    d = (h == MAP_FAILED) ? MAP_FAILED : h + page;
#else
    d = mmap(NULL, len - page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)page);
#endif
    close(fd);
    if ((h == MAP_FAILED) || (d == MAP_FAILED)) {
        if (h != MAP_FAILED) {
            munmap(h, len);
        }
#if !defined(__SANITIZE_THREAD__)
        if (d != MAP_FAILED) {
            munmap(d, len - page);
        }
#endif
        snprintf(why, why_len, "stand-in: mmap of %zu bytes failed", len);
        return -ENOMEM;
    }
    ((size_t*)h)[0] = len;
    ((char**)h)[1]  = d;
    __atomic_add_fetch(&tds_live, 1, __ATOMIC_RELAXED);
    tds_range_add(d, len - page);
    *host = h + page;
    *dev  = d;
    return 0;
}

static int tds_copy_to_device(int device, void *dst, const void *src, size_t bytes,
                              void *stream, char *why, size_t why_len)
{
    tds_stream_t *s = stream;

    if (tds_no_device(device, why, why_len) != 0) {
        return -ENODEV;
    }
    if (tds_captured("a copy synchronized its stream")) {
        snprintf(why, why_len, "stand-in: operation not permitted when stream is capturing");
        return -EIO;
    }
    pthread_mutex_lock(&s->mu);
    if (s->finished != s->queued) {
        pthread_mutex_unlock(&s->mu);
        tds_violation("a copy synchronized a stream whose launch");
        snprintf(why, why_len, "stand-in: copy behind a running launch");
        return -EIO;
    }
    pthread_mutex_unlock(&s->mu);
    memcpy(dst, src, bytes);
    return 0;
}

static int tds_stream_create(int device, void **stream, char *why, size_t why_len)
{
    tds_stream_t *s;

    if (tds_no_device(device, why, why_len) != 0) {
        return -ENODEV;
    }
    tds_check_idle("a stream made");
    __atomic_add_fetch(&tds_streams_made, 1, __ATOMIC_RELAXED);
    s = tds_map(sizeof(*s)); /* zeroed */
    if (s == NULL) {
        snprintf(why, why_len, "stand-in: no memory for a stream");
        return -ENOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    *stream = s;
    return 0;
}

static int tds_stream_status(void *stream, char *why, size_t why_len)
{
    tds_stream_t *s = stream;
    unsigned errs   = __atomic_load_n(&tds_status_errors, __ATOMIC_ACQUIRE);
    int ret;

    if (tds_captured("a stream queried")) {
        snprintf(why, why_len, "the device kernel's stream: operation not permitted when stream "
                 "is capturing");
        return -EAGAIN;
    }
    if ((errs > 0) &&
        __atomic_compare_exchange_n(&tds_status_errors, &errs, errs - 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        snprintf(why, why_len, "the device kernel's stream: stand-in error that is not sticky");
        return -EAGAIN;
    }
    pthread_mutex_lock(&s->mu);
    ret = s->fault ? -EIO : (s->finished == s->queued);
    pthread_mutex_unlock(&s->mu);
    if (ret < 0) {
        snprintf(why, why_len, "the device kernel: stand-in fault");
    }
    return ret;
}

static void tds_free_device(int device, void *p)
{
    (void)device;
    tds_check_idle("device memory freed");
    tds_range_del(p);
    tds_unmap(p);
}

static void tds_free_mapped(void *host)
{
    size_t page = (size_t)getpagesize();
    char *h     = (char*)host - page;
    size_t len  = ((size_t*)h)[0];

    tds_check_idle("mapped memory freed");
    tds_range_del(((char**)h)[1]);
    __atomic_sub_fetch(&tds_live, 1, __ATOMIC_RELAXED);
#if !defined(__SANITIZE_THREAD__)
    munmap(((char**)h)[1], len - page);
#endif
    munmap(h, len);
}

/* Waits up to 10 s for the stream's launches to return; a GPU's stream destroy would not wait,
 * but the launches would then run on after the memory they use was freed. */
static void tds_stream_destroy(void *stream)
{
    tds_stream_t *s = stream;
    struct timespec until;
    int ret = 0;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&s->mu);
    while ((s->finished != s->queued) && (ret == 0)) {
        ret = pthread_cond_timedwait(&s->cond, &s->mu, &until);
    }
    pthread_mutex_unlock(&s->mu);
    if (ret != 0) {
        tds_violation("a stream was destroyed with a launch that did not return");
        return; /* leaked: the launch still uses it */
    }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    tds_unmap(s);
}

/* An entry as nvcc would make it (RINGK_DEVICE_ENTRY in ringk_device_cuda.h), with the launch
 * of its own loop on a stand-in stream. */
#define RINGK_DEVICE_ENTRY(sym, handler) \
    static void sym##_ringk_run(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *k) \
    { \
        ringk_dev_launch_run(src, k, handler); \
    } \
    static int sym##_ringk_launch(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *k, \
                                  int device, void *stream, uint32_t threads, uint32_t blocks, \
                                  char *why, size_t why_len) \
    { \
        return tds_launch(#sym, sym##_ringk_run, src, k, device, stream, threads, blocks, why, \
                          why_len); \
    } \
    static int sym##_ringk_load(int device, size_t *stack_need, char *why, size_t why_len) \
    { \
        return tds_load(#sym, device, stack_need, why, why_len); \
    } \
    static const ringk_device_cuda_ops_t sym##_ringk_ops = { \
        tds_device_count, tds_alloc_device, tds_alloc_mapped, \
        tds_copy_to_device, tds_stream_create, sym##_ringk_launch, tds_stream_status, \
        tds_free_device, tds_free_mapped, tds_stream_destroy, sym##_ringk_load, \
        tds_stack_raise, tds_reaches, tds_capture_mode, tds_fit \
    }; \
    const ringk_device_entry_t sym = { \
        RINGK_DEVICE_ENTRY_MAGIC, RINGK_DEV_ABI, RINGK_DEVICE_ENTRY_CUDA, #sym, NULL, \
        &sym##_ringk_ops \
    }; \
    __attribute__((constructor)) static void sym##_ringk_register(void) \
    { \
        ringk_device_entry_register(&sym); \
    } \
    __attribute__((destructor)) static void sym##_ringk_unregister(void) \
    { \
        ringk_device_entry_unregister(&sym); \
    } \
    extern const ringk_device_entry_t sym
#endif /* TEST_DEVICE_STREAMS_IMPL */

#endif
