/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk path policy: RINGK_P2P_LEVEL / RINGK_PATH parsed, bus ids packed, and the path a pair of
 * GPUs takes under a policy, checked once on the hardware where a P2P path is chosen. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#define _GNU_SOURCE
#include "ringk_topo.h"
#include "ringk_cuda.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- policy -------------------------------------------------------------------------------- */

static const struct {
    const char        *name;
    ringk_path_class_t cls;
} level_names[] = {
    {"SAME_DEVICE", RINGK_CLASS_SAME_DEVICE}, {"LOC", RINGK_CLASS_SAME_DEVICE},
    {"NVLINK", RINGK_CLASS_NVLINK},           {"NVL", RINGK_CLASS_NVLINK},
    {"PCIE_SWITCH", RINGK_CLASS_PCIE_SWITCH}, {"PIX", RINGK_CLASS_PCIE_SWITCH},
    {"PXB", RINGK_CLASS_PCIE_SWITCH},         {"HOST_BRIDGE", RINGK_CLASS_HOST_BRIDGE},
    {"PHB", RINGK_CLASS_HOST_BRIDGE},         {"CROSS_SOCKET", RINGK_CLASS_CROSS_SOCKET},
    {"SYS", RINGK_CLASS_CROSS_SOCKET},
};

int ringk_policy_parse_named(const char *p2p_level, const char *level_name, const char *path,
                             const char *path_name, ringk_policy_t *policy_p, char *err,
                             size_t err_len)
{
    ringk_policy_t pol = {.p2p_level = RINGK_CLASS_PCIE_SWITCH, .forced = 0};
    unsigned i;

    if ((p2p_level != NULL) && (*p2p_level != '\0')) {
        for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
            if (!strcasecmp(p2p_level, level_names[i].name)) {
                break;
            }
        }
        if (i == sizeof(level_names) / sizeof(level_names[0])) {
            snprintf(err, err_len, "%s '%s' is not one of SAME_DEVICE (LOC), "
                     "NVLINK (NVL), PCIE_SWITCH (PIX, PXB), HOST_BRIDGE (PHB), "
                     "CROSS_SOCKET (SYS)", level_name, p2p_level);
            return -EINVAL;
        }
        pol.p2p_level  = level_names[i].cls;
        pol.level_name = level_name;
    }
    if ((path != NULL) && (*path != '\0')) {
        for (i = 0; i < RINGK_PATH_COUNT; i++) {
            if (!strcasecmp(path, ringk_path_name((ringk_path_t)i))) {
                break;
            }
        }
        if (i == RINGK_PATH_COUNT) {
            snprintf(err, err_len, "%s '%s' is not one of P2P_NVLINK, P2P_PCIE, "
                     "CUDA_IPC, HOST_STAGED", path_name, path);
            return -EINVAL;
        }
        pol.forced    = 1;
        pol.path      = (ringk_path_t)i;
        pol.path_name = path_name;
    }
    *policy_p = pol;
    return 0;
}

int ringk_policy_parse(const char *p2p_level, const char *path, ringk_policy_t *policy_p,
                       char *err, size_t err_len)
{
    return ringk_policy_parse_named(p2p_level, "RINGK_P2P_LEVEL", path, "RINGK_PATH", policy_p,
                                    err, err_len);
}

int ringk_policy_from_env(ringk_policy_t *policy_p, char *err, size_t err_len)
{
    return ringk_policy_parse(getenv("RINGK_P2P_LEVEL"), getenv("RINGK_PATH"), policy_p, err,
                              err_len);
}

#define RINGK_BUSID_VALID (1ull << 63)

uint64_t ringk_busid_pack(const char *busid)
{
    unsigned domain = 0, bus, dev, fn;
    int n = -1;

    if (busid == NULL) {
        return 0;
    }
    if ((sscanf(busid, "%8x:%2x:%2x.%1x%n", &domain, &bus, &dev, &fn, &n) != 4) ||
        (busid[n] != '\0')) {
        domain = 0;
        n      = -1;
        if ((sscanf(busid, "%2x:%2x.%1x%n", &bus, &dev, &fn, &n) != 3) || (busid[n] != '\0')) {
            return 0;
        }
    }
    if ((dev > 31) || (fn > 7) || !isxdigit((unsigned char)busid[0])) {
        return 0;
    }
    return RINGK_BUSID_VALID | ((uint64_t)domain << 16) | (bus << 8) | (dev << 3) | fn;
}

void ringk_busid_unpack(uint64_t packed, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%x", (unsigned)((packed >> 16) & 0xffffffffu),
             (unsigned)((packed >> 8) & 0xff), (unsigned)((packed >> 3) & 0x1f),
             (unsigned)(packed & 7));
}

int ringk_topo_find_gpu(const ringk_topo_t *topo, const char *busid)
{
    uint64_t want = ringk_busid_pack(busid);
    unsigned i;

    for (i = 0; (want != 0) && (i < topo->ngpus); i++) {
        if (ringk_busid_pack(topo->gpus[i].busid) == want) {
            return (int)i;
        }
    }
    return -1;
}

int ringk_policy_apply(const ringk_policy_t *pol, const ringk_topo_pair_t *pair, char *reason,
                       size_t reason_len)
{
    const char *cls        = ringk_path_class_name(pair->cls);
    const char *lvl        = ringk_path_class_name(pol->p2p_level);
    const char *level_name = pol->level_name ? pol->level_name : "RINGK_P2P_LEVEL";

    if (pol->forced) {
        if (((pol->path == RINGK_PATH_P2P_NVLINK) && (pair->cls != RINGK_CLASS_NVLINK)) ||
            (((pol->path == RINGK_PATH_P2P_PCIE) || (pol->path == RINGK_PATH_CUDA_IPC)) &&
             (pair->cls == RINGK_CLASS_NONE))) {
            snprintf(reason, reason_len, "%s=%s cannot serve a %s pair (%s)",
                     pol->path_name ? pol->path_name : "RINGK_PATH",
                     ringk_path_name(pol->path), cls, pair->reason);
            return -EINVAL;
        }
        snprintf(reason, reason_len, "forced by %s=%s (%s: %s)",
                 pol->path_name ? pol->path_name : "RINGK_PATH", ringk_path_name(pol->path),
                 cls, pair->reason);
        return pol->path;
    }
    switch (pair->cls) {
    case RINGK_CLASS_SAME_DEVICE:
        snprintf(reason, reason_len, "%s: one GPU, its memory mapped by CUDA IPC", pair->reason);
        return RINGK_PATH_CUDA_IPC;
    case RINGK_CLASS_NONE:
        snprintf(reason, reason_len, "%s: staged through host memory", pair->reason);
        return RINGK_PATH_HOST_STAGED;
    default:
        break;
    }
    if (pair->cls > pol->p2p_level) {
        snprintf(reason, reason_len, "%s is beyond %s=%s (%s): staged through host memory",
                 cls, level_name, lvl, pair->reason);
        return RINGK_PATH_HOST_STAGED;
    }
    if (pair->cls == RINGK_CLASS_NVLINK) {
        snprintf(reason, reason_len, "%s", pair->reason);
        return RINGK_PATH_P2P_NVLINK;
    }
    snprintf(reason, reason_len, "%s within %s=%s (%s)", cls, level_name, lvl, pair->reason);
    return RINGK_PATH_P2P_PCIE;
}

/* The canaries this process ran, by pair of bus ids: each pair's first endpoint runs it, the
 * later ones take its outcome. The canary allocates, sets and frees GPU memory, calls that can
 * wait for every kernel running on the device (docs/gpu.md, "Implicit synchronization"), so
 * it runs once per pair, at the first endpoint (a job of libringk makes its endpoints before it
 * launches device kernels), and not at all while the process has ringk device kernels (the
 * path is then reported unverified, and the next endpoint of the pair tries again). A full
 * table runs the canary again. */
#define CANARY_CACHE 64
static struct {
    pthread_mutex_t mu;
    unsigned        n;
    struct {
        char a[16], b[16];
        int  ret;
        char why[256];
    } e[CANARY_CACHE];
} canaries = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ringk_cuda_p2p_canary() of GPUs @a a and @a b, or the outcome of this process's first run of
 * it for that pair (then *@a cached is 1). */
static int canary_once(const char *a, const char *b, char *why, size_t why_len, int *cached)
{
    unsigned i;
    int ret;

    pthread_mutex_lock(&canaries.mu);
    for (i = 0; i < canaries.n; i++) {
        if ((strcmp(canaries.e[i].a, a) == 0) && (strcmp(canaries.e[i].b, b) == 0)) {
            snprintf(why, why_len, "%s", canaries.e[i].why);
            ret = canaries.e[i].ret;
            pthread_mutex_unlock(&canaries.mu);
            *cached = 1;
            return ret;
        }
    }
    /* under the lock: two endpoints of one pair made at once run it once */
    ret     = ringk_cuda_p2p_canary(a, b, why, why_len);
    *cached = 0;
    if ((ret != -EBUSY) && (canaries.n < CANARY_CACHE)) { /* busy: run at a later endpoint */
        snprintf(canaries.e[canaries.n].a, sizeof(canaries.e[0].a), "%s", a);
        snprintf(canaries.e[canaries.n].b, sizeof(canaries.e[0].b), "%s", b);
        snprintf(canaries.e[canaries.n].why, sizeof(canaries.e[0].why), "%s", why);
        canaries.e[canaries.n++].ret = ret;
    }
    pthread_mutex_unlock(&canaries.mu);
    return ret;
}

int ringk_topo_verify_path(const ringk_topo_t *topo, unsigned a, unsigned b, int path,
                           char *reason, size_t reason_len, int *verified_p)
{
    size_t len = strlen(reason);
    const char *when;
    char why[256];
    int cached, ret;

    if (verified_p != NULL) {
        *verified_p = 0;
    }
    if ((path != RINGK_PATH_P2P_NVLINK) && (path != RINGK_PATH_P2P_PCIE)) {
        return path;
    }
    if (strcmp(topo->source, "this machine") != 0) {
        snprintf(reason + len, reason_len - len, "; not verified (topology from a file)");
        return path;
    }
    if ((a >= topo->ngpus) || (b >= topo->ngpus)) {
        return RINGK_PATH_HOST_STAGED;
    }
    ret = canary_once(topo->gpus[a].busid, topo->gpus[b].busid, why, sizeof(why), &cached);
    if (ret == -EBUSY) {
        snprintf(reason + len, reason_len - len, "; unverified (%s)", why);
        return path;
    }
    if (ret != 0) {
        when = cached ? ", at this process's first endpoint of the pair" : "";
        snprintf(reason + len, reason_len - len, "; %s failed its canary (%s%s): falling back "
                 "to HOST_STAGED", ringk_path_name((ringk_path_t)path), why, when);
        return RINGK_PATH_HOST_STAGED;
    }
    when = cached ? " at this process's first endpoint of the pair" : "";
    snprintf(reason + len, reason_len - len, "; %s%s", why, when);
    if (verified_p != NULL) {
        *verified_p = 1;
    }
    return path;
}
