/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the device executor (kernels of the CUDA backend), inside: what its files share.
 * The runtime reaches it only through ringk_dev.h. A device kernel runs the loop of
 * ringk/api/ringk_device.h as a launch on a CUDA device, or on a host thread standing in for a
 * GPU block (the emulated device, when its entry was compiled as host C). Its host ingress ring
 * is the kernel's inbox (k->inbox), so every host send path reaches it unchanged; its device
 * inbox takes sends of kernels of the same device; its outbox is drained by the proxy thread
 * (ringk_dev_proxy.c), which sends as the kernel through the runtime. */
#ifndef RINGK_DEV_DEV_H
#define RINGK_DEV_DEV_H

#include "ringk_dev.h"
#include "ringk/ringk_exec.h"

#include <ringk/api/ringk_device.h>
#include <ringk/api/ringk_peer.h>

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define RINGK_DEV_DEVICES        9       /* the emulated device and CUDA devices 0..7 */
#define RINGK_DEV_OUTBOX_CELLS 256u    /* outbox cells of RINGK_CELL bytes, at least (more for
                                          two records of the kernel's largest message) */
#define RINGK_DEV_MAPPED_MB_DEFAULT 8  /* RINGK_DEVICE_MAPPED_MB when unset */
/* a device kernel's max_in at most: its largest message, an LL message of the host ingress
 * ring, of RINGK_RING_MSG_CELLS_MAX cells (a cell of RINGK_CELL bytes carries half of it) */
#define RINGK_DEV_MAX_IN_LL \
    ((uint32_t)(4 * ((uint64_t)RINGK_RING_MSG_CELLS_MAX * RINGK_CELL / 8 - \
                     RINGK_RING_LL_HDR_WORDS) - sizeof(ringk_msg_t)))
#define RINGK_DEV_MEM_MB_DEFAULT    16 /* RINGK_DEVICE_MEM_MB when unset */
#define RINGK_DEV_SLAB_MB_MAX       4096

#define RINGK_DEV_SLAB_ALIGN 256u
#define RINGK_DEV_QUEUES_MAX 32        /* CUDA_DEVICE_MAX_CONNECTIONS at most */

/* One allocation made before any kernel of its device runs, which the device's kernels take
 * their memory from (ringk_dev_region_t): memory a resident kernel may touch is never freed
 * while kernels run, and nothing is allocated (an implicit synchronization with running
 * kernels on a GPU) once they do. */
typedef struct {
    uint8_t *host;   /* the host's address (NULL: device memory the host cannot read) */
    uint8_t *dev;    /* the device's address */
    size_t   size;
} ringk_dev_slab_t;

/* A device kernel's memory in the two slabs of its device (index 0 the mapped slab, 1 the
 * device memory slab). Taken again by a later kernel only once nothing may still touch it:
 * the kernel's launches have all returned, and so have those of every kernel that had a
 * direct route into its inbox (a launch keeps its copy of a direct route's target). */
typedef struct ringk_dev_region {
    size_t                   at[2], len[2];
    unsigned                 holds; /* the kernel until freed, and each kernel that had a
                                       direct route into it until freed; atomic */
    int                      exported; /* its kernel's inbox was offered to other processes
                                       (ringk_dev_remote.c): never taken again, as their
                                       sends may still write it; atomic */
    struct ringk_dev_region *next;  /* the device's regions */
} ringk_dev_region_t;

/* One device of the process: the emulated one (device 0) or a CUDA device. Every context's
 * kernels on it take their memory from its slabs: allocated when the first context places a
 * kernel there, freed when the last context that did is destroyed (an allocation or a free
 * waits for every kernel that runs on the device, so neither may meet another context's
 * resident kernels). Under the process's device lock (ringk_exec_dev.c). */
typedef struct {
    int                            used;         /* its slabs are allocated */
    unsigned                       users;        /* contexts that placed kernels on it */
    int                            cuda_index;   /* -1: emulated */
    const ringk_device_cuda_ops_t *ops;          /* the first entry's CUDA calls, for the
                                                    device's own (slabs, setup stream); another
                                                    entry's once its library is unloaded */
    void                          *stream;       /* for setup copies */
    /* the streams of its kernels, made with the slabs (before any kernel of the process runs
     * there) and reused: a stream made while kernels run could be given a hardware queue that
     * a resident kernel holds, and wait behind it for ever */
    void                          *streams[RINGK_DEV_QUEUES_MAX];
    uint8_t                        stream_used[RINGK_DEV_QUEUES_MAX]; /* 2: its kernel's launch
                                                    did not return: never given out again */
    unsigned                       nstreams;
    ringk_dev_slab_t               mapped, mem;
    ringk_dev_region_t            *regions;      /* the memory its kernels hold */
    unsigned                       kernels;      /* its kernels: a stream each */
    unsigned                       launched;     /* CUDA: of them, those launched and not yet
                                                    joined, or stuck: the ones whose launch
                                                    may be resident (atomic; kernels made in a
                                                    job wait for ringk_ctx_start to launch) */
    uint32_t                       share;        /* millionths of its block slots that its
                                                    kernels take (their blocks are resident
                                                    together; a stuck kernel keeps its share) */
    unsigned                       queues;       /* its hardware queues (ringk_dev_queues) */
    int                            queues_before; /* CUDA was initialized before libringk
                                                    could ask for more queues */
    unsigned                       stuck;        /* kernels whose launch did not return: the
                                                    slabs are never freed then, nor their
                                                    regions */
    int                            kept;         /* the slabs were kept for them (logged) */
    /* the emulated device: its slabs in one file other processes may map (file, NULL where
     * memfd_create failed: anonymous memory at anon_base) */
    uint8_t                       *file;
    size_t                         file_bytes;
    int                            file_fd;
    uint64_t                       file_token;
    uint8_t                       *anon_base;
    size_t                         anon_bytes;
    /* a CUDA device whose memory other processes of the job may map (ringk_dev_share.c):
     * the mapped slab is the file's (registered with CUDA), the device memory slab a cuMem
     * allocation of mem_bytes whose descriptor mem_fd the service hands out */
    int                            cuda_shared;
    int                            mem_fd;
    uint64_t                       mem_bytes;
    struct ringk_dev_fdsvc        *svc;
    uint32_t                       peer_in;      /* bit j: device kernels of CUDA device j may
                                                    send straight into its device inboxes
                                                    (peer access from j on, native atomics,
                                                    j given access to shared cuMem memory);
                                                    set at its setup or at j's, atomic. Not 0:
                                                    inboxes made from then on take system
                                                    scope atomics (a route checks the target
                                                    inbox's own scope) */
} ringk_dev_device_t;

/* The devices of the process (ringk_dev_device.c). Its lock (mu) comes after a device kernel's
 * and before the CUDA entries' (ringk_dev_lock_t); the log callback is called under it. A
 * kernel's setup copy is made under it too, so a copy that waited (a stream sharing a
 * hardware queue with a resident kernel, which the device's streams are there to avoid) would
 * hold every context's creates. */
typedef struct {
    pthread_mutex_t  mu;
    ringk_dev_device_t device[RINGK_DEV_DEVICES];
    unsigned         running;  /* emulated launches that have not returned, atomic */
    uint32_t         peer_on[RINGK_DEV_DEVICES]; /* by CUDA ordinal j: bit k, peer access from
                                                    j to k turned on by a device's setup (it
                                                    stays on) */
} ringk_dev_proc_t;

extern ringk_dev_proc_t ringk_dev_proc;

/* A context's use of the process's devices, and the proxy thread that serves its device
 * kernels. */
typedef struct ringk_devs {
    uint8_t          holds[RINGK_DEV_DEVICES]; /* 1: counted in the device's users */
    pthread_t        proxy;
    int              proxy_started;
    int              stop;            /* atomic */
    struct ringk_dev_rmap *rmaps;     /* other processes' device memory mapped here (only
                                         added to, under ctx->lock, until the context goes) */
    uint64_t         watch_ns;        /* the proxy's next look at them */
    int              exported;        /* a kernel's inbox was offered to other processes
                                         (atomic): the proxy watches for lost senders */
    uint64_t        *dead_since;      /* by rank: since when the proxy saw it dead (0: not,
                                         all ones: told to the loops); NULL until needed */
} ringk_devs_t;

/* Where a device kernel's launches stand, as the host sees them. Moves only through
 * ringk_dev_life_move() (ringk_exec_dev.c), which holds the table of allowed moves:
 *   NEW -> DEFERRED   created in a job before ringk_ctx_start: its first launch waits for it
 *   NEW, DEFERRED -> LAUNCHED   its first launch (ringk_exec_dev_launch)
 *   LAUNCHED -> FAULTED   CUDA: the proxy found its stream failed for good, or answering only
 *                         errors for RINGK_DEV_UNKNOWN_NS, and marked the kernel terminated;
 *                         no launch after it (a late wake is dropped)
 *   any of those -> JOINED   dev_join: no launch after it
 *   JOINED -> STUCK   CUDA: its launch did not return within 10 s of the join; its stream,
 *                     its memory and its device's slabs are never given back
 * Read without a lock; moved under the kernel's mu (FAULTED by the proxy, which only tries the
 * lock, by compare-and-swap: a join that came first wins). In this order: JOINED and what
 * follows it are the states after a join. */
typedef enum {
    RINGK_DEV_NEW,
    RINGK_DEV_DEFERRED,
    RINGK_DEV_LAUNCHED,
    RINGK_DEV_FAULTED,
    RINGK_DEV_JOINED,
    RINGK_DEV_STUCK
} ringk_dev_life_t;

/* The device executor's locks, in the only order a thread may take them: a device kernel's
 * mu (its launches), the process's device lock (ringk_dev_proc.mu), the CUDA entries' lock
 * (ringk_dev_entries.c). A thread holds at most one of each. ringk_dev_lock() checks the order
 * (an assertion: builds without NDEBUG). */
typedef enum {
    RINGK_DEV_LOCK_KERNEL,
    RINGK_DEV_LOCK_PROC,
    RINGK_DEV_LOCK_ENTRIES
} ringk_dev_lock_t;

/* The device executor's locks this thread holds, one bit per ringk_dev_lock_t
 * (ringk_exec_dev.c). */
extern __thread unsigned ringk_dev_locks_held;

static inline void ringk_dev_lock(pthread_mutex_t *mu, ringk_dev_lock_t which)
{
    /* none of this lock's rank or a later one may be held: the order of ringk_dev_lock_t */
    assert((ringk_dev_locks_held >> which) == 0);
    pthread_mutex_lock(mu);
    ringk_dev_locks_held |= 1u << which;
}

static inline void ringk_dev_unlock(pthread_mutex_t *mu, ringk_dev_lock_t which)
{
    ringk_dev_locks_held &= ~(1u << which);
    pthread_mutex_unlock(mu);
}

/* The host's side of a device kernel. */
typedef struct ringk_dev_host {
    const ringk_device_entry_t *entry;
    ringk_dev_device_t  *device;
    ringk_dev_ctl_t   *ctl;           /* the host's address */
    ringk_dev_route_t *routes;        /* the host's address, RINGK_DEV_ROUTES_MAX */
    char             (*names)[RINGK_DEV_NAME_MAX]; /* the host's address (mapped) of the name
                                         tables the device gets a copy of (RINGK_DEV_NAMES_BYTES) */
    uint32_t           route_ever;    /* routes once made direct: never written again */
    uint32_t           remote_tried;  /* routes to a kernel of another process, looked at */
    uint64_t           given_up_seen; /* exported: ctl->given_up the proxy logged */
    int                dead_full;     /* exported: a process that ended could not be told
                                         (ctl->dead full: logged once) */
    uint64_t           emu_returns;   /* emulated: launches that returned (atomic); none runs
                                         when it equals 'launches' */
    struct ringk_dev_rmap *remote[RINGK_DEV_ROUTES_MAX]; /* per route made direct into another
                                         process's memory: its mapping */
    ringk_dev_kernel_t view;          /* what a launch gets: device addresses */
    ringk_ring_t       outbox;        /* the host's view, consumed by the proxy */
    ringk_dev_region_t *region;       /* its memory in the slabs */
    ringk_dev_region_t *held[RINGK_DEV_ROUTES_MAX]; /* per route made direct: the target's
                                         memory, held until this kernel is freed */
    ringk_dev_device_t *held_on[RINGK_DEV_ROUTES_MAX]; /* and the device it is on (another
                                         GPU's for a route by peer access) */
    uint64_t           out_head;
    uint64_t           send_failed;   /* the proxy's failed sends and publishes */
    uint64_t           published;     /* subscribers the proxy's publishes reached (atomic) */
    /* the barrier wait the proxy makes for it (the device waits for the answer) */
    int                bar_pending;   /* 1: waiting for generation bar_gen of bar_index */
    uint32_t           bar_index;
    uint64_t           bar_gen, bar_deadline_ns; /* deadline 0: none */
    uint64_t           bar_answered;  /* waits answered, as ctl->barrier_done */
    void              *stream;        /* CUDA: its launches, in order (its device's
                                         streams[stream_at]) */
    unsigned           stream_at;
    uint32_t           share;         /* CUDA: millionths of its device's block slots it takes
                                         (in device->share while it is set) */
    ringk_dev_kernel_t *src_host, *src_dev; /* the kernel as a launch copies it (view): mapped
                                         memory, at the host's and the device's address */
    ringk_dev_kernel_t *state_dev;    /* where a launch runs: the kernel's device memory */
    int                status_warned; /* CUDA could not say whether its launch runs (logged) */
    uint64_t           unknown_since_ns; /* the proxy's first of such answers in a row; 0 none */
    pthread_mutex_t    mu;            /* launches */
    pthread_t          thread;        /* emulated: the last launch */
    int                has_thread;
    int                life;          /* ringk_dev_life_t; atomic */
    int                counted;       /* CUDA: counted in the process's kernels of its device */
    uint64_t           fault_check_ns; /* the proxy's next look at its stream */
    uint64_t           launches;      /* atomic */
    ringk_device_tally_t *tally;      /* what its code counted where it is compiled as C
                                         (ringk_dev_emu_tally()); atomic; NULL none */
} ringk_dev_host_t;

extern const ringk_exec_ops_t ringk_exec_dev;

/** Readies device kernel @a k of CUDA entry @a e on CUDA device @a dev before its first launch
 *  (ringk_dev_entries.c): 0, -EDEADLK, -E2BIG or a CUDA error (logged). @a ops: the device's
 *  calls every entry shares. On success the kernel is counted on the device until
 *  ringk_dev_entry_gone(). */
int ringk_dev_entry_ready(ringk_ctx_t *ctx, const ringk_kernel_t *k, const ringk_device_entry_t *e,
                          const ringk_device_cuda_ops_t *ops, int dev);
/** The ops a device's own calls (slabs, setup stream) go through: @a ops while an entry of
 *  them is registered, else another registered entry's (the library of an unregistered one may
 *  be unloaded), NULL when none is. A kernel's own calls (its stream) go through its own
 *  entry's ops, loaded while it lives. */
const ringk_device_cuda_ops_t *ringk_dev_ops_live(const ringk_device_cuda_ops_t *ops);
/** A device kernel counted by ringk_dev_entry_ready() whose launches all returned. */
void ringk_dev_entry_gone(int dev);
/** Once, before libringk's first CUDA call for device kernels and under no lock: asks CUDA
 *  for 32 hardware queues per device (CUDA_DEVICE_MAX_CONNECTIONS, which CUDA reads when the
 *  driver is initialized) unless the environment already says, noting whether the driver was
 *  initialized already. */
void ringk_dev_queues_ask(void);
/** The hardware queues CUDA device @a dev's context has, as far as the process can tell:
 *  CUDA_DEVICE_MAX_CONNECTIONS when the program set it or the driver was initialized after
 *  ringk_dev_queues_ask() set it, else CUDA's default of 8 (*@a before is 1 when the driver
 *  was initialized before libringk set it; *@a bad is the variable's value when it is not a
 *  number in 1..32). */
unsigned ringk_dev_queues(int dev, int *before, const char **bad);

/** Under the process's device lock: a region of @a mapped bytes of @a device's mapped slab and
 *  @a mem bytes of its device memory slab (RINGK_DEV_SLAB_ALIGN aligned, the lowest free
 *  offsets) in *@a region_p, held once; 0 or -ENOMEM (no room, or no memory for the record),
 *  with which slab had no room for how much in @a why (when not NULL). */
int ringk_dev_region_take(ringk_dev_device_t *device, size_t mapped, size_t mem,
                          ringk_dev_region_t **region_p, char *why, size_t why_len);
/** Under the process's device lock: drops a hold of @a region; the last gives it back to
 *  @a device. */
void ringk_dev_region_put(ringk_dev_device_t *device, ringk_dev_region_t *region);
/** Under the process's device lock, when @a device's slabs are freed: forgets its regions. */
void ringk_dev_regions_clear(ringk_dev_device_t *device);

/** Under ctx->lock: points the routes of every device kernel at the device inboxes of the
 *  kernels of the same device they name, where the target exists and accepts the sender. */
void ringk_exec_dev_routes(ringk_ctx_t *ctx);
/** The state of CUDA device kernel @a d's stream, as the entry's stream_status op says (1
 *  returned, 0 runs, -EIO faulted, -EAGAIN CUDA could not say), asked in relaxed stream
 *  capture mode. */
int ringk_dev_stream_status(ringk_dev_host_t *d, char *why, size_t why_len);
/** Moves device kernel @a d from one of the states of mask @a from (1 << ringk_dev_life_t) to
 *  @a to: 1, or 0 when it is in none of them. A move the table does not allow is a bug
 *  (asserted). */
int ringk_dev_life_move(ringk_dev_host_t *d, unsigned from, ringk_dev_life_t to);
/** Where @a d stands. */
static inline ringk_dev_life_t ringk_dev_life(const ringk_dev_host_t *d)
{
    return (ringk_dev_life_t)__atomic_load_n(&d->life, __ATOMIC_ACQUIRE);
}
#define RINGK_DEV_LIFE(_s) (1u << (RINGK_DEV_ ## _s))

/** CUDA device kernels of the process launched and not yet joined, or stuck (every device's
 *  ringk_dev_device_t.launched): while there is one, a call that may wait for a device's work
 *  is not made. ringk_cuda_resident() counts the kernels made, which is more (in a job,
 *  kernels made before ringk_ctx_start have not launched). */
int ringk_dev_cuda_launched(void);

/** Launches the loop of @a k (again): 0 or a negative errno (logged). */
int ringk_exec_dev_launch(ringk_kernel_t *k);
/** The emulated device: ringk_exec_dev_launch() unless a launch of @a k still runs (then
 *  -EBUSY, nothing done): never waits for a running launch. */
int ringk_exec_dev_launch_idle(ringk_kernel_t *k);

/* ---- ringk_dev_device.c ---- */

/* Whether device kernels of one GPU may send straight into the device inboxes of another GPU
 * of the process, from what ringk_peer_can_access() said of the pair (its return @a ret and
 * @a info): 1; or 0 with the reason in @a why. A sender claims cells with a compare-and-swap on
 * the target inbox's tail, while kernels of the target's GPU may claim too: the pair needs a
 * P2P path (peer access) and atomics that are native across it. */
static inline int ringk_dev_peer_usable(int ret, const ringk_peer_info_t *info, char *why,
                                        size_t why_len)
{
    if (ret != 0) {
        snprintf(why, why_len, "the pair's path is not known (%d: %s)", ret, info->reason);
        return 0;
    }
    if (!info->can_access) {
        snprintf(why, why_len, "its path is %s, not peer access (%s)",
                 ringk_peer_path_name(info->path), info->reason);
        return 0;
    }
    if (info->native_atomics != 1) {
        snprintf(why, why_len, "CUDA %s native atomics across the pair (%s, link %s), which a "
                 "claim in another GPU's inbox needs", (info->native_atomics == 0) ?
                 "reports no" : "could not say whether it has", ringk_peer_path_name(info->path),
                 info->link);
        return 0;
    }
    snprintf(why, why_len, "%s, link %s, native atomics", ringk_peer_path_name(info->path),
             info->link);
    return 1;
}

/* Which other GPUs a device's setup pairs with (RINGK_DEVICE_PEER): none (0); those the
 * process already uses (unset, "auto"): a CUDA context on them, or ringk device kernels set up
 * there; every GPU it sees (1), which gives each a CUDA context. */
enum { RINGK_DEV_PEER_OFF, RINGK_DEV_PEER_USED, RINGK_DEV_PEER_ALL };

/* The RINGK_DEVICE_PEER value @a env (may be NULL) as RINGK_DEV_PEER_*; *@a bad_p 1 when it is
 * none of "0", "1", "auto" (then the default). */
static inline int ringk_dev_peer_mode(const char *env, int *bad_p)
{
    *bad_p = 0;
    if ((env == NULL) || (env[0] == '\0') || (strcmp(env, "auto") == 0)) {
        return RINGK_DEV_PEER_USED;
    }
    if (strcmp(env, "0") == 0) {
        return RINGK_DEV_PEER_OFF;
    }
    if (strcmp(env, "1") == 0) {
        return RINGK_DEV_PEER_ALL;
    }
    *bad_p = 1;
    return RINGK_DEV_PEER_USED;
}

/* Whether a device's setup in @a mode pairs with another GPU that has a CUDA context in the
 * process (@a ctx_active) or ringk device kernels set up (@a set_up). Only GPUs in use by
 * default: asking a pair, or turning peer access on, gives both GPUs a context (hundreds of
 * MiB each), and a device whose inboxes no other GPU writes keeps device-scope atomics. */
static inline int ringk_dev_peer_candidate(int mode, int ctx_active, int set_up)
{
    return (mode == RINGK_DEV_PEER_ALL) || ((mode == RINGK_DEV_PEER_USED) &&
                                            (ctx_active || set_up));
}

/* Whether peer access from CUDA device @a j to another may be turned on now: yes when it is on
 * already (@a on) or no ringk device kernel of j has a launch (@a kernels launched and not
 * joined, ringk_dev_device_t.launched; @a stuck launches of other GPUs' kernels that did not
 * return and write its inboxes): a call on j's context under a resident kernel may wait for
 * it. 1; or 0 with the reason in @a why. */
static inline int ringk_dev_peer_enable_ok(int on, unsigned kernels, unsigned stuck, int j,
                                           char *why, size_t why_len)
{
    if (on || ((kernels == 0) && (stuck == 0))) {
        return 1;
    }
    snprintf(why, why_len, "CUDA device %d has %u device kernel launches (its own, or other GPUs' "
             "that write its inboxes), under which peer access from it is not turned on "
             "(create the first device kernel once the program uses every GPU it pairs, or set "
             "RINGK_DEVICE_PEER=1)", j, kernels + stuck);
    return 0;
}

/** Under ringk_dev_proc.mu: the device for @a entry with placement @a placement, set up on
 *  first use (slabs and streams) and counted as used by @a ctx: 0 with it in *@a device_p, or a
 *  negative errno; -ENODEV with the reason in @a why. */
int ringk_dev_device_get(ringk_ctx_t *ctx, const ringk_device_entry_t *entry, int placement,
                         ringk_dev_device_t **device_p, char *why, size_t why_len);
/** Under ringk_dev_proc.mu: the index of a stream of @a device no kernel has in *@a at, or
 *  -ENOSPC with the reason in @a why. */
int ringk_dev_device_stream(ringk_dev_device_t *device, unsigned *at, char *why, size_t why_len);
/** Under ringk_dev_proc.mu: a setup copy of @a len bytes to @a device's memory, on its setup
 *  stream: 0 or a CUDA error (in @a why). */
int ringk_dev_device_copy(ringk_dev_device_t *device, void *dst, const void *src, size_t len,
                          char *why, size_t why_len);
/** Puts the calling thread in relaxed stream capture mode for calls of @a ops; returns the mode
 *  it had, for ringk_dev_relax_end(). */
int ringk_dev_relax_begin(const ringk_device_cuda_ops_t *ops);
void ringk_dev_relax_end(const ringk_device_cuda_ops_t *ops, int mode);

/* ---- ringk_dev_remote.c ---- */

/* The emulated device's slab file: this header page, the mapped slab, the device memory slab.
 * Its magic is stored last: a reader that sees it sees the whole header. */
#define RINGK_DEV_SLAB_FILE         "ringk-devslab"
#define RINGK_DEV_SLAB_FILE_MAGIC   0x62616c7376656472ull /* "rdevslab" */
#define RINGK_DEV_SLAB_FILE_VERSION 1u
#define RINGK_DEV_SLAB_FILE_HDR     4096u
typedef struct {
    uint64_t magic;
    uint32_t version, owner_pid;
    uint64_t token;   /* the directory entries of its kernels say the same */
    uint64_t bytes;   /* the file's size */
} ringk_dev_slab_file_t;

/* The most device memory a CUDA export may say it has (a directory entry is not trusted). */
#define RINGK_DEV_EXPORT_MEM_MAX (1ull << 40)

/* Checks the directory entry @a e of a kernel of another process against the size of the file
 * it names, @a file_bytes (all ones before the file is opened): the inbox ring inside it past
 * its header page (EMU), or inside the device memory it names (CUDA: mem_bytes, at most
 * RINGK_DEV_EXPORT_MEM_MAX, a bus id that ends), the control block inside the file past its
 * header page, aligned, the geometry one this code understands. 0, or -EINVAL with what is
 * wrong in @a why. */
static inline int ringk_dev_export_check(const ringk_dev_export_t *e, uint64_t file_bytes,
                                         char *why, size_t why_len)
{
    const int cuda   = (e->kind == RINGK_DEV_EXPORT_CUDA);
    uint64_t in_bytes = cuda ? e->mem_bytes : file_bytes;
    uint64_t ring;

    /* a kernel's inbox holds two of its largest messages (ringk_kernel.c) */
    if ((e->log2_ncells < 1) || (e->log2_ncells > RINGK_RING_LOG2_MAX) ||
        !ringk_ring_is_pow2(e->cell_size) || (e->cell_size < RINGK_RING_CELL_MIN) ||
        (e->cell_size > RINGK_RING_CELL_MAX) || (e->max_in > RINGK_MAX_PAYLOAD) ||
        (2ull * ringk_ring_cells_for(sizeof(ringk_msg_t) + (uint64_t)e->max_in, e->cell_size) >
         (1ull << e->log2_ncells))) {
        snprintf(why, why_len, "its inbox's geometry is not one of ringk's (2^%u cells of %u "
                 "bytes, messages up to %u bytes)", e->log2_ncells, e->cell_size, e->max_in);
        return -EINVAL;
    }
    ring = ringk_ring_bytes(1u << e->log2_ncells, e->cell_size);
    if (cuda && ((e->mem_bytes > RINGK_DEV_EXPORT_MEM_MAX) ||
                 (memchr(e->busid, '\0', sizeof(e->busid)) == NULL) || (e->busid[0] == '\0'))) {
        snprintf(why, why_len, "its device memory (%" PRIu64 " bytes, at most %llu) or GPU's bus "
                 "id is not one this code takes", e->mem_bytes, RINGK_DEV_EXPORT_MEM_MAX);
        return -EINVAL;
    }
    if (((e->inbox_off < RINGK_DEV_SLAB_FILE_HDR) && !cuda) ||
        (e->ctl_off < RINGK_DEV_SLAB_FILE_HDR) || (e->inbox_off % RINGK_RING_LINE) ||
        (e->ctl_off % 64) || (e->inbox_off > in_bytes) || (ring > in_bytes - e->inbox_off) ||
        (e->ctl_off > file_bytes) || (sizeof(ringk_dev_ctl_t) > file_bytes - e->ctl_off)) {
        snprintf(why, why_len, "its inbox (%" PRIu64 " bytes at %" PRIu64 ") is not inside the "
                 "%" PRIu64 " bytes of its %s, or its control block (at %" PRIu64 ") not inside "
                 "the %" PRIu64 " bytes of its file past the header", ring, e->inbox_off,
                 in_bytes, cuda ? "device memory" : "file past the header", e->ctl_off,
                 file_bytes);
        return -EINVAL;
    }
    return 0;
}

/* A slab file of another process this one mapped: routes into it until the process is gone. */
struct ringk_dev_rmap {
    struct ringk_dev_rmap *next;
    int                    rank;
    uint32_t               kind;     /* RINGK_DEV_EXPORT_EMU or _CUDA */
    uint32_t               pid;
    int32_t                fd;
    uint64_t               token;
    uint8_t               *base;
    size_t                 bytes;
    int                    dropped;  /* its routes went back to the host (atomic) */
    /* CUDA: the file's device address (registered here), the device memory mapped here */
    uint8_t               *dev_base;
    uint8_t               *mem_dev;
    uint64_t               mem_bytes;
    uint32_t               access;   /* CUDA: bit k, device k of this process may write mem_dev
                                        (ringk_dev_rmap_grant) */
};

/* ---- ringk_dev_share.c ---- */

/* A process hands the descriptor of its CUDA device memory to processes of its user on the
 * node that ask with the token of its directory: a thread answers on an abstract Unix socket
 * named after the pid and the token, the descriptor travels by SCM_RIGHTS. */
typedef struct ringk_dev_fdsvc ringk_dev_fdsvc_t;

/** Starts handing out descriptor @a fd (which stays the caller's) of @a bytes bytes to those who
 *  name @a token: 0, or -errno with why in @a why. */
int ringk_dev_fdsvc_start(ringk_dev_fdsvc_t **svc_p, int fd, uint64_t token, uint64_t bytes,
                          char *why, size_t why_len);
/** Stops the service (no-op for NULL); how many descriptors it handed out. */
uint64_t ringk_dev_fdsvc_stop(ringk_dev_fdsvc_t *svc);
/** Asks process @a pid's service for the descriptor of @a token, waiting up to @a timeout_ms:
 *  0 with it in *@a fd_p (the caller's, close-on-exec) and its size in *@a bytes_p; -ESRCH no
 *  such service; -EPERM the answer came from another process or user, or refused the token;
 *  -ETIMEDOUT; -EPROTO a malformed answer; with why in @a why. */
int ringk_dev_fdsvc_fetch(uint32_t pid, uint64_t token, int timeout_ms, int *fd_p,
                          uint64_t *bytes_p, char *why, size_t why_len);
/** Under ringk_dev_proc.mu, CUDA device @a device's slabs (sizes set) shared with other
 *  processes: the mapped slab in a sealed memfd registered with CUDA, the device memory a
 *  cuMem allocation with a descriptor service. 0, or -errno with why in @a why (nothing
 *  allocated: the caller allocates as for one process). */
int ringk_dev_cuda_slabs_share(ringk_dev_device_t *device, char *why, size_t why_len);
/** Under ringk_dev_proc.mu, no kernel of @a device left: frees what
 *  ringk_dev_cuda_slabs_share() allocated (the file unregistered and unmapped now, or once no
 *  device kernel of the process is resident; other processes' mappings keep their pages). */
void ringk_dev_cuda_slabs_unshare(ringk_dev_device_t *device);
/** A sealed, owner-only memfd of @a bytes with the slab file header, mapped at device->file
 *  (ringk_dev_remote.c): 0, or -errno with why in @a why. */
int ringk_dev_slab_file_make(ringk_dev_device_t *device, size_t bytes, char *why,
                             size_t why_len);
/** How long a sender waits for another process's descriptor service (connect and answer). */
#define RINGK_DEV_FDSVC_WAIT_MS 5000
/** Under ctx->lock: maps what a CUDA export @a e names into map @a m (its file mapped already)
 *  for CUDA device @a dev (the sender's): registers the file, fetches and maps the device
 *  memory. 0, or -errno with why in @a why: then no device memory is mapped, and m->dev_base
 *  is not NULL where the file was registered (ringk_dev_rmap_unmap() gives it back). */
int ringk_dev_rmap_cuda(int dev, const ringk_dev_export_t *e, struct ringk_dev_rmap *m,
                        char *why, size_t why_len);
/** Under ctx->lock: gives CUDA device @a dev of this process access to the device memory of
 *  map @a m (once; nothing for the emulated device's): 0, or -errno with why in @a why. */
int ringk_dev_rmap_grant(struct ringk_dev_rmap *m, int dev, char *why, size_t why_len);
/** Gives back what map @a m holds, of either kind: for CUDA, what ringk_dev_rmap_cuda() made
 *  (also after it failed); the file's mapping. The device memory unmapped, the file
 *  unregistered and unmapped, now or once no device kernel is resident (cuMem unmaps and
 *  unregistrations may wait for the device). */
void ringk_dev_rmap_unmap(struct ringk_dev_rmap *m);

/** The RINGK_DEVICE_REMOTE setting: 0 none of this; 1, empty or unset on (the default);
 *  another value is logged and taken as 1. */
int ringk_dev_remote_on(ringk_ctx_t *ctx);
/** Under ctx->lock: the slab file of process @a rank that @a e names, mapped (once per file;
 *  never for a process that is gone), with its device memory for a CUDA export (for a sender
 *  on CUDA device @a dev): 0 with it in *@a map_p, or a negative errno with why in @a why. */
int ringk_dev_rmap_get(ringk_ctx_t *ctx, int rank, int dev, const ringk_dev_export_t *e,
                       struct ringk_dev_rmap **map_p, char *why, size_t why_len);
/** Under ringk_dev_proc.mu: the emulated device's slabs (sizes set), in a sealed memfd others
 *  of the user may map, or in anonymous memory where that fails (logged): 0 or -ENOMEM. */
/* Whether a device kernel fits (ringk_dev_shape.c): its entry (0 or -EINVAL), its shape on a
 * CUDA device (0 with d->share, -E2BIG, or a CUDA error) or the emulated device (0 or
 * -E2BIG), each logged; and whether CUDA launches block (1 with the reason in @a why). */
int ringk_dev_entry_check(ringk_ctx_t *ctx, const ringk_kernel_t *k,
                          const ringk_device_entry_t *e);
int ringk_dev_shape_fits(ringk_ctx_t *ctx, const ringk_kernel_t *k, ringk_dev_host_t *d);
int ringk_dev_emu_shape_fits(ringk_ctx_t *ctx, const ringk_kernel_t *k);
int ringk_dev_launches_block(char *why, size_t why_len);

/* The tally of device code compiled as C (ringk_dev_emu.c): launches of the kernel whose
 * device state is @a state count into the counters *@a tally_p (ringk_dev_emu_launch() looks
 * them up), which stay until removed (retired, never reused, with @a retire: a launch that did
 * not return may still count); and the device's addresses of mapped host memory, what a host
 * read or write is. Each 0, or -ENOSPC when the tables are full (then that kernel or memory is
 * not counted; logged by the caller). */
int ringk_dev_tally_add(const ringk_dev_kernel_t *state, ringk_device_tally_t **tally_p);
void ringk_dev_tally_remove(const ringk_dev_kernel_t *state, int retire);
int ringk_dev_host_range_add(const void *dev, size_t bytes);
void ringk_dev_host_range_remove(const void *dev);
int ringk_dev_emu_slabs_alloc(ringk_ctx_t *ctx, ringk_dev_device_t *device);
void ringk_dev_emu_slabs_free(ringk_dev_device_t *device);
/** Under ctx->lock: ringk_exec_dev_remote_routes() (ringk_dev_routes.c). */
void ringk_dev_remote_routes_locked(ringk_ctx_t *ctx);
/** The proxy, each round (@a now its clock): drops the direct routes into the memory of
 *  processes that left the job or were lost, looking every 100 ms; returns what it did. */
unsigned ringk_dev_remote_watch(ringk_ctx_t *ctx, uint64_t now);
/** Once every device kernel of the context is freed: unmaps other processes' memory. */
void ringk_dev_remote_unmap(ringk_devs_t *devs);

/* ---- ringk_dev_proxy.c ---- */

/** Starts the context's proxy thread if it has not: 0 or -EAGAIN (logged). */
int ringk_dev_proxy_start(ringk_ctx_t *ctx);

#endif
