/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring device's iface: query, the receive segment and its lanes, progress, wakeup, open
 * and close. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, process_vm_readv/writev */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_iface.h"
#include <uct/ringk/base/ringk_md.h>
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

    uct_ringk_base_iface_query(&iface->super, attr, sizeof(uct_ringk_iface_addr_t));
    attr->cap.flags       |= UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                             UCT_IFACE_FLAG_AM_ZCOPY;
    /* Send completion: every operation completes when it is posted, so the only sends that
     * can be outstanding are pending requests, and arming refuses (BUSY) while there are any. */
    attr->cap.event_flags |= UCT_IFACE_FLAG_EVENT_RECV | UCT_IFACE_FLAG_EVENT_RECV_SIG |
                             UCT_IFACE_FLAG_EVENT_FD;

    attr->cap.am.max_short       = iface->max_short;
    attr->cap.am.max_bcopy       = iface->max_bcopy;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = iface->max_bcopy;
    attr->cap.am.opt_zcopy_align = UCS_SYS_CACHE_LINE_SIZE;
    attr->cap.am.align_mtu       = attr->cap.am.opt_zcopy_align;
    attr->cap.am.max_hdr         = iface->max_short;
    attr->cap.am.max_iov         = 16;

    /* RMA goes through cross-memory attach: one copy, any size, bcopy through tx_buf. */
    attr->cap.put.max_bcopy = iface->config.seg_size;
    attr->cap.put.min_zcopy = 0;
    attr->cap.get.max_bcopy = iface->config.seg_size;
    attr->cap.get.min_zcopy = 0;

    /* posix's own figures (80 ns, 12179 MB/s) scaled by the ratios bench/ringk_vs_posix.sh
     * measures against it (bench/RESULTS.md, "performance attributes"), the latency rounded so
     * that it stays below posix's on a noisier run */
    attr->latency          = ucs_linear_func_make(63e-9, 0);
    attr->bandwidth.shared = 8470.0 * UCS_MBYTE;
    attr->overhead         = 10e-9;
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
            uct_ringk_xstage_lane_sync(iface, i, 1);
        } else if (state == UCT_RINGK_LANE_CLOSING) {
            uct_ringk_xstage_lane_sync(iface, i, 0);
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
        uct_ringk_peer_check(&ep->peer);
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
        uct_iface_trace_am(&iface->super.super, UCT_AM_TRACE_TYPE_RECV, id, data, len, "RX: AM");
        uct_iface_invoke_am(&iface->super.super, id, data, len, 0);
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
    if (ucs_unlikely(iface->nstaged > 0)) {
        count += uct_ringk_xstage_serve(iface);
    }
    if (!ucs_arbiter_is_empty(&iface->arbiter)) {
        ucs_arbiter_dispatch(&iface->arbiter, 1, uct_ringk_ep_process_pending, &count);
    }
    /* Peers are checked every few thousand calls at most, and then only if their time came:
     * no clock read and no system call on the busy path. */
    if (ucs_unlikely((++iface->progress_count & 0xfff) == 0)) {
        uct_ringk_iface_liveness_check(iface);
        if (ringk_cuda_host_deferred() > 0) { /* staging areas closed under device kernels */
            ringk_cuda_host_flush();
        }
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
    if (iface->super.nerr_scheduled > 0) {
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
        uct_ringk_peer_closed(&ep->peer);
    }
    if (iface->super.nerr_scheduled > 0) {
        return UCS_INPROGRESS;
    }
    /* Every operation is complete when posted (in the peer's ring or copied by CMA); pending
     * requests are not operations yet (as for UCX's shared-memory transports), so they are not
     * waited for. */
    ucs_memory_cpu_store_fence();
    UCT_TL_IFACE_STAT_FLUSH(&iface->super.super);
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

#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_IS_CONNECTED
static int uct_ringk_ep_is_connected(const uct_ep_h tl_ep,
                                     const uct_ep_is_connected_params_t *params)
{
    return uct_ringk_peer_is_connected(&ucs_derived_of(tl_ep, uct_ringk_ep_t)->peer, params);
}
#endif

/* UCP's estimate of a CPU copy when it is not configured (UCX_BCOPY_BW=auto): 7000 MB/s. */
#define UCT_RINGK_UCP_COPY_BW (7000.0 * UCS_MBYTE)

/* What an operation costs, for UCP's protocol selection (protocols v2). UCP counts a CPU copy
 * of the payload for short and bcopy, none for zcopy; the ring device's am zcopy copies the
 * payload into the ring all the same, so its bandwidth is given as that copy in series with
 * the ring's. Otherwise UCP 1.22 takes am zcopy over short from 1 byte on. */
static ucs_status_t uct_ringk_iface_estimate_perf(uct_iface_h tl_iface, uct_perf_attr_t *perf)
{
    ucs_status_t status = uct_base_iface_estimate_perf(tl_iface, perf);
    const uint64_t need = UCT_PERF_ATTR_FIELD_OPERATION | UCT_PERF_ATTR_FIELD_BANDWIDTH;

    if ((status == UCS_OK) && ((perf->field_mask & need) == need) &&
        (perf->operation == UCT_EP_OP_AM_ZCOPY) && (perf->bandwidth.shared > 0)) {
        perf->bandwidth.shared = 1.0 / (1.0 / perf->bandwidth.shared +
                                        1.0 / UCT_RINGK_UCP_COPY_BW);
    }
    return status;
}

static uct_iface_internal_ops_t uct_ringk_iface_internal_ops = {
    UCT_RINGK_INTERNAL_OPS(uct_ringk_ep_is_connected, uct_ringk_iface_estimate_perf)
};

/* The largest messages: a message may take at most half the ring, so that it can always be
 * placed without wrapping once the ring is empty; am_bcopy is capped by SEG_SIZE and by that. */
static void uct_ringk_iface_limits_init(uct_ringk_iface_t *self,
                                        const uct_ringk_iface_config_t *config)
{
    unsigned short_cells;

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
}

/* The topology file UCX_RINGK_TOPO_FILE or RINGK_TOPO_FILE names, kept for the first endpoint
 * between GPUs, which reads it. */
static ucs_status_t uct_ringk_iface_topo_file_init(uct_ringk_iface_t *self,
                                                   const uct_ringk_iface_config_t *config)
{
    const char *topo_file, *topo_name;

    topo_file = uct_ringk_setting(config->topo_file, "UCX_RINGK_TOPO_FILE", "RINGK_TOPO_FILE",
                                  &topo_name);
    if ((topo_file != NULL) && (topo_file[0] != '\0')) {
        self->topo_file = ucs_strdup(topo_file, "ringk_topo_file");
        if (self->topo_file == NULL) {
            ucs_error("ringk: cannot copy %s", topo_name);
            return UCS_ERR_NO_MEMORY;
        }
    }
    return UCS_OK;
}

/* The receive buffer (a handler that asks for aligned data gets it: messages that are not
 * aligned in the ring are copied there, placed so that data + am_align_offset is aligned) and
 * the send buffer. Either may be allocated when this fails: the caller frees both. */
static ucs_status_t uct_ringk_iface_bufs_alloc(uct_ringk_iface_t *self,
                                               const uct_ringk_iface_config_t *config)
{
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
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_ringk_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_ringk_iface_config_t *config = ucs_derived_of(tl_config,
                                                            uct_ringk_iface_config_t);
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_ringk_base_iface_t, &uct_ringk_iface_ops,
                              &uct_ringk_iface_internal_ops, md, worker, params, tl_config,
                              UCT_RINGK_DEV_RING);
    self->config     = *config;
    /* the strings go with the configuration: resolved below */
    self->config.gpu       = NULL;
    self->config.p2p_level = NULL;
    self->config.path      = NULL;
    self->config.topo_file = NULL;
    self->id         = ucs_generate_uuid((uintptr_t)self);
    self->neps       = 0; /* UCS classes are not zeroed: valgrind saw this read uninitialised */
    self->topo       = NULL;
    self->gpu_bounce        = NULL;
    self->gpu_bounce_pinned = 0;
    self->topo_err[0] = '\0';
    self->topo_file  = NULL;
    uct_ringk_iface_gpu_init(self, config->gpu);

    uct_ringk_iface_limits_init(self, config);
    status = uct_ringk_iface_policy(config, &self->policy);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_ringk_iface_topo_file_init(self, config);
    if (status != UCS_OK) {
        return status;
    }

    self->rx_buf = NULL;
    self->tx_buf = NULL;
    status = uct_ringk_iface_am_align(params, &self->am_align, &self->am_align_offset);
    if (status != UCS_OK) {
        goto err_free_topo_file;
    }
    status = uct_ringk_iface_bufs_alloc(self, config);
    if (status != UCS_OK) {
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
    self->nstaged        = 0;
    self->stage_served   = 0;
    self->stage_failed   = 0;
    self->stage_sent     = 0;
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
    unsigned i;

    uct_base_iface_progress_disable(&self->super.super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    /* C3: peers' endpoints see the iface gone (uct_ringk_peer_closed). */
    __atomic_store_n(&self->ctl->closed, 1, __ATOMIC_RELEASE);
    for (i = 1; i < self->config.lanes; i++) {
        uct_ringk_xstage_lane_sync(self, i, 0);
    }
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

UCS_CLASS_DEFINE(uct_ringk_iface_t, uct_ringk_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_ringk_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_ringk_iface_t, uct_iface_t);

static uct_iface_ops_t uct_ringk_iface_ops = {
    UCT_RINGK_DEVICE_OPS(uct_ringk_ep, uct_ringk_iface),
    .ep_am_short              = uct_ringk_ep_am_short,
#ifdef HAVE_UCT_IFACE_OPS_T_EP_AM_SHORT_IOV
    .ep_am_short_iov          = uct_ringk_ep_am_short_iov,
#endif
    .ep_am_bcopy              = uct_ringk_ep_am_bcopy,
    .ep_am_zcopy              = uct_ringk_ep_am_zcopy,
    .ep_pending_purge         = uct_ringk_ep_pending_purge,
    .iface_event_fd_get       = uct_ringk_iface_event_fd_get,
    .iface_event_arm          = uct_ringk_iface_event_arm,
    UCT_RINGK_NO_ATOMIC_OPS,
    UCT_RINGK_BASE_IFACE_OPS
};

ucs_status_t uct_ringk_ring_iface_open(uct_md_h md, uct_worker_h worker,
                                       const uct_iface_params_t *params,
                                       const uct_iface_config_t *config, uct_iface_h *iface_p)
{
    return UCS_CLASS_NEW_FUNC_NAME(uct_ringk_iface_t)(md, worker, params, config, iface_p);
}
