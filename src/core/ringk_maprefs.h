/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk mapping references: the mappings of other processes' allocations a library of this
 * process holds, one per handle, shared by every holder and counted. CUDA refuses to open one
 * IPC handle twice in a process, so a second import of an allocation must take the first's
 * mapping; a mapping no holder uses any more is unmapped once that is safe (the caller says
 * when), and until then taken again by the next import of its handle. The table calls no CUDA:
 * the caller passes the open and close operations (ringk_cuda_ipc.c: cudaIpcOpenMemHandle and
 * cudaIpcCloseMemHandle). */
#ifndef RINGK_CORE_MAPREFS_H
#define RINGK_CORE_MAPREFS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define RINGK_MAPREFS_KEY 64 /**< bytes of a handle (a cudaIpcMemHandle_t) */

typedef struct ringk_mapref {
    uint8_t  key[RINGK_MAPREFS_KEY];
    uint64_t size;    /**< bytes the mapping was checked to hold */
    void    *mapped;
    unsigned refs;    /**< holders; 0: to be unmapped */
} ringk_mapref_t;

typedef struct ringk_maprefs {
    pthread_mutex_t mu;
    ringk_mapref_t *e;
    size_t          n, cap;
    uint64_t        opens, hits;   /**< handles opened, imports that took a mapping held */
} ringk_maprefs_t;

#define RINGK_MAPREFS_INIT {.mu = PTHREAD_MUTEX_INITIALIZER}

/** Maps the handle @a key of an allocation of @a size bytes: 0, or the caller's error with the
 *  reason in @a why. */
typedef int (*ringk_maprefs_open_t)(const uint8_t *key, uint64_t size, void **mapped_p,
                                    char *why, size_t why_len);
/** Unmaps @a mapped. */
typedef void (*ringk_maprefs_close_t)(void *mapped);

/**
 * The mapping of handle @a key (an allocation of @a size bytes) in *@a mapped_p with a
 * reference more: the one held, or one @a open makes (under the table's lock, so that two
 * imports of one handle open it once). @return 0; -EINVAL when the handle is held for another
 * size (the same allocation cannot have two); -ENOMEM; or @a open's error, with the reason in
 * @a why.
 */
int ringk_maprefs_get(ringk_maprefs_t *t, const uint8_t *key, uint64_t size,
                      ringk_maprefs_open_t open, void **mapped_p, char *why, size_t why_len);

/**
 * Drops a reference to @a mapped; at the last, unmaps it with @a close when @a may_close, else
 * keeps it for ringk_maprefs_flush() (or the next import of its handle).
 * @return 0, or -ENOENT when @a mapped is not a mapping of the table (or has no reference).
 */
int ringk_maprefs_put(ringk_maprefs_t *t, void *mapped, int may_close,
                      ringk_maprefs_close_t close);

/** Unmaps with @a close every mapping kept with no reference; returns how many. */
size_t ringk_maprefs_flush(ringk_maprefs_t *t, ringk_maprefs_close_t close);

/** Mappings kept with no reference. */
size_t ringk_maprefs_unused(ringk_maprefs_t *t);

#endif
