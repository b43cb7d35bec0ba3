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

extern uct_component_t uct_ringk_component;

#endif
