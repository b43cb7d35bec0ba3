/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk memory domain: the component, its md and its configuration. */
#ifndef UCT_RINGK_MD_H
#define UCT_RINGK_MD_H

#include "ringk_rkey.h"

#include <core/ringk_cuda.h>

#include <uct/base/uct_md.h>

#define UCT_RINGK_NAME "ringk"

/** ringk md configuration (UCX_RINGK_* md variables). */
typedef struct uct_ringk_md_config {
    uct_md_config_t super;
} uct_ringk_md_config_t;

/** ringk memory domain. */
typedef struct uct_ringk_md {
    uct_md_t super;
    int      cuda;     /**< CUDA memory can be registered (a driver and a device exist) */
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

#endif
