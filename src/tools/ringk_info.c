/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk_info: the build, the node topology as ringk sees it (this machine or an hwloc XML file),
 * a matrix like nvidia-smi topo -m, and for every pair of GPUs, GPU and NUMA node, and pair of
 * processes the path ringk uses, with the reason and estimates; --json for scripts. */
#include "ringk_config.h"

#include <core/ringk_topo.h>
#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ringk_info [--topo FILE] [--json] [-h]\n"
            "  Prints the ringk build, the node topology (this machine, or the hwloc XML FILE;\n"
            "  default $RINGK_TOPO_FILE), a GPU matrix like 'nvidia-smi topo -m', and the path\n"
            "  ringk uses for every pair of GPUs, GPU and NUMA node, and pair of processes,\n"
            "  with the reason and estimated bandwidth and latency.\n"
            "  --json   one JSON document instead of text\n"
            "  Overrides: RINGK_P2P_LEVEL (SAME_DEVICE|NVLINK|PCIE_SWITCH|HOST_BRIDGE|\n"
            "  CROSS_SOCKET, or LOC|NVL|PIX|PXB|PHB|SYS; default PCIE_SWITCH), RINGK_PATH\n"
            "  (P2P_NVLINK|P2P_PCIE|CUDA_IPC|HOST_STAGED), RINGK_TOPO_FILE.\n");
}

/* Writes @a s as a JSON string. */
static void json_str(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        if ((*s == '"') || (*s == '\\')) {
            printf("\\%c", *s);
        } else if ((unsigned char)*s < 0x20) {
            printf("\\u%04x", (unsigned char)*s);
        } else {
            putchar(*s);
        }
    }
    putchar('"');
}

typedef struct {
    ringk_topo_pair_t pair;
    int               path;     /* ringk_path_t, or -EINVAL */
    char              reason[RINGK_TOPO_REASON_LEN + 128];
} decision_t;

static void decide(const ringk_topo_t *topo, const ringk_policy_t *pol, unsigned a, unsigned b,
                   decision_t *d)
{
    ringk_topo_classify(topo, a, b, &d->pair);
    d->path = ringk_policy_apply(pol, &d->pair, d->reason, sizeof(d->reason));
    if (d->path >= 0) {
        d->path = ringk_topo_verify_path(topo, a, b, d->path, d->reason, sizeof(d->reason),
                                         NULL);
    }
}

static const char *path_str(int path)
{
    return (path < 0) ? "REFUSED" : ringk_path_name((ringk_path_t)path);
}

static void host_path(char *reason, size_t len)
{
    snprintf(reason, len, "host memory between processes: shared-memory rings in the receiver's "
             "memfd segment, opened through /proc/<pid>/fd; processes are on one node when they "
             "have the same boot id, PID, IPC and network namespaces and /dev/shm");
}

static void print_text(const ringk_topo_t *topo, const ringk_policy_t *pol,
                       const ringk_build_info_t *info, const char *p2p_env, const char *path_env)
{
    unsigned major, minor, patch, a, b;
    char label[16], reason[512];
    ringk_topo_pair_t np;
    decision_t d;
    int numa;

    ucp_get_version(&major, &minor, &patch);
    printf("ringk %s: built against UCX %s, running UCX %u.%u.%u, built with CUDA: %s\n",
           info->version, info->ucx_version, major, minor, patch, info->cuda ? "yes" : "no");
    printf("topology: %s: %u package(s), %u NUMA node(s), %u core(s), %u GPU(s)\n", topo->source,
           topo->npackages, topo->nnuma, topo->ncores, topo->ngpus);
    printf("policy: RINGK_P2P_LEVEL=%s%s, RINGK_PATH=%s\n",
           ringk_path_class_name(pol->p2p_level), (p2p_env && *p2p_env) ? "" : " (default)",
           pol->forced ? ringk_path_name(pol->path) : "(chosen per pair)");
    (void)path_env;

    if (topo->ngpus > 0) {
        printf("\n%-6s", "");
        for (b = 0; b < topo->ngpus; b++) {
            printf(" GPU%-3u", b);
        }
        printf("  NUMA  PCI\n");
        for (a = 0; a < topo->ngpus; a++) {
            printf("GPU%-3u", a);
            for (b = 0; b < topo->ngpus; b++) {
                ringk_topo_classify(topo, a, b, &d.pair);
                ringk_path_class_label(&d.pair, label, sizeof(label));
                printf(" %-6s", label);
            }
            printf("  %-4d  %s\n", topo->gpus[a].numa, topo->gpus[a].busid);
        }
        printf("\nLegend: X same GPU, NV# # NVLinks, PIX one PCIe switch, PXB several PCIe "
               "switches,\n        PHB PCIe host bridge, SYS across sockets, NONE unknown\n");

        printf("\nGPU pairs (class -> path, estimated bandwidth and latency, reason):\n");
        for (a = 0; a < topo->ngpus; a++) {
            for (b = a + 1; b < topo->ngpus; b++) {
                decide(topo, pol, a, b, &d);
                printf("  GPU%u-GPU%u  %-12s -> %-11s %7.1f GB/s %5.2f us  %s\n", a, b,
                       ringk_path_class_name(d.pair.cls), path_str(d.path), d.pair.bw_gbps,
                       d.pair.lat_us, d.reason);
            }
        }
        printf("\nGPU to NUMA node:\n");
        for (a = 0; a < topo->ngpus; a++) {
            for (numa = 0; numa < 64; numa++) {
                if (topo->numa_package[numa] < 0) {
                    continue;
                }
                ringk_topo_classify_numa(topo, a, numa, &np);
                printf("  GPU%u-NUMA%d  %-12s %7.1f GB/s %5.2f us  %s\n", a, numa,
                       ringk_path_class_name(np.cls), np.bw_gbps, np.lat_us, np.reason);
            }
        }
    }
    host_path(reason, sizeof(reason));
    printf("\nProcesses on this node:\n  process-process  -> HOST_STAGED  %s\n", reason);
}

static void print_json(const ringk_topo_t *topo, const ringk_policy_t *pol,
                       const ringk_build_info_t *info)
{
    unsigned major, minor, patch, a, b, n = 0;
    ringk_topo_pair_t np;
    char label[16], reason[512];
    decision_t d;
    int numa;

    ucp_get_version(&major, &minor, &patch);
    printf("{\n  \"ringk\": ");
    json_str(info->version);
    printf(",\n  \"ucx_built\": ");
    json_str(info->ucx_version);
    printf(",\n  \"ucx_running\": \"%u.%u.%u\",\n  \"cuda\": %s,\n", major, minor, patch,
           info->cuda ? "true" : "false");
    printf("  \"topology\": {\"source\": ");
    json_str(topo->source);
    printf(", \"packages\": %u, \"numa_nodes\": %u, \"cores\": %u},\n", topo->npackages,
           topo->nnuma, topo->ncores);
    printf("  \"policy\": {\"p2p_level\": \"%s\", \"path\": %s%s%s},\n",
           ringk_path_class_name(pol->p2p_level), pol->forced ? "\"" : "",
           pol->forced ? ringk_path_name(pol->path) : "null", pol->forced ? "\"" : "");
    printf("  \"gpus\": [");
    for (a = 0; a < topo->ngpus; a++) {
        const ringk_topo_gpu_t *g = &topo->gpus[a];
        printf("%s\n    {\"index\": %u, \"pci\": \"%s\", \"package\": %d, \"numa\": %d, "
               "\"pcie_gbps\": %.1f, \"nvlink_version\": %u, \"nvswitch_links\": %u}",
               a ? "," : "", a, g->busid, g->package, g->numa, g->link_gbps, g->nvlink_version,
               g->nvswitch_links);
    }
    printf("%s],\n  \"matrix\": [", topo->ngpus ? "\n  " : "");
    for (a = 0; a < topo->ngpus; a++) {
        printf("%s[", a ? ", " : "");
        for (b = 0; b < topo->ngpus; b++) {
            ringk_topo_classify(topo, a, b, &d.pair);
            ringk_path_class_label(&d.pair, label, sizeof(label));
            printf("%s\"%s\"", b ? ", " : "", label);
        }
        printf("]");
    }
    printf("],\n  \"pairs\": [");
    for (a = 0; a < topo->ngpus; a++) {
        for (b = a + 1; b < topo->ngpus; b++) {
            decide(topo, pol, a, b, &d);
            printf("%s\n    {\"a\": %u, \"b\": %u, \"class\": \"%s\", \"path\": \"%s\", "
                   "\"bw_gbps\": %.1f, \"lat_us\": %.2f, \"reason\": ", n++ ? "," : "", a, b,
                   ringk_path_class_name(d.pair.cls), path_str(d.path), d.pair.bw_gbps,
                   d.pair.lat_us);
            json_str(d.reason);
            printf("}");
        }
    }
    printf("%s],\n  \"gpu_numa\": [", n ? "\n  " : "");
    n = 0;
    for (a = 0; a < topo->ngpus; a++) {
        for (numa = 0; numa < 64; numa++) {
            if (topo->numa_package[numa] < 0) {
                continue;
            }
            ringk_topo_classify_numa(topo, a, numa, &np);
            printf("%s\n    {\"gpu\": %u, \"numa\": %d, \"class\": \"%s\", \"bw_gbps\": %.1f, "
                   "\"lat_us\": %.2f, \"reason\": ", n++ ? "," : "", a, numa,
                   ringk_path_class_name(np.cls), np.bw_gbps, np.lat_us);
            json_str(np.reason);
            printf("}");
        }
    }
    host_path(reason, sizeof(reason));
    printf("%s],\n  \"processes\": {\"path\": \"HOST_STAGED\", \"reason\": ", n ? "\n  " : "");
    json_str(reason);
    printf("}\n}\n");
}

int main(int argc, char **argv)
{
    ringk_build_info_t info = {
        .field_mask = RINGK_BUILD_INFO_FIELD_VERSION | RINGK_BUILD_INFO_FIELD_UCX_VERSION |
                      RINGK_BUILD_INFO_FIELD_CUDA
    };
    const char *file = getenv("RINGK_TOPO_FILE");
    static ringk_topo_t topo;
    ringk_policy_t pol;
    char err[512];
    int json = 0, i;

    if ((file != NULL) && (*file == '\0')) {
        file = NULL;
    }
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--topo") && (i + 1 < argc)) {
            file = argv[++i];
        } else {
            fprintf(stderr, "ringk_info: unknown or incomplete argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (ringk_build_info_query(&info) != 0) {
        fprintf(stderr, "ringk_info: ringk_build_info_query failed\n");
        return 1;
    }
    if (ringk_policy_from_env(&pol, err, sizeof(err)) != 0) {
        fprintf(stderr, "ringk_info: %s\n", err);
        return 2;
    }
    if (ringk_topo_load(&topo, file, err, sizeof(err)) != 0) {
        fprintf(stderr, "ringk_info: %s\n", err);
        return 1;
    }
    if (json) {
        print_json(&topo, &pol, &info);
    } else {
        print_text(&topo, &pol, &info, getenv("RINGK_P2P_LEVEL"), getenv("RINGK_PATH"));
    }
    return 0;
}
