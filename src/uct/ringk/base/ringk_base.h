/* SPDX-License-Identifier: BSD-3-Clause */
/* What the two devices of the ringk transport share: the configuration both read, device
 * addresses and reachability, the base iface class both derive from (the UCX-release glue of
 * opening an iface lives there), the operations whose answer is the same on both, and the
 * liveness of a peer process: its death or its iface's close, reported once to the iface error
 * handler. The ring device (ring/) carries active messages; the mapped device (shm/) RMA and
 * atomics on memory peers map. */
#ifndef UCT_RINGK_BASE_H
#define UCT_RINGK_BASE_H

#include <core/ringk_node.h>
#include <core/ringk_topo.h>

#include <uct/base/uct_iface.h>
#include "ringk_compat.h"
#include <ucs/sys/stubs.h>
#include <ucs/type/class.h>

#define UCT_RINGK_NAME "ringk"

/** Limits of the UCX_RINGK_* iface variables, checked at iface open. */
#define UCT_RINGK_RING_SIZE_MIN   2
#define UCT_RINGK_RING_SIZE_MAX   65536
#define UCT_RINGK_CELL_SIZE_MIN   64
#define UCT_RINGK_CELL_SIZE_MAX   4096
#define UCT_RINGK_LANES_MAX       1024
#define UCT_RINGK_SEG_SIZE_MAX    (1024 * 1024)
#define UCT_RINGK_SEG_BYTES_MAX   (1024u * 1024 * 1024) /* a receive segment: lanes x ring */
#define UCT_RINGK_POLL_BATCH_MAX  1024

/** ringk iface configuration (UCX_RINGK_* variables), one table for both devices. */
typedef struct uct_ringk_iface_config {
    uct_iface_config_t super;
    unsigned           ring_size;   /**< cells per receive ring, a power of 2 */
    size_t             cell_size;   /**< bytes per cell, a power of 2 */
    unsigned           lanes;       /**< lanes per iface, the shared lane included */
    size_t             seg_size;    /**< largest am_bcopy payload, bytes */
    unsigned           poll_batch;  /**< messages consumed per lane per progress call */
    double             liveness;    /**< seconds between checks that peers live; 0: never */
    char              *gpu;         /**< "auto", "none" or the PCI bus id of this process's GPU */
    char              *p2p_level;   /**< UCX_RINGK_P2P_LEVEL; "": RINGK_P2P_LEVEL or default */
    char              *path;        /**< UCX_RINGK_PATH; "": RINGK_PATH or the topology's */
    char              *topo_file;   /**< UCX_RINGK_TOPO_FILE; "": RINGK_TOPO_FILE or probe */
    int                host_rma;    /**< UCX_RINGK_HOST_RMA: UCT_RINGK_HOST_RMA_* */
    int                gpu_staging; /**< UCX_RINGK_GPU_STAGING: UCT_RINGK_GPU_STAGING_* */
} uct_ringk_iface_config_t;

/** How HOST_STAGED moves a peer's GPU memory (UCX_RINGK_GPU_STAGING). */
enum {
    UCT_RINGK_GPU_STAGING_AUTO, /**< this process's pinned buffers and the IPC mapping
                                     (one-sided); the peer's service where the key is unmapped */
    UCT_RINGK_GPU_STAGING_PEER  /**< always the staging area the peer serves: no CUDA IPC */
};

/** How RMA reaches a peer's host memory (UCX_RINGK_HOST_RMA). */
enum {
    UCT_RINGK_HOST_RMA_CMA,    /**< cross-memory attach: one-sided */
    UCT_RINGK_HOST_RMA_STAGED  /**< the staging area the peer's progress serves */
};

extern ucs_config_field_t uct_ringk_iface_config_table[];

/** Checks every UCX_RINGK_* iface value; an error names the variable, its value and the
 * limit. Both devices check it, so a bad value fails whichever iface UCP opens first. */
ucs_status_t uct_ringk_iface_config_check(const uct_ringk_iface_config_t *config);

/**
 * The AM alignment @a params ask for (am_alignment a power of 2 up to 1 MiB, am_align_offset
 * only with it); UCS_ERR_INVALID_PARAM with an error naming the value otherwise. Both devices
 * check it, so a bad request fails whichever iface UCP opens first.
 */
ucs_status_t uct_ringk_iface_am_align(const uct_iface_params_t *params, size_t *align_p,
                                      size_t *offset_p);

/**
 * The GPU path policy of @a config: UCX_RINGK_P2P_LEVEL / UCX_RINGK_PATH, each falling back to
 * the plain RINGK_P2P_LEVEL / RINGK_PATH of the environment (which libringk and ringk_info
 * read) when empty. An error names the variable it came from.
 */
ucs_status_t uct_ringk_iface_policy(const uct_ringk_iface_config_t *config,
                                    ringk_policy_t *policy_p);

/** A UCX_RINGK_* string setting, or when it is empty the plain variable @a plain of the
 * environment; @a name_p gets the name of the one that was used. */
const char *uct_ringk_setting(const char *value, const char *ucx_name, const char *plain,
                              const char **name_p);

/** What every RMA operation of endpoint @a _ep (a uct_base_ep_t's derived class) records once
 *  it is done: UCX's statistics of operation @a _op / @a _kind, and one data-trace line
 *  (UCX_LOG_LEVEL=data) naming it @a _name, as UCX's own transports print them; nothing where
 *  UCX was built without statistics or data traces. */
#define UCT_RINGK_RMA_DONE(_ep, _op, _kind, _name, _length, _remote_addr) \
    do { \
        size_t _len = (_length); \
        UCT_TL_EP_STAT_OP(ucs_derived_of(_ep, uct_base_ep_t), _op, _kind, _len); \
        ucs_trace_data("ringk ep %p: " _name " of %zu bytes at remote 0x%" PRIx64, \
                       (void*)(_ep), _len, (uint64_t)(_remote_addr)); \
    } while (0)

/** Which device of the ringk transport an address belongs to: UCP offers every address of a
 * transport to every iface of it, so each iface takes only its own kind. */
enum {
    UCT_RINGK_DEV_RING = 1,  /**< "ring": rings, active messages, RMA by cross-memory attach */
    UCT_RINGK_DEV_SHM  = 2   /**< "mapped": RMA and atomics on mapped ringk_shm memory */
};

/* the device of the ringk md: active messages through rings, RMA by cross-memory attach or CUDA
 * IPC; its name before ringk 0.5, which UCX_RINGK_LEGACY_DEVICE_NAMES=y brings back */
#define UCT_RINGK_RING_DEV_NAME     "ring"
#define UCT_RINGK_RING_DEV_NAME_OLD "memory"

/** The device address: the node identity (src/core/ringk_node.h) and the device kind, 25 of the
 * 31 bytes UCP allows. */
typedef struct uct_ringk_dev_addr {
    ringk_node_id_t node;
    uint8_t         kind;    /**< UCT_RINGK_DEV_* */
} UCS_S_PACKED uct_ringk_dev_addr_t;

/**
 * Whether @a remote (an untrusted device address) is a @a kind device on this node; else 0 with
 * the reason in @a reason.
 */
int uct_ringk_dev_addr_reachable(const uct_ringk_dev_addr_t *local, const void *remote,
                                 uint8_t kind, char *reason, size_t len);

/** The iface both devices derive from. */
typedef struct uct_ringk_base_iface {
    uct_base_iface_t     super;
    uct_ringk_dev_addr_t dev_addr;
    unsigned             nerr_scheduled; /**< peer failures found, not yet reported */
} uct_ringk_base_iface_t;

/* Initializes the UCT base iface with @a ops, checks the configuration and sets the device
 * address of kind @a kind (UCT_RINGK_DEV_*). */
UCS_CLASS_DECLARE(uct_ringk_base_iface_t, uct_iface_ops_t*, uct_iface_internal_ops_t*, uct_md_h,
                  uct_worker_h, const uct_iface_params_t*, const uct_iface_config_t*, uint8_t);

/** What both devices answer alike: capabilities, addresses, fences, no tag offload. */
void uct_ringk_base_iface_query(uct_ringk_base_iface_t *iface, uct_iface_attr_t *attr,
                                size_t iface_addr_len);
ucs_status_t uct_ringk_base_iface_get_device_address(uct_iface_h tl_iface,
                                                     uct_device_addr_t *addr);
int uct_ringk_base_iface_is_reachable(const uct_iface_h tl_iface,
                                      const uct_device_addr_t *dev_addr,
                                      const uct_iface_addr_t *iface_addr);

#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_IS_REACHABLE_V2
/** The same, as UCX from 1.15 on asks it: both addresses, and the scope UCX checks itself. */
int uct_ringk_base_iface_is_reachable_v2(const uct_iface_h tl_iface,
                                         const uct_iface_is_reachable_params_t *params);
#endif
ucs_status_t uct_ringk_base_iface_fence(uct_iface_h tl_iface, unsigned flags);
ucs_status_t uct_ringk_base_ep_fence(uct_ep_h tl_ep, unsigned flags);
ucs_status_ptr_t uct_ringk_base_ep_tag_rndv_zcopy(uct_ep_h ep, uct_tag_t tag,
                                                  const void *header, unsigned header_length,
                                                  const uct_iov_t *iov, size_t iovcnt,
                                                  unsigned flags, uct_completion_t *comp);

/** Declares the put and get calls of a device, named _prefix##_put_short and so on: both
 * devices have the five, with UCT's signatures. */
#define UCT_RINGK_RMA_OPS_DECLARE(_prefix) \
    ucs_status_t _prefix##_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length, \
                                     uint64_t remote_addr, uct_rkey_t rkey); \
    ssize_t _prefix##_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg, \
                                uint64_t remote_addr, uct_rkey_t rkey); \
    ucs_status_t _prefix##_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, \
                                     uint64_t remote_addr, uct_rkey_t rkey, \
                                     uct_completion_t *comp); \
    ucs_status_t _prefix##_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb, \
                                     void *arg, size_t length, uint64_t remote_addr, \
                                     uct_rkey_t rkey, uct_completion_t *comp); \
    ucs_status_t _prefix##_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, \
                                     uint64_t remote_addr, uct_rkey_t rkey, \
                                     uct_completion_t *comp);

/** The entries of uct_iface_ops_t that each device fills with its own calls, named after its
 * endpoint (_ep: _ep##_put_short, ..., class _ep##_t) and its iface (_iface##_flush, ...,
 * class _iface##_t). */
#define UCT_RINGK_DEVICE_OPS(_ep, _iface) \
    .ep_put_short = _ep##_put_short, \
    .ep_put_bcopy = _ep##_put_bcopy, \
    .ep_put_zcopy = _ep##_put_zcopy, \
    .ep_get_bcopy = _ep##_get_bcopy, \
    .ep_get_zcopy = _ep##_get_zcopy, \
    .ep_pending_add = _ep##_pending_add, \
    .ep_flush = _ep##_flush, \
    .ep_check = _ep##_check, \
    .ep_create = UCS_CLASS_NEW_FUNC_NAME(_ep##_t), \
    .ep_destroy = UCS_CLASS_DELETE_FUNC_NAME(_ep##_t), \
    .iface_flush = _iface##_flush, \
    .iface_progress = _iface##_progress, \
    .iface_close = UCS_CLASS_DELETE_FUNC_NAME(_iface##_t), \
    .iface_query = _iface##_query, \
    .iface_get_address = _iface##_get_address

/* The internal operations of UCX's base iface, in each release's form: the ones both devices
 * answer alike, and @a _is_connected, the device's own ep_is_connected (1.18 on). */
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_QUERY_V2
#define UCT_RINGK_INTERNAL_QUERY_V2_OP .iface_query_v2 = uct_iface_base_query_v2,
#else
#define UCT_RINGK_INTERNAL_QUERY_V2_OP
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_CONNECT_TO_EP_V2
#define UCT_RINGK_INTERNAL_CONNECT_V2_OP \
    .ep_connect_to_ep_v2 = (uct_ep_connect_to_ep_v2_func_t)ucs_empty_function_return_unsupported,
#else
#define UCT_RINGK_INTERNAL_CONNECT_V2_OP
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_IS_REACHABLE_V2
#define UCT_RINGK_INTERNAL_REACHABLE_V2_OP \
    .iface_is_reachable_v2 = uct_ringk_base_iface_is_reachable_v2,
#else
#define UCT_RINGK_INTERNAL_REACHABLE_V2_OP
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_IS_CONNECTED
#define UCT_RINGK_INTERNAL_IS_CONNECTED_OP(_f) .ep_is_connected = _f,
#else
#define UCT_RINGK_INTERNAL_IS_CONNECTED_OP(_f)
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_GET_DEVICE_EP
#define UCT_RINGK_INTERNAL_DEVICE_EP_OP \
    .ep_get_device_ep = (uct_ep_get_device_ep_func_t)ucs_empty_function_return_unsupported,
#else
#define UCT_RINGK_INTERNAL_DEVICE_EP_OP
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_PUT_SGL_ZCOPY
#define UCT_RINGK_INTERNAL_SGL_OP \
    .ep_put_sgl_zcopy = (uct_ep_put_sgl_zcopy_func_t)ucs_empty_function_return_unsupported,
#else
#define UCT_RINGK_INTERNAL_SGL_OP
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_MEM_ELEMENT_PACK
#define UCT_RINGK_INTERNAL_MEM_ELEMENT_OP \
    .iface_mem_element_pack = \
        (uct_iface_mem_element_pack_func_t)ucs_empty_function_return_unsupported,
#else
#define UCT_RINGK_INTERNAL_MEM_ELEMENT_OP
#endif
#define UCT_RINGK_INTERNAL_OPS(_is_connected, _estimate_perf) \
    .iface_estimate_perf = _estimate_perf, \
    .iface_vfs_refresh = (uct_iface_vfs_refresh_func_t)ucs_empty_function, \
    .ep_query = (uct_ep_query_func_t)ucs_empty_function_return_unsupported, \
    .ep_invalidate = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported, \
    UCT_RINGK_INTERNAL_QUERY_V2_OP \
    UCT_RINGK_INTERNAL_CONNECT_V2_OP \
    UCT_RINGK_INTERNAL_REACHABLE_V2_OP \
    UCT_RINGK_INTERNAL_IS_CONNECTED_OP(_is_connected) \
    UCT_RINGK_INTERNAL_DEVICE_EP_OP \
    UCT_RINGK_INTERNAL_SGL_OP \
    UCT_RINGK_INTERNAL_MEM_ELEMENT_OP

/** The md operations both mds answer alike. */
#ifdef HAVE_UCT_MD_OPS_T_IS_SOCKADDR_ACCESSIBLE
#define UCT_RINGK_MD_SOCKADDR_OP \
    , .is_sockaddr_accessible = \
        (uct_md_is_sockaddr_accessible_func_t)ucs_empty_function_return_zero_int
#else
#define UCT_RINGK_MD_SOCKADDR_OP
#endif
#define UCT_RINGK_BASE_MD_OPS \
    .close = uct_ringk_md_close, \
    .mem_advise = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported \
    UCT_RINGK_MD_SOCKADDR_OP

/** The entries of uct_iface_ops_t both devices fill alike: no tag-matching offload, no
 * connection to an endpoint or a client, fences, device addresses and reachability, UCT's
 * progress switches. */
#define UCT_RINGK_BASE_IFACE_OPS \
    .ep_get_short = (uct_ep_get_short_func_t)ucs_empty_function_return_unsupported, \
    .ep_tag_eager_short = (uct_ep_tag_eager_short_func_t)ucs_empty_function_return_unsupported, \
    .ep_tag_eager_bcopy = (uct_ep_tag_eager_bcopy_func_t)ucs_empty_function_return_unsupported, \
    .ep_tag_eager_zcopy = (uct_ep_tag_eager_zcopy_func_t)ucs_empty_function_return_unsupported, \
    .ep_tag_rndv_zcopy = uct_ringk_base_ep_tag_rndv_zcopy, \
    .ep_tag_rndv_cancel = (uct_ep_tag_rndv_cancel_func_t)ucs_empty_function_return_unsupported, \
    .ep_tag_rndv_request = (uct_ep_tag_rndv_request_func_t)ucs_empty_function_return_unsupported, \
    .iface_tag_recv_zcopy = (uct_iface_tag_recv_zcopy_func_t)ucs_empty_function_return_unsupported, \
    .iface_tag_recv_cancel = (uct_iface_tag_recv_cancel_func_t)ucs_empty_function_return_unsupported, \
    .ep_fence = uct_ringk_base_ep_fence, \
    .ep_connect = (uct_ep_connect_func_t)ucs_empty_function_return_unsupported, \
    .ep_disconnect = (uct_ep_disconnect_func_t)ucs_empty_function_return_unsupported, \
    .cm_ep_conn_notify = (uct_cm_ep_conn_notify_func_t)ucs_empty_function_return_unsupported, \
    .ep_get_address = (uct_ep_get_address_func_t)ucs_empty_function_return_unsupported, \
    .ep_connect_to_ep = (uct_ep_connect_to_ep_func_t)ucs_empty_function_return_unsupported, \
    .iface_accept = (uct_iface_accept_func_t)ucs_empty_function_return_unsupported, \
    .iface_reject = (uct_iface_reject_func_t)ucs_empty_function_return_unsupported, \
    .iface_fence = uct_ringk_base_iface_fence, \
    .iface_progress_enable = uct_base_iface_progress_enable, \
    .iface_progress_disable = uct_base_iface_progress_disable, \
    .iface_get_device_address = uct_ringk_base_iface_get_device_address, \
    .iface_is_reachable = uct_ringk_base_iface_is_reachable

/** No active messages (the mapped device). */
#ifdef HAVE_UCT_IFACE_OPS_T_EP_AM_SHORT_IOV
#define UCT_RINGK_NO_AM_SHORT_IOV_OP \
    .ep_am_short_iov = (uct_ep_am_short_iov_func_t)ucs_empty_function_return_unsupported,
#else
#define UCT_RINGK_NO_AM_SHORT_IOV_OP
#endif
#define UCT_RINGK_NO_AM_OPS \
    .ep_am_short = (uct_ep_am_short_func_t)ucs_empty_function_return_unsupported, \
    UCT_RINGK_NO_AM_SHORT_IOV_OP \
    .ep_am_bcopy = (uct_ep_am_bcopy_func_t)ucs_empty_function_return_unsupported, \
    .ep_am_zcopy = (uct_ep_am_zcopy_func_t)ucs_empty_function_return_unsupported

/** No atomics (the ring device: UCP takes them to the mapped device or does them in software). */
#define UCT_RINGK_NO_ATOMIC_OPS \
    .ep_atomic_cswap64 = (uct_ep_atomic_cswap64_func_t)ucs_empty_function_return_unsupported, \
    .ep_atomic_cswap32 = (uct_ep_atomic_cswap32_func_t)ucs_empty_function_return_unsupported, \
    .ep_atomic32_post = (uct_ep_atomic32_post_func_t)ucs_empty_function_return_unsupported, \
    .ep_atomic64_post = (uct_ep_atomic64_post_func_t)ucs_empty_function_return_unsupported, \
    .ep_atomic32_fetch = (uct_ep_atomic32_fetch_func_t)ucs_empty_function_return_unsupported, \
    .ep_atomic64_fetch = (uct_ep_atomic64_fetch_func_t)ucs_empty_function_return_unsupported

/**
 * The status of every operation on an endpoint whose peer is gone, and the one its error handler
 * gets: UCP completes a request it posts after the failure with UCS_ERR_ENDPOINT_TIMEOUT (its
 * failed lane), so the handler and the requests failed before it must say the same.
 */
#define UCT_RINGK_EP_FAILED_STATUS UCS_ERR_ENDPOINT_TIMEOUT

/** The peer process of an endpoint, and whether it is gone. */
typedef struct uct_ringk_peer {
    uct_base_ep_t  *ep;            /**< the endpoint, whose iface derives from the base iface */
    const uint64_t *closed;        /**< the peer iface's word that says it closed, mapped */
    uint32_t        pid;
    unsigned long   start_time;    /**< the process's start time, against pid reuse */
    int             failed;        /**< found gone: reported, or about to be */
    int             err_scheduled; /**< the report is queued on the worker's progress */
    uint64_t        iface_id;      /**< the first word of the peer iface's address: its id */
} uct_ringk_peer_t;

#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_IS_CONNECTED
/** Whether the endpoint of @a peer goes to the iface whose addresses @a params holds (UCX from
 *  1.18 on asks before it reuses an endpoint). */
int uct_ringk_peer_is_connected(const uct_ringk_peer_t *peer,
                                const uct_ep_is_connected_params_t *params);
#endif

/**
 * Checks the pid and descriptor of a peer's address (@a tl names the device in the error) and
 * records the process's start time and the iface's id (@a iface_id). @a closed is set by the
 * caller once it mapped the peer.
 */
ucs_status_t uct_ringk_peer_init(uct_ringk_peer_t *peer, uct_base_ep_t *ep, uint32_t pid,
                                 int32_t fd, uint64_t iface_id, const char *tl);

/** Whether the peer process died (a pid reused by another process counts) or closed its iface:
 * a system call. */
int uct_ringk_peer_dead(const uct_ringk_peer_t *peer);

/** Marks the peer gone and reports it once, from the worker's progress, as UCT expects. */
void uct_ringk_peer_fail(uct_ringk_peer_t *peer);

/** Marks the peer gone if its iface closed: one load of its closed word, no system call (a dead
 * process is found by uct_ringk_peer_dead). @return peer->failed. */
static inline int uct_ringk_peer_closed(uct_ringk_peer_t *peer)
{
    /* C3: pairs with the release store of the peer iface's closed word at its close. */
    if (!peer->failed && __atomic_load_n(peer->closed, __ATOMIC_ACQUIRE)) {
        uct_ringk_peer_fail(peer);
    }
    return peer->failed;
}

/** ep_check of both devices: reports the peer if it is gone. */
void uct_ringk_peer_check(uct_ringk_peer_t *peer);

/** Takes back a report not yet delivered; for the endpoint's cleanup. */
void uct_ringk_peer_cleanup(uct_ringk_peer_t *peer);

#endif
