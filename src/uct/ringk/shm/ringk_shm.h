/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk_shm: the second memory domain of the ringk component. It allocates memory that peers
 * on the node map (owner-only, sealed memfds), and its "shm" device moves data to and from that
 * memory with loads, stores and CPU atomics. The packed and unpacked key forms are here, without
 * UCX internals, so tests and fuzzers can build keys. */
#ifndef UCT_RINGK_SHM_H
#define UCT_RINGK_SHM_H

#include <uct/ringk/base/ringk_rkey.h>

#include <stddef.h>
#include <stdint.h>
#include <ucs/type/status.h>

#define UCT_RINGK_SHM_MD_NAME  "ringk_shm"
/* the device of the ringk_shm md: RMA and atomics by loads and stores on mapped memory; its
 * name before ringk 0.5, which UCX_RINGK_LEGACY_DEVICE_NAMES=y brings back */
#define UCT_RINGK_SHM_DEV_NAME     "mapped"
#define UCT_RINGK_SHM_DEV_NAME_OLD "shm"

/** Packed remote key of a ringk_shm allocation, as sent to peers (untrusted until
 * uct_ringk_shm_rkey_unpack() checks it against the memfd it names). */
typedef struct uct_ringk_shm_packed_rkey {
    uct_ringk_rkey_hdr_t hdr; /**< magic UCT_RINGK_SHM_RKEY_MAGIC; the owner's address of the
                                   allocation and its size (the memfd is sealed at this size) */
    int32_t  fd;       /**< the memfd in the owner process */
    uint32_t reserved; /**< 0 */
    uint64_t seg_id;   /**< random id, also in the memfd's name */
} __attribute__((packed)) uct_ringk_shm_packed_rkey_t;

#define UCT_RINGK_SHM_RKEY_MAGIC 0x3248534bu /* "KSH2": the layout with the common header */

struct uct_ringk_shm_map;

/** Unpacked ringk_shm key: the peer's allocation [address, address + length) is mapped here at
 * @a mapped. */
typedef struct uct_ringk_shm_rkey {
    uint32_t                  kind;    /**< UCT_RINGK_KEY_SHM */
    uint32_t                  pid;
    uint64_t                  address;
    uint64_t                  length;
    intptr_t                  offset;  /**< mapped - address: where a remote address is here */
    char                     *mapped;
    struct uct_ringk_shm_map *map;     /**< the shared mapping this key holds a reference to */
} uct_ringk_shm_rkey_t;

/** Name of the memfd of allocation @a seg_id, as /proc/<pid>/fd shows it (without "/memfd:"). */
#define UCT_RINGK_SHM_NAME_FMT "ringk-shm-%016llx"

/**
 * Checks a packed key and maps the allocation it names (or takes another reference to the
 * mapping this process already has of it). @return UCS_OK with @a key filled, else an error
 * that says what was wrong (logged).
 */
ucs_status_t uct_ringk_shm_rkey_unpack(const void *buffer, uct_ringk_shm_rkey_t *key);

/** Drops the key's reference; the last one unmaps the allocation. */
void uct_ringk_shm_rkey_release(uct_ringk_shm_rkey_t *key);

/** How many peer allocations this process has mapped (for tests). */
unsigned uct_ringk_shm_maps_count(void);

#endif
