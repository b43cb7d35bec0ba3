/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the ringk host data path through the public UCT API, in one process: the test node
 * every file of these tests uses (test_uct_ep.h), active messages and RMA, pending and flush,
 * a peer iface that closes. test_uct_peer.c has the cases with other processes and a hostile
 * peer, test_uct_gpu.c those of the GPU paths. */
#define _GNU_SOURCE
#include "test_util.h"
#include "test_uct.h"
#include "test_uct_ep.h"

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

/* ---- a test node: one worker with one ringk iface ----------------------------------------- */


/* Message payload: 8-byte sequence, 4-byte length, then pattern bytes from the sequence. */
uint8_t pat(uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 31 + i * 7 + 3);
}

size_t fill_msg(uint8_t *buf, uint64_t seq, size_t len)
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

void node_open(node_t *n, const char *name, const char *value)
{
    uct_iface_config_t *config;
    uct_iface_params_t params = {
        .field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS,
        .open_mode            = UCT_IFACE_OPEN_MODE_DEVICE,
        .mode.device.tl_name  = "ringk",
        .mode.device.dev_name = "ring",
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
        ck_assert_int_eq(test_uct_config_set(config, name, value), UCS_OK);
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

void node_close(node_t *n)
{
    uct_iface_close(n->iface);
    uct_worker_destroy(n->worker);
    ucs_async_context_destroy(n->async);
    uct_md_close(n->md);
}

double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Progresses @a n until it has received @a count messages; fails after 60 s. */
void wait_recv(node_t *n, uint64_t count)
{
    double deadline = now_sec() + 60;

    while (n->nrecv < count) {
        uct_worker_progress(n->worker);
        ck_assert_msg(now_sec() < deadline, "received %" PRIu64 " of %" PRIu64
                      " messages in 60 s", n->nrecv, count);
    }
}

/* Creates an endpoint from @a from to @a to, capturing what it logs (test_captured). */
ucs_status_t node_try_connect(node_t *from, const node_t *to, uct_ep_h *ep_p)
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

uct_ep_h node_connect(node_t *from, const uint8_t *addr, const uint8_t *dev_addr)
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

static const char *mode_names[] = {"am_short", "am_bcopy", "am_zcopy"};

/* Sends one message, progressing @a progress_node while the ring is full. */
void send_msg(node_t *n, uct_ep_h ep, send_mode_t mode, uint64_t seq, size_t len,
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

size_t mode_max(node_t *n, send_mode_t mode)
{
    switch (mode) {
    case SEND_SHORT: return n->attr.cap.am.max_short; /* the 8-byte header included */
    case SEND_BCOPY: return n->attr.cap.am.max_bcopy;
    default:         return n->attr.cap.am.max_zcopy;
    }
}

int victim_child;

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
    uct_mem_h memh, src_memh, dst_memh;
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
    /* Without CUDA the md does not ask for local memory handles (no UCT_MD_FLAG_NEED_MEMH),
     * so UCP leaves whatever its request held in memh: it must not be looked at. With CUDA it
     * asks, and the local buffers get handles as UCP would give them. */
    if (md_attr.cap.flags & UCT_MD_FLAG_NEED_MEMH) {
        ck_assert_int_eq(uct_md_mem_reg(a.md, src, sizeof(src), UCT_MD_MEM_ACCESS_ALL,
                                        &src_memh), UCS_OK);
        ck_assert_int_eq(uct_md_mem_reg(a.md, dst, sizeof(dst), UCT_MD_MEM_ACCESS_ALL,
                                        &dst_memh), UCS_OK);
    } else {
        src_memh = dst_memh = (uct_mem_h)(uintptr_t)0xdead00000000beefull;
    }
    for (len = 1; len <= sizeof(target) / 2; len *= 4) {
        fill_msg(src, len, len < 8 ? 8 : len);
        iov = (uct_iov_t){.buffer = src, .length = len, .count = 1, .memh = src_memh};
        ck_assert_int_eq(uct_ep_put_zcopy(ep, &iov, 1, (uintptr_t)target + 3, rkey.rkey, NULL),
                         UCS_OK);
        ck_assert_mem_eq(target + 3, src, len);
        memset(dst, 0, len);
        iov.buffer = dst;
        iov.memh   = dst_memh;
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
    if (md_attr.cap.flags & UCT_MD_FLAG_NEED_MEMH) {
        uct_md_mem_dereg(a.md, src_memh);
        uct_md_mem_dereg(a.md, dst_memh);
    }
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
        .mode.device.dev_name = "ring",
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

void test_uct_ep_tcases(Suite *s)
{
    TCase *tc, *process = tcase_create("ep_process");

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
    test_uct_peer_tests(tc, process);
    test_uct_gpu_tests(tc);
    suite_add_tcase(s, tc);

    tc = process;
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
}
