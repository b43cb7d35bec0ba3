/* SPDX-License-Identifier: BSD-3-Clause */
/* What the two devices of the ringk transport share: device addresses, the base iface class,
 * the operations both answer alike, and peer liveness (ringk_base.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_base.h"

#include <ucs/arch/cpu.h>
#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ---- device addresses ---------------------------------------------------------------------- */

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

/* ---- the base iface ------------------------------------------------------------------------ */

static const char *uct_ringk_dev_name(uint8_t kind)
{
    return (kind == UCT_RINGK_DEV_SHM) ? "ringk_shm" : UCT_RINGK_NAME;
}

UCS_CLASS_INIT_FUNC(uct_ringk_base_iface_t, uct_iface_ops_t *ops,
                    uct_iface_internal_ops_t *internal_ops, uct_md_h md, uct_worker_h worker,
                    const uct_iface_params_t *params, const uct_iface_config_t *tl_config,
                    uint8_t kind)
{
    ringk_node_id_t node;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, ops, internal_ops, md, worker,
                              params, tl_config UCS_STATS_ARG(
                                  (params->field_mask & UCT_IFACE_PARAM_FIELD_STATS_ROOT) ?
                                  params->stats_root : NULL)
                              UCS_STATS_ARG(uct_ringk_dev_name(kind)));
    ringk_node_id_get(&node);
    self->dev_addr.node   = node;
    self->dev_addr.kind   = kind;
    self->nerr_scheduled  = 0; /* UCS classes are not zeroed */
    return uct_ringk_iface_config_check(ucs_derived_of(tl_config, uct_ringk_iface_config_t));
}

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_base_iface_t)
{
}

UCS_CLASS_DEFINE(uct_ringk_base_iface_t, uct_base_iface_t);

void uct_ringk_base_iface_query(uct_ringk_base_iface_t *iface, uct_iface_attr_t *attr,
                                size_t iface_addr_len)
{
    uct_base_iface_query(&iface->super, attr);
    /* RMA on either device is one copy (cross-memory attach, or loads and stores on mapped
     * memory) of any size, from and to any number of iovecs; every operation is complete when
     * its call returns, so a send completion never has to be waited for */
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_PUT_SHORT |
                            UCT_IFACE_FLAG_PUT_BCOPY | UCT_IFACE_FLAG_PUT_ZCOPY |
                            UCT_IFACE_FLAG_GET_BCOPY | UCT_IFACE_FLAG_GET_ZCOPY |
                            UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                            UCT_IFACE_FLAG_EP_CHECK | UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP;

    attr->cap.put.max_short       = UINT_MAX;
    attr->cap.put.max_zcopy       = SIZE_MAX;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = IOV_MAX;
    attr->cap.get.max_short       = 0;
    attr->cap.get.max_zcopy       = SIZE_MAX;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = IOV_MAX;

    attr->iface_addr_len      = iface_addr_len;
    attr->device_addr_len     = sizeof(uct_ringk_dev_addr_t);
    attr->ep_addr_len         = 0;
    attr->max_conn_priv       = 0;
    attr->bandwidth.dedicated = 0;
    attr->priority            = 0;
}

ucs_status_t uct_ringk_base_iface_get_device_address(uct_iface_h tl_iface,
                                                     uct_device_addr_t *addr)
{
    uct_ringk_base_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_base_iface_t);

    memcpy(addr, &iface->dev_addr, sizeof(iface->dev_addr));
    return UCS_OK;
}

int uct_ringk_base_iface_is_reachable(const uct_iface_h tl_iface,
                                      const uct_device_addr_t *dev_addr,
                                      const uct_iface_addr_t *iface_addr)
{
    uct_ringk_base_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_base_iface_t);
    char reason[128];

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        return 0;
    }
    if (!uct_ringk_dev_addr_reachable(&iface->dev_addr, dev_addr, iface->dev_addr.kind, reason,
                                      sizeof(reason))) {
        ucs_debug("%s iface %p: peer not reachable: %s",
                  uct_ringk_dev_name(iface->dev_addr.kind), iface, reason);
        return 0;
    }
    return 1;
}

#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_IS_REACHABLE_V2
int uct_ringk_base_iface_is_reachable_v2(const uct_iface_h tl_iface,
                                         const uct_iface_is_reachable_params_t *params)
{
    const uct_device_addr_t *dev_addr =
            (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR) ?
            params->device_addr : NULL;
    const uct_iface_addr_t *iface_addr =
            (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR) ?
            params->iface_addr : NULL;

    return uct_ringk_base_iface_is_reachable(tl_iface, dev_addr, iface_addr) &&
           uct_iface_scope_is_reachable(tl_iface, params);
}
#endif

#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_IS_CONNECTED
int uct_ringk_peer_is_connected(const uct_ringk_peer_t *peer,
                                const uct_ep_is_connected_params_t *params)
{
    uint64_t id;

    if (!uct_base_ep_is_connected(&peer->ep->super, params) ||
        !(params->field_mask & UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR) ||
        (params->iface_addr == NULL)) {
        return 0;
    }
    memcpy(&id, params->iface_addr, sizeof(id)); /* both devices' addresses start with it */
    return id == peer->iface_id;
}
#endif

/* Operations complete when posted, in program order: a fence orders only this thread's loads
 * and stores. */
ucs_status_t uct_ringk_base_iface_fence(uct_iface_h tl_iface, unsigned flags)
{
    ucs_memory_cpu_fence();
    UCT_TL_IFACE_STAT_FENCE(ucs_derived_of(tl_iface, uct_base_iface_t));
    return UCS_OK;
}

ucs_status_t uct_ringk_base_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    ucs_memory_cpu_fence();
    UCT_TL_EP_STAT_FENCE(ucs_derived_of(tl_ep, uct_base_ep_t));
    return UCS_OK;
}

/* No tag-matching offload: UCP does tag matching in software over active messages. */
ucs_status_ptr_t uct_ringk_base_ep_tag_rndv_zcopy(uct_ep_h ep, uct_tag_t tag,
                                                  const void *header, unsigned header_length,
                                                  const uct_iov_t *iov, size_t iovcnt,
                                                  unsigned flags, uct_completion_t *comp)
{
    return UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
}

/* ---- peer liveness ------------------------------------------------------------------------- */

ucs_status_t uct_ringk_peer_init(uct_ringk_peer_t *peer, uct_base_ep_t *ep, uint32_t pid,
                                 int32_t fd, uint64_t iface_id, const char *tl)
{
    peer->ep            = ep;
    peer->iface_id      = iface_id;
    peer->closed        = NULL;
    peer->pid           = pid;
    peer->failed        = 0;
    peer->err_scheduled = 0;
    if ((pid == 0) || (pid > INT32_MAX) || (fd < 0)) {
        ucs_error("%s: invalid peer address: pid %u fd %d", tl, pid, fd);
        return UCS_ERR_INVALID_ADDR;
    }
    peer->start_time = ucs_sys_get_proc_create_time(pid);
    if (peer->start_time == 0) {
        ucs_error("%s: peer pid %u does not exist", tl, pid);
        return UCS_ERR_UNREACHABLE;
    }
    return UCS_OK;
}

int uct_ringk_peer_dead(const uct_ringk_peer_t *peer)
{
    /* C3: as in uct_ringk_peer_closed(). */
    if (__atomic_load_n(peer->closed, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    /* A reused pid has another start time. */
    return ucs_sys_get_proc_create_time(peer->pid) != peer->start_time;
}

static uct_ringk_base_iface_t *uct_ringk_peer_iface(const uct_ringk_peer_t *peer)
{
    return ucs_derived_of(peer->ep->super.iface, uct_ringk_base_iface_t);
}

static unsigned uct_ringk_peer_err_progress(void *arg)
{
    uct_ringk_peer_t *peer = arg;

    peer->err_scheduled = 0;
    uct_ringk_peer_iface(peer)->nerr_scheduled--;
    uct_iface_handle_ep_err(peer->ep->super.iface, &peer->ep->super,
                            UCT_RINGK_EP_FAILED_STATUS);
    return 1;
}

static int uct_ringk_peer_err_cb_match(const ucs_callbackq_elem_t *elem, void *arg)
{
    return (elem->cb == uct_ringk_peer_err_progress) && (elem->arg == arg);
}

void uct_ringk_peer_fail(uct_ringk_peer_t *peer)
{
    uct_ringk_base_iface_t *iface = uct_ringk_peer_iface(peer);

    if (peer->failed) {
        return;
    }
    peer->failed = 1;
    ucs_debug("%s ep %p: peer pid %u is gone", uct_ringk_dev_name(iface->dev_addr.kind),
              peer->ep, peer->pid);
    peer->err_scheduled = 1;
    iface->nerr_scheduled++;
    uct_ringk_oneshot_add(&iface->super.worker->super.progress_q, uct_ringk_peer_err_progress,
                          peer);
}

void uct_ringk_peer_check(uct_ringk_peer_t *peer)
{
    if (!peer->failed && uct_ringk_peer_dead(peer)) {
        uct_ringk_peer_fail(peer);
    }
}

void uct_ringk_peer_cleanup(uct_ringk_peer_t *peer)
{
    uct_ringk_base_iface_t *iface = uct_ringk_peer_iface(peer);

    if (peer->err_scheduled) {
        uct_ringk_oneshot_remove(&iface->super.worker->super.progress_q,
                                 uct_ringk_peer_err_cb_match, peer);
        peer->err_scheduled = 0;
        iface->nerr_scheduled--;
    }
}
