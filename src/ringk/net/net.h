/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer, private to its files: the state of the job's connections and what
 * its files share. The runtime sees ringk_net.h only. */
#ifndef RINGK_NET_NET_H
#define RINGK_NET_NET_H

#include "ringk_net.h"
#include "ringk_wire.h"

#include "core/ringk_node.h"

#include <pthread.h>
#include <ucp/api/ucp.h>

#define RINGK_AM_MSG      17   /* UCP AM id of K2K messages */
#define RINGK_AM_TOPIC    18   /* UCP AM id of topic publishes (one per destination process) */
#define RINGK_AM_BARRIER  19   /* UCP AM id of barrier arrivals (to rank 0) and releases */
#define RINGK_AM_BYE      20   /* UCP AM id of "this process leaves the job" */
#define RINGK_AM_CREDIT   21   /* UCP AM id of credits returned for a kernel's inbox */
#define RINGK_SLOTS       (RINGK_MAX_KERNELS + 1) /* per-rank arrays indexed by kernel id */
#define RINGK_DIR_ENTRIES RINGK_MAX_KERNELS

#define RINGK_LEAVE_TIMEOUT_MS 3000 /* how long a leaving process waits for acknowledgements */
#define RINGK_CTL_ERR_EVERY_MS 1000 /* a live process's failed control messages: one log line
                                       at most this often */
#define RINGK_TOPIC_SLOT       0    /* credit slot of a process's publishes to another process */
#define RINGK_TOPIC_WINDOW     256  /* publishes on their way from one process to another */

/* A publish from another process whose delivery to some local subscribers waits in their
 * backlogs: its credit is returned when the last of them has entered its inbox. */
typedef struct {
    uint32_t src_rank;
    unsigned remaining;   /* backlog entries of this publish, under backlog_mu */
} topic_ref_t;

typedef struct backlog {
    struct backlog *next;
    topic_ref_t    *ref;  /* a publish's shared count; NULL for a K2K message */
    remote_hdr_t    hdr;
    uint8_t         payload[];
} backlog_t;

struct ringk_remote {
    ucp_context_h   context;
    ucp_worker_h    worker;
    ucp_ep_h       *eps;          /* by rank; NULL for ourselves */
    int            *dead;         /* by rank: its endpoint failed, or it left */
    int            *left;         /* by rank: it said goodbye (destroyed its context) */
    uint8_t        *here;         /* by rank: on this node (the node ids said at start) */
    int            *acked;        /* by rank: it acknowledged our goodbye */
    int            *ack_due;      /* by rank: we owe it an acknowledgement of its goodbye */
    uint64_t       *ctl_err_next; /* by rank: when a failed control message may be logged
                                     again (ms, atomic) */
    uint32_t       *ctl_err_quiet; /* by rank: failures not logged since, atomic */
    unsigned        acks_due;     /* how many, atomic: a cheap 'nothing to do' */
    /* credits, indexed by rank * RINGK_SLOTS + kernel id */
    uint32_t       *window;       /* granted to us for a peer's kernel (from its directory) */
    uint32_t       *credits;      /* left for sends to a peer's kernel, atomic */
    uint32_t       *owed;         /* we owe a sender process for one of our kernels, atomic */
    uint8_t        *owed_queued;  /* that index is in owed_queue, atomic */
    uint32_t       *owed_queue;   /* indices with credits to return, under owed_mu */
    unsigned        owed_n;
    unsigned        owed_pending; /* owed_n != 0, atomic: a cheap 'nothing to do' */
    pthread_mutex_t owed_mu;
    dir_entry_t    *dir;          /* size x RINGK_DIR_ENTRIES */
    topic_entry_t  *topics;       /* size x RINGK_MAX_TOPICS */
    topic_entry_t  *barriers;     /* size x RINGK_MAX_BARRIERS: name, local participants */
    pthread_t       progress;
    int             stop;
    int             efd;
    pthread_mutex_t backlog_mu;   /* the backlog lists: whichever thread progresses the worker */
    backlog_t      *backlog_head[RINGK_MAX_KERNELS + 1];
    /* per local kernel id: NULL when it takes messages from every kernel, else which senders
     * (rank * RINGK_SLOTS + kernel id, 1: allowed) its subscribes_to names */
    uint8_t        *allowed[RINGK_MAX_KERNELS + 1];
    backlog_t      *backlog_tail[RINGK_MAX_KERNELS + 1];
    ringk_ctx_t    *ctx;
    int             size;
    uint64_t        undeliverable;
    unsigned        backlogged;    /* messages in backlogs, atomic: a cheap 'nothing to do' */
    unsigned        kernel_polled; /* set by ringk_remote_poll(), cleared by the progress thread */
    /* while kernel threads poll, the progress thread naps on nap_cv (see net_progress_main):
     * ringk_remote_unpoll() and ringk_remote_stop() set nap_kick to wake it, under nap_mu */
    pthread_mutex_t nap_mu;
    pthread_cond_t  nap_cv;
    int             nap_kick;
    /* peer events (ringk_peer_event_t) for kernels with peer_events, per rank */
    uint8_t        *event_state;   /* 0 none, 3 being posted, 1 to deliver, 2 delivered; atomic */
    uint8_t        *event_kind;    /* ringk_peer_event_kind_t */
    unsigned       *event_next;    /* next kernel index to tell, under event_mu */
    unsigned        events_due;    /* ranks in state 1, atomic: a cheap 'nothing to do' */
    pthread_mutex_t event_mu;
};

/* ---- shared between the files of the network layer ---- */

/* net_recv.c */
ucs_status_t net_am_recv(void *arg, const void *header, size_t header_length, void *data,
                         size_t length, const ucp_am_recv_param_t *param);
ucs_status_t net_am_topic_recv(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param);
ucs_status_t net_am_barrier_recv(void *arg, const void *header, size_t header_length,
                                 void *data, size_t length, const ucp_am_recv_param_t *param);
/** The UCP error handler of an endpoint: that process is lost. */
void net_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);
/** Records that process @a rank was lost or left, once; told to kernels by
 *  net_events_deliver(). */
void net_event_post(ringk_remote_t *r, int rank, ringk_peer_event_kind_t kind);
/** Tells the kernels with peer_events of the processes lost or gone. */
void net_events_deliver(ringk_remote_t *r);
/** Moves backlogged messages into inboxes with room; returns how many. */
unsigned net_backlog_drain(ringk_remote_t *r);

/* net_report.c */
/** Says which transports reach each other process (INFO), and warns when processes of this
 *  node (@a nodes: every rank's) are reached without ringk while it is installed. */
void net_report_transports(ringk_remote_t *r, const ringk_node_id_t *nodes);

/* net_credit.c */
ucs_status_t net_am_credit_recv(void *arg, const void *header, size_t header_length,
                                void *data, size_t length, const ucp_am_recv_param_t *param);
/** Returns the credits queued by net_credit_owe(); not from inside an AM callback. */
void net_credits_return(ringk_remote_t *r);
/** Waits for a credit for slot @a id of process @a rank (the publishes of
 *  ringk_remote_publish) as @a timeout_ms says: 0 with the credit taken, or -EAGAIN,
 *  -ETIMEDOUT, -EPIPE. */
int net_credit_wait(ringk_ctx_t *ctx, int rank, uint32_t id, int timeout_ms);

/* net_send.c */
/** Sends a small control message without waiting for it to leave, from any thread: UCS_OK, or
 *  the error (logged; refused or failed credits are owed again). */
ucs_status_t net_am_send_async(ringk_remote_t *r, int rank, unsigned id, const void *hdr,
                               size_t len);
/** Sends a control message and waits until it left: 0 or -EPIPE. */
int net_control_send(ringk_remote_t *r, int rank, unsigned id, const void *hdr, size_t len);

/* net_progress.c */
/** The progress thread (arg: the remote). */
void *net_progress_main(void *arg);
/** Wakes the progress thread from its nap. */
void net_progress_kick(ringk_remote_t *r);

/* net_leave.c */
ucs_status_t net_am_bye_recv(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param);
/** Acknowledges the goodbyes of processes that said it. */
void net_bye_acks_send(ringk_remote_t *r);
/** Leaves the job cleanly (see net_leave.c). */
void net_leave(ringk_remote_t *r);

/* ---- small inline helpers ---- */

/* Queues index @a idx of 'owed' for net_credits_return(), unless it is queued already. */
static inline void net_owed_queue(ringk_remote_t *r, uint32_t idx)
{
    if (!__atomic_exchange_n(&r->owed_queued[idx], 1, __ATOMIC_ACQ_REL)) {
        pthread_mutex_lock(&r->owed_mu);
        r->owed_queue[r->owed_n++] = idx;
        __atomic_store_n(&r->owed_pending, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&r->owed_mu);
    }
}

/* A message from process @a src for our kernel @a id (@a k, NULL if there is none) has entered
 * its inbox (or was reported undeliverable): one credit owed, queued for return once a quarter
 * window is owed. */
static inline void net_credit_owe(ringk_remote_t *r, uint32_t src, uint32_t id,
                              const ringk_kernel_t *k)
{
    const uint32_t idx   = src * RINGK_SLOTS + id;
    const uint32_t batch = (id == RINGK_TOPIC_SLOT) ? RINGK_TOPIC_WINDOW / 4 :
                           (k != NULL) && (k->inbox_size >= 4) ? k->inbox_size / 4 : 1;

    if (__atomic_add_fetch(&r->owed[idx], 1, __ATOMIC_ACQ_REL) >= batch) {
        net_owed_queue(r, idx);
    }
}

/* Takes one credit for a send to kernel @a id of process @a rank: 1, or 0 when none is left. */
static inline int net_credit_take(ringk_remote_t *r, int rank, uint32_t id)
{
    uint32_t *c = &r->credits[(uint32_t)rank * RINGK_SLOTS + id];
    uint32_t cur = __atomic_load_n(c, __ATOMIC_RELAXED);

    do {
        if (cur == 0) {
            return 0;
        }
    } while (!__atomic_compare_exchange_n(c, &cur, cur - 1, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return 1;
}

/* Returns a credit net_credit_take() took for a message that was not sent after all. */
static inline void net_credit_give_back(ringk_remote_t *r, int rank, uint32_t id)
{
    __atomic_add_fetch(&r->credits[(uint32_t)rank * RINGK_SLOTS + id], 1, __ATOMIC_RELEASE);
}

static inline uint64_t net_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
