/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring device's endpoint, active messages: claims cells on its lane in the peer's ring,
 * writes the message there and wakes the receiver if it sleeps. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv/writev */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_ep.h"

#include <core/ringk_cuda.h>

#include <uct/base/uct_iov.inl>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>
#include <ucs/time/time.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- sending active messages ---------------------------------------------------------------- */

/* Wakes the receiver if it sleeps. Senders to an iface that never used wakeups skip it all. */
void uct_ringk_ep_signal_slow(uct_ringk_ep_t *ep)
{
    uct_ringk_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);

    /* W2: the publish before reading 'armed'; pairs with W1 in uct_ringk_iface_event_arm(). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&ep->ctl->armed, __ATOMIC_RELAXED) &&
        __atomic_exchange_n(&ep->ctl->armed, 0, __ATOMIC_RELAXED)) {
        if ((sendto(iface->signal_fd, "", 1, MSG_DONTWAIT, (struct sockaddr*)&ep->peer_sun,
                    ep->peer_sun_len) < 0) && (errno != EAGAIN)) {
            ucs_debug("ringk ep %p: wakeup of pid %u failed: %m", ep, ep->peer.pid);
        }
    }
}

static UCS_F_ALWAYS_INLINE void uct_ringk_ep_signal(uct_ringk_ep_t *ep)
{
    if (ucs_unlikely(__atomic_load_n(&ep->ctl->wakeup_used, __ATOMIC_RELAXED))) {
        uct_ringk_ep_signal_slow(ep);
    }
}

/* Claims @a ncells cells on the ep's lane; UCS_ERR_NO_RESOURCE when the ring is full or pending
 * requests wait: the caller adds itself to the pending queue. */
static UCS_F_ALWAYS_INLINE ucs_status_t uct_ringk_ep_claim(uct_ringk_ep_t *ep, unsigned ncells,
                                                           uint64_t *pos_p)
{
    int ok;

    if (uct_ringk_ep_pending_first(ep)) {
        return UCS_ERR_NO_RESOURCE;
    }
    ok = (ep->lane != UCT_RINGK_SHARED_LANE) ?
         ringk_ring_sp_claim(&ep->ring, &ep->prod, ncells, pos_p) :
         ringk_ring_mp_claim(&ep->ring, ncells, pos_p);
    if (ucs_unlikely(!ok)) {
        ep->need_cells = ncells;
        return ep->peer.failed ? UCT_RINGK_EP_FAILED_STATUS : UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

ucs_status_t uct_ringk_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                   const void *payload, unsigned length)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    uint32_t total           = length + sizeof(header);
    unsigned ncells;
    ucs_status_t status;
    uint64_t pos;
    uint8_t *dst;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH((size_t)length + sizeof(header), 0, iface->max_short, "am_short");
    ncells = ringk_ring_cells_for(total, ep->ring.cell_size);
    status = uct_ringk_ep_claim(ep, ncells, &pos);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    if (ucs_likely(ncells == 1)) {
        dst = ringk_ring_payload(&ep->ring, pos);
        memcpy(dst, &header, sizeof(header));
        if (length != 0) { /* payload may be NULL then, and memcpy(NULL) is undefined (UBSan) */
            memcpy(dst + sizeof(header), payload, length);
        }
    } else {
        ringk_ring_write(&ep->ring, pos, 0, &header, sizeof(header));
        ringk_ring_write(&ep->ring, pos, sizeof(header), payload, length);
    }
    ringk_ring_publish(&ep->ring, pos, total, ncells, id, 0);
    uct_ringk_ep_signal(ep);
    uct_iface_trace_am(&iface->super.super, UCT_AM_TRACE_TYPE_SEND, id, &header, length, "TX: AM_SHORT");
    UCT_TL_EP_STAT_OP(&ep->super, AM, SHORT, total);
    return UCS_OK;
}

/* Copies the header and the iovecs into the claimed message at @a pos (contiguous in the ring);
 * a CUDA buffer is copied by CUDA, never read by the CPU. */
static ucs_status_t uct_ringk_ep_write_iov(uct_ringk_ep_t *ep, uint64_t pos, const void *header,
                                           unsigned header_length, const uct_iov_t *iov,
                                           size_t iovcnt)
{
    uint64_t off = 0;
    size_t i, len;
    char why[256];

    if (header_length > 0) {
        ringk_ring_write(&ep->ring, pos, 0, header, header_length);
        off = header_length;
    }
    for (i = 0; i < iovcnt; i++) {
        len = uct_iov_get_length(&iov[i]);
        if (len == 0) {
            continue;
        }
        if (ucs_unlikely(uct_ringk_local_is_gpu(iov[i].buffer))) {
            if (ringk_cuda_copy((uint8_t*)ringk_ring_payload(&ep->ring, pos) + off,
                                iov[i].buffer, len, why, sizeof(why)) != 0) {
                ucs_error("ringk ep %p: am_zcopy from CUDA memory: %s", ep, why);
                return UCS_ERR_IO_ERROR;
            }
        } else {
            ringk_ring_write(&ep->ring, pos, off, iov[i].buffer, len);
        }
        off += len;
    }
    return UCS_OK;
}

/* Copies @a len bytes of host memory; the 4- to 16-byte pieces of a short message (UCP's
 * header, a user header, a small payload) as two overlapping loads and stores, not a call. */
static UCS_F_ALWAYS_INLINE void uct_ringk_copy_small(uint8_t *dst, const uint8_t *src,
                                                     size_t len)
{
    uint64_t a, b;
    uint32_t c, d;

    if ((len >= 8) && (len <= 16)) {
        memcpy(&a, src, 8);
        memcpy(&b, src + len - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + len - 8, &b, 8);
    } else if ((len >= 4) && (len < 8)) {
        memcpy(&c, src, 4);
        memcpy(&d, src + len - 4, 4);
        memcpy(dst, &c, 4);
        memcpy(dst + len - 4, &d, 4);
    } else if (len > 0) { /* an empty piece may have no buffer at all */
        memcpy(dst, src, len);
    }
}

ucs_status_t uct_ringk_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id, const uct_iov_t *iov,
                                       size_t iovcnt)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    size_t total = 0, i, len;
    unsigned ncells;
    ucs_status_t status;
    uint64_t pos;
    uint8_t *dst;

    UCT_CHECK_AM_ID(id);
    for (i = 0; i < iovcnt; i++) {
        total += uct_iov_get_length(&iov[i]);
    }
    UCT_CHECK_LENGTH(total, 0, iface->max_short, "am_short_iov");
    ncells = ringk_ring_cells_for(total, ep->ring.cell_size);
    status = uct_ringk_ep_claim(ep, ncells, &pos);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    /* short: host memory, gathered into the claimed cells */
    dst = ringk_ring_payload(&ep->ring, pos);
    for (i = 0; i < iovcnt; i++) {
        len = uct_iov_get_length(&iov[i]);
        uct_ringk_copy_small(dst, iov[i].buffer, len);
        dst += len;
    }
    ringk_ring_publish(&ep->ring, pos, total, ncells, id, 0);
    uct_ringk_ep_signal(ep);
    UCT_TL_EP_STAT_OP(&ep->super, AM, SHORT, total);
    return UCS_OK;
}

/* On an own lane with room for the largest message, packs straight into the ring (moving to
 * the ring's start first if that message could not fit before its end): one copy. */
static UCS_F_ALWAYS_INLINE void *uct_ringk_ep_bcopy_dst(uct_ringk_iface_t *iface,
                                                        uct_ringk_ep_t *ep)
{
    uint32_t pad;

    if (ep->lane == UCT_RINGK_SHARED_LANE) {
        return NULL;
    }
    pad = ringk_ring_pad(&ep->ring, ep->prod.pos, ep->max_cells);
    if (!ringk_ring_room(&ep->ring, &ep->prod, pad + ep->max_cells)) {
        return NULL;
    }
    if (pad != 0) {
        ringk_ring_publish_skip(&ep->ring, ep->prod.pos, pad);
        ep->prod.pos += pad;
        ringk_store_relaxed_u64(&ep->ring.prod->pos, ep->prod.pos);
    }
    return ringk_ring_payload(&ep->ring, ep->prod.pos);
}

ssize_t uct_ringk_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id, uct_pack_callback_t pack_cb,
                              void *arg, unsigned flags)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    unsigned ncells;
    ucs_status_t status;
    uint64_t pos;
    size_t length;
    void *dst;

    UCT_CHECK_AM_ID(id);
    if (uct_ringk_ep_pending_first(ep)) {
        return UCS_ERR_NO_RESOURCE;
    }
    dst = uct_ringk_ep_bcopy_dst(iface, ep);
    if (ucs_likely(dst != NULL)) {
        length = pack_cb(dst, arg);
        UCT_CHECK_LENGTH(length, 0, iface->max_bcopy, "am_bcopy");
        ncells = ringk_ring_cells_for(length, ep->ring.cell_size);
        /* Room for ep->max_cells without wrapping was checked: this claim takes exactly dst. */
        pos = ep->prod.pos;
        if (ucs_unlikely(!ringk_ring_sp_claim(&ep->ring, &ep->prod, ncells, &pos) ||
                         (ringk_ring_payload(&ep->ring, pos) != dst))) {
            ucs_fatal("ringk ep %p: in-place claim of %u cells at %" PRIu64 " failed", ep,
                      ncells, pos);
        }
    } else {
        /* Shared lane, or too little room for the largest message: pack aside, then copy. */
        length = pack_cb(iface->tx_buf, arg);
        UCT_CHECK_LENGTH(length, 0, iface->max_bcopy, "am_bcopy");
        ncells = ringk_ring_cells_for(length, ep->ring.cell_size);
        status = uct_ringk_ep_claim(ep, ncells, &pos);
        if (ucs_unlikely(status != UCS_OK)) {
            return status;
        }
        ringk_ring_write(&ep->ring, pos, 0, iface->tx_buf, length);
    }
    ringk_ring_publish(&ep->ring, pos, length, ncells, id, 0);
    uct_ringk_ep_signal(ep);
    uct_iface_trace_am(&iface->super.super, UCT_AM_TRACE_TYPE_SEND, id,
                       ringk_ring_payload(&ep->ring, pos), length, "TX: AM_BCOPY");
    UCT_TL_EP_STAT_OP(&ep->super, AM, BCOPY, length);
    return length;
}

ucs_status_t uct_ringk_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header,
                                   unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    size_t total             = header_length + uct_iov_total_length(iov, iovcnt);
    unsigned ncells;
    ucs_status_t status;
    uint64_t pos;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(header_length, 0, iface->max_short, "am_zcopy header");
    UCT_CHECK_LENGTH(total, 0, iface->max_bcopy, "am_zcopy");
    ncells = ringk_ring_cells_for(total, ep->ring.cell_size);
    status = uct_ringk_ep_claim(ep, ncells, &pos);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    /* The data is in the peer's ring when this returns: the operation is complete. */
    status = uct_ringk_ep_write_iov(ep, pos, header, header_length, iov, iovcnt);
    if (ucs_unlikely(status != UCS_OK)) {
        /* the claimed cells are given up: the receiver passes over them */
        ringk_ring_cancel(&ep->ring, pos, ncells);
        uct_ringk_ep_signal(ep);
        return status;
    }
    ringk_ring_publish(&ep->ring, pos, total, ncells, id, 0);
    uct_ringk_ep_signal(ep);
    UCT_TL_EP_STAT_OP(&ep->super, AM, ZCOPY, total);
    return UCS_OK;
}
