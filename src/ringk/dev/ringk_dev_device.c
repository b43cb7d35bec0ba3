/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the devices of the process, as the device executor uses them: each one's slabs and
 * streams, made when the first context places a kernel there (before any kernel of the process
 * runs on it) and freed when the last context that did is destroyed; and the calls libringk
 * makes on a device in relaxed stream capture mode. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"
#include "core/ringk_cuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The devices of the process (see ringk_dev_device_t). Its lock comes after a device kernel's and
 * before the CUDA entries' (ringk_dev_lock_t); the log callback is called under it. A kernel's
 * setup copy is made under it too, so a copy that waits (a stream sharing a hardware queue
 * with a resident kernel, which the queue limit in ringk_exec_dev_create() is there to avoid)
 * would hold every context's creates. */
ringk_dev_proc_t ringk_dev_proc = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A slab size in MiB from environment variable @a var (default @a def): the value, or -1
 * (logged) when it is not a number in 1..RINGK_DEV_SLAB_MB_MAX. */
static long slab_mb(ringk_ctx_t *ctx, const char *var, long def)
{
    const char *s = getenv(var);
    char *end;
    long v;

    if ((s == NULL) || (*s == '\0')) {
        return def;
    }
    v = strtol(s, &end, 10);
    if ((*end != '\0') || (v < 1) || (v > RINGK_DEV_SLAB_MB_MAX)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "%s='%s' is not a size in MiB in 1..%d", var, s,
                      RINGK_DEV_SLAB_MB_MAX);
        return -1;
    }
    return v;
}

/* A launch copies the kernel a word at a time */
_Static_assert(sizeof(ringk_dev_kernel_t) % sizeof(uint64_t) == 0, "ringk_dev_kernel_t in words");
/* the host's run-time words on one line, the device's from the next (ringk_device_abi.h) */
_Static_assert((offsetof(ringk_dev_ctl_t, state) == 64) &&
               (offsetof(ringk_dev_ctl_t, done) == 128) &&
               (offsetof(ringk_dev_ctl_t, dead) + sizeof(((ringk_dev_ctl_t*)0)->dead) <= 128),
               "the control block's lines");

/* libringk's own CUDA calls for device kernels are made in relaxed stream capture mode: a
 * capture of the program's in another thread (global mode, the default) would otherwise refuse
 * them and be invalidated by them (docs/gpu.md, "Faults and stream capture"). Returns the
 * thread's mode before, for ringk_dev_relax_end(). */
int ringk_dev_relax_begin(const ringk_device_cuda_ops_t *ops)
{
    int mode = RINGK_DEV_CAPTURE_RELAXED;

    if (ops->capture_mode != NULL) {
        ops->capture_mode(&mode);
    }
    return mode;
}

void ringk_dev_relax_end(const ringk_device_cuda_ops_t *ops, int mode)
{
    if (ops->capture_mode != NULL) {
        ops->capture_mode(&mode);
    }
}

int ringk_dev_stream_status(ringk_dev_host_t *d, char *why, size_t why_len)
{
    const ringk_device_cuda_ops_t *ops = d->entry->cuda;
    int mode = ringk_dev_relax_begin(ops), ret = ops->stream_status(d->stream, why, why_len);

    ringk_dev_relax_end(ops, mode);
    return ret;
}

/* Under ringk_dev_proc.mu, with no kernel of the process on @a device: its setup stream and
 * the streams its kernels will take (one per hardware queue but the setup stream's and one for
 * the process's other streams), all made now (see ringk_dev_device_t.streams). */
static int device_streams(ringk_ctx_t *ctx, ringk_dev_device_t *device)
{
    const ringk_device_cuda_ops_t *ops = device->ops;
    unsigned n = (device->queues > 2) ? device->queues - 2 : 0;
    char why[160] = "";
    int ret = ops->stream_create(device->cuda_index, &device->stream, why, sizeof(why));

    device->nstreams = 0;
    while ((ret == 0) && (device->nstreams < n) && (device->nstreams < RINGK_DEV_QUEUES_MAX)) {
        ret = ops->stream_create(device->cuda_index, &device->streams[device->nstreams], why,
                                 sizeof(why));
        device->stream_used[device->nstreams] = 0;
        device->nstreams += (ret == 0);
    }
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "CUDA device %d: %s", device->cuda_index, why);
    }
    return ret;
}

/* Under ringk_dev_proc.mu: destroys @a device's streams (none of its kernels' launches runs). */
static void device_streams_destroy(ringk_dev_device_t *device)
{
    while (device->nstreams > 0) {
        device->nstreams--;
        device->ops->stream_destroy(device->streams[device->nstreams]);
    }
    if (device->stream != NULL) {
        device->ops->stream_destroy(device->stream);
        device->stream = NULL;
    }
}

/* Under ringk_dev_proc.mu: allocates the slabs of @a device, before any kernel of it runs: 0,
 * -EINVAL, -ENOMEM or -EIO. */
static int device_init(ringk_ctx_t *ctx, ringk_dev_device_t *device)
{
    long mapped_mb = slab_mb(ctx, "RINGK_DEVICE_MAPPED_MB", RINGK_DEV_MAPPED_MB_DEFAULT);
    long mem_mb    = slab_mb(ctx, "RINGK_DEVICE_MEM_MB", RINGK_DEV_MEM_MB_DEFAULT);
    const ringk_device_cuda_ops_t *ops = device->ops;
    char why[160] = "";
    void *host = NULL, *dev = NULL;
    int ret, mode;

    if ((mapped_mb < 0) || (mem_mb < 0)) {
        return -EINVAL;
    }
    if ((device->cuda_index < 0) &&
        (__atomic_load_n(&ringk_dev_proc.running, __ATOMIC_ACQUIRE) > 0)) {
        /* docs/gpu.md, "Implicit synchronization": on a GPU this allocation would wait for the
         * kernels that run; the emulated device's tests look for this line */
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "device memory allocated while %u device kernel "
                      "launches run", __atomic_load_n(&ringk_dev_proc.running, __ATOMIC_ACQUIRE));
    }
    device->mapped.size = (size_t)mapped_mb << 20;
    device->mem.size    = (size_t)mem_mb << 20;
    if (device->cuda_index < 0) {
        if (ringk_dev_emu_slabs_alloc(ctx, device) != 0) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "emulated device: cannot allocate %ld + %ld MiB",
                          mapped_mb, mem_mb);
            return -ENOMEM;
        }
        return 0;
    }
    if (ringk_dev_cuda_launched() > 0) {
        /* kernels of other GPUs run: how far the waits of CUDA's allocations reach across
         * devices is not documented, nor seen here; said before, so that a setup that hangs
         * says where */
        ringk_log_msg(ctx, RINGK_LOG_WARN, "CUDA device %d: its slabs are allocated while %d "
                      "device kernels of the process run on other GPUs", device->cuda_index,
                      ringk_dev_cuda_launched());
    }
    mode = ringk_dev_relax_begin(ops);
    if ((ret = device_streams(ctx, device)) != 0) {
        device_streams_destroy(device);
        ringk_dev_relax_end(ops, mode);
        return ret;
    }
    if ((ctx->job.size > 1) && ringk_dev_remote_on(ctx)) {
        /* device kernels of the job's other processes may send into its inboxes */
        if (ringk_dev_cuda_slabs_share(device, why, sizeof(why)) == 0) {
            ringk_dev_relax_end(ops, mode);
            ringk_log_msg(ctx, RINGK_LOG_INFO, "CUDA device %d: its device kernels' inboxes "
                          "are shared with the job's other processes (%zu MiB of cuMem "
                          "memory, %zu MiB of registered memory)", device->cuda_index,
                          (size_t)(device->mem_bytes >> 20), device->mapped.size >> 20);
            return 0;
        }
        ringk_log_msg(ctx, RINGK_LOG_INFO, "CUDA device %d: its memory is not shareable (%s): "
                      "device kernels of other processes send to its kernels through the host",
                      device->cuda_index, why);
    }
    if ((ret = ops->alloc_mapped(device->cuda_index, &host, &dev, device->mapped.size, why,
                                 sizeof(why))) != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "CUDA device %d: %s", device->cuda_index, why);
        device_streams_destroy(device);
        ringk_dev_relax_end(ops, mode);
        return ret;
    }
    device->mapped.host = host;
    device->mapped.dev  = dev;
    ret = ops->alloc_device(device->cuda_index, &dev, device->mem.size, why, sizeof(why));
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "CUDA device %d: %s", device->cuda_index, why);
        ops->free_mapped(device->mapped.host);
        device_streams_destroy(device);
        device->mapped.host = NULL;
        ringk_dev_relax_end(ops, mode);
        return ret;
    }
    ringk_dev_relax_end(ops, mode);
    device->mem.dev = dev; /* the host has no address for it */
    return 0;
}

/* Under ringk_dev_proc.mu: turns peer access from CUDA device @a from to @a to on, once (it
 * stays on): 1, or 0 with the reason in @a why. */
static int peer_turn_on(int from, int to, char *why, size_t why_len)
{
    if (ringk_dev_proc.peer_on[from] & (1u << to)) {
        return 1;
    }
    /* the callers checked that no kernel of @a from is launched (made ones may be) */
    if (ringk_cuda_peer_set_idle(from, to, why, why_len) != 0) {
        return 0;
    }
    ringk_dev_proc.peer_on[from] |= 1u << to;
    return 1;
}

/* Under ringk_dev_proc.mu: gives kernels of CUDA device @a from access to the memory of @a to,
 * shared with other processes: cuMem memory, which only the GPUs given access reach (peer
 * access does not). Not while a device kernel of the process is launched (the call is made in
 * @a from's context, and changes what it maps of @a to's memory; kernels made in a job before
 * ringk_ctx_start are not launched yet). 1, or 0 with the reason in @a why. */
static int peer_mem_grant(ringk_dev_device_t *to, int from, char *why, size_t why_len)
{
    const int running = ringk_dev_cuda_launched();
    char err[192];

    /* as ringk_dev_rmap_grant() in a sender of another process: not while a launch of any
     * device kernel of the process may be resident */
    if (running > 0) {
        snprintf(why, why_len, "its memory is shared with other processes (cuMem memory, which "
                 "only GPUs given access reach), and CUDA device %d is not given access while "
                 "%d device kernels of the process run", from, running);
        return 0;
    }
    if (ringk_cuda_vmm_grant(to->mem.dev, to->mem_bytes, from, err, sizeof(err)) != 0) {
        snprintf(why, why_len, "its memory is shared with other processes (cuMem memory), and "
                 "giving CUDA device %d access failed: %s", from, err);
        return 0;
    }
    return 1;
}

/* Under ringk_dev_proc.mu, in device_peers() (device d set up, @a other CUDA device j): whether
 * kernels of CUDA device @a from may send straight into the inboxes of @a recv, CUDA device
 * @a to: 1 with the pair's path in @a why, or 0 with the reason. Peer access from @a from is
 * turned on where @a recv's memory is the process's own; where it is shared cuMem memory,
 * @a from is given access to it instead. */
static int peer_way(ringk_dev_device_t *recv, int from, int to, const ringk_dev_device_t *other,
                    int j, int d, char *why, size_t why_len)
{
    char path[RINGK_PEER_REASON_LEN + 200];
    ringk_peer_info_t info;

    if (!ringk_dev_peer_usable(ringk_peer_can_access(from, to, &info), &info, why, why_len)) {
        return 0;
    }
    snprintf(path, sizeof(path), "%s", why);
    if (recv->cuda_shared) {
        if (!peer_mem_grant(recv, from, why, why_len)) {
            return 0;
        }
    } else if (((from == j) &&
                !ringk_dev_peer_enable_ok((ringk_dev_proc.peer_on[j] >> d) & 1u,
                                          __atomic_load_n(&other->launched, __ATOMIC_ACQUIRE),
                                          other->used ? other->stuck : 0, j, why, why_len)) ||
               !peer_turn_on(from, to, why, why_len)) {
        return 0;
    }
    snprintf(why, why_len, "%.*s", (int)why_len - 1, path);
    return 1;
}

/* Under ringk_dev_proc.mu, at @a device's (CUDA device d's) setup, before a kernel of it runs:
 * the GPUs of the process (@a n in all) that RINGK_DEVICE_PEER pairs it with
 * (ringk_dev_peer_candidate). For each pair ringk_dev_peer_usable() accepts, in each direction,
 * peer access is turned on: from d always (none of its kernels runs yet), from the other GPU
 * while none of its device kernels runs (ringk_dev_peer_enable_ok). Then d's inboxes take sends
 * of the other GPU's kernels (device->peer_in), and the other GPU's inboxes made from then on
 * take d's; where the receiving GPU's memory is shared with other processes, once the sending
 * GPU has access to it (peer_way). Each direction's answer is logged at INFO. */
static void device_peers(ringk_ctx_t *ctx, ringk_dev_device_t *device, int n)
{
    const int d = device->cuda_index;
    char why[RINGK_PEER_REASON_LEN + 200];
    ringk_dev_device_t *other;
    int j, way, from, to, mode, bad, ok, relax;

    device->peer_in = 0;
    mode = ringk_dev_peer_mode(getenv("RINGK_DEVICE_PEER"), &bad);
    if (bad) {
        ringk_log_msg(ctx, RINGK_LOG_WARN, "RINGK_DEVICE_PEER='%.32s' is none of 0, 1, auto: "
                      "auto assumed (device kernels send into the inboxes of the GPUs the "
                      "process uses where they can)", getenv("RINGK_DEVICE_PEER"));
    }
    relax = ringk_dev_relax_begin(device->ops); /* CUDA calls: relaxed stream capture */
    for (j = 0; (j < n) && (j < RINGK_DEV_DEVICES - 1); j++) {
        other = &ringk_dev_proc.device[1 + j];
        if ((j == d) ||
            !ringk_dev_peer_candidate(mode, ringk_cuda_ctx_exists(j) == 1, other->used)) {
            continue;
        }
        for (way = 0; way < 2; way++) { /* j's kernels into d's inboxes, then d's into j's */
            from = way ? d : j;
            to   = way ? j : d;
            if (way && other->used &&
                ((__atomic_load_n(&other->peer_in, __ATOMIC_RELAXED) >> d) & 1u)) {
                ok = 1; /* paired at an earlier setup of d or j; j's memory is the same */
                snprintf(why, sizeof(why), "as before (its memory has not changed since the "
                         "pair was set up)");
            } else {
                ok = peer_way(way ? other : device, from, to, other, j, d, why, sizeof(why));
            }
            if (ok && (to == d)) {
                __atomic_or_fetch(&device->peer_in, 1u << j, __ATOMIC_RELAXED);
            } else if (ok && other->used) {
                __atomic_or_fetch(&other->peer_in, 1u << d, __ATOMIC_RELAXED);
            }
            ringk_log_msg(ctx, RINGK_LOG_INFO, "CUDA device %d: device kernels of CUDA device "
                          "%d send into its inboxes %s: %s", to, from,
                          ok ? "directly" : "through the host", why);
        }
    }
    ringk_dev_relax_end(device->ops, relax);
}

/* Under ringk_dev_proc.mu: the device for @a entry with placement @a placement, set up on first
 * use and counted as used by @a ctx: 0 with it in *device_p, or a negative errno; -ENODEV with
 * the reason in @a why. */
int ringk_dev_device_get(ringk_ctx_t *ctx, const ringk_device_entry_t *entry, int placement,
                         ringk_dev_device_t **device_p, char *why, size_t why_len)
{
    ringk_dev_device_t *device;
    int n = 0, idx = (placement < 0) ? 0 : placement, ret = 0;

    if (entry->kind == RINGK_DEVICE_ENTRY_EMULATED) {
        device = &ringk_dev_proc.device[0];
        if (!device->used) { /* set once: the proxy thread reads it */
            device->cuda_index = -1;
        }
    } else {
        n = entry->cuda->device_count(why, why_len);
        if (n <= 0) {
            return (n < 0) ? n : -ENODEV;
        }
        if ((idx >= n) || (idx >= RINGK_DEV_DEVICES - 1)) {
            snprintf(why, why_len, "placement %d: this process sees %d CUDA devices (at most "
                     "%d used)", placement, n, RINGK_DEV_DEVICES - 1);
            return -ENODEV;
        }
        device = &ringk_dev_proc.device[1 + idx];
        if (!device->used) { /* set once: the proxy thread reads it */
            const char *bad;

            device->cuda_index = idx;
            device->queues     = ringk_dev_queues(idx, &device->queues_before, &bad);
            if (bad != NULL) {
                ringk_log_msg(ctx, RINGK_LOG_WARN, "CUDA_DEVICE_MAX_CONNECTIONS='%s' is not a "
                              "number of queues in 1..32: CUDA's default of 8 assumed", bad);
            }
        }
        device->ops = ringk_dev_ops_live(device->ops);
        if (device->ops == NULL) { /* its entry is not registered (the table was full) */
            device->ops = entry->cuda;
        }
    }
    if (!device->used) {
        ret = device_init(ctx, device);
        device->used = (ret == 0);
        if ((ret == 0) &&
            (ringk_dev_host_range_add(device->mapped.dev, device->mapped.size) != 0)) {
            ringk_log_msg(ctx, RINGK_LOG_WARN, "the tally of device code compiled as C has no "
                          "room for another device's mapped memory: its host reads and "
                          "writes are not counted");
        }
        if ((ret == 0) && (device->cuda_index >= 0)) {
            device_peers(ctx, device, n);
        }
    }
    if ((ret == 0) && !ctx->devs->holds[device - ringk_dev_proc.device]) {
        ctx->devs->holds[device - ringk_dev_proc.device] = 1;
        device->users++;
    }
    *device_p = device;
    return ret;
}

int ringk_dev_device_stream(ringk_dev_device_t *device, unsigned *at, char *why, size_t why_len)
{
    for (*at = 0; *at < device->nstreams; (*at)++) {
        if (!device->stream_used[*at]) {
            return 0;
        }
    }
    snprintf(why, why_len, "CUDA device %d has %u device kernels, the most its %u hardware "
             "queues take (CUDA_DEVICE_MAX_CONNECTIONS - 2%s)", device->cuda_index,
             device->nstreams, device->queues,
             device->queues_before ? "; CUDA was initialized before libringk could "
             "set it, so it has CUDA's 8: set it to 32 before the program's first CUDA call" :
             "");
    return -ENOSPC;
}

/* Under ringk_dev_proc.mu: a setup copy of @a len bytes to @a device's memory, on its setup
 * stream. */
int ringk_dev_device_copy(ringk_dev_device_t *device, void *dst, const void *src, size_t len,
                          char *why, size_t why_len)
{
    int mode = ringk_dev_relax_begin(device->ops);
    int ret  = device->ops->copy_to_device(device->cuda_index, dst, src, len, device->stream, why,
                                         why_len);

    ringk_dev_relax_end(device->ops, mode);
    return ret;
}

/* Whether a region of @a device is still held (an exported one given back is not). */
static int regions_held(const ringk_dev_device_t *device)
{
    const ringk_dev_region_t *r;

    for (r = device->regions; r != NULL; r = r->next) {
        if (__atomic_load_n(&r->holds, __ATOMIC_ACQUIRE) > 0) {
            return 1;
        }
    }
    return 0;
}

void ringk_exec_dev_release(ringk_ctx_t *ctx)
{
    ringk_dev_device_t *device;
    unsigned i;
    int shared;

    if (ctx->devs == NULL) {
        return;
    }
    ringk_dev_lock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
    for (i = 0; i < RINGK_DEV_DEVICES; i++) {
        device = &ringk_dev_proc.device[i];
        if (!ctx->devs->holds[i] || (--device->users > 0)) {
            continue; /* another context's kernels may run there */
        }
        if (device->stuck > 0) {
            /* kept for the next context (an allocation would wait for the stuck launch),
             * which takes all but the stuck kernels' regions again */
            if (!device->kept) {
                ringk_log_msg(ctx, RINGK_LOG_ERROR, "CUDA device %d: %u launches that may "
                              "write its memory (its own, or other GPUs' with direct routes "
                              "to it) still run: its %zu + %zu bytes of memory are not freed",
                              device->cuda_index,
                              device->stuck, device->mapped.size, device->mem.size);
            }
            device->kept = 1;
            continue;
        }
        if (device->cuda_index >= 0) {
            device->ops = ringk_dev_ops_live(device->ops);
        }
        shared = device->cuda_shared;
        if (device->cuda_index < 0) {
            ringk_dev_emu_slabs_free(device);
        } else if (shared) {
            ringk_dev_cuda_slabs_unshare(device); /* libringk's own calls: no entry needed */
        }
        if ((device->cuda_index >= 0) && (device->ops != NULL)) { /* NULL: no entry left */
            int mode = ringk_dev_relax_begin(device->ops);

            if (!shared) {
                device->ops->free_device(device->cuda_index, device->mem.dev);
                device->ops->free_mapped(device->mapped.host);
            }
            device_streams_destroy(device);
            ringk_dev_relax_end(device->ops, mode);
        }
        ringk_dev_host_range_remove(device->mapped.dev);
        device->nstreams = 0;
        device->used = 0; /* allocated again at the next use; cuda_index stays */
        device->ops  = NULL; /* the next first entry's: this one's library may be unloaded */
        memset(&device->mapped, 0, sizeof(device->mapped));
        memset(&device->mem, 0, sizeof(device->mem));
        if (regions_held(device)) { /* every kernel was freed, none stuck: a hold leaked */
            char name[32] = "the emulated device";

            if (device->cuda_index >= 0) {
                snprintf(name, sizeof(name), "CUDA device %d", device->cuda_index);
            }
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "%s: regions still held when its slabs are "
                          "freed", name);
        }
        ringk_dev_regions_clear(device);
        device->stream = NULL;
    }
    ringk_dev_unlock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
    ringk_dev_remote_unmap(ctx->devs);
    free(ctx->devs->dead_since);
    free(ctx->devs);
    ctx->devs = NULL;
    /* unmaps of cuMem memory (shared slabs, other processes' inboxes) and unregistrations of
     * files left for later while device kernels ran: now, where none runs any more (nothing
     * otherwise: no CUDA loaded) */
    if ((ringk_cuda_vmm_deferred() > 0) || (ringk_cuda_host_deferred() > 0)) {
        ringk_cuda_ipc_flush();
    }
}
