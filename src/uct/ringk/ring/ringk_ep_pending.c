/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring device's endpoint, pending requests and flush: a send refused for room waits in
 * the iface's arbiter and runs again when the receiver frees cells. */
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
        !ep->peer.failed) {
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
            if (uct_ringk_peer_dead(&ep->peer)) {
                uct_ringk_peer_fail(&ep->peer);
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
    if (ep->peer.failed && !(flags & UCT_FLUSH_FLAG_CANCEL)) {
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
