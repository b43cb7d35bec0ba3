/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk interface: configuration, the receive segment with its lanes, progress and wakeup. */
#ifndef UCT_RINGK_IFACE_H
#define UCT_RINGK_IFACE_H

#include "ringk_seg.h"

#include <core/ringk_node.h>
#include <core/ringk_topo.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <uct/base/uct_iface.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/list.h>
#include <ucs/time/time.h>

/** Limits of the UCX_RINGK_* iface variables, checked at iface open. */
#define UCT_RINGK_RING_SIZE_MIN   2
#define UCT_RINGK_RING_SIZE_MAX   65536
#define UCT_RINGK_CELL_SIZE_MIN   64
#define UCT_RINGK_CELL_SIZE_MAX   4096
#define UCT_RINGK_LANES_MAX       1024
#define UCT_RINGK_SEG_SIZE_MAX    (1024 * 1024)
#define UCT_RINGK_SEG_BYTES_MAX   (1024u * 1024 * 1024) /* a receive segment: lanes x ring */
#define UCT_RINGK_AM_BCOPY_UCP    512 /* below this am_bcopy, UCP may abort (remote keys in
                                         its rendezvous messages) */
#define UCT_RINGK_POLL_BATCH_MAX  1024

/** ringk iface configuration (UCX_RINGK_* variables). */
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
} uct_ringk_iface_config_t;

/** What a peer needs to reach this iface: where its receive segment is. */
typedef struct uct_ringk_iface_addr {
    uint64_t iface_id;   /**< random id of the iface, also names its wakeup socket */
    uint64_t seg_bytes;  /**< size of the receive segment */
    uint32_t pid;        /**< owner process */
    int32_t  fd;         /**< memfd of the segment in the owner process */
    uint64_t gpu;        /**< packed PCI bus id of the owner's GPU (ringk_busid_pack), 0: none */
} UCS_S_PACKED uct_ringk_iface_addr_t;

/** Which device of the ringk transport an address belongs to: UCP offers every address of a
 * transport to every iface of it, so each iface takes only its own kind. */
enum {
    UCT_RINGK_DEV_RING = 1,  /**< "memory": rings, active messages, RMA by cross-memory attach */
    UCT_RINGK_DEV_SHM  = 2   /**< "shm": RMA and atomics on mapped ringk_shm memory */
};

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
static inline void uct_ringk_dev_addr_init(uct_ringk_dev_addr_t *addr, uint8_t kind)
{
    ringk_node_id_t node;

    ringk_node_id_get(&node);
    addr->node = node;
    addr->kind = kind;
}

int uct_ringk_dev_addr_reachable(const uct_ringk_dev_addr_t *local, const void *remote,
                                 uint8_t kind, char *reason, size_t len);

/** Receiver-side state of one lane. */
typedef struct uct_ringk_rx_lane {
    ringk_ring_t ring;     /**< local view of the lane's ring */
    uint64_t     head;     /**< next position to consume */
    unsigned     index;    /**< lane number */
} uct_ringk_rx_lane_t;

/** ringk interface. */
typedef struct uct_ringk_iface {
    uct_base_iface_t         super;
    uct_ringk_iface_config_t config;      /**< validated copy of the configuration */
    uint64_t                 id;          /**< random, names the wakeup socket */
    int                      seg_fd;      /**< memfd of the receive segment */
    void                    *seg;         /**< the receive segment, mapped */
    uint64_t                 seg_bytes;
    uct_ringk_seg_ctl_shm_t *ctl;
    uct_ringk_rx_lane_t     *lanes;       /**< nlanes receive lanes */
    unsigned                *active;      /**< indexes of lanes with a sender */
    unsigned                 nactive;
    uint64_t                 lane_gen;    /**< ctl->lane_gen when @a active was built */
    unsigned                 max_cells;   /**< most cells one message may span */
    size_t                   max_short;   /**< am_short bytes, the 8-byte header included */
    size_t                   max_bcopy;   /**< am_bcopy/am_zcopy payload limit */
    void                    *rx_buf;      /**< messages are copied here to meet am_alignment */
    size_t                   rx_buf_offset; /**< aligned start in rx_buf */
    size_t                   am_align;    /**< UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT, or 1 */
    size_t                   am_align_offset; /**< offset that must be aligned */
    void                    *tx_buf;      /**< am_bcopy packs here first */
    int                      wake_fd;     /**< bound datagram socket: the iface event fd */
    int                      signal_fd;   /**< unbound datagram socket to wake peers */
    ucs_arbiter_t            arbiter;     /**< endpoints with pending requests */
    uct_ringk_dev_addr_t     dev_addr;
    ringk_policy_t           policy;      /**< UCX_RINGK_P2P_LEVEL / UCX_RINGK_PATH at open */
    char                    *topo_file;   /**< topology file to load, NULL: this machine */
    uint64_t                 gpu;         /**< packed bus id of this process's GPU, 0: none */
    char                     gpu_why[160]; /**< where @a gpu came from */
    ringk_topo_t            *topo;        /**< loaded for the first endpoint between GPUs */
    char                     topo_err[256]; /**< why @a topo could not be loaded */
    void                    *gpu_bounce;  /**< staging buffer for GPU memory, made at the
                                               first staged copy */
    int                      gpu_bounce_pinned; /**< 1 pinned; 0 pageable (ringk device
                                               kernels were resident: ringk_cuda_stage_get) */
    unsigned                 neps;        /**< endpoints created on this iface */
    unsigned                 nerr_scheduled; /**< failures found, not yet reported */
    ucs_list_link_t          eps;         /**< the endpoints, for the liveness check */
    unsigned                 progress_count; /**< progress calls, to pace the liveness check */
    ucs_time_t               next_liveness;  /**< when peers are checked next */
} uct_ringk_iface_t;

/** Bytes of the pinned buffer that stages GPU memory through the host. */
#define UCT_RINGK_GPU_BOUNCE_SIZE (1024 * 1024)

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

/** The node's topology (RINGK_TOPO_FILE or this machine), loaded once; NULL with topo_err. */
const ringk_topo_t *uct_ringk_iface_topo(uct_ringk_iface_t *iface);

/** The pinned staging buffer, allocated at first use; NULL when CUDA cannot give one. */
void *uct_ringk_iface_gpu_bounce(uct_ringk_iface_t *iface);

/** Marks the lanes of dead senders as closing, so they drain and can be reused. */
void uct_ringk_iface_sweep(uct_ringk_iface_t *iface);

/** Reports endpoints whose peer died and reclaims dead senders' lanes (paced by progress). */
void uct_ringk_iface_liveness_check(uct_ringk_iface_t *iface);

/** Fills the abstract socket address of the wakeup socket of iface @a id in process @a pid. */
socklen_t uct_ringk_wakeup_addr(uint32_t pid, uint64_t id, struct sockaddr_un *sun);


UCT_TL_DECL(ringk)

#endif
