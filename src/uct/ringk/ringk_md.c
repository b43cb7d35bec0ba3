/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk memory domain, the component, and its registration guarded by the UCX version check. */
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_md.h"
#include "ringk_iface.h"

#include <core/ringk_ucxver.h>
#include <ucs/debug/log.h>
#include <ucs/sys/compiler.h>
#include <ucs/sys/stubs.h>

static ucs_config_field_t uct_ringk_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_ringk_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {NULL}
};

static ucs_status_t uct_ringk_md_query(uct_md_h md, uct_md_attr_t *attr)
{
    attr->cap.flags            = 0;
    attr->cap.reg_mem_types    = 0;
    attr->cap.alloc_mem_types  = 0;
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.detect_mem_types = 0;
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = 0;
    attr->rkey_packed_size     = 0;
    attr->reg_cost             = ucs_linear_func_make(0, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static void uct_ringk_md_close(uct_md_h tl_md)
{
    ucs_free(ucs_derived_of(tl_md, uct_ringk_md_t));
}

static uct_md_ops_t uct_ringk_md_ops = {
    .close                  = uct_ringk_md_close,
    .query                  = uct_ringk_md_query,
    .mem_alloc              = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free               = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise             = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg                = (uct_md_mem_reg_func_t)ucs_empty_function_return_unsupported,
    .mem_dereg              = (uct_md_mem_dereg_func_t)ucs_empty_function_return_unsupported,
    .mem_query              = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack              = (uct_md_mkey_pack_func_t)ucs_empty_function_return_unsupported,
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t)ucs_empty_function_return_zero_int,
    .detect_memory_type     = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported
};

static ucs_status_t uct_ringk_md_open(uct_component_t *component, const char *md_name,
                                      const uct_md_config_t *config, uct_md_h *md_p)
{
    uct_ringk_md_t *md;

    md = ucs_calloc(1, sizeof(*md), "uct_ringk_md");
    if (md == NULL) {
        ucs_error("failed to allocate the ringk memory domain");
        return UCS_ERR_NO_MEMORY;
    }
    md->super.ops       = &uct_ringk_md_ops;
    md->super.component = &uct_ringk_component;
    *md_p               = &md->super;
    return UCS_OK;
}

uct_component_t uct_ringk_component = {
    .query_md_resources = uct_md_query_single_md_resource,
    .md_open            = uct_ringk_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = (uct_component_rkey_unpack_func_t)ucs_empty_function_return_unsupported,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)ucs_empty_function_return_success,
    .name               = UCT_RINGK_NAME,
    .md_config          = {
        .name           = "ringk memory domain",
        .prefix         = "RINGK_",
        .table          = uct_ringk_md_config_table,
        .size           = sizeof(uct_ringk_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_ringk_component),
    .flags              = 0,
#ifdef HAVE_UCT_COMPONENT_T_MD_VFS_INIT
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
#endif
};

static int uct_ringk_registered;

/* Registers the component and the transport, but only into the UCX release the plugin was built
 * against: the plugin uses UCX's internal structs, so any other release could crash the program.
 * Runs when the library is loaded (preloaded or dlopen-ed from UCX_PLUGIN_PATH). */
UCS_F_CTOR static void uct_ringk_load(void)
{
    const ringk_ucxver_t built = {RINGK_UCX_BUILD_MAJOR, RINGK_UCX_BUILD_MINOR,
                                  RINGK_UCX_BUILD_PATCH};
    ringk_ucxver_t running;
    char msg[256];

    if (ringk_ucxver_running(&running, msg, sizeof(msg)) != 0) {
        ucs_error("ringk: cannot tell which UCX is running (%s); not registering the ringk "
                  "transport (built against UCX %s)", msg, RINGK_UCX_BUILD_VERSION);
        return;
    }
    if (ringk_ucxver_check(&built, &running, msg, sizeof(msg)) != 0) {
        ucs_error("%s", msg);
        return;
    }
    uct_ringk_init();
    uct_ringk_registered = 1;
    ucs_debug("ringk: registered into UCX %u.%u.%u", running.major, running.minor,
              running.patch);
}

UCS_F_DTOR static void uct_ringk_unload(void)
{
    if (uct_ringk_registered) {
        uct_ringk_cleanup();
    }
}
