/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk memory domain, the component, and its registration guarded by the UCX version check. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, process_vm_readv/writev */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_md.h"
#include "ringk_iface.h"

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

    {NULL}
};

static ucs_status_t uct_ringk_md_query(uct_md_h tl_md, uct_md_attr_t *attr)
{
    uct_ringk_md_t *md = ucs_derived_of(tl_md, uct_ringk_md_t);

    /* With CUDA memory, zcopy asks for a memh: UCP then offers zcopy for memory types the md
     * registers, where without it only for those the md can access with the CPU (host); the
     * memh itself is not read (CUDA buffers are told by pointer). */
    attr->cap.flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY |
                                 (md->cuda ? UCT_MD_FLAG_NEED_MEMH : 0);
    /* CUDA memory is registered (exported for CUDA IPC) and moved by put/get zcopy along the
     * endpoint's GPU path; it is not CPU-accessible, so short/bcopy stay host-only. */
    attr->cap.reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST) |
                                 (md->cuda ? UCS_BIT(UCS_MEMORY_TYPE_CUDA) : 0);
    attr->cap.alloc_mem_types  = 0;
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    /* UCP asks the mds that detect a memory type (through mem_query) when its memory-type
     * cache is off (UCX_MEMTYPE_CACHE=n); with the cache on it takes an address the cache does
     * not know for host memory, and learns CUDA allocations only from registration here. A UCX
     * built without CUDA has no other md that can tell. */
    attr->cap.detect_mem_types = md->cuda ? UCS_BIT(UCS_MEMORY_TYPE_CUDA) : 0;
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = ULONG_MAX;
    attr->rkey_packed_size     = sizeof(uct_ringk_packed_rkey_t);
    /* Registration only records the range: RMA is done by cross-memory attach. */
    attr->reg_cost             = ucs_linear_func_make(50e-9, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t uct_ringk_detect_memory_type(uct_md_h tl_md, const void *address,
                                                 size_t length, ucs_memory_type_t *mem_type_p)
{
    uct_ringk_md_t *md = ucs_derived_of(tl_md, uct_ringk_md_t);

    *mem_type_p = (md->cuda && ringk_cuda_ptr_is_device(address, NULL, 0)) ?
                  UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    return UCS_OK;
}

/* The system device of a CUDA device by its bus id ("0000:07:00.0"); unknown if UCX's
 * topology does not list it. */
static ucs_sys_device_t uct_ringk_sys_dev(const char *busid)
{
    ucs_sys_device_t sys_dev = UCS_SYS_DEVICE_ID_UNKNOWN;
    unsigned domain, bus, slot, function;
    ucs_sys_bus_id_t id;

    if (sscanf(busid, "%x:%x:%x.%x", &domain, &bus, &slot, &function) == 4) {
        id = (ucs_sys_bus_id_t){.domain = (uint16_t)domain, .bus = (uint8_t)bus,
                                .slot = (uint8_t)slot, .function = (uint8_t)function};
        if (ucs_topo_find_device_by_bus_id(&id, &sys_dev) != UCS_OK) {
            sys_dev = UCS_SYS_DEVICE_ID_UNKNOWN;
        }
    }
    return sys_dev;
}

/* CUDA memory: its type, device, and the allocation it lies in, which also goes to UCX's
 * memory-type cache (UCM of a UCX built without CUDA never sees cudaMalloc, so the cache
 * learns of device memory only from here and from registration). Host memory is not this
 * md's to describe: UCS_ERR_INVALID_ADDR, and UCP takes it as host memory. */
static ucs_status_t uct_ringk_mem_query(uct_md_h tl_md, const void *address, size_t length,
                                        uct_md_mem_attr_t *mem_attr)
{
    uct_ringk_md_t *md = ucs_derived_of(tl_md, uct_ringk_md_t);
    ucs_sys_device_t sys_dev;
    uint64_t base, size;
    char busid[16] = "";

    if (!md->cuda || !ringk_cuda_ptr_range(address, &base, &size, busid, sizeof(busid))) {
        return UCS_ERR_INVALID_ADDR;
    }
    sys_dev = uct_ringk_sys_dev(busid);
    ucs_memtype_cache_update((void*)(uintptr_t)base, size, UCS_MEMORY_TYPE_CUDA, sys_dev);
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_MEM_TYPE) {
        mem_attr->mem_type = UCS_MEMORY_TYPE_CUDA;
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_SYS_DEV) {
        mem_attr->sys_dev = sys_dev;
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS) {
        mem_attr->base_address = (void*)(uintptr_t)base;
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH) {
        mem_attr->alloc_length = size;
    }
    return UCS_OK;
}

static ucs_status_t uct_ringk_mem_reg(uct_md_h tl_md, void *address, size_t length,
                                      unsigned flags, uct_mem_h *memh_p)
{
    uct_ringk_md_t *md     = ucs_derived_of(tl_md, uct_ringk_md_t);
    uct_ringk_memh_t *memh = ucs_calloc(1, sizeof(*memh), "ringk_memh");
    char busid[16], why[256] = "past its allocation";

    if (memh == NULL) {
        ucs_error("ringk: cannot allocate a memory handle");
        return UCS_ERR_NO_MEMORY;
    }
    memh->address  = (uintptr_t)address;
    memh->length   = length;
    memh->mem_type = UCS_MEMORY_TYPE_HOST;
    if (md->cuda && ringk_cuda_ptr_is_device(address, busid, sizeof(busid))) {
        memh->mem_type = UCS_MEMORY_TYPE_CUDA;
        memh->gpu      = ringk_busid_pack(busid);
        if ((ringk_cuda_ipc_export(address, memh->ipc, &memh->alloc_base, &memh->alloc_size,
                                   why, sizeof(why)) != 0) ||
            ((uintptr_t)address + length > memh->alloc_base + memh->alloc_size)) {
            /* Still registered, so that UCP's registration on other mds stands; peers get a
             * key they cannot map (unreachable), and local copies still work. */
            if (!(flags & UCT_MD_MEM_FLAG_HIDE_ERRORS)) {
                ucs_warn("ringk: CUDA memory %p+%zu cannot be exported for CUDA IPC: %s",
                         address, length, why);
            }
            memh->alloc_base = (uintptr_t)address;
            memh->alloc_size = length;
        } else {
            memh->ipc_valid = 1;
        }
        /* from now on UCP's memory-type cache tells sends from this allocation as CUDA */
        ucs_memtype_cache_update((void*)(uintptr_t)memh->alloc_base, memh->alloc_size,
                                 UCS_MEMORY_TYPE_CUDA, uct_ringk_sys_dev(busid));
    }
    *memh_p = memh;
    return UCS_OK;
}

static ucs_status_t uct_ringk_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params)
{
    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);
    ucs_free(params->memh);
    return UCS_OK;
}

static ucs_status_t uct_ringk_mkey_pack(uct_md_h md, uct_mem_h tl_memh,
                                        const uct_md_mkey_pack_params_t *params,
                                        void *rkey_buffer)
{
    const uct_ringk_memh_t *memh = tl_memh;
    uct_ringk_packed_rkey_t packed = {
        .magic      = UCT_RINGK_RKEY_MAGIC,
        .pid        = getpid(),
        .address    = memh->address,
        .length     = memh->length,
        .mem_type   = memh->mem_type,
        .gpu        = memh->gpu,
        .alloc_base = memh->alloc_base,
        .alloc_size = memh->alloc_size,
        .ipc_valid  = memh->ipc_valid
    };

    memcpy(packed.ipc, memh->ipc, sizeof(packed.ipc));
    memcpy(rkey_buffer, &packed, sizeof(packed));
    return UCS_OK;
}

static ucs_status_t uct_ringk_rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                                          uct_rkey_t *rkey_p, void **handle_p)
{
    uct_ringk_packed_rkey_t packed;
    uct_ringk_shm_rkey_t *shm_key;
    uct_ringk_rkey_t *rkey;
    ucs_status_t status;
    uint32_t magic;
    char why[256];

    /* From a peer: checked before use. The magic tells which md packed it (and so how long the
     * buffer is). */
    memcpy(&magic, rkey_buffer, sizeof(magic));
    if (magic == UCT_RINGK_SHM_RKEY_MAGIC) {
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
        *rkey_p   = (uintptr_t)shm_key;
        *handle_p = NULL;
        return UCS_OK;
    }
    memcpy(&packed, rkey_buffer, sizeof(packed));
    if ((packed.magic != UCT_RINGK_RKEY_MAGIC) || (packed.pid == 0) ||
        (packed.pid > INT32_MAX) || (packed.address + packed.length < packed.address) ||
        ((packed.mem_type != UCS_MEMORY_TYPE_HOST) &&
         (packed.mem_type != UCS_MEMORY_TYPE_CUDA))) {
        ucs_error("ringk: invalid remote key (magic 0x%x pid %u range 0x%" PRIx64 "+%" PRIu64
                  " memory type %u)", packed.magic, packed.pid, packed.address, packed.length,
                  packed.mem_type);
        return UCS_ERR_INVALID_PARAM;
    }
    /* A CUDA region must lie inside the allocation the IPC handle maps. */
    if ((packed.mem_type == UCS_MEMORY_TYPE_CUDA) &&
        ((packed.gpu == 0) || (packed.alloc_base + packed.alloc_size < packed.alloc_base) ||
         (packed.address < packed.alloc_base) ||
         (packed.address + packed.length > packed.alloc_base + packed.alloc_size))) {
        ucs_error("ringk: invalid CUDA remote key: 0x%" PRIx64 "+%" PRIu64 " is not inside its "
                  "allocation 0x%" PRIx64 "+%" PRIu64, packed.address, packed.length,
                  packed.alloc_base, packed.alloc_size);
        return UCS_ERR_INVALID_PARAM;
    }
    rkey = ucs_calloc(1, sizeof(*rkey), "ringk_rkey");
    if (rkey == NULL) {
        ucs_error("ringk: cannot allocate a remote key");
        return UCS_ERR_NO_MEMORY;
    }
    rkey->kind       = UCT_RINGK_KEY_REG;
    rkey->pid        = packed.pid;
    rkey->address    = packed.address;
    rkey->length     = packed.length;
    rkey->mem_type   = packed.mem_type;
    rkey->gpu        = packed.gpu;
    rkey->alloc_base = packed.alloc_base;
    if (packed.mem_type == UCS_MEMORY_TYPE_CUDA) {
        if (packed.pid == (uint32_t)getpid()) {
            /* a process cannot open its own IPC handles, and needs not */
            rkey->own    = 1;
            rkey->mapped = (void*)(uintptr_t)packed.alloc_base;
        } else if (!packed.ipc_valid) {
            snprintf(why, sizeof(why), "it could not be exported for CUDA IPC");
        } else {
            ringk_cuda_ipc_open(packed.ipc, packed.alloc_size, &rkey->mapped, why, sizeof(why));
        }
        if (rkey->mapped == NULL) {
            /* an expected outcome for UCP, which then takes another transport */
            ucs_debug("ringk: cannot map the CUDA memory of pid %u (0x%" PRIx64 "+%" PRIu64
                      "): %s", packed.pid, packed.address, packed.length, why);
            ucs_free(rkey);
            return UCS_ERR_UNREACHABLE;
        }
    }
    *rkey_p       = (uintptr_t)rkey;
    *handle_p     = NULL;
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
    if ((key->mapped != NULL) && !key->own) {
        ringk_cuda_ipc_close(key->mapped);
    }
    ucs_free(key);
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
    .mem_reg                = uct_ringk_mem_reg,
    .mem_dereg              = uct_ringk_mem_dereg,
    .mem_query              = uct_ringk_mem_query,
    .mkey_pack              = uct_ringk_mkey_pack,
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t)ucs_empty_function_return_zero_int,
    .detect_memory_type     = uct_ringk_detect_memory_type
};

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
    md->hugetlb = md_config->hugetlb;
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
