/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk public API: the ring-kernel actor runtime (this release: version and build queries). */
#ifndef RINGK_API_RINGK_H
#define RINGK_API_RINGK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Library version, as numbers. */
#define RINGK_VERSION_MAJOR 0
#define RINGK_VERSION_MINOR 1
#define RINGK_VERSION_PATCH 0

/** Fields of ringk_build_info_t. */
enum ringk_build_info_field {
    RINGK_BUILD_INFO_FIELD_VERSION     = 1u << 0,
    RINGK_BUILD_INFO_FIELD_UCX_VERSION = 1u << 1,
    RINGK_BUILD_INFO_FIELD_CUDA        = 1u << 2
};

/** What this libringk was built with. */
typedef struct ringk_build_info {
    uint64_t    field_mask;   /**< RINGK_BUILD_INFO_FIELD_* the caller asks for */
    const char *version;      /**< "MAJOR.MINOR.PATCH" of libringk */
    const char *ucx_version;  /**< UCX release built against */
    int         cuda;         /**< 1 when built with the CUDA Toolkit */
} ringk_build_info_t;

/**
 * Fills the fields of @a info_p named in its field_mask.
 * @return 0, or -EINVAL when @a info_p is NULL or asks for an unknown field.
 */
int ringk_build_info_query(ringk_build_info_t *info_p);

#ifdef __cplusplus
}
#endif

#endif
