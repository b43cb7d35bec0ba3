/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk public API: the ring-kernel actor runtime (contexts, ring kernels, sends, topics,
 * barriers). Calls return 0 or a negative errno and write their outputs only on success;
 * parameter structs start with a field_mask. The hybrid logical clock (ringk_hlc.h) and the
 * point-to-point queue (ringk_p2pq.h), memory shared between processes by handle
 * (ringk_ipc.h) and GPUs of one process reaching each other (ringk_peer.h) have headers of
 * their own, included here. */
#ifndef RINGK_API_RINGK_H
#define RINGK_API_RINGK_H

#include <ringk/api/ringk_hlc.h>
#include <ringk/api/ringk_ipc.h>
#include <ringk/api/ringk_p2pq.h>
#include <ringk/api/ringk_peer.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Library version, as numbers. */
#define RINGK_VERSION_MAJOR 0
#define RINGK_VERSION_MINOR 5
#define RINGK_VERSION_PATCH 0

/* ---- build information ------------------------------------------------------------------- */

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

/* ---- messages ------------------------------------------------------------------------------- */

/** Message types. */
typedef enum ringk_msg_type {
    RINGK_MSG_DATA      = 0,
    RINGK_MSG_CONTROL   = 1,
    RINGK_MSG_TERMINATE = 2   /**< the receiver drains what came before, then stops */
} ringk_msg_type_t;

#define RINGK_MSG_BROADCAST   UINT32_MAX   /**< receiver id of a message to every subscriber */
#define RINGK_MSG_MAX_DEFAULT 65536u       /**< default largest payload, bytes */

/** Message header; the payload follows it. */
typedef struct ringk_msg {
    uint32_t sender;     /**< sender: rank << 20 | kernel id (kernel id 0: the host) */
    uint32_t receiver;   /**< receiver kernel id, or RINGK_MSG_BROADCAST */
    uint16_t type;       /**< ringk_msg_type_t */
    uint16_t flags;      /**< reserved, 0 */
    uint32_t length;     /**< payload bytes */
    uint64_t seq;        /**< per-sender sequence number, from 0 */
    uint64_t timestamp;  /**< hybrid logical clock at send (0 when timestamps are off) */
    uint64_t enq_ns;     /**< monotonic enqueue time of sampled messages, else 0: seq % 64 == 0,
                              or in a batch cell its first message once 64 sequence numbers
                              have passed since the sender's last sample */
} ringk_msg_t;

/** The payload that follows @a msg. */
static inline const void *ringk_msg_payload(const ringk_msg_t *msg)
{
    return msg + 1;
}

/** Fills a header for a data, control or terminate message. */
void ringk_msg_init(ringk_msg_t *msg, ringk_msg_type_t type, uint32_t sender, uint32_t receiver,
                    uint32_t length);

/** 1 when two messages have equal headers (enq_ns aside) and payloads, else 0. */
int ringk_msg_equal(const ringk_msg_t *a, const ringk_msg_t *b);

/* ---- context ------------------------------------------------------------------------------- */

typedef struct ringk_ctx    ringk_ctx_t;
typedef struct ringk_kernel ringk_kernel_t;

/** Log levels of the log hook. */
enum { RINGK_LOG_ERROR = 0, RINGK_LOG_WARN = 1, RINGK_LOG_INFO = 2, RINGK_LOG_DEBUG = 3 };

/** The log hook: the library never prints; it calls this. */
typedef void (*ringk_log_func_t)(void *arg, int level, const char *message);

/**
 * Sets the process's log hook (NULL: none, the default). It gets what calls with no context
 * to log through say (a NULL context or kernel, the P2P queue, ringk_hlc_*, ringk_msg_*), and
 * everything of contexts created without RINGK_CTX_PARAM_FIELD_LOG. A hook must not call
 * libringk. A line repeated within 10 s (same level and text) is said once, then its count.
 * @return 0.
 */
int ringk_log_hook_set(ringk_log_func_t log, void *arg);

enum ringk_ctx_param_field {
    RINGK_CTX_PARAM_FIELD_LOG         = 1u << 0,
    RINGK_CTX_PARAM_FIELD_POOL_THREADS = 1u << 1,
    RINGK_CTX_PARAM_FIELD_PIN         = 1u << 2,
    RINGK_CTX_PARAM_FIELD_JOB         = 1u << 3
};

/**
 * A job of several processes: this process's rank, their number, and an allgather the runtime
 * uses at ringk_ctx_start() (for example one calling MPI_Allgather). Without one, the runtime
 * reads RINGK_ROOT=host:port, RINGK_RANK and RINGK_SIZE (rank 0 listens on host:port; all
 * three for several processes, an incomplete set is -EINVAL naming what is missing) and
 * RINGK_JOIN_TIMEOUT_MS (each round of the exchange, 1..3600000, default 60000), and without
 * those it is a job of one process.
 */
typedef struct ringk_job {
    int   rank;
    int   size;
    /** Gathers @a len bytes from every rank into @a out, in rank order. 0 or a negative errno. */
    int (*allgather)(void *arg, const void *in, void *out, size_t len);
    void *arg;
} ringk_job_t;

typedef struct ringk_ctx_params {
    uint64_t         field_mask;
    ringk_log_func_t log;           /**< default: none */
    void            *log_arg;
    unsigned         pool_threads;  /**< threads running event-driven kernels, 1..16, default 1
                                         (one more is started while an event-driven kernel
                                         waits at a barrier or for room and fewer would be
                                         free: ringk_ctx(3)) */
    int              pin;           /**< 1: pin executor threads to cores with hwloc (default) */
    ringk_job_t      job;           /**< the job (default: from the environment, or one process) */
} ringk_ctx_params_t;

/**
 * Creates a context: 0, or a negative errno (-EINVAL for a bad parameter or environment value,
 * named through the log hook). Besides the job variables it reads RINGK_IDLE_WAKE_MS (1..60000,
 * default 100): how long an idle executor thread that no send or state change woke sleeps
 * before it looks at its inboxes again; and RINGK_WAIT_WARN_MS (0..3600000, default 10000, 0:
 * never): after how long a send still waiting for room (a full inbox, or no credits back from
 * another process) logs a warning naming sender and receiver, repeated as long again passes;
 * so does a message to another process that UCP has taken but not sent, naming the process;
 * a kernel waiting at a barrier logs one naming itself, the barrier and how many have arrived.
 * RINGK_RECV_INLINE (0 or 1, default 1): see ringk_handler_t.
 */
int ringk_ctx_create(const ringk_ctx_params_t *params, ringk_ctx_t **ctx_p);
/**
 * Terminates every kernel (draining their inboxes), joins the threads, frees everything. In a
 * job, the process then leaves it: what it sent is flushed out, every other process is told and
 * acknowledges (waiting at most 3 s for one that does not answer), and the endpoints are closed;
 * the others see it leave, not die (ringk_ctx_peers_lost() does not count it).
 */
int ringk_ctx_destroy(ringk_ctx_t *ctx);

/**
 * Joins the job (collective: every process calls it once its kernels exist): connects the
 * processes with UCP (UCX picks ringk within a host, tcp or ib between hosts) and exchanges the
 * kernel directory, so kernels are reached by name wherever they run. A no-op for one process.
 * Logs at INFO the transport that reaches each other process, and warns when processes of this
 * node are reached without ringk while the ringk transport is installed (ringk-run loads it).
 * @return 0, or a negative errno (the log hook says why; a job from the environment names the
 *         address and RINGK_JOIN_TIMEOUT_MS).
 */
int ringk_ctx_start(ringk_ctx_t *ctx);

/** This process's rank and the number of processes of the job (0 and 1 for one process);
 *  -EINVAL for NULL. */
int ringk_ctx_rank(const ringk_ctx_t *ctx);
int ringk_ctx_size(const ringk_ctx_t *ctx);

/**
 * How many other processes of the job this process has lost: their UCP endpoint failed (the
 * process died or became unreachable), and sends to their kernels now fail with -EPIPE. A process
 * that left cleanly (ringk_ctx_destroy) is not counted, though sends to it fail too. A program
 * that waits for work from other processes should stop waiting when this is above 0.
 * @return 0 for a job of one process or when every peer is reachable.
 */
int ringk_ctx_peers_lost(const ringk_ctx_t *ctx);

/* ---- ring kernels --------------------------------------------------------------------------- */

/** The handler a kernel runs for each message; @a msg is valid during the call only. A
 *  negative return is counted as a handler error.
 *
 *  A handler always runs on its kernel's executor, one call at a time. For a persistent kernel
 *  in a job, when its idle thread polls the UCP worker and a message from another process
 *  arrives for it with its inbox empty, the call is made from UCP's receive callback itself,
 *  so that a reply leaves before the worker's progress call returns (statistics: inline_in).
 *  UCP forbids progressing the worker there and its lock is held, so nothing may wait: a send
 *  (ringk_send, ringk_send_route) that would wait for room or credits, a publish, or a
 *  ringk_kernel_terminate is deferred instead: it returns 0 at once and is made, in order with
 *  the kernel's later sends and with the waits it asked for, as soon as the callback returned
 *  (statistics: deferred; one that fails then is counted in deferred_failed and logged). A
 *  send that must not wait (RINGK_WAIT_NONE) is never deferred: it returns -EAGAIN when it
 *  cannot leave at once or a deferred call is ahead of it. ringk_barrier_wait there returns
 *  -EDEADLK. Kernels that take part in barriers or publish to
 *  topics never run this way, nor does any kernel with RINGK_RECV_INLINE=0 in the environment
 *  of ringk_ctx_create. While the handler runs there, no other thread of the process can use
 *  the worker: one call in 64 is timed, and a kernel whose call took more than 50 us there is
 *  handled from its loop from then on (logged at INFO). A handler that blocks some other way
 *  (a lock another thread holds while it waits for the worker) must not run this way: set
 *  RINGK_RECV_INLINE=0. */
typedef int (*ringk_handler_t)(ringk_kernel_t *kernel, const ringk_msg_t *msg, void *arg);

typedef enum ringk_kernel_mode {
    RINGK_MODE_PERSISTENT   = 0,  /**< a thread of its own, spinning then sleeping */
    RINGK_MODE_EVENT_DRIVEN = 1   /**< run by pool threads when messages arrive */
} ringk_kernel_mode_t;

typedef enum ringk_processing {
    RINGK_PROCESSING_CONTINUOUS = 0, /**< one message per iteration: lowest latency */
    RINGK_PROCESSING_BATCH      = 1, /**< up to max_per_iteration (0: all) per iteration */
    RINGK_PROCESSING_ADAPTIVE   = 2  /**< one at a time when the inbox is short, else batch */
} ringk_processing_t;

typedef enum ringk_backend {
    RINGK_BACKEND_CPU  = 1u << 0,
    RINGK_BACKEND_CUDA = 1u << 1   /**< a resident (or relaunched) kernel on a device, running
                                        device_entry: a CUDA GPU when the entry was compiled
                                        by nvcc, the emulated device when it was compiled as
                                        host C (ringk/api/ringk_device.h) */
} ringk_backend_t;

enum ringk_kernel_param_field {
    RINGK_KERNEL_PARAM_FIELD_NAME            = 1u << 0,
    RINGK_KERNEL_PARAM_FIELD_HANDLER         = 1u << 1,
    RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE      = 1u << 2,
    RINGK_KERNEL_PARAM_FIELD_MAX_IN          = 1u << 4,
    RINGK_KERNEL_PARAM_FIELD_MAX_OUT         = 1u << 5,
    RINGK_KERNEL_PARAM_FIELD_MODE            = 1u << 6,
    RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS  = 1u << 7,
    RINGK_KERNEL_PARAM_FIELD_PROCESSING      = 1u << 8,
    RINGK_KERNEL_PARAM_FIELD_MAX_PER_ITER    = 1u << 9,
    RINGK_KERNEL_PARAM_FIELD_BACKENDS        = 1u << 10,
    RINGK_KERNEL_PARAM_FIELD_PLACEMENT       = 1u << 11,
    RINGK_KERNEL_PARAM_FIELD_TIMESTAMPS      = 1u << 12,
    RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO    = 1u << 14,
    RINGK_KERNEL_PARAM_FIELD_SUBSCRIBES_TO   = 1u << 15,
    RINGK_KERNEL_PARAM_FIELD_TOPICS_PUB      = 1u << 16,
    RINGK_KERNEL_PARAM_FIELD_TOPICS_SUB      = 1u << 17,
    RINGK_KERNEL_PARAM_FIELD_BARRIERS        = 1u << 18,
    RINGK_KERNEL_PARAM_FIELD_START_INACTIVE  = 1u << 20,
    RINGK_KERNEL_PARAM_FIELD_PEER_EVENTS     = 1u << 21,
    RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY    = 1u << 22,
    RINGK_KERNEL_PARAM_FIELD_THREADS         = 1u << 23,
    RINGK_KERNEL_PARAM_FIELD_BLOCKS          = 1u << 24
};

struct ringk_device_entry;

/** The attributes of a ring kernel that ringk implements (field_mask says which are given);
 *  defaults follow the ring-kernel model. */
typedef struct ringk_kernel_params {
    uint64_t            field_mask;
    const char         *name;             /**< unique id (required), up to 63 characters */
    ringk_handler_t     handler;          /**< required */
    void               *arg;              /**< passed to the handler (on a device: memory
                                               the device reads, ringk_device(3)) */
    unsigned            inbox_size;       /**< messages, a power of 2, default 256 */
    unsigned            max_in;           /**< largest input payload, default 65536 */
    unsigned            max_out;          /**< largest output payload, default 65536 */
    ringk_kernel_mode_t mode;             /**< default persistent */
    unsigned            max_iterations;   /**< event-driven: iterations before yielding, 1000 */
    ringk_processing_t  processing;       /**< default continuous */
    unsigned            max_per_iteration;/**< fairness limit, 0 = unlimited (default) */
    unsigned            backends;         /**< ringk_backend_t bits, default CPU */
    int                 placement;        /**< where the executor runs it: for a persistent
                                               kernel of the CPU backend, the core its thread
                                               is pinned to (hwloc's logical core index,
                                               modulo the cores) when the context pins; -1,
                                               the default: the next core in turn */
    int                 timestamps;       /**< stamp its messages with the context's hybrid
                                               logical clock (ringk_msg_t.timestamp), and
                                               merge the stamps it receives into it; default
                                               0 (timestamp 0) */
    const char * const *publishes_to;     /**< kernels it may send to (NULL-terminated; none
                                               given: it sends to no kernel) */
    const char * const *subscribes_to;    /**< kernels it receives from (NULL-terminated; empty:
                                               any) */
    const char * const *topics_pub;       /**< topics it publishes to (NULL-terminated) */
    const char * const *topics_sub;       /**< topics it subscribes to (NULL-terminated) */
    const char * const *barriers;         /**< named barriers it takes part in
                                               (NULL-terminated) */
    int                 peer_events;      /**< get a ringk_peer_event_t when another process of
                                               the job is lost or leaves, default 0 */
    const struct ringk_device_entry *device_entry; /**< the CUDA backend's loop and handler,
                                               defined by RINGK_DEVICE_ENTRY() in
                                               ringk/api/ringk_device.h; with the CUDA backend,
                                               placement is the CUDA device index (-1: 0) */
    unsigned            threads;          /**< a device kernel's threads per block, which
                                               all run its handler on each message:
                                               1..1024, default 32 (a warp); the CPU
                                               executor runs the handler on one thread and
                                               ignores it */
    unsigned            blocks;           /**< a device kernel's blocks, 1..65535, default
                                               1, all resident together (-E2BIG when the
                                               device cannot hold them); ignored by the CPU
                                               executor */
} ringk_kernel_params_t;

/** What happened to another process of the job (ringk_peer_event_t.kind). */
typedef enum ringk_peer_event_kind {
    RINGK_PEER_LOST = 1,   /**< its endpoint failed: it died or became unreachable */
    RINGK_PEER_LEFT = 2    /**< it left cleanly (ringk_ctx_destroy) */
} ringk_peer_event_kind_t;

/**
 * Payload of the RINGK_MSG_CONTROL message that every kernel created with peer_events gets,
 * once per process, when another process of the job is lost or leaves (sender: that rank, kernel
 * id 0). Sends to that process's kernels fail with -EPIPE from then on. A full inbox delays the
 * event, never drops it; a kernel already terminated does not get it.
 */
typedef struct ringk_peer_event {
    uint32_t kind;         /**< ringk_peer_event_kind_t */
    int32_t  rank;         /**< the process */
} ringk_peer_event_t;

/** Launches a kernel (active unless RINGK_KERNEL_PARAM_FIELD_START_INACTIVE). Errors name the
 *  bad value and the limit through the log hook.
 *
 *  Backends: CPU runs handler on the CPU executor; CUDA runs device_entry on a device (the
 *  handler is then not needed); CPU | CUDA runs device_entry on its device when there is one,
 *  else handler on the CPU (logged at INFO; a warning when arg was the reason, see -EFAULT).
 *  A CUDA kernel's memory (control block, rings) is taken from slabs allocated when the
 *  context's first device kernel is created, before any device kernel runs
 *  (RINGK_DEVICE_MAPPED_MB, RINGK_DEVICE_MEM_MB: their sizes), so that no allocation
 *  synchronizes with resident kernels later.
 *  @return 0; -EINVAL a bad or missing parameter or an unknown field_mask bit (the CUDA bit,
 *          alone or with CPU, without a valid device_entry); -ENODEV only the CUDA backend asked for and the
 *          entry's device is not there (logged with the reason: "no CUDA device", "no NVIDIA
 *          driver", a CUDA error); -EEXIST a kernel of that name exists; -ENOSPC more kernels,
 *          topics or barriers than a context holds, or more device kernels on a CUDA device
 *          than its hardware queues take (CUDA_DEVICE_MAX_CONNECTIONS - 2, see
 *          ringk_device(3); CPU | CUDA then runs on the CPU); -EFAULT only the CUDA backend
 *          asked for and arg is memory the device cannot read (host memory where the device
 *          has no pageable memory access, see ringk_device(3); CPU | CUDA then runs on the
 *          CPU); -ENOMEM (also: the device slabs are full); -EAGAIN its thread could not
 *          start; -EIO a CUDA call failed (logged). */
int ringk_kernel_create(ringk_ctx_t *ctx, const ringk_kernel_params_t *params,
                        ringk_kernel_t **kernel_p);
/**
 * Terminates the kernel (drains its inbox) and frees it; its name may be taken by a new kernel
 * at once. From then on, sends by name to it fail with -ENOENT (or reach the new kernel of that
 * name), and another kernel's route to it resolves again at its next send. The barriers it
 * took part in still count it. No thread may use @a kernel during or after the call. The
 * memory is freed once every executor thread of the context has come back to its loop or
 * slept, and no other thread is inside a send or publish that looked the kernel up (waiting
 * at most 1 s; past that it is freed with the context). From a handler run in a receive
 * callback (see ringk_handler_t) it is deferred like a terminate.
 * @return 0; -EINVAL for NULL; -EDEADLK from the kernel's own handler (terminate it instead).
 */
int ringk_kernel_destroy(ringk_kernel_t *kernel);

/** Resumes consuming. @return 0 (also when it is active), or -EINVAL (NULL, terminating or
 *  terminated). */
int ringk_kernel_activate(ringk_kernel_t *kernel);
/** Stops consuming; queued messages stay and new ones are still accepted. @return 0 (also when
 *  it is inactive), or -EINVAL (NULL, terminating or terminated). */
int ringk_kernel_deactivate(ringk_kernel_t *kernel);
/** Drains what is queued, then stops; later sends fail with -EPIPE. Returns when it stopped,
 *  but from the kernel's own handler at once (it stops once the handler returned).
 *  @return 0, or -EINVAL for NULL. */
int ringk_kernel_terminate(ringk_kernel_t *kernel);

/** The kernel's id (1.. in creation order; 0 for NULL) and name (NULL for NULL). */
uint32_t ringk_kernel_id(const ringk_kernel_t *kernel);
/** The context the kernel belongs to (NULL for NULL): a handler sends with
 *  ringk_kernel_ctx(kernel). */
ringk_ctx_t *ringk_kernel_ctx(const ringk_kernel_t *kernel);
const char *ringk_kernel_name(const ringk_kernel_t *kernel);

typedef enum ringk_kernel_state {
    RINGK_KERNEL_ACTIVE = 0, RINGK_KERNEL_INACTIVE = 1, RINGK_KERNEL_TERMINATING = 2,
    RINGK_KERNEL_TERMINATED = 3
} ringk_kernel_state_t;

/** Fields of ringk_kernel_stats_t. */
enum ringk_kernel_stats_field {
    RINGK_KERNEL_STATS_FIELD_STATE           = 1u << 0,
    RINGK_KERNEL_STATS_FIELD_MSGS_IN         = 1u << 1,
    RINGK_KERNEL_STATS_FIELD_MSGS_OUT        = 1u << 2,
    RINGK_KERNEL_STATS_FIELD_QUEUE_DEPTH     = 1u << 3,
    RINGK_KERNEL_STATS_FIELD_REFUSED_FULL    = 1u << 4,
    RINGK_KERNEL_STATS_FIELD_DROPS           = 1u << 5,
    RINGK_KERNEL_STATS_FIELD_HANDLER_ERRORS  = 1u << 6,
    RINGK_KERNEL_STATS_FIELD_LATENCY_HIST    = 1u << 7,
    RINGK_KERNEL_STATS_FIELD_BATCHED_IN      = 1u << 8,
    RINGK_KERNEL_STATS_FIELD_DIRECT_IN       = 1u << 9,
    RINGK_KERNEL_STATS_FIELD_INLINE_IN       = 1u << 10,
    RINGK_KERNEL_STATS_FIELD_DEFERRED        = 1u << 11,
    RINGK_KERNEL_STATS_FIELD_DEFERRED_FAILED = 1u << 12,
    RINGK_KERNEL_STATS_FIELD_DEVICE          = 1u << 13, /**< device, launches, bad_cells,
                                                              send_failed, sent_direct,
                                                              parked */
    RINGK_KERNEL_STATS_FIELD_SHAPE           = 1u << 14, /**< threads, blocks, block_share */
    RINGK_KERNEL_STATS_FIELD_DEVICE_TALLY    = 1u << 15, /**< tally */
    RINGK_KERNEL_STATS_FIELD_ALL             = (1u << 16) - 1  /**< every field above */
};

#define RINGK_DEVICE_NONE     (-1)  /**< ringk_kernel_stats_t.device: the CPU executor */
#define RINGK_DEVICE_EMULATED (-2)  /**< ringk_kernel_stats_t.device: the emulated device */

/** What a device kernel's code did in one kind of work (ringk_device_tally_t). */
typedef struct ringk_device_tally_part {
    uint64_t host_reads;   /**< reads of mapped host memory (across the bus on a GPU); loads
                                in flight together count once: one round trip */
    uint64_t host_writes;  /**< writes of mapped host memory */
    uint64_t sys_ops;      /**< system-scope atomics and fences (wherever the memory is) */
    uint64_t dev_syncs;    /**< device-scope releases, ordered read-modify-writes and fences */
} ringk_device_tally_part_t;

/** A device kernel's accounting of its accesses, kept where its code is compiled as C (the
 *  emulated device; docs/gpu.md, "What a message costs"): by kind of work, and the loop's
 *  looks across the bus. On a GPU nothing is counted (launches 0). */
typedef struct ringk_device_tally {
    uint64_t launches;                /**< launches whose threads counted */
    ringk_device_tally_part_t path;   /**< taking, handling and sending messages */
    ringk_device_tally_part_t poll;   /**< the loop's polls of the host (its state and its
                                           host ingress ring, one round trip each) */
    ringk_device_tally_part_t wait;   /**< waits: for room, for a barrier's answer, in a
                                           receive */
    ringk_device_tally_part_t chore;  /**< timed upkeep (counters for the host, route
                                           checks), and each launch's start and end */
    uint64_t polls;                   /**< host polls */
    uint64_t poll_hits;               /**< of them, those that found a host message whole */
    uint64_t poll_rereads;            /**< reads again for a host message found in part (one
                                           longer than a poll reads, or not yet all written) */
} ringk_device_tally_t;

/** Status and statistics of a kernel. */
typedef struct ringk_kernel_stats {
    uint64_t field_mask;       /**< RINGK_KERNEL_STATS_FIELD_* the caller asks for */
    ringk_kernel_state_t state;
    uint64_t msgs_in;          /**< messages handled (those of a batch cell counted after the
                                    handler calls for that part of the cell) */
    uint64_t msgs_out;         /**< messages sent (topic publishes count once per receiver) */
    uint64_t queue_depth;      /**< inbox cells in use now (one per message up to 200 B, or one
                                    per batch cell; a device kernel's host ingress ring: one
                                    per message up to 76 B, two up to 204 B) */
    uint64_t refused_full;     /**< sends to it refused because its inbox was full */
    uint64_t drops;            /**< messages lost: always 0 (nothing is dropped silently) */
    uint64_t handler_errors;   /**< handler calls that returned < 0 */
    uint64_t latency_hist[32]; /**< enqueue-to-handler latency of about one message in 64 (those
                                    with enq_ns != 0), bucket i: [2^i, 2^(i+1)) ns */
    uint64_t batched_in;       /**< of msgs_in, those that came in batch cells (see ringk_send) */
    uint64_t direct_in;        /**< of msgs_in, those from other processes that the kernel's own
                                    thread took from the UCP worker while it polled with an empty
                                    inbox, and handled without going through the inbox */
    uint64_t inline_in;        /**< of direct_in, those whose handler call ran in the UCP
                                    receive callback itself (see RINGK_RECV_INLINE) */
    uint64_t deferred;         /**< calls its handler made there that would have had to wait,
                                    made once the callback returned (see RINGK_RECV_INLINE) */
    uint64_t deferred_failed;  /**< of deferred, those that failed then (each one logged) */
    int      device;           /**< where it runs: a CUDA device index, RINGK_DEVICE_EMULATED,
                                    or RINGK_DEVICE_NONE (the CPU executor) */
    uint64_t launches;         /**< device kernels: launches of its loop (an event-driven one
                                    is launched again when a message finds it returned) */
    uint64_t bad_cells;        /**< device kernels: malformed inbox cells refused */
    uint64_t send_failed;      /**< device kernels: sends and publishes of its outbox that the
                                    host proxy could not make (each one logged) */
    uint64_t sent_direct;      /**< device kernels: of msgs_out, those written straight into
                                    the device inbox of a kernel of the same device, or of
                                    another GPU by peer access (no host) */
    int      parked;           /**< device kernels: 1 while an event-driven one's loop has
                                    returned and the next message relaunches it */
    unsigned threads;          /**< threads of a block that run each handler call: the
                                    kernel's threads parameter on a device, 1 on the CPU
                                    executor (one host thread) */
    unsigned blocks;           /**< blocks that each run the handler call: the kernel's blocks
                                    parameter on a device, 1 on the CPU executor */
    uint32_t block_share;      /**< CUDA device kernels: the millionths of its device's
                                    resident block slots (for its entry and block size) it
                                    holds, counted against the other device kernels of this
                                    process there (see ringk_kernel_create); 0 on the CPU
                                    executor and the emulated device */
    ringk_device_tally_t tally;  /**< device kernels whose code is compiled as C: what it
                                    touched (see ringk_device_tally_t); zero elsewhere */
} ringk_kernel_stats_t;

/** Copies the fields of the kernel's state and statistics that stats_p->field_mask names
 *  (counters since creation; read without stopping the kernel, each counter atomically); the
 *  others are left as they were. A device kernel's counters are those its loop last stored
 *  for the host, between handler calls: they may lag by the handler call that runs (unless
 *  it waits) and by up to RINGK_DEV_CHORE_NS (100 us) of a busy loop, and are exact once the
 *  kernel is idle. @return 0, or -EINVAL (NULL, or an unknown field). */
int ringk_kernel_stats_query(ringk_kernel_t *kernel, ringk_kernel_stats_t *stats_p);

/* ---- sending -------------------------------------------------------------------------------- */

#define RINGK_WAIT_NONE    0      /**< timeout: a full inbox returns -EAGAIN at once */
#define RINGK_WAIT_FOREVER (-1)   /**< timeout: wait until there is room */

/**
 * Sends a message from @a from (NULL: the host) to the kernel named @a to. Sending as a kernel is
 * for its handler (or one thread at a time): its sequence numbers and counters are not locked;
 * any thread may send as the host. A kernel may send
 * only to kernels in its publishes_to list; the receiver, if it lists subscribes_to, must list
 * the sender (-EPERM here for a receiver in this process; for one in another process, that
 * process refuses the message and logs it as undeliverable). FIFO per sender and receiver. To a kernel of another process, this process may
 * have at most that kernel's inbox_size messages on their way (credits, returned as they enter
 * its inbox): beyond that a send waits or fails as for a full local inbox.
 *
 * Batching: in a kernel's handler, the second and later sends of one dispatch-loop iteration to
 * kernels of this process, of at most 64 bytes, with timestamps off at both ends, are appended to
 * one batch cell per receiver (18 eight-byte messages in one inbox cell) instead of taking
 * a cell each. A batch cell is published when it is full, every 32 inbox cells the sender
 * consumes, when the iteration ends, and before the sender waits for anything (room, a credit,
 * a barrier): so it never holds cells while it waits, and a continuous kernel's sends go out
 * after each message it handles. Order, sequence numbers, backpressure (taken when the cell is
 * claimed) and the receiver's statistics (batched_in) are as for unbatched sends.
 * @param timeout_ms RINGK_WAIT_NONE, RINGK_WAIT_FOREVER or milliseconds to wait for room.
 * @return 0; -ENOENT unknown kernel; -EPERM undeclared route; -EMSGSIZE too large (limits of
 *         both ends); -EAGAIN inbox full or no credit (RINGK_WAIT_NONE); -ETIMEDOUT still full
 *         at the timeout; -EPIPE the receiver terminated or its process died or left;
 *         -EDEADLK a wait without a timeout (RINGK_WAIT_FOREVER) that can never end: this
 *         kernel's handler waits for room in an inbox of this process whose kernel waits,
 *         directly or through others, for room in this kernel's inbox (or it sends to its own
 *         full inbox). Such a cycle, unchanged for 100 ms while every kernel on it tried again
 *         and failed, is broken at the kernel with the lowest id on it: its send fails, so that
 *         it returns to its inbox. Before any wait a kernel hands back the inbox cells it has
 *         handled. -EINVAL bad arguments.
 */
int ringk_send(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to, ringk_msg_type_t type,
               const void *payload, size_t length, int timeout_ms);

/**
 * The number of the route from kernel @a from to the kernel named @a to (its place in from's
 * publishes_to), for ringk_send_route(): a kernel that sends to the same kernels over and over
 * looks each name up once. The route resolves (finds its kernel, in this process or another) at
 * its first send, as with ringk_send(), so the kernel need not exist yet.
 * @return the route number (>= 0); -EPERM @a to is not in publishes_to; -EINVAL bad arguments.
 */
int ringk_route_find(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to);

/**
 * ringk_send() to the kernel of @a from's route number @a route (from ringk_route_find()): the
 * same checks, errors, order (sends by name and by route to one kernel are one FIFO), batching
 * and backpressure, without the name compare. @return as ringk_send(); -EINVAL also when
 * @a route is not one of @a from's routes.
 */
int ringk_send_route(ringk_ctx_t *ctx, ringk_kernel_t *from, int route, ringk_msg_type_t type,
                     const void *payload, size_t length, int timeout_ms);

/**
 * Publishes to every subscriber of @a topic (the publisher, if a kernel, must list the topic in
 * topics_pub). Waits up to @a timeout_ms for room in each subscriber of this process, and for
 * a credit of each other process with subscribers (256 publishes may be on their way to one).
 * @a delivered_p (may be NULL) gets how many subscribers it reached, on success and on
 * failure alike.
 * @return the number of subscribers reached (all of them), or a negative errno: -EINVAL bad
 *         arguments; -EPERM the topic is not in the publisher's topics_pub; -ENOENT from the
 *         host (@a from NULL): no kernel declares the topic in its topics_sub or topics_pub, in
 *         this process or (once ringk_ctx_start() joined a job) in any process of the job (a
 *         declared topic without subscribers gives 0, not an error); -EMSGSIZE too
 *         large for a subscriber or the publisher; on -EAGAIN, -ETIMEDOUT or -EPIPE (as for
 *         ringk_send) some subscribers may have received it.
 */
int ringk_publish(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *topic,
                  const void *payload, size_t length, int timeout_ms, unsigned *delivered_p);

/**
 * Waits at the named barrier until every kernel that lists it has arrived (call it from the
 * kernel's handler). @a timeout_ms: RINGK_WAIT_FOREVER, or milliseconds; RINGK_WAIT_NONE
 * returns 0 only to the arrival that completes a barrier of one process, and every other
 * arrival leaves it at once with -ETIMEDOUT. An event-driven kernel waits on its pool thread;
 * the pool grows meanwhile, so the other participants run whatever pool_threads is.
 * @return 0, -EINVAL (NULL, or a timeout below -1), -ENOENT (kernel does not list the
 * barrier), -ECANCELED (the kernel is being terminated or destroyed, its context too: it has
 * left the barrier), -ETIMEDOUT (the
 * kernel has left the barrier), -EPIPE (a process with kernels that take part has left the job
 * or was lost, so the barrier cannot complete: the kernel has left it; seen within 100 ms). A
 * wait longer than RINGK_WAIT_WARN_MS logs a warning, repeated as long again passes (see
 * ringk_ctx_create()).
 */
int ringk_barrier_wait(ringk_kernel_t *kernel, const char *barrier, int timeout_ms);

/** The context's clock (shared by its kernels); NULL for NULL. */
ringk_hlc_t *ringk_ctx_clock(ringk_ctx_t *ctx);

#ifdef __cplusplus
}
#endif

#endif
