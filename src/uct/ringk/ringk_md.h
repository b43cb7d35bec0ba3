/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk memory domain: the component, its md and its configuration. */
#ifndef UCT_RINGK_MD_H
#define UCT_RINGK_MD_H

#include <uct/base/uct_md.h>

#define UCT_RINGK_NAME "ringk"

/** ringk md configuration (UCX_RINGK_* md variables). */
typedef struct uct_ringk_md_config {
    uct_md_config_t super;
} uct_ringk_md_config_t;

/** ringk memory domain. */
typedef struct uct_ringk_md {
    uct_md_t super;
} uct_ringk_md_t;

/** A registered region: RMA reaches it by cross-memory attach, no pinning needed. */
typedef struct uct_ringk_memh {
    uint64_t address;
    uint64_t length;
} uct_ringk_memh_t;

/** Packed remote key, as sent to peers. */
typedef struct uct_ringk_packed_rkey {
    uint32_t magic;    /**< UCT_RINGK_RKEY_MAGIC */
    uint32_t pid;      /**< process owning the region */
    uint64_t address;
    uint64_t length;
} UCS_S_PACKED uct_ringk_packed_rkey_t;

#define UCT_RINGK_RKEY_MAGIC 0x524b4b59u /* "RKKY" */

/** Unpacked remote key (uct_rkey_t points to one). */
typedef struct uct_ringk_rkey {
    uint32_t pid;
    uint64_t address;
    uint64_t length;
} uct_ringk_rkey_t;

extern uct_component_t uct_ringk_component;

#endif
