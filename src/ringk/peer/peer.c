/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: two GPUs of one process (ringk_peer.h): what the topology (this machine's, or
 * RINGK_TOPO_FILE's) and the path policy say of a pair, peer access, and copies between them by
 * the path that policy picks. The CUDA calls are core's (ringk_cuda_peer.c). */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "../ringk_log.h"
#include <core/ringk_cuda.h>
#include <core/ringk_topo.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The topology the pairs are classified in: loaded at the first query, again when
 * RINGK_TOPO_FILE names another file. */
static struct {
    pthread_mutex_t mu;
    ringk_topo_t   *topo;
    char            file[256];  /* what it came from: "" for this machine */
} peer_topo = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The topology under peer_topo.mu (held on return), or NULL (unlocked) with the reason. */
static const ringk_topo_t *peer_topo_lock(char *why, size_t why_len)
{
    const char *file = getenv("RINGK_TOPO_FILE");
    int ret;

    if ((file == NULL) || (file[0] == '\0')) {
        file = "";
    }
    pthread_mutex_lock(&peer_topo.mu);
    if ((peer_topo.topo != NULL) && (strcmp(peer_topo.file, file) == 0)) {
        return peer_topo.topo;
    }
    if ((peer_topo.topo == NULL) &&
        ((peer_topo.topo = malloc(sizeof(*peer_topo.topo))) == NULL)) {
        pthread_mutex_unlock(&peer_topo.mu);
        snprintf(why, why_len, "out of memory for the topology");
        return NULL;
    }
    peer_topo.file[0] = '\0';
    ret = ringk_topo_load(peer_topo.topo, (file[0] != '\0') ? file : NULL, why, why_len);
    if (ret != 0) {
        free(peer_topo.topo);
        peer_topo.topo = NULL;
        pthread_mutex_unlock(&peer_topo.mu);
        return NULL;
    }
    snprintf(peer_topo.file, sizeof(peer_topo.file), "%s", file);
    return peer_topo.topo;
}

/* The movement a path is between two GPUs of one process. */
static int peer_move(ringk_peer_path_t path)
{
    switch (path) {
    case RINGK_PEER_PATH_SAME_DEVICE: return RINGK_CUDA_MOVE_SAME;
    case RINGK_PEER_PATH_HOST_STAGED: return RINGK_CUDA_MOVE_STAGED;
    default:                          return RINGK_CUDA_MOVE_PEER;
    }
}

/* The path of GPUs @a a and @a b of @a topo as the policy in the environment gives it, in
 * @a info (class, link, estimates, path, reason): 0, or -EINVAL with the reason. */
static int peer_decide(const ringk_topo_t *topo, int a, int b, ringk_peer_info_t *info)
{
    char why[RINGK_PEER_REASON_LEN];
    ringk_topo_pair_t pair;
    ringk_policy_t pol;
    int path;

    ringk_topo_classify(topo, (unsigned)a, (unsigned)b, &pair);
    info->cls        = (ringk_peer_class_t)pair.cls;
    info->nvlinks    = pair.nvlinks;
    info->est_gbps   = pair.bw_gbps;
    info->est_lat_us = pair.lat_us;
    ringk_path_class_label(&pair, info->link, sizeof(info->link));
    if (ringk_policy_from_env(&pol, info->reason, sizeof(info->reason)) != 0) {
        return -EINVAL;
    }
    if ((pair.cls == RINGK_CLASS_SAME_DEVICE) && !pol.forced) {
        info->path = RINGK_PEER_PATH_SAME_DEVICE;
        snprintf(info->reason, sizeof(info->reason), "%s: the device's own copy", pair.reason);
        return 0;
    }
    if ((path = ringk_policy_apply(&pol, &pair, why, sizeof(why))) < 0) {
        snprintf(info->reason, sizeof(info->reason), "%s", why);
        return -EINVAL;
    }
    if ((path == RINGK_PATH_CUDA_IPC) && (pair.cls != RINGK_CLASS_SAME_DEVICE)) {
        /* one process needs no IPC mapping: the peer's memory is reached by peer access */
        path = (pair.cls == RINGK_CLASS_NVLINK) ? RINGK_PATH_P2P_NVLINK : RINGK_PATH_P2P_PCIE;
        snprintf(why + strlen(why), sizeof(why) - strlen(why), "; in one process by peer "
                 "access: %s", ringk_path_name((ringk_path_t)path));
    } else if (path == RINGK_PATH_CUDA_IPC) {
        path = -1; /* one device forced to CUDA_IPC: its own copy */
        snprintf(why + strlen(why), sizeof(why) - strlen(why), "; in one process: the "
                 "device's own copy");
    }
    if (path >= 0) {
        path = ringk_topo_verify_path(topo, (unsigned)a, (unsigned)b, path, why, sizeof(why),
                                      &info->verified);
    }
    info->path       = (path < 0) ? RINGK_PEER_PATH_SAME_DEVICE : (ringk_peer_path_t)path;
    info->can_access = (path == RINGK_PATH_P2P_NVLINK) || (path == RINGK_PATH_P2P_PCIE);
    snprintf(info->reason, sizeof(info->reason), "GPU%d-GPU%d of %.120s: %.370s", a, b,
             topo->source, why);
    return 0;
}

/* Native atomics and, with RINGK_PEER_QUERY_MEASURE, the timed copies, of a pair on this
 * machine: 0, or the error of the measurement with the reason. */
static int peer_ask_cuda(unsigned flags, ringk_peer_info_t *info)
{
    char why[256];
    int a, b, ret;

    if ((ringk_cuda_busid_dev(info->busid, &a, why, sizeof(why)) != 0) ||
        (ringk_cuda_busid_dev(info->peer_busid, &b, why, sizeof(why)) != 0)) {
        if (!(flags & RINGK_PEER_QUERY_MEASURE)) {
            return 0; /* a topology without this process's GPUs: nothing CUDA can add */
        }
        snprintf(info->reason, sizeof(info->reason), "cannot measure: %s", why);
        return -ENODEV;
    }
    info->native_atomics = ringk_cuda_peer_atomics(a, b);
    if (!(flags & RINGK_PEER_QUERY_MEASURE)) {
        return 0;
    }
    if ((info->path != RINGK_PEER_PATH_SAME_DEVICE) &&
        (info->path != RINGK_PEER_PATH_HOST_STAGED) &&
        (((ret = ringk_cuda_peer_set(b, a, 1, why, sizeof(why))) != 0) ||
         ((ret = ringk_cuda_peer_set(a, b, 1, why, sizeof(why))) != 0))) {
        snprintf(info->reason, sizeof(info->reason), "cannot measure: %s", why);
        return ret;
    }
    ret = ringk_cuda_peer_measure(a, b, peer_move(info->path), &info->gbps, &info->lat_us, why,
                                  sizeof(why));
    if (ret != 0) {
        snprintf(info->reason, sizeof(info->reason), "cannot measure: %s", why);
    }
    return ret;
}

int ringk_peer_query(const char *busid, const char *peer_busid, unsigned flags,
                     ringk_peer_info_t *info_p)
{
    uint64_t pa, pb;
    const ringk_topo_t *topo;
    int a, b, ret, here;

    if ((busid == NULL) || (peer_busid == NULL) || (info_p == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (busid == NULL) ? "busid" :
                                 (peer_busid == NULL) ? "peer_busid" : "info_p");
    }
    if (flags & ~(unsigned)RINGK_PEER_QUERY_MEASURE) {
        return ringk_log_bad_arg(NULL, __func__, "flags 0x%x has unknown bits (known: 0x%x)",
                                 flags, (unsigned)RINGK_PEER_QUERY_MEASURE);
    }
    if (((pa = ringk_busid_pack(busid)) == 0) || ((pb = ringk_busid_pack(peer_busid)) == 0)) {
        return ringk_log_bad_arg(NULL, __func__, "'%.32s' is not a PCI bus id "
                                 "(DDDD:BB:DD.F)", (pa == 0) ? busid : peer_busid);
    }
    memset(info_p, 0, sizeof(*info_p));
    info_p->native_atomics = -1;
    ringk_busid_unpack(pa, info_p->busid, sizeof(info_p->busid));
    ringk_busid_unpack(pb, info_p->peer_busid, sizeof(info_p->peer_busid));
    if ((topo = peer_topo_lock(info_p->reason, sizeof(info_p->reason))) == NULL) {
        return -ENODEV;
    }
    a = ringk_topo_find_gpu(topo, info_p->busid);
    b = ringk_topo_find_gpu(topo, info_p->peer_busid);
    if ((a < 0) || (b < 0)) {
        info_p->cls = RINGK_PEER_CLASS_NONE;
        snprintf(info_p->link, sizeof(info_p->link), "NONE");
        snprintf(info_p->reason, sizeof(info_p->reason), "GPU %s is not in the topology of %s",
                 (a < 0) ? info_p->busid : info_p->peer_busid, topo->source);
        pthread_mutex_unlock(&peer_topo.mu);
        return -ENOENT;
    }
    ret  = peer_decide(topo, a, b, info_p);
    here = (strcmp(topo->source, "this machine") == 0);
    pthread_mutex_unlock(&peer_topo.mu);
    if ((ret == 0) && here) {
        ret = peer_ask_cuda(flags, info_p);
    } else if ((ret == 0) && (flags & RINGK_PEER_QUERY_MEASURE)) {
        snprintf(info_p->reason, sizeof(info_p->reason), "cannot measure: the topology is "
                 "RINGK_TOPO_FILE's (%s), not this machine's", topo->source);
        ret = -ENODEV;
    }
    return ret;
}

/* ringk_peer_query() of CUDA devices @a dev and @a peer. */
static int peer_query_devs(const char *fn, int dev, int peer, unsigned flags,
                           ringk_peer_info_t *info_p)
{
    char a[16], b[16];

    if (info_p == NULL) {
        return ringk_log_bad_arg(NULL, fn, "info_p is NULL");
    }
    memset(info_p, 0, sizeof(*info_p));
    info_p->native_atomics = -1;
    if ((dev < 0) || (peer < 0)) {
        return ringk_log_bad_arg(NULL, fn, "device %d is negative", (dev < 0) ? dev : peer);
    }
    if ((ringk_cuda_dev_busid(dev, a, sizeof(a), info_p->reason, sizeof(info_p->reason)) != 0) ||
        (ringk_cuda_dev_busid(peer, b, sizeof(b), info_p->reason, sizeof(info_p->reason)) != 0)) {
        return -ENODEV;
    }
    return ringk_peer_query(a, b, flags, info_p);
}

int ringk_peer_can_access(int dev, int peer, ringk_peer_info_t *info_p)
{
    return peer_query_devs(__func__, dev, peer, 0, info_p);
}

int ringk_peer_capability(int dev, int peer, ringk_peer_info_t *info_p)
{
    return peer_query_devs(__func__, dev, peer, RINGK_PEER_QUERY_MEASURE, info_p);
}

static int peer_set(const char *fn, int dev, int peer, int enable)
{
    char why[256], busid[16];
    int ret;

    if ((dev < 0) || (peer < 0) || (dev == peer)) {
        return ringk_log_bad_arg(NULL, fn, "devices %d and %d: two different devices, 0 or "
                                 "more, are needed", dev, peer);
    }
    if ((ringk_cuda_dev_busid(dev, busid, sizeof(busid), why, sizeof(why)) != 0) ||
        (ringk_cuda_dev_busid(peer, busid, sizeof(busid), why, sizeof(why)) != 0)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "%s: %s", fn, why);
        return -ENODEV;
    }
    if ((ret = ringk_cuda_peer_set(dev, peer, enable, why, sizeof(why))) != 0) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "%s: %s", fn, why);
    }
    return ret;
}

int ringk_peer_enable(int dev, int peer)
{
    return peer_set(__func__, dev, peer, 1);
}

int ringk_peer_disable(int dev, int peer)
{
    return peer_set(__func__, dev, peer, 0);
}

/* The devices of a copy's two ends and its path: 0, or the refusal (logged). */
static int peer_copy_plan(const char *fn, void *dst, const void *src, int *dst_dev,
                          int *src_dev, ringk_peer_path_t *path_p)
{
    ringk_peer_info_t info;
    char why[256], a[16], b[16];
    int ret;

    if ((dst == NULL) || (src == NULL)) {
        return ringk_log_bad_arg(NULL, fn, "%s is NULL", (dst == NULL) ? "dst" : "src");
    }
    if (((ret = ringk_cuda_ptr_ordinal(dst, dst_dev, why, sizeof(why))) != 0) ||
        ((ret = ringk_cuda_ptr_ordinal(src, src_dev, why, sizeof(why))) != 0)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "%s: %s", fn, why); /* names the pointer */
        return ret;
    }
    if ((ringk_cuda_dev_busid(*src_dev, a, sizeof(a), why, sizeof(why)) != 0) ||
        (ringk_cuda_dev_busid(*dst_dev, b, sizeof(b), why, sizeof(why)) != 0)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "%s: %s", fn, why);
        return -ENODEV;
    }
    ret = ringk_peer_query(a, b, 0, &info);
    if ((ret == -ENOENT) || (ret == -ENODEV)) {
        /* no topology, or one without these GPUs (a VM): as the transport, no P2P then */
        info.path = (*dst_dev == *src_dev) ? RINGK_PEER_PATH_SAME_DEVICE :
                                             RINGK_PEER_PATH_HOST_STAGED;
        ringk_log_msg(NULL, RINGK_LOG_WARN, "%s: device %d -> %d: %s: %s", fn, *src_dev,
                      *dst_dev, info.reason, ringk_peer_path_name(info.path));
    } else if (ret != 0) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "%s: device %d -> %d: %s", fn, *src_dev,
                      *dst_dev, info.reason);
        return ret;
    } else if (info.can_access && (*dst_dev != *src_dev) &&
               ((ringk_cuda_peer_set(*dst_dev, *src_dev, 1, why, sizeof(why)) != 0) ||
                (ringk_cuda_peer_set(*src_dev, *dst_dev, 1, why, sizeof(why)) != 0))) {
        ringk_log_msg(NULL, RINGK_LOG_WARN, "%s: device %d -> %d staged through host memory: "
                      "%s", fn, *src_dev, *dst_dev, why);
        info.path = RINGK_PEER_PATH_HOST_STAGED;
    }
    *path_p = info.path;
    return 0;
}

static int peer_copy(const char *fn, void *dst, const void *src, size_t len, int async,
                     void *stream, ringk_peer_path_t *path_p)
{
    ringk_peer_path_t path = RINGK_PEER_PATH_SAME_DEVICE;
    int dst_dev, src_dev, ret;
    char why[384];

    if ((ret = peer_copy_plan(fn, dst, src, &dst_dev, &src_dev, &path)) != 0) {
        return ret;
    }
    ret = (len == 0) ? 0 : ringk_cuda_peer_copy(dst, dst_dev, src, src_dev, len,
                                                peer_move(path), async, stream, why,
                                                sizeof(why));
    if (ret != 0) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "%s: %s (%s)", fn, why,
                      ringk_peer_path_name(path));
        return ret;
    }
    if (path_p != NULL) {
        *path_p = path;
    }
    return 0;
}

int ringk_peer_copy(void *dst, const void *src, size_t len, ringk_peer_path_t *path_p)
{
    return peer_copy(__func__, dst, src, len, 0, NULL, path_p);
}

int ringk_peer_copy_async(void *dst, const void *src, size_t len, void *stream,
                          ringk_peer_path_t *path_p)
{
    return peer_copy(__func__, dst, src, len, 1, stream, path_p);
}

const char *ringk_peer_path_name(ringk_peer_path_t path)
{
    static const char *const names[] = {"P2P_NVLINK", "P2P_PCIE", "CUDA_IPC", "HOST_STAGED",
                                        "SAME_DEVICE"};

    return ((unsigned)path < sizeof(names) / sizeof(names[0])) ? names[path] : "?";
}
