/* SPDX-License-Identifier: BSD-3-Clause */
/* The mapped device of the ringk transport, inside the plugin: its iface and endpoint, and what
 * its files share (ringk_shm_ep.c: put, get, flush, the endpoint; ringk_shm_atomic.c: atomics;
 * ringk_shm_iface.c: the iface; ringk_shm_md.c: the md and the mappings of peers' memory). */
#ifndef UCT_RINGK_SHM_INT_H
#define UCT_RINGK_SHM_INT_H

#include "ringk_shm.h"

#include <uct/ringk/base/ringk_md.h>

#include <uct/base/uct_iface.h>
#include <ucs/debug/log.h>

/* bcopy copies straight into or out of the mapping as zcopy does, without UCP's zcopy request
 * around it (measured in bench/RESULTS.md). UCP takes bcopy below min_zcopy: puts below 32 KiB
 * (the scratch after each mapping holds what a put packs past an allocation's end; UCX's gtest
 * test_zcopy_comp needs put zcopy to take 64 KiB), gets below 1 MiB (get_bcopy knows its length
 * before it copies). */
#define UCT_RINGK_SHM_PUT_MAX_BCOPY (32ul * 1024)
#define UCT_RINGK_SHM_GET_MIN_ZCOPY (1ul << 20)

/** What a peer needs: the process whose allocations its keys will name, and the iface's
 * liveness page (a one-page memfd whose first word says the iface closed). */
typedef struct uct_ringk_shm_iface_addr {
    uint64_t id;     /**< random; the page's memfd is named ringk-shm-if-<id> */
    uint32_t pid;
    int32_t  fd;     /**< the page's memfd in the owner */
} UCS_S_PACKED uct_ringk_shm_iface_addr_t;

#define UCT_RINGK_SHM_IFACE_NAME_FMT "ringk-shm-if-%016llx"

typedef struct uct_ringk_shm_iface {
    uct_ringk_base_iface_t super;
    uint64_t             id;
    int                  live_fd;    /**< the liveness page */
    uint64_t            *closed;     /**< its first word: 1 once the iface closed */
    void                *sink;       /**< UCT_RINGK_SHM_PUT_MAX_BCOPY bytes: put_bcopy packs
                                          here when it does not start inside a key */
    int                  posted;     /**< an operation was posted since the last progress */
} uct_ringk_shm_iface_t;

typedef struct uct_ringk_shm_ep {
    uct_base_ep_t    super;
    uct_ringk_peer_t peer;       /**< the peer process; its closed word is the first of the
                                      peer iface's liveness page, mapped read-only */
} uct_ringk_shm_ep_t;

/* Where [remote_addr, +length) of a key of this ep's peer lies here; NULL when the key is not a
 * ringk_shm key of the peer or the range leaves its allocation (logged). */
static UCS_F_ALWAYS_INLINE void *
uct_ringk_shm_addr(uct_ringk_shm_ep_t *ep, uct_rkey_t rkey, uint64_t remote_addr, size_t length,
                   const char *op)
{
    const uct_ringk_shm_rkey_t *key = (const uct_ringk_shm_rkey_t*)rkey;

    /* Any ringk_shm key is mapped here whole, so the range is all that needs checking. The
     * offset wraps to a huge value when remote_addr lies below the key. rkey + 1 > 1 refuses
     * both NULL and UCT_INVALID_RKEY. */
    if (ucs_likely((rkey + 1 > 1) && (key->kind == UCT_RINGK_KEY_SHM) &&
                   (length <= key->length) &&
                   (remote_addr - key->address <= key->length - length))) {
        ucs_derived_of(ep->super.super.iface, uct_ringk_shm_iface_t)->posted = 1;
        return (void*)(uintptr_t)(remote_addr + key->offset);
    }
    ucs_error("ringk_shm ep %p: %s of %zu bytes at 0x%" PRIx64 " is outside the remote key "
              "(%s, pid %u, 0x%" PRIx64 "+%" PRIu64 ", peer pid %u)", ep, op, length,
              remote_addr, (rkey + 1 <= 1) ? "no key" : (key->kind == UCT_RINGK_KEY_SHM) ?
              "ringk_shm" : "not a ringk_shm key", (rkey + 1 > 1) ? key->pid : 0,
              (rkey + 1 > 1) ? key->address : 0, (rkey + 1 > 1) ? key->length : 0,
              ep->peer.pid);
    return NULL;
}

UCT_RINGK_RMA_OPS_DECLARE(uct_ringk_shm_ep)
ucs_status_t uct_ringk_shm_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode, uint64_t value,
                                            uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t uct_ringk_shm_ep_atomic32_post(uct_ep_h tl_ep, unsigned opcode, uint32_t value,
                                            uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t uct_ringk_shm_ep_atomic64_fetch(uct_ep_h tl_ep, uct_atomic_op_t opcode,
                                             uint64_t value, uint64_t *result,
                                             uint64_t remote_addr, uct_rkey_t rkey,
                                             uct_completion_t *comp);
ucs_status_t uct_ringk_shm_ep_atomic32_fetch(uct_ep_h tl_ep, uct_atomic_op_t opcode,
                                             uint32_t value, uint32_t *result,
                                             uint64_t remote_addr, uct_rkey_t rkey,
                                             uct_completion_t *comp);
ucs_status_t uct_ringk_shm_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare, uint64_t swap,
                                             uint64_t remote_addr, uct_rkey_t rkey,
                                             uint64_t *result, uct_completion_t *comp);
ucs_status_t uct_ringk_shm_ep_atomic_cswap32(uct_ep_h tl_ep, uint32_t compare, uint32_t swap,
                                             uint64_t remote_addr, uct_rkey_t rkey,
                                             uint32_t *result, uct_completion_t *comp);
ucs_status_t uct_ringk_shm_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);
ucs_status_t uct_ringk_shm_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                          unsigned flags);
ucs_status_t uct_ringk_shm_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);

UCS_CLASS_DECLARE_NEW_FUNC(uct_ringk_shm_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_ringk_shm_ep_t, uct_ep_t);

#endif
