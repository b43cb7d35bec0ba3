/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk remote keys: the packed form peers send (untrusted until uct_ringk_rkey_unpack checks
 * it) and the unpacked form a uct_rkey_t points to. No UCX internals, so tests and fuzzers can
 * build keys. */
#ifndef UCT_RINGK_RKEY_H
#define UCT_RINGK_RKEY_H

#include <core/ringk_cuda.h>

#include <stdint.h>
#include <unistd.h>

/** The kinds of unpacked keys the component hands out: uct_rkey_t points to a struct that starts
 * with one of these. */
enum {
    UCT_RINGK_KEY_REG = 0x52454731u, /**< uct_ringk_rkey_t: registered memory (CMA, CUDA IPC) */
    UCT_RINGK_KEY_SHM = 0x53484d31u  /**< uct_ringk_shm_rkey_t: a mapped ringk_shm allocation */
};

/** What the packed keys of both mds begin with: which md packed it (its magic, which also names
 * the layout of the rest), the process that owns the memory, and the owner's range of it. */
typedef struct uct_ringk_rkey_hdr {
    uint32_t magic;
    uint32_t pid;
    uint64_t address;
    uint64_t length;
} __attribute__((packed)) uct_ringk_rkey_hdr_t;

/** The header of a key to @a length bytes at @a address of this process, packed by the md whose
 *  keys carry @a magic. */
static inline uct_ringk_rkey_hdr_t uct_ringk_rkey_hdr(uint32_t magic, uint64_t address,
                                                     uint64_t length)
{
    uct_ringk_rkey_hdr_t h = {
        .magic = magic, .pid = (uint32_t)getpid(), .address = address, .length = length
    };

    return h;
}

/** Whether the header of a peer's key (untrusted) is one of @a magic's, names a process id a
 *  process can have, and a range that does not wrap around. */
static inline int uct_ringk_rkey_hdr_valid(const uct_ringk_rkey_hdr_t *h, uint32_t magic)
{
    return (h->magic == magic) && (h->pid != 0) && (h->pid <= INT32_MAX) &&
           (h->address + h->length >= h->address);
}

/** Packed remote key of the ring device's md, as sent to peers. */
typedef struct uct_ringk_packed_rkey {
    uct_ringk_rkey_hdr_t hdr; /**< magic UCT_RINGK_RKEY_MAGIC; the registered region */
    uint32_t mem_type; /**< UCS_MEMORY_TYPE_HOST or UCS_MEMORY_TYPE_CUDA */
    uint32_t ipc_valid; /**< CUDA: 1 when @a ipc holds an exported handle */
    uint64_t gpu;      /**< CUDA: packed bus id of the GPU holding it */
    uint64_t alloc_base, alloc_size;
    uint8_t  ipc[RINGK_CUDA_IPC_HANDLE_LEN];
} __attribute__((packed)) uct_ringk_packed_rkey_t;

#define UCT_RINGK_RKEY_MAGIC 0x524b4b5au /* "ZKKR": the layout with memory types */

/** Unpacked remote key (uct_rkey_t points to one). */
typedef struct uct_ringk_rkey {
    uint32_t kind;         /**< UCT_RINGK_KEY_REG */
    uint32_t pid;
    uint64_t address;
    uint64_t length;
    uint32_t mem_type;
    uint64_t gpu;
    uint64_t alloc_base;   /**< CUDA: the peer's address of the allocation... */
    void    *mapped;       /**< ...and where it is mapped here */
    int      own;          /**< CUDA memory of this very process: not mapped, not unmapped */
    int      shared;       /**< mapped through libringk's import cache */
    int      dev;          /**< CUDA: the ordinal here of the GPU the memory is on (-1: not
                                visible to this process); copies with the key go on its copy
                                stream */
} uct_ringk_rkey_t;

#endif
