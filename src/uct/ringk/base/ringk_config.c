/* SPDX-License-Identifier: BSD-3-Clause */
/* The configuration both devices of the ringk transport read (UCX_RINGK_* iface variables),
 * its checks, and the AM alignment both refuse alike. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_base.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>
#include <ucs/debug/log.h>
#include <ucs/sys/math.h>

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *uct_ringk_host_rma_names[] = {"cma", "staged", NULL};
static const char *uct_ringk_gpu_staging_names[] = {"auto", "peer", NULL};

ucs_config_field_t uct_ringk_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_ringk_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"RING_SIZE", "1024",
     "Number of cells in each receive ring; a power of 2 between 2 and 65536.",
     ucs_offsetof(uct_ringk_iface_config_t, ring_size), UCS_CONFIG_TYPE_UINT},

    {"CELL_SIZE", "64",
     "Size of a ring cell in bytes, header included; a power of 2 between 64 and 4096.\n"
     "A message that does not fit in one cell spans consecutive cells.",
     ucs_offsetof(uct_ringk_iface_config_t, cell_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"LANES", "64",
     "Number of lanes in a receive segment (1 to 1024), the shared lane included. Each\n"
     "connected sender gets a single-producer lane of its own while they last; later senders\n"
     "share lane 0, a multi-producer lane.",
     ucs_offsetof(uct_ringk_iface_config_t, lanes), UCS_CONFIG_TYPE_UINT},

    {"SEG_SIZE", "8k",
     "Largest active message sent by copy (am_bcopy), in bytes, up to 1m.",
     ucs_offsetof(uct_ringk_iface_config_t, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"LIVENESS_INTERVAL", "1s",
     "How often progress checks that the peers of this iface's endpoints still live (a dead\n"
     "process or a closed iface is reported to the iface error handler) and reclaims the\n"
     "lanes of senders that died; 0 disables the periodic check (ep_check still works).",
     ucs_offsetof(uct_ringk_iface_config_t, liveness), UCS_CONFIG_TYPE_TIME},

    {"POLL_BATCH", "16",
     "Most messages taken from one lane in one progress call (1 to 1024), so that a busy\n"
     "sender cannot starve the others.",
     ucs_offsetof(uct_ringk_iface_config_t, poll_batch), UCS_CONFIG_TYPE_UINT},

    {"GPU", "auto",
     "The GPU whose memory this process moves, as peers see it in the iface address: 'auto'\n"
     "(the current CUDA device when the iface opens; none without a driver or a device),\n"
     "'none', or a PCI bus id such as 0000:07:00.0. Each endpoint's path for GPU memory\n"
     "(P2P_NVLINK, P2P_PCIE, CUDA_IPC or HOST_STAGED) comes from the two GPUs' places in the\n"
     "topology (RINGK_TOPO_FILE or this machine) and RINGK_P2P_LEVEL / RINGK_PATH.",
     ucs_offsetof(uct_ringk_iface_config_t, gpu), UCS_CONFIG_TYPE_STRING},

    {"P2P_LEVEL", "",
     "The farthest GPU pair that still uses a P2P path for GPU memory: SAME_DEVICE (LOC),\n"
     "NVLINK (NVL), PCIE_SWITCH (PIX, PXB), HOST_BRIDGE (PHB) or CROSS_SOCKET (SYS); farther\n"
     "pairs are staged through the host. Empty: RINGK_P2P_LEVEL from the environment, else\n"
     "PCIE_SWITCH.",
     ucs_offsetof(uct_ringk_iface_config_t, p2p_level), UCS_CONFIG_TYPE_STRING},

    {"PATH", "",
     "Forces every endpoint's path for GPU memory: P2P_NVLINK, P2P_PCIE, CUDA_IPC or\n"
     "HOST_STAGED (a P2P path the pair does not have is refused: the endpoint is\n"
     "unreachable). Empty: RINGK_PATH from the environment, else the topology decides.",
     ucs_offsetof(uct_ringk_iface_config_t, path), UCS_CONFIG_TYPE_STRING},

    {"TOPO_FILE", "",
     "An hwloc XML file to read the machine's topology from instead of probing it (for VMs\n"
     "and containers that hide the PCI tree); see ringk_info. Empty: RINGK_TOPO_FILE from the\n"
     "environment, else this machine.",
     ucs_offsetof(uct_ringk_iface_config_t, topo_file), UCS_CONFIG_TYPE_STRING},

    {"HOST_RMA", "cma",
     "How put and get reach a peer's host memory: 'cma' (cross-memory attach, one-sided) or\n"
     "'staged' (through a shared staging area the peer copies from and into in its progress,\n"
     "as GPU memory on the HOST_STAGED path: for where cross-memory attach is not allowed;\n"
     "the peer must call progress). Staging needs a lane of its own (UCX_RINGK_LANES).",
     ucs_offsetof(uct_ringk_iface_config_t, host_rma),
     UCS_CONFIG_TYPE_ENUM(uct_ringk_host_rma_names)},

    {"GPU_STAGING", "auto",
     "How the HOST_STAGED path moves a peer's GPU memory: 'auto' (through this process's\n"
     "pinned buffers into the peer's allocation mapped by CUDA IPC, one-sided; through the\n"
     "staging area the peer serves where its key cannot be mapped) or 'peer' (always the\n"
     "staging area: no CUDA IPC at all; the peer must call progress).",
     ucs_offsetof(uct_ringk_iface_config_t, gpu_staging),
     UCS_CONFIG_TYPE_ENUM(uct_ringk_gpu_staging_names)},

    {NULL}
};

ucs_status_t uct_ringk_iface_config_check(const uct_ringk_iface_config_t *config)
{
    ringk_policy_t policy;

    if (!ucs_is_pow2(config->ring_size) || (config->ring_size < UCT_RINGK_RING_SIZE_MIN) ||
        (config->ring_size > UCT_RINGK_RING_SIZE_MAX)) {
        ucs_error("UCX_RINGK_RING_SIZE %u is not a power of 2 between %u and %u",
                  config->ring_size, UCT_RINGK_RING_SIZE_MIN, UCT_RINGK_RING_SIZE_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->cell_size == UCS_MEMUNITS_AUTO) || (config->cell_size == UCS_MEMUNITS_INF) ||
        !ucs_is_pow2(config->cell_size) || (config->cell_size < UCT_RINGK_CELL_SIZE_MIN) ||
        (config->cell_size > UCT_RINGK_CELL_SIZE_MAX)) {
        ucs_error("UCX_RINGK_CELL_SIZE %zu is not a power of 2 between %u and %u",
                  config->cell_size, UCT_RINGK_CELL_SIZE_MIN, UCT_RINGK_CELL_SIZE_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->lanes < 1) || (config->lanes > UCT_RINGK_LANES_MAX)) {
        ucs_error("UCX_RINGK_LANES %u is out of range 1..%u", config->lanes,
                  UCT_RINGK_LANES_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->seg_size == UCS_MEMUNITS_AUTO) || (config->seg_size == UCS_MEMUNITS_INF) ||
        (config->seg_size < 64) || (config->seg_size > UCT_RINGK_SEG_SIZE_MAX)) {
        ucs_error("UCX_RINGK_SEG_SIZE %zu is out of range 64..%u", config->seg_size,
                  UCT_RINGK_SEG_SIZE_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    /* the receive segment is allocated and zeroed when the iface opens */
    if ((uint64_t)config->lanes * config->ring_size * config->cell_size >
        UCT_RINGK_SEG_BYTES_MAX) {
        ucs_error("UCX_RINGK_LANES %u x RING_SIZE %u x CELL_SIZE %zu = %" PRIu64 " bytes of "
                  "receive segment, above its limit of %u MiB", config->lanes, config->ring_size,
                  config->cell_size,
                  (uint64_t)config->lanes * config->ring_size * config->cell_size,
                  UCT_RINGK_SEG_BYTES_MAX >> 20);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->liveness < 0) || (config->liveness > 3600)) {
        ucs_error("UCX_RINGK_LIVENESS_INTERVAL %.3fs is out of range 0..3600s", config->liveness);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->gpu != NULL) && strcasecmp(config->gpu, "auto") &&
        strcasecmp(config->gpu, "none") && (ringk_busid_pack(config->gpu) == 0)) {
        ucs_error("UCX_RINGK_GPU '%s' is not auto, none or a PCI bus id such as 0000:07:00.0",
                  config->gpu);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->poll_batch < 1) || (config->poll_batch > UCT_RINGK_POLL_BATCH_MAX)) {
        ucs_error("UCX_RINGK_POLL_BATCH %u is out of range 1..%u", config->poll_batch,
                  UCT_RINGK_POLL_BATCH_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    return uct_ringk_iface_policy(config, &policy);
}

/* A UCX_RINGK_* string setting, or when it is empty the plain variable of the environment;
 * @a name_p gets the name of the one that was used. */
const char *uct_ringk_setting(const char *value, const char *ucx_name, const char *plain,
                              const char **name_p)
{
    if ((value != NULL) && (value[0] != '\0')) {
        *name_p = ucx_name;
        return value;
    }
    *name_p = plain;
    return getenv(plain);
}

ucs_status_t uct_ringk_iface_policy(const uct_ringk_iface_config_t *config,
                                    ringk_policy_t *policy_p)
{
    const char *level_name, *path_name, *level, *path;
    char err[256];

    level = uct_ringk_setting(config->p2p_level, "UCX_RINGK_P2P_LEVEL", "RINGK_P2P_LEVEL",
                              &level_name);
    path  = uct_ringk_setting(config->path, "UCX_RINGK_PATH", "RINGK_PATH", &path_name);
    if (ringk_policy_parse_named(level, level_name, path, path_name, policy_p, err,
                                 sizeof(err)) != 0) {
        ucs_error("ringk: %s", err);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* The alignment an AM handler asked for: am_alignment a power of 2, am_align_offset only with
 * it. UCP gives offsets past the alignment (its header size): only offset % alignment matters.
 * Defaults: no alignment (1), offset 0. */
ucs_status_t uct_ringk_iface_am_align(const uct_iface_params_t *params, size_t *align_p,
                                      size_t *offset_p)
{
    *align_p  = 1;
    *offset_p = 0;
    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT)) {
        if (params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) {
            ucs_error("ringk: am_align_offset %zu given without am_alignment",
                      params->am_align_offset);
            return UCS_ERR_INVALID_PARAM;
        }
        return UCS_OK;
    }
    if (!ucs_is_pow2(params->am_alignment) || (params->am_alignment > UCS_MBYTE)) {
        ucs_error("ringk: am_alignment %zu is not a power of 2 up to 1m", params->am_alignment);
        return UCS_ERR_INVALID_PARAM;
    }
    *align_p = params->am_alignment;
    if (params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) {
        *offset_p = params->am_align_offset & (params->am_alignment - 1);
    }
    return UCS_OK;
}
