/* SPDX-License-Identifier: BSD-3-Clause */
/* The mapped device's atomics: 32- and 64-bit CPU atomic instructions on memory of a peer's
 * ringk_shm allocation, mapped here. */
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

/* ---- atomics: CPU atomic instructions on the mapping --------------------------------------- */

/* The word at remote_addr, naturally aligned and inside the key, or NULL (logged). */
static UCS_F_ALWAYS_INLINE void *
uct_ringk_shm_atomic_addr(uct_ep_h tl_ep, uct_rkey_t rkey, uint64_t remote_addr, size_t size,
                          const char *op)
{
    uct_ringk_shm_ep_t *ep          = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    const uct_ringk_shm_rkey_t *key = (const uct_ringk_shm_rkey_t*)rkey;

    /* Keys are at least 8 bytes long (unpack checks), so length - size does not wrap. */
    if (ucs_likely((rkey + 1 > 1) && (key->kind == UCT_RINGK_KEY_SHM) &&
                   !(remote_addr & (size - 1)) &&
                   (remote_addr - key->address <= key->length - size))) {
        ucs_derived_of(ep->super.super.iface, uct_ringk_shm_iface_t)->posted = 1;
        return (void*)(uintptr_t)(remote_addr + key->offset);
    }
    if (remote_addr & (size - 1)) {
        ucs_error("ringk_shm ep %p: %s at 0x%" PRIx64 " is not %zu-byte aligned", ep, op,
                  remote_addr, size);
        return NULL;
    }
    return uct_ringk_shm_addr(ep, rkey, remote_addr, size, op); /* logs what is wrong */
}

/* Every atomic is sequentially consistent (a locked instruction on x86), as posix's are: UCP
 * mixes them with puts and gets of the same memory and orders them with fences and flushes
 * that complete at once here. */
#define UCT_RINGK_SHM_ATOMIC_OP(_ptr, _op, _value, _fetch) \
    switch (_op) { \
    case UCT_ATOMIC_OP_ADD:  _fetch = __atomic_fetch_add(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    case UCT_ATOMIC_OP_AND:  _fetch = __atomic_fetch_and(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    case UCT_ATOMIC_OP_OR:   _fetch = __atomic_fetch_or(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    case UCT_ATOMIC_OP_XOR:  _fetch = __atomic_fetch_xor(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    case UCT_ATOMIC_OP_SWAP: _fetch = __atomic_exchange_n(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    default: \
        ucs_error("ringk_shm: atomic operation %d is not supported", (int)(_op)); \
        return UCS_ERR_UNSUPPORTED; \
    }

ucs_status_t uct_ringk_shm_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode,
                                            uint64_t value, uint64_t remote_addr,
                                            uct_rkey_t rkey)
{
    uint64_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 8, "atomic64_post");
    uint64_t old;

    if (ucs_unlikely((ptr == NULL) || (opcode == UCT_ATOMIC_OP_SWAP))) {
        return (ptr == NULL) ? UCS_ERR_INVALID_PARAM : UCS_ERR_UNSUPPORTED;
    }
    UCT_RINGK_SHM_ATOMIC_OP(ptr, opcode, value, old);
    (void)old;
    return UCS_OK;
}

ucs_status_t uct_ringk_shm_ep_atomic32_post(uct_ep_h tl_ep, unsigned opcode,
                                            uint32_t value, uint64_t remote_addr,
                                            uct_rkey_t rkey)
{
    uint32_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 4, "atomic32_post");
    uint32_t old;

    if (ucs_unlikely((ptr == NULL) || (opcode == UCT_ATOMIC_OP_SWAP))) {
        return (ptr == NULL) ? UCS_ERR_INVALID_PARAM : UCS_ERR_UNSUPPORTED;
    }
    UCT_RINGK_SHM_ATOMIC_OP(ptr, opcode, value, old);
    (void)old;
    return UCS_OK;
}

ucs_status_t uct_ringk_shm_ep_atomic64_fetch(uct_ep_h tl_ep, uct_atomic_op_t opcode,
                                             uint64_t value, uint64_t *result,
                                             uint64_t remote_addr, uct_rkey_t rkey,
                                             uct_completion_t *comp)
{
    uint64_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 8, "atomic64_fetch");

    if (ucs_unlikely(ptr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    UCT_RINGK_SHM_ATOMIC_OP(ptr, opcode, value, *result);
    return UCS_OK;
}

ucs_status_t uct_ringk_shm_ep_atomic32_fetch(uct_ep_h tl_ep, uct_atomic_op_t opcode,
                                             uint32_t value, uint32_t *result,
                                             uint64_t remote_addr, uct_rkey_t rkey,
                                             uct_completion_t *comp)
{
    uint32_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 4, "atomic32_fetch");

    if (ucs_unlikely(ptr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    UCT_RINGK_SHM_ATOMIC_OP(ptr, opcode, value, *result);
    return UCS_OK;
}

ucs_status_t uct_ringk_shm_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                             uint64_t swap, uint64_t remote_addr,
                                             uct_rkey_t rkey, uint64_t *result,
                                             uct_completion_t *comp)
{
    uint64_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 8, "atomic_cswap64");

    if (ucs_unlikely(ptr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* on failure the builtin leaves the value it found in 'compare' */
    __atomic_compare_exchange_n(ptr, &compare, swap, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *result = compare;
    return UCS_OK;
}

ucs_status_t uct_ringk_shm_ep_atomic_cswap32(uct_ep_h tl_ep, uint32_t compare,
                                             uint32_t swap, uint64_t remote_addr,
                                             uct_rkey_t rkey, uint32_t *result,
                                             uct_completion_t *comp)
{
    uint32_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 4, "atomic_cswap32");

    if (ucs_unlikely(ptr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    __atomic_compare_exchange_n(ptr, &compare, swap, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *result = compare;
    return UCS_OK;
}
