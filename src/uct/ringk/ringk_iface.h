/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk interface: configuration, receive rings and progress. */
#ifndef UCT_RINGK_IFACE_H
#define UCT_RINGK_IFACE_H

#include <uct/base/uct_iface.h>

/** Limits of the UCX_RINGK_* iface variables, checked at iface open. */
#define UCT_RINGK_RING_SIZE_MIN   2
#define UCT_RINGK_RING_SIZE_MAX   65536
#define UCT_RINGK_CELL_SIZE_MIN   64
#define UCT_RINGK_CELL_SIZE_MAX   4096
#define UCT_RINGK_LANES_MAX       1024
#define UCT_RINGK_SEG_SIZE_MAX    (1024 * 1024)
#define UCT_RINGK_POLL_BATCH_MAX  1024

/** ringk iface configuration (UCX_RINGK_* variables). */
typedef struct uct_ringk_iface_config {
    uct_iface_config_t super;
    unsigned           ring_size;   /**< cells per receive ring, a power of 2 */
    size_t             cell_size;   /**< bytes per cell, a power of 2 */
    unsigned           lanes;       /**< single-producer lanes per iface */
    size_t             seg_size;    /**< largest am_bcopy payload, bytes */
    unsigned           poll_batch;  /**< cells consumed per lane per progress call */
} uct_ringk_iface_config_t;

/** ringk interface. */
typedef struct uct_ringk_iface {
    uct_base_iface_t         super;
    uct_ringk_iface_config_t config;  /**< validated copy of the configuration */
} uct_ringk_iface_t;

ucs_status_t uct_ringk_iface_config_check(const uct_ringk_iface_config_t *config);

UCT_TL_DECL(ringk)

#endif
