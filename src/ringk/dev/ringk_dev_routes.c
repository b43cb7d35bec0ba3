/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the direct routes of device kernels, resolved by the host: into the device inbox of
 * a kernel of the same device or of another GPU of the process (peer access), and into the
 * device inbox of a device kernel of another process of the node, whose device memory this
 * process maps (ringk_dev_remote.c). A route once made direct is never rewritten (a launch
 * copies its target); it is dropped (back to the host) when its target goes away. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"
#include "core/ringk_cuda.h"
#include "core/ringk_node.h"

#include <inttypes.h>
#include <string.h>
#include <strings.h>

/* Whether device kernel @a s may write device kernel @a t's inbox: the same device, or another
 * GPU whose inboxes take sends of s's (peer access, native atomics, and for cuMem memory shared
 * with other processes access given to s's GPU: ringk_dev_device_t.peer_in, decided at a
 * device's setup) where t's inbox was made with system-scope atomics (one made before the pair
 * was turned on keeps device scope, and sends to it go through the host). */
static int dev_reaches(const ringk_dev_host_t *s, const ringk_dev_host_t *t)
{
    int from = s->device->cuda_index;

    return (t->device == s->device) ||
           ((from >= 0) && (t->device->cuda_index >= 0) &&
            (__atomic_load_n(&t->device->peer_in, __ATOMIC_RELAXED) & (1u << from)) &&
            (t->view.inbox.scope == RINGK_RING_SCOPE_SYSTEM));
}

void ringk_exec_dev_routes(ringk_ctx_t *ctx)
{
    ringk_kernel_t *s, *t;
    ringk_dev_route_t *rt;
    unsigned i, j;

    for (i = 0; i < ctx->nkernels; i++) {
        s = ctx->kernels[i];
        for (j = 0; (s != NULL) && (s->dev != NULL) && (j < s->publishes_to.count); j++) {
            rt = &s->dev->routes[j];
            t  = ringk_kernel_find(ctx, s->publishes_to.names[j]);
            /* an entry once made direct is never rewritten: a send in flight may read it */
            if ((s->dev->route_ever & (1u << j)) || (t == NULL) || (t->dev == NULL) ||
                !dev_reaches(s->dev, t->dev) || !ringk_kernel_accepts(t, s)) {
                continue;
            }
            rt->target.receiver     = t->id;
            rt->target.max_in       = t->max_in;
            rt->target.log2_ncells  = ringk_ring_log2(t->dev->view.inbox.ncells);
            rt->target.cell_size    = t->dev->view.inbox.cell_size;
            rt->target.inbox        = t->dev->view.inbox.shm;
            rt->target.ctl          = t->dev->view.ctl;
            rt->target.event_driven = (t->mode == RINGK_MODE_EVENT_DRIVEN);
            rt->target.scope        = t->dev->view.inbox.scope;
            s->dev->route_ever |= 1u << j;
            /* t holds its region while it is found: a hold taken here cannot be the last */
            __atomic_add_fetch(&t->dev->region->holds, 1, __ATOMIC_RELAXED);
            s->dev->held[j]    = t->dev->region;
            s->dev->held_on[j] = t->dev->device;
            __atomic_store_n(&rt->direct, 1, __ATOMIC_RELEASE);
        }
    }
}

void ringk_exec_dev_route_drop(ringk_ctx_t *ctx, const ringk_kernel_t *gone)
{
    ringk_kernel_t *s;
    unsigned i, j;

    for (i = 0; (gone->dev != NULL) && (i < ctx->nkernels); i++) {
        s = ctx->kernels[i];
        for (j = 0; (s != NULL) && (s->dev != NULL) && (j < s->publishes_to.count); j++) {
            if (s->dev->routes[j].target.ctl == gone->dev->view.ctl) {
                __atomic_store_n(&s->dev->routes[j].direct, 0, __ATOMIC_RELEASE);
            }
        }
    }
}

/* Why a device kernel of CUDA device @a from cannot write the inbox of another process on the
 * GPU at @a busid, another GPU than its own: NULL where this process sees that GPU, the pair
 * has peer access with native atomics (as between two GPUs of one process) and
 * RINGK_DEVICE_PEER is not 0. The mapping of that memory here then gives @a from access. */
static const char *remote_peer_refused(int from, const char *busid, char *why, size_t why_len)
{
    char reason[RINGK_PEER_REASON_LEN + 200];
    ringk_peer_info_t info;
    int owner, bad;

    if (ringk_dev_peer_mode(getenv("RINGK_DEVICE_PEER"), &bad) == RINGK_DEV_PEER_OFF) {
        snprintf(why, why_len, "its inbox is on the GPU at %.15s, this kernel runs on CUDA "
                 "device %d, and RINGK_DEVICE_PEER=0", busid, from);
        return why;
    }
    if (ringk_cuda_busid_dev(busid, &owner, reason, sizeof(reason)) != 0) {
        snprintf(why, why_len, "its inbox is on the GPU at %.15s, which this process does not "
                 "see (CUDA_VISIBLE_DEVICES?): %.120s", busid, reason);
        return why;
    }
    if (!ringk_dev_peer_usable(ringk_peer_can_access(from, owner, &info), &info, reason,
                               sizeof(reason))) {
        snprintf(why, why_len, "its inbox is on CUDA device %d (%.15s), this kernel runs on "
                 "CUDA device %d: %.150s", owner, busid, from, reason);
        return why;
    }
    return NULL;
}

/* Why device kernel of device @a sd cannot write the device memory export @a e names: NULL
 * where it can (the emulated device's into an emulated device's; a GPU's into memory on that
 * same GPU, or on another GPU remote_peer_refused() accepts). */
static const char *remote_device_mismatch(const ringk_dev_device_t *sd,
                                          const ringk_dev_export_t *e, char *why, size_t why_len)
{
    char busid[16] = "";

    if ((e->kind == RINGK_DEV_EXPORT_EMU) && (sd->cuda_index >= 0)) {
        snprintf(why, why_len, "this kernel runs on CUDA device %d, which cannot write the "
                 "emulated device's memory of another process", sd->cuda_index);
        return why;
    }
    if ((e->kind == RINGK_DEV_EXPORT_CUDA) && (sd->cuda_index < 0)) {
        return "its inbox is on a GPU, this kernel runs on the emulated device";
    }
    if (e->kind == RINGK_DEV_EXPORT_CUDA) {
        if (!ringk_cuda_ptr_is_device(sd->mem.dev, busid, sizeof(busid))) {
            snprintf(why, why_len, "CUDA does not name the GPU of CUDA device %d",
                     sd->cuda_index);
            return why;
        }
        if (strncasecmp(busid, e->busid, sizeof(busid)) != 0) {
            return remote_peer_refused(sd->cuda_index, e->busid, why, why_len);
        }
    }
    return NULL;
}

/* Whether the inbox export @a e names, in map @a m, has the header of the ring it says: read
 * in place from a file, copied from device memory by CUDA device @a dev (the sender's: the one
 * that has access to it here). */
static int remote_inbox_is(const struct ringk_dev_rmap *m, const ringk_dev_export_t *e, int dev)
{
    const uint64_t ring = ringk_ring_bytes(1u << e->log2_ncells, e->cell_size);
    uint8_t hdr[RINGK_RING_HDR_BYTES] __attribute__((aligned(RINGK_RING_LINE)));
    ringk_ring_t view;
    const void *at = m->base + e->inbox_off;
    char why[160];

    if (m->kind == RINGK_DEV_EXPORT_CUDA) {
        if (ringk_cuda_copy_on(dev, hdr, m->mem_dev + e->inbox_off, sizeof(hdr), why,
                               sizeof(why)) != 0) {
            return 0;
        }
        at = hdr;
    }
    /* the ring's header only is read: its size, checked, is the export's */
    return (ringk_ring_attach(&view, (void*)at, ring) == 0) &&
           (view.ncells == (1u << e->log2_ncells)) && (view.cell_size == e->cell_size);
}

/* Why kernel @a s's route @a j to kernel @a name of process @a rank, which exported @a e,
 * cannot be direct: NULL when it can, with its target in @a t and the mapping in *@a map_p. */
static const char *remote_target(ringk_ctx_t *ctx, ringk_kernel_t *s, int rank,
                                 const ringk_dev_export_t *e, ringk_dev_target_t *t,
                                 struct ringk_dev_rmap **map_p, char *why, size_t why_len)
{
    ringk_node_id_t here, there;
    const ringk_dev_ctl_t *ctl;
    const char *no;
    char same[96];

    if (e->kind == RINGK_DEV_EXPORT_NONE) {
        return "it does not share its inbox (a CPU kernel, a CUDA device's in a process of a "
               "job of one, one that subscribes to some kernels only, or RINGK_DEVICE_REMOTE=0 "
               "there)";
    }
    if ((no = remote_device_mismatch(s->dev->device, e, why, why_len)) != NULL) {
        return no;
    }
    ringk_node_id_get(&here);
    there.boot    = e->node[0];
    there.pid_ns  = e->node[1];
    there.ipc_shm = e->node[2];
    if (!ringk_node_id_same(&here, &there, same, sizeof(same))) {
        snprintf(why, why_len, "another node (%s)", same);
        return why;
    }
    if (ringk_dev_export_check(e, ~(uint64_t)0, why, why_len) != 0) {
        return why;
    }
    if (ringk_dev_rmap_get(ctx, rank, s->dev->device->cuda_index, e, map_p, why, why_len) != 0) {
        return why;
    }
    if ((ringk_dev_export_check(e, (*map_p)->bytes, why, why_len) != 0)) {
        return why;
    }
    if (((*map_p)->kind == RINGK_DEV_EXPORT_CUDA) && ((*map_p)->mem_bytes != e->mem_bytes)) {
        snprintf(why, why_len, "its directory entry says %" PRIu64 " bytes of device memory, "
                 "%" PRIu64 " are mapped", e->mem_bytes, (*map_p)->mem_bytes);
        return why;
    }
    /* what the memory holds there must be that inbox and that control block */
    ctl = (const ringk_dev_ctl_t*)((*map_p)->base + e->ctl_off);
    if (!remote_inbox_is(*map_p, e, s->dev->device->cuda_index) || (ctl->magic != RINGK_DEV_CTL_MAGIC) ||
        (ctl->abi != RINGK_DEV_ABI) || (ctl->id != e->receiver)) {
        snprintf(why, why_len, "its inbox or control block in /proc/%" PRIu32 "/fd/%d%s is not "
                 "what its directory entry says", e->pid, e->fd,
                 ((*map_p)->kind == RINGK_DEV_EXPORT_CUDA) ? " and its device memory" : "");
        return why;
    }
    memset(t, 0, sizeof(*t));
    t->receiver     = e->receiver;
    t->max_in       = e->max_in;
    t->log2_ncells  = e->log2_ncells;
    t->cell_size    = e->cell_size;
    t->event_driven = (e->event_driven != 0);
    t->scope        = RINGK_RING_SCOPE_SYSTEM;
    t->marks        = 1; /* the target's loop gives up a dead sender's claims */
    if ((*map_p)->kind == RINGK_DEV_EXPORT_CUDA) {
        /* the sender's GPU writes the device memory and the file as registered here */
        t->inbox = (*map_p)->mem_dev + e->inbox_off;
        t->ctl   = (ringk_dev_ctl_t*)((*map_p)->dev_base + e->ctl_off);
        return NULL;
    }
    t->inbox        = (*map_p)->base + e->inbox_off;
    t->ctl          = (ringk_dev_ctl_t*)((*map_p)->base + e->ctl_off);
    return NULL;
}

/* Under ctx->lock: kernel @a s's routes to kernels of other processes, each looked at once. */
static void remote_routes_of(ringk_ctx_t *ctx, ringk_kernel_t *s)
{
    ringk_dev_host_t *d = s->dev;
    struct ringk_dev_rmap *map = NULL;
    ringk_dev_export_t e;
    const char *no;
    char why[256];
    unsigned j;
    int rank;

    for (j = 0; j < s->publishes_to.count; j++) {
        if ((d->route_ever | d->remote_tried) & (1u << j)) {
            continue;
        }
        memset(&e, 0, sizeof(e));
        if ((ringk_kernel_find(ctx, s->publishes_to.names[j]) != NULL) ||
            (ringk_job_dev_lookup(ctx, s->publishes_to.names[j], &rank, &e) != 0)) {
            continue; /* a kernel of this process, or of none (yet) */
        }
        d->remote_tried |= 1u << j;
        no = ringk_dev_remote_on(ctx) ?
             remote_target(ctx, s, rank, &e, &d->routes[j].target, &map, why, sizeof(why)) :
             "RINGK_DEVICE_REMOTE=0";
        if (no != NULL) {
            ringk_log_msg(ctx, RINGK_LOG_INFO, "kernel '%s': sends to kernel '%s' of process %d "
                          "go through the host: %s", s->name, s->publishes_to.names[j], rank, no);
            continue;
        }
        __atomic_store_n(&d->remote[j], map, __ATOMIC_RELAXED); /* the proxy reads it */
        d->route_ever |= 1u << j;
        __atomic_store_n(&d->routes[j].direct, 1, __ATOMIC_RELEASE);
        /* D1: the store of 'direct' before the read of 'dropped'; pairs with D2 in
         * remote_drop_gone(): a drop that came between is seen here, or sees the route */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&map->dropped, __ATOMIC_RELAXED)) {
            __atomic_store_n(&d->routes[j].direct, 0, __ATOMIC_RELEASE);
            ringk_log_msg(ctx, RINGK_LOG_INFO, "kernel '%s': sends to kernel '%s' of process %d "
                          "go through the host: the process left the job or was lost", s->name,
                          s->publishes_to.names[j], rank);
            continue;
        }
        ringk_log_msg(ctx, RINGK_LOG_INFO, "kernel '%s': sends to device kernel '%s' of process "
                      "%d go straight into its device inbox (/proc/%" PRIu32 "/fd/%d)", s->name,
                      s->publishes_to.names[j], rank, map->pid, map->fd);
    }
}

void ringk_dev_remote_routes_locked(ringk_ctx_t *ctx)
{
    unsigned i;

    for (i = 0; i < ctx->nkernels; i++) {
        if ((ctx->kernels[i] != NULL) && (ctx->kernels[i]->dev != NULL)) {
            remote_routes_of(ctx, ctx->kernels[i]);
        }
    }
}

void ringk_exec_dev_remote_routes(ringk_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    ringk_dev_remote_routes_locked(ctx);
    pthread_mutex_unlock(&ctx->lock);
}
