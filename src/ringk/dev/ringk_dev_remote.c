/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: direct sends between device kernels of different processes of a node, all but the
 * routes themselves (ringk_dev_routes.c). A device's slabs are a file another process of the
 * user can open through /proc/<pid>/fd (a sealed, owner-only memfd: the emulated device's
 * slabs, or a CUDA device's mapped slab, whose device memory ringk_dev_share.c shares): a
 * kernel's directory entry names the file and where its device inbox and control block are,
 * and a device kernel of another process that can write that memory gets a direct route, as
 * one to a kernel of its own device: it claims cells with a compare-and-swap on the inbox's
 * tail, writes the message and wakes the target through its control block, whose doorbell
 * the target's proxy polls. The sender's mapping keeps the pages after the exporter exits;
 * the exporter never gives an exported kernel's memory to another kernel (a late sender's
 * wake-up writes its control block). The proxy drops routes into a process that is gone, and
 * tells an exported kernel's loop which processes ended, whose claims it then gives up.
 * docs/gpu.md, "Device kernels of several processes". */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"
#include "core/ringk_cuda.h"
#include "core/ringk_node.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEV_WATCH_NS       100000000ull /* how often the proxy looks for gone processes */
#define DEV_DEAD_GRACE_NS 1000000000ull /* how long a process is dead before its claims are
                                            given up */

_Static_assert(RINGK_DEV_RANK_SHIFT == RINGK_RANK_SHIFT, "device code finds a sender's rank "
               "as the host does");

int ringk_dev_remote_on(ringk_ctx_t *ctx)
{
    const char *env = getenv("RINGK_DEVICE_REMOTE");

    if ((env == NULL) || (env[0] == '\0') || (strcmp(env, "1") == 0)) {
        return 1;
    }
    if (strcmp(env, "0") == 0) {
        return 0;
    }
    ringk_log_msg(ctx, RINGK_LOG_WARN, "RINGK_DEVICE_REMOTE '%s' is not 0 or 1: taken as 1", env);
    return 1;
}

int ringk_dev_emu_slabs_alloc(ringk_ctx_t *ctx, ringk_dev_device_t *device)
{
    size_t bytes = RINGK_DEV_SLAB_FILE_HDR + device->mapped.size + device->mem.size;
    uint8_t *base;
    char why[160];

    device->file = NULL;
    if (ringk_dev_slab_file_make(device, bytes, why, sizeof(why)) == 0) {
        base = device->file;
    } else {
        ringk_log_msg(ctx, RINGK_LOG_INFO, "emulated device: its memory is not shareable (%s): "
                      "device kernels of other processes send to its kernels through the host",
                      why);
        base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) {
            return -ENOMEM;
        }
    }
    device->anon_base   = (device->file == NULL) ? base : NULL;
    device->anon_bytes  = bytes;
    device->mapped.host = device->mapped.dev = base + RINGK_DEV_SLAB_FILE_HDR;
    device->mem.host    = device->mem.dev = device->mapped.host + device->mapped.size;
    return 0;
}

void ringk_dev_emu_slabs_free(ringk_dev_device_t *device)
{
    if (device->file != NULL) {
        munmap(device->file, device->file_bytes);
        close(device->file_fd);
    } else if (device->anon_base != NULL) {
        munmap(device->anon_base, device->anon_bytes);
    }
    device->file       = NULL;
    device->anon_base  = NULL;
    device->file_token = 0;
}

/* Why kernel @a k's inbox is not exported, or NULL where it is. */
static const char *export_refused(ringk_ctx_t *ctx, const ringk_kernel_t *k, char *why,
                                  size_t why_len)
{
    ringk_dev_device_t *device = k->dev->device;

    if (!ringk_dev_remote_on(ctx)) {
        return "RINGK_DEVICE_REMOTE=0";
    }
    if ((device->cuda_index >= 0) && !device->cuda_shared) {
        snprintf(why, why_len, "CUDA device %d's memory is not shared with other processes (a "
                 "process of a job of one, or the sharing failed: logged at its setup)",
                 device->cuda_index);
        return why;
    }
    if (device->file == NULL) {
        return "the emulated device's memory is not shareable";
    }
    if (k->subscribes_to.count != 0) {
        return "it takes messages only from the kernels it subscribes to, which the host checks";
    }
    return NULL;
}

void ringk_exec_dev_export(ringk_ctx_t *ctx, const ringk_kernel_t *k, ringk_dev_export_t *e)
{
    ringk_dev_host_t *d        = k->dev;
    ringk_dev_device_t *device = d->device;
    ringk_node_id_t node;
    const char *no;
    char why[192];

    memset(e, 0, sizeof(*e));
    if ((no = export_refused(ctx, k, why, sizeof(why))) != NULL) {
        ringk_log_msg(ctx, RINGK_LOG_DEBUG, "kernel '%s': device kernels of other processes "
                      "send to it through the host: %s", k->name, no);
        return;
    }
    if ((device->cuda_index >= 0) &&
        !ringk_cuda_ptr_is_device(device->mem.dev, e->busid, sizeof(e->busid))) {
        ringk_log_msg(ctx, RINGK_LOG_WARN, "kernel '%s': device kernels of other processes send "
                      "to it through the host: CUDA does not name the GPU of its inbox",
                      k->name);
        memset(e, 0, sizeof(*e));
        return;
    }
    ringk_node_id_get(&node);
    e->kind         = (device->cuda_index >= 0) ? RINGK_DEV_EXPORT_CUDA : RINGK_DEV_EXPORT_EMU;
    e->pid          = (uint32_t)getpid();
    e->fd           = device->file_fd;
    e->receiver     = k->id;
    e->token        = device->file_token;
    e->node[0]      = node.boot;
    e->node[1]      = node.pid_ns;
    e->node[2]      = node.ipc_shm;
    e->inbox_off    = (device->cuda_index >= 0) ?
                      (uint64_t)((uint8_t*)d->view.inbox.shm - device->mem.dev) :
                      (uint64_t)((uint8_t*)d->view.inbox.shm - device->file);
    e->mem_bytes    = (device->cuda_index >= 0) ? device->mem_bytes : 0;
    e->ctl_off      = (uint64_t)((uint8_t*)d->ctl - device->file);
    e->log2_ncells  = ringk_ring_log2(d->view.inbox.ncells);
    e->cell_size    = d->view.inbox.cell_size;
    e->max_in       = k->max_in;
    e->event_driven = (k->mode == RINGK_MODE_EVENT_DRIVEN);
    /* its memory is never another kernel's (a sender of another process may write it late) */
    __atomic_store_n(&d->region->exported, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&ctx->devs->exported, 1, __ATOMIC_RELEASE);
}

/* The header of the file mapped in @a m must name the exporter of @a e and the token of its
 * directory entry: 0, or -EINVAL with why in @a why. */
static int rmap_header_check(const ringk_dev_export_t *e, const struct ringk_dev_rmap *m,
                             char *why, size_t why_len)
{
    const ringk_dev_slab_file_t *hdr = (const ringk_dev_slab_file_t*)m->base;

    if ((__atomic_load_n(&hdr->magic, __ATOMIC_ACQUIRE) != RINGK_DEV_SLAB_FILE_MAGIC) ||
        (hdr->version != RINGK_DEV_SLAB_FILE_VERSION) || (hdr->owner_pid != e->pid) ||
        (hdr->token != e->token) || (hdr->bytes != m->bytes)) {
        snprintf(why, why_len, "/proc/%" PRIu32 "/fd/%d is not the device memory the directory "
                 "names (header of pid %" PRIu32 ", %" PRIu64 " bytes, token %s)", e->pid, e->fd,
                 hdr->owner_pid, hdr->bytes, (hdr->token == e->token) ? "equal" : "differs");
        return -EINVAL;
    }
    return 0;
}

int ringk_dev_rmap_get(ringk_ctx_t *ctx, int rank, int dev, const ringk_dev_export_t *e,
                       struct ringk_dev_rmap **map_p, char *why, size_t why_len)
{
    struct ringk_dev_rmap *m;
    ringk_peer_err_t perr;
    struct stat st;
    char link[128];
    int fd, seals, err;

    if (ringk_job_rank_gone(ctx, rank)) {
        snprintf(why, why_len, "process %d left the job or was lost", rank);
        return -ESRCH;
    }
    for (m = ctx->devs->rmaps; m != NULL; m = m->next) {
        if ((m->rank == rank) && (m->kind == e->kind) && (m->pid == e->pid) &&
            (m->fd == e->fd) && (m->token == e->token) &&
            ((e->kind != RINGK_DEV_EXPORT_CUDA) || (m->mem_bytes == e->mem_bytes))) {
            /* a kernel of another GPU than those that wrote it so far: access for its GPU */
            if ((err = ringk_dev_rmap_grant(m, dev, why, why_len)) != 0) {
                return err;
            }
            *map_p = m;
            return 0;
        }
    }
    fd = ringk_node_open_peer(e->pid, e->fd, O_RDWR, RINGK_DEV_SLAB_FILE, &st, link,
                              sizeof(link), &perr);
    if (fd < 0) {
        err = (errno != 0) ? -errno : -EPERM;
        snprintf(why, why_len, "/proc/%" PRIu32 "/fd/%d: %s", e->pid, e->fd,
                 (perr == RINGK_PEER_NAME)  ? "not a ringk device's memory" :
                 (perr == RINGK_PEER_OWNER) ? "not this user's 0600 memfd" : strerror(-err));
        return err;
    }
    /* sealed against shrinking: the mapping can never lose its pages (SIGBUS) */
    seals = fcntl(fd, F_GET_SEALS);
    if ((seals >= 0) && (seals & F_SEAL_SHRINK) && (fstat(fd, &st) != 0)) {
        seals = -1; /* the size read before the seals may have changed since */
    }
    if ((seals < 0) || !(seals & F_SEAL_SHRINK) || (st.st_size < RINGK_DEV_SLAB_FILE_HDR)) {
        snprintf(why, why_len, "/proc/%" PRIu32 "/fd/%d: %lld bytes, seals 0x%x", e->pid, e->fd,
                 (long long)st.st_size, seals);
        close(fd);
        return -EINVAL;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        close(fd);
        return -ENOMEM;
    }
    m->base = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m->base == MAP_FAILED) {
        err = -errno;
        snprintf(why, why_len, "mmap of /proc/%" PRIu32 "/fd/%d: %s", e->pid, e->fd,
                 strerror(-err));
        free(m);
        return err;
    }
    m->bytes = (size_t)st.st_size;
    if (((err = rmap_header_check(e, m, why, why_len)) != 0) ||
        ((e->kind == RINGK_DEV_EXPORT_CUDA) &&
         ((err = ringk_dev_rmap_cuda(dev, e, m, why, why_len)) != 0))) {
        ringk_dev_rmap_unmap(m); /* unregistered where it was registered, unmapped */
        free(m);
        return err;
    }
    m->rank  = rank;
    m->kind  = e->kind;
    m->pid   = e->pid;
    m->fd    = e->fd;
    m->token = e->token;
    m->next  = ctx->devs->rmaps;
    __atomic_store_n(&ctx->devs->rmaps, m, __ATOMIC_RELEASE); /* the proxy walks the list */
    *map_p = m;
    return 0;
}

/* The routes into the memory of processes that are gone go back to the host. */
static unsigned remote_drop_gone(ringk_ctx_t *ctx)
{
    struct ringk_dev_rmap *m = __atomic_load_n(&ctx->devs->rmaps, __ATOMIC_ACQUIRE);
    unsigned i, j, count, did = 0;
    ringk_kernel_t *k;

    for (; m != NULL; m = m->next) {
        if (__atomic_load_n(&m->dropped, __ATOMIC_RELAXED) || !ringk_job_rank_gone(ctx, m->rank)) {
            continue;
        }
        /* a sender waiting for room in an inbox nobody drains reads 'direct' and gets -EPIPE;
         * the process's memory stays mapped (a send may be writing it). D2: 'dropped' before
         * the routes are read; pairs with D1 in remote_routes_of() */
        __atomic_store_n(&m->dropped, 1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);
        for (i = 0; i < count; i++) {
            k = __atomic_load_n(&ctx->kernels[i], __ATOMIC_ACQUIRE);
            for (j = 0; (k != NULL) && (k->dev != NULL) && (j < RINGK_DEV_ROUTES_MAX); j++) {
                if (__atomic_load_n(&k->dev->remote[j], __ATOMIC_RELAXED) == m) {
                    __atomic_store_n(&k->dev->routes[j].direct, 0, __ATOMIC_RELEASE);
                }
            }
        }
        ringk_log_msg(ctx, RINGK_LOG_INFO, "process %d left the job: sends into its device "
                      "inboxes go through the host again (and fail there)", m->rank);
        did++;
    }
    return did;
}

/* Tells exported kernel @a k's loop that process @a rank ended, once (ctl->dead: the loop
 * gives up the claims that process's senders marked in its inbox and never published,
 * ringk_dev_give_up_dead()), and wakes an event-driven kernel launched and not terminated: a
 * sender of that process may have published and died before waking it, or taken 'idle' and
 * died before ringing. The doorbell is rung after taking 'idle' as a sender would, or where
 * 'idle' was taken already (a launch runs, or that sender took it): a launch with nothing to
 * take parks again after its idle turns. */
static unsigned dead_tell(ringk_ctx_t *ctx, ringk_kernel_t *k, int rank)
{
    ringk_dev_ctl_t *c = k->dev->ctl;
    int32_t n = __atomic_load_n(&c->ndead, __ATOMIC_RELAXED), i, idle = 1;

    for (i = 0; (i < n) && (i < (int32_t)RINGK_DEV_DEAD_MAX); i++) {
        if (c->dead[i] == (uint32_t)rank) {
            return 0;
        }
    }
    if (n < (int32_t)RINGK_DEV_DEAD_MAX) {
        c->dead[n] = (uint32_t)rank;
        __atomic_store_n(&c->ndead, n + 1, __ATOMIC_RELEASE); /* A: after dead[n] */
    } else if (!k->dev->dead_full) {
        ringk_log_msg(ctx, RINGK_LOG_WARN, "kernel '%s': more than %u processes of the job "
                      "ended: claims of process %d's kernels in its device inbox are not given "
                      "up", k->name, RINGK_DEV_DEAD_MAX, rank);
        k->dev->dead_full = 1;
    }
    /* launched, and neither faulted nor joined (a launch then would be one too many) */
    if ((k->mode == RINGK_MODE_EVENT_DRIVEN) && (ringk_dev_life(k->dev) == RINGK_DEV_LAUNCHED) &&
        (ringk_load_i(&k->state) != RINGK_KERNEL_TERMINATED) &&
        !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
        __atomic_compare_exchange_n(&c->idle, &idle, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
        __atomic_store_n(&c->doorbell, 1, __ATOMIC_RELEASE);
        ringk_log_msg(ctx, RINGK_LOG_WARN, "kernel '%s': woken: process %d of the job ended (no "
                      "launch runs while a process of the job is lost may leave messages "
                      "waiting)", k->name, rank);
    }
    return 1;
}

/* What exported kernel @a k's loop gave up since the last look (ctl->given_up), logged. */
static unsigned given_up_log(ringk_ctx_t *ctx, ringk_kernel_t *k)
{
    const ringk_dev_ctl_t *c = k->dev->ctl;
    uint64_t n     = __atomic_load_n(&c->given_up, __ATOMIC_ACQUIRE); /* G */
    uint32_t owner = __atomic_load_n(&c->given_up_owner, __ATOMIC_RELAXED);

    if (n == k->dev->given_up_seen) {
        return 0;
    }
    ringk_log_msg(ctx, RINGK_LOG_WARN, "kernel '%s': gave up %llu cells of its device inbox "
                  "that kernel %u of process %u claimed and did not fill before it was lost",
                  k->name, (unsigned long long)(n - k->dev->given_up_seen),
                  ringk_sender_kernel(owner), ringk_sender_rank(owner));
    k->dev->given_up_seen = n;
    return 1;
}

/* Whether process @a rank has been dead (ringk_job_rank_dead()) for DEV_DEAD_GRACE_NS by
 * @a now, and not told yet: then it is marked told. The grace covers what may outlive a
 * process: its GPU work, which the driver (or an MPS server) tears down after it. */
static int dead_due(ringk_ctx_t *ctx, int rank, uint64_t now)
{
    uint64_t *since = ctx->devs->dead_since;

    if ((since == NULL) &&
        ((since = ctx->devs->dead_since = calloc((size_t)ctx->job.size,
                                                 sizeof(*since))) == NULL)) {
        return 0;
    }
    if (since[rank] == UINT64_MAX) {
        return 0; /* told */
    }
    if (!ringk_job_rank_dead(ctx, rank)) {
        since[rank] = 0;
        return 0;
    }
    if (since[rank] == 0) {
        since[rank] = now;
    }
    if (now - since[rank] < DEV_DEAD_GRACE_NS) {
        return 0;
    }
    since[rank] = UINT64_MAX;
    return 1;
}

/* Every 100 ms while a process of the job is gone: the processes of the job that ended, told
 * to the loop of each exported kernel; what the loops gave up, logged. */
static unsigned dead_watch(ringk_ctx_t *ctx, uint64_t now)
{
    unsigned i, count, did = 0;
    ringk_kernel_t *k;
    int rank;

    count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);
    for (rank = 0; rank < ctx->job.size; rank++) {
        if ((rank == ctx->job.rank) || !dead_due(ctx, rank, now)) {
            continue;
        }
        for (i = 0; i < count; i++) {
            k = __atomic_load_n(&ctx->kernels[i], __ATOMIC_ACQUIRE);
            if ((k != NULL) && (k->dev != NULL) &&
                __atomic_load_n(&k->dev->region->exported, __ATOMIC_ACQUIRE)) {
                did += dead_tell(ctx, k, rank);
            }
        }
    }
    for (i = 0; i < count; i++) {
        k = __atomic_load_n(&ctx->kernels[i], __ATOMIC_ACQUIRE);
        if ((k != NULL) && (k->dev != NULL) &&
            __atomic_load_n(&k->dev->region->exported, __ATOMIC_ACQUIRE)) {
            did += given_up_log(ctx, k);
        }
    }
    return did;
}

/* Whether a process of the job other than this one left or was lost. */
static int job_lost_any(ringk_ctx_t *ctx)
{
    int rank;

    for (rank = 0; rank < ctx->job.size; rank++) {
        if ((rank != ctx->job.rank) && ringk_job_rank_gone(ctx, rank)) {
            return 1;
        }
    }
    return 0;
}

unsigned ringk_dev_remote_watch(ringk_ctx_t *ctx, uint64_t now)
{
    unsigned did;

    if (now < ctx->devs->watch_ns) {
        return 0;
    }
    ctx->devs->watch_ns = now + DEV_WATCH_NS;
    /* files and cuMem mappings given back while device kernels ran: once none runs (of any
     * context of the process) */
    if ((ringk_cuda_host_deferred() > 0) || (ringk_cuda_vmm_deferred() > 0)) {
        ringk_cuda_ipc_flush();
    }
    did = remote_drop_gone(ctx);
    if (!__atomic_load_n(&ctx->devs->exported, __ATOMIC_ACQUIRE) || !job_lost_any(ctx)) {
        return did;
    }
    return did + dead_watch(ctx, now);
}

void ringk_dev_remote_unmap(ringk_devs_t *devs)
{
    struct ringk_dev_rmap *m;

    while ((m = devs->rmaps) != NULL) {
        devs->rmaps = m->next;
        /* a CUDA one's file unregistered and unmapped now, or once no device kernel runs */
        ringk_dev_rmap_unmap(m);
        free(m);
    }
}
