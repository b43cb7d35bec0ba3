/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring device's iface: the receive segment with its lanes, progress and wakeup. */
#ifndef UCT_RINGK_IFACE_H
#define UCT_RINGK_IFACE_H

#include "ringk_seg.h"

#include <uct/ringk/base/ringk_base.h>

#include <core/ringk_node.h>
#include <core/ringk_topo.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <uct/base/uct_iface.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/list.h>
#include <ucs/time/time.h>

/** Below this am_bcopy, UCP may abort (remote keys in its rendezvous messages). */
#define UCT_RINGK_AM_BCOPY_UCP    512

/** What a peer needs to reach this iface: where its receive segment is. */
typedef struct uct_ringk_iface_addr {
    uint64_t iface_id;   /**< random id of the iface, also names its wakeup socket */
    uint64_t seg_bytes;  /**< size of the receive segment */
    uint32_t pid;        /**< owner process */
    int32_t  fd;         /**< memfd of the segment in the owner process */
    uint64_t gpu;        /**< packed PCI bus id of the owner's GPU (ringk_busid_pack), 0: none */
} UCS_S_PACKED uct_ringk_iface_addr_t;

/** Receiver-side state of one lane. */
typedef struct uct_ringk_rx_lane {
    ringk_ring_t ring;     /**< local view of the lane's ring */
    uint64_t     head;     /**< next position to consume */
    unsigned     index;    /**< lane number */
    struct ringk_xstage *stage;    /**< the sender's staging area, attached; NULL none */
    uint64_t     stage_fd; /**< the lane's stage_fd it was attached for */
    int          stage_pinned;
} uct_ringk_rx_lane_t;

/** ringk interface. */
typedef struct uct_ringk_iface {
    uct_ringk_base_iface_t   super;
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
    ucs_list_link_t          eps;         /**< the endpoints, for the liveness check */
    unsigned                 progress_count; /**< progress calls, to pace the liveness check */
    ucs_time_t               next_liveness;  /**< when peers are checked next */
    unsigned                 nstaged;     /**< lanes with a staging area attached */
    uint64_t                 stage_served; /**< staged requests served (ringk_xstage.c) */
    uint64_t                 stage_failed; /**< staged requests refused */
    uint64_t                 stage_sent;   /**< staged transfers of this iface's endpoints */
} uct_ringk_iface_t;

/** Bytes of the pinned buffer that stages GPU memory through the host. */
#define UCT_RINGK_GPU_BOUNCE_SIZE (1024 * 1024)

/** The node's topology (RINGK_TOPO_FILE or this machine), loaded once; NULL with topo_err. */
const ringk_topo_t *uct_ringk_iface_topo(uct_ringk_iface_t *iface);

/** The pinned staging buffer, allocated at first use; NULL when CUDA cannot give one. */
void *uct_ringk_iface_gpu_bounce(uct_ringk_iface_t *iface);

/** Marks the lanes of dead senders as closing, so they drain and can be reused. */
void uct_ringk_iface_sweep(uct_ringk_iface_t *iface);

/** Reports endpoints whose peer died and reclaims dead senders' lanes (paced by progress). */
void uct_ringk_iface_liveness_check(uct_ringk_iface_t *iface);

/** Staged RMA (ringk_xstage.c), the target's side: attaches or detaches the staging area of
 *  lane @a i's sender as its lane line says (rescans); serves posted requests (progress). */
void uct_ringk_xstage_lane_sync(uct_ringk_iface_t *iface, unsigned i, int open);
unsigned uct_ringk_xstage_serve(uct_ringk_iface_t *iface);

/**
 * Staged requests this iface served and refused, and staged transfers its endpoints made
 * (exported: tests look it up with dlsym, as the data path's evidence).
 * @return UCS_OK, or UCS_ERR_INVALID_PARAM when @a tl_iface is not a ring iface.
 */
ucs_status_t uct_ringk_iface_stage_stats(uct_iface_h tl_iface, uint64_t *served_p,
                                         uint64_t *failed_p, uint64_t *sent_p);

/** Fills the abstract socket address of the wakeup socket of iface @a id in process @a pid. */
socklen_t uct_ringk_wakeup_addr(uint32_t pid, uint64_t id, struct sockaddr_un *sun);


#endif
