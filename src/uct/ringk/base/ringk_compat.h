/* SPDX-License-Identifier: BSD-3-Clause */
/* What differs between the UCX releases the plugin builds against (1.13 and later), each told
 * by a configure probe (m4/ringk_ucx.m4), never by a version number: the forms of md, component
 * and callback-queue calls that changed. The 1.13 form is what a probe that fails leaves. */
#ifndef UCT_RINGK_COMPAT_H
#define UCT_RINGK_COMPAT_H

#include "ringk_config.h"

#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/datastruct/callbackq.h>
#include <ucs/memory/memtype_cache.h>

#include <string.h>

/* The md's attributes: uct_md_attr_t with its capabilities in 'cap', or from 1.14 on the flat
 * uct_md_attr_v2_t. UCT_RINGK_MD_CAP(attr).flags is the same field in both. */
#ifdef HAVE_UCT_MD_QUERY_V2
typedef uct_md_attr_v2_t uct_ringk_md_attr_t;
#define UCT_RINGK_MD_CAP(_attr) (*(_attr))
#else
typedef uct_md_attr_t uct_ringk_md_attr_t;
#define UCT_RINGK_MD_CAP(_attr) ((_attr)->cap)
#endif

/* What a query starts from: the release's defaults where it has them (its later fields, such
 * as the registration alignment, included), else zeros. A v2 query keeps the field mask the
 * caller set (UCX asserts on the fields it names). */
static inline void uct_ringk_md_attr_base(uct_ringk_md_attr_t *attr)
{
#if defined(HAVE_UCT_MD_QUERY_V2) && HAVE_DECL_UCT_MD_BASE_MD_QUERY
    uct_md_base_md_query(attr);
#elif defined(HAVE_UCT_MD_QUERY_V2)
    (void)attr;
#else
    memset(attr, 0, sizeof(*attr));
#endif
}

/* mem_reg's flags: an argument until 1.13, a field of the parameters after. */
#ifdef HAVE_UCT_MD_MEM_REG_PARAMS
#define UCT_RINGK_MEM_REG_ARG         const uct_md_mem_reg_params_t *params
#define UCT_RINGK_MEM_REG_FLAGS()     UCT_MD_MEM_REG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0)
#else
#define UCT_RINGK_MEM_REG_ARG         unsigned flags
#define UCT_RINGK_MEM_REG_FLAGS()     (flags)
#endif

/* mem_query's attributes: uct_md_mem_attr_t, or uct_md_mem_attr_v2_t (same field names). */
#ifdef HAVE_UCT_MD_MEM_QUERY_V2
typedef uct_md_mem_attr_v2_t uct_ringk_mem_attr_t;
#else
typedef uct_md_mem_attr_t uct_ringk_mem_attr_t;
#endif

/* mkey_pack gained the address and length of the region to pack. */
#ifdef HAVE_UCT_MD_MKEY_PACK_ADDRESS
#define UCT_RINGK_MKEY_PACK_ARGS(_md, _memh) \
    uct_md_h _md, uct_mem_h _memh, void *address, size_t length, \
    const uct_md_mkey_pack_params_t *params, void *rkey_buffer
#else
#define UCT_RINGK_MKEY_PACK_ARGS(_md, _memh) \
    uct_md_h _md, uct_mem_h _memh, const uct_md_mkey_pack_params_t *params, void *rkey_buffer
#endif

/* mem_alloc gained the system device to allocate near. */
#ifdef HAVE_UCT_MD_MEM_ALLOC_SYS_DEV
#define UCT_RINGK_MEM_ALLOC_SYS_DEV_ARG ucs_sys_device_t sys_dev,
#else
#define UCT_RINGK_MEM_ALLOC_SYS_DEV_ARG
#endif

/* rkey_unpack gained parameters. */
#ifdef HAVE_UCT_RKEY_UNPACK_PARAMS
#define UCT_RINGK_RKEY_UNPACK_PARAMS_ARG const uct_rkey_unpack_params_t *params,
#else
#define UCT_RINGK_RKEY_UNPACK_PARAMS_ARG
#endif

/* The memory-type cache learns whether the range is registrable too. */
static inline void uct_ringk_memtype_cache_update(const void *address, size_t size,
                                                  ucs_memory_type_t mem_type,
                                                  ucs_sys_device_t sys_dev)
{
#ifdef HAVE_UCS_MEMTYPE_CACHE_UPDATE_FLAGS
    ucs_memtype_cache_update(address, size, mem_type, sys_dev, UCS_MEM_FLAG_REGISTRABLE);
#else
    ucs_memtype_cache_update(address, size, mem_type, sys_dev);
#endif
}

/* Whether an md that registers memory must ask for a memh for UCP's v1 RMA zcopy, which reads
 * the request's registration unasked from 1.14 to 1.20. */
#ifdef HAVE_UCP_RMA_V1_ZCOPY_MEMH
#define RINGK_UCP_RMA_NEEDS_MEMH 1
#else
#define RINGK_UCP_RMA_NEEDS_MEMH 0
#endif

/* ep_check's argument checks: the completion is no longer checked from 1.22 on. */
#ifdef HAVE_UCT_EP_KEEPALIVE_CHECK_PARAM_FLAGS_ONLY
#define UCT_RINGK_EP_CHECK_PARAMS(_flags, _comp) UCT_EP_KEEPALIVE_CHECK_PARAM(_flags)
#else
#define UCT_RINGK_EP_CHECK_PARAMS(_flags, _comp) UCT_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp)
#endif

/* A one-shot callback on the worker's progress queue, keyed by @a arg, and its removal. */
static inline void uct_ringk_oneshot_add(ucs_callbackq_t *cbq, ucs_callback_t cb, void *arg)
{
#if HAVE_DECL_UCS_CALLBACKQ_ADD_ONESHOT
    ucs_callbackq_add_oneshot(cbq, arg, cb, arg);
#else
    ucs_callbackq_add_safe(cbq, cb, arg, UCS_CALLBACKQ_FLAG_ONESHOT);
#endif
}

static inline void uct_ringk_oneshot_remove(ucs_callbackq_t *cbq,
                                            ucs_callbackq_predicate_t pred, void *arg)
{
#if HAVE_DECL_UCS_CALLBACKQ_ADD_ONESHOT
    ucs_callbackq_remove_oneshot(cbq, arg, pred, arg);
#else
    ucs_callbackq_remove_if(cbq, pred, arg);
#endif
}

#endif
