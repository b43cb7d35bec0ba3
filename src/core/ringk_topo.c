/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk topology: builds the typed node description from hwloc (live or XML) and NVML, and
 * classifies pairs as pure functions of that description (the path policy applied to a pair
 * is in ringk_policy.c). */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#define _GNU_SOURCE
#include "ringk_topo.h"
#include "ringk_cuda.h"

#include <dlfcn.h>
#include <ctype.h>
#include <errno.h>
#include <hwloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* Model constants per link type (not per GPU model): one-way latency added by each element of a
 * path, and the NVLink rate per link per direction by NVLink generation. */
#define LAT_BASE_US          1.0   /* a device-to-device copy through any P2P path */
#define LAT_SWITCH_US        0.15  /* each PCIe switch level crossed */
#define LAT_HOST_BRIDGE_US   0.5   /* through a host bridge / root complex */
#define LAT_SOCKET_US        1.0   /* through the inter-socket interconnect */
#define SOCKET_BW_FACTOR     0.5   /* P2P across sockets: half the narrowest PCIe link */
static const double nvlink_gbps_per_link[] = {0, 20.0, 25.0, 25.0, 25.0, 50.0};

static const char *class_names[RINGK_CLASS_COUNT] = {
    "SAME_DEVICE", "NVLINK", "PCIE_SWITCH", "HOST_BRIDGE", "CROSS_SOCKET", "NONE"
};

static const char *path_names[RINGK_PATH_COUNT] = {
    "P2P_NVLINK", "P2P_PCIE", "CUDA_IPC", "HOST_STAGED"
};

const char *ringk_path_class_name(ringk_path_class_t cls)
{
    return ((unsigned)cls < RINGK_CLASS_COUNT) ? class_names[cls] : "INVALID";
}

const char *ringk_path_name(ringk_path_t path)
{
    return ((unsigned)path < RINGK_PATH_COUNT) ? path_names[path] : "INVALID";
}

void ringk_path_class_label(const ringk_topo_pair_t *pair, char *buf, size_t len)
{
    switch (pair->cls) {
    case RINGK_CLASS_SAME_DEVICE:  snprintf(buf, len, "X"); break;
    case RINGK_CLASS_NVLINK:       snprintf(buf, len, "NV%u", pair->nvlinks); break;
    case RINGK_CLASS_PCIE_SWITCH:  snprintf(buf, len, pair->switches > 1 ? "PXB" : "PIX"); break;
    case RINGK_CLASS_HOST_BRIDGE:  snprintf(buf, len, "PHB"); break;
    case RINGK_CLASS_CROSS_SOCKET: snprintf(buf, len, "SYS"); break;
    default:                       snprintf(buf, len, "NONE"); break;
    }
}

/* ---- loading ------------------------------------------------------------------------------ */

static void busid_of(hwloc_obj_t obj, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%01x", obj->attr->pcidev.domain, obj->attr->pcidev.bus,
             obj->attr->pcidev.dev, obj->attr->pcidev.func);
}

/* Parses "BUSID:LINKS,BUSID:LINKS" into the GPU's NVLink peer list. */
static int parse_nvlinks(ringk_topo_gpu_t *gpu, const char *value, char *err, size_t err_len)
{
    char buf[2048], *save = NULL, *tok, *colon;
    unsigned long links;
    char *end;

    if (strlen(value) >= sizeof(buf)) {
        snprintf(err, err_len, "GPU %s: RingkNVLinks is longer than %zu characters", gpu->busid,
                 sizeof(buf) - 1);
        return -EINVAL;
    }
    strcpy(buf, value);
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        colon = strrchr(tok, ':');
        if ((colon == NULL) || (colon - tok != 12) || (gpu->nnvlinks >= RINGK_TOPO_MAX_NVLINK)) {
            snprintf(err, err_len, "GPU %s: RingkNVLinks entry '%s' is not BUSID:LINKS "
                     "(BUSID like 0000:07:00.0, at most %d entries)", gpu->busid, tok,
                     RINGK_TOPO_MAX_NVLINK);
            return -EINVAL;
        }
        errno = 0;
        links = strtoul(colon + 1, &end, 10);
        if ((errno != 0) || (*end != '\0') || (links == 0) || (links > 64)) {
            snprintf(err, err_len, "GPU %s: RingkNVLinks link count '%s' is not 1..64",
                     gpu->busid, colon + 1);
            return -EINVAL;
        }
        *colon = '\0';
        snprintf(gpu->nvlinks[gpu->nnvlinks].busid, sizeof(gpu->nvlinks[0].busid), "%s", tok);
        gpu->nvlinks[gpu->nnvlinks].links = links;
        gpu->nnvlinks++;
    }
    return 0;
}

static int parse_uint_info(ringk_topo_gpu_t *gpu, const char *name, const char *value,
                           unsigned max, unsigned *out, char *err, size_t err_len)
{
    unsigned long v;
    char *end;

    errno = 0;
    v     = strtoul(value, &end, 10);
    if ((errno != 0) || (*end != '\0') || (end == value) || (v > max)) {
        snprintf(err, err_len, "GPU %s: %s '%s' is not a number 0..%u", gpu->busid, name, value,
                 max);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

static int gpu_from_pcidev(hwloc_topology_t t, hwloc_obj_t obj, ringk_topo_gpu_t *gpu,
                           char *err, size_t err_len)
{
    hwloc_obj_t up, local;
    uint64_t rev[RINGK_TOPO_MAX_DEPTH];
    unsigned n = 0, i;
    float speed;
    int ret;

    memset(gpu, 0, sizeof(*gpu));
    busid_of(obj, gpu->busid, sizeof(gpu->busid));
    gpu->vendor    = obj->attr->pcidev.vendor_id;
    gpu->device    = obj->attr->pcidev.device_id;
    gpu->package   = -1;
    gpu->numa      = -1;
    gpu->link_gbps = obj->attr->pcidev.linkspeed;

    /* PCI path: bridges from the device up to its host bridge. */
    for (up = obj->parent; (up != NULL) && (up->type == HWLOC_OBJ_BRIDGE); up = up->parent) {
        if (up->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
            gpu->host_bridge = up->gp_index;
            break;
        }
        if (n == RINGK_TOPO_MAX_DEPTH) {
            snprintf(err, err_len, "GPU %s is more than %d PCI bridges below its host bridge",
                     gpu->busid, RINGK_TOPO_MAX_DEPTH);
            return -EINVAL;
        }
        speed = up->attr->bridge.upstream.pci.linkspeed;
        if ((speed > 0) && ((gpu->link_gbps <= 0) || (speed < gpu->link_gbps))) {
            gpu->link_gbps = speed;
        }
        rev[n++] = up->gp_index;
    }
    for (i = 0; i < n; i++) {
        gpu->path[i] = rev[n - 1 - i];
    }
    gpu->path_len      = n;
    gpu->switch_levels = n;

    local = hwloc_get_non_io_ancestor_obj(t, obj);
    for (up = local; up != NULL; up = up->parent) {
        if (up->type == HWLOC_OBJ_PACKAGE) {
            gpu->package = (int)up->logical_index;
            break;
        }
    }
    if ((local != NULL) && (local->nodeset != NULL) && !hwloc_bitmap_iszero(local->nodeset)) {
        gpu->numa = hwloc_bitmap_first(local->nodeset);
    }

    for (i = 0; i < obj->infos_count; i++) {
        const char *name = obj->infos[i].name, *value = obj->infos[i].value;

        if (!strcmp(name, "RingkNVLinkVersion")) {
            ret = parse_uint_info(gpu, name, value, 5, &gpu->nvlink_version, err, err_len);
        } else if (!strcmp(name, "RingkNVSwitchLinks")) {
            ret = parse_uint_info(gpu, name, value, 64, &gpu->nvswitch_links, err, err_len);
        } else if (!strcmp(name, "RingkNVLinks")) {
            ret = parse_nvlinks(gpu, value, err, err_len);
        } else {
            ret = 0;
        }
        if (ret != 0) {
            return ret;
        }
    }
    if (((gpu->nnvlinks > 0) || (gpu->nvswitch_links > 0)) && (gpu->nvlink_version == 0)) {
        snprintf(err, err_len, "GPU %s lists NVLinks but no RingkNVLinkVersion (1..5)",
                 gpu->busid);
        return -EINVAL;
    }
    return 0;
}

/* ---- NVML (this machine only; loaded at run time) ----------------------------------------- */

typedef int (*nvml_init_t)(void);
typedef int (*nvml_by_busid_t)(const char *, void **);
typedef int (*nvml_link_state_t)(void *, unsigned, int *);
typedef int (*nvml_link_remote_t)(void *, unsigned, void *);
typedef int (*nvml_link_version_t)(void *, unsigned, unsigned *);

/* nvmlPciInfo_t as of NVML 11+: busIdLegacy[16], domain, bus, device, pciDeviceId,
 * pciSubSystemId, busId[32]. */
typedef struct {
    char     bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char     bus_id[32];
} nvml_pci_info_t;

#define NVML_MAX_LINKS 18

/* Fills NVLink data of the GPUs from NVML when libnvidia-ml is present; silently does nothing
 * without it (a host without NVIDIA driver). NVSwitch peers are counted as switch links. */
static void nvml_fill(ringk_topo_t *topo)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    nvml_init_t init;
    nvml_by_busid_t by_busid;
    nvml_link_state_t state;
    nvml_link_remote_t remote;
    nvml_link_version_t version;
    nvml_pci_info_t pci;
    unsigned g, l, v, j, k;
    void *dev;
    int active;
    char peer[16];

    if (lib == NULL) {
        return;
    }
    init     = (nvml_init_t)dlsym(lib, "nvmlInit_v2");
    by_busid = (nvml_by_busid_t)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    state    = (nvml_link_state_t)dlsym(lib, "nvmlDeviceGetNvLinkState");
    remote   = (nvml_link_remote_t)dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    version  = (nvml_link_version_t)dlsym(lib, "nvmlDeviceGetNvLinkVersion");
    if (!init || !by_busid || !state || !remote || !version || (init() != 0)) {
        dlclose(lib);
        return;
    }
    for (g = 0; g < topo->ngpus; g++) {
        ringk_topo_gpu_t *gpu = &topo->gpus[g];

        if (by_busid(gpu->busid, &dev) != 0) {
            continue;
        }
        for (l = 0; l < NVML_MAX_LINKS; l++) {
            if ((state(dev, l, &active) != 0) || !active ||
                (remote(dev, l, &pci) != 0)) {
                continue;
            }
            if (version(dev, l, &v) == 0) {
                gpu->nvlink_version = (v > 5) ? 5 : v;
            }
            snprintf(peer, sizeof(peer), "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);
            for (k = 0; k < topo->ngpus; k++) {
                if (!strcmp(topo->gpus[k].busid, peer)) {
                    break;
                }
            }
            if (k == topo->ngpus) {
                gpu->nvswitch_links++; /* the far end is not a GPU: an NVSwitch */
                continue;
            }
            for (j = 0; j < gpu->nnvlinks; j++) {
                if (!strcmp(gpu->nvlinks[j].busid, peer)) {
                    gpu->nvlinks[j].links++;
                    break;
                }
            }
            if ((j == gpu->nnvlinks) && (j < RINGK_TOPO_MAX_NVLINK)) {
                snprintf(gpu->nvlinks[j].busid, sizeof(gpu->nvlinks[j].busid), "%s", peer);
                gpu->nvlinks[j].links = 1;
                gpu->nnvlinks++;
            }
        }
    }
    dlclose(lib);
}

/* hwloc 2.9 can crash on some malformed XML files (found by test/fuzz/fuzz_topo: a SEGV in
 * hwloc_bitmap_or under hwloc_topology_load). A file is therefore loaded once in a child
 * process first; if that child dies, the file is refused instead of taking the caller down.
 * @return 0 when the child loaded it (or failed cleanly), -EINVAL when it crashed. */
static int topo_file_survives(const char *xml_path, char *err, size_t err_len)
{
    hwloc_topology_t t;
    int status;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        return 0; /* cannot check: load it directly */
    }
    if (pid == 0) {
        /* die quietly: no crash handler of the host program (UCX installs one) in the child */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        signal(SIGFPE, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        if ((hwloc_topology_init(&t) == 0) && (hwloc_topology_set_xml(t, xml_path) == 0)) {
            hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
            hwloc_topology_load(t);
        }
        _exit(0);
    }
    while ((waitpid(pid, &status, 0) < 0) && (errno == EINTR)) {
    }
    if (WIFSIGNALED(status)) {
        snprintf(err, err_len, "topology file '%s' is malformed: hwloc crashed reading it "
                 "(signal %d)", xml_path, WTERMSIG(status));
        return -EINVAL;
    }
    return 0;
}

int ringk_topo_load(ringk_topo_t *topo, const char *xml_path, char *err, size_t err_len)
{
    hwloc_topology_t t;
    hwloc_obj_t obj, up;
    unsigned i;
    int ret;

    memset(topo, 0, sizeof(*topo));
    for (i = 0; i < 64; i++) {
        topo->numa_package[i] = -1;
    }
    if (xml_path != NULL) {
        if (access(xml_path, R_OK) != 0) {
            ret = -errno;
            snprintf(err, err_len, "cannot read topology file '%s': %s", xml_path,
                     strerror(errno));
            return ret;
        }
        snprintf(topo->source, sizeof(topo->source), "%s", xml_path);
        ret = topo_file_survives(xml_path, err, err_len);
        if (ret != 0) {
            return ret;
        }
    } else {
        snprintf(topo->source, sizeof(topo->source), "this machine");
    }
    if (hwloc_topology_init(&t) != 0) {
        snprintf(err, err_len, "hwloc_topology_init failed");
        return -ENOMEM;
    }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    if ((xml_path != NULL) && (hwloc_topology_set_xml(t, xml_path) != 0)) {
        snprintf(err, err_len, "topology file '%s' cannot be used by hwloc: %s", xml_path,
                 strerror(errno));
        hwloc_topology_destroy(t);
        return -EINVAL;
    }
    if (hwloc_topology_load(t) != 0) {
        snprintf(err, err_len, "topology file '%s' is not a valid hwloc XML topology",
                 xml_path ? xml_path : "(this machine)");
        hwloc_topology_destroy(t);
        return -EINVAL;
    }
    topo->npackages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
    topo->nnuma     = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    topo->ncores    = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    for (obj = NULL; (obj = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, obj)) != NULL;) {
        for (up = obj->parent; up != NULL; up = up->parent) {
            if ((up->type == HWLOC_OBJ_PACKAGE) && (obj->os_index < 64)) {
                topo->numa_package[obj->os_index] = (int)up->logical_index;
                break;
            }
        }
    }
    ret = 0;
    for (obj = NULL; (obj = hwloc_get_next_pcidev(t, obj)) != NULL;) {
        /* NVIDIA display or 3D controllers */
        if ((obj->attr->pcidev.vendor_id != 0x10de) ||
            ((obj->attr->pcidev.class_id >> 8) != 0x03)) {
            continue;
        }
        if (topo->ngpus == RINGK_TOPO_MAX_GPUS) {
            snprintf(err, err_len, "more than %d GPUs in %s", RINGK_TOPO_MAX_GPUS, topo->source);
            ret = -E2BIG;
            break;
        }
        ret = gpu_from_pcidev(t, obj, &topo->gpus[topo->ngpus], err, err_len);
        if (ret != 0) {
            break;
        }
        topo->ngpus++;
    }
    hwloc_topology_destroy(t);
    if ((ret == 0) && (xml_path == NULL)) {
        nvml_fill(topo);
    }
    return ret;
}

/* ---- classification (pure) -------------------------------------------------------------- */

static unsigned direct_nvlinks(const ringk_topo_gpu_t *a, const ringk_topo_gpu_t *b)
{
    unsigned i;

    for (i = 0; i < a->nnvlinks; i++) {
        if (!strcmp(a->nvlinks[i].busid, b->busid)) {
            return a->nvlinks[i].links;
        }
    }
    return 0;
}

static double min_pos(double x, double y)
{
    if (x <= 0) {
        return y;
    }
    if (y <= 0) {
        return x;
    }
    return (x < y) ? x : y;
}

/* A pair joined by NVLink, directly or through an NVSwitch fabric: classified, 1; else 0. */
static int classify_nvlink(const ringk_topo_gpu_t *a, const ringk_topo_gpu_t *b,
                           ringk_topo_pair_t *p)
{
    unsigned links, version;

    links = direct_nvlinks(a, b);
    if (links == 0) {
        links = direct_nvlinks(b, a);
    }
    version = (a->nvlink_version < b->nvlink_version) ? a->nvlink_version : b->nvlink_version;
    if (links > 0) {
        p->cls     = RINGK_CLASS_NVLINK;
        p->nvlinks = links;
        p->bw_gbps = links * nvlink_gbps_per_link[version];
        p->lat_us  = LAT_BASE_US;
        snprintf(p->reason, sizeof(p->reason), "%u direct NVLink%s (gen %u) between %s and %s",
                 links, links > 1 ? "s" : "", version, a->busid, b->busid);
        return 1;
    }
    if ((a->nvswitch_links > 0) && (b->nvswitch_links > 0)) {
        links      = (a->nvswitch_links < b->nvswitch_links) ? a->nvswitch_links
                                                              : b->nvswitch_links;
        p->cls     = RINGK_CLASS_NVLINK;
        p->nvlinks = links;
        p->bw_gbps = links * nvlink_gbps_per_link[version];
        p->lat_us  = LAT_BASE_US + LAT_SWITCH_US;
        snprintf(p->reason, sizeof(p->reason), "NVSwitch fabric: %u NVLinks (gen %u) from each "
                 "of %s and %s", links, version, a->busid, b->busid);
        return 1;
    }
    return 0;
}

/* A pair that only PCIe and the host's interconnect join, @a link the narrower of their links. */
static void classify_pci(const ringk_topo_gpu_t *a, const ringk_topo_gpu_t *b, double link,
                         ringk_topo_pair_t *p)
{
    unsigned common, i;

    if ((a->host_bridge == 0) || (b->host_bridge == 0)) {
        p->cls = RINGK_CLASS_NONE;
        snprintf(p->reason, sizeof(p->reason), "%s has no PCI host bridge in the topology",
                 (a->host_bridge == 0) ? a->busid : b->busid);
        return;
    }
    if (a->host_bridge == b->host_bridge) {
        for (common = 0; (common < a->path_len) && (common < b->path_len) &&
                         (a->path[common] == b->path[common]); common++) {
        }
        if (common > 0) {
            /* The deepest shared bridge is a PCIe switch; count the switch levels crossed. */
            i           = ((a->path_len > b->path_len) ? a->path_len : b->path_len) - common;
            p->cls      = RINGK_CLASS_PCIE_SWITCH;
            p->switches = i + 1;
            p->bw_gbps  = link;
            p->lat_us   = LAT_BASE_US + LAT_SWITCH_US * (a->path_len + b->path_len - 2 * common +
                                                         1);
            snprintf(p->reason, sizeof(p->reason), "%s and %s share a PCIe switch (%u switch "
                     "level%s), not the host bridge", a->busid, b->busid, p->switches,
                     p->switches > 1 ? "s" : "");
            return;
        }
        p->cls     = RINGK_CLASS_HOST_BRIDGE;
        p->bw_gbps = link;
        p->lat_us  = LAT_BASE_US + LAT_HOST_BRIDGE_US + LAT_SWITCH_US * (a->path_len + b->path_len);
        snprintf(p->reason, sizeof(p->reason), "%s and %s meet only at their host bridge",
                 a->busid, b->busid);
        return;
    }
    if ((a->package >= 0) && (a->package == b->package)) {
        p->cls     = RINGK_CLASS_HOST_BRIDGE;
        p->bw_gbps = link;
        p->lat_us  = LAT_BASE_US + 2 * LAT_HOST_BRIDGE_US +
                     LAT_SWITCH_US * (a->path_len + b->path_len);
        snprintf(p->reason, sizeof(p->reason), "%s and %s are under different host bridges of "
                 "package %d", a->busid, b->busid, a->package);
        return;
    }
    if ((a->package < 0) || (b->package < 0)) {
        p->cls = RINGK_CLASS_NONE;
        snprintf(p->reason, sizeof(p->reason), "the package of %s is unknown",
                 (a->package < 0) ? a->busid : b->busid);
        return;
    }
    p->cls     = RINGK_CLASS_CROSS_SOCKET;
    p->bw_gbps = link * SOCKET_BW_FACTOR;
    p->lat_us  = LAT_BASE_US + 2 * LAT_HOST_BRIDGE_US + LAT_SOCKET_US +
                 LAT_SWITCH_US * (a->path_len + b->path_len);
    snprintf(p->reason, sizeof(p->reason), "%s (package %d) and %s (package %d) are on "
             "different sockets", a->busid, a->package, b->busid, b->package);
}

void ringk_topo_classify(const ringk_topo_t *topo, unsigned ia, unsigned ib,
                         ringk_topo_pair_t *p)
{
    const ringk_topo_gpu_t *a, *b;
    double link;

    memset(p, 0, sizeof(*p));
    if ((ia >= topo->ngpus) || (ib >= topo->ngpus)) {
        p->cls = RINGK_CLASS_NONE;
        snprintf(p->reason, sizeof(p->reason), "no GPU %u in the topology",
                 (ia >= topo->ngpus) ? ia : ib);
        return;
    }
    a    = &topo->gpus[ia];
    b    = &topo->gpus[ib];
    link = min_pos(a->link_gbps, b->link_gbps);
    if (ia == ib) {
        p->cls     = RINGK_CLASS_SAME_DEVICE;
        p->bw_gbps = 0; /* device memory: not a link, not estimated */
        p->lat_us  = LAT_BASE_US;
        snprintf(p->reason, sizeof(p->reason), "the same GPU %s", a->busid);
        return;
    }

    if (!classify_nvlink(a, b, p)) {
        classify_pci(a, b, link, p);
    }
}

void ringk_topo_classify_numa(const ringk_topo_t *topo, unsigned ig, int numa,
                              ringk_topo_pair_t *p)
{
    const ringk_topo_gpu_t *g;
    int pkg;

    memset(p, 0, sizeof(*p));
    if ((ig >= topo->ngpus) || (numa < 0) || (numa >= 64) || (topo->numa_package[numa] < 0)) {
        p->cls = RINGK_CLASS_NONE;
        snprintf(p->reason, sizeof(p->reason), "no GPU %u or NUMA node %d in the topology", ig,
                 numa);
        return;
    }
    g   = &topo->gpus[ig];
    pkg = topo->numa_package[numa];
    if (g->package < 0) {
        p->cls = RINGK_CLASS_NONE;
        snprintf(p->reason, sizeof(p->reason), "the package of %s is unknown", g->busid);
    } else if (g->package == pkg) {
        p->cls     = RINGK_CLASS_HOST_BRIDGE;
        p->bw_gbps = g->link_gbps;
        p->lat_us  = LAT_BASE_US + LAT_HOST_BRIDGE_US + LAT_SWITCH_US * g->path_len;
        snprintf(p->reason, sizeof(p->reason), "NUMA node %d is in %s's package %d", numa,
                 g->busid, pkg);
    } else {
        p->cls     = RINGK_CLASS_CROSS_SOCKET;
        p->bw_gbps = g->link_gbps * SOCKET_BW_FACTOR;
        p->lat_us  = LAT_BASE_US + LAT_HOST_BRIDGE_US + LAT_SOCKET_US +
                     LAT_SWITCH_US * g->path_len;
        snprintf(p->reason, sizeof(p->reason), "NUMA node %d is in package %d, %s in package "
                 "%d", numa, pkg, g->busid, g->package);
    }
}
