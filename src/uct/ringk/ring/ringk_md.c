/* SPDX-License-Identifier: BSD-3-Clause */
/* The ringk md of the ring device: registers host memory (peers reach it by cross-memory
 * attach, no pinning) and CUDA memory (exported for CUDA IPC), packs and unpacks its keys. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include <uct/ringk/base/ringk_md.h>

#include <core/ringk_cuda.h>
#include <ucs/debug/log.h>
#include <ucs/memory/memtype_cache.h>
#include <ucs/sys/topo/base/topo.h>
#include <ucs/sys/string.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static ucs_status_t uct_ringk_md_query(uct_md_h tl_md, uct_ringk_md_attr_t *attr)
{
    uct_ringk_md_t *md = ucs_derived_of(tl_md, uct_ringk_md_t);
    __typeof__(&UCT_RINGK_MD_CAP(attr)) cap = &UCT_RINGK_MD_CAP(attr);

    uct_ringk_md_attr_base(attr);
    /* With CUDA memory, zcopy asks for a memh: UCP then offers zcopy for memory types the md
     * registers, where without it only for those the md can access with the CPU (host); the
     * memh itself is not read (CUDA buffers are told by pointer). A UCP whose v1 RMA hands
     * every zcopy the request's registration (1.14 to 1.20) gets one too. */
    cap->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY |
                            ((md->cuda || RINGK_UCP_RMA_NEEDS_MEMH) ? UCT_MD_FLAG_NEED_MEMH : 0);
    /* CUDA memory is registered (exported for CUDA IPC) and moved by put/get zcopy along the
     * endpoint's GPU path; it is not CPU-accessible, so short/bcopy stay host-only. */
    cap->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST) |
                            (md->cuda ? UCS_BIT(UCS_MEMORY_TYPE_CUDA) : 0);
    cap->alloc_mem_types  = 0;
    cap->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
#if defined(HAVE_UCT_MD_QUERY_V2) && defined(HAVE_UCT_MD_ATTR_V2_T_CACHE_MEM_TYPES)
    /* UCP keeps registrations of these in its cache (it asserts that an md it registers zcopy
     * buffers with is in its cache map when the cache is on): a registration here is cheap but
     * also what a CUDA export needs once */
    attr->cache_mem_types = cap->reg_mem_types;
#endif
    /* UCP asks the mds that detect a memory type (through mem_query) when its memory-type
     * cache is off (UCX_MEMTYPE_CACHE=n); with the cache on it takes an address the cache does
     * not know for host memory, and learns CUDA allocations only from registration here. A UCX
     * built without CUDA has no other md that can tell. */
    cap->detect_mem_types = md->cuda ? UCS_BIT(UCS_MEMORY_TYPE_CUDA) : 0;
    cap->max_alloc        = 0;
    cap->max_reg          = ULONG_MAX;
    attr->rkey_packed_size = sizeof(uct_ringk_packed_rkey_t);
    /* Registration only records the range: RMA is done by cross-memory attach. */
    attr->reg_cost         = ucs_linear_func_make(50e-9, 0);
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
                                        uct_ringk_mem_attr_t *mem_attr)
{
    uct_ringk_md_t *md = ucs_derived_of(tl_md, uct_ringk_md_t);
    ucs_sys_device_t sys_dev;
    uint64_t base, size;
    char busid[16] = "";

    if (!md->cuda || !ringk_cuda_ptr_range(address, &base, &size, busid, sizeof(busid))) {
        return UCS_ERR_INVALID_ADDR;
    }
    sys_dev = uct_ringk_sys_dev(busid);
    uct_ringk_memtype_cache_update((void*)(uintptr_t)base, size, UCS_MEMORY_TYPE_CUDA,
                                   sys_dev);
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

/* The regions this process registered (any md of the ring device), so that a peer's staged
 * request is served only inside memory this process gave out a key for. */
static pthread_mutex_t uct_ringk_regs_lock = PTHREAD_MUTEX_INITIALIZER;
static UCS_LIST_HEAD(uct_ringk_regs);

int uct_ringk_md_reg_covers(uint64_t address, uint64_t length)
{
    uct_ringk_memh_t *memh;
    int found = 0;

    pthread_mutex_lock(&uct_ringk_regs_lock);
    ucs_list_for_each(memh, &uct_ringk_regs, list) {
        if ((address >= memh->address) && (length <= memh->length) &&
            (address - memh->address <= memh->length - length)) {
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&uct_ringk_regs_lock);
    return found;
}

static ucs_status_t uct_ringk_mem_reg(uct_md_h tl_md, void *address, size_t length,
                                      UCT_RINGK_MEM_REG_ARG, uct_mem_h *memh_p)
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
            if (!(UCT_RINGK_MEM_REG_FLAGS() & UCT_MD_MEM_FLAG_HIDE_ERRORS)) {
                ucs_warn("ringk: CUDA memory %p+%zu cannot be exported for CUDA IPC: %s",
                         address, length, why);
            }
            memh->alloc_base = (uintptr_t)address;
            memh->alloc_size = length;
        } else {
            memh->ipc_valid = 1;
        }
        /* from now on UCP's memory-type cache tells sends from this allocation as CUDA */
        uct_ringk_memtype_cache_update((void*)(uintptr_t)memh->alloc_base, memh->alloc_size,
                                 UCS_MEMORY_TYPE_CUDA, uct_ringk_sys_dev(busid));
    }
    pthread_mutex_lock(&uct_ringk_regs_lock);
    ucs_list_add_tail(&uct_ringk_regs, &memh->list);
    pthread_mutex_unlock(&uct_ringk_regs_lock);
    *memh_p = memh;
    return UCS_OK;
}

static ucs_status_t uct_ringk_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params)
{
    uct_ringk_memh_t *memh;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);
    memh = params->memh;
    pthread_mutex_lock(&uct_ringk_regs_lock);
    ucs_list_del(&memh->list);
    pthread_mutex_unlock(&uct_ringk_regs_lock);
    ucs_free(memh);
    return UCS_OK;
}

static ucs_status_t uct_ringk_mkey_pack(UCT_RINGK_MKEY_PACK_ARGS(md, tl_memh))
{
    const uct_ringk_memh_t *memh = tl_memh;
    uct_ringk_packed_rkey_t packed = {
        .hdr        = uct_ringk_rkey_hdr(UCT_RINGK_RKEY_MAGIC, memh->address, memh->length),
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

ucs_status_t uct_ringk_reg_rkey_unpack(const void *buffer, uct_rkey_t *rkey_p)
{
    uct_ringk_packed_rkey_t packed;
    uct_ringk_rkey_t *rkey;
    char why[256], busid[24];

    memcpy(&packed, buffer, sizeof(packed));
    if (!uct_ringk_rkey_hdr_valid(&packed.hdr, UCT_RINGK_RKEY_MAGIC) ||
        ((packed.mem_type != UCS_MEMORY_TYPE_HOST) &&
         (packed.mem_type != UCS_MEMORY_TYPE_CUDA))) {
        ucs_error("ringk: invalid remote key (magic 0x%x pid %u range 0x%" PRIx64 "+%" PRIu64
                  " memory type %u)", packed.hdr.magic, packed.hdr.pid, packed.hdr.address,
                  packed.hdr.length, packed.mem_type);
        return UCS_ERR_INVALID_PARAM;
    }
    /* A CUDA region must lie inside the allocation the IPC handle maps. */
    if ((packed.mem_type == UCS_MEMORY_TYPE_CUDA) &&
        ((packed.gpu == 0) || (packed.alloc_base + packed.alloc_size < packed.alloc_base) ||
         (packed.hdr.address < packed.alloc_base) ||
         (packed.hdr.address + packed.hdr.length > packed.alloc_base + packed.alloc_size))) {
        ucs_error("ringk: invalid CUDA remote key: 0x%" PRIx64 "+%" PRIu64 " is not inside its "
                  "allocation 0x%" PRIx64 "+%" PRIu64, packed.hdr.address, packed.hdr.length,
                  packed.alloc_base, packed.alloc_size);
        return UCS_ERR_INVALID_PARAM;
    }
    rkey = ucs_calloc(1, sizeof(*rkey), "ringk_rkey");
    if (rkey == NULL) {
        ucs_error("ringk: cannot allocate a remote key");
        return UCS_ERR_NO_MEMORY;
    }
    rkey->kind       = UCT_RINGK_KEY_REG;
    rkey->pid        = packed.hdr.pid;
    rkey->address    = packed.hdr.address;
    rkey->length     = packed.hdr.length;
    rkey->mem_type   = packed.mem_type;
    rkey->gpu        = packed.gpu;
    rkey->alloc_base = packed.alloc_base;
    rkey->dev        = -1;
    if (packed.mem_type == UCS_MEMORY_TYPE_CUDA) {
        ringk_busid_unpack(packed.gpu, busid, sizeof(busid));
        if (packed.hdr.pid == (uint32_t)getpid()) {
            /* a process cannot open its own IPC handles, and needs not */
            rkey->own    = 1;
            rkey->mapped = (void*)(uintptr_t)packed.alloc_base;
        } else if (!packed.ipc_valid) {
            snprintf(why, sizeof(why), "it could not be exported for CUDA IPC");
        } else {
            ringk_cuda_ipc_open_shared(packed.ipc, packed.alloc_size, packed.hdr.pid, busid,
                                       &rkey->mapped, &rkey->shared, why, sizeof(why));
        }
        if ((rkey->mapped != NULL) &&
            (ringk_cuda_busid_dev(busid, &rkey->dev, why, sizeof(why)) != 0)) {
            rkey->dev = -1; /* the GPU is hidden from this process (CUDA_VISIBLE_DEVICES) */
        }
        if (rkey->mapped == NULL) {
            /* puts and gets with this key go through the endpoint's staging area, which the
             * owner's progress serves (ringk_xstage.c) */
            ucs_debug("ringk: cannot map the CUDA memory of pid %u (0x%" PRIx64 "+%" PRIu64
                      "): %s; it is reached by staging", packed.hdr.pid, packed.hdr.address,
                      packed.hdr.length, why);
        }
    }
    *rkey_p = (uintptr_t)rkey;
    return UCS_OK;
}

void uct_ringk_reg_rkey_release(uct_ringk_rkey_t *key)
{
    if ((key->mapped != NULL) && !key->own) {
        ringk_cuda_ipc_close_shared(key->mapped, key->shared);
    }
    ucs_free(key);
}

uct_md_ops_t uct_ringk_md_ops = {
    UCT_RINGK_BASE_MD_OPS,
    .query                  = uct_ringk_md_query,
    .mem_alloc              = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free               = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_reg                = uct_ringk_mem_reg,
    .mem_dereg              = uct_ringk_mem_dereg,
    .mem_query              = uct_ringk_mem_query,
    .mkey_pack              = uct_ringk_mkey_pack,
    .detect_memory_type     = uct_ringk_detect_memory_type
};
