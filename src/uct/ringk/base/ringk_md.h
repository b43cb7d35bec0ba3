/* SPDX-License-Identifier: BSD-3-Clause */
/* The ringk component and its two memory domains: "ringk" (ring/ringk_md.c) registers host and
 * CUDA memory for the ring device; "ringk_shm" (shm/ringk_shm_md.c) allocates memory peers map
 * for the mapped device. What the component (base/ringk_component.c) needs of each. */
#ifndef UCT_RINGK_MD_H
#define UCT_RINGK_MD_H

#include "ringk_base.h"
#include "ringk_rkey.h"

#include <uct/ringk/shm/ringk_shm.h>

#include <core/ringk_cuda.h>

#include <uct/base/uct_md.h>

/** ringk md configuration (UCX_RINGK_* md variables). */
typedef struct uct_ringk_md_config {
    uct_md_config_t          super;
    ucs_ternary_auto_value_t hugetlb;  /**< UCX_RINGK_HUGETLB_MODE: ringk_shm allocations */
    int                      legacy_names; /**< UCX_RINGK_LEGACY_DEVICE_NAMES */
} uct_ringk_md_config_t;

/** ringk memory domain. */
typedef struct uct_ringk_md {
    uct_md_t                 super;
    int                      cuda;    /**< CUDA memory can be registered (a driver and a device
                                           exist) */
    int                      shm;     /**< the ringk_shm md (allocates peer-mappable memory) */
    ucs_ternary_auto_value_t hugetlb; /**< ringk_shm: huge pages yes / no / try */
    int                      legacy_names; /**< its device keeps its name of ringk 0.4 */
} uct_ringk_md_t;

/**
 * A registered region. Host memory: RMA reaches it by cross-memory attach, no pinning needed.
 * CUDA memory: its allocation is exported for CUDA IPC and peers map it.
 */
typedef struct uct_ringk_memh {
    uint64_t address;
    uint64_t length;
    uint32_t mem_type;                            /**< ucs_memory_type_t */
    uint64_t gpu;                                 /**< packed bus id of its GPU (CUDA) */
    uint64_t alloc_base, alloc_size;              /**< its whole allocation (CUDA) */
    uint32_t ipc_valid;                           /**< the allocation could be exported */
    uint8_t  ipc[RINGK_CUDA_IPC_HANDLE_LEN];      /**< CUDA IPC handle of the allocation */
    ucs_list_link_t list;                         /**< in the process's registered regions */
} uct_ringk_memh_t;

/** Whether [address, +length) lies inside one region this process registered on the ring
 *  device's md: what a peer's staged put or get may reach here (ring/ringk_md.c). */
int uct_ringk_md_reg_covers(uint64_t address, uint64_t length);

extern uct_component_t uct_ringk_component;

UCT_TL_DECL(ringk)

/** Operations of the ringk md (ring/ringk_md.c) and of the ringk_shm md (shm/ringk_shm_md.c). */
extern uct_md_ops_t uct_ringk_md_ops;
extern uct_md_ops_t uct_ringk_shm_md_ops;

/** Open the ring device's iface on the ringk md (ring/ringk_iface.c) and the mapped device's on
 * the ringk_shm md (shm/ringk_shm_iface.c). */
ucs_status_t uct_ringk_ring_iface_open(uct_md_h md, uct_worker_h worker,
                                       const uct_iface_params_t *params,
                                       const uct_iface_config_t *config, uct_iface_h *iface_p);
ucs_status_t uct_ringk_shm_iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config, uct_iface_h *iface_p);

/** Checks a packed key of the ringk md (from a peer: untrusted) and maps the CUDA memory it
 * names; UCS_ERR_UNREACHABLE when that memory cannot be mapped here (ring/ringk_md.c). */
ucs_status_t uct_ringk_reg_rkey_unpack(const void *buffer, uct_rkey_t *rkey_p);

/** Releases a key uct_ringk_reg_rkey_unpack() made. */
void uct_ringk_reg_rkey_release(uct_ringk_rkey_t *key);

/** Frees either md. */
void uct_ringk_md_close(uct_md_h tl_md);

/** Tells the ringk_shm md from the ringk md. */
static inline int uct_ringk_md_is_shm(uct_md_h md)
{
    return ucs_derived_of(md, uct_ringk_md_t)->shm;
}

#endif
