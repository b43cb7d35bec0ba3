/* SPDX-License-Identifier: BSD-3-Clause */
/* A ringk iface opened by hand, as a UCT program opens one: the component, its md, an async
 * context, a worker and an iface on device "ring", with the iface's addresses. Used by the
 * GPU tests and the GPU benchmark. */
#ifndef RINGK_TEST_UCT_NODE_H
#define RINGK_TEST_UCT_NODE_H

#include <string.h>
#include <uct/api/uct.h>

typedef struct {
    uct_component_h      component;
    uct_md_h             md;
    ucs_async_context_t *async;
    uct_worker_h         worker;
    uct_iface_h          iface;
    uint8_t              addr[64], dev_addr[64];
} uct_node_t;

#define UCT_NODE_CALL(call) do { ucs_status_t s_ = (call); if (s_ != UCS_OK) { \
                                 *what_p = #call; return s_; } } while (0)

/* Returns UCS_OK, or the status of the call that failed with its text in *what_p. The
 * component must be registered (the program runs through contrib/ringk-run). */
static inline ucs_status_t uct_node_open(uct_node_t *n, const char **what_p)
{
    uct_iface_params_t params = {
        .field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE,
        .open_mode            = UCT_IFACE_OPEN_MODE_DEVICE,
        .mode.device.tl_name  = "ringk",
        .mode.device.dev_name = "ring"
    };
    uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
    uct_component_h *components;
    uct_iface_config_t *config;
    uct_md_config_t *md_config;
    unsigned ncomp, i;
    ucs_status_t status;

    memset(n, 0, sizeof(*n));
    UCT_NODE_CALL(uct_query_components(&components, &ncomp));
    for (i = 0; i < ncomp; i++) {
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, "ringk")) {
            n->component = components[i];
        }
    }
    uct_release_component_list(components);
    if (n->component == NULL) {
        *what_p = "finding component 'ringk' (run through contrib/ringk-run)";
        return UCS_ERR_NO_DEVICE;
    }
    UCT_NODE_CALL(uct_md_config_read(n->component, NULL, NULL, &md_config));
    status = uct_md_open(n->component, "ringk", md_config, &n->md);
    uct_config_release(md_config);
    UCT_NODE_CALL(status);
    UCT_NODE_CALL(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &n->async));
    UCT_NODE_CALL(uct_worker_create(n->async, UCS_THREAD_MODE_SINGLE, &n->worker));
    UCT_NODE_CALL(uct_md_iface_config_read(n->md, "ringk", NULL, NULL, &config));
    status = uct_iface_open(n->md, n->worker, &params, config, &n->iface);
    uct_config_release(config);
    UCT_NODE_CALL(status);
    UCT_NODE_CALL(uct_iface_get_address(n->iface, (uct_iface_addr_t*)n->addr));
    UCT_NODE_CALL(uct_iface_get_device_address(n->iface, (uct_device_addr_t*)n->dev_addr));
    return UCS_OK;
}

static inline void uct_node_close(uct_node_t *n)
{
    uct_iface_close(n->iface);
    uct_worker_destroy(n->worker);
    ucs_async_context_destroy(n->async);
    uct_md_close(n->md);
}

#endif
