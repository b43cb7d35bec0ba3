/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk internals shared by the runtime's files: the context, kernels, and the remote part. */
#ifndef RINGK_INTERNAL_H
#define RINGK_INTERNAL_H

#include "ringk_log.h"

#include <core/ringk_ring.h>
#include <core/ringk_ring_ll.h>
#include <ringk/api/ringk.h>

#include <hwloc.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

#define RINGK_RANK_SHIFT 20        /* sender ids: rank << 20 | local kernel id */

/* The two parts of a sender id. */
static inline uint32_t ringk_sender_rank(uint32_t sender)
{
    return sender >> RINGK_RANK_SHIFT;
}

static inline uint32_t ringk_sender_kernel(uint32_t sender)
{
    return sender & ((1u << RINGK_RANK_SHIFT) - 1);
}

#define RINGK_MAX_KERNELS   256
#define RINGK_NAME_MAX      64
#define RINGK_LIST_MAX      32
#define RINGK_MAX_TOPICS    64
#define RINGK_MAX_BARRIERS  64
#define RINGK_MAX_POOL      16                 /* pool_threads at most */
/* pool threads at most, with those started while others wait (each event-driven kernel
 * blocks at most one: ringk_exec_cpu_block_begin) */
#define RINGK_POOL_THREADS  (RINGK_MAX_POOL + RINGK_MAX_KERNELS)
#define RINGK_CELL          256u               /* inbox cell: a 200-byte payload fits one */
#define RINGK_MAX_PAYLOAD   (16u * 1024 * 1024)
#define RINGK_SPIN_POLLS    2000               /* empty polls before a kernel thread sleeps */
#define RINGK_DEADLOCK_MS   100                /* a wait cycle this stable is a deadlock */
#define RINGK_NAP_MS        10L                /* the progress thread's nap while kernel */
                                               /* threads poll the worker */
#define RINGK_REMOTE_POLLS  4                  /* worker polls per idle loop of a kernel thread */
#define RINGK_INLINE_MAX_NS 50000u  /* longest timed handler call in a receive callback */
#define RINGK_DIRECT_MAX    216                /* largest payload taken by ringk_deliver_direct */
#define RINGK_IDLE_WAKE_MS_DEFAULT 100        /* RINGK_IDLE_WAKE_MS when unset */
#define RINGK_IDLE_WAKE_MS_MAX     60000      /* its largest accepted value */
#define RINGK_WAIT_WARN_MS_DEFAULT 10000      /* RINGK_WAIT_WARN_MS when unset */
#define RINGK_WAIT_WARN_MS_MAX     3600000    /* its largest accepted value; 0 turns it off */
#define RINGK_DESTROY_GRACE_MS     1000       /* how long a destroy waits for quiescent states */
#define RINGK_BARRIER_POLL_MS      100        /* a barrier across processes looks for gone */
                                              /* processes this often */
#define RINGK_PLACEMENT_MAX        4096       /* placements 0..4095 (modulo what exists) */
/* every field bit of ringk_kernel_params_t */
#define RINGK_KERNEL_PARAM_FIELDS \
    (RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER | \
     RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE | RINGK_KERNEL_PARAM_FIELD_MAX_IN | \
     RINGK_KERNEL_PARAM_FIELD_MAX_OUT | RINGK_KERNEL_PARAM_FIELD_MODE | \
     RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS | RINGK_KERNEL_PARAM_FIELD_PROCESSING | \
     RINGK_KERNEL_PARAM_FIELD_MAX_PER_ITER | RINGK_KERNEL_PARAM_FIELD_BACKENDS | \
     RINGK_KERNEL_PARAM_FIELD_PLACEMENT | RINGK_KERNEL_PARAM_FIELD_TIMESTAMPS | \
     RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_SUBSCRIBES_TO | \
     RINGK_KERNEL_PARAM_FIELD_TOPICS_PUB | RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB | \
     RINGK_KERNEL_PARAM_FIELD_BARRIERS | RINGK_KERNEL_PARAM_FIELD_START_INACTIVE | \
     RINGK_KERNEL_PARAM_FIELD_PEER_EVENTS | RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY | \
     RINGK_KERNEL_PARAM_FIELD_THREADS | RINGK_KERNEL_PARAM_FIELD_BLOCKS)
#define RINGK_MSG_CELLS(len) ringk_ring_cells_for(sizeof(ringk_msg_t) + (len), RINGK_CELL)

/* The cells of @a to's inbox a message of @a len payload bytes takes. */
#define RINGK_INBOX_CELLS(to, len) \
    ((to)->inbox_ll ? ringk_ring_ll_cells(sizeof(ringk_msg_t) + (len), RINGK_CELL) \
                    : RINGK_MSG_CELLS(len))

typedef char ringk_name_t[RINGK_NAME_MAX];

/* A name list copied from the parameters. */
typedef struct {
    ringk_name_t names[RINGK_LIST_MAX];
    unsigned     count;
} name_list_t;

/* What a route leads to: set when it resolves (ringk_route_resolve), back to unresolved when
 * ctx->kernels_gen moves on (a send then resolves it again). */
typedef enum {
    RINGK_ROUTE_UNRESOLVED = 0,
    RINGK_ROUTE_LOCAL,            /* a kernel of this process: target */
    RINGK_ROUTE_REMOTE            /* a kernel of another process: rank, remote_id, remote_* */
} ringk_route_kind_t;

/* A K2K route of a sender (or of one host send, on the stack): what it leads to and what may be
 * sent on it. */
typedef struct {
    ringk_kernel_t *target;       /* RINGK_ROUTE_LOCAL: the kernel */
    uint32_t        kind;         /* ringk_route_kind_t */
    uint32_t        ok_len;       /* payloads shorter than this may be sent (0: the target does
                                     not accept the sender); holds max_out and max_in */
    const char     *name;         /* the target's name (publishes_to, or the host's argument) */
    int             allowed;      /* the target accepts the sender (its subscribes_to) */
    uint32_t        name_len;     /* strlen of its name in publishes_to */
    uint32_t        index, bit;   /* its index in publishes_to and routes, and 1 << index */
    /* its name and terminating zero as two little-endian words, and the masks of their bytes
     * that count (name_m[0] == 0: compared byte by byte), for route_name_eq() */
    uint64_t        name_w[2], name_m[2];
    uint64_t        head_cache;   /* this sender's copy of the target inbox's head */
    uint64_t        gen;          /* ctx->kernels_gen when it resolved */
    int             rank;         /* remote target: its process (-1: not resolved) */
    uint32_t        remote_id;    /* remote target: its id in that process */
    /* remote target, set by ringk_remote_route_init(): the endpoint, the credits left for the
     * target, whether the process is gone, and the sender field of the wire header */
    void           *remote_ep;
    uint32_t       *remote_credit;
    const int      *remote_dead;
    uint32_t        remote_sender;
    /* the wire header of the route's last message to another process: UCP reads it until the
     * send completes, after ringk_remote_send_try() returned (one thread at a time sends on a
     * route: a kernel's executor, or the host's call that made the route on its stack) */
    uint64_t        remote_wire[3];
    /* the open batch cell in the target's inbox (see batch_send): claimed, not yet published */
    uint64_t        batch_pos;
    struct ringk_batch_hdr *batch_hdr; /* its header (in the cell at batch_pos) */
    uint64_t        batch_seq;    /* its header's seq: the sender's copy, so that appending
                                     never reads the cell line the receiver polls */
    uint32_t        batch_bytes;  /* bytes of entries written after its header */
    int             batch_sleeper; /* the target slept when the cell was claimed */
    uint32_t        batch_lim;    /* payloads shorter than this may be batched (0: none); set
                                     when the route resolves: local, allowed, no timestamps */
} route_t;

/* A batch cell: small messages a kernel sends to one local kernel while it handles its own are
 * written one after another into one claimed inbox cell, published when the cell is full, when
 * the sender's dispatch loop has consumed RINGK_RELEASE_BATCH cells or stops, or before it
 * waits: one cell claim, one publish and a quarter of a cache line per message instead of a
 * cell each. The ring protocol is
 * unchanged; this is libringk's payload of a cell with id RINGK_CELL_BATCH. */
typedef struct ringk_batch_hdr {
    uint32_t sender;
    uint32_t reserved;    /* 0; the receiver walks the entries up to the cell's length */
    uint64_t seq;         /* sequence number of the first entry */
    uint64_t enq_ns;      /* enqueue time of the first entry when sampled, else 0 */
} ringk_batch_hdr_t;

/* An entry: 4 bytes, then the payload padded to 4 (an 8-byte message takes 12 bytes, 18 to a
 * cell). A sender's sequence numbers advance on all its routes, so the delta can exceed 1; the
 * cell is published before it would exceed RINGK_BATCH_MAX_DELTA. */
typedef struct {
    uint16_t seq_delta;   /* sequence number - the header's */
    uint8_t  type;
    uint8_t  length;      /* payload bytes that follow, padded to 4 */
} ringk_batch_entry_t;

#define RINGK_BATCH_MAX_DELTA UINT16_MAX

#define RINGK_CELL_BATCH     0xfe  /* cell id of a batch cell */
#define RINGK_BATCH_MAX_LEN  64u   /* largest payload sent in a batch */
#define RINGK_BATCH_ROOM     (RINGK_CELL - RINGK_CELL_HDR_BYTES - sizeof(ringk_batch_hdr_t))
#define RINGK_BATCH_ENTRY(len) (sizeof(ringk_batch_entry_t) + (((len) + 3u) & ~3u))

#define RINGK_LAT_SAMPLE 64        /* one message in 64 carries an enqueue time */
#define RINGK_RELEASE_BATCH 32     /* a dispatch loop hands cells back to senders 32 at a time */

struct ringk_kernel {
    ringk_ctx_t          *ctx;
    uint32_t              id;
    ringk_name_t          name;
    ringk_handler_t       handler;
    void                 *arg;
    ringk_kernel_mode_t   mode;
    ringk_processing_t    processing;
    unsigned              max_per_iteration;
    unsigned              max_iterations;
    unsigned              max_in, max_out, inbox_size;
    int                   placement;     /* where its executor runs it, -1: anywhere */
    int                   timestamps;
    int                   peer_events;   /* gets ringk_peer_event_t control messages */
    unsigned              dev_threads;   /* a device kernel's threads per block */
    unsigned              dev_blocks;    /* and blocks */
    int                   recv_inline;   /* its handler may run in the receive callback */
    name_list_t           publishes_to, subscribes_to, topics_pub, topics_sub, barriers;
    route_t               routes[RINGK_LIST_MAX];  /* parallel to publishes_to */
    /* inbox: multi-producer ring, consumed by the kernel's executor only; a device kernel's
     * (its host ingress ring) is an LL ring, which its GPU reads a message of in one round
     * trip (core/ringk_ring.h) */
    void                 *inbox_mem;
    ringk_ring_t          inbox;
    int                   inbox_ll;
    /* executor */
    const struct ringk_exec_ops *exec;   /* what runs its dispatch loop (ringk_exec.h) */
    pthread_t             thread;
    int                   has_thread;
    unsigned              core;          /* core index for pinning */
    pthread_mutex_t       mu;
    pthread_cond_t        cv;
    /* Fields written on every message live on lines of their own, grouped by writer, so a
     * sender's updates never invalidate the line the consumer works on (false sharing made
     * every send cost a cache-line transfer). */
    /* read by every sender, written rarely */
    int                   state __attribute__((aligned(64))); /* ringk_kernel_state_t */
    int                  *sleep_word;    /* nonzero: its executor must be woken (W2) */
    int                   sleeping;      /* its thread waits on cv, atomic */
    int                   running;       /* event-driven: a pool thread runs it, atomic */
    /* written by senders, rarely */
    uint64_t              refused_full __attribute__((aligned(64)));
    /* written by the consumer */
    uint64_t              head __attribute__((aligned(64))); /* consumer position */
    uint64_t              msgs_in, handler_errors, batched_in, direct_in;
    uint64_t              latency_hist[32];
    uint32_t              batch_next;    /* offset of the next entry of the batch cell at head */
    /* a message from another process that the kernel's own thread received while it polled
     * the worker with an empty inbox (ringk_deliver_direct): handled as soon as the poll
     * returns, without going through the inbox */
    int                   direct_full;
    uint64_t              inline_in;     /* the others, handled in the receive callback (not
                                            counted in direct_in, which the stats add it to) */
    /* what its handler, run in the receive callback, could not do without waiting: done in
     * order once the callback returned (see ringk_tls_inline) */
    struct ringk_deferred *defer_head, *defer_tail;
    uint64_t              deferred, deferred_failed;
    struct {
        ringk_msg_t msg;
        uint8_t     payload[RINGK_DIRECT_MAX];
    }                     direct;
    /* written by this kernel's executor when it sends */
    uint64_t              seq __attribute__((aligned(64))); /* per-sender sequence */
    uint64_t              msgs_out;
    uint32_t              open_batches;  /* routes with an open batch cell, a bit each */
    route_t              *last_rt;       /* the route of its last send, tried first */
    uint32_t              iter_sends;    /* local sends during this dispatch loop iteration */
    uint64_t              next_sample;   /* the sequence number from which a batch is sampled */
    /* while its executor waits without a timeout for room in another kernel's inbox: that
     * kernel, and which wait it is (see wait_cycle in ringk_wait.c); read by other waiters */
    ringk_kernel_t       *blocked_on;
    uint64_t              block_gen, block_fails;
    ringk_kernel_t       *zombie_next;   /* destroyed, in ctx->zombies */
    struct ringk_dev_host *dev;          /* a kernel of the device executor, else NULL */
};

/* Before a thread waits for anything: publishes the batch cells of the kernel whose dispatch
 * loop runs on it and hands back the inbox cells that loop has finished with. */
void ringk_wait_prepare(void);

/** While a send waits for room: logs a warning naming @a what (the receiver) once the wait,
 *  begun at @a since_ns, has lasted ctx->wait_warn_ms, and again each time as long again has
 *  passed (*next_ns: 0 at the start of the wait). */
void ringk_wait_warn(ringk_ctx_t *ctx, uint64_t since_ns, uint64_t now_ns, uint64_t *next_ns,
                     const char *what);

typedef struct {
    ringk_name_t    name;
    ringk_kernel_t *subs[RINGK_MAX_KERNELS];
    unsigned        nsubs;
} topic_t;

typedef struct {
    ringk_name_t name;
    unsigned     expected, arrived; /* participants in this process, and how many arrived */
    unsigned     procs_arrived;     /* rank 0: processes arrived at this generation */
    uint64_t     generation;
} barrier_t;

typedef struct ringk_remote ringk_remote_t;

/* A thread of the context that may hold pointers to kernels between its quiescent states
 * (ringk_qs.c): a kernel's own thread, a pool thread, the network's progress thread. */
typedef struct {
    uint64_t seen;     /* the last ctx->qs_want it passed a quiescent state for, atomic */
    int      used;     /* a thread holds the slot, atomic */
    int      offline;  /* the thread sleeps and holds no pointer to a kernel, atomic */
} __attribute__((aligned(64))) ringk_qs_slot_t;

/* kernels' threads, pool threads, the progress thread, the device proxy */
#define RINGK_QS_SLOTS (RINGK_MAX_KERNELS + RINGK_POOL_THREADS + 2)

struct ringk_ctx {
    pthread_mutex_t  lock;            /* registry, topics, barriers: not on the send path */
    ringk_remote_t  *remote;          /* the other processes of the job, NULL: one process */
    ringk_job_t      job;
    int              job_from_env;
    ringk_kernel_t  *kernels[RINGK_MAX_KERNELS];
    unsigned         nkernels;        /* slots used, atomic for pool threads */
    ringk_hlc_t      clock;
    uint64_t         host_seq;
    ringk_log_func_t log;             /* NULL: the process's (ringk_log.c) */
    void            *log_arg;
    ringk_log_state_t log_state;      /* lines through log, and those held back */
    topic_t          topics[RINGK_MAX_TOPICS];
    unsigned         ntopics;
    barrier_t        barriers[RINGK_MAX_BARRIERS];
    unsigned         nbarriers;
    pthread_cond_t   barrier_cv;
    /* event-driven pool: npool threads run (pool_want, the pool_threads asked for, and one
     * more for each that waited while only pool_want were free); pool_blocked of them wait in
     * a barrier or for room. npool, pool_blocked and pool[] are under pool_mu once started. */
    pthread_t        pool[RINGK_POOL_THREADS];
    unsigned         npool;
    unsigned         pool_want;
    unsigned         pool_blocked;
    int              pool_full_said;  /* the pool could not grow: said once */
    pthread_mutex_t  pool_mu;
    pthread_cond_t   pool_cv;
    int              pool_sleeping;   /* atomic */
    int              stop;            /* atomic */
    long             idle_wake_ms;    /* an unwoken sleeper looks again after this long */
    long             wait_warn_ms;    /* a send or barrier wait this long says so, 0: never */
    int              recv_inline;     /* RINGK_RECV_INLINE: handlers may run in AM callbacks */
    /* pinning */
    int              pin;
    hwloc_topology_t topo;
    unsigned         next_core;
    /* destroyed kernels (ringk_qs.c): read on the send path, written when one is destroyed */
    uint64_t         qs_want __attribute__((aligned(64))); /* quiescent states asked for */
    uint64_t         kernels_gen;     /* kernels destroyed: a route resolved before re-resolves */
    unsigned         host_users __attribute__((aligned(64))); /* threads outside the executors
                                                               * between a lookup and a send */
    ringk_kernel_t  *zombies;         /* destroyed, not freed until the context goes */
    struct ringk_devs *devs;          /* devices and the proxy (dev/dev.h), or NULL */
    ringk_qs_slot_t  qs[RINGK_QS_SLOTS];
};


/* ---- what the runtime gives the network layer (ringk_net.h calls up only through these,
 * the barrier and topic calls below, and ringk_ctx_directory) ---- */

/** The kernel whose handler runs on this thread inside a UCP receive callback (see
 *  ringk_deliver_direct), or NULL. Nothing may wait there: the worker's lock is held, so no
 *  thread can progress it, and a local kernel this thread waited for may itself wait for the
 *  lock. A wait the handler's call would need ends at once with RINGK_WOULD_WAIT instead, and
 *  the call is deferred: done, in order with the kernel's later calls, once the callback
 *  returned. */
extern __thread ringk_kernel_t *ringk_tls_inline __attribute__((tls_model("initial-exec")));
#define RINGK_WOULD_WAIT (-EINPROGRESS)

/** Takes a message from another process (its checked sender, type, sequence number and
 *  clock, and @a len payload bytes) straight to kernel @a to when the caller is @a to's own
 *  thread polling the worker while idle, its inbox is empty and it is active: 0, or -EAGAIN
 *  (then ringk_deliver_hdr). With to->recv_inline the handler runs before it returns (see
 *  ringk_tls_inline). The fields come one by one: the usual message skips building a header. */
int ringk_deliver_direct(ringk_kernel_t *to, uint32_t sender, uint32_t type, uint64_t seq,
                         uint64_t timestamp, const void *payload, size_t len);
/** Puts a message built elsewhere (a remote sender's header) into @a to's inbox. */
int ringk_deliver_hdr(ringk_ctx_t *ctx, ringk_kernel_t *to, const ringk_msg_t *hdr,
                      const void *payload, int timeout_ms);
/** The local kernel with that local id, or NULL. */
static inline ringk_kernel_t *ringk_kernel_by_id(ringk_ctx_t *ctx, uint32_t id)
{
    unsigned count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);

    return ((id >= 1) && (id <= count)) ?
           __atomic_load_n(&ctx->kernels[id - 1], __ATOMIC_ACQUIRE) : NULL;
}

/* The next sequence number of a message sent as kernel @a from. A kernel sends as itself from
 * its executor, one message at a time (as for msgs_out): a plain load and store, not a locked
 * add, whose fence made every send wait until its store into the receiver's cell line had
 * completed. */
static inline uint64_t ringk_kernel_next_seq(ringk_kernel_t *from)
{
    uint64_t seq = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);

    __atomic_store_n(&from->seq, seq + 1, __ATOMIC_RELAXED);
    return seq;
}

/* The sender id of a message sent as kernel @a from (NULL: the host) of this process. */
static inline uint32_t ringk_sender_of(const ringk_ctx_t *ctx, const ringk_kernel_t *from)
{
    return ((uint32_t)ctx->job.rank << RINGK_RANK_SHIFT) | (from ? from->id : 0);
}

/* The sequence number of a message sent as @a from (NULL: the host, whose sends any thread
 * makes). */
static inline uint64_t ringk_sender_next_seq(ringk_ctx_t *ctx, ringk_kernel_t *from)
{
    return from ? ringk_kernel_next_seq(from)
                : __atomic_fetch_add(&ctx->host_seq, 1, __ATOMIC_RELAXED);
}

/* A message of @a from that took sequence number @a seq was not sent after all. */
static inline void ringk_kernel_unsend(ringk_kernel_t *from, uint64_t seq)
{
    __atomic_store_n(&from->seq, seq, __ATOMIC_RELAXED);
}

/* The stamp of a message sent as @a from: the context's clock when it has timestamps on. */
static inline uint64_t ringk_sender_stamp(ringk_ctx_t *ctx, const ringk_kernel_t *from)
{
    return (from && from->timestamps) ? ringk_hlc_tick(&ctx->clock) : 0;
}

/* @a n messages of @a from have left (counted in its msgs_out). */
static inline void ringk_kernel_sent(ringk_kernel_t *from, uint64_t n)
{
    __atomic_store_n(&from->msgs_out, from->msgs_out + n, __ATOMIC_RELAXED);
}



/* ---- small helpers ---- */

static inline void ringk_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline int ringk_load_i(const int *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void ringk_add_u64(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

/* Whether kernel @a k's inbox holds nothing its consumer has not taken. */
/* Claims @a ncells cells of @a to's inbox if it has room, as ringk_ring_mp_claim_cached()
 * (an LL inbox's messages run on across its end): 1, or 0 full. */
static inline __attribute__((always_inline)) int
ringk_inbox_claim_cells(ringk_kernel_t *to, uint32_t ncells, uint64_t *head_cache,
                        uint64_t *pos_p)
{
    return ringk_ring_mp_claim_in(&to->inbox, ncells, head_cache, NULL, pos_p,
                                  to->inbox_ll ? RINGK_RING_CLAIM_WRAPS : 0);
}

static inline int ringk_inbox_empty(ringk_kernel_t *k)
{
    return __atomic_load_n(&k->inbox.prod->pos, __ATOMIC_ACQUIRE) ==
           __atomic_load_n(&k->head, __ATOMIC_RELAXED);
}

/* The job's connections, published by ringk_ctx_start() with a release store once complete;
 * kernel threads may look before that. */
static inline ringk_remote_t *ringk_remote_of(const ringk_ctx_t *ctx)
{
    return __atomic_load_n(&ctx->remote, __ATOMIC_ACQUIRE);
}

static inline uint64_t ringk_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

/* The wall clock: nanoseconds since the epoch. */
static inline uint64_t ringk_wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

/* @a ts: CLOCK_REALTIME @a ms from now, for pthread_cond_timedwait. */
static inline void ringk_timespec_in_ms(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec  += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static inline int ringk_list_has(const name_list_t *l, const char *name)
{
    unsigned i;

    for (i = 0; i < l->count; i++) {
        if (!strcmp(l->names[i], name)) {
            return 1;
        }
    }
    return 0;
}

/** Whether kernel @a to takes messages from kernel @a from of this process (its subscribes_to
 *  is empty or names it). */
static inline int ringk_kernel_accepts(const ringk_kernel_t *to, const ringk_kernel_t *from)
{
    return (to->subscribes_to.count == 0) || ringk_list_has(&to->subscribes_to, from->name);
}

/* ---- dispatch.c: the consumer side ---- */

/* The kernel whose dispatch loop runs on this thread: its sends may go into batch cells, which
 * the loop publishes (ringk_batch_flush_all). */
extern __thread ringk_kernel_t *ringk_tls_running __attribute__((tls_model("initial-exec")));
/* The kernel whose idle thread is polling the worker (see ringk_deliver_direct). */
extern __thread ringk_kernel_t *ringk_tls_polling __attribute__((tls_model("initial-exec")));
/* The context whose worker this kernel thread polled since it last slept or waited, or NULL
 * (the progress thread naps meanwhile; see ringk_remote_unpoll). */
extern __thread ringk_ctx_t *ringk_tls_polled __attribute__((tls_model("initial-exec")));

/** Handles up to the processing mode's number of messages of @a k's inbox; returns how many.
 *  Only the kernel's executor calls it. */
unsigned ringk_kernel_iteration(ringk_kernel_t *k);
/** Handles the message ringk_deliver_direct() left in the kernel's direct slot. */
void ringk_kernel_direct(ringk_kernel_t *k);

/* ---- send.c: the producer side ---- */

/** Puts one message into @a to's inbox, waiting for room as @a timeout_ms says; @a remote_hdr:
 *  the header of a message from another process, or NULL. */
int ringk_deliver(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_kernel_t *to,
                  ringk_msg_type_t type, uint32_t receiver, const void *payload, size_t length,
                  int timeout_ms, uint64_t *head_cache, const ringk_msg_t *remote_hdr);
/** Publishes every open batch cell of @a from. */
void ringk_batch_flush_all(ringk_kernel_t *from);

/* Before this thread waits for anything: publishes the batch cells of the kernel whose handler
 * runs here, so that it never waits holding claimed cells their reader may need to pass. */
static inline void ringk_flush_running(void)
{
    if ((ringk_tls_running != NULL) && (ringk_tls_running->open_batches != 0)) {
        ringk_batch_flush_all(ringk_tls_running);
    }
}

/* ---- wait.c ---- */

/** The wait of a claim of @a ncells cells in @a to's inbox once it was found full, as
 *  @a timeout_ms (not RINGK_WAIT_NONE) says, from a thread that may wait: 0 with the cells
 *  claimed at *pos_p, or -ETIMEDOUT, -EPIPE, -EDEADLK. */
int ringk_inbox_wait(ringk_kernel_t *to, uint32_t ncells, int timeout_ms, uint64_t *head_cache,
                     uint64_t *pos_p);
/** Sends one message as @a from on @a rt, a route to another process, once a credit for its
 *  kernel comes back, waiting as @a timeout_ms says (progressing the worker), and then for UCP
 *  to send it: 0, -EAGAIN, -ETIMEDOUT, or -EPIPE. From a thread that may wait. */
int ringk_wait_credit(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt,
                      ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms);
/** Waits for UCP to send a message to process @a rank that is on its way (request @a req of
 *  ringk_remote_send_try()): 0, or -EPIPE. UCP completes it or fails it (a lost process fails
 *  it), so the wait has no bound of its own; one longer than wait_warn_ms says so, again each
 *  time as long again has passed. */
int ringk_wait_sent(ringk_ctx_t *ctx, int rank, void *req);

/* ---- defer.c ---- */

typedef enum {
    RINGK_DEFER_SEND, RINGK_DEFER_SEND_ROUTE, RINGK_DEFER_PUBLISH, RINGK_DEFER_TERMINATE,
    RINGK_DEFER_DESTROY
} ringk_defer_kind_t;

/** Queues a call of the handler running in the receive callback (ringk_tls_inline), to be made
 *  once the callback returned: 0, or -ENOMEM. The caller first publishes the handler's open
 *  batch cells (ringk_flush_running), so that none is open while calls wait to be made. */
int ringk_defer_call(ringk_ctx_t *ctx, ringk_defer_kind_t kind, ringk_kernel_t *from,
                     int route, const char *name, ringk_msg_type_t type, const void *payload,
                     size_t length, int timeout_ms);
/** A send from that handler while earlier calls of it wait to be made: queued behind them, or
 *  -EAGAIN for a send that must not wait. */
int ringk_defer_behind(ringk_ctx_t *ctx, ringk_defer_kind_t kind, ringk_kernel_t *from,
                       int route, const char *name, ringk_msg_type_t type, const void *payload,
                       size_t length, int timeout_ms);
/** Makes the calls kernel @a k's handler deferred, in order, on k's thread. */
void ringk_deferred_run(ringk_kernel_t *k);

/* ---- route.c ---- */

/** The kernel of this process named @a name, or NULL; takes ctx->lock. A thread that is not
 *  one of the executors holds the pointer only between ringk_host_enter() and _leave(). */
ringk_kernel_t *ringk_kernel_lookup(ringk_ctx_t *ctx, const char *name);
/** The same, under ctx->lock. */
ringk_kernel_t *ringk_kernel_find(ringk_ctx_t *ctx, const char *name);
/** The number of @a from's route to kernel @a to_name, or -EPERM (logged) when it has none. */
int ringk_route_index(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name);
/** Resolves route @a i of @a from on its first use, and again once ctx->kernels_gen moved on:
 *  its kind, target and limits; 0, or -ENOENT (logged). */
int ringk_route_resolve(ringk_ctx_t *ctx, ringk_kernel_t *from, unsigned i);
/** Fills @a route, on the caller's stack, for one send of the host to the kernel named
 *  @a to_name (kept by the caller while the route is used): 0, or -ENOENT (logged). */
int ringk_route_host(ringk_ctx_t *ctx, const char *to_name, route_t *route);
/** Sets the words ringk_route_name_eq() compares a name with. */
void ringk_route_name_init(route_t *rt, const char *name);

/* ---- qs.c: when a destroyed kernel's memory may be freed ---- */

/* The quiescent-state slot of this thread, NULL for a thread that is not one of the context's
 * executors (ringk_host_enter). */
extern __thread ringk_qs_slot_t *ringk_tls_qs __attribute__((tls_model("initial-exec")));

/* The calling thread's slot if it is an executor of @a ctx (not of another context), else
 * NULL. */
static inline ringk_qs_slot_t *ringk_qs_mine(const ringk_ctx_t *ctx)
{
    ringk_qs_slot_t *slot = ringk_tls_qs;

    return ((slot >= ctx->qs) && (slot < ctx->qs + RINGK_QS_SLOTS)) ? slot : NULL;
}

/** Takes a quiescent-state slot for the calling thread (NULL when none is left). */
ringk_qs_slot_t *ringk_qs_register(ringk_ctx_t *ctx);
/** Gives the calling thread's slot back. */
void ringk_qs_unregister(ringk_qs_slot_t *slot);
/** Waits until every other registered thread passed a quiescent state (or slept) after this
 *  call began, and no thread outside them is between a lookup and its send: 0, or -ETIMEDOUT
 *  after @a timeout_ms. */
int ringk_qs_synchronize(ringk_ctx_t *ctx, long timeout_ms);

/* A quiescent state of the calling thread (it holds no pointer to a kernel it did not look up
 * again since): at the top of each executor loop, a load when no destroy waits. */
static inline void ringk_qs_quiescent(ringk_ctx_t *ctx, ringk_qs_slot_t *slot)
{
    /* Q2: pairs with Q1 in ringk_qs_synchronize(): a request seen here comes after the unlink,
     * so what this thread looks up from now on is the unlinked state */
    uint64_t want = __atomic_load_n(&ctx->qs_want, __ATOMIC_ACQUIRE);

    if ((slot != NULL) && (want != slot->seen)) {
        /* Q3: everything this thread did with the old pointers before; pairs with Q4 */
        __atomic_store_n(&slot->seen, want, __ATOMIC_RELEASE);
    }
}

/* The calling thread sleeps, holding no pointer to a kernel but its own. */
static inline void ringk_qs_offline(ringk_qs_slot_t *slot)
{
    if (slot != NULL) {
        /* Q5: after its last use of a pointer; pairs with Q6 */
        __atomic_store_n(&slot->offline, 1, __ATOMIC_RELEASE);
    }
}

/* ... and wakes: what it reads from now on is seen after any destroy it was not waited for. */
static inline void ringk_qs_online(ringk_qs_slot_t *slot)
{
    if (slot != NULL) {
        /* Q7: before it reads any pointer: either a destroy's Q6 sees it online (and waits for
         * it) or this thread's reads come after that destroy's unlink */
        __atomic_store_n(&slot->offline, 0, __ATOMIC_SEQ_CST);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
}

/* A thread that is not an executor of the context (the host's threads, or another context's
 * executors) is between a lookup of
 * a kernel and the end of its send: a destroy waits for it. Returns whether it counted. */
static inline int ringk_host_enter(ringk_ctx_t *ctx)
{
    if (ringk_qs_mine(ctx) != NULL) {
        return 0;
    }
    __atomic_add_fetch(&ctx->host_users, 1, __ATOMIC_SEQ_CST); /* H1: pairs with H2 */
    return 1;
}

static inline void ringk_host_leave(ringk_ctx_t *ctx, int counted)
{
    if (counted) {
        __atomic_sub_fetch(&ctx->host_users, 1, __ATOMIC_RELEASE);
    }
}

/* ---- kernel.c ---- */

/** Frees a kernel whose threads have ended. */
void ringk_kernel_free(ringk_kernel_t *k);
/** Makes @a k terminating as ringk_kernel_terminate() does, without waiting (the device
 *  executor's proxy, for a kernel whose launch faulted or that a message terminated). */
void ringk_kernel_terminating(ringk_kernel_t *k);

/* A device kernel's device inbox as another process of the node may map and write it
 * (kind RINGK_DEV_EXPORT_NONE: it may not). Sent at start in the kernel's directory entry;
 * whoever receives it trusts none of it (ringk_dev_export_check()). Fixed layout: it travels
 * between processes. */
#define RINGK_DEV_EXPORT_NONE 0u
#define RINGK_DEV_EXPORT_EMU  1u  /* the emulated device's slabs: a memfd, /proc/<pid>/fd/<fd> */
#define RINGK_DEV_EXPORT_CUDA 2u  /* a CUDA device's: its mapped slab a memfd as the emulated
                                     device's, its device memory a cuMem allocation whose
                                     descriptor the exporter hands out (ringk_dev_share.c) */
typedef struct {
    uint32_t kind;
    uint32_t pid;          /* the exporting process, and its descriptor of the slab file */
    int32_t  fd;
    uint32_t receiver;     /* the kernel's id there */
    uint64_t token;        /* the file's header says the same */
    uint64_t node[3];      /* ringk_node_id_t of the exporter */
    uint64_t inbox_off;    /* the inbox ring: offset in the file (EMU), in the device memory
                              (CUDA); the control block: offset in the file */
    uint64_t ctl_off;
    uint32_t log2_ncells, cell_size, max_in, event_driven;
    uint64_t mem_bytes;    /* CUDA: the size of the device memory allocation; else 0 */
    char     busid[16];    /* CUDA: the PCI bus id of its GPU, NUL-terminated; else "" */
} ringk_dev_export_t;

/* What this process tells the others of its job at start: its kernels, and its topics and
 * barriers with their participants here. */
typedef struct {
    struct {
        ringk_name_t       name;
        uint32_t           id, window;
        ringk_dev_export_t dev;
    }        kernels[RINGK_MAX_KERNELS];
    struct {
        ringk_name_t name;
        unsigned     count;
    }        topics[RINGK_MAX_TOPICS], barriers[RINGK_MAX_BARRIERS];
    unsigned nkernels, ntopics, nbarriers;
} ringk_directory_t;

/** In a job whose network layer started: the process @a name's kernel is in (*@a rank_p), and
 *  what its directory entry said of its device inbox (*@a e_p, unchecked but for its kind):
 *  0, or -ENOENT where no other process has such a kernel (ringk_route.c). */
int ringk_job_dev_lookup(ringk_ctx_t *ctx, const char *name, int *rank_p, ringk_dev_export_t *e_p);
/** In a job whose network layer started: whether process @a rank left or was lost. */
int ringk_job_rank_gone(const ringk_ctx_t *ctx, int rank);
/** In a job whose network layer started: whether process @a rank, of this node, was lost (gone
 *  without saying goodbye) and its process has ended too, every thread of it (a process the
 *  job lost may still run: an endpoint that failed). */
int ringk_job_rank_dead(const ringk_ctx_t *ctx, int rank);
/** Fills @a dir with this process's directory; takes ctx->lock itself. */
void ringk_ctx_directory(ringk_ctx_t *ctx, ringk_directory_t *dir);

/* ---- barrier.c ---- */

/** Adds kernel @a k to the barriers it takes part in; under ctx->lock. 0 or -ENOSPC. */
int ringk_barrier_join(ringk_ctx_t *ctx, const ringk_kernel_t *k);
/** Kernel @a k arrives at barrier @a name without waiting (the device proxy, for a device
 *  kernel): 1 the generation is complete; 0 it waits for generation *gen_p to pass
 *  (ringk_barrier_poll); -ENOENT, or the error of telling the root. */
int ringk_barrier_arrive(ringk_kernel_t *k, const char *name, uint64_t *gen_p);
/** Whether generation @a gen of barrier @a name has passed: 0; -EAGAIN not yet; -EPIPE a
 *  process taking part is gone, or (@a expired) -ETIMEDOUT: then @a k has left the barrier. */
int ringk_barrier_poll(ringk_kernel_t *k, const char *name, uint64_t gen, int expired);
/** Wakes the kernels of @a ctx waiting at barriers to look at their state: one being
 *  terminated leaves with -ECANCELED. Takes ctx->lock itself. */
void ringk_barrier_cancel(ringk_ctx_t *ctx);
/** From the network layer: an arrival at (@a release 0; rank 0 only) or the release of
 *  generation @a gen of barrier @a name. Takes ctx->lock itself. */
void ringk_barrier_deliver(ringk_ctx_t *ctx, const char *name, uint64_t gen, int release);

/** Under ctx->lock: the barriers with participants here, and how many (RINGK_MAX_BARRIERS
 *  at most), for the directory exchanged at start; the names stay valid. */
unsigned ringk_barrier_list(ringk_ctx_t *ctx, const char **names, unsigned *counts);

/* ---- topic.c ---- */

/** Adds kernel @a k to the topics it subscribes to, and declares those it publishes to;
 *  under ctx->lock. 0 or -ENOSPC. */
int ringk_topic_join(ringk_ctx_t *ctx, ringk_kernel_t *k);
/** Removes kernel @a k from the topics it subscribes to; under ctx->lock. */
void ringk_topic_leave(ringk_ctx_t *ctx, const ringk_kernel_t *k);
/** The subscribers of @a topic in this process, copied into @a subs (RINGK_MAX_KERNELS
 *  entries), and their number; -1 when no kernel of this process declares the topic. Takes
 *  ctx->lock itself. */
int ringk_topic_subscribers(ringk_ctx_t *ctx, const char *topic, ringk_kernel_t **subs);
/** Under ctx->lock: the topics kernels here declare, and how many subscribe to each
 *  (RINGK_MAX_TOPICS at most), for the directory exchanged at start; the names stay valid. */
unsigned ringk_topic_list(ringk_ctx_t *ctx, const char **names, unsigned *counts);

#endif
