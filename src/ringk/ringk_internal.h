/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk internals shared by the runtime's files: the context, kernels, and the remote part. */
#ifndef RINGK_INTERNAL_H
#define RINGK_INTERNAL_H

#include <core/ringk_ring.h>
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
#define RINGK_MAX_POOL      16
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
#define RINGK_BARRIER_POLL_MS      100        /* a barrier across processes looks for gone */
                                              /* processes this often */
#define RINGK_MSG_CELLS(len) ringk_ring_cells_for(sizeof(ringk_msg_t) + (len), RINGK_CELL)

typedef char ringk_name_t[RINGK_NAME_MAX];

/* A name list copied from the parameters. */
typedef struct {
    ringk_name_t names[RINGK_LIST_MAX];
    unsigned     count;
} name_list_t;

/* A resolved K2K route of a sender: target and whether the target accepts this sender. */
typedef struct {
    ringk_kernel_t *target;       /* local target, or NULL */
    int             allowed;
    uint32_t        name_len;     /* strlen of its name in publishes_to */
    uint32_t        index, bit;   /* its index in publishes_to and routes, and 1 << index */
    /* its name and terminating zero as two little-endian words, and the masks of their bytes
     * that count (name_m[0] == 0: compared byte by byte), for route_name_eq() */
    uint64_t        name_w[2], name_m[2];
    uint64_t        head_cache;   /* this sender's copy of the target inbox's head */
    int             rank;         /* remote target: its process (-1: not resolved) */
    uint32_t        remote_id;    /* remote target: its id in that process */
    /* remote target, for ringk_remote_send_last(), set by ringk_remote_route_init(): the
     * endpoint (NULL: not a resolved remote route), the credits left for the target, whether
     * the process is gone, and the sender field of the wire header */
    void           *remote_ep;
    uint32_t       *remote_credit;
    const int      *remote_dead;
    uint32_t        remote_sender;
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
    unsigned              max_in, max_out, inbox_size, outbox_size, capacity;
    int                   timestamps;
    int                   peer_events;   /* gets ringk_peer_event_t control messages */
    int                   recv_inline;   /* its handler may run in the receive callback */
    name_list_t           publishes_to, subscribes_to, topics_pub, topics_sub, barriers;
    route_t               routes[RINGK_LIST_MAX];  /* parallel to publishes_to */
    /* inbox: multi-producer ring, consumed by the kernel's executor only */
    void                 *inbox_mem;
    ringk_ring_t          inbox;
    /* executor */
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
     * kernel, and which wait it is (see wait_cycle in ringk_runtime.c); read by other waiters */
    ringk_kernel_t       *blocked_on;
    uint64_t              block_gen, block_fails;
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

struct ringk_ctx {
    pthread_mutex_t  lock;            /* registry, topics, barriers: not on the send path */
    ringk_remote_t  *remote;          /* the other processes of the job, NULL: one process */
    ringk_job_t      job;
    int              job_from_env;
    ringk_kernel_t  *kernels[RINGK_MAX_KERNELS];
    unsigned         nkernels;        /* slots used, atomic for pool threads */
    ringk_hlc_t      clock;
    uint64_t         host_seq;
    ringk_log_func_t log;
    void            *log_arg;
    topic_t          topics[RINGK_MAX_TOPICS];
    unsigned         ntopics;
    barrier_t        barriers[RINGK_MAX_BARRIERS];
    unsigned         nbarriers;
    pthread_cond_t   barrier_cv;
    /* event-driven pool */
    pthread_t        pool[RINGK_MAX_POOL];
    unsigned         npool;
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
};


/* ---- runtime.c, for remote.c ---- */

/** The kernel whose handler runs on this thread inside a UCP receive callback (see
 *  ringk_deliver_direct), or NULL. Nothing may wait there: the worker's lock is held, so no
 *  thread can progress it, and a local kernel this thread waited for may itself wait for the
 *  lock. A wait the handler's call would need ends at once with RINGK_WOULD_WAIT instead, and
 *  the call is deferred: done, in order with the kernel's later calls, once the callback
 *  returned. */
extern __thread ringk_kernel_t *ringk_tls_inline __attribute__((tls_model("initial-exec")));
#define RINGK_WOULD_WAIT (-EINPROGRESS)

struct wire_msg;
/** Takes a message from another process (its checked wire header @a w and @a len payload bytes)
 *  straight to kernel @a to when the caller is @a to's own thread polling the worker while
 *  idle, its inbox is empty and it is active: 0, or -EAGAIN (then ringk_deliver_hdr). With
 *  to->recv_inline the handler runs before it returns (see ringk_tls_inline). */
int ringk_deliver_direct(ringk_kernel_t *to, const struct wire_msg *w, const void *payload,
                         size_t len);
/** Puts a message built elsewhere (a remote sender's header) into @a to's inbox. */
int ringk_deliver_hdr(ringk_ctx_t *ctx, ringk_kernel_t *to, const ringk_msg_t *hdr,
                      const void *payload, int timeout_ms);
/** The local kernel with that local id, or NULL. */
static inline ringk_kernel_t *ringk_kernel_by_id(ringk_ctx_t *ctx, uint32_t id)
{
    unsigned count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);

    return ((id >= 1) && (id <= count)) ? ctx->kernels[id - 1] : NULL;
}

/* The next sequence number of a message sent as kernel @a from. A kernel sends as itself from
 * its executor, one message at a time (as for msgs_out): a plain load and store, not a locked
 * add, whose fence made every send wait until its store into the receiver's cell line had
 * completed (62% of deliver() in a throughput profile). */
static inline uint64_t ringk_kernel_next_seq(ringk_kernel_t *from)
{
    uint64_t seq = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);

    __atomic_store_n(&from->seq, seq + 1, __ATOMIC_RELAXED);
    return seq;
}
void ringk_log_msg(ringk_ctx_t *ctx, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- small helpers ---- */

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

/* ---- runtime.c, for ctx.c ---- */

/** The loop of a pool thread, which runs the context's event-driven kernels (arg: the ctx). */
void *ringk_pool_main(void *arg);
/** Frees a kernel whose threads have ended. */
void ringk_kernel_free(ringk_kernel_t *k);

/* ---- barrier.c ---- */

/** Adds kernel @a k to the barriers it takes part in; under ctx->lock. 0 or -ENOSPC. */
int ringk_barrier_join(ringk_ctx_t *ctx, const ringk_kernel_t *k);
/** From the network layer: an arrival at (@a release 0; rank 0 only) or the release of
 *  generation @a gen of barrier @a name. Takes ctx->lock itself. */
void ringk_barrier_deliver(ringk_ctx_t *ctx, const char *name, uint64_t gen, int release);

/** Under ctx->lock: the barriers with participants here, and how many (RINGK_MAX_BARRIERS
 *  at most), for the directory exchanged at start; the names stay valid. */
unsigned ringk_barrier_list(ringk_ctx_t *ctx, const char **names, unsigned *counts);

/* ---- topic.c ---- */

/** Adds kernel @a k to the topics it subscribes to; under ctx->lock. 0 or -ENOSPC. */
int ringk_topic_join(ringk_ctx_t *ctx, ringk_kernel_t *k);
/** The subscribers of @a topic in this process, copied into @a subs (RINGK_MAX_KERNELS
 *  entries); takes ctx->lock itself. */
unsigned ringk_topic_subscribers(ringk_ctx_t *ctx, const char *topic, ringk_kernel_t **subs);
/** Under ctx->lock: the topics with subscribers here, and how many (RINGK_MAX_TOPICS at most),
 *  for the directory exchanged at start; the names stay valid. */
unsigned ringk_topic_list(ringk_ctx_t *ctx, const char **names, unsigned *counts);

/* ---- remote.c ---- */

/** Connects to the job's other processes (collective): UCP worker, endpoints, directory. */
int ringk_remote_start(ringk_ctx_t *ctx);
void ringk_remote_stop(ringk_ctx_t *ctx);
/** Progresses the job's network from an idle kernel thread; returns the events handled. */
unsigned ringk_remote_poll(ringk_ctx_t *ctx);
/** A kernel thread that polled stops polling (it sleeps or ends): the progress thread takes
 *  over at once rather than after its nap. */
void ringk_remote_unpoll(ringk_ctx_t *ctx);
/* How many peers' endpoints have failed. */
int ringk_remote_lost(const ringk_ctx_t *ctx);
/** Publishes to the topic's subscribers in other processes: one AM per such process, each taking
 *  one of RINGK_TOPIC_WINDOW credits for that process (waiting as @a timeout_ms says).
 *  *reached_p: subscribers reached. @return 0, -EAGAIN / -ETIMEDOUT (a process's publishes are
 *  not consumed), or -EPIPE (some process unreachable). */
int ringk_remote_publish(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *topic,
                         const void *payload, size_t length, int timeout_ms, unsigned *reached_p);
/** How many processes of the job have participants in barrier @a name (from the directory
 *  exchanged at start). */
unsigned ringk_remote_barrier_processes(ringk_ctx_t *ctx, const char *name);
/** A process that takes part in barrier @a name and is gone (left the job or lost): its rank,
 *  or -1 while all are there. */
int ringk_remote_barrier_gone(ringk_ctx_t *ctx, const char *name);
/** Sends an arrival of this process at generation @a gen of barrier @a name to process
 *  @a rank (@a release 0, waiting until it is sent), called without ctx->lock. 0 or -EPIPE. */
int ringk_remote_barrier_send(ringk_ctx_t *ctx, int rank, const char *name, uint64_t gen,
                              int release);
/** Sends the release of generation @a gen to every other process that takes part, without
 *  waiting (it may run in a receive callback); called without ctx->lock. */
void ringk_remote_barrier_release(ringk_ctx_t *ctx, const char *name, uint64_t gen);
/** Finds a kernel of another process by name: rank and its local id. */
int ringk_remote_lookup(ringk_ctx_t *ctx, const char *name, int *rank_p, uint32_t *id_p);
/** Sends one message to kernel @a id of process @a rank as one active message, once it has a
 * credit for that kernel (waiting as @a timeout_ms says: -EAGAIN, -ETIMEDOUT). */
int ringk_remote_send(ringk_ctx_t *ctx, ringk_kernel_t *from, int rank, uint32_t id,
                      ringk_msg_type_t type, const void *payload, size_t length,
                      int timeout_ms);
/** Fills the remote fields of @a rt, a route of @a from resolved to kernel rt->remote_id of
 *  process rt->rank, for ringk_remote_send_last(). */
void ringk_remote_route_init(ringk_ctx_t *ctx, const ringk_kernel_t *from, route_t *rt);
/** The fast path of ringk_send() and ringk_send_route() from kernel @a from's own handler on
 *  its route from->last_rt, resolved to a kernel of another process: takes a credit and sends
 *  the message as one eager active message that leaves at once. When it cannot (deferred calls
 *  queued, bad type or length, no credit left or another thread taking one, the process gone,
 *  timestamps on, or UCP did not send it at once, for lack of resources or an error) it changes
 *  nothing and returns ringk_send_last_full(). */
int ringk_remote_send_last(ringk_kernel_t *from, ringk_msg_type_t type, const void *payload,
                           size_t length, int timeout_ms);
/** ringk_send() on from->last_rt by the full path (send_last_route() in ringk_runtime.c). */
int ringk_send_last_full(ringk_kernel_t *from, ringk_msg_type_t type, const void *payload,
                         size_t length, int timeout_ms);

#endif
