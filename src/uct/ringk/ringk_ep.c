/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk endpoint: attaches to a peer's receive segment, owns a lane there, sends active messages
 * into it, does RMA by cross-memory attach, and keeps pending requests and failure detection. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, process_vm_readv/writev */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_ep.h"
#include "ringk_md.h"

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

/* How often a sender stuck on a full ring checks that its peer still lives. */
#define UCT_RINGK_EP_LIVENESS_INTERVAL_MS 100.0

/* ---- attach --------------------------------------------------------------------------------- */

/* Validates a peer's segment header against the address it came with and our limits. Everything
 * here was written by another process, so every size is checked before it is used. */
static ucs_status_t uct_ringk_ep_seg_check(const uct_ringk_seg_shm_t *hdr,
                                           const uct_ringk_iface_addr_t *addr)
{
    uint64_t rings_offset, stride, bytes;

    /* S2: pairs with S1 in uct_ringk_iface_seg_create(). */
    if (__atomic_load_n(&hdr->magic, __ATOMIC_ACQUIRE) != UCT_RINGK_SEG_MAGIC) {
        ucs_error("ringk: peer segment of pid %u has bad magic 0x%" PRIx64, addr->pid,
                  hdr->magic);
        return UCS_ERR_INVALID_ADDR;
    }
    if (hdr->version != UCT_RINGK_SEG_VERSION) {
        ucs_error("ringk: peer segment of pid %u has layout version %u, expected %u",
                  addr->pid, hdr->version, UCT_RINGK_SEG_VERSION);
        return UCS_ERR_UNSUPPORTED;
    }
    if ((hdr->nlanes < 1) || (hdr->nlanes > UCT_RINGK_LANES_MAX) ||
        !ucs_is_pow2(hdr->ring_size) || (hdr->ring_size < UCT_RINGK_RING_SIZE_MIN) ||
        (hdr->ring_size > UCT_RINGK_RING_SIZE_MAX) || !ucs_is_pow2(hdr->cell_size) ||
        (hdr->cell_size < UCT_RINGK_CELL_SIZE_MIN) || (hdr->cell_size > UCT_RINGK_CELL_SIZE_MAX) ||
        (hdr->max_cells < 1) || (hdr->max_cells > hdr->ring_size) || (hdr->max_len < 1) ||
        (hdr->max_len > ringk_ring_capacity(hdr->max_cells, hdr->cell_size))) {
        ucs_error("ringk: peer segment of pid %u has invalid geometry: %u lanes, %u cells of %u"
                  " bytes, %u cells and %u bytes per message", addr->pid, hdr->nlanes,
                  hdr->ring_size, hdr->cell_size, hdr->max_cells, hdr->max_len);
        return UCS_ERR_INVALID_ADDR;
    }
    uct_ringk_seg_layout(hdr->nlanes, hdr->ring_size, hdr->cell_size, &rings_offset, &stride,
                         &bytes);
    if ((hdr->rings_offset != rings_offset) || (hdr->lane_stride != stride) ||
        (hdr->seg_bytes != bytes) || (bytes != addr->seg_bytes) ||
        (hdr->owner_pid != addr->pid)) {
        ucs_error("ringk: peer segment of pid %u does not match its address (size %" PRIu64
                  " vs %" PRIu64 ")", addr->pid, hdr->seg_bytes, addr->seg_bytes);
        return UCS_ERR_INVALID_ADDR;
    }
    return UCS_OK;
}

/* The peer's ring must take this iface's largest message, which UCP may send whatever the
 * endpoint: processes with different UCX_RINGK_SEG_SIZE, RING_SIZE or CELL_SIZE are refused
 * here rather than overrunning the peer's ring or receive buffer. The in-place am_bcopy needs
 * room for the cells that message takes in the peer's ring, whose cells may differ in size. */
static ucs_status_t uct_ringk_ep_limits_check(uct_ringk_ep_t *ep, uct_ringk_iface_t *iface,
                                              const uct_ringk_iface_addr_t *addr)
{
    const uct_ringk_seg_shm_t *hdr = ep->seg;

    if (iface->max_bcopy > hdr->max_len) {
        ucs_error("ringk: the peer (pid %u) takes messages of up to %u bytes, this iface sends "
                  "up to %zu: UCX_RINGK_SEG_SIZE, RING_SIZE or CELL_SIZE differ between the two "
                  "processes", addr->pid, hdr->max_len, iface->max_bcopy);
        return UCS_ERR_UNREACHABLE;
    }
    ep->max_cells = ringk_ring_cells_for(iface->max_bcopy, hdr->cell_size);
    return UCS_OK;
}

static ucs_status_t uct_ringk_ep_attach(uct_ringk_ep_t *ep, const uct_ringk_iface_addr_t *addr)
{
    ringk_peer_err_t err;
    char link[128];
    struct stat st;
    int fd;

    /* The segment is an unlinked memfd; the kernel lets a process of the same user open it
     * through the owner's /proc entry. */
    fd = ringk_node_open_peer(addr->pid, addr->fd, O_RDWR, UCT_RINGK_SEG_NAME, &st, link,
                              sizeof(link), &err);
    if (fd < 0) {
        if (err == RINGK_PEER_NAME) {
            ucs_error("ringk: descriptor %d of pid %u is '%s', not a ringk receive segment",
                      addr->fd, addr->pid, link);
        } else if (err == RINGK_PEER_OWNER) {
            ucs_error("ringk: peer segment /proc/%u/fd/%d is owned by uid %u mode 0%o; only "
                      "our own 0600 segments are used", addr->pid, addr->fd, st.st_uid,
                      st.st_mode & 0777);
        } else {
            ucs_error("ringk: cannot %s the peer segment /proc/%u/fd/%d: %m",
                      (err == RINGK_PEER_OPEN) ? "open" : "inspect", addr->pid, addr->fd);
        }
        return UCS_ERR_UNREACHABLE;
    }
    if ((addr->seg_bytes < UCT_RINGK_SEG_LANES_OFFSET) || ((uint64_t)st.st_size < addr->seg_bytes)) {
        ucs_error("ringk: peer segment /proc/%u/fd/%d is %lld bytes, its address says %" PRIu64,
                  addr->pid, addr->fd, (long long)st.st_size, addr->seg_bytes);
        goto err_close;
    }
    ep->seg = mmap(NULL, addr->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ep->seg == MAP_FAILED) {
        ucs_error("ringk: mmap of the peer segment (%" PRIu64 " bytes) failed: %m",
                  addr->seg_bytes);
        return UCS_ERR_NO_MEMORY;
    }
    ep->seg_bytes = addr->seg_bytes;
    return UCS_OK;

err_close:
    close(fd);
    return UCS_ERR_UNREACHABLE;
}

/* Takes a single-producer lane if one is free, else uses the shared lane. */
static ucs_status_t uct_ringk_ep_lane_claim(uct_ringk_ep_t *ep)
{
    const uct_ringk_seg_shm_t *hdr = ep->seg;
    uct_ringk_lane_shm_t *lane;
    unsigned i;
    int ret;

    ep->lane = UCT_RINGK_SHARED_LANE;
    for (i = 1; i < hdr->nlanes; i++) {
        lane = uct_ringk_seg_lane(ep->seg, i);
        if ((__atomic_load_n(&lane->owner, __ATOMIC_RELAXED) == 0) &&
            __atomic_compare_exchange_n(&lane->owner, &(uint64_t){0}, ep->token, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            ep->lane = i;
            break;
        }
    }
    ret = ringk_ring_attach(&ep->ring, (char*)ep->seg + hdr->rings_offset +
                                       (uint64_t)ep->lane * hdr->lane_stride,
                            hdr->lane_stride);
    if (ret != 0) {
        ucs_error("ringk: ring of lane %u in the peer segment is invalid (%d)", ep->lane, ret);
        if (ep->lane != UCT_RINGK_SHARED_LANE) {
            __atomic_store_n(&uct_ringk_seg_lane(ep->seg, ep->lane)->owner, 0, __ATOMIC_RELEASE);
        }
        return UCS_ERR_INVALID_ADDR;
    }
    if (ep->lane != UCT_RINGK_SHARED_LANE) {
        lane = uct_ringk_seg_lane(ep->seg, ep->lane);
        /* The previous owner's tail and the head, ordered by the owner hand-over (F1 -> CAS
         * acquire). */
        ep->prod.pos  = __atomic_load_n(&ep->ring.prod->pos, __ATOMIC_RELAXED);
        ep->prod.head = __atomic_load_n(&ep->ring.cons->pos, __ATOMIC_ACQUIRE);
        __atomic_store_n(&lane->pid, getpid(), __ATOMIC_RELAXED);
        /* L1: the lane is open; pairs with L2 in uct_ringk_iface_lanes_rescan(). */
        __atomic_store_n(&lane->state, UCT_RINGK_LANE_OPEN, __ATOMIC_RELEASE);
        __atomic_fetch_add(&ep->ctl->lane_gen, 1, __ATOMIC_RELEASE);
    }
    return UCS_OK;
}

extern const uct_ringk_gpu_ops_t uct_ringk_gpu_ops[RINGK_PATH_COUNT];

/* The path between this process's GPU and the peer's, from their places in the topology and
 * the policy (RINGK_P2P_LEVEL, RINGK_PATH), confirmed by the canary on this machine. Writes the
 * reason to @a reason. @return the path, or -1 when a forced RINGK_PATH cannot serve the pair. */
static int uct_ringk_ep_gpu_path(uct_ringk_iface_t *iface, uint64_t peer_gpu, char *reason,
                                 size_t len)
{
    char mine[24], theirs[24], why[2 * RINGK_TOPO_REASON_LEN];
    const ringk_topo_t *topo;
    ringk_topo_pair_t pair;
    int a, b, path;

    ringk_busid_unpack(iface->gpu, mine, sizeof(mine));
    ringk_busid_unpack(peer_gpu, theirs, sizeof(theirs));
    topo = uct_ringk_iface_topo(iface);
    if (topo == NULL) {
        snprintf(reason, len, "GPU %s -> %s: no topology (%s): staged through host memory",
                 mine, theirs, iface->topo_err);
        return RINGK_PATH_HOST_STAGED;
    }
    a = ringk_topo_find_gpu(topo, mine);
    b = ringk_topo_find_gpu(topo, theirs);
    if ((a < 0) || (b < 0)) {
        snprintf(reason, len, "GPU %s -> %s: %s is not in the topology of %s: staged through "
                 "host memory", mine, theirs, (a < 0) ? mine : theirs, topo->source);
        return RINGK_PATH_HOST_STAGED;
    }
    ringk_topo_classify(topo, a, b, &pair);
    path = ringk_policy_apply(&iface->policy, &pair, why, sizeof(why));
    if (path >= 0) {
        path = ringk_topo_verify_path(topo, a, b, path, why, sizeof(why));
    }
    snprintf(reason, len, "GPU %s -> %s (GPU%d-GPU%d of %.120s): %s", mine, theirs, a, b,
             topo->source, why);
    return path;
}

/* Each endpoint's path is chosen here, once: host memory always travels through the
 * shared-memory rings (HOST_STAGED); when both processes name a GPU, GPU memory takes the path
 * of that pair, and the endpoint keeps that path's copy operations. The reason says why the
 * peer is on this node, which lane carries messages, and how GPU memory moves. */
static ucs_status_t uct_ringk_ep_choose_path(uct_ringk_ep_t *ep, uct_ringk_iface_t *iface,
                                             const uct_ep_params_t *params,
                                             const uct_ringk_iface_addr_t *addr)
{
    uct_ringk_dev_addr_t remote = iface->dev_addr;
    char node[128], gpu[640];
    int path;

    if ((params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) && (params->dev_addr != NULL)) {
        memcpy(&remote, params->dev_addr, sizeof(remote));
    }
    uct_ringk_dev_addr_reachable(&iface->dev_addr, &remote, UCT_RINGK_DEV_RING, node,
                                 sizeof(node));
    if ((iface->gpu != 0) && (addr->gpu != 0)) {
        path = uct_ringk_ep_gpu_path(iface, addr->gpu, gpu, sizeof(gpu));
        if (path < 0) {
            ucs_error("ringk: cannot connect to pid %u: %s", addr->pid, gpu);
            return UCS_ERR_UNREACHABLE;
        }
    } else {
        path = RINGK_PATH_HOST_STAGED;
        snprintf(gpu, sizeof(gpu), "no GPU pair (this process: %s; the peer: %s)%s",
                 (iface->gpu != 0) ? "a GPU" : "none", (addr->gpu != 0) ? "a GPU" : "none",
                 (iface->policy.forced && (iface->policy.path != RINGK_PATH_HOST_STAGED)) ?
                 ", so RINGK_PATH is ignored: host memory has only the host-staged path" : "");
    }
    ep->path    = (ringk_path_t)path;
    ep->gpu_ops = &uct_ringk_gpu_ops[path];
    snprintf(ep->path_reason, sizeof(ep->path_reason), "%s; host memory: shared-memory rings "
             "in the receiver's memfd segment, %s lane %u; %s", gpu,
             (ep->lane == UCT_RINGK_SHARED_LANE) ? "shared" : "own", ep->lane, node);
    ucs_debug("ringk ep %p: path %s: %s", ep, ringk_path_name(ep->path), ep->path_reason);
    return UCS_OK;
}

ucs_status_t uct_ringk_ep_path_query(uct_ep_h tl_ep, const char **path_p, const char **reason_p)
{
    uct_ringk_ep_t *ep;

    if ((tl_ep == NULL) || (tl_ep->iface == NULL) ||
        (tl_ep->iface->ops.ep_am_short != uct_ringk_ep_am_short)) {
        return UCS_ERR_INVALID_PARAM;
    }
    ep        = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    *path_p   = ringk_path_name(ep->path);
    *reason_p = ep->path_reason;
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_ringk_ep_t, const uct_ep_params_t *params)
{
    uct_ringk_iface_t *iface = ucs_derived_of(params->iface, uct_ringk_iface_t);
    const uct_ringk_iface_addr_t *addr;
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR) || (params->iface_addr == NULL)) {
        ucs_error("ringk: ep_create needs the peer's iface address");
        return UCS_ERR_INVALID_PARAM;
    }
    if (iface->neps >= iface->super.config.max_num_eps) {
        ucs_error("ringk iface %p: cannot create more than UCX_RINGK_MAX_NUM_EPS=%zu endpoints",
                  iface, iface->super.config.max_num_eps);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    addr = (const uct_ringk_iface_addr_t*)params->iface_addr;
    if ((addr->pid == 0) || (addr->pid > INT32_MAX) || (addr->fd < 0)) {
        ucs_error("ringk: invalid peer address: pid %u fd %d", addr->pid, addr->fd);
        return UCS_ERR_INVALID_ADDR;
    }
    self->peer_pid   = addr->pid;
    self->peer_id    = addr->iface_id;
    self->token      = ucs_generate_uuid((uintptr_t)self) | 1;
    self->need_cells = 1;
    self->failed     = 0;
    self->dispatching = 0;
    self->err_scheduled = 0;
    self->start_time = ucs_sys_get_proc_create_time(addr->pid);
    self->last_check = ucs_get_time();

    status = uct_ringk_ep_attach(self, addr);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_ringk_ep_seg_check(self->seg, addr);
    if (status != UCS_OK) {
        goto err_unmap;
    }
    self->ctl = uct_ringk_seg_ctl(self->seg);
    status    = uct_ringk_ep_limits_check(self, iface, addr);
    if (status != UCS_OK) {
        goto err_unmap;
    }
    status = uct_ringk_ep_lane_claim(self);
    if (status != UCS_OK) {
        goto err_unmap;
    }
    self->peer_sun_len = uct_ringk_wakeup_addr(addr->pid, addr->iface_id, &self->peer_sun);
    status = uct_ringk_ep_choose_path(self, iface, params, addr);
    if (status != UCS_OK) {
        goto err_lane;
    }
    ucs_arbiter_group_init(&self->arb_group);
    ucs_list_add_tail(&iface->eps, &self->list);
    iface->neps++;
    ucs_debug("ringk ep %p: connected to pid %u iface 0x%" PRIx64 " on %s lane %u", self,
              addr->pid, addr->iface_id,
              (self->lane == UCT_RINGK_SHARED_LANE) ? "shared" : "own", self->lane);
    return UCS_OK;

err_lane:
    if (self->lane != UCT_RINGK_SHARED_LANE) {
        /* L1: hand the lane back at once, as at close */
        __atomic_store_n(&uct_ringk_seg_lane(self->seg, self->lane)->state,
                         UCT_RINGK_LANE_CLOSING, __ATOMIC_RELEASE);
        __atomic_fetch_add(&self->ctl->lane_gen, 1, __ATOMIC_RELEASE);
    }
err_unmap:
    munmap(self->seg, self->seg_bytes);
    return status;
}

static int uct_ringk_ep_err_cb_match(const ucs_callbackq_elem_t *elem, void *arg);
void uct_ringk_ep_set_failed(uct_ringk_ep_t *ep);

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_ep_t)
{
    uct_ringk_iface_t *iface = ucs_derived_of(self->super.super.iface, uct_ringk_iface_t);
    uct_ringk_lane_shm_t *lane;

    uct_ringk_ep_pending_purge(&self->super.super, NULL, NULL);
    if (self->err_scheduled) {
        ucs_callbackq_remove_if(&iface->super.worker->super.progress_q,
                                uct_ringk_ep_err_cb_match, self);
        iface->nerr_scheduled--;
    }
    if (self->lane != UCT_RINGK_SHARED_LANE) {
        lane = uct_ringk_seg_lane(self->seg, self->lane);
        /* L1: hand the lane back; the receiver drains it and frees it (F1). */
        __atomic_store_n(&lane->state, UCT_RINGK_LANE_CLOSING, __ATOMIC_RELEASE);
        __atomic_fetch_add(&self->ctl->lane_gen, 1, __ATOMIC_RELEASE);
    }
    munmap(self->seg, self->seg_bytes);
    ucs_list_del(&self->list);
    iface->neps--;
}

UCS_CLASS_DEFINE(uct_ringk_ep_t, uct_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_ringk_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_ringk_ep_t, uct_ep_t);

/* ---- failure detection ---------------------------------------------------------------------- */

int uct_ringk_ep_peer_dead(uct_ringk_ep_t *ep)
{
    /* C3: pairs with the iface's release store of 'closed' at close. */
    if (__atomic_load_n(&ep->ctl->closed, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    /* A reused pid has another start time. */
    return ucs_sys_get_proc_create_time(ep->peer_pid) != ep->start_time;
}

static unsigned uct_ringk_ep_err_progress(void *arg)
{
    uct_ringk_ep_t *ep       = arg;
    uct_ringk_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);

    ep->err_scheduled = 0;
    iface->nerr_scheduled--;
    uct_iface_handle_ep_err(ep->super.super.iface, &ep->super.super,
                            UCT_RINGK_EP_FAILED_STATUS);
    return 1;
}

static int uct_ringk_ep_err_cb_match(const ucs_callbackq_elem_t *elem, void *arg)
{
    return (elem->cb == uct_ringk_ep_err_progress) && (elem->arg == arg);
}

/* Reports the peer's death once, from the worker's progress, as UCT expects. */
void uct_ringk_ep_set_failed(uct_ringk_ep_t *ep)
{
    uct_ringk_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);

    if (ep->failed) {
        return;
    }
    ep->failed = 1;
    ucs_debug("ringk ep %p: peer pid %u iface 0x%" PRIx64 " is gone", ep, ep->peer_pid,
              ep->peer_id);
    ep->err_scheduled = 1;
    iface->nerr_scheduled++;
    ucs_callbackq_add_safe(&iface->super.worker->super.progress_q, uct_ringk_ep_err_progress,
                           ep, UCS_CALLBACKQ_FLAG_ONESHOT);
}

int uct_ringk_ep_peer_closed(uct_ringk_ep_t *ep)
{
    /* C3: as in uct_ringk_ep_peer_dead(). */
    if (!ep->failed && __atomic_load_n(&ep->ctl->closed, __ATOMIC_ACQUIRE)) {
        uct_ringk_ep_set_failed(ep);
    }
    return ep->failed;
}

ucs_status_t uct_ringk_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);

    UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    if (uct_ringk_ep_peer_dead(ep)) {
        uct_ringk_ep_set_failed(ep);
    }
    uct_ringk_iface_sweep(iface);
    return UCS_OK;
}

/* ---- sending active messages ---------------------------------------------------------------- */

/* Wakes the receiver if it sleeps. Senders to an iface that never used wakeups skip it all. */
static void uct_ringk_ep_signal_slow(uct_ringk_ep_t *ep)
{
    uct_ringk_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);

    /* W2: the publish before reading 'armed'; pairs with W1 in uct_ringk_iface_event_arm(). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&ep->ctl->armed, __ATOMIC_RELAXED) &&
        __atomic_exchange_n(&ep->ctl->armed, 0, __ATOMIC_RELAXED)) {
        if ((sendto(iface->signal_fd, "", 1, MSG_DONTWAIT, (struct sockaddr*)&ep->peer_sun,
                    ep->peer_sun_len) < 0) && (errno != EAGAIN)) {
            ucs_debug("ringk ep %p: wakeup of pid %u failed: %m", ep, ep->peer_pid);
        }
    }
}

static UCS_F_ALWAYS_INLINE void uct_ringk_ep_signal(uct_ringk_ep_t *ep)
{
    if (ucs_unlikely(__atomic_load_n(&ep->ctl->wakeup_used, __ATOMIC_RELAXED))) {
        uct_ringk_ep_signal_slow(ep);
    }
}

/* Requests in the pending queue go before any new send, so a send that finds room while they
 * wait is refused (UCT's order rule); the request being dispatched is the exception. */
static UCS_F_ALWAYS_INLINE int uct_ringk_ep_pending_first(const uct_ringk_ep_t *ep)
{
    return ucs_unlikely(!ucs_arbiter_group_is_empty((ucs_arbiter_group_t*)&ep->arb_group)) &&
           !ep->dispatching;
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
        return ep->failed ? UCT_RINGK_EP_FAILED_STATUS : UCS_ERR_NO_RESOURCE;
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
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, &header, length, "TX: AM_SHORT");
    UCT_TL_EP_STAT_OP(&ep->super, AM, SHORT, total);
    return UCS_OK;
}

/* Tells whether a local buffer is CUDA device memory. The iov's memh is never looked at:
 * without a usable CUDA the md does not advertise UCT_MD_FLAG_NEED_MEMH, and UCP passes
 * whatever its request holds there, not a handle of ours. Without a usable CUDA this calls
 * nothing (ringk_cuda_ptr_is_device). */
static UCS_F_ALWAYS_INLINE int uct_ringk_local_is_gpu(const void *buffer)
{
    return ringk_cuda_ptr_is_device(buffer, NULL, 0);
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
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id,
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

/* ---- RMA by cross-memory attach -------------------------------------------------------------- */

/* Checks that [remote_addr, remote_addr + length) lies in the region @a rkey describes and that
 * the region belongs to this ep's peer: an rkey from one peer never reaches another process. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_ringk_ep_rkey_check(uct_ringk_ep_t *ep, uct_rkey_t rkey, uint64_t remote_addr, size_t length,
                        const char *op)
{
    const uct_ringk_rkey_t *key = (const uct_ringk_rkey_t*)rkey;

    if (ucs_unlikely((key == NULL) || (key->kind != UCT_RINGK_KEY_REG) ||
                     (key->pid != ep->peer_pid) ||
                     (remote_addr < key->address) ||
                     (length > key->length) ||
                     (remote_addr - key->address > key->length - length))) {
        ucs_error("ringk ep %p: %s of %zu bytes at 0x%" PRIx64 " is outside the remote key "
                  "(pid %u, 0x%" PRIx64 "+%" PRIu64 ", peer pid %u)", ep, op, length, remote_addr,
                  key ? key->pid : 0, key ? key->address : 0, key ? key->length : 0,
                  ep->peer_pid);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* Moves local iovecs to or from the peer's memory, looping over partial transfers. */
static ucs_status_t uct_ringk_ep_cma(uct_ringk_ep_t *ep, struct iovec *local, size_t nlocal,
                                     uint64_t remote_addr, size_t length, int write)
{
    struct iovec remote;
    size_t done = 0, skip;
    ssize_t ret;

    while (done < length) {
        remote.iov_base = (void*)(uintptr_t)(remote_addr + done);
        remote.iov_len  = length - done;
        ret = write ? process_vm_writev(ep->peer_pid, local, nlocal, &remote, 1, 0) :
                      process_vm_readv(ep->peer_pid, local, nlocal, &remote, 1, 0);
        if (ret <= 0) {
            ucs_error("ringk ep %p: %s of %zu bytes at 0x%" PRIx64 " in pid %u failed: %m", ep,
                      write ? "process_vm_writev" : "process_vm_readv", length - done,
                      remote_addr + done, ep->peer_pid);
            if ((errno == ESRCH) || (errno == EPERM)) {
                uct_ringk_ep_set_failed(ep);
                return UCT_RINGK_EP_FAILED_STATUS;
            }
            return UCS_ERR_IO_ERROR;
        }
        done += ret;
        /* Advance the local iovecs past what was moved. */
        for (skip = ret; (nlocal > 0) && (skip >= local->iov_len); nlocal--, local++) {
            skip -= local->iov_len;
        }
        if (nlocal > 0) {
            local->iov_base = (char*)local->iov_base + skip;
            local->iov_len -= skip;
        }
    }
    return UCS_OK;
}

/* ---- GPU memory: one copy routine per path ------------------------------------------------ */

/* Where remote_addr of a peer's CUDA region is mapped in this process. */
static void *uct_ringk_gpu_remote(const uct_ringk_rkey_t *key, uint64_t remote_addr)
{
    return (char*)key->mapped + (remote_addr - key->alloc_base);
}

static ucs_status_t uct_ringk_gpu_copy(uct_ringk_ep_t *ep, void *dst, const void *src,
                                       size_t len)
{
    char why[256];

    if (ringk_cuda_copy(dst, src, len, why, sizeof(why)) != 0) {
        ucs_error("ringk ep %p (%s): %s", ep, ringk_path_name(ep->path), why);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

/* P2P_NVLINK, P2P_PCIE and CUDA_IPC: one copy through the peer's allocation, mapped by CUDA
 * IPC with peer access enabled on demand (cudaIpcMemLazyEnablePeerAccess), so the copy goes
 * over the link the path names; the driver routes a CUDA_IPC copy between GPUs without P2P. */
static ucs_status_t uct_ringk_gpu_move_ipc(uct_ringk_ep_t *ep, const uct_ringk_rkey_t *key,
                                           const struct iovec *local, size_t nlocal,
                                           uint64_t remote_addr, int write)
{
    ucs_status_t status = UCS_OK;
    void *remote;
    size_t i;

    for (i = 0; (i < nlocal) && (status == UCS_OK); i++) {
        remote = uct_ringk_gpu_remote(key, remote_addr);
        status = write ? uct_ringk_gpu_copy(ep, remote, local[i].iov_base, local[i].iov_len) :
                         uct_ringk_gpu_copy(ep, local[i].iov_base, remote, local[i].iov_len);
        remote_addr += local[i].iov_len;
    }
    return status;
}

/* HOST_STAGED: every byte goes through the iface's pinned host buffer, so no peer access
 * between the GPUs is needed. */
static ucs_status_t uct_ringk_gpu_move_staged(uct_ringk_ep_t *ep, const uct_ringk_rkey_t *key,
                                              const struct iovec *local, size_t nlocal,
                                              uint64_t remote_addr, int write)
{
    uct_ringk_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);
    void *bounce             = uct_ringk_iface_gpu_bounce(iface);
    ucs_status_t status      = UCS_OK;
    size_t i, off, chunk;
    char *buf, *remote;

    if (bounce == NULL) {
        ucs_error("ringk ep %p: no pinned host buffer to stage GPU memory through", ep);
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; (i < nlocal) && (status == UCS_OK); i++) {
        buf = local[i].iov_base;
        for (off = 0; (off < local[i].iov_len) && (status == UCS_OK); off += chunk) {
            chunk  = ucs_min(local[i].iov_len - off, UCT_RINGK_GPU_BOUNCE_SIZE);
            remote = uct_ringk_gpu_remote(key, remote_addr);
            if (write) {
                status = uct_ringk_gpu_copy(ep, bounce, buf + off, chunk);
                if (status == UCS_OK) {
                    status = uct_ringk_gpu_copy(ep, remote, bounce, chunk);
                }
            } else {
                status = uct_ringk_gpu_copy(ep, bounce, remote, chunk);
                if (status == UCS_OK) {
                    status = uct_ringk_gpu_copy(ep, buf + off, bounce, chunk);
                }
            }
            remote_addr += chunk;
        }
    }
    return status;
}

const uct_ringk_gpu_ops_t uct_ringk_gpu_ops[RINGK_PATH_COUNT] = {
    [RINGK_PATH_P2P_NVLINK]  = {.move = uct_ringk_gpu_move_ipc},
    [RINGK_PATH_P2P_PCIE]    = {.move = uct_ringk_gpu_move_ipc},
    [RINGK_PATH_CUDA_IPC]    = {.move = uct_ringk_gpu_move_ipc},
    [RINGK_PATH_HOST_STAGED] = {.move = uct_ringk_gpu_move_staged}
};

/* Local CUDA memory and a host region of the peer: through the pinned buffer, then CMA. */
static ucs_status_t uct_ringk_ep_cma_from_gpu(uct_ringk_ep_t *ep, void *gpu_buf, size_t length,
                                              uint64_t remote_addr, int write)
{
    uct_ringk_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);
    void *bounce             = uct_ringk_iface_gpu_bounce(iface);
    ucs_status_t status      = UCS_OK;
    struct iovec staged;
    size_t off, chunk;

    if (bounce == NULL) {
        ucs_error("ringk ep %p: no pinned host buffer to stage GPU memory through", ep);
        return UCS_ERR_NO_MEMORY;
    }
    for (off = 0; (off < length) && (status == UCS_OK); off += chunk) {
        chunk  = ucs_min(length - off, UCT_RINGK_GPU_BOUNCE_SIZE);
        staged = (struct iovec){bounce, chunk};
        if (write) {
            status = uct_ringk_gpu_copy(ep, bounce, (char*)gpu_buf + off, chunk);
            if (status == UCS_OK) {
                status = uct_ringk_ep_cma(ep, &staged, 1, remote_addr + off, chunk, 1);
            }
        } else {
            status = uct_ringk_ep_cma(ep, &staged, 1, remote_addr + off, chunk, 0);
            if (status == UCS_OK) {
                status = uct_ringk_gpu_copy(ep, (char*)gpu_buf + off, bounce, chunk);
            }
        }
    }
    return status;
}

/* Moves checked local buffers to or from [remote_addr, +length) of the region @a rkey names:
 * host regions by cross-memory attach, CUDA regions by the endpoint's GPU path. */
static ucs_status_t uct_ringk_ep_move(uct_ringk_ep_t *ep, uct_rkey_t rkey, struct iovec *local,
                                      size_t nlocal, uint64_t remote_addr, size_t length,
                                      int write)
{
    const uct_ringk_rkey_t *key = (const uct_ringk_rkey_t*)rkey;

    if (ucs_unlikely(key->mem_type == UCS_MEMORY_TYPE_CUDA)) {
        return ep->gpu_ops->move(ep, key, local, nlocal, remote_addr, write);
    }
    return uct_ringk_ep_cma(ep, local, nlocal, remote_addr, length, write);
}

static ucs_status_t uct_ringk_ep_rma_iov(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, uct_rkey_t rkey, int write)
{
    uct_ringk_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    const uct_ringk_rkey_t *key = (const uct_ringk_rkey_t*)rkey;
    struct iovec local[IOV_MAX];
    size_t i, n = 0, length = 0;
    ucs_status_t status;
    int local_gpu = 0;

    if (iovcnt > IOV_MAX) {
        ucs_error("ringk ep %p: %zu iov entries, at most %d", ep, iovcnt, IOV_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iovcnt; i++) {
        local[n].iov_base = iov[i].buffer;
        local[n].iov_len  = uct_iov_get_length(&iov[i]);
        length           += local[n].iov_len;
        if (local[n].iov_len > 0) {
            local_gpu |= uct_ringk_local_is_gpu(local[n].iov_base);
            n++;
        }
    }
    if (length == 0) {
        return UCS_OK; /* nothing to move: the key is not looked at */
    }
    status = uct_ringk_ep_rkey_check(ep, rkey, remote_addr, length, write ? "put" : "get");
    if (status != UCS_OK) {
        return status;
    }
    if (ucs_unlikely(local_gpu && (key->mem_type == UCS_MEMORY_TYPE_HOST))) {
        /* CMA cannot reach device memory: stage each GPU buffer, in order */
        for (i = 0; (i < n) && (status == UCS_OK); remote_addr += local[i].iov_len, i++) {
            status = uct_ringk_local_is_gpu(local[i].iov_base) ?
                     uct_ringk_ep_cma_from_gpu(ep, local[i].iov_base, local[i].iov_len,
                                               remote_addr, write) :
                     uct_ringk_ep_cma(ep, &local[i], 1, remote_addr, local[i].iov_len, write);
        }
        return status;
    }
    return uct_ringk_ep_move(ep, rkey, local, n, remote_addr, length, write);
}

ucs_status_t uct_ringk_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length,
                                    uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_ringk_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    struct iovec local = {(void*)buffer, length};
    ucs_status_t status;

    if (length == 0) {
        return UCS_OK; /* nothing to move: the key is not looked at */
    }
    status = uct_ringk_ep_rkey_check(ep, rkey, remote_addr, length, "put_short");
    if (status != UCS_OK) {
        return status;
    }
    status = uct_ringk_ep_move(ep, rkey, &local, 1, remote_addr, length, 1);
    UCT_TL_EP_STAT_OP(&ep->super, PUT, SHORT, length);
    return status;
}

ssize_t uct_ringk_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg,
                               uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    struct iovec local;
    ucs_status_t status;
    size_t length;

    length = pack_cb(iface->tx_buf, arg);
    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "put_bcopy");
    if (length > 0) {
        status = uct_ringk_ep_rkey_check(ep, rkey, remote_addr, length, "put_bcopy");
        if (status != UCS_OK) {
            return status;
        }
        local.iov_base = iface->tx_buf;
        local.iov_len  = length;
        status = uct_ringk_ep_move(ep, rkey, &local, 1, remote_addr, length, 1);
        if (status != UCS_OK) {
            return status;
        }
    }
    UCT_TL_EP_STAT_OP(&ep->super, PUT, BCOPY, length);
    return length;
}

ucs_status_t uct_ringk_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp)
{
    UCT_TL_EP_STAT_OP(ucs_derived_of(tl_ep, uct_base_ep_t), PUT, ZCOPY,
                      uct_iov_total_length(iov, iovcnt));
    return uct_ringk_ep_rma_iov(tl_ep, iov, iovcnt, remote_addr, rkey, 1);
}

ucs_status_t uct_ringk_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb, void *arg,
                                    size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    struct iovec local       = {iface->tx_buf, length};
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "get_bcopy");
    if (length > 0) {
        status = uct_ringk_ep_rkey_check(ep, rkey, remote_addr, length, "get_bcopy");
        if (status != UCS_OK) {
            return status;
        }
        status = uct_ringk_ep_move(ep, rkey, &local, 1, remote_addr, length, 0);
        if (status != UCS_OK) {
            return status;
        }
    }
    unpack_cb(arg, iface->tx_buf, length);
    UCT_TL_EP_STAT_OP(&ep->super, GET, BCOPY, length);
    return UCS_OK;
}

ucs_status_t uct_ringk_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp)
{
    UCT_TL_EP_STAT_OP(ucs_derived_of(tl_ep, uct_base_ep_t), GET, ZCOPY,
                      uct_iov_total_length(iov, iovcnt));
    return uct_ringk_ep_rma_iov(tl_ep, iov, iovcnt, remote_addr, rkey, 0);
}

/* ---- pending, flush, fence ------------------------------------------------------------------ */

static int uct_ringk_ep_has_tx_resources(uct_ringk_ep_t *ep)
{
    ringk_ring_prod_t shared;
    uint32_t pad;

    if (ep->lane != UCT_RINGK_SHARED_LANE) {
        pad = ringk_ring_pad(&ep->ring, ep->prod.pos, ep->need_cells);
        return ringk_ring_room(&ep->ring, &ep->prod, pad + ep->need_cells);
    }
    shared.pos  = __atomic_load_n(&ep->ring.prod->pos, __ATOMIC_RELAXED);
    shared.head = shared.pos - ep->ring.ncells; /* forces a load of the head */
    pad         = ringk_ring_pad(&ep->ring, shared.pos, ep->need_cells);
    return ringk_ring_room(&ep->ring, &shared, pad + ep->need_cells);
}

ucs_status_t uct_ringk_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);

    if (ucs_arbiter_group_is_empty(&ep->arb_group) && uct_ringk_ep_has_tx_resources(ep) &&
        !ep->failed) {
        return UCS_ERR_BUSY;
    }
    UCS_STATIC_ASSERT(sizeof(uct_pending_req_priv_arb_t) <= UCT_PENDING_REQ_PRIV_LEN);
    uct_pending_req_arb_group_push(&ep->arb_group, req);
    ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    UCT_TL_EP_STAT_PEND(&ep->super);
    return UCS_OK;
}

ucs_arbiter_cb_result_t uct_ringk_ep_process_pending(ucs_arbiter_t *arbiter,
                                                     ucs_arbiter_group_t *group,
                                                     ucs_arbiter_elem_t *elem, void *arg)
{
    uct_ringk_ep_t *ep = ucs_container_of(group, uct_ringk_ep_t, arb_group);
    unsigned *count    = (unsigned*)arg;
    uct_pending_req_t *req;
    ucs_status_t status;
    ucs_time_t now;

    if (!uct_ringk_ep_has_tx_resources(ep)) {
        /* A receiver that died would leave us here forever: look at it now and then. */
        now = ucs_get_time();
        if (now - ep->last_check > ucs_time_from_msec(UCT_RINGK_EP_LIVENESS_INTERVAL_MS)) {
            ep->last_check = now;
            if (uct_ringk_ep_peer_dead(ep)) {
                uct_ringk_ep_set_failed(ep);
            }
        }
        return UCS_ARBITER_CB_RESULT_RESCHED_GROUP;
    }

    req             = ucs_container_of(elem, uct_pending_req_t, priv);
    ep->dispatching = 1;
    status          = req->func(req);
    ep->dispatching = 0;
    ucs_trace_data("ringk ep %p: pending request %p: %s", ep, req, ucs_status_string(status));
    if (status == UCS_OK) {
        (*count)++;
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    } else if (status == UCS_INPROGRESS) {
        (*count)++;
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP;
    }
    return UCS_ARBITER_CB_RESULT_RESCHED_GROUP;
}

static ucs_arbiter_cb_result_t uct_ringk_ep_purge_cb(ucs_arbiter_t *arbiter,
                                                     ucs_arbiter_group_t *group,
                                                     ucs_arbiter_elem_t *elem, void *arg)
{
    uct_purge_cb_args_t *cb_args = arg;
    uct_pending_req_t *req       = ucs_container_of(elem, uct_pending_req_t, priv);
    uct_ringk_ep_t *ep           = ucs_container_of(group, uct_ringk_ep_t, arb_group);

    if (cb_args->cb != NULL) {
        cb_args->cb(req, cb_args->arg);
    } else {
        ucs_debug("ringk ep %p: cancelling pending request %p", ep, req);
    }
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

void uct_ringk_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg)
{
    uct_ringk_iface_t *iface     = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    uct_ringk_ep_t *ep           = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    uct_purge_cb_args_t args     = {cb, arg};

    ucs_arbiter_group_purge(&iface->arbiter, &ep->arb_group, uct_ringk_ep_purge_cb, &args);
}

ucs_status_t uct_ringk_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_ringk_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_ep_t);

    /* A flush that a pending request of this ep runs covers what went before it. */
    if (uct_ringk_ep_pending_first(ep)) {
        UCT_TL_EP_STAT_FLUSH_WAIT(&ep->super);
        return UCS_ERR_NO_RESOURCE;
    }
    if (ep->failed && !(flags & UCT_FLUSH_FLAG_CANCEL)) {
        return UCT_RINGK_EP_FAILED_STATUS;
    }
    /* Messages are in the peer's ring and RMA is done when posted. */
    ucs_memory_cpu_store_fence();
    UCT_TL_EP_STAT_FLUSH(&ep->super);
    return UCS_OK;
}

ucs_status_t uct_ringk_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    ucs_memory_cpu_fence();
    UCT_TL_EP_STAT_FENCE(ucs_derived_of(tl_ep, uct_base_ep_t));
    return UCS_OK;
}
