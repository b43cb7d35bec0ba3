/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: whether a device kernel fits where it is made: its entry, its launch shape on its
 * device (a CUDA device's occupancy, the emulated device's host threads), and launches that
 * return while their kernel runs. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"

#include <stdlib.h>
#include <string.h>

/* Checks @a entry: 0, or -EINVAL (logged). */
int ringk_dev_entry_check(ringk_ctx_t *ctx, const ringk_kernel_t *k,
                          const ringk_device_entry_t *e)
{
    if ((e == NULL) || (e->magic != RINGK_DEVICE_ENTRY_MAGIC) ||
        ((e->kind == RINGK_DEVICE_ENTRY_EMULATED) && (e->emu_run == NULL)) ||
        ((e->kind == RINGK_DEVICE_ENTRY_CUDA) && (e->cuda == NULL)) ||
        ((e->kind != RINGK_DEVICE_ENTRY_EMULATED) && (e->kind != RINGK_DEVICE_ENTRY_CUDA))) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': the CUDA backend needs a device_entry "
                      "defined by RINGK_DEVICE_ENTRY() (RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY)",
                      k->name);
        return -EINVAL;
    }
    if (e->abi != RINGK_DEV_ABI) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': device_entry '%s' was built for device "
                      "layout %u, this libringk has %u: rebuild it", k->name, e->name, e->abi,
                      RINGK_DEV_ABI);
        return -EINVAL;
    }
    return 0;
}

#define DEV_SHARE_ALL 1000000u /* a device's block slots, in millionths */

/* Whether the device holds the kernel's launch shape at once (its threads per block within
 * what the entry's registers allow, all its blocks resident together, beside the device
 * kernels of this process already there): 0 with the kernel's share of the device's block
 * slots in d->share, -E2BIG with the reason logged (CPU | CUDA too: a shape the device cannot
 * hold is the program's to fix, not a reason to run elsewhere), or a CUDA error. Each kernel
 * takes blocks / (the blocks of its entry and block size the device holds at once) of the
 * device, rounded up; together they may take all of it. Kernels of other processes, and the
 * program's own CUDA kernels outside libringk, are not seen. */
int ringk_dev_shape_fits(ringk_ctx_t *ctx, const ringk_kernel_t *k, ringk_dev_host_t *d)
{
    const uint32_t used = d->device->share;
    uint32_t max_blocks = 0, max_threads = 0, share;
    char why[160];
    int ret = d->entry->cuda->fit(d->device->cuda_index, k->dev_threads, &max_blocks,
                                  &max_threads, why, sizeof(why));

    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': %s", k->name, why);
        return ret;
    }
    if (k->dev_threads > max_threads) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': threads %u is above the %u a block "
                      "of entry '%s' may have on CUDA device %d (its registers per thread; "
                      "RINGK_DEVICE_ENTRY_THREADS(sym, handler, %u) bounds them)", k->name,
                      k->dev_threads, max_threads, d->entry->name, d->device->cuda_index,
                      k->dev_threads);
        return -E2BIG;
    }
    if (k->dev_blocks > max_blocks) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': blocks %u is above the %u blocks of "
                      "%u threads of entry '%s' that CUDA device %d holds at once (a kernel's "
                      "blocks are all resident together)", k->name, k->dev_blocks, max_blocks,
                      k->dev_threads, d->entry->name, d->device->cuda_index);
        return -E2BIG;
    }
    share = (uint32_t)(((uint64_t)k->dev_blocks * DEV_SHARE_ALL + max_blocks - 1) / max_blocks);
    if (share > DEV_SHARE_ALL - used) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': its %u blocks of %u threads take "
                      "%u.%u%% of the blocks of entry '%s' that CUDA device %d holds at once "
                      "(%u), and the device kernels of this process resident there take %u.%u%%: "
                      "its blocks could not all be resident (destroy one, or give this one "
                      "fewer blocks)", k->name, k->dev_blocks, k->dev_threads,
                      share / 10000, share / 1000 % 10, d->entry->name, d->device->cuda_index,
                      max_blocks, used / 10000, used / 1000 % 10);
        return -E2BIG;
    }
    d->share = share;
    return 0;
}

/* Whether the emulated device runs the kernel's threads x blocks (a host thread each): 0, or
 * -E2BIG (logged). */
int ringk_dev_emu_shape_fits(ringk_ctx_t *ctx, const ringk_kernel_t *k)
{
    if (k->dev_threads * k->dev_blocks <= RINGK_DEV_EMU_THREADS_MAX) {
        return 0;
    }
    ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': threads %u x blocks %u is above the %u "
                  "threads the emulated device runs a kernel on", k->name, k->dev_threads,
                  k->dev_blocks, RINGK_DEV_EMU_THREADS_MAX);
    return -E2BIG;
}

/* Whether CUDA launches return only once the kernel finished (CUDA_LAUNCH_BLOCKING=1): a
 * persistent kernel's launch would then never return, and an event-driven kernel's relaunch
 * would hold the proxy thread that serves the kernel's sends (docs/gpu.md, "Launches that
 * block"). 1 with the reason in @a why, or 0. */
int ringk_dev_launches_block(char *why, size_t why_len)
{
    const char *v = getenv("CUDA_LAUNCH_BLOCKING");

    if ((v == NULL) || (strcmp(v, "1") != 0)) {
        return 0;
    }
    snprintf(why, why_len, "CUDA_LAUNCH_BLOCKING=1 makes a launch return only once its kernel "
             "finished, and a device kernel's launch does not finish while it serves messages "
             "(unset it; tools that serialize launches, such as Nsight Compute and cuda-gdb, do "
             "the same)");
    return 1;
}
