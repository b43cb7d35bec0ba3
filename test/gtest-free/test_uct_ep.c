/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the ringk host data path through the public UCT API: active messages and RMA in one
 * process and between two, pending and flush, the wakeup fd, a peer killed with SIGKILL, and a
 * hostile peer writing malformed cells. */
#define _GNU_SOURCE
#include "test_util.h"
#include "test_uct.h"

#include <core/ringk_cuda.h>
#include <core/ringk_ring.h>
#include <core/ringk_topo.h>
#include <uct/ringk/base/ringk_rkey.h>
#include <uct/ringk/ring/ringk_seg.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucs/debug/log_def.h>
#include <inttypes.h>
#include <time.h>
#include <uct/api/uct.h>
#include <unistd.h>

#define AM_ID       5
#define MAX_MSG     (16 * 1024)

/* ---- a test node: one worker with one ringk iface ----------------------------------------- */

typedef struct {
    ucs_async_context_t *async;
    uct_worker_h         worker;
    uct_md_h             md;
    uct_iface_h          iface;
    uct_iface_attr_t     attr;
    uint8_t              addr[64];
    uint8_t              dev_addr[64];
    /* received messages: sequence numbers in arrival order, bytes checked on arrival */
    uint64_t             nrecv;
    uint64_t             nbad;
    uint64_t             expect_seq;
    int                  nerr;        /* endpoint errors reported */
    ucs_status_t         err_status;  /* the status of the last one */
} node_t;

/* Message payload: 8-byte sequence, 4-byte length, then pattern bytes from the sequence. */
static uint8_t pat(uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 31 + i * 7 + 3);
}

static size_t fill_msg(uint8_t *buf, uint64_t seq, size_t len)
{
    size_t i;

    memcpy(buf, &seq, 8);
    for (i = 8; i < len; i++) {
        buf[i] = pat(seq, i);
    }
    return len;
}

static ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned flags)
{
    node_t *n = arg;
    const uint8_t *p = data;
    uint64_t seq;
    size_t i;

    if (length < 8) {
        n->nbad++;
        return UCS_OK;
    }
    memcpy(&seq, p, 8);
    if (seq != n->expect_seq) {
        n->nbad++;
    }
    for (i = 8; i < length; i++) {
        if (p[i] != pat(seq, i)) {
            n->nbad++;
            break;
        }
    }
    n->expect_seq = seq + 1;
    n->nrecv++;
    return UCS_OK;
}

static ucs_status_t err_cb(void *arg, uct_ep_h ep, ucs_status_t status)
{
    node_t *n = arg;

    n->nerr++;
    n->err_status = status;
    return UCS_OK;
}

static void node_open(node_t *n, const char *name, const char *value)
{
    uct_iface_config_t *config;
    uct_iface_params_t params = {
        .field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS,
        .open_mode            = UCT_IFACE_OPEN_MODE_DEVICE,
        .mode.device.tl_name  = "ringk",
        .mode.device.dev_name = "memory",
        .err_handler          = err_cb,
        .err_handler_arg      = n,
        .err_handler_flags    = 0
    };

    memset(n, 0, sizeof(*n));
    n->md = test_ringk_md_open();
    ck_assert_int_eq(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &n->async), UCS_OK);
    ck_assert_int_eq(uct_worker_create(n->async, UCS_THREAD_MODE_SINGLE, &n->worker), UCS_OK);
    ck_assert_int_eq(uct_md_iface_config_read(n->md, "ringk", NULL, NULL, &config), UCS_OK);
    if (name != NULL) {
        ck_assert_int_eq(uct_config_modify(config, name, value), UCS_OK);
    }
    ck_assert_int_eq(uct_iface_open(n->md, n->worker, &params, config, &n->iface), UCS_OK);
    uct_config_release(config);
    ck_assert_int_eq(uct_iface_query(n->iface, &n->attr), UCS_OK);
    ck_assert_int_eq(uct_iface_set_am_handler(n->iface, AM_ID, am_cb, n, 0), UCS_OK);
    ck_assert_uint_le(n->attr.iface_addr_len, sizeof(n->addr));
    ck_assert_int_eq(uct_iface_get_address(n->iface, (uct_iface_addr_t*)n->addr), UCS_OK);
    ck_assert_int_eq(uct_iface_get_device_address(n->iface, (uct_device_addr_t*)n->dev_addr),
                     UCS_OK);
    uct_iface_progress_enable(n->iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

static void node_close(node_t *n)
{
    uct_iface_close(n->iface);
    uct_worker_destroy(n->worker);
    ucs_async_context_destroy(n->async);
    uct_md_close(n->md);
}

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Progresses @a n until it has received @a count messages; fails after 60 s. */
static void wait_recv(node_t *n, uint64_t count)
{
    double deadline = now_sec() + 60;

    while (n->nrecv < count) {
        uct_worker_progress(n->worker);
        ck_assert_msg(now_sec() < deadline, "received %" PRIu64 " of %" PRIu64
                      " messages in 60 s", n->nrecv, count);
    }
}

/* Creates an endpoint from @a from to @a to, capturing what it logs (test_captured). */
static ucs_status_t node_try_connect(node_t *from, const node_t *to, uct_ep_h *ep_p)
{
    uct_ep_params_t params = {
        .field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                      UCT_EP_PARAM_FIELD_IFACE_ADDR,
        .iface      = from->iface,
        .dev_addr   = (const uct_device_addr_t*)to->dev_addr,
        .iface_addr = (const uct_iface_addr_t*)to->addr
    };
    ucs_status_t status;

    test_capture_errors_begin();
    status = uct_ep_create(&params, ep_p);
    test_capture_errors_end();
    return status;
}

static uct_ep_h node_connect(node_t *from, const uint8_t *addr, const uint8_t *dev_addr)
{
    return test_uct_connect(from->iface, addr, dev_addr);
}

typedef struct {
    const uint8_t *buf;
    size_t         len;
} pack_arg_t;

static size_t pack_cb(void *dest, void *arg)
{
    pack_arg_t *a = arg;

    memcpy(dest, a->buf, a->len);
    return a->len;
}

typedef enum { SEND_SHORT, SEND_BCOPY, SEND_ZCOPY, SEND_MODES } send_mode_t;
static const char *mode_names[] = {"am_short", "am_bcopy", "am_zcopy"};

/* Sends one message, progressing @a progress_node while the ring is full. */
/* A process that a test kills with SIGKILL must not use Check's macros while it can be killed:
 * every passing assertion writes a record into Check's message file, shared with the runner
 * across fork(), and a record cut short by the kill corrupts it ("Bad message type arg",
 * seen once in CI). Such a child sets this and fails with _exit(3) instead. */
static int victim_child;

#define SEND_ASSERT(expr, ...)                                                                    \
    do {                                                                                          \
        if (victim_child) {                                                                       \
            if (!(expr)) {                                                                        \
                _exit(3);                                                                         \
            }                                                                                     \
        } else {                                                                                  \
            ck_assert_msg(expr, __VA_ARGS__);                                                     \
        }                                                                                         \
    } while (0)

static void send_msg(node_t *n, uct_ep_h ep, send_mode_t mode, uint64_t seq, size_t len,
                     node_t *progress_node)
{
    static uint8_t buf[MAX_MSG];
    pack_arg_t arg = {buf, len};
    uct_iov_t iov;
    ucs_status_t status;
    uint64_t hdr;
    ssize_t ret;

    fill_msg(buf, seq, len);
    for (;;) {
        switch (mode) {
        case SEND_SHORT:
            memcpy(&hdr, buf, 8);
            status = uct_ep_am_short(ep, AM_ID, hdr, buf + 8, len - 8);
            break;
        case SEND_BCOPY:
            ret    = uct_ep_am_bcopy(ep, AM_ID, pack_cb, &arg, 0);
            status = (ret >= 0) ? UCS_OK : (ucs_status_t)ret;
            if (ret >= 0) {
                SEND_ASSERT((size_t)ret == len, "am_bcopy packed %zd of %zu bytes", ret, len);
            }
            break;
        default:
            /* a memh that is not ringk's, as UCP passes when the md needs none */
            iov = (uct_iov_t){.buffer = buf + 8, .length = len - 8, .count = 1,
                              .memh = (uct_mem_h)(uintptr_t)0xdead00000000beefull};
            status = uct_ep_am_zcopy(ep, AM_ID, buf, 8, &iov, 1, 0, NULL);
            break;
        }
        if (status != UCS_ERR_NO_RESOURCE) {
            break;
        }
        uct_worker_progress((progress_node ? progress_node : n)->worker);
    }
    SEND_ASSERT(status == UCS_OK, "%s of %zu bytes: %s", mode_names[mode], len,
                ucs_status_string(status));
}

static size_t mode_max(node_t *n, send_mode_t mode)
{
    switch (mode) {
    case SEND_SHORT: return n->attr.cap.am.max_short; /* the 8-byte header included */
    case SEND_BCOPY: return n->attr.cap.am.max_bcopy;
    default:         return n->attr.cap.am.max_zcopy;
    }
}

/* ---- one process ---------------------------------------------------------------------------- */

START_TEST(test_uct_ep_query_caps)
{
    node_t n;
    const uint64_t expect = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_AM_SHORT |
                            UCT_IFACE_FLAG_AM_BCOPY | UCT_IFACE_FLAG_AM_ZCOPY |
                            UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                            UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_GET_BCOPY |
                            UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_PENDING |
                            UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_EP_CHECK |
                            UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;

    node_open(&n, NULL, NULL);
    ck_assert_uint_eq(n.attr.cap.flags, expect);
    ck_assert_uint_eq(n.attr.cap.am.max_bcopy, 8192);
    ck_assert_uint_ge(n.attr.cap.am.max_short, 1024);
    ck_assert(n.attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_FD);
    node_close(&n);
}
END_TEST

/* loop index: send mode; two ifaces in one process and an iface connected to itself */
START_TEST(test_uct_ep_am_loopback_sizes)
{
    send_mode_t mode = _i;
    node_t a, b;
    uct_ep_h ab, bb;
    uint64_t seq = 0, self_seq;
    size_t len, max;

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ab  = node_connect(&a, b.addr, b.dev_addr);
    bb  = node_connect(&b, b.addr, b.dev_addr); /* to itself */
    max = mode_max(&a, mode);
    for (len = 8; len <= max; len = (len < 200) ? len + 1 : len * 3 / 2) {
        send_msg(&a, ab, mode, seq++, len, &b);
    }
    send_msg(&a, ab, mode, seq++, max, &b);
    wait_recv(&b, seq);
    /* the self-connected ep, interleaved with the other sender's lane */
    self_seq = seq;
    for (len = 8; len <= max; len *= 2) {
        send_msg(&b, bb, mode, seq++, len, NULL);
    }
    wait_recv(&b, seq);
    ck_assert_uint_eq(b.nbad, 0);
    ck_assert_uint_gt(seq, self_seq);
    uct_ep_destroy(bb);
    uct_ep_destroy(ab);
    node_close(&b);
    node_close(&a);
}
END_TEST

START_TEST(test_uct_ep_am_length_checks)
{
    node_t a, b;
    uct_ep_h ep;
    static uint8_t buf[MAX_MSG * 2];
    pack_arg_t arg = {buf, 0};
    uct_iov_t iov[1];

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ep = node_connect(&a, b.addr, b.dev_addr);
    /* max_short counts the 8-byte header (UCX's gtest invalid_am_short_length): one byte more
     * is refused, with an error naming the length, and exactly max_short goes */
    test_capture_errors_begin();
    ck_assert_int_eq(uct_ep_am_short(ep, AM_ID, 0, buf, a.attr.cap.am.max_short - 8 + 1),
                     UCS_ERR_INVALID_PARAM);
    test_capture_errors_end();
    ck_assert_msg(strstr(test_captured, "am_short length") != NULL, "logged '%s'",
                  test_captured);
    ck_assert_int_eq(uct_ep_am_short(ep, AM_ID, 0, buf, a.attr.cap.am.max_short - 8), UCS_OK);
    iov[0] = (uct_iov_t){.buffer = buf, .length = a.attr.cap.am.max_short + 1, .count = 1};
    ck_assert_int_eq(uct_ep_am_short_iov(ep, AM_ID, iov, 1), UCS_ERR_INVALID_PARAM);
    iov[0].length = a.attr.cap.am.max_short;
    ck_assert_int_eq(uct_ep_am_short_iov(ep, AM_ID, iov, 1), UCS_OK);
    ck_assert_int_eq(uct_ep_am_short(ep, UCT_AM_ID_MAX, 0, buf, 8), UCS_ERR_INVALID_PARAM);
    arg.len = a.attr.cap.am.max_bcopy + 1;
    ck_assert_int_eq(uct_ep_am_bcopy(ep, AM_ID, pack_cb, &arg, 0), UCS_ERR_INVALID_PARAM);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

static size_t pack_zero(void *dest, void *arg)
{
    memset(dest, 0xab, 8);
    return 8;
}

static int pending_calls;
static uct_ep_h pending_ep;
static uint64_t pending_seq;
static ucs_status_t pending_send_status, pending_flush_status;

/* Sends message pending_seq on pending_ep, then flushes the ep from inside the dispatch, as
 * UCX's gtest am_pending_flush_nb does: that flush covers what went before and must not be
 * refused because this request is still queued. */
static ucs_status_t pending_cb(uct_pending_req_t *req)
{
    pending_calls++;
    pending_send_status  = uct_ep_am_short(pending_ep, AM_ID, pending_seq, NULL, 0);
    pending_flush_status = uct_ep_flush(pending_ep, 0, NULL);
    return pending_send_status;
}

START_TEST(test_uct_ep_pending_and_flush)
{
    uct_pending_req_t req = {.func = pending_cb};
    node_t a, b;
    uct_ep_h ep;
    ucs_status_t status;
    uint64_t hdr, sent = 0;
    int full = 0;

    /* both sides alike: a peer whose ring cannot take this iface's largest message is refused */
    node_open(&a, "RING_SIZE", "4");
    node_open(&b, "RING_SIZE", "4");
    ep = node_connect(&a, b.addr, b.dev_addr);
    ck_assert_int_eq(uct_ep_flush(ep, 0, NULL), UCS_OK);
    /* the receiver does not progress: the 4-cell ring fills and sends are refused */
    for (;;) {
        hdr    = sent;
        status = uct_ep_am_short(ep, AM_ID, hdr, NULL, 0);
        if (status == UCS_ERR_NO_RESOURCE) {
            full = 1;
            break;
        }
        ck_assert_int_eq(status, UCS_OK);
        sent++;
        ck_assert_uint_le(sent, 4);
    }
    ck_assert(full);
    ck_assert_uint_eq(sent, 4);
    pending_ep  = ep;
    pending_seq = sent;
    ck_assert_int_eq(uct_ep_pending_add(ep, &req, 0), UCS_OK);
    ck_assert_int_eq(uct_ep_flush(ep, 0, NULL), UCS_ERR_NO_RESOURCE);
    /* an iface flush may not say NO_RESOURCE (UCP's worker flush takes it as an error); a
     * pending request is no operation yet */
    ck_assert_int_eq(uct_iface_flush(a.iface, 0, NULL), UCS_OK);
    ck_assert_int_eq(pending_calls, 0);
    /* the receiver consumes: there is room now, but a new send may not overtake the pending
     * request (UCX's gtest send_ooo_with_pending) */
    b.expect_seq = 0;
    wait_recv(&b, sent);
    ck_assert_int_eq(uct_ep_am_short(ep, AM_ID, sent + 1, NULL, 0), UCS_ERR_NO_RESOURCE);
    ck_assert_int_eq(uct_ep_am_bcopy(ep, AM_ID, pack_zero, NULL, 0), UCS_ERR_NO_RESOURCE);
    ck_assert_int_eq(pending_calls, 0);
    /* the sender's progress dispatches it: it sends, and its flush from inside succeeds */
    while (pending_calls == 0) {
        uct_worker_progress(a.worker);
    }
    ck_assert_int_eq(pending_calls, 1);
    ck_assert_int_eq(pending_send_status, UCS_OK);
    ck_assert_int_eq(pending_flush_status, UCS_OK);
    ck_assert_int_eq(uct_ep_flush(ep, 0, NULL), UCS_OK);
    ck_assert_int_eq(uct_ep_am_short(ep, AM_ID, sent + 1, NULL, 0), UCS_OK);
    wait_recv(&b, sent + 2); /* in order: expect_seq counts them */
    ck_assert_uint_eq(b.nbad, 0);
    /* with room, pending_add refuses with BUSY (send now instead) */
    ck_assert_int_eq(uct_ep_pending_add(ep, &req, 0), UCS_ERR_BUSY);
    ck_assert_int_eq(uct_ep_fence(ep, 0), UCS_OK);
    ck_assert_int_eq(uct_iface_flush(a.iface, 0, NULL), UCS_OK);
    /* a purged request is handed back, not run */
    uct_ep_pending_purge(ep, NULL, NULL);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

START_TEST(test_uct_ep_put_get_local)
{
    node_t a, b;
    uct_ep_h ep;
    uct_mem_h memh;
    uct_rkey_bundle_t rkey;
    uct_md_attr_t md_attr;
    static uint8_t target[1 << 20], src[1 << 20], dst[1 << 20];
    uint8_t packed[256];
    uct_iov_t iov;
    size_t len;

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ep = node_connect(&a, b.addr, b.dev_addr);
    ck_assert_int_eq(uct_md_query(b.md, &md_attr), UCS_OK);
    ck_assert_uint_le(md_attr.rkey_packed_size, sizeof(packed));
    ck_assert_int_eq(uct_md_mem_reg(b.md, target, sizeof(target), UCT_MD_MEM_ACCESS_ALL, &memh), UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(b.md, memh, packed), UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), packed, &rkey), UCS_OK);
    for (len = 1; len <= sizeof(target) / 2; len *= 4) {
        fill_msg(src, len, len < 8 ? 8 : len);
        /* The md does not ask for local memory handles (no UCT_MD_FLAG_NEED_MEMH), so UCP
         * leaves whatever its request held in memh: it must not be looked at. */
        ck_assert(!(md_attr.cap.flags & UCT_MD_FLAG_NEED_MEMH));
        iov = (uct_iov_t){.buffer = src, .length = len, .count = 1,
                          .memh = (uct_mem_h)(uintptr_t)0xdead00000000beefull};
        ck_assert_int_eq(uct_ep_put_zcopy(ep, &iov, 1, (uintptr_t)target + 3, rkey.rkey, NULL),
                         UCS_OK);
        ck_assert_mem_eq(target + 3, src, len);
        memset(dst, 0, len);
        iov.buffer = dst;
        ck_assert_int_eq(uct_ep_get_zcopy(ep, &iov, 1, (uintptr_t)target + 3, rkey.rkey, NULL),
                         UCS_OK);
        ck_assert_mem_eq(dst, src, len);
    }
    ck_assert_int_eq(uct_ep_put_short(ep, src, 100, (uintptr_t)target, rkey.rkey), UCS_OK);
    ck_assert_mem_eq(target, src, 100);
    /* outside the registered region: refused, nothing written */
    ck_assert_int_eq(uct_ep_put_short(ep, src, 100, (uintptr_t)target + sizeof(target) - 50,
                                      rkey.rkey), UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(uct_ep_put_short(ep, src, 8, (uintptr_t)target - 8, rkey.rkey),
                     UCS_ERR_INVALID_PARAM);
    uct_rkey_release(test_ringk_component(), &rkey);
    uct_md_mem_dereg(b.md, memh);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

static void unpack_cb(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

/* put/get bcopy up to the advertised limit when UCX_RINGK_SEG_SIZE is larger than half a ring
 * holds (am_bcopy's limit): the staging buffer must hold the RMA limit (ASan sees an overrun). */
START_TEST(test_uct_ep_rma_bcopy_seg_size)
{
    static uint8_t target[1 << 17], src[1 << 17], dst[1 << 17];
    pack_arg_t arg = {src, 0};
    uct_rkey_bundle_t rkey;
    uint8_t packed[256];
    uct_mem_h memh;
    node_t a, b;
    uct_ep_h ep;

    node_open(&a, "SEG_SIZE", "64k");
    node_open(&b, "SEG_SIZE", "64k"); /* alike: see test_uct_ep_peer_limits */
    ck_assert_uint_eq(a.attr.cap.put.max_bcopy, 65536);
    ck_assert_uint_eq(a.attr.cap.get.max_bcopy, 65536);
    ck_assert_uint_lt(a.attr.cap.am.max_bcopy, 65536);
    ep = node_connect(&a, b.addr, b.dev_addr);
    ck_assert_int_eq(uct_md_mem_reg(b.md, target, sizeof(target), UCT_MD_MEM_ACCESS_ALL, &memh),
                     UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(b.md, memh, packed), UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), packed, &rkey), UCS_OK);
    fill_msg(src, 7, 65536);
    arg.len = 65536;
    ck_assert_int_eq(uct_ep_put_bcopy(ep, pack_cb, &arg, (uintptr_t)target + 1, rkey.rkey),
                     65536);
    ck_assert_mem_eq(target + 1, src, 65536);
    ck_assert_int_eq(uct_ep_get_bcopy(ep, unpack_cb, dst, 65536, (uintptr_t)target + 1,
                                      rkey.rkey, NULL), UCS_OK);
    ck_assert_mem_eq(dst, src, 65536);
    uct_rkey_release(test_ringk_component(), &rkey);
    uct_md_mem_dereg(b.md, memh);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

START_TEST(test_uct_ep_peer_iface_closed)
{
    node_t a, b;
    uct_ep_h ep;
    int i;

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ep = node_connect(&a, b.addr, b.dev_addr);
    ck_assert_int_eq(uct_ep_check(ep, 0, NULL), UCS_OK);
    for (i = 0; i < 100; i++) {
        uct_worker_progress(a.worker);
    }
    ck_assert_int_eq(a.nerr, 0);
    /* the peer iface goes away in this very process: the pid lives, the ep must still fail */
    node_close(&b);
    ck_assert_int_eq(uct_ep_check(ep, 0, NULL), UCS_OK);
    for (i = 0; (i < 1000) && (a.nerr == 0); i++) {
        uct_worker_progress(a.worker);
    }
    ck_assert_int_eq(a.nerr, 1);
    uct_ep_destroy(ep);
    node_close(&a);
}
END_TEST

/* uct_iface_open with the AM alignment parameters of UCX's gtest uct_p2p_am_alignment
 * (am_alignment a power of 2; am_align_offset only with it), and offsets past the alignment as
 * UCP gives them (test_ucp_am_nbx_align: offset 8, alignment 4). */
static const struct {
    uint64_t     fields;     /* UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT / _AM_ALIGN_OFFSET */
    size_t       alignment, offset;
    ucs_status_t expect;
    const char  *logged;     /* part of the error message, "" for none */
} am_aligns[] = {
    {UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET, 0, 11, UCS_ERR_INVALID_PARAM, "without am_alignment"},
    {UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET, 8, 8, UCS_ERR_INVALID_PARAM, "without am_alignment"},
    {UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT | UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET, 4, 8, UCS_OK,
     ""},
    {UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT | UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET, 8, 11, UCS_OK,
     ""},
    {UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT, 0, 0, UCS_ERR_INVALID_PARAM, "am_alignment 0"},
    {UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT, 3, 1, UCS_ERR_INVALID_PARAM, "am_alignment 3"},
    {UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT | UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET, 8, 7, UCS_OK,
     ""},
    {UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT, 64, 0, UCS_OK, ""},
};

START_TEST(test_uct_ep_am_alignment_params)
{
    uct_iface_params_t params = {
        .field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                                am_aligns[_i].fields,
        .open_mode            = UCT_IFACE_OPEN_MODE_DEVICE,
        .mode.device.tl_name  = "ringk",
        .mode.device.dev_name = "memory",
        .am_alignment         = am_aligns[_i].alignment,
        .am_align_offset      = am_aligns[_i].offset
    };
    uct_iface_config_t *config;
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_iface_h iface;
    ucs_status_t status;
    uct_md_h md = test_ringk_md_open();

    ck_assert_int_eq(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async), UCS_OK);
    ck_assert_int_eq(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker), UCS_OK);
    ck_assert_int_eq(uct_md_iface_config_read(md, "ringk", NULL, NULL, &config), UCS_OK);
    test_capture_errors_begin();
    status = uct_iface_open(md, worker, &params, config, &iface);
    test_capture_errors_end();
    ck_assert_int_eq(status, am_aligns[_i].expect);
    ck_assert_msg(strstr(test_captured, am_aligns[_i].logged) != NULL, "logged '%s'",
                  test_captured);
    if (status == UCS_OK) {
        uct_iface_close(iface);
    }
    uct_config_release(config);
    uct_worker_destroy(worker);
    ucs_async_context_destroy(async);
    uct_md_close(md);
}
END_TEST

/* UCX's gtest peer_failure: after the peer is gone, a zero-length put (NULL buffer, no key) is
 * a no-op that succeeds, and the failure reaches the error handler at the next iface flush,
 * which says INPROGRESS until it did. The handler's status is the one every later operation
 * on the ep returns: UCP completes requests on a failed lane with ENDPOINT_TIMEOUT. */
START_TEST(test_uct_ep_peer_failure_at_flush)
{
    ucs_status_t status;
    node_t a, b;
    uct_ep_h ep;
    int i;

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ep = node_connect(&a, b.addr, b.dev_addr);
    ck_assert_int_eq(uct_ep_put_short(ep, NULL, 0, 0, 0), UCS_OK);
    ck_assert_int_eq(uct_iface_flush(a.iface, 0, NULL), UCS_OK);
    node_close(&b);
    ck_assert_int_eq(uct_ep_put_short(ep, NULL, 0, 0, 0), UCS_OK);
    ck_assert_int_eq(a.nerr, 0);
    for (i = 0; i < 1000; i++) {
        status = uct_iface_flush(a.iface, 0, NULL);
        if (status != UCS_INPROGRESS) {
            break;
        }
        uct_worker_progress(a.worker);
    }
    ck_assert_int_eq(status, UCS_OK);
    ck_assert_int_gt(i, 0); /* it waited for the report */
    ck_assert_int_eq(a.nerr, 1);
    ck_assert_int_eq(a.err_status, UCS_ERR_ENDPOINT_TIMEOUT);
    ck_assert_int_eq(uct_ep_flush(ep, 0, NULL), a.err_status);
    ck_assert_int_eq(uct_ep_flush(ep, UCT_FLUSH_FLAG_CANCEL, NULL), UCS_OK);
    uct_ep_destroy(ep);
    node_close(&a);
}
END_TEST

/* ---- hostile peer ------------------------------------------------------------------------------ */

/* Maps a node's receive segment the way a peer does, through its iface address. */
static void *map_segment(node_t *n, uint64_t *bytes_p)
{
    uint64_t seg_bytes;
    uint32_t pid;
    int32_t fd;
    char path[64];
    void *seg;
    int f;

    memcpy(&seg_bytes, n->addr + 8, 8);
    memcpy(&pid, n->addr + 16, 4);
    memcpy(&fd, n->addr + 20, 4);
    snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, fd);
    f = open(path, O_RDWR);
    ck_assert_int_ge(f, 0);
    seg = mmap(NULL, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    close(f);
    ck_assert_ptr_ne(seg, MAP_FAILED);
    *bytes_p = seg_bytes;
    return seg;
}

/* Maps @a n's receive segment as a peer would and attaches its shared lane (lane 0). */
static void *shared_lane_attach(node_t *n, ringk_ring_t *ring, uint64_t *bytes_p)
{
    void *seg = map_segment(n, bytes_p);
    const uct_ringk_seg_shm_t *hdr = seg;

    ck_assert_int_eq(ringk_ring_attach(ring, (char*)seg + hdr->rings_offset, hdr->lane_stride),
                     0);
    return seg;
}

/* The end of a test that wrote into @a b's shared lane: @a b got @a nrecv messages, all intact;
 * then everything goes. */
static void shared_lane_test_end(node_t *a, node_t *b, uct_ep_h ep, void *seg, uint64_t bytes,
                                 uint64_t nrecv)
{
    ck_assert_uint_eq(b->nrecv, nrecv);
    ck_assert_uint_eq(b->nbad, 0);
    munmap(seg, bytes);
    uct_ep_destroy(ep);
    node_close(b);
    node_close(a);
}

static const struct {
    uint32_t len;
    uint16_t ncells;
    uint8_t  id;
    const char *what;
} bad_cells[] = {
    {16, 1, 200, "am id 200"},
    {16, 0, AM_ID, "cells 0"},
    {16, 60000, AM_ID, "cells 60000"},
    {100000, 1, AM_ID, "length 100000"},
    {49, 1, AM_ID, "length 49"},
};

START_TEST(test_uct_ep_malformed_cells)
{
    node_t a, b;
    uct_ep_h ep;
    uint64_t bytes, pos;
    ringk_ring_t ring;
    void *seg;
    uint64_t seq;

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ep  = node_connect(&a, b.addr, b.dev_addr); /* an honest sender on its own lane */
    /* the hostile writer uses the shared lane, as a sender without a lane of its own would */
    seg = shared_lane_attach(&b, &ring, &bytes);
    ck_assert(ringk_ring_mp_claim(&ring, 1, &pos));
    seq = 0;
    ringk_ring_write(&ring, pos, 0, &seq, 8);
    ringk_ring_publish(&ring, pos, bad_cells[_i].len, bad_cells[_i].ncells, bad_cells[_i].id, 0);

    test_capture_errors_begin();
    send_msg(&a, ep, SEND_SHORT, 0, 64, &b);
    send_msg(&a, ep, SEND_BCOPY, 1, 3000, &b);
    wait_recv(&b, 2);
    test_capture_errors_end();
    /* the malformed cell is dropped with an error, the honest lane is intact */
    ck_assert_msg(strstr(test_captured, "dropping malformed message") != NULL, "log: %s",
                  test_captured);
    shared_lane_test_end(&a, &b, ep, seg, bytes, 2);
}
END_TEST

/* Processes whose rings differ: a sender whose largest message the peer cannot take is refused
 * at endpoint creation, naming both limits; one whose cells differ in size from the peer's packs
 * its largest messages in place over as many of the peer's cells as they take, across many
 * wrap-arounds of the peer's ring, and every one arrives intact. */
START_TEST(test_uct_ep_peer_limits)
{
    node_t a, b;
    uct_ep_h ep;
    ucs_status_t status;
    unsigned i;

    node_open(&a, "SEG_SIZE", "16k");
    node_open(&b, NULL, NULL);
    status = node_try_connect(&a, &b, &ep);
    ck_assert_int_eq(status, UCS_ERR_UNREACHABLE);
    ck_assert_msg(strstr(test_captured, "takes messages of up to 8192 bytes, this iface sends up "
                         "to 16384") != NULL, "logged '%s'", test_captured);
    ep = node_connect(&b, a.addr, a.dev_addr); /* the other way round: the smaller fits */
    send_msg(&b, ep, SEND_BCOPY, 0, 8192, &a);
    wait_recv(&a, 1);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);

    /* 256-byte cells sending into 64-byte cells: 8 KiB takes 129 of the peer's cells */
    node_open(&a, "CELL_SIZE", "256");
    node_open(&b, NULL, NULL);
    ep = node_connect(&a, b.addr, b.dev_addr);
    for (i = 0; i < 64; i++) {
        send_msg(&a, ep, SEND_BCOPY, i, 8192, &b);
        wait_recv(&b, i + 1);
    }
    ck_assert_uint_eq(b.nbad, 0);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

/* Cells a sender claimed and gave up (as am_zcopy does when copying its data fails) are passed
 * over: the messages sent after them on the same lane arrive, and nothing is logged. With one
 * lane, the test's writer and the endpoint share lane 0. */
START_TEST(test_uct_ep_cancelled_cells_passed)
{
    node_t a, b;
    uct_ep_h ep;
    uint64_t bytes, pos;
    ringk_ring_t ring;
    void *seg;

    node_open(&a, "LANES", "1");
    node_open(&b, "LANES", "1");
    ep  = node_connect(&a, b.addr, b.dev_addr);
    seg = shared_lane_attach(&b, &ring, &bytes);
    test_capture_errors_begin();
    send_msg(&a, ep, SEND_SHORT, 0, 64, &b);
    wait_recv(&b, 1);
    ck_assert(ringk_ring_mp_claim(&ring, 3, &pos));
    ringk_ring_cancel(&ring, pos, 3);
    send_msg(&a, ep, SEND_SHORT, 1, 64, &b);
    send_msg(&a, ep, SEND_BCOPY, 2, 3000, &b);
    wait_recv(&b, 3);
    test_capture_errors_end();
    ck_assert_msg(test_captured[0] == '\0', "logged: %s", test_captured);
    shared_lane_test_end(&a, &b, ep, seg, bytes, 3);
}
END_TEST

/* ---- two processes ---------------------------------------------------------------------------- */

typedef struct {
    uint8_t  addr[64];
    uint8_t  dev_addr[64];
    uint8_t  rkey[256];
    uint64_t target;
} peer_info_t;

/* Entries in /dev/shm that ringk or UCX could have made (ringk's segments are unlinked memfds,
 * so none is expected). Others are not counted: tests run in parallel, and Open MPI's segments
 * from test_job.sh came and went during this test once in CI. contrib/test.sh checks all of
 * /dev/shm after the whole suite. */
static int count_dev_shm(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        n += (strstr(e->d_name, "ringk") != NULL) || (strstr(e->d_name, "ucx") != NULL);
    }
    closedir(d);
    return n;
}

/* Receiver child: opens an iface, publishes its address and a registered 4 MiB buffer, counts
 * messages until it has @a expect, then reports count and errors and waits for the parent. */
static void child_receiver(int wfd, int rfd, uint64_t expect)
{
    static uint8_t target[4 << 20];
    peer_info_t info = {{0}};
    uct_mem_h memh;
    uint64_t result[2];
    char go;
    node_t n;

    node_open(&n, NULL, NULL);
    memcpy(info.addr, n.addr, sizeof(info.addr));
    memcpy(info.dev_addr, n.dev_addr, sizeof(info.dev_addr));
    ck_assert_int_eq(uct_md_mem_reg(n.md, target, sizeof(target), UCT_MD_MEM_ACCESS_ALL, &memh), UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(n.md, memh, info.rkey), UCS_OK);
    info.target = (uintptr_t)target;
    ck_assert_int_eq(write(wfd, &info, sizeof(info)), sizeof(info));
    wait_recv(&n, expect);
    result[0] = n.nrecv;
    result[1] = n.nbad;
    ck_assert_int_eq(write(wfd, result, sizeof(result)), sizeof(result));
    /* wait for the parent's RMA checks, reading our buffer back through a message */
    ck_assert_int_eq(read(rfd, &go, 1), 1);
    ck_assert_int_eq(write(wfd, target, 4096), 4096);
    ck_assert_int_eq(read(rfd, &go, 1), 1);
    uct_md_mem_dereg(n.md, memh);
    node_close(&n);
    _exit(0);
}

START_TEST(test_uct_ep_two_process_am_rma)
{
    int p2c[2], c2p[2], status;
    peer_info_t info;
    uint64_t result[2], seq = 0;
    static uint8_t buf[4096], back[4096], src[1 << 20], dst[1 << 20];
    uct_rkey_bundle_t rkey;
    const uint64_t nmsgs = 3 * 2000;
    uct_iov_t iov;
    node_t a;
    uct_ep_h ep;
    pid_t pid;
    size_t len;
    int mode, i;

    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_receiver(c2p[1], p2c[0], nmsgs);
    }
    ck_assert_int_eq(read(c2p[0], &info, sizeof(info)), sizeof(info));
    node_open(&a, NULL, NULL);
    ep = node_connect(&a, info.addr, info.dev_addr);
    /* the path the endpoint actually uses, through the plugin's query, and why */
    {
        ucs_status_t (*query)(uct_ep_h, const char**, const char**);
        const char *path, *reason;

        *(void**)&query = dlsym(RTLD_DEFAULT, "uct_ringk_ep_path_query");
        ck_assert_ptr_nonnull(query);
        ck_assert_int_eq(query(ep, &path, &reason), UCS_OK);
        ck_assert_str_eq(path, "HOST_STAGED");
        ck_assert_msg(strstr(reason, "shared-memory rings") && strstr(reason, "memfd") &&
                      strstr(reason, "same node: same boot id, PID, IPC and network namespaces"),
                      "reason: %s", reason);
        ck_assert_msg(strstr(reason, "own lane 1") != NULL, "reason: %s", reason);
        printf("# two processes: path %s: %s\n", path, reason);
    }
    /* 2000 messages of each kind, sizes cycling from 8 bytes to the maximum */
    for (mode = 0; mode < SEND_MODES; mode++) {
        for (i = 0; i < 2000; i++) {
            len = 8 + (i * 97) % (mode_max(&a, mode) - 7);
            send_msg(&a, ep, mode, seq++, len, NULL);
        }
    }
    ck_assert_int_eq(read(c2p[0], result, sizeof(result)), sizeof(result));
    ck_assert_uint_eq(result[0], nmsgs);
    ck_assert_uint_eq(result[1], 0);

    /* RMA into the other process, at sizes from 1 byte to 1 MiB, read back by get */
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), info.rkey, &rkey), UCS_OK);
    for (len = 1; len <= sizeof(src); len *= 8) {
        fill_msg(src, len + 1, len < 8 ? 8 : len);
        iov = (uct_iov_t){.buffer = src, .length = len, .count = 1};
        ck_assert_int_eq(uct_ep_put_zcopy(ep, &iov, 1, info.target + 4096, rkey.rkey, NULL),
                         UCS_OK);
        iov.buffer = dst;
        memset(dst, 0, len);
        ck_assert_int_eq(uct_ep_get_zcopy(ep, &iov, 1, info.target + 4096, rkey.rkey, NULL),
                         UCS_OK);
        ck_assert_mem_eq(dst, src, len);
    }
    fill_msg(buf, 77, sizeof(buf));
    ck_assert_int_eq(uct_ep_put_short(ep, buf, sizeof(buf), info.target, rkey.rkey), UCS_OK);
    ck_assert_int_eq(write(p2c[1], "g", 1), 1);
    ck_assert_int_eq(read(c2p[0], back, sizeof(back)), sizeof(back));
    ck_assert_mem_eq(back, buf, sizeof(buf)); /* seen by the child itself */
    uct_rkey_release(test_ringk_component(), &rkey);
    ck_assert_int_eq(write(p2c[1], "q", 1), 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    uct_ep_destroy(ep);
    node_close(&a);
}
END_TEST

START_TEST(test_uct_ep_event_fd_wakeup)
{
    int p2c[2], c2p[2], fd, status, n_wake = 0, i;
    peer_info_t info;
    struct pollfd pfd;
    node_t a, b;
    uct_ep_h ep;
    pid_t pid;
    char go;

    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    node_open(&b, NULL, NULL);
    ck_assert_int_eq(uct_iface_event_fd_get(b.iface, &fd), UCS_OK);
    memcpy(info.addr, b.addr, sizeof(info.addr));
    memcpy(info.dev_addr, b.dev_addr, sizeof(info.dev_addr));
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* sender child: one message each time the parent says it sleeps */
        node_open(&a, NULL, NULL);
        ep = node_connect(&a, info.addr, info.dev_addr);
        for (i = 0; i < 5; i++) {
            ck_assert_int_eq(read(p2c[0], &go, 1), 1);
            usleep(20000); /* let the parent enter poll() */
            send_msg(&a, ep, SEND_SHORT, i, 16, NULL);
        }
        ck_assert_int_eq(read(p2c[0], &go, 1), 1);
        uct_ep_destroy(ep);
        node_close(&a);
        _exit(0);
    }
    for (i = 0; i < 5; i++) {
        while (uct_iface_event_arm(b.iface, UCT_EVENT_RECV) == UCS_ERR_BUSY) {
            uct_worker_progress(b.worker);
        }
        ck_assert_int_eq(write(p2c[1], "s", 1), 1);
        pfd = (struct pollfd){.fd = fd, .events = POLLIN};
        /* sleep: the sender's message must wake us well before the timeout */
        ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
        n_wake++;
        wait_recv(&b, (uint64_t)i + 1);
        /* with the message consumed nothing is left, and a fresh arm succeeds; with a message
         * waiting, arm says BUSY */
    }
    ck_assert_int_eq(n_wake, 5);
    ck_assert_uint_eq(b.nrecv, 5);
    ck_assert_uint_eq(b.nbad, 0);
    ck_assert_int_eq(write(p2c[1], "q", 1), 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    node_close(&b);
}
END_TEST

START_TEST(test_uct_ep_arm_busy_with_message)
{
    node_t a, b;
    uct_ep_h ep;
    int fd;

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ck_assert_int_eq(uct_iface_event_fd_get(b.iface, &fd), UCS_OK);
    ck_assert_int_eq(uct_iface_event_arm(b.iface, UCT_EVENT_RECV), UCS_OK);
    ep = node_connect(&a, b.addr, b.dev_addr);
    send_msg(&a, ep, SEND_SHORT, 0, 16, NULL);
    ck_assert_int_eq(uct_iface_event_arm(b.iface, UCT_EVENT_RECV), UCS_ERR_BUSY);
    wait_recv(&b, 1);
    ck_assert_int_eq(uct_iface_event_arm(b.iface, UCT_EVENT_RECV), UCS_OK);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

/* A sender child floods the parent; the parent kills it with SIGKILL mid-stream. The parent
 * must go on: its ep to the dead child reports an error, its lane is reclaimed, and a new
 * sender gets a lane and is delivered in order. Nothing appears in /dev/shm. */
START_TEST(test_uct_ep_kill9_sender)
{
    int c2p[2], shm_before = count_dev_shm(), i;
    peer_info_t info;
    node_t b, c;
    uct_ep_h back_ep, ep2;
    uint64_t before;
    pid_t pid;

    ck_assert_int_eq(pipe(c2p), 0);
    node_open(&b, "LANES", "2"); /* one own lane: the dead sender's must come back */
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        node_t a;
        uct_ep_h ep;
        uint64_t seq = 0;

        node_open(&a, NULL, NULL);
        ep = node_connect(&a, b.addr, b.dev_addr);
        memset(&info, 0, sizeof(info)); /* no rkey here: valgrind saw it written uninitialised */
        memcpy(info.addr, a.addr, sizeof(info.addr));
        memcpy(info.dev_addr, a.dev_addr, sizeof(info.dev_addr));
        victim_child = 1; /* from here on it can be killed at any instruction */
        if (write(c2p[1], &info, sizeof(info)) != sizeof(info)) {
            _exit(3);
        }
        for (;;) {
            send_msg(&a, ep, (seq % 3), seq, 8 + (seq * 13) % (mode_max(&a, seq % 3) - 8), &a);
            seq++;
        }
    }
    ck_assert_int_eq(read(c2p[0], &info, sizeof(info)), sizeof(info));
    back_ep = node_connect(&b, info.addr, info.dev_addr);
    wait_recv(&b, 5000);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    before = b.nrecv;
    for (i = 0; i < 100000; i++) {
        uct_worker_progress(b.worker); /* drains what the child published; must not hang */
    }
    ck_assert_uint_ge(b.nrecv, before);
    ck_assert_uint_eq(b.nbad, 0);
    /* the ep to the dead process reports the failure */
    ck_assert_int_eq(uct_ep_check(back_ep, 0, NULL), UCS_OK);
    for (i = 0; (i < 100000) && (b.nerr == 0); i++) {
        uct_worker_progress(b.worker);
    }
    ck_assert_int_eq(b.nerr, 1);
    /* the dead sender's lane is reclaimed: a new sender gets it and is delivered in order */
    for (i = 0; i < 1000; i++) {
        uct_worker_progress(b.worker);
    }
    node_open(&c, NULL, NULL);
    ep2 = node_connect(&c, b.addr, b.dev_addr);
    b.expect_seq = 1000000;
    before       = b.nrecv;
    for (i = 0; i < 100; i++) {
        send_msg(&c, ep2, SEND_BCOPY, 1000000 + i, 100, &b);
    }
    wait_recv(&b, before + 100);
    ck_assert_uint_eq(b.nbad, 0);
    ck_assert_int_eq(count_dev_shm(), shm_before);
    uct_ep_destroy(ep2);
    node_close(&c);
    uct_ep_destroy(back_ep);
    node_close(&b);
}
END_TEST

/* ---- many peers ---------------------------------------------------------------------------- */

#define MANY_PEERS 70

static uint64_t many_expect[MANY_PEERS];
static uint64_t many_bad, many_recv;

static ucs_status_t many_am_cb(void *arg, void *data, size_t length, unsigned flags)
{
    uint64_t seq, sender, n;
    size_t i;

    memcpy(&seq, data, 8);
    sender = seq >> 32;
    n      = seq & 0xffffffffu;
    if ((sender >= MANY_PEERS) || (n != many_expect[sender])) {
        many_bad++;
        return UCS_OK;
    }
    for (i = 8; i < length; i++) {
        if (((uint8_t*)data)[i] != pat(seq, i)) {
            many_bad++;
            break;
        }
    }
    many_expect[sender]++;
    many_recv++;
    return UCS_OK;
}

/* 70 senders into one iface with 16 lanes: 15 get lanes of their own, 55 share lane 0; every
 * message arrives, in order per sender. */
START_TEST(test_uct_ep_many_peers)
{
    static node_t senders[MANY_PEERS];
    uct_ep_h eps[MANY_PEERS];
    const int rounds = 50;
    node_t b;
    int i, r;

    node_open(&b, "LANES", "16");
    ck_assert_int_eq(uct_iface_set_am_handler(b.iface, AM_ID, many_am_cb, NULL, 0), UCS_OK);
    memset(many_expect, 0, sizeof(many_expect));
    many_bad = many_recv = 0;
    for (i = 0; i < MANY_PEERS; i++) {
        node_open(&senders[i], NULL, NULL);
        eps[i] = node_connect(&senders[i], b.addr, b.dev_addr);
    }
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < MANY_PEERS; i++) {
            send_msg(&senders[i], eps[i], r % SEND_MODES, ((uint64_t)i << 32) | r,
                     8 + (r * 37 + i) % 1500, &b);
        }
    }
    while (many_recv < (uint64_t)MANY_PEERS * rounds) {
        uct_worker_progress(b.worker);
    }
    ck_assert_uint_eq(many_bad, 0);
    for (i = 0; i < MANY_PEERS; i++) {
        ck_assert_uint_eq(many_expect[i], rounds);
        uct_ep_destroy(eps[i]);
        node_close(&senders[i]);
    }
    node_close(&b);
}
END_TEST

/* ---- GPU memory paths: chosen per endpoint from the two GPUs' places ------------------------ */

/* Each case: a topology fixture, the GPU of each iface (UCX_RINGK_GPU), the overrides, and the
 * path and words of the reason the endpoint must report (NULL path: ep_create must fail). No
 * GPU is needed: the locations come from the configuration and the topology from the file. */
static const struct {
    const char *topo, *gpu_a, *gpu_b, *p2p_level, *force;
    const char *path, *why;
} gpu_paths[] = {
    {"nvswitch-8gpu.xml", "0000:14:00.0", "0000:94:00.0", NULL, NULL, "P2P_NVLINK",
     "GPU 0000:14:00.0 -> 0000:94:00.0 (GPU0-GPU4 of"},
    {"nvswitch-8gpu.xml", "0000:14:00.0", "0000:94:00.0", NULL, NULL, "P2P_NVLINK",
     "NVSwitch fabric: 18 NVLinks (gen 4)"},
    {"nvswitch-8gpu.xml", "0000:18:00.0", "0000:18:00.0", NULL, NULL, "CUDA_IPC",
     "one GPU, its memory mapped by CUDA IPC"},
    {"pcie-4gpu.xml", "0000:04:00.0", "05:00.0", NULL, NULL, "P2P_PCIE",
     "share a PCIe switch (1 switch level)"},
    {"pcie-4gpu.xml", "0000:04:00.0", "0000:07:00.0", NULL, NULL, "HOST_STAGED",
     "HOST_BRIDGE is beyond RINGK_P2P_LEVEL=PCIE_SWITCH"},
    {"pcie-4gpu.xml", "0000:04:00.0", "0000:07:00.0", "HOST_BRIDGE", NULL, "P2P_PCIE",
     "HOST_BRIDGE within RINGK_P2P_LEVEL=HOST_BRIDGE"},
    {"pcie-4gpu.xml", "0000:04:00.0", "0000:07:00.0", NULL, "CUDA_IPC", "CUDA_IPC",
     "forced by RINGK_PATH=CUDA_IPC"},
    {"pcie-4gpu.xml", "0000:04:00.0", "0000:05:00.0", NULL, "P2P_NVLINK", NULL,
     "RINGK_PATH=P2P_NVLINK cannot serve a PCIE_SWITCH pair"},
    {"dual-socket.xml", "0000:17:00.0", "0000:b1:00.0", NULL, NULL, "P2P_NVLINK",
     "2 direct NVLinks (gen 3)"},
    {"dual-socket.xml", "0000:3b:00.0", "0000:b1:00.0", NULL, NULL, "HOST_STAGED",
     "CROSS_SOCKET is beyond RINGK_P2P_LEVEL"},
    {"vm-flat.xml", "0000:00:05.0", "0000:99:00.0", NULL, NULL, "HOST_STAGED",
     "0000:99:00.0 is not in the topology of"},
    {"pcie-4gpu.xml", "0000:04:00.0", "none", NULL, NULL, "HOST_STAGED",
     "no GPU pair (this process: a GPU; the peer: none)"},
    {"pcie-4gpu.xml", "none", "none", NULL, "P2P_PCIE", "HOST_STAGED",
     "RINGK_PATH is ignored: host memory has only the host-staged path"},
    {"no-such-file.xml", "0000:04:00.0", "0000:05:00.0", NULL, NULL, "HOST_STAGED",
     "no topology ("},
};

START_TEST(test_uct_ep_gpu_path)
{
    ucs_status_t (*query)(uct_ep_h, const char**, const char**);
    const char *src = getenv("RINGK_TOP_SRCDIR"), *path, *reason;
    char file[1024];
    ucs_status_t status;
    node_t a, b;
    uct_ep_h ep;

    *(void**)&query = dlsym(RTLD_DEFAULT, "uct_ringk_ep_path_query");
    ck_assert_ptr_nonnull(query);
    snprintf(file, sizeof(file), "%s/test/gtest-free/topo/%s", src ? src : "..",
             gpu_paths[_i].topo);
    setenv("RINGK_TOPO_FILE", file, 1);
    if (gpu_paths[_i].p2p_level != NULL) {
        setenv("RINGK_P2P_LEVEL", gpu_paths[_i].p2p_level, 1);
    }
    if (gpu_paths[_i].force != NULL) {
        setenv("RINGK_PATH", gpu_paths[_i].force, 1);
    }
    node_open(&a, "GPU", gpu_paths[_i].gpu_a);
    node_open(&b, "GPU", gpu_paths[_i].gpu_b);
    unsetenv("RINGK_P2P_LEVEL");
    unsetenv("RINGK_PATH");
    status = node_try_connect(&a, &b, &ep);
    unsetenv("RINGK_TOPO_FILE");
    if (gpu_paths[_i].path == NULL) {
        ck_assert_int_eq(status, UCS_ERR_UNREACHABLE);
        ck_assert_msg(strstr(test_captured, gpu_paths[_i].why) != NULL, "logged '%s'",
                      test_captured);
    } else {
        ck_assert_int_eq(status, UCS_OK);
        ck_assert_int_eq(query(ep, &path, &reason), UCS_OK);
        ck_assert_msg(!strcmp(path, gpu_paths[_i].path) &&
                      (strstr(reason, gpu_paths[_i].why) != NULL), "%s -> %s on %s: path %s, "
                      "reason '%s'", gpu_paths[_i].gpu_a, gpu_paths[_i].gpu_b, gpu_paths[_i].topo,
                      path, reason);
        /* host memory still goes through the rings, whatever the GPU path */
        ck_assert_msg(strstr(reason, "host memory: shared-memory rings") != NULL, "%s", reason);
        send_msg(&a, ep, SEND_SHORT, 0, 64, &b);
        wait_recv(&b, 1);
        uct_ep_destroy(ep);
    }
    node_close(&b);
    node_close(&a);
}
END_TEST

/* The transport's UCX_RINGK_TOPO_FILE / UCX_RINGK_PATH / UCX_RINGK_P2P_LEVEL are used, and win
 * over the plain RINGK_* names of the environment (set here to values that would fail). */
START_TEST(test_uct_ep_gpu_path_ucx_config)
{
    static const struct {
        const char *level, *force, *path, *why;
    } cases[] = {
        {NULL, "CUDA_IPC", "CUDA_IPC", "forced by UCX_RINGK_PATH=CUDA_IPC"},
        {"HOST_BRIDGE", NULL, "P2P_PCIE", "HOST_BRIDGE within UCX_RINGK_P2P_LEVEL=HOST_BRIDGE"},
    };
    ucs_status_t (*query)(uct_ep_h, const char**, const char**);
    const char *src = getenv("RINGK_TOP_SRCDIR"), *path, *reason;
    char file[1024];
    node_t a, b;
    uct_ep_h ep;

    *(void**)&query = dlsym(RTLD_DEFAULT, "uct_ringk_ep_path_query");
    ck_assert_ptr_nonnull(query);
    snprintf(file, sizeof(file), "%s/test/gtest-free/topo/pcie-4gpu.xml", src ? src : "..");
    setenv("UCX_RINGK_TOPO_FILE", file, 1);
    setenv("RINGK_TOPO_FILE", "/nonexistent/topology.xml", 1);
    setenv("RINGK_PATH", "P2P_NVLINK", 1);       /* no NVLink in the file: unreachable */
    setenv("RINGK_P2P_LEVEL", "SAME_DEVICE", 1); /* P2P for no pair of two GPUs */
    if (cases[_i].force != NULL) {
        setenv("UCX_RINGK_PATH", cases[_i].force, 1);
    } else {
        /* an empty UCX setting leaves the plain one in force: overridden here by the level */
        unsetenv("RINGK_PATH");
        setenv("UCX_RINGK_P2P_LEVEL", cases[_i].level, 1);
    }
    node_open(&a, "GPU", "0000:04:00.0");
    node_open(&b, "GPU", "0000:07:00.0");
    unsetenv("UCX_RINGK_TOPO_FILE");
    unsetenv("UCX_RINGK_PATH");
    unsetenv("UCX_RINGK_P2P_LEVEL");
    unsetenv("RINGK_TOPO_FILE");
    unsetenv("RINGK_PATH");
    unsetenv("RINGK_P2P_LEVEL");
    ck_assert_int_eq(node_try_connect(&a, &b, &ep), UCS_OK);
    ck_assert_int_eq(query(ep, &path, &reason), UCS_OK);
    ck_assert_msg(!strcmp(path, cases[_i].path) && (strstr(reason, cases[_i].why) != NULL),
                  "path %s, reason '%s'", path, reason);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

/* Without a usable CUDA driver the md registers host memory only, detects host pointers as host,
 * and a peer's CUDA remote key is unreachable, never mapped (a key of this process is used in
 * place); a CUDA key whose range leaves its allocation is refused before any CUDA call. */
START_TEST(test_uct_ep_cuda_rkey_without_gpu)
{
    uct_ringk_packed_rkey_t packed = {
        .magic = UCT_RINGK_RKEY_MAGIC, .pid = 1234, .address = 0x7f0000001000, .length = 4096,
        .mem_type = UCS_MEMORY_TYPE_CUDA, .gpu = 0, .alloc_base = 0x7f0000000000,
        .alloc_size = 1 << 20
    };
    ucs_memory_type_t mem_type;
    uct_rkey_bundle_t rkey;
    uct_md_attr_t attr;
    ucs_status_t status;
    static char host[64];
    char why[128];
    uct_md_h md;

    if (ringk_cuda_usable(why, sizeof(why))) {
        printf("# CUDA is usable here: the no-GPU behaviour is not checked\n");
        return;
    }
    md = test_ringk_md_open();
    ck_assert_int_eq(uct_md_query(md, &attr), UCS_OK);
    ck_assert_uint_eq(attr.cap.reg_mem_types, UCS_BIT(UCS_MEMORY_TYPE_HOST));
    ck_assert_uint_eq(attr.cap.detect_mem_types, 0);
    ck_assert_uint_ge(attr.rkey_packed_size, sizeof(packed));
    ck_assert_int_eq(uct_md_detect_memory_type(md, host, sizeof(host), &mem_type), UCS_OK);
    ck_assert_int_eq(mem_type, UCS_MEMORY_TYPE_HOST);

    packed.gpu       = ringk_busid_pack("0000:14:00.0");
    packed.ipc_valid = 1;
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &rkey),
                     UCS_ERR_UNREACHABLE); /* cannot be mapped here */
    packed.ipc_valid = 0;
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &rkey),
                     UCS_ERR_UNREACHABLE); /* the owner could not export it */
    /* a key of this very process is not mapped but used in place */
    packed.pid = (uint32_t)getpid();
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &rkey), UCS_OK);
    ck_assert_ptr_eq(((uct_ringk_rkey_t*)rkey.rkey)->mapped, (void*)(uintptr_t)packed.alloc_base);
    ck_assert_int_eq(((uct_ringk_rkey_t*)rkey.rkey)->own, 1);
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &rkey), UCS_OK);
    rkey.rkey   = 0; /* never unpacked, as UCX's perftest releases keys on its error path */
    rkey.handle = NULL;
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &rkey), UCS_OK);
    packed.pid = 1234;

    packed.address = packed.alloc_base + packed.alloc_size - 100; /* runs past its allocation */
    test_capture_errors_begin();
    status = uct_rkey_unpack(test_ringk_component(), &packed, &rkey);
    test_capture_errors_end();
    ck_assert_int_eq(status, UCS_ERR_INVALID_PARAM);
    ck_assert_msg(strstr(test_captured, "is not inside its allocation") != NULL, "logged '%s'",
                  test_captured);
    uct_md_close(md);
}
END_TEST

void test_uct_ep_tcases(Suite *s)
{
    TCase *tc;

    tc = tcase_create("ep_local");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_uct_ep_query_caps);
    tcase_add_loop_test(tc, test_uct_ep_am_loopback_sizes, 0, SEND_MODES);
    tcase_add_test(tc, test_uct_ep_am_length_checks);
    tcase_add_test(tc, test_uct_ep_pending_and_flush);
    tcase_add_test(tc, test_uct_ep_put_get_local);
    tcase_add_test(tc, test_uct_ep_rma_bcopy_seg_size);
    tcase_add_test(tc, test_uct_ep_peer_iface_closed);
    tcase_add_test(tc, test_uct_ep_peer_failure_at_flush);
    tcase_add_loop_test(tc, test_uct_ep_am_alignment_params, 0,
                        sizeof(am_aligns) / sizeof(am_aligns[0]));
    tcase_add_test(tc, test_uct_ep_cancelled_cells_passed);
    tcase_add_test(tc, test_uct_ep_peer_limits);
    tcase_add_loop_test(tc, test_uct_ep_malformed_cells, 0,
                        sizeof(bad_cells) / sizeof(bad_cells[0]));
    tcase_add_test(tc, test_uct_ep_arm_busy_with_message);
    tcase_add_test(tc, test_uct_ep_many_peers);
    tcase_add_loop_test(tc, test_uct_ep_gpu_path, 0, sizeof(gpu_paths) / sizeof(gpu_paths[0]));
    tcase_add_loop_test(tc, test_uct_ep_gpu_path_ucx_config, 0, 2);
    tcase_add_test(tc, test_uct_ep_cuda_rkey_without_gpu);
    suite_add_tcase(s, tc);

    tc = tcase_create("ep_process");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_uct_ep_two_process_am_rma);
    tcase_add_test(tc, test_uct_ep_event_fd_wakeup);
    tcase_add_test(tc, test_uct_ep_kill9_sender);
    suite_add_tcase(s, tc);
}
