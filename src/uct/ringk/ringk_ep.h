/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk endpoint: a sender's lane in a peer iface's receive segment. */
#ifndef UCT_RINGK_EP_H
#define UCT_RINGK_EP_H

#include "ringk_iface.h"
#include "ringk_md.h"

#include <sys/uio.h>
#include <sys/un.h>
#include <ucs/time/time.h>

typedef struct uct_ringk_ep uct_ringk_ep_t;

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
    uint32_t                 peer_pid;
    uint64_t                 peer_id;
    struct sockaddr_un       peer_sun;    /**< the peer's wakeup socket */
    socklen_t                peer_sun_len;
    ucs_arbiter_group_t      arb_group;   /**< pending requests */
    unsigned long            start_time;  /**< peer process start time, against pid reuse */
    ucs_time_t               last_check;  /**< last liveness check while stuck */
    int                      failed;      /**< the peer was found dead */
    int                      dispatching; /**< one of our pending requests is being run */
    int                      err_scheduled; /**< the error callback is queued */
    ucs_list_link_t          list;        /**< in the iface's list of endpoints */
    ringk_path_t             path;        /**< the path chosen at creation */
    const uct_ringk_gpu_ops_t *gpu_ops;   /**< how GPU memory moves on that path */
    char                     path_reason[1024];
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

ucs_status_t uct_ringk_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length,
                                    uint64_t remote_addr, uct_rkey_t rkey);
ssize_t uct_ringk_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg,
                               uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t uct_ringk_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp);
ucs_status_t uct_ringk_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb, void *arg,
                                    size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp);
ucs_status_t uct_ringk_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp);

ucs_status_t uct_ringk_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags);
void uct_ringk_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg);
ucs_arbiter_cb_result_t uct_ringk_ep_process_pending(ucs_arbiter_t *arbiter,
                                                     ucs_arbiter_group_t *group,
                                                     ucs_arbiter_elem_t *elem, void *arg);
ucs_status_t uct_ringk_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);
ucs_status_t uct_ringk_ep_fence(uct_ep_h tl_ep, unsigned flags);
ucs_status_t uct_ringk_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);

/**
 * The status of every operation on an endpoint whose peer is gone, and the one its error handler
 * gets: UCP completes a request it posts after the failure with UCS_ERR_ENDPOINT_TIMEOUT (its
 * failed lane), so the handler and the requests failed before it must say the same.
 */
#define UCT_RINGK_EP_FAILED_STATUS UCS_ERR_ENDPOINT_TIMEOUT

/** Tells whether the peer of @a ep is gone (process dead or iface closed). */
int uct_ringk_ep_peer_dead(uct_ringk_ep_t *ep);

/**
 * The path endpoint @a tl_ep uses and why (exported: tests and tools look it up with dlsym).
 * @return UCS_OK, or UCS_ERR_INVALID_PARAM when @a tl_ep is not a ringk endpoint.
 */
ucs_status_t uct_ringk_ep_path_query(uct_ep_h tl_ep, const char **path_p,
                                     const char **reason_p);

/** Reports the peer's death once, from the worker's progress, to the iface error handler. */
void uct_ringk_ep_set_failed(uct_ringk_ep_t *ep);

/** Marks @a ep failed if its peer closed its iface: one load from the peer's control line, no
 * system call (a dead process is found by the liveness check and ep_check). @return ep->failed. */
int uct_ringk_ep_peer_closed(uct_ringk_ep_t *ep);

#endif
