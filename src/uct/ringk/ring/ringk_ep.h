/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring device's endpoint: a sender's lane in a peer iface's receive segment. Its calls are
 * in ringk_ep.c (attach, lanes, path, liveness), ringk_ep_am.c (active messages), ringk_ep_rma.c
 * (put and get, GPU memory) and ringk_ep_pending.c (pending requests, flush). */
#ifndef UCT_RINGK_EP_H
#define UCT_RINGK_EP_H

#include "ringk_iface.h"
#include <uct/ringk/base/ringk_md.h>

#include <sys/uio.h>
#include <sys/un.h>
#include <ucs/time/time.h>

typedef struct uct_ringk_ep uct_ringk_ep_t;

/* How often a sender stuck on a full ring checks that its peer still lives. */
#define UCT_RINGK_EP_LIVENESS_INTERVAL_MS 100.0

/**
 * How an endpoint moves GPU memory: one table per path (P2P_NVLINK, P2P_PCIE, CUDA_IPC,
 * HOST_STAGED), chosen when the endpoint is created. @a move copies between the local
 * buffers and [remote_addr, +length) of a peer's CUDA region, already bounds-checked.
 */
typedef struct uct_ringk_gpu_ops {
    ucs_status_t (*move)(uct_ringk_ep_t *ep, const uct_ringk_rkey_t *key,
                         const struct iovec *local, size_t nlocal, uint64_t remote_addr,
                         int write);
} uct_ringk_gpu_ops_t;

/** ringk endpoint. */
struct uct_ringk_ep {
    uct_base_ep_t            super;
    uct_ringk_peer_t         peer;        /**< the peer process, and whether it is gone */
    void                    *seg;         /**< the peer's receive segment, mapped */
    uint64_t                 seg_bytes;
    uct_ringk_seg_ctl_shm_t *ctl;         /**< the peer's control line */
    ringk_ring_t             ring;        /**< our lane's ring */
    ringk_ring_prod_t        prod;        /**< position and cached head on an own lane */
    uint64_t                 token;       /**< our owner token on the lane */
    unsigned                 lane;        /**< lane number; UCT_RINGK_SHARED_LANE if shared */
    unsigned                 max_cells;   /**< cells this iface's largest message takes in the
                                               peer's ring */
    unsigned                 need_cells;  /**< cells the last refused send needed */
    uint64_t                 peer_id;
    struct sockaddr_un       peer_sun;    /**< the peer's wakeup socket */
    socklen_t                peer_sun_len;
    ucs_arbiter_group_t      arb_group;   /**< pending requests */
    ucs_time_t               last_check;  /**< last liveness check while stuck */
    int                      dispatching; /**< one of our pending requests is being run */
    ucs_list_link_t          list;        /**< in the iface's list of endpoints */
    ringk_path_t             path;        /**< the path chosen at creation */
    const uct_ringk_gpu_ops_t *gpu_ops;   /**< how GPU memory moves on that path */
    char                     path_reason[1024];
    struct ringk_xstage     *stage;       /**< staging area of staged RMA, made at first use */
    int                      stage_pinned;
};

UCS_CLASS_DECLARE_NEW_FUNC(uct_ringk_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_ringk_ep_t, uct_ep_t);

ucs_status_t uct_ringk_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                   const void *payload, unsigned length);
ucs_status_t uct_ringk_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id, const uct_iov_t *iov,
                                       size_t iovcnt);
ssize_t uct_ringk_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id, uct_pack_callback_t pack_cb,
                              void *arg, unsigned flags);
ucs_status_t uct_ringk_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header,
                                   unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp);

UCT_RINGK_RMA_OPS_DECLARE(uct_ringk_ep)

ucs_status_t uct_ringk_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags);
void uct_ringk_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg);
ucs_arbiter_cb_result_t uct_ringk_ep_process_pending(ucs_arbiter_t *arbiter,
                                                     ucs_arbiter_group_t *group,
                                                     ucs_arbiter_elem_t *elem, void *arg);
ucs_status_t uct_ringk_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);
ucs_status_t uct_ringk_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);

/**
 * The path endpoint @a tl_ep uses and why (exported: tests and tools look it up with dlsym).
 * @return UCS_OK, or UCS_ERR_INVALID_PARAM when @a tl_ep is not a ringk endpoint.
 */
ucs_status_t uct_ringk_ep_path_query(uct_ep_h tl_ep, const char **path_p,
                                     const char **reason_p);

/** Staged RMA (ringk_xstage.c): moves the local buffers to (@a write) or from the peer's
 *  [remote_addr, +length), already bounds-checked, through the endpoint's staging area, which
 *  the peer's progress serves; the area is made at the first call. */
ucs_status_t uct_ringk_ep_xstage_move(uct_ringk_ep_t *ep, const struct iovec *local,
                                      size_t nlocal, uint64_t remote_addr, int write);
/** Takes the endpoint's staging area down (before its lane is given back). */
void uct_ringk_ep_xstage_close(uct_ringk_ep_t *ep);

/** Wakes the receiver of @a ep if it sleeps (ringk_ep_am.c). */
void uct_ringk_ep_signal_slow(uct_ringk_ep_t *ep);

/* Requests in the pending queue go before any new send, so a send that finds room while they
 * wait is refused (UCT's order rule); the request being dispatched is the exception. */
static UCS_F_ALWAYS_INLINE int uct_ringk_ep_pending_first(const uct_ringk_ep_t *ep)
{
    return ucs_unlikely(!ucs_arbiter_group_is_empty((ucs_arbiter_group_t*)&ep->arb_group)) &&
           !ep->dispatching;
}

/* Tells whether a local buffer is CUDA device memory. The iov's memh is never looked at:
 * without a usable CUDA the md does not advertise UCT_MD_FLAG_NEED_MEMH, and UCP passes
 * whatever its request holds there, not a handle of ours. Without a usable CUDA this calls
 * nothing (ringk_cuda_ptr_is_device). */
static UCS_F_ALWAYS_INLINE int uct_ringk_local_is_gpu(const void *buffer)
{
    return ringk_cuda_ptr_is_device(buffer, NULL, 0);
}

#endif
