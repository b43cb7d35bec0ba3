/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring device's endpoint: attaches to a peer's receive segment, owns a lane there, chooses
 * its path for GPU memory, and finds its peer gone. */
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
        __atomic_store_n(&lane->stage_fd, 0, __ATOMIC_RELAXED); /* a dead owner's area */
        __atomic_store_n(&lane->stage_ack, 0, __ATOMIC_RELAXED);
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
        path = ringk_topo_verify_path(topo, a, b, path, why, sizeof(why), NULL);
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
    uct_ringk_dev_addr_t remote = iface->super.dev_addr;
    char node[128], gpu[640];
    int path;

    if ((params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) && (params->dev_addr != NULL)) {
        memcpy(&remote, params->dev_addr, sizeof(remote));
    }
    uct_ringk_dev_addr_reachable(&iface->super.dev_addr, &remote, UCT_RINGK_DEV_RING, node,
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

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super.super);

    if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR) || (params->iface_addr == NULL)) {
        ucs_error("ringk: ep_create needs the peer's iface address");
        return UCS_ERR_INVALID_PARAM;
    }
    if (iface->neps >= iface->super.super.config.max_num_eps) {
        ucs_error("ringk iface %p: cannot create more than UCX_RINGK_MAX_NUM_EPS=%zu endpoints",
                  iface, iface->super.super.config.max_num_eps);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    addr   = (const uct_ringk_iface_addr_t*)params->iface_addr;
    status = uct_ringk_peer_init(&self->peer, &self->super, addr->pid, addr->fd,
                                 addr->iface_id, "ringk");
    if (status != UCS_OK) {
        return status;
    }
    self->peer_id    = addr->iface_id;
    self->stage      = NULL;
    self->stage_pinned = 0;
    self->token      = ucs_generate_uuid((uintptr_t)self) | 1;
    self->need_cells = 1;
    self->dispatching = 0;
    self->last_check = ucs_get_time();

    status = uct_ringk_ep_attach(self, addr);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_ringk_ep_seg_check(self->seg, addr);
    if (status != UCS_OK) {
        goto err_unmap;
    }
    self->ctl         = uct_ringk_seg_ctl(self->seg);
    self->peer.closed = &self->ctl->closed;
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

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_ep_t)
{
    uct_ringk_iface_t *iface = ucs_derived_of(self->super.super.iface, uct_ringk_iface_t);
    uct_ringk_lane_shm_t *lane;

    uct_ringk_ep_pending_purge(&self->super.super, NULL, NULL);
    uct_ringk_peer_cleanup(&self->peer);
    uct_ringk_ep_xstage_close(self);
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

ucs_status_t uct_ringk_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_ringk_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);

    UCT_RINGK_EP_CHECK_PARAMS(flags, comp);
    uct_ringk_peer_check(&ep->peer);
    uct_ringk_iface_sweep(iface);
    return UCS_OK;
}
