/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring device's staged RMA: put and get to a peer's memory that this process cannot reach
 * (GPU memory on the HOST_STAGED path or without CUDA IPC; host memory with
 * UCX_RINGK_HOST_RMA=staged), through a staging area of the endpoint's (src/core/ringk_xstage.c)
 * that the peer's progress serves. The endpoint names its area in its lane's line of the
 * peer's receive segment; the peer attaches it on its next lane rescan, serves each posted
 * slot by copying between the slot and its own memory (only inside a region it registered),
 * and says in the lane line when it could not attach. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_ep.h"

#include <core/ringk_cuda.h>
#include <core/ringk_xstage.h>

#include <ucs/debug/log.h>
#include <ucs/time/time.h>

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#define UCT_RINGK_XSTAGE_SLOTS 4u
#define UCT_RINGK_XSTAGE_SLOT  UCT_RINGK_GPU_BOUNCE_SIZE
/* the lane line's stage_ack when the receiver could not attach the area */
#define UCT_RINGK_XSTAGE_REFUSED (1ull << 63)

/* ---- the target: attach, serve ------------------------------------------------------------ */

static void uct_ringk_xstage_detach(uct_ringk_iface_t *iface, uct_ringk_rx_lane_t *rx)
{
    if (rx->stage != NULL) {
        if (rx->stage_pinned) { /* unpinned now, or once no device kernel is resident */
            ringk_xstage_close_pinned(rx->stage);
        } else {
            ringk_xstage_close(rx->stage);
        }
        ucs_free(rx->stage);
        rx->stage = NULL;
        iface->nstaged--;
    }
    rx->stage_fd = 0;
}

void uct_ringk_xstage_lane_sync(uct_ringk_iface_t *iface, unsigned i, int open)
{
    uct_ringk_lane_shm_t *lane = uct_ringk_seg_lane(iface->seg, i);
    uct_ringk_rx_lane_t *rx    = &iface->lanes[i];
    /* S2: the sender's area before its descriptor was published; pairs with S1 */
    uint64_t fd1 = open ? __atomic_load_n(&lane->stage_fd, __ATOMIC_ACQUIRE) : 0;
    uint64_t pid = __atomic_load_n(&lane->pid, __ATOMIC_RELAXED);
    ringk_xstage_t *xs;
    char why[256];

    if (fd1 == rx->stage_fd) {
        return;
    }
    uct_ringk_xstage_detach(iface, rx);
    if (fd1 == 0) {
        return;
    }
    rx->stage_fd = fd1; /* tried once per area, whatever comes of it */
    xs = ucs_calloc(1, sizeof(*xs), "ringk_xstage");
    if ((fd1 > (uint64_t)INT_MAX + 1) || (pid == 0) || (pid > INT32_MAX)) {
        snprintf(why, sizeof(why), "descriptor %" PRIu64 " of pid %" PRIu64 " is out of range",
                 fd1 - 1, pid);
    } else if (xs == NULL) {
        snprintf(why, sizeof(why), "out of memory");
    } else if (ringk_xstage_attach((uint32_t)pid, (int)(fd1 - 1), xs, why, sizeof(why)) == 0) {
        rx->stage_pinned = ringk_cuda_host_register(xs->base, xs->bytes);
        rx->stage        = xs;
        iface->nstaged++;
        __atomic_store_n(&lane->stage_ack, fd1, __ATOMIC_RELEASE);
        ucs_debug("ringk iface %p: lane %u: staging area of pid %" PRIu64 " attached (%u slots "
                  "of %" PRIu64 " bytes, %s)", iface, i, pid, xs->nslots, xs->slot_bytes,
                  rx->stage_pinned ? "pinned" : "pageable");
        return;
    }
    ucs_error("ringk iface %p: lane %u: cannot attach the staging area of pid %" PRIu64 ": %s",
              iface, i, pid, why);
    ucs_free(xs);
    /* the sender's staged transfers end with an error instead of waiting */
    __atomic_store_n(&lane->stage_ack, fd1 | UCT_RINGK_XSTAGE_REFUSED, __ATOMIC_RELEASE);
}

typedef struct {
    uct_ringk_iface_t   *iface;
    const uct_ringk_rx_lane_t *rx;
} uct_ringk_xstage_serve_arg_t;

static int uct_ringk_xstage_check(void *arg, const ringk_xstage_t *xs, int op, uint64_t addr,
                                  uint64_t len)
{
    uct_ringk_xstage_serve_arg_t *s = arg;

    if (uct_ringk_md_reg_covers(addr, len)) {
        return 0;
    }
    ucs_error("ringk iface %p: refused a staged %s of %" PRIu64 " bytes at 0x%" PRIx64 " from pid "
              "%u (lane %u): not inside a region this process registered", s->iface,
              (op == RINGK_XSTAGE_PUT) ? "put" : "get", len, addr, xs->peer_pid, s->rx->index);
    return -EPERM;
}

static int uct_ringk_xstage_copy(void *arg, int op, void *slot, uint64_t addr, uint64_t len)
{
    void *mem = (void*)(uintptr_t)addr;
    void *dst = (op == RINGK_XSTAGE_PUT) ? mem : slot;
    void *src = (op == RINGK_XSTAGE_PUT) ? slot : mem;
    char why[256];

    if (!uct_ringk_local_is_gpu(mem)) {
        memcpy(dst, src, len);
        return 0;
    }
    if (ringk_cuda_copy(dst, src, len, why, sizeof(why)) != 0) {
        ucs_error("ringk iface %p: staged %s of %" PRIu64 " bytes: %s",
                  ((uct_ringk_xstage_serve_arg_t*)arg)->iface,
                  (op == RINGK_XSTAGE_PUT) ? "put" : "get", len, why);
        return -EIO;
    }
    return 0;
}

unsigned uct_ringk_xstage_serve(uct_ringk_iface_t *iface)
{
    uct_ringk_xstage_serve_arg_t arg = {.iface = iface};
    ringk_xstage_target_ops_t ops    = {.arg = &arg, .check = uct_ringk_xstage_check,
                                        .copy = uct_ringk_xstage_copy};
    uct_ringk_rx_lane_t *rx;
    unsigned i, count = 0;
    uint64_t served, failed;

    for (i = 0; i < iface->nactive; i++) {
        rx = &iface->lanes[iface->active[i]];
        if (rx->stage == NULL) {
            continue;
        }
        arg.rx  = rx;
        served  = rx->stage->served;
        failed  = rx->stage->failed;
        count  += ringk_xstage_serve(rx->stage, &ops);
        iface->stage_served += rx->stage->served - served;
        iface->stage_failed += rx->stage->failed - failed;
    }
    return count;
}

ucs_status_t uct_ringk_iface_stage_stats(uct_iface_h tl_iface, uint64_t *served_p,
                                         uint64_t *failed_p, uint64_t *sent_p)
{
    uct_ringk_iface_t *iface;

    if ((tl_iface == NULL) || (tl_iface->ops.ep_am_short != uct_ringk_ep_am_short)) {
        return UCS_ERR_INVALID_PARAM;
    }
    iface     = ucs_derived_of(tl_iface, uct_ringk_iface_t);
    *served_p = iface->stage_served;
    *failed_p = iface->stage_failed;
    *sent_p   = iface->stage_sent;
    return UCS_OK;
}

/* ---- the initiator ---------------------------------------------------------------------- */

static ucs_status_t uct_ringk_ep_xstage_open(uct_ringk_ep_t *ep)
{
    uct_ringk_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);
    uct_ringk_lane_shm_t *lane;
    ringk_xstage_t *xs;
    char why[256];

    if (ep->lane == UCT_RINGK_SHARED_LANE) {
        ucs_error("ringk ep %p: staged RMA to pid %u needs a lane of its own in the peer's "
                  "receive segment, and all %u are taken (UCX_RINGK_LANES)", ep, ep->peer.pid,
                  ((const uct_ringk_seg_shm_t*)ep->seg)->nlanes - 1);
        return UCS_ERR_UNSUPPORTED;
    }
    xs = ucs_calloc(1, sizeof(*xs), "ringk_xstage");
    if (xs == NULL) {
        ucs_error("ringk ep %p: cannot allocate a staging area", ep);
        return UCS_ERR_NO_MEMORY;
    }
    if (ringk_xstage_create(UCT_RINGK_XSTAGE_SLOTS, UCT_RINGK_XSTAGE_SLOT, xs, why,
                            sizeof(why)) != 0) {
        ucs_error("ringk ep %p: %s", ep, why);
        ucs_free(xs);
        return UCS_ERR_NO_MEMORY;
    }
    ep->stage_pinned = ringk_cuda_host_register(xs->base, xs->bytes);
    ep->stage        = xs;
    lane             = uct_ringk_seg_lane(ep->seg, ep->lane);
    /* S1: the area's header before its descriptor; pairs with S2 in the receiver's rescan */
    __atomic_store_n(&lane->stage_fd, (uint64_t)xs->fd + 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&ep->ctl->lane_gen, 1, __ATOMIC_RELEASE);
    uct_ringk_ep_signal_slow(ep);
    ucs_debug("ringk ep %p: staging area for pid %u: %u slots of %u bytes, %s (iface %p)", ep,
              ep->peer.pid, UCT_RINGK_XSTAGE_SLOTS, UCT_RINGK_XSTAGE_SLOT,
              ep->stage_pinned ? "pinned" : "pageable", iface);
    return UCS_OK;
}

void uct_ringk_ep_xstage_close(uct_ringk_ep_t *ep)
{
    if (ep->stage == NULL) {
        return;
    }
    __atomic_store_n(&uct_ringk_seg_lane(ep->seg, ep->lane)->stage_fd, 0, __ATOMIC_RELAXED);
    if (ep->stage_pinned) { /* unpinned now, or once no device kernel is resident */
        ringk_xstage_close_pinned(ep->stage);
    } else {
        ringk_xstage_close(ep->stage);
    }
    ucs_free(ep->stage);
    ep->stage = NULL;
}

typedef struct {
    uct_ringk_ep_t *ep;
    char           *base;      /* the local buffer of the transfer */
    int             gpu;       /* it is CUDA memory */
    ucs_time_t      next_check;
} uct_ringk_xstage_io_arg_t;

static int uct_ringk_xstage_local_copy(uct_ringk_xstage_io_arg_t *a, void *dst, const void *src,
                                       size_t len)
{
    char why[256];

    if (!a->gpu) {
        memcpy(dst, src, len);
        return 0;
    }
    if (ringk_cuda_copy(dst, src, len, why, sizeof(why)) != 0) {
        ucs_error("ringk ep %p: staging %zu bytes: %s", a->ep, len, why);
        return -EIO;
    }
    return 0;
}

static int uct_ringk_xstage_out(void *arg, void *dst, size_t off, size_t len)
{
    uct_ringk_xstage_io_arg_t *a = arg;

    return uct_ringk_xstage_local_copy(a, dst, a->base + off, len);
}

static int uct_ringk_xstage_in(void *arg, const void *src, size_t off, size_t len)
{
    uct_ringk_xstage_io_arg_t *a = arg;

    return uct_ringk_xstage_local_copy(a, a->base + off, src, len);
}

/* While a slot is awaited: wake the peer if it sleeps, serve the areas of our own senders (two
 * processes staging to each other at once both progress), stop if the peer is gone or could
 * not attach the area. */
static int uct_ringk_xstage_idle(void *arg)
{
    uct_ringk_xstage_io_arg_t *a = arg;
    uct_ringk_ep_t *ep           = a->ep;
    uct_ringk_iface_t *iface     = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);
    uint64_t ack = __atomic_load_n(&uct_ringk_seg_lane(ep->seg, ep->lane)->stage_ack,
                                   __ATOMIC_ACQUIRE);
    ucs_time_t now;

    if (ack == ((uint64_t)ep->stage->fd + 1) + UCT_RINGK_XSTAGE_REFUSED) {
        return -EPERM;
    }
    uct_ringk_ep_signal_slow(ep);
    if (iface->nstaged > 0) {
        uct_ringk_xstage_serve(iface);
    }
    if (uct_ringk_peer_closed(&ep->peer)) {
        return -ESRCH;
    }
    now = ucs_get_time();
    if (now >= a->next_check) {
        a->next_check = now + ucs_time_from_msec(UCT_RINGK_EP_LIVENESS_INTERVAL_MS);
        if (uct_ringk_peer_dead(&ep->peer)) {
            uct_ringk_peer_fail(&ep->peer);
            return -ESRCH;
        }
    }
    return 0;
}

/* A peer in this very process: its memory is ours to copy, and its iface may be progressed by
 * this thread only after this call returns (UCX's loopback tests), so nothing is staged. */
static ucs_status_t uct_ringk_ep_xstage_self(uct_ringk_ep_t *ep, const struct iovec *local,
                                             size_t nlocal, uint64_t remote_addr, int write)
{
    uct_ringk_xstage_io_arg_t arg = {.ep = ep};
    void *remote;
    size_t i;

    for (i = 0; i < nlocal; remote_addr += local[i].iov_len, i++) {
        remote  = (void*)(uintptr_t)remote_addr;
        arg.gpu = uct_ringk_local_is_gpu(local[i].iov_base) || uct_ringk_local_is_gpu(remote);
        if (uct_ringk_xstage_local_copy(&arg, write ? remote : local[i].iov_base,
                                        write ? local[i].iov_base : remote,
                                        local[i].iov_len) != 0) {
            return UCS_ERR_IO_ERROR;
        }
    }
    return UCS_OK;
}

ucs_status_t uct_ringk_ep_xstage_move(uct_ringk_ep_t *ep, const struct iovec *local,
                                      size_t nlocal, uint64_t remote_addr, int write)
{
    uct_ringk_iface_t *iface       = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);
    uct_ringk_xstage_io_arg_t arg  = {.ep = ep, .next_check = 0};
    const ringk_xstage_io_t io     = {.arg = &arg, .stage_out = uct_ringk_xstage_out,
                                      .stage_in = uct_ringk_xstage_in,
                                      .idle = uct_ringk_xstage_idle};
    ucs_status_t status;
    char why[256];
    size_t i;
    int err;

    if (ep->peer.pid == (uint32_t)getpid()) {
        return uct_ringk_ep_xstage_self(ep, local, nlocal, remote_addr, write);
    }
    if ((ep->stage == NULL) && ((status = uct_ringk_ep_xstage_open(ep)) != UCS_OK)) {
        return status;
    }
    for (i = 0; i < nlocal; remote_addr += local[i].iov_len, i++) {
        arg.base = local[i].iov_base;
        arg.gpu  = uct_ringk_local_is_gpu(arg.base);
        why[0]   = '\0';
        err = ringk_xstage_transfer(ep->stage, write ? RINGK_XSTAGE_PUT : RINGK_XSTAGE_GET,
                                    remote_addr, local[i].iov_len, &io, why, sizeof(why));
        if (err != 0) {
            ucs_error("ringk ep %p: staged %s of %zu bytes at 0x%" PRIx64 " in pid %u: %s", ep,
                      write ? "put" : "get", local[i].iov_len, remote_addr, ep->peer.pid, why);
            return (err == -ESRCH) ? UCT_RINGK_EP_FAILED_STATUS :
                   (err == -EPERM) ? UCS_ERR_REJECTED : UCS_ERR_IO_ERROR;
        }
    }
    iface->stage_sent++;
    return UCS_OK;
}
