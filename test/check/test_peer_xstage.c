/* SPDX-License-Identifier: BSD-3-Clause */
/* Cross-process staging (src/core/ringk_xstage.c), the protocol under the transport's
 * HOST_STAGED path, with memcpy standing in for the CUDA copies: puts and gets between two
 * processes through a few slots, the overlap of the two sides' copies, what a target refuses
 * (a range not its own, a malformed slot a peer wrote, an area not a staging area), and a
 * target that stops serving. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include "test_util.h"

#include <core/ringk_cuda.h>
#include <core/ringk_xstage.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define XS_SLOT  (64u << 10)
#define XS_SLOTS 4u

/* ---- a target: memory of its own, a range it gives, memcpy as its copy ----------------- */

typedef struct {
    char    *mem;
    uint64_t len;
    unsigned delay_us;  /* each copy takes at least this long */
    unsigned copies;
    unsigned max_ahead; /* most slots posted and not yet served, seen while copying */
    ringk_xstage_t *xs;
} xs_target_t;

static int xs_check(void *arg, const ringk_xstage_t *xs, int op, uint64_t addr, uint64_t len)
{
    xs_target_t *t = arg;
    uint64_t base  = (uintptr_t)t->mem;

    (void)xs;
    (void)op;
    return ((addr < base) || (len > t->len) || (addr - base > t->len - len)) ? -EFAULT : 0;
}

/* Slots whose request is posted and not served (the target's view, for the overlap check). */
static unsigned xs_posted_ahead(const ringk_xstage_t *xs)
{
    const ringk_xstage_slot_shm_t *line;
    unsigned slot, n = 0;

    for (slot = 0; slot < xs->nslots; slot++) {
        line = (const ringk_xstage_slot_shm_t*)((const char*)xs->base +
                                                RINGK_XSTAGE_LINE * (1u + slot));
        n += __atomic_load_n(&line->posted, __ATOMIC_ACQUIRE) !=
             __atomic_load_n(&line->done, __ATOMIC_ACQUIRE);
    }
    return n;
}

static int xs_copy(void *arg, int op, void *slot_data, uint64_t addr, uint64_t len)
{
    xs_target_t *t = arg;
    unsigned ahead;

    if (t->delay_us > 0) {
        usleep(t->delay_us);
    }
    ahead = xs_posted_ahead(t->xs);
    if (ahead > t->max_ahead) {
        t->max_ahead = ahead;
    }
    if (op == RINGK_XSTAGE_PUT) {
        memcpy((void*)(uintptr_t)addr, slot_data, len);
    } else {
        memcpy(slot_data, (void*)(uintptr_t)addr, len);
    }
    t->copies++;
    return 0;
}

/* ---- an initiator: a local buffer, memcpy in and out of the slots ----------------------- */

typedef struct {
    char    *buf;
    unsigned idles;
    unsigned idle_limit; /* idle says the target died after this many calls (0: never) */
} xs_local_t;

static int xs_stage_out(void *arg, void *dst, size_t off, size_t len)
{
    memcpy(dst, ((xs_local_t*)arg)->buf + off, len);
    return 0;
}

static int xs_stage_in(void *arg, const void *src, size_t off, size_t len)
{
    memcpy(((xs_local_t*)arg)->buf + off, src, len);
    return 0;
}

static int xs_idle(void *arg)
{
    xs_local_t *l = arg;

    return ((l->idle_limit > 0) && (++l->idles >= l->idle_limit)) ? -ESRCH : 0;
}

static void xs_fill(char *p, size_t len, unsigned seed)
{
    size_t i;

    for (i = 0; i < len; i++) {
        p[i] = (char)((i * 131u + seed) ^ (i >> 11));
    }
}

/* The target in a child process: attaches to the parent's area, says where its memory is,
 * serves until the parent closes the pipe, then checks what was put (exit 0: intact). */
static void xs_child(int fd, int wr, int rd, uint64_t len, unsigned seed)
{
    xs_target_t t = {.len = len};
    ringk_xstage_target_ops_t ops = {.arg = &t, .check = xs_check, .copy = xs_copy};
    ringk_xstage_t xs;
    char why[256], *want;
    uint64_t addr;
    int flags;

    t.mem = calloc(1, len);
    want  = malloc(len);
    if ((t.mem == NULL) || (want == NULL) ||
        (ringk_xstage_attach((uint32_t)getppid(), fd, &xs, why, sizeof(why)) != 0)) {
        _exit(2);
    }
    t.xs = &xs;
    addr = (uintptr_t)t.mem;
    if (write(wr, &addr, sizeof(addr)) != sizeof(addr)) {
        _exit(3);
    }
    flags = fcntl(rd, F_GETFL);
    fcntl(rd, F_SETFL, flags | O_NONBLOCK);
    while ((read(rd, &addr, 1) < 0) && (errno == EAGAIN)) {
        ringk_xstage_serve(&xs, &ops);
    }
    xs_fill(want, len, seed);
    _exit((memcmp(want, t.mem, len) == 0) && (xs.failed == 0) ? 0 : 4);
}

/* A put and a get of a few sizes (one byte, a slot, slots and a part, many laps of the
 * slots) between this process and a child target. */
START_TEST(test_xstage_two_processes)
{
    const uint64_t len = 3 * 1024 * 1024 + 4321;
    static const uint64_t sizes[] = {1, XS_SLOT, 2 * XS_SLOT + 17, 3 * 1024 * 1024 + 4321};
    int to_parent[2], to_child[2], status;
    xs_local_t local = {0};
    ringk_xstage_io_t io = {.arg = &local, .stage_out = xs_stage_out,
                            .stage_in = xs_stage_in, .idle = xs_idle};
    ringk_xstage_t xs;
    char why[256] = "", *src, *back;
    uint64_t remote;
    unsigned i;
    pid_t pid;

    ck_assert_int_eq(ringk_xstage_create(XS_SLOTS, XS_SLOT, &xs, why, sizeof(why)), 0);
    ck_assert_int_eq(pipe(to_parent), 0);
    ck_assert_int_eq(pipe(to_child), 0);
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* the child opens our /proc entry (Yama) */
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(to_child[1]);
        xs_child(xs.fd, to_parent[1], to_child[0], len, 7);
    }
    close(to_child[0]);
    ck_assert_int_eq(read(to_parent[0], &remote, sizeof(remote)), sizeof(remote));
    src  = malloc(len);
    back = malloc(len);
    xs_fill(src, len, 7);
    /* sizes from the start, then the whole: the child checks the whole at the end */
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        local.buf = src;
        ck_assert_msg(ringk_xstage_transfer(&xs, RINGK_XSTAGE_PUT, remote, sizes[i], &io, why,
                                            sizeof(why)) == 0, "put %lu: %s",
                      (unsigned long)sizes[i], why);
        memset(back, 0, len);
        local.buf = back;
        ck_assert_msg(ringk_xstage_transfer(&xs, RINGK_XSTAGE_GET, remote, sizes[i], &io, why,
                                            sizeof(why)) == 0, "get %lu: %s",
                      (unsigned long)sizes[i], why);
        ck_assert_msg(memcmp(back, src, sizes[i]) == 0, "get of %lu bytes differs",
                      (unsigned long)sizes[i]);
    }
    close(to_child[1]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0), "child target: status 0x%x",
                  status);
    close(to_parent[0]);
    close(to_parent[1]);
    free(src);
    free(back);
    ringk_xstage_close(&xs);
}
END_TEST

/* ---- in one process: a target thread, so the test can look at both sides ---------------- */

typedef struct {
    ringk_xstage_t xs;
    xs_target_t    t;
    int            stop;
    pthread_t      th;
} xs_thread_t;

static void *xs_serve_thread(void *arg)
{
    xs_thread_t *x = arg;
    ringk_xstage_target_ops_t ops = {.arg = &x->t, .check = xs_check, .copy = xs_copy};

    while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        if (ringk_xstage_serve(&x->xs, &ops) == 0) {
            sched_yield();
        }
    }
    return NULL;
}

/* Serves our own area from a thread. The thread works on the initiator's mapping, not one of
 * its own: ThreadSanitizer pairs a release and an acquire by address, so two mappings of one
 * page would look unsynchronized to it (the two-process case attaches for real). */
static void xs_thread_start(xs_thread_t *x, const ringk_xstage_t *own, uint64_t len,
                            unsigned delay_us)
{
    memset(x, 0, sizeof(*x));
    x->xs    = *own;
    x->xs.fd = -1;
    x->t.mem      = calloc(1, len);
    x->t.len      = len;
    x->t.delay_us = delay_us;
    x->t.xs       = &x->xs;
    ck_assert_int_eq(pthread_create(&x->th, NULL, xs_serve_thread, x), 0);
}

static void xs_thread_stop(xs_thread_t *x)
{
    __atomic_store_n(&x->stop, 1, __ATOMIC_RELEASE);
    pthread_join(x->th, NULL);
    free(x->t.mem);
}

/* While the target copies one slot in, the initiator has filled the next ones: a serial
 * exchange would never have more than one slot posted. */
START_TEST(test_xstage_overlap)
{
    const uint64_t len = 16 * XS_SLOT;
    xs_local_t local   = {0};
    ringk_xstage_io_t io = {.arg = &local, .stage_out = xs_stage_out, .stage_in = xs_stage_in};
    ringk_xstage_t xs;
    xs_thread_t x;
    char why[256] = "";

    ck_assert_int_eq(ringk_xstage_create(XS_SLOTS, XS_SLOT, &xs, why, sizeof(why)), 0);
    xs_thread_start(&x, &xs, len, 2000);
    local.buf = malloc(len);
    xs_fill(local.buf, len, 3);
    ck_assert_msg(ringk_xstage_transfer(&xs, RINGK_XSTAGE_PUT, (uintptr_t)x.t.mem, len, &io,
                                        why, sizeof(why)) == 0, "put: %s", why);
    ck_assert_int_eq(memcmp(x.t.mem, local.buf, len), 0);
    ck_assert_uint_eq(x.t.copies, 16);
    ck_assert_msg(x.t.max_ahead >= 2, "put: at most %u slot(s) posted at once", x.t.max_ahead);
    x.t.max_ahead = 0;
    memset(local.buf, 0, len);
    ck_assert_msg(ringk_xstage_transfer(&xs, RINGK_XSTAGE_GET, (uintptr_t)x.t.mem, len, &io,
                                        why, sizeof(why)) == 0, "get: %s", why);
    ck_assert_int_eq(memcmp(x.t.mem, local.buf, len), 0);
    ck_assert_msg(x.t.max_ahead >= 2, "get: at most %u slot(s) posted at once", x.t.max_ahead);
    xs_thread_stop(&x);
    ck_assert_uint_eq(x.xs.served, 32); /* counted after each release: read once joined */
    free(local.buf);
    ringk_xstage_close(&xs);
}
END_TEST

/* A range the target does not give is refused with its error, nothing is written, and the
 * area stays usable; a slot a peer filled with garbage is refused without a copy. */
START_TEST(test_xstage_refused)
{
    const uint64_t len = 4 * XS_SLOT;
    xs_local_t local   = {0};
    ringk_xstage_io_t io = {.arg = &local, .stage_out = xs_stage_out, .stage_in = xs_stage_in};
    xs_target_t t = {0};
    ringk_xstage_target_ops_t ops = {.arg = &t, .check = xs_check, .copy = xs_copy};
    ringk_xstage_slot_shm_t *line;
    ringk_xstage_t xs, tx;
    xs_thread_t x;
    char why[256] = "";

    ck_assert_int_eq(ringk_xstage_create(XS_SLOTS, XS_SLOT, &xs, why, sizeof(why)), 0);
    xs_thread_start(&x, &xs, len, 0);
    local.buf = calloc(1, 2 * len);
    ck_assert_int_eq(ringk_xstage_transfer(&xs, RINGK_XSTAGE_PUT, (uintptr_t)x.t.mem + 1, len,
                                           &io, why, sizeof(why)), -EFAULT);
    ck_assert_msg(strstr(why, "refused a put") != NULL, "%s", why);
    ck_assert_uint_eq(x.t.copies, 3); /* the chunks inside the range */
    ck_assert_int_eq(ringk_xstage_transfer(&xs, RINGK_XSTAGE_GET, UINT64_MAX - 10, 64, &io, why,
                                           sizeof(why)), -EINVAL);
    ck_assert_msg(ringk_xstage_transfer(&xs, RINGK_XSTAGE_GET, (uintptr_t)x.t.mem, len, &io,
                                        why, sizeof(why)) == 0, "after a refusal: %s", why);
    xs_thread_stop(&x);

    /* what a peer may write into a slot: an unknown op, a length past the slot, a wrapping
     * range; each is answered -EINVAL and nothing is copied */
    ck_assert_int_eq(ringk_xstage_attach((uint32_t)getpid(), xs.fd, &tx, why, sizeof(why)), 0);
    t.mem = malloc(len);
    t.len = len;
    t.xs  = &tx;
    line  = (ringk_xstage_slot_shm_t*)((char*)xs.base + RINGK_XSTAGE_LINE);
    line[0] = (ringk_xstage_slot_shm_t){.posted = 101, .done = 0, .op = 9, .len = 8,
                                        .addr = (uintptr_t)t.mem};
    line[1] = (ringk_xstage_slot_shm_t){.posted = 102, .op = RINGK_XSTAGE_PUT,
                                        .len = XS_SLOT + 1, .addr = (uintptr_t)t.mem};
    line[2] = (ringk_xstage_slot_shm_t){.posted = 103, .op = RINGK_XSTAGE_GET, .len = 4096,
                                        .addr = UINT64_MAX - 100};
    line[3] = (ringk_xstage_slot_shm_t){.posted = 104, .op = RINGK_XSTAGE_GET, .len = 0,
                                        .addr = (uintptr_t)t.mem};
    ck_assert_uint_eq(ringk_xstage_serve(&tx, &ops), 4);
    ck_assert_uint_eq(t.copies, 0);
    ck_assert_uint_eq(tx.failed, 4);
    ck_assert_int_eq(line[0].status, -EINVAL);
    ck_assert_int_eq(line[1].status, -EINVAL);
    ck_assert_int_eq(line[2].status, -EINVAL);
    ck_assert_uint_eq(line[3].done, 104);
    ck_assert_uint_eq(ringk_xstage_serve(&tx, &ops), 0); /* served once */
    ringk_xstage_close(&tx);
    free(t.mem);
    free(local.buf);
    ringk_xstage_close(&xs);
}
END_TEST

/* A target that never serves: idle's error ends the transfer, and the area refuses any later
 * one (a slot the target may still write is never reused). */
START_TEST(test_xstage_target_gone)
{
    xs_local_t local = {.idle_limit = 50};
    ringk_xstage_io_t io = {.arg = &local, .stage_out = xs_stage_out, .stage_in = xs_stage_in,
                            .idle = xs_idle};
    ringk_xstage_t xs;
    char why[256] = "";

    ck_assert_int_eq(ringk_xstage_create(2, XS_SLOT, &xs, why, sizeof(why)), 0);
    local.buf = calloc(1, 8 * XS_SLOT);
    ck_assert_int_eq(ringk_xstage_transfer(&xs, RINGK_XSTAGE_PUT, 0x10000, 8 * XS_SLOT, &io,
                                           why, sizeof(why)), -ESRCH);
    ck_assert_msg(strstr(why, "stopped serving") != NULL, "%s", why);
    ck_assert_uint_eq(local.idles, 50);
    ck_assert_int_eq(ringk_xstage_transfer(&xs, RINGK_XSTAGE_GET, 0x10000, 64, &io, why,
                                           sizeof(why)), -ESRCH);
    ck_assert_msg(strstr(why, "broken") != NULL, "%s", why);
    free(local.buf);
    ringk_xstage_close(&xs);
}
END_TEST

/* Geometry refused at creation, and on attach what is not a staging area, or one whose header
 * says more than its file holds. */
START_TEST(test_xstage_attach_refused)
{
    ringk_xstage_t xs, tx;
    ringk_xstage_shm_t *hdr;
    char why[256] = "";
    int other;

    ck_assert_int_eq(ringk_xstage_create(0, XS_SLOT, &xs, why, sizeof(why)), -EINVAL);
    ck_assert_int_eq(ringk_xstage_create(RINGK_XSTAGE_MAX_SLOTS + 1, XS_SLOT, &xs, why,
                                         sizeof(why)), -EINVAL);
    ck_assert_msg(strstr(why, "1 to 16") != NULL, "%s", why);
    ck_assert_int_eq(ringk_xstage_create(2, 1000, &xs, why, sizeof(why)), -EINVAL);
    ck_assert_int_eq(ringk_xstage_create(2, RINGK_XSTAGE_MAX_SLOT * 2, &xs, why, sizeof(why)),
                     -EINVAL);

    other = memfd_create("ringk-rx", MFD_CLOEXEC);
    ck_assert_int_ge(other, 0);
    ck_assert_int_eq(fchmod(other, 0600), 0);
    ck_assert_int_eq(ftruncate(other, 1 << 20), 0);
    ck_assert_int_eq(ringk_xstage_attach((uint32_t)getpid(), other, &tx, why, sizeof(why)),
                     -EPERM);
    ck_assert_msg(strstr(why, "not a ringk staging area") != NULL, "%s", why);
    close(other);
    ck_assert_int_lt(ringk_xstage_attach((uint32_t)getpid(), 9999, &tx, why, sizeof(why)), 0);

    ck_assert_int_eq(ringk_xstage_create(2, XS_SLOT, &xs, why, sizeof(why)), 0);
    hdr = xs.base;
    hdr->nslots = 8; /* more slots than the file holds */
    ck_assert_int_eq(ringk_xstage_attach((uint32_t)getpid(), xs.fd, &tx, why, sizeof(why)),
                     -EINVAL);
    ck_assert_msg(strstr(why, "its file has") != NULL, "%s", why);
    hdr->nslots    = 2;
    hdr->owner_pid = 1;
    ck_assert_int_eq(ringk_xstage_attach((uint32_t)getpid(), xs.fd, &tx, why, sizeof(why)),
                     -EINVAL);
    hdr->owner_pid = (uint32_t)getpid();
    ck_assert_msg(ringk_xstage_attach((uint32_t)getpid(), xs.fd, &tx, why, sizeof(why)) == 0,
                  "%s", why);
    ringk_xstage_close(&tx);
    ringk_xstage_close(&xs);
}
END_TEST

/* A pinned area's close hands its mapping to ringk_cuda_host_release(): with no device kernel
 * resident (here: none) it is unregistered and unmapped at once, its memfd closed; nothing is
 * left for later, and a close after does nothing. (The wait for resident kernels:
 * test_device_streams_host_release.) */
START_TEST(test_xstage_close_pinned)
{
    ringk_xstage_t xs;
    void *base;
    char why[256];

    ck_assert_int_eq(ringk_xstage_create(2, XS_SLOT, &xs, why, sizeof(why)), 0);
    base = xs.base;
    ((volatile uint8_t*)base)[xs.bytes - 1] = 0x5a;
    ringk_xstage_close_pinned(&xs);
    ck_assert_ptr_null(xs.base);
    ck_assert_int_eq(xs.fd, -1);
    ck_assert_uint_eq(ringk_cuda_host_deferred(), 0);
    ck_assert_int_eq(test_is_mapped(base), 0);
    ringk_xstage_close(&xs);
}
END_TEST

void test_peer_xstage_add(Suite *s)
{
    TCase *tc = tcase_create("xstage");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_xstage_two_processes);
    tcase_add_test(tc, test_xstage_overlap);
    tcase_add_test(tc, test_xstage_refused);
    tcase_add_test(tc, test_xstage_target_gone);
    tcase_add_test(tc, test_xstage_attach_refused);
    tcase_add_test(tc, test_xstage_close_pinned);
    suite_add_tcase(s, tc);
}
