/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring device's endpoint, RMA: put and get by cross-memory attach on host memory, and
 * through the path chosen at creation on GPU memory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv/writev */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_ep.h"

#include <core/ringk_cuda.h>

#include <uct/base/uct_iov.inl>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>
#include <ucs/time/time.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- RMA by cross-memory attach -------------------------------------------------------------- */

/* Checks that [remote_addr, remote_addr + length) lies in the region @a rkey describes and that
 * the region belongs to this ep's peer: an rkey from one peer never reaches another process. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_ringk_ep_rkey_check(uct_ringk_ep_t *ep, uct_rkey_t rkey, uint64_t remote_addr, size_t length,
                        const char *op)
{
    const uct_ringk_rkey_t *key = (const uct_ringk_rkey_t*)rkey;

    if (ucs_unlikely((key == NULL) || (key->kind != UCT_RINGK_KEY_REG) ||
                     (key->pid != ep->peer.pid) ||
                     (remote_addr < key->address) ||
                     (length > key->length) ||
                     (remote_addr - key->address > key->length - length))) {
        ucs_error("ringk ep %p: %s of %zu bytes at 0x%" PRIx64 " is outside the remote key "
                  "(pid %u, 0x%" PRIx64 "+%" PRIu64 ", peer pid %u)", ep, op, length, remote_addr,
                  key ? key->pid : 0, key ? key->address : 0, key ? key->length : 0,
                  ep->peer.pid);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* Moves local iovecs to or from the peer's memory, looping over partial transfers. */
static ucs_status_t uct_ringk_ep_cma(uct_ringk_ep_t *ep, struct iovec *local, size_t nlocal,
                                     uint64_t remote_addr, size_t length, int write)
{
    struct iovec remote;
    size_t done = 0, skip;
    ssize_t ret;

    while (done < length) {
        remote.iov_base = (void*)(uintptr_t)(remote_addr + done);
        remote.iov_len  = length - done;
        ret = write ? process_vm_writev(ep->peer.pid, local, nlocal, &remote, 1, 0) :
                      process_vm_readv(ep->peer.pid, local, nlocal, &remote, 1, 0);
        if (ret <= 0) {
            ucs_error("ringk ep %p: %s of %zu bytes at 0x%" PRIx64 " in pid %u failed: %m", ep,
                      write ? "process_vm_writev" : "process_vm_readv", length - done,
                      remote_addr + done, ep->peer.pid);
            if ((errno == ESRCH) || (errno == EPERM)) {
                uct_ringk_peer_fail(&ep->peer);
                return UCT_RINGK_EP_FAILED_STATUS;
            }
            return UCS_ERR_IO_ERROR;
        }
        done += ret;
        /* Advance the local iovecs past what was moved. */
        for (skip = ret; (nlocal > 0) && (skip >= local->iov_len); nlocal--, local++) {
            skip -= local->iov_len;
        }
        if (nlocal > 0) {
            local->iov_base = (char*)local->iov_base + skip;
            local->iov_len -= skip;
        }
    }
    return UCS_OK;
}

/* Whether host memory of the peer is reached through the staging area (UCX_RINGK_HOST_RMA). */
static UCS_F_ALWAYS_INLINE int uct_ringk_ep_host_staged(uct_ringk_ep_t *ep)
{
    return ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t)->config.host_rma ==
           UCT_RINGK_HOST_RMA_STAGED;
}

/* ---- GPU memory: one copy routine per path ------------------------------------------------ */

/* Where remote_addr of a peer's CUDA region is mapped in this process. */
static void *uct_ringk_gpu_remote(const uct_ringk_rkey_t *key, uint64_t remote_addr)
{
    return (char*)key->mapped + (remote_addr - key->alloc_base);
}

/* A copy through CUDA on the copy stream of device @a dev (-1: the calling thread's current
 * device), waited for. */
static ucs_status_t uct_ringk_gpu_copy(uct_ringk_ep_t *ep, int dev, void *dst, const void *src,
                                       size_t len)
{
    char why[256];

    if (ringk_cuda_copy_on(dev, dst, src, len, why, sizeof(why)) != 0) {
        ucs_error("ringk ep %p (%s): %s", ep, ringk_path_name(ep->path), why);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

/* P2P_NVLINK, P2P_PCIE and CUDA_IPC: one copy through the peer's allocation, mapped by CUDA
 * IPC with peer access enabled on demand (cudaIpcMemLazyEnablePeerAccess), so the copy goes
 * over the link the path names; the driver routes a CUDA_IPC copy between GPUs without P2P.
 * The copy goes on the copy stream of the GPU the peer's memory is on (one of the pair), not
 * on one of whatever device the calling thread has current. */
static ucs_status_t uct_ringk_gpu_move_ipc(uct_ringk_ep_t *ep, const uct_ringk_rkey_t *key,
                                           const struct iovec *local, size_t nlocal,
                                           uint64_t remote_addr, int write)
{
    ucs_status_t status = UCS_OK;
    void *remote;
    size_t i;

    for (i = 0; (i < nlocal) && (status == UCS_OK); i++) {
        remote = uct_ringk_gpu_remote(key, remote_addr);
        status = write ? uct_ringk_gpu_copy(ep, key->dev, remote, local[i].iov_base,
                                            local[i].iov_len) :
                         uct_ringk_gpu_copy(ep, key->dev, local[i].iov_base, remote,
                                            local[i].iov_len);
        remote_addr += local[i].iov_len;
    }
    return status;
}

/* HOST_STAGED, one-sided: every byte goes through pinned host memory of this process, never
 * from GPU to GPU: a GPU buffer in 1 MiB chunks through the process's bounce buffers, the copy
 * out of one chunk overlapping the copy into the peer's allocation (mapped by CUDA IPC) of the
 * one before (ringk_cuda_peer_copy); a host buffer in one copy. With UCX_RINGK_GPU_STAGING=peer
 * (and for keys this process could not map) the endpoint's staging area, which the peer
 * serves, carries the bytes instead: no CUDA IPC at all (ringk_xstage.c). */
static ucs_status_t uct_ringk_gpu_move_staged(uct_ringk_ep_t *ep, const uct_ringk_rkey_t *key,
                                              const struct iovec *local, size_t nlocal,
                                              uint64_t remote_addr, int write)
{
    ucs_status_t status = UCS_OK;
    int ldev, rdev, err;
    char why[256];
    void *remote;
    size_t i;

    if (ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t)->config.gpu_staging ==
        UCT_RINGK_GPU_STAGING_PEER) {
        return uct_ringk_ep_xstage_move(ep, local, nlocal, remote_addr, write);
    }
    for (i = 0; (i < nlocal) && (status == UCS_OK); remote_addr += local[i].iov_len, i++) {
        remote = uct_ringk_gpu_remote(key, remote_addr);
        if (!uct_ringk_local_is_gpu(local[i].iov_base)) {
            status = write ? uct_ringk_gpu_copy(ep, key->dev, remote, local[i].iov_base,
                                                local[i].iov_len) :
                             uct_ringk_gpu_copy(ep, key->dev, local[i].iov_base, remote,
                                                local[i].iov_len);
            continue;
        }
        err = ringk_cuda_ptr_ordinal(local[i].iov_base, &ldev, why, sizeof(why)) ?:
              ringk_cuda_ptr_ordinal(remote, &rdev, why, sizeof(why)) ?:
              (write ? ringk_cuda_peer_copy(remote, rdev, local[i].iov_base, ldev,
                                            local[i].iov_len, RINGK_CUDA_MOVE_STAGED, 0, NULL,
                                            why, sizeof(why)) :
                       ringk_cuda_peer_copy(local[i].iov_base, ldev, remote, rdev,
                                            local[i].iov_len, RINGK_CUDA_MOVE_STAGED, 0, NULL,
                                            why, sizeof(why)));
        if (err != 0) {
            ucs_error("ringk ep %p (HOST_STAGED): %s", ep, why);
            status = UCS_ERR_IO_ERROR;
        }
    }
    return status;
}

const uct_ringk_gpu_ops_t uct_ringk_gpu_ops[RINGK_PATH_COUNT] = {
    [RINGK_PATH_P2P_NVLINK]  = {.move = uct_ringk_gpu_move_ipc},
    [RINGK_PATH_P2P_PCIE]    = {.move = uct_ringk_gpu_move_ipc},
    [RINGK_PATH_CUDA_IPC]    = {.move = uct_ringk_gpu_move_ipc},
    [RINGK_PATH_HOST_STAGED] = {.move = uct_ringk_gpu_move_staged}
};

/* Local CUDA memory and a host region of the peer: through the pinned buffer, then CMA. */
static ucs_status_t uct_ringk_ep_cma_from_gpu(uct_ringk_ep_t *ep, void *gpu_buf, size_t length,
                                              uint64_t remote_addr, int write)
{
    uct_ringk_iface_t *iface = ucs_derived_of(ep->super.super.iface, uct_ringk_iface_t);
    void *bounce             = uct_ringk_iface_gpu_bounce(iface);
    ucs_status_t status      = UCS_OK;
    struct iovec staged;
    size_t off, chunk;
    char why[128];
    int gpu_dev;

    if (bounce == NULL) {
        ucs_error("ringk ep %p: no pinned host buffer to stage GPU memory through", ep);
        return UCS_ERR_NO_MEMORY;
    }
    if (ringk_cuda_ptr_ordinal(gpu_buf, &gpu_dev, why, sizeof(why)) != 0) {
        gpu_dev = -1; /* the copies then go on the current device's stream */
    }
    for (off = 0; (off < length) && (status == UCS_OK); off += chunk) {
        chunk  = ucs_min(length - off, UCT_RINGK_GPU_BOUNCE_SIZE);
        staged = (struct iovec){bounce, chunk};
        if (write) {
            status = uct_ringk_gpu_copy(ep, gpu_dev, bounce, (char*)gpu_buf + off, chunk);
            if (status == UCS_OK) {
                status = uct_ringk_ep_cma(ep, &staged, 1, remote_addr + off, chunk, 1);
            }
        } else {
            status = uct_ringk_ep_cma(ep, &staged, 1, remote_addr + off, chunk, 0);
            if (status == UCS_OK) {
                status = uct_ringk_gpu_copy(ep, gpu_dev, (char*)gpu_buf + off, bounce, chunk);
            }
        }
    }
    return status;
}

/* Moves checked local buffers to or from [remote_addr, +length) of the region @a rkey names:
 * host regions by cross-memory attach, CUDA regions by the endpoint's GPU path. */
static ucs_status_t uct_ringk_ep_move(uct_ringk_ep_t *ep, uct_rkey_t rkey, struct iovec *local,
                                      size_t nlocal, uint64_t remote_addr, size_t length,
                                      int write)
{
    const uct_ringk_rkey_t *key = (const uct_ringk_rkey_t*)rkey;

    if (ucs_unlikely(key->mem_type == UCS_MEMORY_TYPE_CUDA)) {
        /* a key this process could not map (no CUDA IPC to it) is staged on any path */
        return (key->mapped != NULL) ?
               ep->gpu_ops->move(ep, key, local, nlocal, remote_addr, write) :
               uct_ringk_ep_xstage_move(ep, local, nlocal, remote_addr, write);
    }
    if (ucs_unlikely(uct_ringk_ep_host_staged(ep))) {
        return uct_ringk_ep_xstage_move(ep, local, nlocal, remote_addr, write);
    }
    return uct_ringk_ep_cma(ep, local, nlocal, remote_addr, length, write);
}

static ucs_status_t uct_ringk_ep_rma_iov(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, uct_rkey_t rkey, int write)
{
    uct_ringk_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    const uct_ringk_rkey_t *key = (const uct_ringk_rkey_t*)rkey;
    struct iovec local[IOV_MAX];
    size_t i, n = 0, length = 0;
    ucs_status_t status;
    int local_gpu = 0;

    if (iovcnt > IOV_MAX) {
        ucs_error("ringk ep %p: %zu iov entries, at most %d", ep, iovcnt, IOV_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iovcnt; i++) {
        local[n].iov_base = iov[i].buffer;
        local[n].iov_len  = uct_iov_get_length(&iov[i]);
        length           += local[n].iov_len;
        if (local[n].iov_len > 0) {
            local_gpu |= uct_ringk_local_is_gpu(local[n].iov_base);
            n++;
        }
    }
    if (length == 0) {
        return UCS_OK; /* nothing to move: the key is not looked at */
    }
    status = uct_ringk_ep_rkey_check(ep, rkey, remote_addr, length, write ? "put" : "get");
    if (status != UCS_OK) {
        return status;
    }
    if (ucs_unlikely(local_gpu && (key->mem_type == UCS_MEMORY_TYPE_HOST) &&
                     !uct_ringk_ep_host_staged(ep))) {
        /* CMA cannot reach device memory: stage each GPU buffer, in order */
        for (i = 0; (i < n) && (status == UCS_OK); remote_addr += local[i].iov_len, i++) {
            status = uct_ringk_local_is_gpu(local[i].iov_base) ?
                     uct_ringk_ep_cma_from_gpu(ep, local[i].iov_base, local[i].iov_len,
                                               remote_addr, write) :
                     uct_ringk_ep_cma(ep, &local[i], 1, remote_addr, local[i].iov_len, write);
        }
        return status;
    }
    return uct_ringk_ep_move(ep, rkey, local, n, remote_addr, length, write);
}

/* Moves one buffer of @a length bytes to (@a write) or from [remote_addr, +length) of the
 * region @a rkey names, once the range is checked; 0 bytes move nothing and the key is not
 * looked at. */
static ucs_status_t uct_ringk_ep_move_one(uct_ringk_ep_t *ep, uct_rkey_t rkey, void *buffer,
                                          size_t length, uint64_t remote_addr, int write,
                                          const char *op)
{
    struct iovec local = {buffer, length};
    ucs_status_t status;

    if (length == 0) {
        return UCS_OK;
    }
    status = uct_ringk_ep_rkey_check(ep, rkey, remote_addr, length, op);
    if (status != UCS_OK) {
        return status;
    }
    return uct_ringk_ep_move(ep, rkey, &local, 1, remote_addr, length, write);
}

ucs_status_t uct_ringk_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length,
                                    uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_ringk_ep_t *ep  = ucs_derived_of(tl_ep, uct_ringk_ep_t);
    ucs_status_t status = uct_ringk_ep_move_one(ep, rkey, (void*)buffer, length, remote_addr, 1,
                                                "put_short");

    UCT_RINGK_RMA_DONE(ep, PUT, SHORT, "put_short", length, remote_addr);
    return status;
}

ssize_t uct_ringk_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg,
                               uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    size_t length            = pack_cb(iface->tx_buf, arg);
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "put_bcopy");
    status = uct_ringk_ep_move_one(ucs_derived_of(tl_ep, uct_ringk_ep_t), rkey, iface->tx_buf,
                                   length, remote_addr, 1, "put_bcopy");
    if (status != UCS_OK) {
        return status;
    }
    UCT_RINGK_RMA_DONE(tl_ep, PUT, BCOPY, "put_bcopy", length, remote_addr);
    return length;
}

ucs_status_t uct_ringk_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp)
{
    UCT_RINGK_RMA_DONE(tl_ep, PUT, ZCOPY, "put_zcopy", uct_iov_total_length(iov, iovcnt),
                       remote_addr);
    return uct_ringk_ep_rma_iov(tl_ep, iov, iovcnt, remote_addr, rkey, 1);
}

ucs_status_t uct_ringk_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb, void *arg,
                                    size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp)
{
    uct_ringk_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_iface_t);
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "get_bcopy");
    status = uct_ringk_ep_move_one(ucs_derived_of(tl_ep, uct_ringk_ep_t), rkey, iface->tx_buf,
                                   length, remote_addr, 0, "get_bcopy");
    if (status != UCS_OK) {
        return status;
    }
    unpack_cb(arg, iface->tx_buf, length);
    UCT_RINGK_RMA_DONE(tl_ep, GET, BCOPY, "get_bcopy", length, remote_addr);
    return UCS_OK;
}

ucs_status_t uct_ringk_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp)
{
    UCT_RINGK_RMA_DONE(tl_ep, GET, ZCOPY, "get_zcopy", uct_iov_total_length(iov, iovcnt),
                       remote_addr);
    return uct_ringk_ep_rma_iov(tl_ep, iov, iovcnt, remote_addr, rkey, 0);
}
