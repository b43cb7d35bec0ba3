/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk receive segment: the shared-memory layout an iface owns and its senders map. */
#ifndef UCT_RINGK_SEG_H
#define UCT_RINGK_SEG_H

#include <core/ringk_ring.h>

#include <assert.h>
#include <stdint.h>

/*
 * A receive segment is a memfd created by the receiving iface (owner-only, 0600) and mapped by
 * the senders, which open it through /proc/<owner pid>/fd/<fd>. It is never linked into
 * /dev/shm, so nothing is left behind when any party dies, even by kill -9; the memory goes
 * when the last mapping does. Only offsets and sizes live here, and no locks.
 *
 *   0       +--------------------------------------------------+
 *           | uct_ringk_seg_shm_t: magic, version, sizes,      |  line 0: written once by the
 *           | owner pid, iface id                              |  owner, checked on attach
 *   64      +--------------------------------------------------+
 *           | uct_ringk_seg_ctl_shm_t: armed, wakeup_used,     |  line 1: wakeup handshake and
 *           | lane_gen, closed                                 |  lane bookkeeping
 *   128     +--------------------------------------------------+
 *           | lane[0] ... lane[nlanes-1]: uct_ringk_lane_shm_t |  one line per lane: owner
 *           |                                                  |  token, state, sender pid,
 *           |                                                  |  its staging area
 *   rings   +--------------------------------------------------+
 *           | ring of lane 0 (shared, multi-producer)          |  each a ringk_ring_shm_t
 *           | ring of lane 1 (single producer)                 |  header + cells, lane_stride
 *           | ...                                              |  bytes apart
 *           +--------------------------------------------------+
 *
 * Lane 0 is shared by every sender that finds no free lane and is claimed by compare-and-swap;
 * lanes 1.. are owned by one sender each, which publishes without any atomic read-modify-write.
 */

#define UCT_RINGK_SEG_MAGIC    0x4745534b474e4952ull /* "RINGKSEG" */
#define UCT_RINGK_SEG_NAME     "ringk-rx"            /* the memfd's name, checked on attach */
#define UCT_RINGK_SEG_VERSION  3u
#define UCT_RINGK_SHARED_LANE  0u

/** Segment header (line 0). */
typedef struct uct_ringk_seg_shm {
    uint64_t magic;         /**< UCT_RINGK_SEG_MAGIC */
    uint32_t version;       /**< UCT_RINGK_SEG_VERSION */
    uint32_t nlanes;        /**< lanes, shared lane included */
    uint32_t ring_size;     /**< cells per lane ring */
    uint32_t cell_size;     /**< bytes per cell */
    uint64_t seg_bytes;     /**< size of the whole segment */
    uint64_t rings_offset;  /**< offset of lane 0's ring */
    uint64_t lane_stride;   /**< bytes between two lanes' rings */
    uint32_t owner_pid;     /**< pid of the receiving process */
    uint32_t max_cells;     /**< most cells one message may span */
    uint32_t max_len;       /**< largest message the receiver takes, bytes (its max_bcopy) */
} uct_ringk_seg_shm_t;

/** Control line (line 1). */
typedef struct uct_ringk_seg_ctl_shm {
    uint64_t armed;         /**< 1: the receiver sleeps on its wakeup socket */
    uint64_t wakeup_used;   /**< 1: the receiver uses wakeups; senders check @a armed */
    uint64_t lane_gen;      /**< bumped when a lane is taken or given back */
    uint64_t closed;        /**< 1: the owning iface is closed */
    uint8_t  pad[RINGK_RING_LINE - 32];
} uct_ringk_seg_ctl_shm_t;

/** Lane states. */
enum {
    UCT_RINGK_LANE_FREE    = 0,
    UCT_RINGK_LANE_OPEN    = 1,  /**< a sender owns the lane */
    UCT_RINGK_LANE_CLOSING = 2   /**< the sender left; the receiver drains, then frees it */
};

/** One lane's control line. */
typedef struct uct_ringk_lane_shm {
    uint64_t owner;         /**< 0 when free, else the owning sender's token */
    uint64_t state;         /**< UCT_RINGK_LANE_* */
    uint64_t pid;           /**< owning sender's pid, for failure detection */
    uint64_t stage_fd;      /**< the sender's staging area (ringk_xstage.h): its memfd in the
                                 sender + 1; 0 none. Set after the claim, read on rescans */
    uint64_t stage_ack;     /**< the receiver: the stage_fd it attached, or that value with
                                 bit 63 set when it could not */
    uint8_t  pad[RINGK_RING_LINE - 40];
} uct_ringk_lane_shm_t;

static_assert(sizeof(uct_ringk_seg_shm_t) <= RINGK_RING_LINE, "segment header fits a line");
static_assert(sizeof(uct_ringk_seg_ctl_shm_t) == RINGK_RING_LINE, "control is one line");
static_assert(sizeof(uct_ringk_lane_shm_t) == RINGK_RING_LINE, "a lane is one line");

#define UCT_RINGK_SEG_CTL_OFFSET   RINGK_RING_LINE
#define UCT_RINGK_SEG_LANES_OFFSET (2 * RINGK_RING_LINE)

static inline uct_ringk_seg_ctl_shm_t *uct_ringk_seg_ctl(void *seg)
{
    return (uct_ringk_seg_ctl_shm_t*)((char*)seg + UCT_RINGK_SEG_CTL_OFFSET);
}

static inline uct_ringk_lane_shm_t *uct_ringk_seg_lane(void *seg, unsigned lane)
{
    return (uct_ringk_lane_shm_t*)((char*)seg + UCT_RINGK_SEG_LANES_OFFSET) + lane;
}

/** Sizes of a segment with @a nlanes lanes of @a ring_size cells of @a cell_size bytes. */
static inline void uct_ringk_seg_layout(unsigned nlanes, unsigned ring_size, unsigned cell_size,
                                        uint64_t *rings_offset_p, uint64_t *stride_p,
                                        uint64_t *bytes_p)
{
    uint64_t off    = UCT_RINGK_SEG_LANES_OFFSET + (uint64_t)nlanes * RINGK_RING_LINE;
    uint64_t stride = ringk_ring_bytes(ring_size, cell_size);

    stride          = (stride + 4095) & ~4095ull; /* rings start on their own page */
    off             = (off + 4095) & ~4095ull;
    *rings_offset_p = off;
    *stride_p       = stride;
    *bytes_p        = off + stride * nlanes;
}

#endif
