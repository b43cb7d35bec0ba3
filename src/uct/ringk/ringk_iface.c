/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk interface: configuration table and checks, query, open and close. */
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_iface.h"
#include "ringk_md.h"
#include "ringk_ep.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/sys/stubs.h>
#include <ucs/type/class.h>

static ucs_config_field_t uct_ringk_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_ringk_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"RING_SIZE", "256",
     "Number of cells in each receive ring; a power of 2 between 2 and 65536.",
     ucs_offsetof(uct_ringk_iface_config_t, ring_size), UCS_CONFIG_TYPE_UINT},

    {"CELL_SIZE", "64",
     "Size of a ring cell in bytes, header included; a power of 2 between 64 and 4096.\n"
     "A message that does not fit in one cell spans consecutive cells.",
     ucs_offsetof(uct_ringk_iface_config_t, cell_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"LANES", "64",
     "Number of single-producer lanes in a receive segment (1 to 1024). Each connected sender\n"
     "gets a lane of its own while they last; later senders share one multi-producer lane.",
     ucs_offsetof(uct_ringk_iface_config_t, lanes), UCS_CONFIG_TYPE_UINT},

    {"SEG_SIZE", "8k",
     "Largest active message sent by copy (am_bcopy), in bytes, up to 1m.",
     ucs_offsetof(uct_ringk_iface_config_t, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"POLL_BATCH", "16",
     "Most messages taken from one lane in one progress call (1 to 1024), so that a busy\n"
     "sender cannot starve the others.",
     ucs_offsetof(uct_ringk_iface_config_t, poll_batch), UCS_CONFIG_TYPE_UINT},

    {NULL}
};

ucs_status_t uct_ringk_iface_config_check(const uct_ringk_iface_config_t *config)
{
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
    if ((config->poll_batch < 1) || (config->poll_batch > UCT_RINGK_POLL_BATCH_MAX)) {
        ucs_error("UCX_RINGK_POLL_BATCH %u is out of range 1..%u", config->poll_batch,
                  UCT_RINGK_POLL_BATCH_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

static ucs_status_t uct_ringk_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_iface_t);

    uct_base_iface_query(&iface->super, attr);
    /* Nothing is advertised until the data path implements it. */
    attr->cap.flags           = 0;
    attr->cap.event_flags     = 0;
    attr->iface_addr_len      = 0;
    attr->device_addr_len     = 0;
    attr->ep_addr_len         = 0;
    attr->max_conn_priv       = 0;
    attr->latency             = ucs_linear_func_make(0, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = 0;
    attr->overhead            = 0;
    attr->priority            = 0;
    return UCS_OK;
}

static int uct_ringk_iface_is_reachable(const uct_iface_h tl_iface,
                                        const uct_device_addr_t *dev_addr,
                                        const uct_iface_addr_t *iface_addr)
{
    return 0;
}

static uct_iface_ops_t uct_ringk_iface_ops;

static UCS_CLASS_INIT_FUNC(uct_ringk_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_ringk_iface_config_t *config = ucs_derived_of(tl_config,
                                                            uct_ringk_iface_config_t);
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
    self->config = *config;
    ucs_debug("ringk iface %p: ring_size %u cell_size %zu lanes %u seg_size %zu", self,
              config->ring_size, config->cell_size, config->lanes, config->seg_size);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_iface_t)
{
}

UCS_CLASS_DEFINE(uct_ringk_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_ringk_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_ringk_iface_t, uct_iface_t);

static ucs_status_t uct_ringk_query_tl_devices(uct_md_h md,
                                               uct_tl_device_resource_t **tl_devices_p,
                                               unsigned *num_tl_devices_p)
{
    return uct_single_device_resource(md, "memory", UCT_DEVICE_TYPE_SHM,
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
    .ep_put_short             = (uct_ep_put_short_func_t)ucs_empty_function_return_unsupported,
    .ep_put_bcopy             = (uct_ep_put_bcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_put_zcopy             = (uct_ep_put_zcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_get_short             = (uct_ep_get_short_func_t)ucs_empty_function_return_unsupported,
    .ep_get_bcopy             = (uct_ep_get_bcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_get_zcopy             = (uct_ep_get_zcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_am_short              = (uct_ep_am_short_func_t)ucs_empty_function_return_unsupported,
#ifdef HAVE_UCT_IFACE_OPS_T_EP_AM_SHORT_IOV
    .ep_am_short_iov          = (uct_ep_am_short_iov_func_t)ucs_empty_function_return_unsupported,
#endif
    .ep_am_bcopy              = (uct_ep_am_bcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_am_zcopy              = (uct_ep_am_zcopy_func_t)ucs_empty_function_return_unsupported,
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
    .ep_pending_add           = (uct_ep_pending_add_func_t)ucs_empty_function_return_unsupported,
    .ep_pending_purge         = (uct_ep_pending_purge_func_t)ucs_empty_function,
    .ep_flush                 = (uct_ep_flush_func_t)ucs_empty_function_return_unsupported,
    .ep_fence                 = (uct_ep_fence_func_t)ucs_empty_function_return_unsupported,
    .ep_check                 = (uct_ep_check_func_t)ucs_empty_function_return_unsupported,
    .ep_create                = (uct_ep_create_func_t)ucs_empty_function_return_unsupported,
    .ep_connect               = (uct_ep_connect_func_t)ucs_empty_function_return_unsupported,
    .ep_disconnect            = (uct_ep_disconnect_func_t)ucs_empty_function_return_unsupported,
    .cm_ep_conn_notify        = (uct_cm_ep_conn_notify_func_t)ucs_empty_function_return_unsupported,
    .ep_destroy               = (uct_ep_destroy_func_t)ucs_empty_function,
    .ep_get_address           = (uct_ep_get_address_func_t)ucs_empty_function_return_unsupported,
    .ep_connect_to_ep         = (uct_ep_connect_to_ep_func_t)ucs_empty_function_return_unsupported,
    .iface_accept             = (uct_iface_accept_func_t)ucs_empty_function_return_unsupported,
    .iface_reject             = (uct_iface_reject_func_t)ucs_empty_function_return_unsupported,
    .iface_flush              = uct_base_iface_flush,
    .iface_fence              = (uct_iface_fence_func_t)ucs_empty_function_return_unsupported,
    .iface_progress_enable    = (uct_iface_progress_enable_func_t)ucs_empty_function,
    .iface_progress_disable   = (uct_iface_progress_disable_func_t)ucs_empty_function,
    .iface_progress           = (uct_iface_progress_func_t)ucs_empty_function_return_zero,
    .iface_event_fd_get       = (uct_iface_event_fd_get_func_t)ucs_empty_function_return_unsupported,
    .iface_event_arm          = (uct_iface_event_arm_func_t)ucs_empty_function_return_unsupported,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_ringk_iface_t),
    .iface_query              = uct_ringk_iface_query,
    .iface_get_device_address = (uct_iface_get_device_address_func_t)ucs_empty_function_return_success,
    .iface_get_address        = (uct_iface_get_address_func_t)ucs_empty_function_return_success,
    .iface_is_reachable       = uct_ringk_iface_is_reachable
};

UCT_TL_DEFINE_ENTRY(&uct_ringk_component, ringk, uct_ringk_query_tl_devices, uct_ringk_iface_t,
                    "RINGK_", uct_ringk_iface_config_table, uct_ringk_iface_config_t);

UCT_SINGLE_TL_INIT(&uct_ringk_component, ringk, , , )
