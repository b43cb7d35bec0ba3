/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk interface: configuration table and checks, query, open and close. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, process_vm_readv/writev */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_iface.h"
#include "ringk_md.h"
#include "ringk_ep.h"

#include <core/ringk_cuda.h>

#include <ucs/arch/atomic.h>
#include <ucs/datastruct/list.h>
#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/sys/stubs.h>
#include <ucs/sys/sys.h>
#include <ucs/type/class.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static ucs_config_field_t uct_ringk_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_ringk_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"RING_SIZE", "1024",
     "Number of cells in each receive ring; a power of 2 between 2 and 65536.",
     ucs_offsetof(uct_ringk_iface_config_t, ring_size), UCS_CONFIG_TYPE_UINT},

    {"CELL_SIZE", "64",
     "Size of a ring cell in bytes, header included; a power of 2 between 64 and 4096.\n"
     "A message that does not fit in one cell spans consecutive cells.",
     ucs_offsetof(uct_ringk_iface_config_t, cell_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"LANES", "64",
     "Number of lanes in a receive segment (1 to 1024), the shared lane included. Each\n"
     "connected sender gets a single-producer lane of its own while they last; later senders\n"
     "share lane 0, a multi-producer lane.",
     ucs_offsetof(uct_ringk_iface_config_t, lanes), UCS_CONFIG_TYPE_UINT},

    {"SEG_SIZE", "8k",
     "Largest active message sent by copy (am_bcopy), in bytes, up to 1m.",
     ucs_offsetof(uct_ringk_iface_config_t, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"LIVENESS_INTERVAL", "1s",
     "How often progress checks that the peers of this iface's endpoints still live (a dead\n"
     "process or a closed iface is reported to the iface error handler) and reclaims the\n"
     "lanes of senders that died; 0 disables the periodic check (ep_check still works).",
     ucs_offsetof(uct_ringk_iface_config_t, liveness), UCS_CONFIG_TYPE_TIME},

    {"POLL_BATCH", "16",
     "Most messages taken from one lane in one progress call (1 to 1024), so that a busy\n"
     "sender cannot starve the others.",
     ucs_offsetof(uct_ringk_iface_config_t, poll_batch), UCS_CONFIG_TYPE_UINT},

    {"GPU", "auto",
     "The GPU whose memory this process moves, as peers see it in the iface address: 'auto'\n"
     "(the current CUDA device when the iface opens; none without a driver or a device),\n"
     "'none', or a PCI bus id such as 0000:07:00.0. Each endpoint's path for GPU memory\n"
     "(P2P_NVLINK, P2P_PCIE, CUDA_IPC or HOST_STAGED) comes from the two GPUs' places in the\n"
     "topology (RINGK_TOPO_FILE or this machine) and RINGK_P2P_LEVEL / RINGK_PATH.",
     ucs_offsetof(uct_ringk_iface_config_t, gpu), UCS_CONFIG_TYPE_STRING},

    {"P2P_LEVEL", "",
     "The farthest GPU pair that still uses a P2P path for GPU memory: SAME_DEVICE (LOC),\n"
     "NVLINK (NVL), PCIE_SWITCH (PIX, PXB), HOST_BRIDGE (PHB) or CROSS_SOCKET (SYS); farther\n"
     "pairs are staged through the host. Empty: RINGK_P2P_LEVEL from the environment, else\n"
     "PCIE_SWITCH.",
     ucs_offsetof(uct_ringk_iface_config_t, p2p_level), UCS_CONFIG_TYPE_STRING},

    {"PATH", "",
     "Forces every endpoint's path for GPU memory: P2P_NVLINK, P2P_PCIE, CUDA_IPC or\n"
     "HOST_STAGED (a P2P path the pair does not have is refused: the endpoint is\n"
     "unreachable). Empty: RINGK_PATH from the environment, else the topology decides.",
     ucs_offsetof(uct_ringk_iface_config_t, path), UCS_CONFIG_TYPE_STRING},

    {"TOPO_FILE", "",
     "An hwloc XML file to read the machine's topology from instead of probing it (for VMs\n"
     "and containers that hide the PCI tree); see ringk_info. Empty: RINGK_TOPO_FILE from the\n"
     "environment, else this machine.",
     ucs_offsetof(uct_ringk_iface_config_t, topo_file), UCS_CONFIG_TYPE_STRING},

    {NULL}
};

ucs_status_t uct_ringk_iface_config_check(const uct_ringk_iface_config_t *config)
{
    ringk_policy_t policy;

    if (!ucs_is_pow2(config->ring_size) || (config->ring_size < UCT_RINGK_RING_SIZE_MIN) ||
        (config->ring_size > UCT_RINGK_RING_SIZE_MAX)) {
        ucs_error("UCX_RINGK_RING_SIZE %u is not a power of 2 between %u and %u",
                  config->ring_size, UCT_RINGK_RING_SIZE_MIN, UCT_RINGK_RING_SIZE_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->cell_size == UCS_MEMUNITS_AUTO) || (config->cell_size == UCS_MEMUNITS_INF) ||
        !ucs_is_pow2(config->cell_size) || (config->cell_size < UCT_RINGK_CELL_SIZE_MIN) ||
        (config->cell_size > UCT_RINGK_CELL_SIZE_MAX)) {
        ucs_error("UCX_RINGK_CELL_SIZE %zu is not a power of 2 between %u and %u",
                  config->cell_size, UCT_RINGK_CELL_SIZE_MIN, UCT_RINGK_CELL_SIZE_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->lanes < 1) || (config->lanes > UCT_RINGK_LANES_MAX)) {
        ucs_error("UCX_RINGK_LANES %u is out of range 1..%u", config->lanes,
                  UCT_RINGK_LANES_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->seg_size == UCS_MEMUNITS_AUTO) || (config->seg_size == UCS_MEMUNITS_INF) ||
        (config->seg_size < 64) || (config->seg_size > UCT_RINGK_SEG_SIZE_MAX)) {
        ucs_error("UCX_RINGK_SEG_SIZE %zu is out of range 64..%u", config->seg_size,
                  UCT_RINGK_SEG_SIZE_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    /* the receive segment is allocated and zeroed when the iface opens */
    if ((uint64_t)config->lanes * config->ring_size * config->cell_size >
        UCT_RINGK_SEG_BYTES_MAX) {
        ucs_error("UCX_RINGK_LANES %u x RING_SIZE %u x CELL_SIZE %zu = %" PRIu64 " bytes of "
                  "receive segment, above its limit of %u MiB", config->lanes, config->ring_size,
                  config->cell_size,
                  (uint64_t)config->lanes * config->ring_size * config->cell_size,
                  UCT_RINGK_SEG_BYTES_MAX >> 20);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->liveness < 0) || (config->liveness > 3600)) {
        ucs_error("UCX_RINGK_LIVENESS_INTERVAL %.3fs is out of range 0..3600s", config->liveness);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->gpu != NULL) && strcasecmp(config->gpu, "auto") &&
        strcasecmp(config->gpu, "none") && (ringk_busid_pack(config->gpu) == 0)) {
        ucs_error("UCX_RINGK_GPU '%s' is not auto, none or a PCI bus id such as 0000:07:00.0",
                  config->gpu);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->poll_batch < 1) || (config->poll_batch > UCT_RINGK_POLL_BATCH_MAX)) {
        ucs_error("UCX_RINGK_POLL_BATCH %u is out of range 1..%u", config->poll_batch,
                  UCT_RINGK_POLL_BATCH_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    return uct_ringk_iface_policy(config, &policy);
}

/* A UCX_RINGK_* string setting, or when it is empty the plain variable of the environment;
 * @a name_p gets the name of the one that was used. */
static const char *uct_ringk_setting(const char *value, const char *ucx_name, const char *plain,
                                     const char **name_p)
{
    if ((value != NULL) && (value[0] != '\0')) {
        *name_p = ucx_name;
        return value;
    }
    *name_p = plain;
    return getenv(plain);
}

ucs_status_t uct_ringk_iface_policy(const uct_ringk_iface_config_t *config,
                                    ringk_policy_t *policy_p)
{
    const char *level_name, *path_name, *level, *path;
    char err[256];

    level = uct_ringk_setting(config->p2p_level, "UCX_RINGK_P2P_LEVEL", "RINGK_P2P_LEVEL",
                              &level_name);
    path  = uct_ringk_setting(config->path, "UCX_RINGK_PATH", "RINGK_PATH", &path_name);
    if (ringk_policy_parse_named(level, level_name, path, path_name, policy_p, err,
                                 sizeof(err)) != 0) {
        ucs_error("ringk: %s", err);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

socklen_t uct_ringk_wakeup_addr(uint32_t pid, uint64_t id, struct sockaddr_un *sun)
{
    int n;

    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    /* Abstract name: nothing in the file system to leave behind. */
    n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "ringk-%u-%016" PRIx64, pid, id);
    return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

static ucs_status_t uct_ringk_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_iface_t);

    uct_base_iface_query(&iface->super, attr);
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_AM_SHORT |
                            UCT_IFACE_FLAG_AM_BCOPY | UCT_IFACE_FLAG_AM_ZCOPY |
                            UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                            UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_GET_BCOPY |
                            UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_PENDING |
                            UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_EP_CHECK |
                            UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;
    /* Send completion: every operation completes when it is posted, so the only sends that
     * can be outstanding are pending requests, and arming refuses (BUSY) while there are any. */
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP | UCT_IFACE_FLAG_EVENT_RECV |
                            UCT_IFACE_FLAG_EVENT_RECV_SIG | UCT_IFACE_FLAG_EVENT_FD;

    attr->cap.am.max_short       = iface->max_short;
    attr->cap.am.max_bcopy       = iface->max_bcopy;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = iface->max_bcopy;
    attr->cap.am.opt_zcopy_align = UCS_SYS_CACHE_LINE_SIZE;
    attr->cap.am.align_mtu       = attr->cap.am.opt_zcopy_align;
    attr->cap.am.max_hdr         = iface->max_short;
    attr->cap.am.max_iov         = 16;

    /* RMA goes through cross-memory attach: one copy, any size. */
    attr->cap.put.max_short       = UINT_MAX;
    attr->cap.put.max_bcopy       = iface->config.seg_size;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = SIZE_MAX;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = IOV_MAX;
    attr->cap.get.max_short       = 0;
    attr->cap.get.max_bcopy       = iface->config.seg_size;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = SIZE_MAX;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = IOV_MAX;

    attr->iface_addr_len  = sizeof(uct_ringk_iface_addr_t);
    attr->device_addr_len = sizeof(uct_ringk_dev_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;
    /* posix's own figures (80 ns, 12179 MB/s) scaled by the ratios bench/ringk_vs_posix.sh
     * measures against it (bench/RESULTS.md, "performance attributes"), the latency rounded so
     * that it stays below posix's on a noisier run */
    attr->latency             = ucs_linear_func_make(63e-9, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = 8470.0 * UCS_MBYTE;
    attr->overhead            = 10e-9;
    attr->priority            = 0;
    return UCS_OK;
}

/* Where this process's GPU is, for peers choosing their path to it (UCX_RINGK_GPU). */
static void uct_ringk_iface_gpu_init(uct_ringk_iface_t *iface, const char *value)
{
    char busid[32], why[128];

    iface->gpu = 0;
    if ((value == NULL) || !strcasecmp(value, "none")) {
        snprintf(iface->gpu_why, sizeof(iface->gpu_why), "none (UCX_RINGK_GPU=none)");
    } else if (!strcasecmp(value, "auto")) {
        if (ringk_cuda_current_busid(busid, sizeof(busid), why, sizeof(why)) == 0) {
            iface->gpu = ringk_busid_pack(busid);
        }
        snprintf(iface->gpu_why, sizeof(iface->gpu_why), "%s%s (UCX_RINGK_GPU=auto)",
                 (iface->gpu != 0) ? "" : "none: ", why);
    } else {
        iface->gpu = ringk_busid_pack(value);
        snprintf(iface->gpu_why, sizeof(iface->gpu_why), "UCX_RINGK_GPU=%s", value);
    }
    ucs_debug("ringk iface %p: GPU 0x%" PRIx64 ": %s", iface, iface->gpu, iface->gpu_why);
}

const ringk_topo_t *uct_ringk_iface_topo(uct_ringk_iface_t *iface)
{
    if ((iface->topo != NULL) || (iface->topo_err[0] != '\0')) {
        return iface->topo;
    }
    iface->topo = ucs_calloc(1, sizeof(*iface->topo), "ringk_topo");
    if (iface->topo == NULL) {
        snprintf(iface->topo_err, sizeof(iface->topo_err), "out of memory");
    } else if (ringk_topo_load(iface->topo, iface->topo_file, iface->topo_err,
                               sizeof(iface->topo_err)) != 0) {
        ucs_error("ringk: %s", iface->topo_err);
        ucs_free(iface->topo);
        iface->topo = NULL;
    }
    return iface->topo;
}

void *uct_ringk_iface_gpu_bounce(uct_ringk_iface_t *iface)
{
    if (iface->gpu_bounce == NULL) {
        iface->gpu_bounce = ringk_cuda_stage_get(UCT_RINGK_GPU_BOUNCE_SIZE,
                                                 &iface->gpu_bounce_pinned);
        ucs_debug("ringk iface %p: GPU staging buffer %p, %s", iface, iface->gpu_bounce,
                  iface->gpu_bounce_pinned ? "pinned" : "pageable (ringk device kernels are "
                  "resident: pinning memory would wait for them)");
    }
    return iface->gpu_bounce;
}

static ucs_status_t uct_ringk_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    uct_ringk_iface_t *iface      = ucs_derived_of(tl_iface, uct_ringk_iface_t);
    uct_ringk_iface_addr_t *raddr = (uct_ringk_iface_addr_t*)addr;

    raddr->iface_id  = iface->id;
    raddr->seg_bytes = iface->seg_bytes;
    raddr->pid       = getpid();
    raddr->fd        = iface->seg_fd;
    raddr->gpu       = iface->gpu;
    return UCS_OK;
}

static ucs_status_t uct_ringk_iface_get_device_address(uct_iface_h tl_iface,
                                                       uct_device_addr_t *addr)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_iface_t);

    memcpy(addr, &iface->dev_addr, sizeof(iface->dev_addr));
    return UCS_OK;
}

static int uct_ringk_iface_is_reachable(const uct_iface_h tl_iface,
                                        const uct_device_addr_t *dev_addr,
                                        const uct_iface_addr_t *iface_addr)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_iface_t);

    char reason[128];

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        return 0;
    }
    if (!uct_ringk_dev_addr_reachable(&iface->dev_addr, dev_addr, UCT_RINGK_DEV_RING, reason,
                                      sizeof(reason))) {
        ucs_debug("ringk iface %p: peer not reachable: %s", iface, reason);
        return 0;
    }
    return 1;
}

int uct_ringk_dev_addr_reachable(const uct_ringk_dev_addr_t *local, const void *remote,
                                 uint8_t kind, char *reason, size_t len)
{
    uct_ringk_dev_addr_t peer;
    ringk_node_id_t a, b;

    memcpy(&peer, remote, sizeof(peer));
    if (peer.kind != kind) {
        snprintf(reason, len, "its device is of kind %u, this iface's is %u", peer.kind, kind);
        return 0;
    }
    a = local->node; /* copies: the packed struct's members may be unaligned */
    b = peer.node;
    return ringk_node_id_same(&a, &b, reason, len);
}

/* Rebuilds the list of lanes to poll from the lane table: the shared lane, lanes with an owner,
 * and lanes whose owner left but which still hold messages. Frees drained lanes. Runs only when
 * a sender took or gave back a lane, so polling costs what the active senders cost. */
static void uct_ringk_iface_lanes_rescan(uct_ringk_iface_t *iface)
{
    uint64_t gen = __atomic_load_n(&iface->ctl->lane_gen, __ATOMIC_ACQUIRE);
    int again    = 0;
    uct_ringk_rx_lane_t *rx;
    uct_ringk_lane_shm_t *lane;
    uint64_t state, tail, n;
    unsigned i;

    iface->nactive                  = 0;
    iface->active[iface->nactive++] = UCT_RINGK_SHARED_LANE;
    for (i = 1; i < iface->config.lanes; i++) {
        lane  = uct_ringk_seg_lane(iface->seg, i);
        rx    = &iface->lanes[i];
        /* L2: pairs with L1 in the sender's lane claim / release. */
        state = __atomic_load_n(&lane->state, __ATOMIC_ACQUIRE);
        if (state == UCT_RINGK_LANE_OPEN) {
            iface->active[iface->nactive++] = i;
        } else if (state == UCT_RINGK_LANE_CLOSING) {
            if (ringk_ring_peek(&rx->ring, &rx->head) != NULL) {
                iface->active[iface->nactive++] = i; /* drain first */
                again = 1;
                continue;
            }
            /* Positions a dead sender claimed but never published: clear them and move past,
             * so that the next owner, which starts at the lane's tail, and this consumer agree
             * again. The tail is a peer's writing: at most one lap is cleared. */
            tail = __atomic_load_n(&rx->ring.prod->pos, __ATOMIC_RELAXED);
            for (n = 0; (n < rx->ring.ncells) && (rx->head + n < tail); n++) {
                ringk_store_relaxed_u64(&ringk_ring_cell(&rx->ring, rx->head + n)->seq, 0);
            }
            if ((tail > rx->head) && (tail - rx->head <= UINT32_MAX)) {
                rx->head = tail;
            }
            /* R1-style release: the clears before the head the next owner will read. */
            ringk_store_release_u64(&rx->ring.cons->pos, rx->head);
            __atomic_store_n(&lane->state, UCT_RINGK_LANE_FREE, __ATOMIC_RELAXED);
            /* F1: the lane is free for a new owner; pairs with the claim's CAS. */
            __atomic_store_n(&lane->owner, 0, __ATOMIC_RELEASE);
            ucs_debug("ringk iface %p: lane %u freed", iface, i);
        }
    }
    /* A lane still draining keeps the scan going on the next progress call. */
    iface->lane_gen = again ? gen - 1 : gen;
}

/* Marks the lanes of senders that died (kill -9) as closing, so they drain and are reused. */
static void uct_ringk_iface_lanes_sweep(uct_ringk_iface_t *iface)
{
    uct_ringk_lane_shm_t *lane;
    uint64_t pid;
    unsigned i;

    for (i = 1; i < iface->config.lanes; i++) {
        lane = uct_ringk_seg_lane(iface->seg, i);
        if (__atomic_load_n(&lane->state, __ATOMIC_ACQUIRE) != UCT_RINGK_LANE_OPEN) {
            continue;
        }
        pid = __atomic_load_n(&lane->pid, __ATOMIC_RELAXED);
        if ((pid != 0) && (pid <= INT32_MAX) && (kill((pid_t)pid, 0) != 0) && (errno == ESRCH)) {
            ucs_debug("ringk iface %p: sender pid %" PRIu64 " of lane %u is gone", iface, pid, i);
            __atomic_store_n(&lane->state, UCT_RINGK_LANE_CLOSING, __ATOMIC_RELEASE);
            __atomic_fetch_add(&iface->ctl->lane_gen, 1, __ATOMIC_RELEASE);
        }
    }
}

void uct_ringk_iface_sweep(uct_ringk_iface_t *iface)
{
    uct_ringk_iface_lanes_sweep(iface);
}

void uct_ringk_iface_liveness_check(uct_ringk_iface_t *iface)
{
    ucs_time_t now = ucs_get_time();
    uct_ringk_ep_t *ep;

    if ((iface->config.liveness <= 0) || (now < iface->next_liveness)) {
        return;
    }
    iface->next_liveness = now + ucs_time_from_sec(iface->config.liveness);
    ucs_list_for_each(ep, &iface->eps, list) {
        if (!ep->failed && uct_ringk_ep_peer_dead(ep)) {
            uct_ringk_ep_set_failed(ep);
        }
    }
    uct_ringk_iface_lanes_sweep(iface);
}

/* Takes up to poll_batch messages from one lane and hands them to the AM handlers. */
static UCS_F_ALWAYS_INLINE unsigned
uct_ringk_iface_poll_lane(uct_ringk_iface_t *iface, uct_ringk_rx_lane_t *rx)
{
    unsigned count = 0;
    const ringk_cell_hdr_t *cell;
    uint32_t len, ncells;
    uint8_t id, flags;
    void *data;

    while (count < iface->config.poll_batch) {
        cell = ringk_ring_peek(&rx->ring, &rx->head);
        if (cell == NULL) {
            break;
        }
        /* The header is a peer's writing: copy it once, then check it. */
        len    = cell->len;
        ncells = cell->ncells;
        id     = cell->id;
        flags  = cell->flags;
        if (ucs_unlikely((ringk_ring_msg_check(&rx->ring, rx->head, len, ncells, flags,
                                               iface->max_cells) != 0) ||
                         (id >= UCT_AM_ID_MAX) || (len > iface->max_bcopy))) {
            ucs_error("ringk iface %p: dropping malformed message on lane %u at position %" PRIu64
                      ": am id %u (limit %d), length %u (limit %zu), cells %u (limit %u), "
                      "flags 0x%x", iface, rx->index, rx->head, id, (int)UCT_AM_ID_MAX - 1, len,
                      iface->max_bcopy, ncells, iface->max_cells, flags);
            /* Its cell count cannot be trusted: skip one cell. A sender that writes garbage
             * breaks its own lane only. */
            ringk_ring_release(&rx->ring, rx->head, 1, 0xff);
            rx->head++;
            continue;
        }
        /* The payload is contiguous in the ring: handed over in place unless the handler asked
         * for an alignment it does not have. */
        data = ringk_ring_payload(&rx->ring, rx->head);
        if (ucs_unlikely((((uintptr_t)data + iface->am_align_offset) &
                          (iface->am_align - 1)) != 0)) {
            data = memcpy(UCS_PTR_BYTE_OFFSET(iface->rx_buf, iface->rx_buf_offset), data, len);
        }
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, id, data, len, "RX: AM");
        uct_iface_invoke_am(&iface->super, id, data, len, 0);
        ringk_ring_release(&rx->ring, rx->head, ncells, flags);
        rx->head += ncells;
        count++;
    }
    return count;
}

static unsigned uct_ringk_iface_progress(uct_iface_h tl_iface)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_iface_t);
    unsigned count = 0, i;

    if (ucs_unlikely(__atomic_load_n(&iface->ctl->lane_gen, __ATOMIC_RELAXED) !=
                     iface->lane_gen)) {
        uct_ringk_iface_lanes_rescan(iface);
    }
    for (i = 0; i < iface->nactive; i++) {
        count += uct_ringk_iface_poll_lane(iface, &iface->lanes[iface->active[i]]);
    }
    if (!ucs_arbiter_is_empty(&iface->arbiter)) {
        ucs_arbiter_dispatch(&iface->arbiter, 1, uct_ringk_ep_process_pending, &count);
    }
    /* Peers are checked every few thousand calls at most, and then only if their time came:
     * no clock read and no system call on the busy path. */
    if (ucs_unlikely((++iface->progress_count & 0xfff) == 0)) {
        uct_ringk_iface_liveness_check(iface);
    }
    return count;
}

static ucs_status_t uct_ringk_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_iface_t);

    /* From now on senders check 'armed' after each publish (see uct_ringk_ep_signal). */
    __atomic_store_n(&iface->ctl->wakeup_used, 1, __ATOMIC_SEQ_CST);
    *fd_p = iface->wake_fd;
    return UCS_OK;
}

static ucs_status_t uct_ringk_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_iface_t);
    char buf[64];
    unsigned i;

    /* Pending sends wait for room that a peer frees without signalling us: they need
     * progress, not sleep. No other send is ever outstanding. */
    if ((events & UCT_EVENT_SEND_COMP) && !ucs_arbiter_is_empty(&iface->arbiter)) {
        return UCS_ERR_BUSY;
    }
    /* A failure waits in the progress queue to be reported. */
    if (iface->nerr_scheduled > 0) {
        return UCS_ERR_BUSY;
    }
    if (!(events & (UCT_EVENT_RECV | UCT_EVENT_RECV_SIG))) {
        return UCS_OK;
    }
    __atomic_store_n(&iface->ctl->wakeup_used, 1, __ATOMIC_RELAXED);
    while (recv(iface->wake_fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
        /* drain earlier signals */
    }
    if (!ucs_arbiter_is_empty(&iface->arbiter)) {
        return UCS_ERR_BUSY; /* pending sends need progress, not sleep */
    }
    __atomic_store_n(&iface->ctl->armed, 1, __ATOMIC_RELAXED);
    /* W1: 'armed' before reading the cells; pairs with W2 in uct_ringk_ep_signal(). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&iface->ctl->lane_gen, __ATOMIC_RELAXED) != iface->lane_gen) {
        uct_ringk_iface_lanes_rescan(iface);
    }
    for (i = 0; i < iface->nactive; i++) {
        uct_ringk_rx_lane_t *rx = &iface->lanes[iface->active[i]];
        if (ringk_ring_peek(&rx->ring, &rx->head) != NULL) {
            __atomic_store_n(&iface->ctl->armed, 0, __ATOMIC_RELAXED);
            return UCS_ERR_BUSY;
        }
    }
    return UCS_OK;
}

static ucs_status_t uct_ringk_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                          uct_completion_t *comp)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_iface_t);

    uct_ringk_ep_t *ep;

    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    /* A failure found (here: a peer iface that closed) is reported before the flush
     * completes: the caller progresses until the error handler ran. */
    ucs_list_for_each(ep, &iface->eps, list) {
        uct_ringk_ep_peer_closed(ep);
    }
    if (iface->nerr_scheduled > 0) {
        return UCS_INPROGRESS;
    }
    /* Every operation is complete when posted (in the peer's ring or copied by CMA); pending
     * requests are not operations yet (as for UCX's shared-memory transports), so they are not
     * waited for. */
    ucs_memory_cpu_store_fence();
    UCT_TL_IFACE_STAT_FLUSH(&iface->super);
    return UCS_OK;
}

static ucs_status_t uct_ringk_iface_fence(uct_iface_h tl_iface, unsigned flags)
{
    ucs_memory_cpu_fence();
    UCT_TL_IFACE_STAT_FENCE(ucs_derived_of(tl_iface, uct_base_iface_t));
    return UCS_OK;
}

/* Creates and formats the receive segment: an owner-only memfd, never linked into /dev/shm. */
static ucs_status_t uct_ringk_iface_seg_create(uct_ringk_iface_t *iface)
{
    const uct_ringk_iface_config_t *cfg = &iface->config;
    uint64_t rings_offset, stride;
    uct_ringk_seg_shm_t *hdr;
    ringk_ring_t ring;
    unsigned i;
    int ret;

    uct_ringk_seg_layout(cfg->lanes, cfg->ring_size, cfg->cell_size, &rings_offset, &stride,
                         &iface->seg_bytes);
    iface->seg_fd = memfd_create(UCT_RINGK_SEG_NAME, MFD_CLOEXEC);
    if (iface->seg_fd < 0) {
        ucs_error("ringk: memfd_create() failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    if ((fchmod(iface->seg_fd, S_IRUSR | S_IWUSR) != 0) ||
        (ftruncate(iface->seg_fd, iface->seg_bytes) != 0)) {
        ucs_error("ringk: sizing the receive segment to %" PRIu64 " bytes failed: %m",
                  iface->seg_bytes);
        goto err_close;
    }
    iface->seg = mmap(NULL, iface->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, iface->seg_fd,
                      0);
    if (iface->seg == MAP_FAILED) {
        ucs_error("ringk: mmap of %" PRIu64 " bytes failed: %m", iface->seg_bytes);
        goto err_close;
    }

    iface->lanes = ucs_calloc(cfg->lanes, sizeof(*iface->lanes), "ringk_rx_lanes");
    iface->active = ucs_calloc(cfg->lanes, sizeof(*iface->active), "ringk_active");
    if ((iface->lanes == NULL) || (iface->active == NULL)) {
        ucs_error("ringk: cannot allocate %u lanes", cfg->lanes);
        goto err_free;
    }
    for (i = 0; i < cfg->lanes; i++) {
        ret = ringk_ring_init(&ring, (char*)iface->seg + rings_offset + (uint64_t)i * stride,
                              stride, cfg->ring_size, cfg->cell_size);
        ucs_assertv_always(ret == 0, "ring_size %u cell_size %zu", cfg->ring_size,
                           cfg->cell_size);
        iface->lanes[i].ring  = ring;
        iface->lanes[i].head  = 0;
        iface->lanes[i].index = i;
    }
    uct_ringk_seg_lane(iface->seg, UCT_RINGK_SHARED_LANE)->state = UCT_RINGK_LANE_OPEN;
    iface->ctl      = uct_ringk_seg_ctl(iface->seg);
    iface->active[0] = UCT_RINGK_SHARED_LANE;
    iface->nactive  = 1;
    iface->lane_gen = 0;

    hdr               = (uct_ringk_seg_shm_t*)iface->seg;
    hdr->version      = UCT_RINGK_SEG_VERSION;
    hdr->nlanes       = cfg->lanes;
    hdr->ring_size    = cfg->ring_size;
    hdr->cell_size    = cfg->cell_size;
    hdr->seg_bytes    = iface->seg_bytes;
    hdr->rings_offset = rings_offset;
    hdr->lane_stride  = stride;
    hdr->owner_pid    = getpid();
    hdr->max_cells    = iface->max_cells;
    hdr->max_len      = (uint32_t)iface->max_bcopy;
    /* S1: the magic last: a sender that sees it sees a formatted segment; pairs with S2. */
    __atomic_store_n(&hdr->magic, UCT_RINGK_SEG_MAGIC, __ATOMIC_RELEASE);
    return UCS_OK;

err_free:
    ucs_free(iface->active);
    ucs_free(iface->lanes);
    munmap(iface->seg, iface->seg_bytes);
err_close:
    close(iface->seg_fd);
    return UCS_ERR_IO_ERROR;
}

static void uct_ringk_iface_seg_destroy(uct_ringk_iface_t *iface)
{
    ucs_free(iface->active);
    ucs_free(iface->lanes);
    munmap(iface->seg, iface->seg_bytes);
    close(iface->seg_fd);
}

static ucs_status_t uct_ringk_iface_sockets_open(uct_ringk_iface_t *iface)
{
    struct sockaddr_un sun;
    socklen_t len = uct_ringk_wakeup_addr(getpid(), iface->id, &sun);

    iface->wake_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (iface->wake_fd < 0) {
        ucs_error("ringk: socket(AF_UNIX) failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    if (bind(iface->wake_fd, (struct sockaddr*)&sun, len) != 0) {
        ucs_error("ringk: bind of the wakeup socket failed: %m");
        goto err_close_wake;
    }
    iface->signal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (iface->signal_fd < 0) {
        ucs_error("ringk: socket(AF_UNIX) failed: %m");
        goto err_close_wake;
    }
    return UCS_OK;

err_close_wake:
    close(iface->wake_fd);
    return UCS_ERR_IO_ERROR;
}

static uct_iface_ops_t uct_ringk_iface_ops;

/* The alignment an AM handler asked for: am_alignment a power of 2, am_align_offset only with
 * it. UCP gives offsets past the alignment (its header size): only offset % alignment matters.
 * Defaults: no alignment (1), offset 0. */
ucs_status_t uct_ringk_iface_am_align(const uct_iface_params_t *params, size_t *align_p,
                                      size_t *offset_p)
{
    *align_p  = 1;
    *offset_p = 0;
    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT)) {
        if (params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) {
            ucs_error("ringk: am_align_offset %zu given without am_alignment",
                      params->am_align_offset);
            return UCS_ERR_INVALID_PARAM;
        }
        return UCS_OK;
    }
    if (!ucs_is_pow2(params->am_alignment) || (params->am_alignment > UCS_MBYTE)) {
        ucs_error("ringk: am_alignment %zu is not a power of 2 up to 1m", params->am_alignment);
        return UCS_ERR_INVALID_PARAM;
    }
    *align_p = params->am_alignment;
    if (params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) {
        *offset_p = params->am_align_offset & (params->am_alignment - 1);
    }
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_ringk_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_ringk_iface_config_t *config = ucs_derived_of(tl_config,
                                                            uct_ringk_iface_config_t);
    const char *topo_file, *topo_name;
    unsigned short_cells;
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_ringk_iface_ops,
                              &uct_base_iface_internal_ops, md, worker, params,
                              tl_config UCS_STATS_ARG(
                                  (params->field_mask & UCT_IFACE_PARAM_FIELD_STATS_ROOT) ?
                                  params->stats_root : NULL)
                              UCS_STATS_ARG(UCT_RINGK_NAME));

    status = uct_ringk_iface_config_check(config);
    if (status != UCS_OK) {
        return status;
    }
    self->config     = *config;
    /* the strings go with the configuration: resolved below */
    self->config.gpu       = NULL;
    self->config.p2p_level = NULL;
    self->config.path      = NULL;
    self->config.topo_file = NULL;
    self->id         = ucs_generate_uuid((uintptr_t)self);
    self->neps       = 0; /* UCS classes are not zeroed: valgrind saw this read uninitialised */
    self->nerr_scheduled = 0;
    self->topo       = NULL;
    self->gpu_bounce        = NULL;
    self->gpu_bounce_pinned = 0;
    self->topo_err[0] = '\0';
    self->topo_file  = NULL;
    uct_ringk_iface_gpu_init(self, config->gpu);

    /* A message may take at most half the ring, so that it can always be placed without
     * wrapping once the ring is empty; am_bcopy is capped by SEG_SIZE and by that. */
    self->max_bcopy = ucs_min(config->seg_size,
                              ringk_ring_capacity(config->ring_size / 2, config->cell_size));
    self->max_cells = ringk_ring_cells_for(self->max_bcopy, config->cell_size);
    if (self->max_bcopy < UCT_RINGK_AM_BCOPY_UCP) {
        ucs_warn("ringk: active messages of at most %zu bytes (UCX_RINGK_SEG_SIZE %zu, RING_SIZE "
                 "%u, CELL_SIZE %zu): UCP needs %u (its rendezvous messages carry remote keys) "
                 "and may abort; UCT alone works", (size_t)self->max_bcopy, config->seg_size,
                 config->ring_size, config->cell_size, UCT_RINGK_AM_BCOPY_UCP);
    }
    short_cells     = ucs_min(config->ring_size / 2, 32);
    self->max_short = ucs_min(self->max_bcopy,
                              ringk_ring_capacity(short_cells, config->cell_size));
    uct_ringk_dev_addr_init(&self->dev_addr, UCT_RINGK_DEV_RING);
    status = uct_ringk_iface_policy(config, &self->policy);
    if (status != UCS_OK) {
        return status;
    }
    /* the file is read when the first endpoint between GPUs needs it */
    topo_file = uct_ringk_setting(config->topo_file, "UCX_RINGK_TOPO_FILE", "RINGK_TOPO_FILE",
                                  &topo_name);
    if ((topo_file != NULL) && (topo_file[0] != '\0')) {
        self->topo_file = ucs_strdup(topo_file, "ringk_topo_file");
        if (self->topo_file == NULL) {
            ucs_error("ringk: cannot copy %s", topo_name);
            return UCS_ERR_NO_MEMORY;
        }
    }

    /* A handler that asks for aligned data gets it: messages that are not aligned in the ring
     * are copied to rx_buf, placed so that data + am_align_offset is aligned. */
    status = uct_ringk_iface_am_align(params, &self->am_align, &self->am_align_offset);
    if (status != UCS_OK) {
        goto err_free_topo_file;
    }
    self->rx_buf = ucs_malloc(self->max_bcopy + self->am_align, "ringk_rx_buf");
    if (self->rx_buf != NULL) {
        self->rx_buf_offset = (self->am_align - (((uintptr_t)self->rx_buf +
                                                  self->am_align_offset) % self->am_align)) %
                              self->am_align;
    }
    /* am_bcopy packs up to max_bcopy (+ the header); put/get bcopy go up to seg_size, which
     * may be more than half a ring holds */
    self->tx_buf = ucs_malloc(ucs_max(self->max_bcopy + sizeof(uint64_t), config->seg_size),
                              "ringk_tx_buf");
    if ((self->rx_buf == NULL) || (self->tx_buf == NULL)) {
        ucs_error("ringk: cannot allocate bounce buffers of %zu bytes", self->max_bcopy);
        status = UCS_ERR_NO_MEMORY;
        goto err_free_bufs;
    }
    status = uct_ringk_iface_seg_create(self);
    if (status != UCS_OK) {
        goto err_free_bufs;
    }
    status = uct_ringk_iface_sockets_open(self);
    if (status != UCS_OK) {
        goto err_seg_destroy;
    }
    ucs_arbiter_init(&self->arbiter);
    ucs_list_head_init(&self->eps);
    self->progress_count = 0;
    self->next_liveness  = ucs_get_time() + ucs_time_from_sec(config->liveness);
    ucs_debug("ringk iface %p: id 0x%" PRIx64 " segment %" PRIu64 " bytes, %u lanes of %u x %zu"
              " B cells, max_short %zu max_bcopy %zu", self, self->id, self->seg_bytes,
              config->lanes, config->ring_size, config->cell_size, self->max_short,
              self->max_bcopy);
    return UCS_OK;

err_seg_destroy:
    uct_ringk_iface_seg_destroy(self);
err_free_bufs:
    ucs_free(self->tx_buf);
    ucs_free(self->rx_buf);
err_free_topo_file:
    ucs_free(self->topo_file);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_iface_t)
{
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    /* C3: peers' endpoints see the iface gone (uct_ringk_ep_peer_dead). */
    __atomic_store_n(&self->ctl->closed, 1, __ATOMIC_RELEASE);
    ucs_arbiter_cleanup(&self->arbiter);
    close(self->signal_fd);
    close(self->wake_fd);
    uct_ringk_iface_seg_destroy(self);
    ucs_free(self->tx_buf);
    ucs_free(self->rx_buf);
    ucs_free(self->topo);
    ucs_free(self->topo_file);
    ringk_cuda_stage_put(self->gpu_bounce, UCT_RINGK_GPU_BOUNCE_SIZE, self->gpu_bounce_pinned);
}

UCS_CLASS_DEFINE(uct_ringk_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_ringk_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_ringk_iface_t, uct_iface_t);

static ucs_status_t uct_ringk_query_tl_devices(uct_md_h md,
                                               uct_tl_device_resource_t **tl_devices_p,
                                               unsigned *num_tl_devices_p)
{
    /* "memory" on the ringk md: active messages, RMA by cross-memory attach or CUDA IPC;
     * "shm" on the ringk_shm md: RMA and atomics on memory that md allocated. */
    return uct_single_device_resource(md, uct_ringk_md_is_shm(md) ? UCT_RINGK_SHM_DEV_NAME :
                                          "memory", UCT_DEVICE_TYPE_SHM,
                                      UCS_SYS_DEVICE_ID_UNKNOWN, tl_devices_p,
                                      num_tl_devices_p);
}

/* No tag-matching offload: UCP does tag matching in software over active messages. */
static ucs_status_ptr_t uct_ringk_ep_tag_rndv_zcopy(uct_ep_h ep, uct_tag_t tag,
                                                    const void *header, unsigned header_length,
                                                    const uct_iov_t *iov, size_t iovcnt,
                                                    unsigned flags, uct_completion_t *comp)
{
    return UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
}

static uct_iface_ops_t uct_ringk_iface_ops = {
    .ep_put_short             = uct_ringk_ep_put_short,
    .ep_put_bcopy             = uct_ringk_ep_put_bcopy,
    .ep_put_zcopy             = uct_ringk_ep_put_zcopy,
    .ep_get_short             = (uct_ep_get_short_func_t)ucs_empty_function_return_unsupported,
    .ep_get_bcopy             = uct_ringk_ep_get_bcopy,
    .ep_get_zcopy             = uct_ringk_ep_get_zcopy,
    .ep_am_short              = uct_ringk_ep_am_short,
#ifdef HAVE_UCT_IFACE_OPS_T_EP_AM_SHORT_IOV
    .ep_am_short_iov          = uct_ringk_ep_am_short_iov,
#endif
    .ep_am_bcopy              = uct_ringk_ep_am_bcopy,
    .ep_am_zcopy              = uct_ringk_ep_am_zcopy,
    .ep_atomic_cswap64        = (uct_ep_atomic_cswap64_func_t)ucs_empty_function_return_unsupported,
    .ep_atomic_cswap32        = (uct_ep_atomic_cswap32_func_t)ucs_empty_function_return_unsupported,
    .ep_atomic32_post         = (uct_ep_atomic32_post_func_t)ucs_empty_function_return_unsupported,
    .ep_atomic64_post         = (uct_ep_atomic64_post_func_t)ucs_empty_function_return_unsupported,
    .ep_atomic32_fetch        = (uct_ep_atomic32_fetch_func_t)ucs_empty_function_return_unsupported,
    .ep_atomic64_fetch        = (uct_ep_atomic64_fetch_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_eager_short       = (uct_ep_tag_eager_short_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_eager_bcopy       = (uct_ep_tag_eager_bcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_eager_zcopy       = (uct_ep_tag_eager_zcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_rndv_zcopy        = uct_ringk_ep_tag_rndv_zcopy,
    .ep_tag_rndv_cancel       = (uct_ep_tag_rndv_cancel_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_rndv_request      = (uct_ep_tag_rndv_request_func_t)ucs_empty_function_return_unsupported,
    .iface_tag_recv_zcopy     = (uct_iface_tag_recv_zcopy_func_t)ucs_empty_function_return_unsupported,
    .iface_tag_recv_cancel    = (uct_iface_tag_recv_cancel_func_t)ucs_empty_function_return_unsupported,
    .ep_pending_add           = uct_ringk_ep_pending_add,
    .ep_pending_purge         = uct_ringk_ep_pending_purge,
    .ep_flush                 = uct_ringk_ep_flush,
    .ep_fence                 = uct_ringk_ep_fence,
    .ep_check                 = uct_ringk_ep_check,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_ringk_ep_t),
    .ep_connect               = (uct_ep_connect_func_t)ucs_empty_function_return_unsupported,
    .ep_disconnect            = (uct_ep_disconnect_func_t)ucs_empty_function_return_unsupported,
    .cm_ep_conn_notify        = (uct_cm_ep_conn_notify_func_t)ucs_empty_function_return_unsupported,
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_ringk_ep_t),
    .ep_get_address           = (uct_ep_get_address_func_t)ucs_empty_function_return_unsupported,
    .ep_connect_to_ep         = (uct_ep_connect_to_ep_func_t)ucs_empty_function_return_unsupported,
    .iface_accept             = (uct_iface_accept_func_t)ucs_empty_function_return_unsupported,
    .iface_reject             = (uct_iface_reject_func_t)ucs_empty_function_return_unsupported,
    .iface_flush              = uct_ringk_iface_flush,
    .iface_fence              = uct_ringk_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_ringk_iface_progress,
    .iface_event_fd_get       = uct_ringk_iface_event_fd_get,
    .iface_event_arm          = uct_ringk_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_ringk_iface_t),
    .iface_query              = uct_ringk_iface_query,
    .iface_get_device_address = uct_ringk_iface_get_device_address,
    .iface_get_address        = uct_ringk_iface_get_address,
    .iface_is_reachable       = uct_ringk_iface_is_reachable
};

/* One transport, "ringk", whose iface is the ring iface on the ringk md and the load/store iface
 * on the ringk_shm md: UCX_TLS=ringk selects both. */
static ucs_status_t uct_ringk_tl_iface_open(uct_md_h md, uct_worker_h worker,
                                            const uct_iface_params_t *params,
                                            const uct_iface_config_t *config,
                                            uct_iface_h *iface_p)
{
    if (uct_ringk_md_is_shm(md)) {
        return uct_ringk_shm_iface_open(md, worker, params, config, iface_p);
    }
    return UCS_CLASS_NEW_FUNC_NAME(uct_ringk_iface_t)(md, worker, params, config, iface_p);
}

uct_tl_t UCT_TL_NAME(ringk) = {
    .name          = "ringk",
    .query_devices = uct_ringk_query_tl_devices,
    .iface_open    = uct_ringk_tl_iface_open,
    .config        = {
        .name      = "ringk transport",
        .prefix    = "RINGK_",
        .table     = uct_ringk_iface_config_table,
        .size      = sizeof(uct_ringk_iface_config_t),
    }
};

UCT_SINGLE_TL_INIT(&uct_ringk_component, ringk, , , )
