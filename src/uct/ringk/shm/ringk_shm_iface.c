/* SPDX-License-Identifier: BSD-3-Clause */
/* The mapped device's iface: no active messages and nothing ever queued, so no progress to speak
 * of; a one-page memfd whose first word tells peers it closed. */
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

static ucs_status_t uct_ringk_shm_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                              uct_completion_t *comp)
{
    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_memory_cpu_store_fence();
    UCT_TL_IFACE_STAT_FLUSH(ucs_derived_of(tl_iface, uct_base_iface_t));
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_shm_iface_t);

    uct_ringk_base_iface_query(&iface->super, attr, sizeof(uct_ringk_shm_iface_addr_t));
    attr->cap.flags |= UCT_IFACE_FLAG_ATOMIC_CPU;

    /* zcopy starts where bcopy stops paying (UCT_RINGK_SHM_PUT_MAX_BCOPY). */
    attr->cap.put.max_bcopy = UCT_RINGK_SHM_PUT_MAX_BCOPY;
    attr->cap.put.min_zcopy = UCT_RINGK_SHM_PUT_MAX_BCOPY;
    attr->cap.get.max_bcopy = SIZE_MAX;
    attr->cap.get.min_zcopy = UCT_RINGK_SHM_GET_MIN_ZCOPY;

    attr->cap.atomic32.op_flags  =
    attr->cap.atomic64.op_flags  = UCS_BIT(UCT_ATOMIC_OP_ADD) | UCS_BIT(UCT_ATOMIC_OP_AND) |
                                   UCS_BIT(UCT_ATOMIC_OP_OR) | UCS_BIT(UCT_ATOMIC_OP_XOR);
    attr->cap.atomic32.fop_flags =
    attr->cap.atomic64.fop_flags = UCS_BIT(UCT_ATOMIC_OP_ADD) | UCS_BIT(UCT_ATOMIC_OP_AND) |
                                   UCS_BIT(UCT_ATOMIC_OP_OR) | UCS_BIT(UCT_ATOMIC_OP_XOR) |
                                   UCS_BIT(UCT_ATOMIC_OP_SWAP) | UCS_BIT(UCT_ATOMIC_OP_CSWAP);

    /* A store into mapped memory: below the ringk device's message latency, so that UCP
     * prefers this device for the memory it can reach. */
    attr->latency          = ucs_linear_func_make(40e-9, 0);
    attr->bandwidth.shared = 12000.0 * UCS_MBYTE;
    attr->overhead         = 5e-9;
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_shm_iface_t);
    uct_ringk_shm_iface_addr_t a = {.id = iface->id, .pid = getpid(), .fd = iface->live_fd};

    memcpy(addr, &a, sizeof(a));
    return UCS_OK;
}

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_ringk_shm_iface_t, uct_iface_t);

/* Nothing ever waits in this iface, so its progress is a spin-wait hint: a program that calls
 * progress again and again with no operation in between is polling memory a peer writes (a
 * flag, the end of a put), and lets go of the line for a moment on each check instead of taking
 * it back from the writer at once. A program that posts between its calls pays nothing. */
static unsigned uct_ringk_shm_iface_progress(uct_iface_h tl_iface)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_shm_iface_t);

    if (iface->posted) {
        iface->posted = 0;
        return 0;
    }
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
    return 0;
}

static uct_iface_ops_t uct_ringk_shm_iface_ops = {
    UCT_RINGK_DEVICE_OPS(uct_ringk_shm_ep, uct_ringk_shm_iface),
    .ep_atomic_cswap64        = uct_ringk_shm_ep_atomic_cswap64,
    .ep_atomic_cswap32        = uct_ringk_shm_ep_atomic_cswap32,
    .ep_atomic32_post         = uct_ringk_shm_ep_atomic32_post,
    .ep_atomic64_post         = uct_ringk_shm_ep_atomic64_post,
    .ep_atomic32_fetch        = uct_ringk_shm_ep_atomic32_fetch,
    .ep_atomic64_fetch        = uct_ringk_shm_ep_atomic64_fetch,
    .ep_pending_purge         = (uct_ep_pending_purge_func_t)ucs_empty_function,
    .iface_event_fd_get       = (uct_iface_event_fd_get_func_t)ucs_empty_function_return_unsupported,
    .iface_event_arm          = (uct_iface_event_arm_func_t)ucs_empty_function_return_success,
    UCT_RINGK_NO_AM_OPS,
    UCT_RINGK_BASE_IFACE_OPS
};

#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_IS_CONNECTED
static int uct_ringk_shm_ep_is_connected(const uct_ep_h tl_ep,
                                         const uct_ep_is_connected_params_t *params)
{
    return uct_ringk_peer_is_connected(&ucs_derived_of(tl_ep, uct_ringk_shm_ep_t)->peer,
                                       params);
}
#endif

static uct_iface_internal_ops_t uct_ringk_shm_iface_internal_ops = {
    UCT_RINGK_INTERNAL_OPS(uct_ringk_shm_ep_is_connected, uct_base_iface_estimate_perf)
};

static UCS_CLASS_INIT_FUNC(uct_ringk_shm_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params, const uct_iface_config_t *tl_config)
{
    size_t align, align_offset;
    ucs_status_t status;
    char name[64];

    UCS_CLASS_CALL_SUPER_INIT(uct_ringk_base_iface_t, &uct_ringk_shm_iface_ops,
                              &uct_ringk_shm_iface_internal_ops, md, worker, params, tl_config,
                              UCT_RINGK_DEV_SHM);
    /* no active messages here, but the same parameters are refused as on the ring device */
    status = uct_ringk_iface_am_align(params, &align, &align_offset);
    if (status != UCS_OK) {
        return status;
    }
    self->live_fd = -1;
    self->sink    = mmap(NULL, UCT_RINGK_SHM_PUT_MAX_BCOPY, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (self->sink == MAP_FAILED) {
        ucs_error("ringk_shm: mmap of the iface's put sink failed: %m");
        return UCS_ERR_NO_MEMORY;
    }
    self->id = ucs_generate_uuid((uintptr_t)self);
    snprintf(name, sizeof(name), UCT_RINGK_SHM_IFACE_NAME_FMT, (unsigned long long)self->id);
    self->live_fd = memfd_create(name, MFD_CLOEXEC);
    if ((self->live_fd < 0) || (fchmod(self->live_fd, 0600) != 0) ||
        (ftruncate(self->live_fd, ucs_get_page_size()) != 0)) {
        ucs_error("ringk_shm: cannot create the iface's page: %m");
        goto err;
    }
    self->closed = mmap(NULL, ucs_get_page_size(), PROT_READ | PROT_WRITE, MAP_SHARED,
                        self->live_fd, 0);
    if (self->closed == MAP_FAILED) {
        ucs_error("ringk_shm: mmap of the iface's page failed: %m");
        goto err;
    }
    return UCS_OK;

err:
    if (self->live_fd >= 0) {
        close(self->live_fd);
    }
    munmap(self->sink, UCT_RINGK_SHM_PUT_MAX_BCOPY);
    return UCS_ERR_IO_ERROR;
}

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_shm_iface_t)
{
    uct_base_iface_progress_disable(&self->super.super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    /* C3: peers' endpoints see the iface gone (uct_ringk_peer_dead). */
    __atomic_store_n(self->closed, 1, __ATOMIC_RELEASE);
    munmap(self->closed, ucs_get_page_size());
    close(self->live_fd);
    munmap(self->sink, UCT_RINGK_SHM_PUT_MAX_BCOPY);
}

UCS_CLASS_DEFINE(uct_ringk_shm_iface_t, uct_ringk_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_ringk_shm_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_ringk_shm_iface_t, uct_iface_t);

ucs_status_t uct_ringk_shm_iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config, uct_iface_h *iface_p)
{
    return UCS_CLASS_NEW_FUNC_NAME(uct_ringk_shm_iface_t)(md, worker, params, config, iface_p);
}
