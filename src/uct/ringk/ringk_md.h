/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk memory domain: the component, its md and its configuration. */
#ifndef UCT_RINGK_MD_H
#define UCT_RINGK_MD_H

#include "ringk_rkey.h"
#include "ringk_shm.h"

#include <core/ringk_cuda.h>

#include <uct/base/uct_md.h>

#define UCT_RINGK_NAME "ringk"

/** ringk md configuration (UCX_RINGK_* md variables). */
typedef struct uct_ringk_md_config {
    uct_md_config_t          super;
    ucs_ternary_auto_value_t hugetlb;  /**< UCX_RINGK_HUGETLB_MODE: ringk_shm allocations */
} uct_ringk_md_config_t;

/** ringk memory domain. */
typedef struct uct_ringk_md {
    uct_md_t                 super;
    int                      cuda;    /**< CUDA memory can be registered (a driver and a device
                                           exist) */
    int                      shm;     /**< the ringk_shm md (allocates peer-mappable memory) */
    ucs_ternary_auto_value_t hugetlb; /**< ringk_shm: huge pages yes / no / try */
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
} uct_ringk_memh_t;

extern uct_component_t uct_ringk_component;

/** Operations of the ringk_shm md (ringk_shm.c). */
extern uct_md_ops_t uct_ringk_shm_md_ops;

/** Opens the "shm" device's iface on the ringk_shm md (ringk_shm.c). */
ucs_status_t uct_ringk_shm_iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config, uct_iface_h *iface_p);

/** Tells the ringk_shm md from the ringk md. */
static inline int uct_ringk_md_is_shm(uct_md_h md)
{
    return ucs_derived_of(md, uct_ringk_md_t)->shm;
}

#endif
