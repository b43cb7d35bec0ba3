/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the device executor as the runtime sees it (kernels of the CUDA backend, on a GPU or
 * the emulated device). The runtime includes this header and no other of dev/; the executor
 * calls up only through ringk_internal.h and ringk_exec.h. */
#ifndef RINGK_DEV_H
#define RINGK_DEV_H

#include "ringk/ringk_internal.h"

/** Whether kernel @a k (parameters read into it) runs on a device: 1 with its device memory,
 *  inbox and executor set up, 0 for the CPU, or a negative errno (logged). */
int ringk_exec_dev_create(ringk_ctx_t *ctx, const ringk_kernel_params_t *p, ringk_kernel_t *k);
/** Frees the host side of a device kernel and, unless a launch of it may still run, gives
 *  back its memory in the slabs and what it held of others'. */
void ringk_exec_dev_free(ringk_kernel_t *k);
/** Under ctx->lock, when @a gone is unlinked: routes to it go through the proxy from now on. */
void ringk_exec_dev_route_drop(ringk_ctx_t *ctx, const ringk_kernel_t *gone);
/** The statistics of a device kernel, from its control block. */
void ringk_exec_dev_stats(ringk_kernel_t *k, ringk_kernel_stats_t *s);
/** After the job's network layer started (ringk_ctx_start): launches the device kernels
 *  created before it. */
void ringk_exec_dev_start_deferred(ringk_ctx_t *ctx);
/** Under ctx->lock, for the directory exchanged at start: fills @a e with how another process
 *  of the node may write device kernel @a k's device inbox directly, or leaves it zero (kind
 *  RINGK_DEV_EXPORT_NONE) where it may not (ringk_dev_remote.c). */
void ringk_exec_dev_export(ringk_ctx_t *ctx, const ringk_kernel_t *k, ringk_dev_export_t *e);
/** Once the job's directory is in, before the first launches: makes direct the routes of this
 *  process's device kernels to device kernels of other processes that exported their inbox
 *  and that they can map; the others stay through the host (each logged once, with why). */
void ringk_exec_dev_remote_routes(ringk_ctx_t *ctx);
/** Once every kernel terminated: stops the proxy. */
void ringk_exec_dev_stop(ringk_ctx_t *ctx);
/** Once every kernel is freed: gives up the context's use of its devices (the last context
 *  using a device frees its slabs). */
void ringk_exec_dev_release(ringk_ctx_t *ctx);

#endif
