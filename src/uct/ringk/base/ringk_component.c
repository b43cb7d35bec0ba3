/* SPDX-License-Identifier: BSD-3-Clause */
/* The ringk component: its two memory domains (which md_open opens), the remote keys of both,
 * the one transport "ringk" whose iface is the ring device on one md and the mapped device on the
 * other, and its registration, guarded by the UCX version check. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, process_vm_readv/writev */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_md.h"

#include <core/ringk_node.h>
#include <core/ringk_topo.h>
#include <core/ringk_ucxver.h>
#include <ucs/debug/log.h>
#include <ucs/memory/memtype_cache.h>
#include <ucs/sys/topo/base/topo.h>
#include <ucs/sys/compiler.h>
#include <ucs/sys/stubs.h>
#include <ucs/sys/string.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UCT_RINGK_PTRACE_SCOPE "/proc/sys/kernel/yama/ptrace_scope"
/* UCX 1.13's default UCX_ALLOC_PRIO (ucp_context.c) with ringk's md after posix */
#define UCT_RINGK_ALLOC_PRIO   "md:sysv,md:posix,md:ringk,huge,thp,md:*,mmap,heap"

static ucs_config_field_t uct_ringk_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_ringk_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"HUGETLB_MODE", "try",
     "Huge pages for the memory the ringk_shm md allocates (memory UCP or a UCT program\n"
     "allocates through it, which peers map and reach with loads, stores and atomics):\n"
     " y   - huge pages only; an allocation fails when there are none.\n"
     " n   - regular pages.\n"
     " try - huge pages when the system has free ones, else regular pages.",
     ucs_offsetof(uct_ringk_md_config_t, hugetlb), UCS_CONFIG_TYPE_TERNARY},

    {"LEGACY_DEVICE_NAMES", "n",
     "Name the transport's devices as ringk 0.4 and before did, for programs and settings\n"
     "that name them (ucx_perftest -d, UCX_SHM_DEVICES, uct_iface_open): \"memory\" for the\n"
     "\"ring\" device (active messages, RMA by cross-memory attach or CUDA IPC) and \"shm\"\n"
     "for the \"mapped\" device (RMA and atomics on memory the ringk_shm md allocated).\n"
     "Kept until ringk 0.6.",
     ucs_offsetof(uct_ringk_md_config_t, legacy_names), UCS_CONFIG_TYPE_BOOL},

    {NULL}
};

static ucs_status_t uct_ringk_rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                                          UCT_RINGK_RKEY_UNPACK_PARAMS_ARG uct_rkey_t *rkey_p,
                                          void **handle_p)
{
    uct_ringk_shm_rkey_t *shm_key;
    ucs_status_t status;
    uint32_t magic;

    /* From a peer: checked before use. The magic tells which md packed it (and so how long the
     * buffer is). */
    *handle_p = NULL;
    memcpy(&magic, rkey_buffer, sizeof(magic));
    if (magic != UCT_RINGK_SHM_RKEY_MAGIC) {
        return uct_ringk_reg_rkey_unpack(rkey_buffer, rkey_p);
    }
    shm_key = ucs_calloc(1, sizeof(*shm_key), "ringk_shm_rkey");
    if (shm_key == NULL) {
        ucs_error("ringk: cannot allocate a remote key");
        return UCS_ERR_NO_MEMORY;
    }
    status = uct_ringk_shm_rkey_unpack(rkey_buffer, shm_key);
    if (status != UCS_OK) {
        ucs_free(shm_key);
        return status;
    }
    *rkey_p = (uintptr_t)shm_key;
    return UCS_OK;
}

static ucs_status_t uct_ringk_rkey_release(uct_component_t *component, uct_rkey_t rkey,
                                           void *handle)
{
    uct_ringk_rkey_t *key = (uct_ringk_rkey_t*)rkey;

    if (key == NULL) { /* never unpacked: UCX's perftest releases such keys on its error path */
        return UCS_OK;
    }
    if (key->kind == UCT_RINGK_KEY_SHM) {
        uct_ringk_shm_rkey_release((uct_ringk_shm_rkey_t*)key);
        ucs_free(key);
        return UCS_OK;
    }
    uct_ringk_reg_rkey_release(key);
    return UCS_OK;
}

/* Where remote_addr of a ringk_shm key is mapped here. Keys of registered memory have no such
 * pointer (their md does not advertise UCT_MD_FLAG_RKEY_PTR). */
static ucs_status_t uct_ringk_rkey_ptr(uct_component_t *component, uct_rkey_t rkey, void *handle,
                                       uint64_t remote_addr, void **local_addr_p)
{
    const uct_ringk_shm_rkey_t *key = (const uct_ringk_shm_rkey_t*)rkey;

    if (key->kind != UCT_RINGK_KEY_SHM) {
        return UCS_ERR_UNSUPPORTED;
    }
    if ((remote_addr < key->address) || (remote_addr - key->address >= key->length)) {
        return UCS_ERR_INVALID_ADDR;
    }
    *local_addr_p = key->mapped + (remote_addr - key->address);
    return UCS_OK;
}

/* Two memory domains: ringk (registers any host or CUDA memory; RMA by cross-memory attach or
 * CUDA IPC) and ringk_shm (allocates memory peers map; RMA and atomics by loads and stores). */
static ucs_status_t uct_ringk_query_md_resources(uct_component_t *component,
                                                 uct_md_resource_desc_t **resources_p,
                                                 unsigned *num_resources_p)
{
    uct_md_resource_desc_t *resources = ucs_calloc(2, sizeof(*resources), "ringk_md_resources");

    if (resources == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_strncpy_zero(resources[0].md_name, UCT_RINGK_NAME, sizeof(resources[0].md_name));
    ucs_strncpy_zero(resources[1].md_name, UCT_RINGK_SHM_MD_NAME, sizeof(resources[1].md_name));
    *resources_p     = resources;
    *num_resources_p = 2;
    return UCS_OK;
}

void uct_ringk_md_close(uct_md_h tl_md)
{
    ucs_free(ucs_derived_of(tl_md, uct_ringk_md_t));
}

static ucs_status_t uct_ringk_md_open(uct_component_t *component, const char *md_name,
                                      const uct_md_config_t *config, uct_md_h *md_p)
{
    const uct_ringk_md_config_t *md_config = ucs_derived_of(config, uct_ringk_md_config_t);
    uct_ringk_md_t *md;
    char why[256] = "";

    if (strcmp(md_name, UCT_RINGK_NAME) && strcmp(md_name, UCT_RINGK_SHM_MD_NAME)) {
        ucs_error("ringk: no memory domain '%s' (there are '%s' and '%s')", md_name,
                  UCT_RINGK_NAME, UCT_RINGK_SHM_MD_NAME);
        return UCS_ERR_NO_DEVICE;
    }
    md = ucs_calloc(1, sizeof(*md), "uct_ringk_md");
    if (md == NULL) {
        ucs_error("failed to allocate the ringk memory domain");
        return UCS_ERR_NO_MEMORY;
    }
    md->hugetlb      = md_config->hugetlb;
    md->legacy_names = md_config->legacy_names;
    /* peers open this process's segments and allocations through /proc/<pid>/fd and attach to
     * its memory */
    if (ringk_node_ptrace_allow(UCT_RINGK_PTRACE_SCOPE, why, sizeof(why))) {
        ucs_debug("%s md %p: %s", md_name, md, why);
    } else {
        ucs_warn("ringk: %s; other processes cannot reach this one over ringk", why);
    }
    if (!strcmp(md_name, UCT_RINGK_SHM_MD_NAME)) {
        md->shm             = 1;
        md->super.ops       = &uct_ringk_shm_md_ops;
        md->super.component = &uct_ringk_component;
        *md_p               = &md->super;
        return UCS_OK;
    }
    md->cuda            = ringk_cuda_usable(why, sizeof(why));
    ucs_debug("ringk md %p: CUDA memory %s (%s)", md, md->cuda ? "registered" : "not handled",
              why);
    md->super.ops       = &uct_ringk_md_ops;
    md->super.component = &uct_ringk_component;
    *md_p               = &md->super;
    return UCS_OK;
}

uct_component_t uct_ringk_component = {
    .query_md_resources = uct_ringk_query_md_resources,
    .md_open            = uct_ringk_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_ringk_rkey_unpack,
    .rkey_ptr           = uct_ringk_rkey_ptr,
    .rkey_release       = uct_ringk_rkey_release,
#ifdef HAVE_UCT_COMPONENT_T_RKEY_COMPARE
    .rkey_compare       = uct_base_rkey_compare,
#endif
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
    /* UCP allocates memory (ucp_mem_map with UCP_MEM_MAP_ALLOCATE: MPI_Win_allocate, perftest
     * buffers) by the methods of UCX_ALLOC_PRIO in turn. UCX 1.13's default names sysv and
     * posix, then anonymous huge pages, and other mds only after them, so an allocation of 2 MiB
     * or more would be anonymous memory that peers reach only by cross-memory attach. Unless
     * the user chose an order, ringk's md comes right after posix (it allocates only when its
     * transport is selected). Runs while the plugin loads, before UCP reads its configuration
     * and before the program starts threads. */
    if (getenv("UCX_ALLOC_PRIO") == NULL) {
        setenv("UCX_ALLOC_PRIO", UCT_RINGK_ALLOC_PRIO, 0);
        ucs_debug("ringk: UCX_ALLOC_PRIO=%s", UCT_RINGK_ALLOC_PRIO);
    }
    ucs_debug("ringk: registered into UCX %u.%u.%u", running.major, running.minor,
              running.patch);
}

UCS_F_DTOR static void uct_ringk_unload(void)
{
    if (uct_ringk_registered) {
        uct_ringk_cleanup();
    }
}

static ucs_status_t uct_ringk_query_tl_devices(uct_md_h md,
                                               uct_tl_device_resource_t **tl_devices_p,
                                               unsigned *num_tl_devices_p)
{
    const int old = ucs_derived_of(md, uct_ringk_md_t)->legacy_names;
    const char *name;

    /* "ring" on the ringk md: active messages, RMA by cross-memory attach or CUDA IPC;
     * "mapped" on the ringk_shm md: RMA and atomics on memory that md allocated */
    if (uct_ringk_md_is_shm(md)) {
        name = old ? UCT_RINGK_SHM_DEV_NAME_OLD : UCT_RINGK_SHM_DEV_NAME;
    } else {
        name = old ? UCT_RINGK_RING_DEV_NAME_OLD : UCT_RINGK_RING_DEV_NAME;
    }
    return uct_single_device_resource(md, name, UCT_DEVICE_TYPE_SHM, UCS_SYS_DEVICE_ID_UNKNOWN,
                                      tl_devices_p, num_tl_devices_p);
}

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
    return uct_ringk_ring_iface_open(md, worker, params, config, iface_p);
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
