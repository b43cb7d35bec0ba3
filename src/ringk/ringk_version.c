/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk build and version queries. */
#include "ringk_config.h"

#include "ringk_log.h"

#include <ringk/api/ringk.h>

#include <errno.h>

#define RINGK_STR2(x) #x
#define RINGK_STR(x)  RINGK_STR2(x)

int ringk_build_info_query(ringk_build_info_t *info_p)
{
    const uint64_t known = RINGK_BUILD_INFO_FIELD_VERSION | RINGK_BUILD_INFO_FIELD_UCX_VERSION |
                           RINGK_BUILD_INFO_FIELD_CUDA;

    if (info_p == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "info_p is NULL");
    }
    if (info_p->field_mask & ~known) {
        return ringk_log_bad_arg(NULL, __func__, "field_mask 0x%llx has unknown bits (known: "
                                 "0x%llx)", (unsigned long long)info_p->field_mask,
                                 (unsigned long long)known);
    }
    if (info_p->field_mask & RINGK_BUILD_INFO_FIELD_VERSION) {
        info_p->version = RINGK_STR(RINGK_VERSION_MAJOR) "." RINGK_STR(RINGK_VERSION_MINOR) "."
                          RINGK_STR(RINGK_VERSION_PATCH);
    }
    if (info_p->field_mask & RINGK_BUILD_INFO_FIELD_UCX_VERSION) {
        info_p->ucx_version = RINGK_UCX_BUILD_VERSION;
    }
    if (info_p->field_mask & RINGK_BUILD_INFO_FIELD_CUDA) {
#ifdef HAVE_CUDA
        info_p->cuda = 1;
#else
        info_p->cuda = 0;
#endif
    }
    return 0;
}
