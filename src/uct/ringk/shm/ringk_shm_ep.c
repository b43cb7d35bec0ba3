/* SPDX-License-Identifier: BSD-3-Clause */
/* The mapped device's endpoint: put and get as copies into and out of a peer's ringk_shm
 * allocation, mapped here; flush, and the peer's liveness. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_shm_int.h"

#include <core/ringk_node.h>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>
#include <uct/base/uct_iov.inl>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Copies of up to 16 bytes as at most two overlapping loads and stores, inline: a short put is
 * then a handful of instructions instead of a call into the library's memcpy. */
static UCS_F_ALWAYS_INLINE void uct_ringk_shm_copy(void *dst, const void *src, size_t length)
{
    uint64_t a, b;
    uint32_t c, d;

    if (length >= 8) {
        if (length > 16) {
            memcpy(dst, src, length);
            return;
        }
        memcpy(&a, src, 8);
        memcpy(&b, (const char*)src + length - 8, 8);
        memcpy(dst, &a, 8);
        memcpy((char*)dst + length - 8, &b, 8);
    } else if (length >= 4) {
        memcpy(&c, src, 4);
        memcpy(&d, (const char*)src + length - 4, 4);
        memcpy(dst, &c, 4);
        memcpy((char*)dst + length - 4, &d, 4);
    } else {
        while (length-- > 0) {
            ((char*)dst)[length] = ((const char*)src)[length];
        }
    }
}

ucs_status_t uct_ringk_shm_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                        unsigned length, uint64_t remote_addr,
                                        uct_rkey_t rkey)
{
    uct_ringk_shm_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    void *dst;

    if (ucs_unlikely(length == 0)) {
        UCT_RINGK_RMA_DONE(ep, PUT, SHORT, "put_short", length, remote_addr);
        return UCS_OK;
    }
    dst = uct_ringk_shm_addr(ep, rkey, remote_addr, length, "put_short");
    if (ucs_unlikely(dst == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uct_ringk_shm_copy(dst, buffer, length);
    UCT_RINGK_RMA_DONE(ep, PUT, SHORT, "put_short", length, remote_addr);
    return UCS_OK;
}

ssize_t uct_ringk_shm_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg,
                                   uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_ringk_shm_iface_t *iface    = ucs_derived_of(tl_ep->iface, uct_ringk_shm_iface_t);
    uct_ringk_shm_ep_t *ep          = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    const uct_ringk_shm_rkey_t *key = (const uct_ringk_shm_rkey_t*)rkey;
    size_t length;

    /* Packed in place wherever it starts inside the allocation: the mapping goes on with
     * UCT_RINGK_SHM_PUT_MAX_BCOPY bytes of private scratch (uct_ringk_shm_map_peer), so a
     * callback that runs past the allocation's end writes there, and the put is refused once
     * its length is known (its bytes inside the allocation are written, as the fragments
     * before it of a larger put would be). A put that starts elsewhere packs into the iface's
     * sink: only an empty one succeeds. */
    if (ucs_likely((rkey + 1 > 1) && (key->kind == UCT_RINGK_KEY_SHM) &&
                   (remote_addr - key->address <= key->length))) {
        length = pack_cb((void*)(uintptr_t)(remote_addr + key->offset), arg);
        if (ucs_likely((length <= key->length - (remote_addr - key->address)) &&
                       (length <= UCT_RINGK_SHM_PUT_MAX_BCOPY))) {
            iface->posted = 1;
            UCT_RINGK_RMA_DONE(ep, PUT, BCOPY, "put_bcopy", length, remote_addr);
            return length;
        }
    } else {
        length = pack_cb(iface->sink, arg);
        if (length == 0) {
            UCT_RINGK_RMA_DONE(ep, PUT, BCOPY, "put_bcopy", length, remote_addr);
            return 0;
        }
    }
    /* refused: too long for max_bcopy, or (logged by the range check) outside the key */
    if (length > UCT_RINGK_SHM_PUT_MAX_BCOPY) {
        ucs_error("ringk_shm ep %p: put_bcopy callback packed %zu bytes, more than max_bcopy "
                  "(%lu)", ep, length, UCT_RINGK_SHM_PUT_MAX_BCOPY);
    } else {
        uct_ringk_shm_addr(ep, rkey, remote_addr, length, "put_bcopy");
    }
    return UCS_ERR_INVALID_PARAM;
}

/* Copies between the iovecs and [remote_addr, +total) of the peer's allocation. */
static ucs_status_t uct_ringk_shm_ep_rma_iov(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                             uint64_t remote_addr, uct_rkey_t rkey, int write)
{
    uct_ringk_shm_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    size_t total           = uct_iov_total_length(iov, iovcnt);
    size_t i, len;
    char *remote;

    if (total == 0) {
        return UCS_OK;
    }
    remote = uct_ringk_shm_addr(ep, rkey, remote_addr, total, write ? "put_zcopy" :
                                                                        "get_zcopy");
    if (ucs_unlikely(remote == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iovcnt; i++) {
        len = uct_iov_get_length(&iov[i]);
        if (write) {
            memcpy(remote, iov[i].buffer, len);
        } else {
            memcpy(iov[i].buffer, remote, len);
        }
        remote += len;
    }
    return UCS_OK;
}

ucs_status_t uct_ringk_shm_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                        size_t iovcnt, uint64_t remote_addr,
                                        uct_rkey_t rkey, uct_completion_t *comp)
{
    UCT_RINGK_RMA_DONE(tl_ep, PUT, ZCOPY, "put_zcopy", uct_iov_total_length(iov, iovcnt),
                       remote_addr);
    return uct_ringk_shm_ep_rma_iov(tl_ep, iov, iovcnt, remote_addr, rkey, 1);
}

ucs_status_t uct_ringk_shm_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb,
                                        void *arg, size_t length, uint64_t remote_addr,
                                        uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_ringk_shm_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    void *src;

    if (length > 0) {
        src = uct_ringk_shm_addr(ep, rkey, remote_addr, length, "get_bcopy");
        if (ucs_unlikely(src == NULL)) {
            return UCS_ERR_INVALID_PARAM;
        }
        unpack_cb(arg, src, length); /* straight from the peer's memory */
    } else {
        unpack_cb(arg, NULL, 0);
    }
    UCT_RINGK_RMA_DONE(ep, GET, BCOPY, "get_bcopy", length, remote_addr);
    return UCS_OK;
}

ucs_status_t uct_ringk_shm_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                        size_t iovcnt, uint64_t remote_addr,
                                        uct_rkey_t rkey, uct_completion_t *comp)
{
    UCT_RINGK_RMA_DONE(tl_ep, GET, ZCOPY, "get_zcopy", uct_iov_total_length(iov, iovcnt),
                       remote_addr);
    return uct_ringk_shm_ep_rma_iov(tl_ep, iov, iovcnt, remote_addr, rkey, 0);
}

/* ---- completion, ordering, failures ------------------------------------------------------ */

/* Every operation is complete when its call returns: stores are visible to the peer in program
 * order, so flush has nothing to wait for and fence needs only the compiler and the store
 * buffer ordered. */
ucs_status_t uct_ringk_shm_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_ringk_shm_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);

    if (ucs_unlikely(ep->peer.failed && !(flags & UCT_FLUSH_FLAG_CANCEL))) {
        return UCT_RINGK_EP_FAILED_STATUS;
    }
    ucs_memory_cpu_store_fence();
    UCT_TL_EP_STAT_FLUSH(&ep->super);
    return UCS_OK;
}

/* Never out of resources: a request is never queued, and UCT's answer to that is BUSY. */
ucs_status_t uct_ringk_shm_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                          unsigned flags)
{
    return UCS_ERR_BUSY;
}

/* A dead peer: its memory stays mapped (writes to it are lost, never a fault); the error is
 * reported once, from the worker's progress, as UCT expects. */
ucs_status_t uct_ringk_shm_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    UCT_RINGK_EP_CHECK_PARAMS(flags, comp);
    uct_ringk_peer_check(&ucs_derived_of(tl_ep, uct_ringk_shm_ep_t)->peer);
    return UCS_OK;
}

/* Maps the peer iface's liveness page after checking it is that memfd, ours and private. */
static ucs_status_t uct_ringk_shm_ep_attach(uct_ringk_shm_ep_t *ep,
                                            const uct_ringk_shm_iface_addr_t *addr)
{
    char name[64], link[128];
    ringk_peer_err_t err;
    struct stat st;
    void *page;
    int fd;

    snprintf(name, sizeof(name), UCT_RINGK_SHM_IFACE_NAME_FMT, (unsigned long long)addr->id);
    fd = ringk_node_open_peer(addr->pid, addr->fd, O_RDONLY, name, &st, link, sizeof(link),
                              &err);
    if ((fd >= 0) && (st.st_size < (off_t)ucs_get_page_size())) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        ucs_error("ringk_shm: descriptor %d of pid %u ('%s') is not the iface page '%s' of our "
                  "user, mode 0600, a page long%s%s", addr->fd, addr->pid, link, name,
                  (err == RINGK_PEER_OPEN) ? ": " : "",
                  (err == RINGK_PEER_OPEN) ? strerror(errno) : "");
        return UCS_ERR_UNREACHABLE;
    }
    page = mmap(NULL, ucs_get_page_size(), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (page == MAP_FAILED) {
        ucs_error("ringk_shm: mmap of the peer iface's page failed: %m");
        return UCS_ERR_NO_MEMORY;
    }
    ep->peer.closed = page;
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_ringk_shm_ep_t, const uct_ep_params_t *params)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(params->iface, uct_ringk_shm_iface_t);
    uct_ringk_shm_iface_addr_t addr;
    ucs_status_t status;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super.super);
    memcpy(&addr, params->iface_addr, sizeof(addr));
    status = uct_ringk_peer_init(&self->peer, &self->super, addr.pid, addr.fd, addr.id,
                                 "ringk_shm");
    if (status != UCS_OK) {
        return status;
    }
    return uct_ringk_shm_ep_attach(self, &addr);
}

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_shm_ep_t)
{
    uct_ringk_peer_cleanup(&self->peer);
    munmap((void*)self->peer.closed, ucs_get_page_size());
}

UCS_CLASS_DEFINE(uct_ringk_shm_ep_t, uct_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_ringk_shm_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_ringk_shm_ep_t, uct_ep_t);
