/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the device executor: which device a kernel of the CUDA backend runs on, its memory
 * (control block, host ingress ring, outbox and route table in mapped memory; the device inbox,
 * the staging buffer and the name tables in device memory; all from slabs allocated before any
 * kernel of the device runs), its launches and relaunches, and the routes between kernels of
 * one device. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- a kernel's state, and the lock order ------------------------------------------------ */

/* The moves ringk_dev_life_t allows, from each state. */
static const unsigned dev_life_next[] = {
    [RINGK_DEV_NEW]      = RINGK_DEV_LIFE(DEFERRED) | RINGK_DEV_LIFE(LAUNCHED) |
                           RINGK_DEV_LIFE(JOINED),
    [RINGK_DEV_DEFERRED] = RINGK_DEV_LIFE(LAUNCHED) | RINGK_DEV_LIFE(JOINED),
    [RINGK_DEV_LAUNCHED] = RINGK_DEV_LIFE(FAULTED) | RINGK_DEV_LIFE(JOINED),
    [RINGK_DEV_FAULTED]  = RINGK_DEV_LIFE(JOINED),
    [RINGK_DEV_JOINED]   = RINGK_DEV_LIFE(STUCK),
    [RINGK_DEV_STUCK]    = 0
};

int ringk_dev_life_move(ringk_dev_host_t *d, unsigned from, ringk_dev_life_t to)
{
    int cur = __atomic_load_n(&d->life, __ATOMIC_ACQUIRE);

    do {
        if (!(from & (1u << cur))) {
            return 0;
        }
        assert(dev_life_next[cur] & (1u << to));
    } while (!__atomic_compare_exchange_n(&d->life, &cur, (int)to, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE));
    if ((to == RINGK_DEV_LAUNCHED) && (d->device->cuda_index >= 0)) {
        __atomic_add_fetch(&d->device->launched, 1, __ATOMIC_ACQ_REL); /* dev_join takes it */
    }
    return 1;
}

/* Under @a d's mu: moves @a d from a state of @a from to LAUNCHED: 1, or 0 (not in one of
 * them: no lock taken, as for every relaunch). The move, which counts a CUDA kernel launched,
 * is made under the process's device lock, under which the calls that must not run beside a
 * launch check that count (ringk_dev_cuda_launched()) and are made: a launch is either seen
 * there or waits for them. */
static int dev_first_launch(ringk_dev_host_t *d, unsigned from)
{
    int moved;

    if (!(from & (1u << ringk_dev_life(d)))) {
        return 0;
    }
    ringk_dev_lock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
    moved = ringk_dev_life_move(d, from, RINGK_DEV_LAUNCHED);
    ringk_dev_unlock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
    return moved;
}

int ringk_dev_cuda_launched(void)
{
    unsigned i, n = 0;

    for (i = 1; i < RINGK_DEV_DEVICES; i++) {
        n += __atomic_load_n(&ringk_dev_proc.device[i].launched, __ATOMIC_ACQUIRE);
    }
    return (int)n;
}

__thread unsigned ringk_dev_locks_held;

/* ---- setup --------------------------------------------------------------------------------- */

/* Formats the device inbox of @a ncells cells at d->view.inbox: in place where the host has
 * its address @a mh (the emulated device), else in the mapped slab's @a spare ring, then
 * copied on the setup stream. 0, -EINVAL, or a CUDA error (logged). */
static int dev_inbox_format(ringk_ctx_t *ctx, const ringk_kernel_t *k, ringk_dev_host_t *d,
                            uint8_t *mh, uint8_t *spare, uint32_t ncells)
{
    uint64_t bytes = ringk_ring_bytes(ncells, RINGK_CELL);
    ringk_ring_t tmp;
    char why[160];
    int ret;

    if (mh != NULL) {
        return (ringk_ring_init(&tmp, mh, bytes, ncells, RINGK_CELL) != 0) ? -EINVAL : 0;
    }
    if (ringk_ring_init(&tmp, spare, bytes, ncells, RINGK_CELL) != 0) {
        return -EINVAL;
    }
    ret = ringk_dev_device_copy(d->device, d->view.inbox.shm, spare, bytes, why, sizeof(why));
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s", k->name, why);
    }
    return ret;
}

/* Lays out the memory of device kernel @a k on its device: the control block, routes, the name
 * tables (the source of the device's copy), host ingress ring (@a in_cells cells) and outbox in
 * mapped memory; the device inbox (@a ncells cells), the staging buffer and the name tables in
 * device memory. The host ingress ring is an LL ring (core/ringk_ring.h), whose cell holds less
 * of a message (RINGK_DEV_POLL_BYTES of it in the first). */
static int dev_layout(ringk_ctx_t *ctx, ringk_kernel_t *k, ringk_dev_host_t *d, uint32_t in_cells,
                      uint32_t ncells)
{
    ringk_dev_device_t *device = d->device;
    uint32_t need      = ringk_ring_cells_for(sizeof(ringk_dev_out_t) + k->max_out, RINGK_CELL);
    uint32_t out_cells = RINGK_DEV_OUTBOX_CELLS;
    uint64_t in_bytes  = ringk_ring_bytes(in_cells, RINGK_CELL), out_bytes;
    uint64_t dv_bytes  = ringk_ring_bytes(ncells, RINGK_CELL);
    uint64_t stage     = RINGK_DEV_STAGE_BYTES(k->max_in, RINGK_CELL);
    size_t names = sizeof(ringk_dev_ctl_t) + RINGK_DEV_ROUTES_MAX * sizeof(ringk_dev_route_t);
    size_t vsrc  = names + RINGK_DEV_NAMES_BYTES; /* the kernel as launches copy it */
    size_t head  = vsrc + sizeof(ringk_dev_kernel_t);
    size_t state = (dv_bytes + stage + RINGK_DEV_NAMES_BYTES + 7) & ~(size_t)7;
    uint8_t *h, *dv, *mh, *md;
    char why[160];

    while (out_cells < 2 * need) { /* two records of the largest message at least */
        out_cells <<= 1;
    }
    out_bytes = ringk_ring_bytes(out_cells, RINGK_CELL);
    head = (head + RINGK_DEV_SLAB_ALIGN - 1) & ~(size_t)(RINGK_DEV_SLAB_ALIGN - 1);
    /* device memory: the inbox, the staging buffer, the name tables, where launches run */
    if (ringk_dev_region_take(device, head + in_bytes + out_bytes + dv_bytes,
                              state + sizeof(ringk_dev_kernel_t), &d->region, why,
                              sizeof(why)) != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s", k->name, why);
        return -ENOMEM;
    }
    h  = device->mapped.host + d->region->at[0];
    dv = device->mapped.dev + d->region->at[0];
    mh = (device->mem.host != NULL) ? device->mem.host + d->region->at[1] : NULL;
    md = device->mem.dev + d->region->at[1];
    memset(h, 0, head);
    d->ctl    = (ringk_dev_ctl_t*)h;
    d->routes = (ringk_dev_route_t*)(h + sizeof(ringk_dev_ctl_t));
    d->view.ctl    = (ringk_dev_ctl_t*)dv;
    d->view.routes = (ringk_dev_route_t*)(dv + sizeof(ringk_dev_ctl_t));
    d->names              = (char (*)[RINGK_DEV_NAME_MAX])(h + names);
    d->src_host           = (ringk_dev_kernel_t*)(h + vsrc);
    d->src_dev            = (ringk_dev_kernel_t*)(dv + vsrc);
    d->state_dev          = (ringk_dev_kernel_t*)(md + state);
    d->view.route_names   = (char (*)[RINGK_DEV_NAME_MAX])(md + dv_bytes + stage);
    d->view.topics        = d->view.route_names + RINGK_DEV_ROUTES_MAX;
    d->view.barriers      = d->view.topics + RINGK_DEV_TOPICS_MAX;
    /* the host ingress ring is the kernel's inbox: every host send path writes it, as an LL
     * ring (k->inbox_ll) */
    if ((ringk_ring_init(&k->inbox, h + head, in_bytes, in_cells, RINGK_CELL) != 0) ||
        (ringk_ring_init(&d->outbox, h + head + in_bytes, out_bytes, out_cells,
                         RINGK_CELL) != 0)) {
        return -EINVAL;
    }
    k->inbox_ll = 1;
    ringk_ring_view(&d->view.ingress, dv + head, ringk_ring_log2(in_cells), RINGK_CELL);
    ringk_ring_view(&d->view.outbox, dv + head + in_bytes, ringk_ring_log2(out_cells),
                    RINGK_CELL);
    ringk_ring_view(&d->view.inbox, md, ringk_ring_log2(ncells), RINGK_CELL);
    /* device scope while only kernels of this device write it; system scope where kernels of
     * other GPUs (peer access, device->peer_in) or of other processes (cuda_shared) may */
    d->view.inbox.scope = ((__atomic_load_n(&device->peer_in, __ATOMIC_RELAXED) != 0) ||
                           device->cuda_shared) ?
                          RINGK_RING_SCOPE_SYSTEM : RINGK_RING_SCOPE_DEVICE;
    d->view.stage       = md + dv_bytes;
    return dev_inbox_format(ctx, k, d, mh, h + head + in_bytes + out_bytes, ncells);
}

/* The control block's configuration, from the kernel's parameters. */
static void dev_ctl_init(ringk_kernel_t *k, ringk_dev_host_t *d)
{
    ringk_dev_ctl_t *c = d->ctl;

    c->magic             = RINGK_DEV_CTL_MAGIC;
    c->abi               = RINGK_DEV_ABI;
    c->mode              = k->mode;
    c->processing        = k->processing;
    c->max_per_iteration = k->max_per_iteration;
    c->max_iterations    = k->max_iterations;
    c->max_in            = k->max_in;
    c->max_out           = k->max_out;
    c->timestamps        = (uint32_t)k->timestamps;
    c->nroutes           = k->publishes_to.count;
    c->ntopics           = k->topics_pub.count;
    c->nbarriers         = k->barriers.count;
    c->state             = k->state;
}

/* The name tables of kernel @a k (its routes, topics and barriers), written in mapped memory
 * and copied to the device's (on the setup stream, before the first launch): 0 or a CUDA error
 * (logged). */
static int dev_names_init(ringk_ctx_t *ctx, ringk_kernel_t *k, ringk_dev_host_t *d)
{
    char (*topics)[RINGK_DEV_NAME_MAX]   = d->names + RINGK_DEV_ROUTES_MAX;
    char (*barriers)[RINGK_DEV_NAME_MAX] = topics + RINGK_DEV_TOPICS_MAX;
    ringk_dev_device_t *device = d->device;
    char why[160];
    unsigned i;
    int ret;

    for (i = 0; i < k->publishes_to.count; i++) {
        memcpy(d->names[i], k->publishes_to.names[i], RINGK_DEV_NAME_MAX);
    }
    for (i = 0; i < k->topics_pub.count; i++) {
        memcpy(topics[i], k->topics_pub.names[i], RINGK_DEV_NAME_MAX);
    }
    for (i = 0; i < k->barriers.count; i++) {
        memcpy(barriers[i], k->barriers.names[i], RINGK_DEV_NAME_MAX);
    }
    if (device->mem.host != NULL) { /* the emulated device: its memory is the host's */
        memcpy(d->view.route_names, d->names, RINGK_DEV_NAMES_BYTES);
        return 0;
    }
    ret = ringk_dev_device_copy(device, d->view.route_names, d->names, RINGK_DEV_NAMES_BYTES, why,
                    sizeof(why));
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s", k->name, why);
    }
    return ret;
}

/* The devices of @a ctx, created on first use (under ctx->lock). */
static ringk_devs_t *devs_of(ringk_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    if (ctx->devs == NULL) {
        ctx->devs = calloc(1, sizeof(*ctx->devs));
    }
    pthread_mutex_unlock(&ctx->lock);
    return ctx->devs;
}

/* The device kernel's memory and host side, on device @a device. */
static int dev_setup(ringk_ctx_t *ctx, ringk_kernel_t *k, ringk_dev_host_t *d)
{
    /* each inbox holds inbox_size cells and two of the largest message: more cells of the
     * host ingress ring, an LL ring, than of the device inbox */
    uint32_t ncells = k->inbox_size, big = RINGK_MSG_CELLS(k->max_in);
    uint32_t in_cells = k->inbox_size;
    uint32_t in_big   = ringk_ring_ll_cells(sizeof(ringk_msg_t) + k->max_in, RINGK_CELL);
    int ret;

    if (in_big > RINGK_RING_MSG_CELLS_MAX) { /* a cell header's count is 16 bits */
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': max_in %u is above the %u bytes a "
                      "message to a device kernel carries", k->name, k->max_in,
                      RINGK_DEV_MAX_IN_LL);
        return -EINVAL;
    }
    while (ncells < 2 * big) {
        ncells *= 2;
    }
    while (in_cells < 2 * in_big) {
        in_cells *= 2;
    }
    if (ringk_ring_log2(in_cells) > RINGK_RING_LOG2_MAX) {
        return -EINVAL;
    }
    ret = dev_layout(ctx, k, d, in_cells, ncells);
    if (ret != 0) {
        return ret;
    }
    dev_ctl_init(k, d);
    ret = dev_names_init(ctx, k, d);
    if (ret != 0) {
        return ret;
    }
    d->view.arg     = k->arg;
    d->view.threads = k->dev_threads;
    d->view.blocks  = k->dev_blocks;
    d->view.err_key = UINT64_MAX;
    *d->src_host = d->view; /* mapped: the device reads it at each launch */
    if (ringk_dev_tally_add(d->state_dev, &d->tally) != 0) {
        ringk_log_msg(ctx, RINGK_LOG_WARN, "kernel '%s': the tally of device code compiled as C "
                      "is full: this kernel's accesses are not counted", k->name);
    }
    pthread_mutex_init(&d->mu, NULL);
    if (d->device->cuda_index >= 0) {
        /* loads entries and may raise the stack limit: in relaxed capture mode, for the
         * runtime of the device's calls and that of the kernel's entry */
        int mode = ringk_dev_relax_begin(d->device->ops), emode = 0;

        if (d->entry->cuda != d->device->ops) {
            emode = ringk_dev_relax_begin(d->entry->cuda);
        }
        ret = ringk_dev_entry_ready(ctx, k, d->entry, d->device->ops, d->device->cuda_index);
        if (d->entry->cuda != d->device->ops) {
            ringk_dev_relax_end(d->entry->cuda, emode);
        }
        ringk_dev_relax_end(d->device->ops, mode);
        if (ret != 0) {
            return ret;
        }
        d->counted = 1;
        if ((ret = ringk_dev_shape_fits(ctx, k, d)) != 0) {
            return ret;
        }
        d->stream  = d->device->streams[d->stream_at]; /* free: ringk_exec_dev_create found it */
        d->device->stream_used[d->stream_at] = 1;
        d->device->kernels++;
        d->device->share += d->share;
    }
    k->dev        = d;
    k->exec       = &ringk_exec_dev;
    k->sleep_word = &d->ctl->idle;
    return ringk_dev_proxy_start(ctx);
}

/* Under ringk_dev_proc.mu: gives back what a kernel whose setup failed took (nothing of it was
 * launched). */
static void dev_setup_undo(ringk_dev_host_t *d)
{
    if (d->stream != NULL) {
        d->device->stream_used[d->stream_at] = 0;
        d->device->kernels--;
        d->device->share -= d->share;
    }
    if (d->region != NULL) {
        ringk_dev_region_put(d->device, d->region);
    }
    if (d->tally != NULL) {
        ringk_dev_tally_remove(d->state_dev, 0);
    }
}

int ringk_exec_dev_create(ringk_ctx_t *ctx, const ringk_kernel_params_t *p, ringk_kernel_t *k)
{
    unsigned backends = (p->field_mask & RINGK_KERNEL_PARAM_FIELD_BACKENDS) ? p->backends
                                                                            : RINGK_BACKEND_CPU;
    const ringk_device_entry_t *e = (p->field_mask & RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY) ?
                                    p->device_entry : NULL;
    ringk_dev_host_t *d;
    char why[320] = "";
    int ret, blocking, fallback;

    if (!(backends & RINGK_BACKEND_CUDA)) {
        return 0;
    }
    if ((ret = ringk_dev_entry_check(ctx, k, e)) != 0) {
        return ret; /* CPU | CUDA too: a device kernel is asked for, and it has no entry */
    }
    if (devs_of(ctx) == NULL) {
        return -ENOMEM;
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL) {
        return -ENOMEM;
    }
    d->entry = e;
    if (e->kind == RINGK_DEVICE_ENTRY_CUDA) {
        ringk_dev_queues_ask(); /* before the first CUDA call, under no lock */
    }
    ringk_dev_lock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
    blocking = (e->kind == RINGK_DEVICE_ENTRY_CUDA) && ringk_dev_launches_block(why, sizeof(why));
    ret      = blocking ? -EDEADLK :
               ringk_dev_device_get(ctx, e, k->placement, &d->device, why, sizeof(why));
    /* a stream of its own: one of the device's, made before any kernel ran (-ENOSPC when each
     * has a kernel) */
    if ((ret == 0) && (d->device->cuda_index >= 0)) {
        ret = ringk_dev_device_stream(d->device, &d->stream_at, why, sizeof(why));
    }
    if ((ret == 0) && (d->device->cuda_index < 0)) {
        ret = ringk_dev_emu_shape_fits(ctx, k);
    }
    if ((ret == 0) && (d->device->cuda_index >= 0) && (k->arg != NULL)) {
        /* -EFAULT is logged below (and may move the kernel to the CPU); -EIO here */
        ret = e->cuda->reaches(d->device->cuda_index, k->arg, why, sizeof(why));
        if (ret == -EIO) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s", k->name, why);
        }
    }
    if (ret == 0) {
        ret = dev_setup(ctx, k, d);
    }
    if (ret != 0) {
        dev_setup_undo(d);
    }
    ringk_dev_unlock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
    if (ret == 0) {
        return 1;
    }
    if (d->counted) {
        ringk_dev_entry_gone(d->device->cuda_index);
    }
    k->dev      = NULL;
    k->exec     = &ringk_exec_cpu;
    k->inbox_ll = 0; /* a host ingress ring laid out before the failure is not its inbox */
    free(d);
    /* no device, no room on it, launches that block, or an arg it cannot read (the last two
     * the program's doing: a warning): the CPU when the kernel may run there */
    fallback = (ret == -ENODEV) || (ret == -ENOSPC) || (ret == -EFAULT) || blocking;
    if (fallback && (backends & RINGK_BACKEND_CPU) && (k->handler != NULL)) {
        ringk_log_msg(ctx, ((ret == -EFAULT) || blocking) ? RINGK_LOG_WARN : RINGK_LOG_INFO,
                      "kernel '%s' runs on the CPU: %s", k->name, why);
        return 0;
    }
    if (fallback) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' (CUDA backend only): %s", k->name, why);
    }
    return ret;
}

static void *emu_main(void *arg)
{
    ringk_kernel_t *k   = arg;
    ringk_dev_host_t *d = k->dev;

    if (ringk_dev_emu_launch(d->entry->emu_run, d->src_dev, d->state_dev, d->view.threads,
                             d->view.blocks) != 0) {
        ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': the emulated device could not "
                      "start the launch's %u host threads", k->name,
                      d->view.threads * d->view.blocks);
    }
    __atomic_add_fetch(&d->emu_returns, 1, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&ringk_dev_proc.running, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ringk_exec_dev_launch(); with @a only_idle (the emulated device) nothing when a launch of
 * the kernel still runs. */
static int dev_launch(ringk_kernel_t *k, int only_idle)
{
    ringk_dev_host_t *d = k->dev;
    char why[160];
    int ret = 0;

    ringk_dev_lock(&d->mu, RINGK_DEV_LOCK_KERNEL);
    if (only_idle && (__atomic_load_n(&d->emu_returns, __ATOMIC_ACQUIRE) !=
                      __atomic_load_n(&d->launches, __ATOMIC_ACQUIRE))) {
        ringk_dev_unlock(&d->mu, RINGK_DEV_LOCK_KERNEL);
        return -EBUSY; /* 'launches' moves only under the lock: a launch runs */
    }
    if (ringk_dev_life(d) >= RINGK_DEV_FAULTED) {
        /* a wake that comes after the kernel faulted (it is terminated: a launch would run a
         * kernel the host no longer serves, on a stream that failed), or after it finished and
         * was joined (a host sender that looked before the terminate, or a doorbell of a device
         * sender whose compare-and-swap on 'idle' raced the host's): the launch would outlive
         * the join, and run on memory that a later kernel may take (ringk_dev_region_t) */
        ringk_dev_unlock(&d->mu, RINGK_DEV_LOCK_KERNEL);
        return 0;
    }
    dev_first_launch(d, RINGK_DEV_LIFE(NEW) | RINGK_DEV_LIFE(DEFERRED));
    /* counted before the launch runs: what it handles is seen after the count */
    __atomic_add_fetch(&d->launches, 1, __ATOMIC_RELEASE);
    /* the device clock's offset: read by the launch when it starts (the launch orders it) */
    __atomic_store_n(&d->ctl->launch_ns, ringk_wall_ns(), __ATOMIC_RELAXED);
    if (d->device->cuda_index < 0) {
        if (d->has_thread) {
            pthread_join(d->thread, NULL); /* the last launch has returned, or is returning */
        }
        __atomic_add_fetch(&ringk_dev_proc.running, 1, __ATOMIC_ACQ_REL);
        d->has_thread = (pthread_create(&d->thread, NULL, emu_main, k) == 0);
        if (!d->has_thread) {
            __atomic_sub_fetch(&ringk_dev_proc.running, 1, __ATOMIC_RELEASE);
            snprintf(why, sizeof(why), "cannot start a thread for the emulated device");
            ret = -EAGAIN;
        }
    } else {
        /* stream-ordered: a relaunch queues behind a launch that is still returning. The
         * launch is the kernel's own entry's (its __global__ runs its handler); the device's ops
         * are the first entry's, used only for the calls every entry shares. */
        int mode = ringk_dev_relax_begin(d->entry->cuda);

        ret = d->entry->cuda->launch(d->src_dev, d->state_dev, d->device->cuda_index, d->stream,
                                     d->view.threads, d->view.blocks, why, sizeof(why));
        ringk_dev_relax_end(d->entry->cuda, mode);
    }
    if (ret != 0) {
        __atomic_sub_fetch(&d->launches, 1, __ATOMIC_RELAXED);
    }
    ringk_dev_unlock(&d->mu, RINGK_DEV_LOCK_KERNEL);
    if (ret != 0) {
        ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': launch: %s", k->name, why);
    }
    return ret;
}

int ringk_exec_dev_launch(ringk_kernel_t *k)
{
    return dev_launch(k, 0);
}

int ringk_exec_dev_launch_idle(ringk_kernel_t *k)
{
    return dev_launch(k, 1);
}

static int dev_start(ringk_kernel_t *k)
{
    ringk_dev_ctl_t *c = k->dev->ctl;
    int started;

    c->id     = k->id;
    c->sender = ringk_sender_of(k->ctx, k);
    /* In a job of several processes whose ringk_ctx_start has not run yet, the launch waits
     * for it: starting the network layer makes UCP open its transports and connect, and a
     * transport may then make CUDA calls that can wait for resident kernels (docs/gpu.md,
     * "Implicit synchronization"), such as a peer-path check between two GPUs. Its inboxes
     * take messages meanwhile. Looked at and deferred under ctx->lock, which ringk_ctx_start
     * takes (ringk_exec_dev_remote_routes) after the job started and before it launches the
     * deferred kernels: a kernel is deferred before that, or finds the job started. */
    pthread_mutex_lock(&k->ctx->lock);
    ringk_exec_dev_routes(k->ctx);
    started = (ringk_remote_of(k->ctx) != NULL);
    if (started) { /* a kernel made once the job started */
        ringk_dev_remote_routes_locked(k->ctx);
    } else if (k->ctx->job.size > 1) {
        ringk_dev_life_move(k->dev, RINGK_DEV_LIFE(NEW), RINGK_DEV_DEFERRED);
    }
    pthread_mutex_unlock(&k->ctx->lock);
    if (!started && (k->ctx->job.size > 1)) {
        return 0;
    }
    /* launched once in either mode: an event-driven kernel returns once idle, and senders
     * relaunch it ('idle', W1/W2 in ringk_device.h) */
    return ringk_exec_dev_launch(k);
}

/* Launches @a k if its first launch waited for ringk_ctx_start. */
static void dev_launch_deferred(ringk_kernel_t *k)
{
    int deferred;

    ringk_dev_lock(&k->dev->mu, RINGK_DEV_LOCK_KERNEL);
    deferred = dev_first_launch(k->dev, RINGK_DEV_LIFE(DEFERRED));
    ringk_dev_unlock(&k->dev->mu, RINGK_DEV_LOCK_KERNEL);
    if (deferred) {
        ringk_exec_dev_launch(k);
    }
}

void ringk_exec_dev_start_deferred(ringk_ctx_t *ctx)
{
    unsigned i, count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);
    ringk_kernel_t *k;

    for (i = 0; i < count; i++) {
        k = __atomic_load_n(&ctx->kernels[i], __ATOMIC_ACQUIRE);
        if ((k != NULL) && (k->dev != NULL)) {
            dev_launch_deferred(k);
        }
    }
}

/* A sender found the kernel idle (its launch returned): the one that takes 'idle' back
 * relaunches it. The loop's park (ringk_dev_park) takes it back too, from the GPU: where the
 * GPU's atomics on mapped memory are not atomic with the host's
 * (cudaDevAttrHostNativeAtomicSupported 0, PCIe), both compare-and-swaps may succeed. Then the
 * loop goes on and a second launch waits on the kernel's stream until the first returns, finds
 * nothing or the next messages, and parks: one launch too many, no lost wake-up (neither swap
 * can fail while 'idle' is 1). */
static void dev_wake(ringk_kernel_t *k)
{
    if (__atomic_load_n(&k->dev->ctl->idle, __ATOMIC_SEQ_CST) &&
        ringk_dev_cas_sys_i32(&k->dev->ctl->idle, 1, 0)) {
        ringk_exec_dev_launch(k);
    }
}

/* A state the host set: the loop reads it from the control block. */
static void dev_state(ringk_kernel_t *k)
{
    __atomic_store_n(&k->dev->ctl->state, ringk_load_i(&k->state), __ATOMIC_SEQ_CST);
    if (ringk_load_i(&k->state) == RINGK_KERNEL_TERMINATING) {
        dev_launch_deferred(k); /* never launched (no ringk_ctx_start): it drains and stops */
    }
}

/* How long a join waits for a CUDA launch whose loop finished to return. */
#define RINGK_DEV_JOIN_NS 10000000000ull

/* Under ringk_dev_proc.mu, for a kernel whose launch did not return: the other GPUs whose
 * inboxes its direct routes write count it as stuck too, so that their memory, which it may go
 * on writing through peer access, is never freed either (ringk_exec_dev_release). */
static void dev_stuck_targets(ringk_dev_host_t *d)
{
    ringk_dev_device_t *done[RINGK_DEV_ROUTES_MAX];
    unsigned j, i, ndone = 0;

    for (j = 0; j < RINGK_DEV_ROUTES_MAX; j++) {
        if ((d->held[j] == NULL) || (d->held_on[j] == d->device)) {
            continue;
        }
        for (i = 0; (i < ndone) && (done[i] != d->held_on[j]); i++) {
        }
        if (i == ndone) {
            done[ndone++] = d->held_on[j];
            d->held_on[j]->stuck++;
        }
    }
}

static void dev_join(ringk_kernel_t *k)
{
    ringk_dev_host_t *d = k->dev;
    int running         = 0, launched;
    uint64_t until;
    char why[160];

    ringk_dev_lock(&d->mu, RINGK_DEV_LOCK_KERNEL);
    launched = (ringk_dev_life(d) == RINGK_DEV_LAUNCHED) ||
               (ringk_dev_life(d) == RINGK_DEV_FAULTED);
    ringk_dev_life_move(d, RINGK_DEV_LIFE(NEW) | RINGK_DEV_LIFE(DEFERRED) |
                        RINGK_DEV_LIFE(LAUNCHED) | RINGK_DEV_LIFE(FAULTED), RINGK_DEV_JOINED);
    if (d->has_thread) {
        pthread_join(d->thread, NULL);
        d->has_thread = 0;
    }
    /* a CUDA launch: the loop set 'done', so the launch is returning; bounded (10 s) */
    until = ringk_now_ns() + RINGK_DEV_JOIN_NS;
    while ((d->stream != NULL) && (ringk_dev_life(d) == RINGK_DEV_JOINED)) {
        struct timespec ts = {0, 1000000};
        int st = ringk_dev_stream_status(d, why, sizeof(why));

        /* 0 runs; -EAGAIN: CUDA could not say, which proves nothing (it may run on); 1 returned;
         * -EIO: it faulted, and the device's context with it, so nothing of it runs */
        running = (st == 0) || (st == -EAGAIN);
        if (!running || (ringk_now_ns() >= until)) {
            break;
        }
        nanosleep(&ts, NULL);
    }
    if ((d->stream != NULL) && running &&
        ringk_dev_life_move(d, RINGK_DEV_LIFE(JOINED), RINGK_DEV_STUCK)) {
        /* still running: freeing its stream or the device's memory would wait for it (cudaFree
         * waits for the whole device), so both are left to the process's exit */
        ringk_dev_lock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
        d->device->stuck++;
        dev_stuck_targets(d);
        ringk_dev_unlock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
        ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': its launch on CUDA device %d still "
                      "runs 10 s after it finished: its stream and the device's memory are not "
                      "freed", k->name, d->device->cuda_index);
    } else if (launched && (d->device->cuda_index >= 0)) {
        __atomic_sub_fetch(&d->device->launched, 1, __ATOMIC_ACQ_REL); /* its launch returned */
    }
    ringk_dev_unlock(&d->mu, RINGK_DEV_LOCK_KERNEL);
}

const ringk_exec_ops_t ringk_exec_dev = {
    .name  = "device",
    .start = dev_start,
    .wake  = dev_wake,
    .join  = dev_join,
    .state = dev_state
};

/* Each counter of @a t (none: zeros), read atomically. */
static void dev_tally_read(const ringk_device_tally_t *t, ringk_device_tally_t *out)
{
    const uint64_t *from = (const uint64_t*)t;
    uint64_t *to         = (uint64_t*)out;
    size_t i;

    memset(out, 0, sizeof(*out));
    for (i = 0; (t != NULL) && (i < sizeof(*t) / sizeof(uint64_t)); i++) {
        to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    }
}

void ringk_exec_dev_stats(ringk_kernel_t *k, ringk_kernel_stats_t *s)
{
    ringk_dev_ctl_t *c = k->dev->ctl;
    uint64_t m = s->field_mask;

    if (m & RINGK_KERNEL_STATS_FIELD_MSGS_IN) {
        s->msgs_in = __atomic_load_n(&c->msgs_in, __ATOMIC_RELAXED);
    }
    if (m & RINGK_KERNEL_STATS_FIELD_MSGS_OUT) {
        s->msgs_out = __atomic_load_n(&c->msgs_out, __ATOMIC_RELAXED) +
                      __atomic_load_n(&k->dev->published, __ATOMIC_RELAXED);
    }
    if (m & RINGK_KERNEL_STATS_FIELD_HANDLER_ERRORS) {
        s->handler_errors = __atomic_load_n(&c->handler_errors, __ATOMIC_RELAXED);
    }
    if (m & RINGK_KERNEL_STATS_FIELD_QUEUE_DEPTH) {
        /* the host ingress ring (the device inbox is in memory the host may not read) */
        s->queue_depth = __atomic_load_n(&k->inbox.prod->pos, __ATOMIC_RELAXED) -
                         __atomic_load_n(&k->inbox.cons->pos, __ATOMIC_RELAXED);
    }
    if (m & RINGK_KERNEL_STATS_FIELD_DEVICE) {
        s->launches    = __atomic_load_n(&k->dev->launches, __ATOMIC_RELAXED);
        s->bad_cells   = __atomic_load_n(&c->bad_cells, __ATOMIC_RELAXED);
        s->send_failed = __atomic_load_n(&k->dev->send_failed, __ATOMIC_RELAXED);
        s->sent_direct = __atomic_load_n(&c->msgs_direct, __ATOMIC_RELAXED);
        s->parked      = __atomic_load_n(&c->idle, __ATOMIC_RELAXED);
        s->device      = (k->dev->device->cuda_index < 0) ? RINGK_DEVICE_EMULATED
                                                        : k->dev->device->cuda_index;
    }
    if (m & RINGK_KERNEL_STATS_FIELD_DEVICE_TALLY) {
        dev_tally_read(k->dev->tally, &s->tally);
    }
    if (m & RINGK_KERNEL_STATS_FIELD_SHAPE) {
        s->threads     = k->dev_threads;
        s->blocks      = k->dev_blocks;
        s->block_share = (k->dev->stream != NULL) ? k->dev->share : 0;
    }
}

void ringk_exec_dev_free(ringk_kernel_t *k)
{
    unsigned j;
    int stuck;

    if (k->dev != NULL) {
        stuck = (ringk_dev_life(k->dev) == RINGK_DEV_STUCK);
        ringk_dev_lock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
        if (k->dev->stream != NULL) {
            /* its launches returned: the next kernel takes the stream; a stuck one keeps it */
            k->dev->device->stream_used[k->dev->stream_at] = stuck ? 2 : 0;
        }
        if (!stuck) {
            /* its launches have returned, so none holds a copy of a direct route's target
             * any more; a stuck one may still touch its memory and its targets' */
            k->dev->device->kernels -= (k->dev->stream != NULL);
            k->dev->device->share   -= (k->dev->stream != NULL) ? k->dev->share : 0;
            for (j = 0; j < RINGK_DEV_ROUTES_MAX; j++) {
                if (k->dev->held[j] != NULL) {
                    ringk_dev_region_put(k->dev->held_on[j], k->dev->held[j]);
                }
            }
            if (k->dev->region != NULL) {
                ringk_dev_region_put(k->dev->device, k->dev->region);
            }
        }
        ringk_dev_unlock(&ringk_dev_proc.mu, RINGK_DEV_LOCK_PROC);
        if (k->dev->counted && !stuck) { /* a stuck launch may still run there */
            ringk_dev_entry_gone(k->dev->device->cuda_index);
        }
        ringk_dev_tally_remove(k->dev->state_dev, stuck);
        pthread_mutex_destroy(&k->dev->mu);
        free(k->dev);
        k->dev = NULL;
    }
}

void ringk_exec_dev_stop(ringk_ctx_t *ctx)
{
    if ((ctx->devs != NULL) && ctx->devs->proxy_started) {
        __atomic_store_n(&ctx->devs->stop, 1, __ATOMIC_RELEASE);
        pthread_join(ctx->devs->proxy, NULL);
        ctx->devs->proxy_started = 0;
    }
}
