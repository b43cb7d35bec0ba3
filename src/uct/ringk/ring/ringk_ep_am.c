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

/* The kinds of active message, as uct_ringk_ep_am_common_send() writes them. */
typedef enum {
    UCT_RINGK_AM_SHORT,     /* a 64-bit header and a payload of host memory */
    UCT_RINGK_AM_SHORT_IOV, /* iovecs of host memory */
    UCT_RINGK_AM_BCOPY,     /* what a pack callback writes */
    UCT_RINGK_AM_ZCOPY      /* a header and iovecs of host or CUDA memory */
} uct_ringk_am_kind_t;

/* What one active message carries: the arguments of the call that sends it. */
typedef struct {
    uint64_t            header;        /* SHORT */
    const void         *buffer;        /* SHORT: the payload; ZCOPY: the header */
    unsigned            length;        /* SHORT: payload bytes; ZCOPY: header bytes */
    const uct_iov_t    *iov;           /* SHORT_IOV, ZCOPY */
    size_t              iovcnt;
    uct_pack_callback_t pack_cb;       /* BCOPY */
    void               *arg;
} uct_ringk_am_args_t;

/* Packs a bcopy message straight into the ring when the lane allows (one copy), else aside and
 * claims after; the claim's position in *pos_p, the length or an error status. */
static UCS_F_ALWAYS_INLINE ssize_t uct_ringk_ep_am_pack(uct_ringk_iface_t *iface,
                                                        uct_ringk_ep_t *ep,
                                                        const uct_ringk_am_args_t *a,
                                                        unsigned *ncells_p, uint64_t *pos_p)
{
    ucs_status_t status;
    size_t length;
    void *dst;

    if (uct_ringk_ep_pending_first(ep)) {
        return UCS_ERR_NO_RESOURCE;
    }
    dst = uct_ringk_ep_bcopy_dst(iface, ep);
    if (ucs_likely(dst != NULL)) {
        length = a->pack_cb(dst, a->arg);
        UCT_CHECK_LENGTH(length, 0, iface->max_bcopy, "am_bcopy");
        *ncells_p = ringk_ring_cells_for(length, ep->ring.cell_size);
        /* Room for ep->max_cells without wrapping was checked: this claim takes exactly dst. */
        *pos_p = ep->prod.pos;
        if (ucs_unlikely(!ringk_ring_sp_claim(&ep->ring, &ep->prod, *ncells_p, pos_p) ||
                         (ringk_ring_payload(&ep->ring, *pos_p) != dst))) {
            ucs_fatal("ringk ep %p: in-place claim of %u cells at %" PRIu64 " failed", ep,
                      *ncells_p, *pos_p);
        }
        return length;
    }
    /* Shared lane, or too little room for the largest message: pack aside, then copy. */
    length = a->pack_cb(iface->tx_buf, a->arg);
    UCT_CHECK_LENGTH(length, 0, iface->max_bcopy, "am_bcopy");
    *ncells_p = ringk_ring_cells_for(length, ep->ring.cell_size);
    status    = uct_ringk_ep_claim(ep, *ncells_p, pos_p);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    ringk_ring_write(&ep->ring, *pos_p, 0, iface->tx_buf, length);
    return length;
}

/* The bytes a short, short_iov or zcopy message of @a a carries, checked against the iface's
 * limits: the length, or an error status. */
static UCS_F_ALWAYS_INLINE ssize_t uct_ringk_am_length(uct_ringk_iface_t *iface,
                                                       uct_ringk_am_kind_t kind,
                                                       const uct_ringk_am_args_t *a)
{
    size_t total = 0, i;

    switch (kind) {
    case UCT_RINGK_AM_SHORT:
        total = (size_t)a->length + sizeof(a->header);
        UCT_CHECK_LENGTH(total, 0, iface->max_short, "am_short");
        return total;
    case UCT_RINGK_AM_SHORT_IOV:
        for (i = 0; i < a->iovcnt; i++) {
            total += uct_iov_get_length(&a->iov[i]);
        }
        UCT_CHECK_LENGTH(total, 0, iface->max_short, "am_short_iov");
        return total;
    default: /* zcopy */
        UCT_CHECK_LENGTH(a->length, 0, iface->max_short, "am_zcopy header");
        total = a->length + uct_iov_total_length(a->iov, a->iovcnt);
        UCT_CHECK_LENGTH(total, 0, iface->max_bcopy, "am_zcopy");
        return total;
    }
}

/* Writes a short, short_iov or zcopy message of @a a, @a total bytes, into the cells claimed
 * at @a pos. A zcopy buffer in CUDA memory is copied by CUDA (an error gives the cells up). */
static UCS_F_ALWAYS_INLINE ucs_status_t uct_ringk_am_write(uct_ringk_ep_t *ep,
                                                           uct_ringk_am_kind_t kind,
                                                           const uct_ringk_am_args_t *a,
                                                           uint64_t pos, unsigned ncells)
{
    ucs_status_t status;
    uint8_t *dst;
    size_t i, len;

    switch (kind) {
    case UCT_RINGK_AM_SHORT:
        if (ucs_likely(ncells == 1)) {
            dst = ringk_ring_payload(&ep->ring, pos);
            memcpy(dst, &a->header, sizeof(a->header));
            if (a->length != 0) { /* payload may be NULL then: memcpy(NULL) is undefined */
                memcpy(dst + sizeof(a->header), a->buffer, a->length);
            }
        } else {
            ringk_ring_write(&ep->ring, pos, 0, &a->header, sizeof(a->header));
            ringk_ring_write(&ep->ring, pos, sizeof(a->header), a->buffer, a->length);
        }
        return UCS_OK;
    case UCT_RINGK_AM_SHORT_IOV: /* host memory, gathered into the claimed cells */
        dst = ringk_ring_payload(&ep->ring, pos);
        for (i = 0; i < a->iovcnt; i++) {
            len = uct_iov_get_length(&a->iov[i]);
            uct_ringk_copy_small(dst, a->iov[i].buffer, len);
            dst += len;
        }
        return UCS_OK;
    default: /* zcopy: the data is in the peer's ring when this returns */
        status = uct_ringk_ep_write_iov(ep, pos, a->buffer, a->length, a->iov, a->iovcnt);
        if (ucs_unlikely(status != UCS_OK)) {
            /* the claimed cells are given up: the receiver passes over them */
            ringk_ring_cancel(&ep->ring, pos, ncells);
            uct_ringk_ep_signal(ep);
        }
        return status;
    }
}

/* Every active message of the ring device: checks, claims cells on the ep's lane (or packs in
 * place), writes the message, publishes it and wakes the receiver if it sleeps. @a kind is a
 * constant at each call, so each wrapper compiles to its own straight path. Returns the bytes
 * sent (for bcopy) or UCS_OK, or an error status. */
static UCS_F_ALWAYS_INLINE ssize_t
uct_ringk_ep_am_common_send(uct_ep_h tl_ep, uint8_t id, uct_ringk_am_kind_t kind,
                            const uct_ringk_am_args_t *a)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    unsigned ncells;
    ucs_status_t status;
    ssize_t total;
    uint64_t pos;

    UCT_CHECK_AM_ID(id);
    if (kind == UCT_RINGK_AM_BCOPY) {
        total = uct_ringk_ep_am_pack(iface, ep, a, &ncells, &pos);
        if (ucs_unlikely(total < 0)) {
            return total;
        }
    } else {
        total = uct_ringk_am_length(iface, kind, a);
        if (ucs_unlikely(total < 0)) {
            return total;
        }
        ncells = ringk_ring_cells_for(total, ep->ring.cell_size);
        status = uct_ringk_ep_claim(ep, ncells, &pos);
        if (ucs_unlikely(status != UCS_OK)) {
            return status;
        }
        status = uct_ringk_am_write(ep, kind, a, pos, ncells);
        if (ucs_unlikely(status != UCS_OK)) {
            return status;
        }
    }
    /* the message as the receiver gets it (header and payload, contiguous in the cells), read
     * before the publish: after it the receiver may release the cells to another sender */
    uct_iface_trace_am(&iface->super.super, UCT_AM_TRACE_TYPE_SEND, id,
                       ringk_ring_payload(&ep->ring, pos), total, "TX: AM_%s",
                       (kind == UCT_RINGK_AM_SHORT) ? "SHORT" :
                       (kind == UCT_RINGK_AM_SHORT_IOV) ? "SHORT_IOV" :
                       (kind == UCT_RINGK_AM_BCOPY) ? "BCOPY" : "ZCOPY");
    ringk_ring_publish(&ep->ring, pos, total, ncells, id, 0);
    uct_ringk_ep_signal(ep);
    switch (kind) {
    case UCT_RINGK_AM_SHORT:
    case UCT_RINGK_AM_SHORT_IOV:
        UCT_TL_EP_STAT_OP(&ep->super, AM, SHORT, total);
        return UCS_OK;
    case UCT_RINGK_AM_BCOPY:
        UCT_TL_EP_STAT_OP(&ep->super, AM, BCOPY, total);
        return total;
    default:
        UCT_TL_EP_STAT_OP(&ep->super, AM, ZCOPY, total);
        return UCS_OK;
    }
}

ucs_status_t uct_ringk_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                   const void *payload, unsigned length)
{
    const uct_ringk_am_args_t a = {.header = header, .buffer = payload, .length = length};

    return (ucs_status_t)uct_ringk_ep_am_common_send(tl_ep, id, UCT_RINGK_AM_SHORT, &a);
}

ucs_status_t uct_ringk_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id, const uct_iov_t *iov,
                                       size_t iovcnt)
{
    const uct_ringk_am_args_t a = {.iov = iov, .iovcnt = iovcnt};

    return (ucs_status_t)uct_ringk_ep_am_common_send(tl_ep, id, UCT_RINGK_AM_SHORT_IOV, &a);
}

ssize_t uct_ringk_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id, uct_pack_callback_t pack_cb,
                              void *arg, unsigned flags)
{
    const uct_ringk_am_args_t a = {.pack_cb = pack_cb, .arg = arg};

    return uct_ringk_ep_am_common_send(tl_ep, id, UCT_RINGK_AM_BCOPY, &a);
}

ucs_status_t uct_ringk_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header,
                                   unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp)
{
    const uct_ringk_am_args_t a = {.buffer = header, .length = header_length, .iov = iov,
                                   .iovcnt = iovcnt};

    return (ucs_status_t)uct_ringk_ep_am_common_send(tl_ep, id, UCT_RINGK_AM_ZCOPY, &a);
}
