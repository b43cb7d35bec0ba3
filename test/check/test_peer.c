/* SPDX-License-Identifier: BSD-3-Clause */
/* GPUs of one process (ringk_peer.h), without a GPU: pairs of the topology fixtures through the
 * public query (class, link, path, access, the reason, the policy's overrides, RINGK_TOPO_FILE
 * read again when it changes), the refusals of bad arguments, the calls that need CUDA saying
 * why they cannot, and the staged copy's schedule (ringk_stage.c) against a stand-in whose two
 * streams are threads that copy with memcpy; and the table of IPC mappings the transport's
 * remote keys share (ringk_maprefs.c) against a stand-in of cudaIpcOpenMemHandle that refuses a
 * handle open already, as CUDA does. */
#define _GNU_SOURCE
#include "test_log.h"
#include "test_util.h"

#include <core/ringk_maprefs.h>
#include <core/ringk_stage.h>
#include <core/ringk_topo.h>
#include <ringk/api/ringk.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char logbuf[8192];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_hook(void *arg, int level, const char *message)
{
    (void)arg;
    (void)level;
    test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
}

static void setup(void)
{
    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_log_hook_set(log_hook, NULL), 0);
    unsetenv("RINGK_PATH");
    unsetenv("RINGK_P2P_LEVEL");
    unsetenv("RINGK_TOPO_FILE");
}

static const char *fixture(const char *name)
{
    static char path[1024];
    const char *src = getenv("RINGK_TOP_SRCDIR");

    snprintf(path, sizeof(path), "%s/test/check/topo/%s", src ? src : ".", name);
    return path;
}

/* RINGK_TOPO_FILE set to fixture @a name; the bus ids of its GPUs @a a and @a b in @a ba, @a bb
 * (read with core's loader, which the query uses too). */
static void use_fixture(const char *name, unsigned a, unsigned b, char *ba, char *bb)
{
    static ringk_topo_t topo;
    char err[256];

    ck_assert_int_eq(setenv("RINGK_TOPO_FILE", fixture(name), 1), 0);
    ck_assert_msg(ringk_topo_load(&topo, fixture(name), err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_gt(topo.ngpus, a);
    ck_assert_uint_gt(topo.ngpus, b);
    snprintf(ba, 16, "%s", topo.gpus[a].busid);
    snprintf(bb, 16, "%s", topo.gpus[b].busid);
}

/* A pair of a fixture and what the query must say of it. */
static const struct {
    const char       *file;
    unsigned          a, b;
    const char       *level, *path_env;  /* RINGK_P2P_LEVEL, RINGK_PATH, NULL unset */
    int               ret;
    ringk_peer_class_t cls;
    const char       *link;
    ringk_peer_path_t path;
    const char       *reason;            /* a part of the reason */
} pairs[] = {
    {"nvswitch-8gpu.xml", 0, 5, NULL, NULL, 0, RINGK_PEER_CLASS_NVLINK, "NV18",
     RINGK_PEER_PATH_P2P_NVLINK, "not verified (topology from a file)"},
    {"pcie-4gpu.xml", 0, 1, NULL, NULL, 0, RINGK_PEER_CLASS_PCIE_SWITCH, "PIX",
     RINGK_PEER_PATH_P2P_PCIE, "within RINGK_P2P_LEVEL"},
    {"pcie-4gpu.xml", 0, 2, NULL, NULL, 0, RINGK_PEER_CLASS_HOST_BRIDGE, "PHB",
     RINGK_PEER_PATH_HOST_STAGED, "beyond RINGK_P2P_LEVEL"},
    {"pcie-4gpu.xml", 0, 2, "PHB", NULL, 0, RINGK_PEER_CLASS_HOST_BRIDGE, "PHB",
     RINGK_PEER_PATH_P2P_PCIE, "within RINGK_P2P_LEVEL=HOST_BRIDGE"},
    {"dual-socket.xml", 1, 2, NULL, NULL, 0, RINGK_PEER_CLASS_CROSS_SOCKET, "SYS",
     RINGK_PEER_PATH_HOST_STAGED, "staged through host memory"},
    {"pcie-4gpu.xml", 3, 3, NULL, NULL, 0, RINGK_PEER_CLASS_SAME_DEVICE, "X",
     RINGK_PEER_PATH_SAME_DEVICE, "the device's own copy"},
    {"pcie-4gpu.xml", 0, 1, NULL, "HOST_STAGED", 0, RINGK_PEER_CLASS_PCIE_SWITCH, "PIX",
     RINGK_PEER_PATH_HOST_STAGED, "forced by RINGK_PATH=HOST_STAGED"},
    {"pcie-4gpu.xml", 0, 2, NULL, "CUDA_IPC", 0, RINGK_PEER_CLASS_HOST_BRIDGE, "PHB",
     RINGK_PEER_PATH_P2P_PCIE, "in one process by peer access: P2P_PCIE"},
    {"nvswitch-8gpu.xml", 2, 2, NULL, "CUDA_IPC", 0, RINGK_PEER_CLASS_SAME_DEVICE, "X",
     RINGK_PEER_PATH_SAME_DEVICE, "in one process: the device's own copy"},
    {"pcie-4gpu.xml", 0, 1, NULL, "P2P_NVLINK", -EINVAL, RINGK_PEER_CLASS_PCIE_SWITCH, "PIX",
     RINGK_PEER_PATH_P2P_NVLINK, "RINGK_PATH=P2P_NVLINK cannot serve a PCIE_SWITCH pair"},
    {"pcie-4gpu.xml", 0, 1, "NEAR", NULL, -EINVAL, RINGK_PEER_CLASS_PCIE_SWITCH, "PIX",
     RINGK_PEER_PATH_P2P_NVLINK, "NEAR"},
};

START_TEST(test_peer_query_fixture)
{
    ringk_peer_info_t info;
    char a[16], b[16];
    int ret;

    use_fixture(pairs[_i].file, pairs[_i].a, pairs[_i].b, a, b);
    if (pairs[_i].level != NULL) {
        setenv("RINGK_P2P_LEVEL", pairs[_i].level, 1);
    }
    if (pairs[_i].path_env != NULL) {
        setenv("RINGK_PATH", pairs[_i].path_env, 1);
    }
    ret = ringk_peer_query(a, b, 0, &info);
    ck_assert_msg(ret == pairs[_i].ret, "%s GPU%u-GPU%u: %d (%s)", pairs[_i].file, pairs[_i].a,
                  pairs[_i].b, ret, info.reason);
    ck_assert_msg(strstr(info.reason, pairs[_i].reason) != NULL, "reason '%s' lacks '%s'",
                  info.reason, pairs[_i].reason);
    ck_assert_str_eq(info.busid, a);
    ck_assert_str_eq(info.peer_busid, b);
    ck_assert_int_eq(info.cls, pairs[_i].cls);
    ck_assert_str_eq(info.link, pairs[_i].link);
    if (ret != 0) {
        return;
    }
    ck_assert_int_eq(info.path, pairs[_i].path);
    ck_assert_int_eq(info.can_access, (info.path == RINGK_PEER_PATH_P2P_NVLINK) ||
                                      (info.path == RINGK_PEER_PATH_P2P_PCIE));
    ck_assert_int_eq(info.verified, 0);        /* a topology file is never verified */
    ck_assert_int_eq(info.native_atomics, -1); /* nor asked of CUDA */
    ck_assert(info.gbps == 0 && info.lat_us == 0);
    ck_assert((info.est_gbps > 0) || (pairs[_i].a == pairs[_i].b));
    ck_assert_uint_eq(info.nvlinks, (info.cls == RINGK_PEER_CLASS_NVLINK) ? 18 : 0);
    if (pairs[_i].a != pairs[_i].b) {
        ck_assert_ptr_nonnull(strstr(info.reason, pairs[_i].file));
    }
}
END_TEST

/* RINGK_TOPO_FILE read again when it names another file; bus ids in either case and without
 * a domain are the same GPU. */
START_TEST(test_peer_query_reload)
{
    ringk_peer_info_t info;
    char a[16], b[16], upper[16];
    size_t i;

    use_fixture("nvswitch-8gpu.xml", 1, 2, a, b);
    ck_assert_int_eq(ringk_peer_query(a, b, 0, &info), 0);
    ck_assert_int_eq(info.cls, RINGK_PEER_CLASS_NVLINK);
    use_fixture("vm-flat.xml", 1, 2, a, b);
    ck_assert_int_eq(ringk_peer_query(a, b, 0, &info), 0);
    ck_assert_int_eq(info.cls, RINGK_PEER_CLASS_HOST_BRIDGE);
    ck_assert_ptr_nonnull(strstr(info.reason, "vm-flat.xml"));
    for (i = 0; i <= strlen(a); i++) {
        upper[i] = (char)(((a[i] >= 'a') && (a[i] <= 'f')) ? a[i] - 'a' + 'A' : a[i]);
    }
    ck_assert_int_eq(ringk_peer_query(upper + 5, b, 0, &info), 0); /* "BB:DD.F" */
    ck_assert_str_eq(info.busid, a);
}
END_TEST

START_TEST(test_peer_query_refused)
{
    ringk_peer_info_t info;
    char a[16], b[16];

    use_fixture("pcie-4gpu.xml", 0, 1, a, b);
    ck_assert_int_eq(ringk_peer_query(NULL, b, 0, &info), -EINVAL);
    ck_assert_int_eq(ringk_peer_query(a, NULL, 0, &info), -EINVAL);
    ck_assert_int_eq(ringk_peer_query(a, b, 0, NULL), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "info_p is NULL"));
    ck_assert_int_eq(ringk_peer_query(a, b, 0x6, &info), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "flags 0x6 has unknown bits (known: 0x1)"));
    ck_assert_int_eq(ringk_peer_query("07:00", b, 0, &info), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "'07:00' is not a PCI bus id"));
    /* a GPU the topology lacks */
    ck_assert_int_eq(ringk_peer_query(a, "0000:ee:00.0", 0, &info), -ENOENT);
    ck_assert_int_eq(info.cls, RINGK_PEER_CLASS_NONE);
    ck_assert_ptr_nonnull(strstr(info.reason, "GPU 0000:ee:00.0 is not in the topology of"));
    /* measuring needs this machine's GPUs */
    ck_assert_int_eq(ringk_peer_query(a, b, RINGK_PEER_QUERY_MEASURE, &info), -ENODEV);
    ck_assert_ptr_nonnull(strstr(info.reason, "cannot measure: the topology is "
                                              "RINGK_TOPO_FILE's"));
    ck_assert_int_eq(info.path, RINGK_PEER_PATH_P2P_PCIE); /* the rest is filled in */
    /* a file that is not there */
    setenv("RINGK_TOPO_FILE", "/nonexistent/topo.xml", 1);
    ck_assert_int_eq(ringk_peer_query(a, b, 0, &info), -ENODEV);
    ck_assert_ptr_nonnull(strstr(info.reason, "/nonexistent/topo.xml"));
    ck_assert_str_eq(ringk_peer_path_name(RINGK_PEER_PATH_HOST_STAGED), "HOST_STAGED");
    ck_assert_str_eq(ringk_peer_path_name(RINGK_PEER_PATH_SAME_DEVICE), "SAME_DEVICE");
    ck_assert_str_eq(ringk_peer_path_name((ringk_peer_path_t)9), "?");
}
END_TEST

/* Where CUDA cannot be used, the calls of CUDA devices and device memory say so. */
START_TEST(test_peer_no_cuda)
{
    ringk_peer_info_t info;
    ringk_peer_path_t path = (ringk_peer_path_t)77;
    char src[64], dst[64];

    if (access("/proc/driver/nvidia/version", F_OK) == 0) {
        printf("# an NVIDIA driver is loaded: the refusals without CUDA are not checked\n");
        return;
    }
    ck_assert_int_eq(ringk_peer_can_access(0, 1, &info), -ENODEV);
    ck_assert_msg((strstr(info.reason, "no NVIDIA driver loaded") != NULL) ||
                  (strstr(info.reason, "built without CUDA") != NULL), "%s", info.reason);
    ck_assert_int_eq(ringk_peer_capability(0, 0, &info), -ENODEV);
    ck_assert_int_eq(ringk_peer_can_access(-1, 0, &info), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "ringk_peer_can_access: device -1 is negative"));
    ck_assert_int_eq(ringk_peer_can_access(0, 0, NULL), -EINVAL);
    ck_assert_int_eq(ringk_peer_enable(0, 0), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "ringk_peer_enable: devices 0 and 0"));
    ck_assert_int_eq(ringk_peer_enable(0, 1), -ENODEV);
    ck_assert_int_eq(ringk_peer_disable(1, 0), -ENODEV);
    ck_assert_ptr_nonnull(strstr(logbuf, "ringk_peer_disable: "));
    ck_assert_int_eq(ringk_peer_copy(NULL, src, 8, &path), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "ringk_peer_copy: dst is NULL"));
    ck_assert_int_eq(ringk_peer_copy_async(dst, NULL, 8, NULL, &path), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "ringk_peer_copy_async: src is NULL"));
    ck_assert_int_eq(ringk_peer_copy(dst, src, sizeof(src), &path), -ENODEV);
    ck_assert_int_eq(path, 77); /* written only on success */
}
END_TEST

/* ---- the staged copy's schedule against a stand-in of two streams ------------------------ */

#define SQ_OPS 64

/* A stream: a thread running queued operations in order. */
typedef struct {
    pthread_t       th;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    struct {
        int      out;         /* 0: copy in, 1: copy out */
        unsigned buf;
        size_t   off, len;
        unsigned seq;         /* the chunk's number */
    } q[SQ_OPS];
    unsigned head, tail, stop;
} stream_t;

static struct {
    ringk_stage_pool_t pool;
    stream_t           in, out;
    const uint8_t     *src;
    uint8_t           *dst;
    unsigned           in_done[RINGK_STAGE_BUFS]; /* the events: last chunk copied in + 1 */
    unsigned           chunks_in, chunks_out;
    unsigned           overlap;   /* copies in that ran while an earlier chunk was not out */
    unsigned           max_busy;
    int                fail_in, fail_out; /* the chunk whose operation fails, -1 none */
    unsigned           gate;      /* chunk 0 goes out once this many chunks are in (or 5 s
                                     passed): a pipelined schedule gets there, a serial one
                                     would not, whatever the threads' timing */
    pthread_mutex_t    mu;
    pthread_cond_t     cv;
} sq;

static void sq_run_op(stream_t *st, unsigned i)
{
    unsigned b = st->q[i].buf, seq = st->q[i].seq, busy;

    usleep((unsigned)(rand() % 300)); /* copies of uneven length */
    if (!st->q[i].out) {
        memcpy(sq.pool.buf[b], sq.src + st->q[i].off, st->q[i].len);
        pthread_mutex_lock(&sq.mu);
        sq.overlap += (sq.chunks_out < seq); /* an earlier chunk is still on its way out */
        sq.in_done[b] = seq + 1;
        sq.chunks_in++;
        busy = ringk_stage_busy(&sq.pool);
        sq.max_busy = (busy > sq.max_busy) ? busy : sq.max_busy;
        pthread_cond_broadcast(&sq.cv);
        pthread_mutex_unlock(&sq.mu);
        return;
    }
    pthread_mutex_lock(&sq.mu); /* the wait for the copy in's event */
    while (sq.in_done[b] != seq + 1) {
        pthread_cond_wait(&sq.cv, &sq.mu);
    }
    if (seq == 0) {
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while ((sq.chunks_in < sq.gate) &&
               (pthread_cond_timedwait(&sq.cv, &sq.mu, &until) == 0)) {
        }
    }
    pthread_mutex_unlock(&sq.mu);
    memcpy(sq.dst + st->q[i].off, sq.pool.buf[b], st->q[i].len);
    memset(sq.pool.buf[b], 0xee, sq.pool.chunk); /* a late reader of it would see garbage */
    pthread_mutex_lock(&sq.mu);
    sq.chunks_out++;
    pthread_mutex_unlock(&sq.mu);
    ringk_stage_release(&sq.pool, b); /* the host callback queued after the copy out */
}

static void *sq_thread(void *arg)
{
    stream_t *st = arg;

    pthread_mutex_lock(&st->mu);
    for (;;) {
        while ((st->head == st->tail) && !st->stop) {
            pthread_cond_wait(&st->cv, &st->mu);
        }
        if (st->head == st->tail) {
            break;
        }
        pthread_mutex_unlock(&st->mu);
        sq_run_op(st, st->head % SQ_OPS);
        pthread_mutex_lock(&st->mu);
        st->head++;
        pthread_cond_broadcast(&st->cv);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

static int sq_queue(stream_t *st, int out, unsigned b, size_t off, size_t len)
{
    unsigned seq = (unsigned)(off / sq.pool.chunk);

    if ((int)seq == (out ? sq.fail_out : sq.fail_in)) {
        if (out) { /* its copy in is done once the stream before it has drained */
            pthread_mutex_lock(&sq.in.mu);
            while (sq.in.head != sq.in.tail) {
                pthread_cond_wait(&sq.in.cv, &sq.in.mu);
            }
            pthread_mutex_unlock(&sq.in.mu);
            ringk_stage_release(&sq.pool, b);
        }
        return -EIO;
    }
    pthread_mutex_lock(&st->mu);
    ck_assert_uint_lt(st->tail - st->head, SQ_OPS);
    st->q[st->tail % SQ_OPS].out = out;
    st->q[st->tail % SQ_OPS].buf = b;
    st->q[st->tail % SQ_OPS].off = off;
    st->q[st->tail % SQ_OPS].len = len;
    st->q[st->tail % SQ_OPS].seq = seq;
    st->tail++;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return 0;
}

static int sq_in(void *arg, unsigned b, size_t off, size_t len)
{
    (void)arg;
    return sq_queue(&sq.in, 0, b, off, len);
}

static int sq_out(void *arg, unsigned b, size_t off, size_t len)
{
    (void)arg;
    return sq_queue(&sq.out, 1, b, off, len);
}

static void sq_stream_start(stream_t *st)
{
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    st->head = st->tail = st->stop = 0;
    ck_assert_int_eq(pthread_create(&st->th, NULL, sq_thread, st), 0);
}

static void sq_stream_join(stream_t *st)
{
    pthread_mutex_lock(&st->mu);
    st->stop = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->th, NULL);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
}

/* Copies of whole and partial chunks, one byte to 21 chunks and a half; then a copy in and a
 * copy out that fail part-way. */
static const struct {
    size_t len;
    int    fail_in, fail_out;
    size_t landed; /* bytes that must have arrived */
} sq_cases[] = {
    {1, -1, -1, 1},
    {4096, -1, -1, 4096},
    {4097, -1, -1, 4097},
    {21 * 4096 + 2048, -1, -1, 21 * 4096 + 2048},
    {10 * 4096, 3, -1, 3 * 4096},
    {10 * 4096, -1, 5, 5 * 4096},
};

START_TEST(test_peer_stage_pipeline)
{
    ringk_stage_ops_t ops = {.arg = NULL, .pool = &sq.pool, .copy_in = sq_in,
                             .copy_out = sq_out};
    size_t len = sq_cases[_i].len, i;
    uint8_t *src = malloc(len), *dst = calloc(1, len);
    int ret, expect = (sq_cases[_i].fail_in >= 0 || sq_cases[_i].fail_out >= 0) ? -EIO : 0;

    ck_assert(src != NULL && dst != NULL);
    memset(&sq, 0, sizeof(sq));
    pthread_mutex_init(&sq.mu, NULL);
    pthread_cond_init(&sq.cv, NULL);
    sq.pool.chunk = 4096;
    for (i = 0; i < RINGK_STAGE_BUFS; i++) {
        ck_assert_ptr_nonnull(sq.pool.buf[i] = malloc(sq.pool.chunk));
    }
    for (i = 0; i < len; i++) {
        src[i] = (uint8_t)(i * 131 + 7);
    }
    sq.src      = src;
    sq.dst      = dst;
    sq.fail_in  = sq_cases[_i].fail_in;
    sq.fail_out = sq_cases[_i].fail_out;
    sq.gate     = (len > 8 * 4096) ? 3 : 0;
    sq_stream_start(&sq.in);
    sq_stream_start(&sq.out);
    ret = ringk_stage_run(&ops, len);
    sq_stream_join(&sq.in);
    sq_stream_join(&sq.out);
    ck_assert_int_eq(ret, expect);
    ck_assert_uint_eq(ringk_stage_busy(&sq.pool), 0); /* every buffer given back */
    ck_assert_msg(memcmp(src, dst, sq_cases[_i].landed) == 0, "the data differs");
    for (i = sq_cases[_i].landed; i < len; i++) {
        ck_assert_msg(dst[i] == 0, "byte %zu landed after the failure", i);
    }
    ck_assert_uint_eq(sq.chunks_out, (sq_cases[_i].landed + 4095) / 4096);
    if ((expect == 0) && (len > 8 * 4096)) { /* copies in ran ahead of copies out, within the pool */
        ck_assert_uint_gt(sq.overlap, 0);
        ck_assert_uint_gt(sq.max_busy, 1);
    }
    ck_assert_uint_le(sq.max_busy, RINGK_STAGE_BUFS);
    for (i = 0; i < RINGK_STAGE_BUFS; i++) {
        free(sq.pool.buf[i]);
    }
    free(src);
    free(dst);
}
END_TEST

/* A copy whose buffers never come free (the copies queued before them, on an application's
 * stream that waits for the application, never run): -ETIMEDOUT after the pool's wait, with
 * nothing queued. */
static int stuck_copy(void *arg, unsigned b, size_t off, size_t len)
{
    ck_abort_msg("nothing may be queued: buffer %u, %zu bytes at %zu", b, len, off);
    return 0;
}

START_TEST(test_peer_stage_timeout)
{
    ringk_stage_pool_t pool = {.chunk = 4096, .wait_ms = 50};
    ringk_stage_ops_t ops = {.pool = &pool, .copy_in = stuck_copy, .copy_out = stuck_copy};
    double t0 = test_now_s();
    unsigned i;

    for (i = 0; i < RINGK_STAGE_BUFS; i++) {
        pool.busy[i] = 1;
    }
    ck_assert_int_eq(ringk_stage_run(&ops, 3 * 4096), -ETIMEDOUT);
    ck_assert(test_now_s() - t0 >= 0.045);
    ck_assert_uint_eq(ringk_stage_busy(&pool), RINGK_STAGE_BUFS);
}
END_TEST

/* ---- the table of mappings against a stand-in of CUDA IPC -------------------------------- */

#define MR_KEYS 3

static struct {
    pthread_mutex_t mu;
    int             open[MR_KEYS];    /* the handle is mapped now */
    unsigned        opens, closes, double_opens, fail_next;
    char            mem[MR_KEYS][64]; /* the mappings */
} mr = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int mr_open(const uint8_t *key, uint64_t size, void **mapped_p, char *why, size_t len)
{
    int k = key[0], ret = 0;

    (void)size;
    pthread_mutex_lock(&mr.mu);
    if (mr.fail_next) {
        mr.fail_next = 0;
        snprintf(why, len, "stand-in: out of mappings");
        ret = -EIO;
    } else if (mr.open[k]) { /* CUDA: the handle is mapped already */
        mr.double_opens++;
        snprintf(why, len, "stand-in: already mapped");
        ret = -EIO;
    } else {
        mr.open[k] = 1;
        mr.opens++;
        *mapped_p = mr.mem[k];
    }
    pthread_mutex_unlock(&mr.mu);
    return ret;
}

static void mr_close(void *mapped)
{
    int k = (int)(((char*)mapped - mr.mem[0]) / 64);

    pthread_mutex_lock(&mr.mu);
    ck_assert(mr.open[k]);
    mr.open[k] = 0;
    mr.closes++;
    pthread_mutex_unlock(&mr.mu);
}

static void mr_reset(void)
{
    memset(mr.open, 0, sizeof(mr.open));
    mr.opens = mr.closes = mr.double_opens = mr.fail_next = 0;
}

START_TEST(test_peer_maprefs)
{
    ringk_maprefs_t t = RINGK_MAPREFS_INIT;
    uint8_t k0[RINGK_MAPREFS_KEY] = {0}, k1[RINGK_MAPREFS_KEY] = {1};
    void *a = NULL, *b = NULL, *c = NULL;
    char why[128];

    mr_reset();
    /* two imports of one handle: one open, one mapping, closed at the last put */
    ck_assert_int_eq(ringk_maprefs_get(&t, k0, 4096, mr_open, &a, why, sizeof(why)), 0);
    ck_assert_int_eq(ringk_maprefs_get(&t, k0, 4096, mr_open, &b, why, sizeof(why)), 0);
    ck_assert_ptr_eq(a, b);
    ck_assert_uint_eq(mr.opens, 1);
    ck_assert_uint_eq(t.hits, 1);
    /* the same handle said to be of another size: refused, nothing changed */
    ck_assert_int_eq(ringk_maprefs_get(&t, k0, 8192, mr_open, &c, why, sizeof(why)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "mapped for an allocation of 4096 bytes, this import "
                                      "says 8192"));
    ck_assert_int_eq(ringk_maprefs_put(&t, a, 1, mr_close), 0);
    ck_assert_uint_eq(mr.closes, 0);
    ck_assert_int_eq(ringk_maprefs_put(&t, b, 1, mr_close), 0);
    ck_assert_uint_eq(mr.closes, 1);
    ck_assert_int_eq(ringk_maprefs_put(&t, b, 1, mr_close), -ENOENT); /* no reference left */
    ck_assert_int_eq(ringk_maprefs_put(&t, why, 1, mr_close), -ENOENT); /* never mapped */
    /* kept while closing is unsafe, taken again by the next import, unmapped by the flush */
    ck_assert_int_eq(ringk_maprefs_get(&t, k1, 64, mr_open, &a, why, sizeof(why)), 0);
    ck_assert_int_eq(ringk_maprefs_put(&t, a, 0, mr_close), 0);
    ck_assert_uint_eq(ringk_maprefs_unused(&t), 1);
    ck_assert_int_eq(ringk_maprefs_put(&t, a, 1, mr_close), -ENOENT);
    ck_assert_int_eq(ringk_maprefs_get(&t, k1, 64, mr_open, &b, why, sizeof(why)), 0);
    ck_assert_ptr_eq(a, b);
    ck_assert_uint_eq(mr.opens, 2);
    ck_assert_uint_eq(ringk_maprefs_unused(&t), 0);
    ck_assert_int_eq(ringk_maprefs_put(&t, b, 0, mr_close), 0);
    ck_assert_uint_eq(ringk_maprefs_flush(&t, mr_close), 1);
    ck_assert_uint_eq(ringk_maprefs_flush(&t, mr_close), 0);
    ck_assert_uint_eq(mr.closes, 2);
    /* an open that fails leaves nothing: the next import opens again */
    mr.fail_next = 1;
    ck_assert_int_eq(ringk_maprefs_get(&t, k1, 64, mr_open, &a, why, sizeof(why)), -EIO);
    ck_assert_str_eq(why, "stand-in: out of mappings");
    ck_assert_int_eq(ringk_maprefs_get(&t, k1, 64, mr_open, &a, why, sizeof(why)), 0);
    ck_assert_int_eq(ringk_maprefs_put(&t, a, 1, mr_close), 0);
    ck_assert_uint_eq(mr.opens, mr.closes);
    ck_assert_uint_eq(mr.double_opens, 0);
    free(t.e);
}
END_TEST

/* Four threads importing and dropping three handles, sometimes where closing is unsafe: no
 * handle is ever opened while mapped, and every mapping is closed once in the end. */
static ringk_maprefs_t mr_table = RINGK_MAPREFS_INIT;

static void *mr_thread(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg, i;
    uint8_t key[RINGK_MAPREFS_KEY] = {0};
    void *held[4];
    char why[128];
    int j;

    for (i = 0; i < 2000; i++) {
        for (j = 0; j < 4; j++) {
            key[0] = (uint8_t)(rand_r(&seed) % MR_KEYS);
            ck_assert_int_eq(ringk_maprefs_get(&mr_table, key, 64, mr_open, &held[j], why,
                                               sizeof(why)), 0);
        }
        for (j = 0; j < 4; j++) {
            ck_assert_int_eq(ringk_maprefs_put(&mr_table, held[j], (int)(rand_r(&seed) % 2),
                                               mr_close), 0);
        }
    }
    return NULL;
}

START_TEST(test_peer_maprefs_threads)
{
    pthread_t th[4];
    uintptr_t i;

    mr_reset();
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_create(&th[i], NULL, mr_thread, (void*)(i + 1)), 0);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    ringk_maprefs_flush(&mr_table, mr_close);
    ck_assert_uint_eq(mr.double_opens, 0);
    ck_assert_uint_eq(mr.opens, mr.closes);
    ck_assert_uint_gt(mr_table.hits, 0);
    ck_assert_uint_eq(mr_table.n, 0);
    free(mr_table.e);
}
END_TEST

void test_peer_xstage_add(Suite *s);

int main(void)
{
    Suite *s = suite_create("peer");
    TCase *tc = tcase_create("query");

    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_loop_test(tc, test_peer_query_fixture, 0, (int)(sizeof(pairs) / sizeof(pairs[0])));
    tcase_add_test(tc, test_peer_query_reload);
    tcase_add_test(tc, test_peer_query_refused);
    tcase_add_test(tc, test_peer_no_cuda);
    suite_add_tcase(s, tc);
    tc = tcase_create("stage");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_peer_stage_pipeline, 0,
                        (int)(sizeof(sq_cases) / sizeof(sq_cases[0])));
    tcase_add_test(tc, test_peer_stage_timeout);
    suite_add_tcase(s, tc);
    tc = tcase_create("maprefs");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_peer_maprefs);
    tcase_add_test(tc, test_peer_maprefs_threads);
    suite_add_tcase(s, tc);
    test_peer_xstage_add(s);
    return test_run_suite(s);
}
