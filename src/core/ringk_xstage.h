/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk cross-process staging: a put or get between this process and memory of another process
 * that neither process can map (GPU memory without CUDA IPC or peer access), carried through
 * host memory both map. The initiator owns a staging area (an owner-only memfd) of a few slots;
 * it copies a chunk into a slot and posts it (put), or posts a request and copies the slot out
 * once it is served (get); the target, in its progress, serves posted slots by copying between
 * the slot and its own memory. While the target serves one slot the initiator fills the next,
 * so the two copies overlap. No CUDA here: the copies are the callers' (the transport's
 * HOST_STAGED path does them with cudaMemcpy; tests with memcpy).
 *
 *   0         +--------------------------------------------------+
 *             | ringk_xstage_shm_t: magic, version, slots, sizes, |  written once by the
 *             | owner pid                                        |  initiator, checked on attach
 *   64        +--------------------------------------------------+
 *             | slot[0] ... slot[nslots-1]: ringk_xstage_slot_shm_t|  one line each: posted / done
 *             |                                                  |  sequence, op, address, length
 *   data_off  +--------------------------------------------------+  (page-aligned)
 *             | data of slot 0 (slot_bytes) ... of slot n-1      |
 *             +--------------------------------------------------+
 *
 * A slot is the initiator's while done == posted: it writes op/address/length (and for a put
 * the data), then publishes posted = seq (X1). The target sees posted != done, copies the slot
 * line once, checks it (length within the slot, op known, the range its own to give: the
 * caller's check), copies, writes status and then done = posted (X2). Everything the target
 * reads is a peer's writing and checked; what the initiator reads back (done, status, a get's
 * data) is bounded by what it asked for.
 */
#ifndef RINGK_CORE_XSTAGE_H
#define RINGK_CORE_XSTAGE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RINGK_XSTAGE_MAGIC     0x4754534b474e4952ull /* "RINGKSTG" */
#define RINGK_XSTAGE_VERSION   1u
#define RINGK_XSTAGE_NAME      "ringk-stage"          /* the memfd's name, checked on attach */
#define RINGK_XSTAGE_MAX_SLOTS 16u
#define RINGK_XSTAGE_MAX_SLOT  (64ull << 20)          /* bytes of a slot, at most */
#define RINGK_XSTAGE_LINE      64u

enum {
    RINGK_XSTAGE_PUT = 1, /**< slot data -> the target's memory */
    RINGK_XSTAGE_GET = 2  /**< the target's memory -> slot data */
};

/** Area header (line 0). */
typedef struct ringk_xstage_shm {
    uint64_t magic;      /**< RINGK_XSTAGE_MAGIC */
    uint32_t version;    /**< RINGK_XSTAGE_VERSION */
    uint32_t nslots;
    uint64_t slot_bytes;
    uint64_t data_off;   /**< offset of slot 0's data */
    uint64_t bytes;      /**< size of the whole area */
    uint32_t owner_pid;  /**< the initiator */
    uint8_t  pad[RINGK_XSTAGE_LINE - 44];
} ringk_xstage_shm_t;

/** One slot's line. */
typedef struct ringk_xstage_slot_shm {
    uint64_t posted;     /**< initiator: sequence of the request in the slot (X1) */
    uint64_t done;       /**< target: the sequence it served (X2) */
    uint32_t op;         /**< RINGK_XSTAGE_PUT / _GET */
    int32_t  status;     /**< target: 0, or -errno of the served request */
    uint64_t addr;       /**< the target's address */
    uint64_t len;        /**< bytes, at most slot_bytes */
    uint8_t  pad[RINGK_XSTAGE_LINE - 40];
} ringk_xstage_slot_shm_t;

static_assert(sizeof(ringk_xstage_shm_t) == RINGK_XSTAGE_LINE, "header is one line");
static_assert(sizeof(ringk_xstage_slot_shm_t) == RINGK_XSTAGE_LINE, "a slot is one line");

/** An area as one process maps it (initiator or target). */
typedef struct ringk_xstage {
    void     *base;
    uint64_t  bytes;
    unsigned  nslots;
    uint64_t  slot_bytes;
    uint64_t  data_off;
    int       fd;        /**< the initiator's memfd; -1 on the target */
    uint32_t  peer_pid;  /**< on the target: the initiator */
    uint64_t  seq;       /**< initiator: last sequence posted */
    uint64_t  served;    /**< target: requests served */
    uint64_t  failed;    /**< target: requests refused */
    int       broken;    /**< initiator: -errno once a target stopped serving (unusable) */
} ringk_xstage_t;

/** How the target moves a request's bytes; each returns 0 or -errno. */
typedef struct ringk_xstage_target_ops {
    void *arg;
    /** Whether [addr, addr + len) may be written (put) or read (get) by @a xs's initiator. */
    int (*check)(void *arg, const ringk_xstage_t *xs, int op, uint64_t addr, uint64_t len);
    /** Copies @a len bytes from the slot's data to @a addr (put) or back (get). */
    int (*copy)(void *arg, int op, void *slot_data, uint64_t addr, uint64_t len);
} ringk_xstage_target_ops_t;

/** How the initiator moves its own bytes of a transfer, and waits. */
typedef struct ringk_xstage_io {
    void *arg;
    /** put: local bytes [off, off + len) into slot data @a dst. 0 or -errno. */
    int (*stage_out)(void *arg, void *dst, size_t off, size_t len);
    /** get: slot data @a src to local bytes [off, off + len). 0 or -errno. */
    int (*stage_in)(void *arg, const void *src, size_t off, size_t len);
    /** Called while a slot is awaited: non-zero stops the transfer with that error (the target
     *  died). It may serve areas of other initiators (no two processes wait on each other). */
    int (*idle)(void *arg);
} ringk_xstage_io_t;

/** Creates an area of @a nslots slots of @a slot_bytes each (owner-only memfd, mapped).
 *  @return 0, or -errno with @a why saying what failed. */
int ringk_xstage_create(unsigned nslots, uint64_t slot_bytes, ringk_xstage_t *xs, char *why,
                        size_t why_len);

/** Maps the area of descriptor @a fd of initiator @a pid (its /proc entry; same user, 0600, the
 *  memfd's name) and checks its header against the file. @return 0 or -errno, with @a why. */
int ringk_xstage_attach(uint32_t pid, int fd, ringk_xstage_t *xs, char *why, size_t why_len);

/** Unmaps @a xs (and closes the initiator's memfd). */
void ringk_xstage_close(ringk_xstage_t *xs);

/** ringk_xstage_close() of an area registered with CUDA (ringk_cuda_host_register()): its
 *  mapping is given to ringk_cuda_host_release(), which unregisters and unmaps it now, or once
 *  no ringk device kernel is resident (until then it stays mapped). */
void ringk_xstage_close_pinned(ringk_xstage_t *xs);

/** Slot @a slot's data. */
static inline void *ringk_xstage_data(const ringk_xstage_t *xs, unsigned slot)
{
    return (char*)xs->base + xs->data_off + (uint64_t)slot * xs->slot_bytes;
}

/** Target: serves every posted slot of @a xs. @return the requests served (refused ones
 *  included: they complete with their error). */
unsigned ringk_xstage_serve(ringk_xstage_t *xs, const ringk_xstage_target_ops_t *ops);

/** Initiator: moves @a len bytes to (RINGK_XSTAGE_PUT) or from (RINGK_XSTAGE_GET) the target's
 *  @a addr through the slots, chunk by chunk, and returns once every chunk is served.
 *  @return 0, or the first error (a refused request's, a copy's, idle's), with @a why. */
int ringk_xstage_transfer(ringk_xstage_t *xs, int op, uint64_t addr, uint64_t len,
                          const ringk_xstage_io_t *io, char *why, size_t why_len);

#endif
