/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk_info: what ringk was built with, which UCX runs, and the host topology it sees. */
#include "ringk_config.h"

#include <ringk/api/ringk.h>

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: ringk_info [-h]\n"
                 "  Prints the ringk build configuration, the running UCX version and the\n"
                 "  host topology (packages, NUMA nodes, cores, PCI GPUs) as hwloc sees it.\n");
}

static int count_gpus(hwloc_topology_t topo)
{
    hwloc_obj_t obj = NULL;
    int n = 0;

    while ((obj = hwloc_get_next_pcidev(topo, obj)) != NULL) {
        /* PCI class 0x03xx: display controllers (GPUs and 3D accelerators). */
        if ((obj->attr->pcidev.class_id >> 8) == 0x03) {
            n++;
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    ringk_build_info_t info = {
        .field_mask = RINGK_BUILD_INFO_FIELD_VERSION | RINGK_BUILD_INFO_FIELD_UCX_VERSION |
                      RINGK_BUILD_INFO_FIELD_CUDA
    };
    unsigned major, minor, patch;
    hwloc_topology_t topo;

    if (argc > 1) {
        if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "ringk_info: unknown argument '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    if (ringk_build_info_query(&info) != 0) {
        fprintf(stderr, "ringk_info: ringk_build_info_query failed\n");
        return 1;
    }
    ucp_get_version(&major, &minor, &patch);
    printf("ringk %s\n", info.version);
    printf("  built against UCX %s, running UCX %u.%u.%u%s\n", info.ucx_version, major, minor,
           patch, "");
    printf("  CUDA support: %s\n", info.cuda ? "yes" : "no");

    if (hwloc_topology_init(&topo) != 0) {
        fprintf(stderr, "ringk_info: hwloc_topology_init failed\n");
        return 1;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo) != 0) {
        fprintf(stderr, "ringk_info: hwloc_topology_load failed\n");
        hwloc_topology_destroy(topo);
        return 1;
    }
    printf("host topology (hwloc %s)\n", HWLOC_VERSION);
    printf("  packages: %d, NUMA nodes: %d, cores: %d, PUs: %d, PCI GPUs: %d\n",
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE),
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE),
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU), count_gpus(topo));
    hwloc_topology_destroy(topo);
    return 0;
}
