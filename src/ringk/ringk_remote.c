/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk across processes: one UCP worker per process, an endpoint to every other process,
 * the kernel directory exchanged at start, and a K2K message to another process carried as one
 * UCP active message. A receiving process that finds the inbox full keeps the message in an
 * ordered backlog and retries from its progress thread: nothing is dropped. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_internal.h"
#include "ringk_wire.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RINGK_AM_MSG      17   /* UCP AM id of K2K messages */
#define RINGK_AM_TOPIC    18   /* UCP AM id of topic publishes (one per destination process) */
#define RINGK_AM_BARRIER  19   /* UCP AM id of barrier arrivals (to rank 0) and releases */
#define RINGK_AM_BYE      20   /* UCP AM id of "this process leaves the job" */
#define RINGK_AM_CREDIT   21   /* UCP AM id of credits returned for a kernel's inbox */
#define RINGK_SLOTS       (RINGK_MAX_KERNELS + 1) /* per-rank arrays indexed by kernel id */
#define RINGK_DIR_ENTRIES RINGK_MAX_KERNELS

#define RINGK_LEAVE_TIMEOUT_MS 3000 /* how long a leaving process waits for acknowledgements */
#define RINGK_TOPIC_SLOT       0    /* credit slot of a process's publishes to another process */
#define RINGK_TOPIC_WINDOW     256  /* publishes on their way from one process to another */



/* A message that found its inbox full, kept in order until there is room. */
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
    int            *acked;        /* by rank: it acknowledged our goodbye */
    int            *ack_due;      /* by rank: we owe it an acknowledgement of its goodbye */
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
    /* while kernel threads poll, the progress thread naps on nap_cv (see progress_main):
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

/* ---- peer events ----------------------------------------------------------------------------- */

/* Records that process @a rank was lost or left; told to kernels by events_deliver(). Once per
 * process: a loss after a clean leave is not reported again. */
static void event_post(ringk_remote_t *r, int rank, ringk_peer_event_kind_t kind)
{
    uint8_t none = 0;

    /* 0 -> 3 (being posted) makes the first report the only one; 1 publishes the kind */
    if (__atomic_compare_exchange_n(&r->event_state[rank], &none, 3, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        r->event_kind[rank] = (uint8_t)kind;
        __atomic_store_n(&r->event_state[rank], 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&r->events_due, 1, __ATOMIC_RELEASE);
    }
}

/* Puts each due event into the inboxes of the kernels that asked for them, without waiting:
 * a full inbox, or one with a backlog (messages that came before the event), is tried again on
 * the next call. Called by whichever thread progresses. */
static void events_deliver(ringk_remote_t *r)
{
    ringk_peer_event_t ev;
    ringk_kernel_t *k;
    ringk_msg_t hdr;
    int rank, ret;

    if ((__atomic_load_n(&r->events_due, __ATOMIC_ACQUIRE) == 0) ||
        (pthread_mutex_trylock(&r->event_mu) != 0)) {
        return;
    }
    for (rank = 0; rank < r->size; rank++) {
        if (__atomic_load_n(&r->event_state[rank], __ATOMIC_ACQUIRE) != 1) {
            continue;
        }
        ev.kind = r->event_kind[rank];
        ev.rank = rank;
        ret     = 0;
        for (; r->event_next[rank] < RINGK_MAX_KERNELS; r->event_next[rank]++) {
            k = ringk_kernel_by_id(r->ctx, r->event_next[rank] + 1);
            if ((k == NULL) || !k->peer_events) {
                continue;
            }
            if (__atomic_load_n(&r->backlog_head[k->id], __ATOMIC_ACQUIRE) != NULL) {
                ret = -EAGAIN; /* after the backlogged messages, which may be from that peer */
                break;
            }
            memset(&hdr, 0, sizeof(hdr));
            hdr.sender   = (uint32_t)rank << RINGK_RANK_SHIFT;
            hdr.receiver = k->id;
            hdr.type     = RINGK_MSG_CONTROL;
            hdr.length   = sizeof(ev);
            ret = ringk_deliver_hdr(r->ctx, k, &hdr, &ev, RINGK_WAIT_NONE);
            if (ret == -EAGAIN) {
                break; /* its inbox is full: the next call goes on from this kernel */
            }
        }
        if (ret != -EAGAIN) {
            __atomic_store_n(&r->event_state[rank], 2, __ATOMIC_RELEASE);
            __atomic_sub_fetch(&r->events_due, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&r->event_mu);
}

/* ---- credits ------------------------------------------------------------------------------- */

static void am_free_done(void *request, ucs_status_t status, void *user_data)
{
    free(user_data);
    ucp_request_free(request);
}

/* Sends a small control message without waiting for it to leave, from any thread including the
 * progress thread (which must not spin on its own worker). UCP reads the header until the send
 * completes, so it travels in a heap copy freed on completion. */
static void am_send_async(ringk_remote_t *r, int rank, unsigned id, const void *hdr, size_t len)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags        = UCP_AM_SEND_FLAG_EAGER,
        .cb.send      = am_free_done
    };
    ucs_status_ptr_t req;
    void *copy = malloc(len);

    if (copy == NULL) {
        ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "no memory for a control message to process %d",
                      rank);
        return;
    }
    memcpy(copy, hdr, len);
    param.user_data = copy;
    req = ucp_am_send_nbx(r->eps[rank], id, copy, len, NULL, 0, &param);
    if (!UCS_PTR_IS_PTR(req)) {
        free(copy);
        if (UCS_PTR_IS_ERR(req)) {
            ringk_log_msg(r->ctx, RINGK_LOG_DEBUG, "control message %u to process %d: %s", id,
                          rank, ucs_status_string(UCS_PTR_STATUS(req)));
        }
    }
}

/* A message from process @a src for our kernel @a id (@a k, NULL if there is none) has entered
 * its inbox (or was reported undeliverable): one credit owed, queued for return once a quarter
 * window is owed. */
static inline void credit_owe(ringk_remote_t *r, uint32_t src, uint32_t id,
                              const ringk_kernel_t *k)
{
    const uint32_t idx   = src * RINGK_SLOTS + id;
    const uint32_t batch = (id == RINGK_TOPIC_SLOT) ? RINGK_TOPIC_WINDOW / 4 :
                           (k != NULL) && (k->inbox_size >= 4) ? k->inbox_size / 4 : 1;

    if ((__atomic_add_fetch(&r->owed[idx], 1, __ATOMIC_ACQ_REL) >= batch) &&
        !__atomic_exchange_n(&r->owed_queued[idx], 1, __ATOMIC_ACQ_REL)) {
        pthread_mutex_lock(&r->owed_mu);
        r->owed_queue[r->owed_n++] = idx;
        __atomic_store_n(&r->owed_pending, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&r->owed_mu);
    }
}

/* Returns the credits queued by credit_owe(), one active message per (process, kernel); not
 * from inside an AM callback. */
static void credits_return(ringk_remote_t *r)
{
    credit_msg_t m = {.magic = RINGK_CREDIT_MAGIC, .rank = (uint32_t)r->ctx->job.rank};
    uint32_t idx, rank;

    while (__atomic_load_n(&r->owed_pending, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&r->owed_mu);
        if (r->owed_n == 0) {
            __atomic_store_n(&r->owed_pending, 0, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&r->owed_mu);
            break;
        }
        idx = r->owed_queue[--r->owed_n];
        pthread_mutex_unlock(&r->owed_mu);
        __atomic_store_n(&r->owed_queued[idx], 0, __ATOMIC_RELEASE);
        m.count = __atomic_exchange_n(&r->owed[idx], 0, __ATOMIC_ACQ_REL);
        rank    = idx / RINGK_SLOTS;
        m.id    = idx % RINGK_SLOTS;
        if ((m.count == 0) || __atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
            continue;
        }
        am_send_async(r, (int)rank, RINGK_AM_CREDIT, &m, sizeof(m));
    }
}

/* Credits returned by another process: more room for sends to its kernel, never more than the
 * window it granted. */
static ucs_status_t am_credit_recv(void *arg, const void *header, size_t header_length,
                                   void *data, size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    uint32_t idx, cur, next;
    credit_msg_t m;

    if (ringk_wire_credit_parse(header, header_length, r->size, r->ctx->job.rank, &m) != 0) {
        memset(&m, 0, sizeof(m));
        memcpy(&m, header, (header_length < sizeof(m)) ? header_length : sizeof(m));
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "dropped malformed credits (process %u, kernel "
                      "%u)", m.rank, m.id);
        return UCS_OK;
    }
    idx = m.rank * RINGK_SLOTS + m.id;
    cur = __atomic_load_n(&r->credits[idx], __ATOMIC_RELAXED);
    do {
        next = (m.count > r->window[idx] - cur) ? r->window[idx] : cur + m.count;
    } while (!__atomic_compare_exchange_n(&r->credits[idx], &cur, next, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return UCS_OK;
}

/* Takes one credit for a send to kernel @a id of process @a rank: 1, or 0 when none is left. */
static int credit_take(ringk_remote_t *r, int rank, uint32_t id)
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

/* Returns a credit credit_take() took for a message that was not sent after all. */
static void credit_give_back(ringk_remote_t *r, int rank, uint32_t id)
{
    __atomic_add_fetch(&r->credits[(uint32_t)rank * RINGK_SLOTS + id], 1, __ATOMIC_RELEASE);
}

/* ---- receiving ----------------------------------------------------------------------------- */

static void backlog_push(ringk_remote_t *r, uint32_t dst, const remote_hdr_t *hdr,
                         const void *payload, topic_ref_t *ref)
{
    backlog_t *b = malloc(sizeof(*b) + hdr->msg.length);

    if (b == NULL) {
        abort(); /* cannot keep the promise of no silent drop without memory */
    }
    b->next = NULL;
    b->ref  = ref;
    b->hdr  = *hdr;
    memcpy(b->payload, payload, hdr->msg.length);
    if (r->backlog_tail[dst] != NULL) {
        r->backlog_tail[dst]->next = b;
    } else {
        __atomic_store_n(&r->backlog_head[dst], b, __ATOMIC_RELAXED);
    }
    r->backlog_tail[dst] = b;
    __atomic_fetch_add(&r->backlogged, 1, __ATOMIC_RELAXED);
}

/* Moves backlogged messages into their inboxes while there is room; returns how many. */
static unsigned backlog_drain(ringk_remote_t *r)
{
    ringk_ctx_t *ctx = r->ctx;
    unsigned id, n = 0;
    ringk_kernel_t *k;
    backlog_t *b;
    int ret;

    if (__atomic_load_n(&r->backlogged, __ATOMIC_RELAXED) == 0) {
        return 0;
    }
    pthread_mutex_lock(&r->backlog_mu);
    for (id = 1; id <= RINGK_MAX_KERNELS; id++) {
        while ((b = __atomic_load_n(&r->backlog_head[id], __ATOMIC_RELAXED)) != NULL) {
            k   = ringk_kernel_by_id(ctx, id);
            ret = (k == NULL) ? -ENOENT :
                  ringk_deliver_hdr(ctx, k, &b->hdr.msg, b->payload, RINGK_WAIT_NONE);
            if (ret == -EAGAIN) {
                break;
            }
            if (ret != 0) {
                __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
                ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable message from sender 0x%x to "
                              "local kernel %u: %s", b->hdr.msg.sender, id, strerror(-ret));
            }
            if (b->ref != NULL) { /* a publish: its credit, once all its subscribers have it */
                if (--b->ref->remaining == 0) {
                    credit_owe(r, b->ref->src_rank, RINGK_TOPIC_SLOT, NULL);
                    free(b->ref);
                }
            } else if (b->hdr.src_rank < (uint32_t)r->size) { /* a K2K message's credit */
                credit_owe(r, b->hdr.src_rank, id, k);
            }
            /* release: am_recv() that finds the backlog empty without the lock delivers
             * after this entry */
            __atomic_store_n(&r->backlog_head[id], b->next, __ATOMIC_RELEASE);
            if (b->next == NULL) {
                r->backlog_tail[id] = NULL;
            }
            free(b);
            __atomic_fetch_sub(&r->backlogged, 1, __ATOMIC_RELAXED);
            n++;
        }
    }
    pthread_mutex_unlock(&r->backlog_mu);
    return n;
}

static ucs_status_t am_recv(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    ringk_ctx_t *ctx  = r->ctx;
    remote_hdr_t hdr;
    ringk_kernel_t *k;
    wire_msg_t w;
    int ret;

    /* from a peer: checked before use */
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        (ringk_wire_msg_check(header, header_length, length, r->size, ctx->job.rank,
                              &w) != 0)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "dropping a malformed remote message (header %zu "
                      "bytes, expected %zu or %zu; data %zu bytes)", header_length,
                      (size_t)RINGK_WIRE_MSG_SHORT, sizeof(wire_msg_t), length);
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        return UCS_OK;
    }
    k = ringk_kernel_by_id(ctx, w.dst);
    if ((k != NULL) && (r->allowed[w.dst] != NULL) &&
        !r->allowed[w.dst][ringk_sender_rank(w.sender) * RINGK_SLOTS +
                           ringk_sender_kernel(w.sender)]) {
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        credit_owe(r, ringk_sender_rank(w.sender), w.dst, k);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: kernel '%s' does not subscribe to "
                      "kernel %u of process %u", k->name, ringk_sender_kernel(w.sender),
                      ringk_sender_rank(w.sender));
        return UCS_OK;
    }
    /* FIFO: once a kernel has a backlog, later messages queue behind it. Only AM callbacks
     * add to a backlog and the worker's lock serializes them, so a backlog found empty stays
     * empty until this callback returns: then the message goes straight in without the lock
     * (backlog_drain() empties a backlog under the lock, and publishes the empty head only
     * after its last message is in the inbox). The usual case first: the kernel's own thread
     * polls with nothing queued, and the message goes to it from the wire header. */
    if ((k != NULL) && (__atomic_load_n(&r->backlog_head[w.dst], __ATOMIC_ACQUIRE) == NULL) &&
        (ringk_deliver_direct(k, &w, data, length) == 0)) {
        credit_owe(r, ringk_sender_rank(w.sender), w.dst, k);
        return UCS_OK;
    }
    ringk_wire_msg_unpack(&w, length, &hdr);
    if (k == NULL) {
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        credit_owe(r, hdr.src_rank, hdr.dst, NULL);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: no local kernel %u (from 0x%x)",
                      hdr.dst, hdr.msg.sender);
        return UCS_OK;
    }
    if (__atomic_load_n(&r->backlog_head[hdr.dst], __ATOMIC_ACQUIRE) == NULL) {
        ret = ringk_deliver_hdr(ctx, k, &hdr.msg, data, RINGK_WAIT_NONE);
        if (ret == -EAGAIN) {
            pthread_mutex_lock(&r->backlog_mu);
            backlog_push(r, hdr.dst, &hdr, data, NULL);
            pthread_mutex_unlock(&r->backlog_mu);
        }
    } else {
        pthread_mutex_lock(&r->backlog_mu);
        ret = (__atomic_load_n(&r->backlog_head[hdr.dst], __ATOMIC_RELAXED) != NULL) ? -EAGAIN :
              ringk_deliver_hdr(ctx, k, &hdr.msg, data, RINGK_WAIT_NONE);
        if (ret == -EAGAIN) {
            backlog_push(r, hdr.dst, &hdr, data, NULL);
        }
        pthread_mutex_unlock(&r->backlog_mu);
    }
    if (ret != -EAGAIN) {
        credit_owe(r, hdr.src_rank, hdr.dst, k); /* in the inbox, or reported below */
    }
    if ((ret != 0) && (ret != -EAGAIN)) {
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable message from 0x%x to '%s': %s",
                      hdr.msg.sender, k->name, strerror(-ret));
    }
    return UCS_OK;
}

/* A publish from another process: fan out to this process's subscribers of the topic. */
static ucs_status_t am_topic_recv(void *arg, const void *header, size_t header_length,
                                  void *data, size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    ringk_ctx_t *ctx  = r->ctx;
    ringk_kernel_t *subs[RINGK_MAX_KERNELS];
    topic_ref_t *ref = NULL;
    unsigned nsubs, i;
    topic_hdr_t hdr;
    int ret;

    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        (ringk_wire_topic_parse(header, header_length, length, r->size, ctx->job.rank,
                                &hdr) != 0)) {
        __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "dropping a malformed publish (header %zu bytes, "
                      "data %zu)", header_length, length);
        return UCS_OK;
    }
    nsubs = ringk_topic_subscribers(ctx, hdr.topic, subs);
    pthread_mutex_lock(&r->backlog_mu);
    for (i = 0; i < nsubs; i++) {
        /* the publish's one credit is shared by its backlog entries (ref), not per entry */
        remote_hdr_t one = {.msg = hdr.msg, .dst = subs[i]->id, .src_rank = UINT32_MAX};

        ret = (__atomic_load_n(&r->backlog_head[subs[i]->id], __ATOMIC_RELAXED) != NULL) ? -EAGAIN :
              ringk_deliver_hdr(ctx, subs[i], &hdr.msg, data, RINGK_WAIT_NONE);
        if (ret == -EAGAIN) {
            if (ref == NULL) {
                ref = malloc(sizeof(*ref));
                if (ref == NULL) {
                    abort(); /* as backlog_push: no silent drop */
                }
                ref->src_rank  = hdr.src_rank;
                ref->remaining = 0;
            }
            ref->remaining++;
            backlog_push(r, subs[i]->id, &one, data, ref);
        } else if (ret != 0) {
            __atomic_add_fetch(&r->undeliverable, 1, __ATOMIC_RELAXED);
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable publish on '%s' from 0x%x to '%s':"
                          " %s", hdr.topic, hdr.msg.sender, subs[i]->name, strerror(-ret));
        }
    }
    pthread_mutex_unlock(&r->backlog_mu);
    if (ref == NULL) { /* every subscriber has it (or it was reported): the credit returns */
        credit_owe(r, hdr.src_rank, RINGK_TOPIC_SLOT, NULL);
    }
    return UCS_OK;
}

/* ---- leaving ------------------------------------------------------------------------------- */

/* Sends a goodbye or its acknowledgement without waiting: the progress thread sends these and
 * must not spin on its own worker. */
static void bye_send(ringk_remote_t *r, int rank, uint32_t ack)
{
    bye_msg_t m = {.rank = (uint32_t)r->ctx->job.rank, .magic = RINGK_BYE_MAGIC, .ack = ack};

    am_send_async(r, rank, RINGK_AM_BYE, &m, sizeof(m));
}

/* Acknowledges the goodbyes received since the last call. */
static void bye_acks_send(ringk_remote_t *r)
{
    int i;

    if (__atomic_load_n(&r->acks_due, __ATOMIC_ACQUIRE) == 0) {
        return;
    }
    for (i = 0; i < r->size; i++) {
        if (__atomic_exchange_n(&r->ack_due[i], 0, __ATOMIC_ACQ_REL)) {
            __atomic_sub_fetch(&r->acks_due, 1, __ATOMIC_RELEASE);
            bye_send(r, i, 1);
        }
    }
}

/* A peer leaves: it sent everything it will send (it flushed before saying goodbye), so its
 * endpoint closing later is not a loss; sends to it fail from now on. */
static ucs_status_t am_bye_recv(void *arg, const void *header, size_t header_length, void *data,
                                size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    bye_msg_t m;

    if (ringk_wire_bye_parse(header, header_length, r->size, r->ctx->job.rank, &m) != 0) {
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "dropped a malformed goodbye (%zu bytes)",
                      header_length);
        return UCS_OK;
    }
    if (m.ack) {
        __atomic_store_n(&r->acked[m.rank], 1, __ATOMIC_RELEASE);
        return UCS_OK;
    }
    /* answered outside this callback, by whichever thread progresses next (bye_acks_send) */
    if (!__atomic_exchange_n(&r->ack_due[m.rank], 1, __ATOMIC_ACQ_REL)) {
        __atomic_add_fetch(&r->acks_due, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&r->left[m.rank], 1, __ATOMIC_RELEASE);
    __atomic_store_n(&r->dead[m.rank], 1, __ATOMIC_RELEASE);
    event_post(r, m.rank, RINGK_PEER_LEFT);
    ringk_log_msg(r->ctx, RINGK_LOG_INFO, "process %u left the job", m.rank);
    return UCS_OK;
}

/* What a thread that progressed the worker does next: backlogs, acknowledgements, credits and
 * peer events, each behind a load of its 'nothing to do' word (no call when there is none).
 * Returns how many backlogged messages went into their inboxes. */
static inline unsigned remote_chores(ringk_remote_t *r)
{
    unsigned n = 0;

    if (__atomic_load_n(&r->backlogged, __ATOMIC_RELAXED) != 0) {
        n = backlog_drain(r);
    }
    if (__atomic_load_n(&r->acks_due, __ATOMIC_RELAXED) != 0) {
        bye_acks_send(r);
    }
    if (__atomic_load_n(&r->owed_pending, __ATOMIC_RELAXED) != 0) {
        credits_return(r);
    }
    if (__atomic_load_n(&r->events_due, __ATOMIC_RELAXED) != 0) {
        events_deliver(r);
    }
    return n;
}

/* The progress thread's nap while kernel threads poll the worker: a blocked thread, not a
 * yielding one. A thread that only yields stays runnable, shares the cores of the polling
 * kernel threads and, on a machine with no core to spare, took turns from them: round trips of
 * 10 us and more in a cross-process ping-pong, and once the program's own threads slept 20 ms
 * instead of 1 ms between looks, 2.2x raw UCP AM instead of 1.33 (see README). It wakes after
 * RINGK_NAP_MS, when a kernel thread stops polling (ringk_remote_unpoll) or at stop. */
static void progress_nap(ringk_remote_t *r)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += RINGK_NAP_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec  += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
    }
    pthread_mutex_lock(&r->nap_mu);
    if (!r->nap_kick && !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        pthread_cond_timedwait(&r->nap_cv, &r->nap_mu, &ts);
    }
    r->nap_kick = 0;
    pthread_mutex_unlock(&r->nap_mu);
}

static void progress_kick(ringk_remote_t *r)
{
    pthread_mutex_lock(&r->nap_mu);
    r->nap_kick = 1;
    pthread_cond_signal(&r->nap_cv);
    pthread_mutex_unlock(&r->nap_mu);
}

void ringk_remote_unpoll(ringk_ctx_t *ctx)
{
    ringk_remote_t *r = ctx->remote;

    if (r == NULL) {
        return;
    }

    /* what the progress thread finds when it wakes: no poll since (others that still poll
     * set it again, and it naps again) */
    __atomic_store_n(&r->kernel_polled, 0, __ATOMIC_RELAXED);
    progress_kick(r);
}

static void *progress_main(void *arg)
{
    ringk_remote_t *r = arg;
    struct pollfd pfd = {.fd = r->efd, .events = POLLIN};
    unsigned idle = 0, n;
    ucs_status_t status;

    while ((__atomic_load_n(&r->ctx->remote, __ATOMIC_ACQUIRE) != r) &&
           !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        progress_nap(r); /* until ringk_remote_start() published the context's remote side */
    }

    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        /* Idle kernel threads progress the worker themselves (ringk_remote_poll): while they
         * do (they polled since this thread last cleared the flag), it naps */
        if (__atomic_load_n(&r->kernel_polled, __ATOMIC_RELAXED)) {
            __atomic_store_n(&r->kernel_polled, 0, __ATOMIC_RELAXED);
            idle = 0;
            progress_nap(r);
            continue;
        }
        n = ucp_worker_progress(r->worker) + remote_chores(r);
        if (n > 0) {
            idle = 0;
            continue;
        }
        if (++idle < 1000) {
            sched_yield();
            continue;
        }
        /* sleep until the network has something, or 1 ms (backlogs, stop) */
        status = ucp_worker_arm(r->worker);
        if (status == UCS_OK) {
            poll(&pfd, 1, 1);
        }
        idle = 0;
    }
    return NULL;
}

/* Progresses the worker from a kernel thread that has nothing to do: the message it waits for
 * is handled without waking the progress thread. */
unsigned ringk_remote_poll(ringk_ctx_t *ctx)
{
    ringk_remote_t *r = ctx->remote;

    /* a store only when the progress thread cleared it (a read otherwise: no cache line
     * bouncing between the polling threads) */
    if (!__atomic_load_n(&r->kernel_polled, __ATOMIC_RELAXED)) {
        __atomic_store_n(&r->kernel_polled, 1, __ATOMIC_RELAXED);
    }
    return ucp_worker_progress(r->worker) + remote_chores(r);
}

/* Eager active messages: constant parameters, not built on the stack for every send. */
static const ucp_request_param_t am_eager_param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                                   .flags = UCP_AM_SEND_FLAG_EAGER};
/* From a handler run in a receive callback (ringk_tls_inline): sent at once or not at all
 * (UCS_ERR_NO_RESOURCE), never a request that only progressing the worker completes. */
static const ucp_request_param_t am_now_param = {
    .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
    .flags        = UCP_AM_SEND_FLAG_EAGER};

/* Waits for a send that did not complete at once; the worker is multi-threaded and whichever
 * thread progresses it completes the request. */
static __attribute__((noinline)) ucs_status_t am_request_wait(ringk_remote_t *r,
                                                               ucs_status_ptr_t req)
{
    ucs_status_t status;

    /* a kernel thread that polled may be the one waiting: the progress thread must not nap */
    ringk_remote_unpoll(r->ctx);
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        sched_yield();
    }
    ucp_request_free(req);
    return status;
}

/* Sends one active message (header and payload, eager) to @a rank and waits for it to leave. */
static ucs_status_t am_send_wait(ringk_remote_t *r, int rank, unsigned id, const void *hdr,
                                 size_t hdr_len, const void *payload, size_t length)
{
    ucs_status_ptr_t req;

    if (__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
        return UCS_ERR_CONNECTION_RESET;
    }
    req = ucp_am_send_nbx(r->eps[rank], id, hdr, hdr_len, payload, length, &am_eager_param);
    return UCS_PTR_IS_PTR(req) ? am_request_wait(r, req) : UCS_PTR_STATUS(req);
}

static int control_send(ringk_remote_t *r, int rank, unsigned id, const void *hdr, size_t len)
{
    return (am_send_wait(r, rank, id, hdr, len, NULL, 0) == UCS_OK) ? 0 : -EPIPE;
}

/* Fills the header of a message this process sends to another. */
static void remote_msg_init(ringk_ctx_t *ctx, ringk_kernel_t *from, ringk_msg_t *msg,
                            ringk_msg_type_t type, uint32_t receiver, size_t length)
{
    memset(msg, 0, sizeof(*msg));
    msg->sender    = ((uint32_t)ctx->job.rank << RINGK_RANK_SHIFT) | (from ? from->id : 0);
    msg->receiver  = receiver;
    msg->type      = type;
    msg->length    = (uint32_t)length;
    msg->seq       = from ? ringk_kernel_next_seq(from)
                          : __atomic_fetch_add(&ctx->host_seq, 1, __ATOMIC_RELAXED);
    msg->timestamp = (from && from->timestamps) ? ringk_hlc_tick(&ctx->clock) : 0;
}

/* The processes that take part in barrier @a name (have local participants). */
unsigned ringk_remote_barrier_processes(ringk_ctx_t *ctx, const char *name)
{
    ringk_remote_t *r = ctx->remote;
    unsigned n = 0, i;
    int rank;

    for (rank = 0; rank < r->size; rank++) {
        for (i = 0; i < RINGK_MAX_BARRIERS; i++) {
            const topic_entry_t *b = &r->barriers[(size_t)rank * RINGK_MAX_BARRIERS + i];
            if (b->used && (b->nsubs > 0) && !strncmp(b->name, name, RINGK_NAME_MAX)) {
                n++;
            }
        }
    }
    return n;
}

static void barrier_msg_init(barrier_msg_t *m, const char *name, uint64_t gen, int release)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->generation = gen;
    m->release    = (uint32_t)release;
}

void ringk_remote_barrier_release(ringk_ctx_t *ctx, const char *name, uint64_t gen)
{
    ringk_remote_t *r = ctx->remote;
    barrier_msg_t rel;
    unsigned j;
    int rank;

    barrier_msg_init(&rel, name, gen, 1);
    for (rank = 1; rank < r->size; rank++) {
        for (j = 0; j < RINGK_MAX_BARRIERS; j++) {
            const topic_entry_t *b = &r->barriers[(size_t)rank * RINGK_MAX_BARRIERS + j];
            if (b->used && (b->nsubs > 0) && !strncmp(b->name, name, RINGK_NAME_MAX)) {
                /* no wait: this may run inside an AM callback, where a send that does not
                 * leave at once would wait for progress that nobody can make */
                am_send_async(r, rank, RINGK_AM_BARRIER, &rel, sizeof(rel));
            }
        }
    }
}

int ringk_remote_barrier_send(ringk_ctx_t *ctx, int rank, const char *name, uint64_t gen,
                              int release)
{
    barrier_msg_t m;

    barrier_msg_init(&m, name, gen, release);
    return control_send(ctx->remote, rank, RINGK_AM_BARRIER, &m, sizeof(m));
}

/* Arrivals and releases go up to the barrier state machine (ringk_barrier.c). */
static ucs_status_t am_barrier_recv(void *arg, const void *header, size_t header_length,
                                    void *data, size_t length, const ucp_am_recv_param_t *param)
{
    ringk_remote_t *r = arg;
    barrier_msg_t m;

    if (ringk_wire_barrier_parse(header, header_length, &m) != 0) {
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "dropped a malformed barrier message (%zu bytes)",
                      header_length);
        return UCS_OK;
    }
    ringk_barrier_deliver(r->ctx, m.name, m.generation, m.release);
    return UCS_OK;
}

int ringk_remote_barrier_gone(ringk_ctx_t *ctx, const char *name)
{
    ringk_remote_t *r = ctx->remote;
    unsigned i;
    int rank;

    for (rank = 0; rank < r->size; rank++) {
        if ((rank == ctx->job.rank) || !__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
            continue;
        }
        for (i = 0; i < RINGK_MAX_BARRIERS; i++) {
            const topic_entry_t *b = &r->barriers[(size_t)rank * RINGK_MAX_BARRIERS + i];
            if (b->used && (b->nsubs > 0) && !strncmp(b->name, name, RINGK_NAME_MAX)) {
                return rank;
            }
        }
    }
    return -1;
}

/* ---- sending --------------------------------------------------------------------------------- */

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ringk_remote_t *r = arg;
    int i;

    for (i = 0; i < r->size; i++) {
        if (r->eps[i] != ep) {
            continue;
        }
        __atomic_store_n(&r->dead[i], 1, __ATOMIC_RELEASE);
        if (!__atomic_load_n(&r->left[i], __ATOMIC_ACQUIRE)) {
            event_post(r, i, RINGK_PEER_LOST);
            ringk_log_msg(r->ctx, RINGK_LOG_ERROR, "process %d is unreachable: %s; messages to "
                          "its kernels are reported undeliverable", i, ucs_status_string(status));
        }
    }
}

int ringk_remote_lost(const ringk_ctx_t *ctx)
{
    const ringk_remote_t *r = ctx->remote;
    int i, lost = 0;

    for (i = 0; i < r->size; i++) {
        lost += __atomic_load_n(&r->dead[i], __ATOMIC_ACQUIRE) &&
                !__atomic_load_n(&r->left[i], __ATOMIC_ACQUIRE);
    }
    return lost;
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* What a send waiting for credits of slot @a id of process @a rank waits for, in words. */
static void remote_wait_what(const ringk_remote_t *r, int rank, uint32_t id, char *buf,
                             size_t size)
{
    const dir_entry_t *e;
    int i;

    if (id == RINGK_TOPIC_SLOT) {
        snprintf(buf, size, "process %d (%u publishes on their way, none handed on)", rank,
                 RINGK_TOPIC_WINDOW);
        return;
    }
    for (i = 0; i < RINGK_DIR_ENTRIES; i++) {
        e = &r->dir[(size_t)rank * RINGK_DIR_ENTRIES + i];
        if (e->used && (e->id == id)) {
            snprintf(buf, size, "'%.*s' of process %d", RINGK_NAME_MAX, e->name, rank);
            return;
        }
    }
    snprintf(buf, size, "kernel %u of process %d", id, rank);
}

/* Takes a credit for slot @a id of process @a rank, waiting as @a timeout_ms says (progressing
 * the worker, which brings credits back): 0, -EAGAIN, -ETIMEDOUT, or -EPIPE (it is lost). */
static __attribute__((noinline)) int credit_wait(ringk_ctx_t *ctx, int rank, uint32_t id,
                                                int timeout_ms)
{
    ringk_remote_t *r = ctx->remote;
    uint64_t deadline = 0, start = 0, now, warn_next = 0;
    char what[RINGK_NAME_MAX + 64];

    while (!credit_take(r, rank, id)) {
        if (timeout_ms == RINGK_WAIT_NONE) {
            return -EAGAIN;
        }
        now = now_ms();
        if (deadline == 0) {
            start    = now;
            deadline = (timeout_ms < 0) ? UINT64_MAX : now + (uint64_t)timeout_ms;
            ringk_wait_prepare();
        }
        if (__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
            return -EPIPE;
        }
        if (now > deadline) {
            return -ETIMEDOUT;
        }
        if ((ctx->wait_warn_ms != 0) && ((warn_next == 0) || (now * 1000000u >= warn_next))) {
            remote_wait_what(r, rank, id, what, sizeof(what));
            ringk_wait_warn(ctx, start * 1000000u, now * 1000000u, &warn_next, what);
        }
        if (ringk_remote_poll(ctx) == 0) {
            sched_yield();
        }
    }
    return 0;
}

int ringk_remote_send(ringk_ctx_t *ctx, ringk_kernel_t *from, int rank, uint32_t id,
                      ringk_msg_type_t type, const void *payload, size_t length, int timeout_ms)
{
    ringk_remote_t *r = ctx->remote;
    wire_msg_t w;
    size_t hlen = RINGK_WIRE_MSG_SHORT;
    ucs_status_ptr_t req;
    ucs_status_t status;
    int ret;

    if ((rank < 0) || (rank >= ctx->job.size) || (rank == ctx->job.rank) || (id == 0) ||
        (id > RINGK_MAX_KERNELS) || __atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
        return -EPIPE;
    }
    /* backpressure: the receiving kernel's inbox and this process's share of its backlog are
     * full until it returns credits */
    if (!credit_take(r, rank, id)) {
        if ((ringk_tls_inline != NULL) && (timeout_ms != RINGK_WAIT_NONE)) {
            return RINGK_WOULD_WAIT; /* credits come back only through the worker */
        }
        ret = credit_wait(ctx, rank, id, timeout_ms);
        if (ret != 0) {
            return ret;
        }
    }
    w.sender = ((uint32_t)ctx->job.rank << RINGK_RANK_SHIFT) | (from ? from->id : 0);
    w.dst    = (uint16_t)id;
    w.type   = (uint8_t)type;
    w.flags  = 0;
    w.seq    = from ? ringk_kernel_next_seq(from)
                    : __atomic_fetch_add(&ctx->host_seq, 1, __ATOMIC_RELAXED);
    if ((from != NULL) && from->timestamps) {
        w.timestamp = ringk_hlc_tick(&ctx->clock);
        w.flags     = RINGK_WIRE_TIMESTAMP;
        hlen        = sizeof(w);
    }
    /* one active message (the process was alive at the top; credit_wait checked it since) */
    req = ucp_am_send_nbx(r->eps[rank], RINGK_AM_MSG, &w, hlen, payload, length,
                          (ringk_tls_inline == NULL) ? &am_eager_param : &am_now_param);
    if ((ringk_tls_inline != NULL) && (req == UCS_STATUS_PTR(UCS_ERR_NO_RESOURCE))) {
        /* not sent: as if never tried (the sequence number back), then again after the
         * callback. A host send cannot take back its number: the host's sequence has a gap. */
        credit_give_back(r, rank, id);
        if (from != NULL) {
            __atomic_store_n(&from->seq, w.seq, __ATOMIC_RELAXED);
        }
        return (timeout_ms == RINGK_WAIT_NONE) ? -EAGAIN : RINGK_WOULD_WAIT;
    }
    status = UCS_PTR_IS_PTR(req) ? am_request_wait(r, req) : UCS_PTR_STATUS(req);
    if (status != UCS_OK) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "send to process %d failed: %s", rank,
                      ucs_status_string(status));
        return -EPIPE;
    }
    if (from != NULL) {
        __atomic_store_n(&from->msgs_out, from->msgs_out + 1, __ATOMIC_RELAXED);
    }
    return 0;
}

void ringk_remote_route_init(ringk_ctx_t *ctx, const ringk_kernel_t *from, route_t *rt)
{
    ringk_remote_t *r = ctx->remote;

    rt->remote_credit = &r->credits[(uint32_t)rt->rank * RINGK_SLOTS + rt->remote_id];
    rt->remote_dead   = &r->dead[rt->rank];
    rt->remote_sender = ((uint32_t)ctx->job.rank << RINGK_RANK_SHIFT) | from->id;
    rt->remote_ep     = r->eps[rt->rank];
}

int ringk_remote_send_last(ringk_kernel_t *from, ringk_msg_type_t type, const void *payload,
                           size_t length, int timeout_ms)
{
    const route_t *rt = __atomic_load_n(&from->last_rt, __ATOMIC_RELAXED);
    uint32_t *c       = rt->remote_credit;
    uint32_t cur      = __atomic_load_n(c, __ATOMIC_RELAXED);
    uint64_t seq      = __atomic_load_n(&from->seq, __ATOMIC_RELAXED);
    ucs_status_ptr_t req;
    wire_msg_t w;

    /* queued behind deferred calls, an error to report, a wait, or a timestamp: the full path */
    if ((from->defer_head != NULL) || ((unsigned)type > RINGK_MSG_TERMINATE) ||
        (length > from->max_out) || (cur == 0) || from->timestamps ||
        __atomic_load_n(rt->remote_dead, __ATOMIC_ACQUIRE) ||
        !__atomic_compare_exchange_n(c, &cur, cur - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        return ringk_send_last_full(from, type, payload, length, timeout_ms);
    }
    w.sender = rt->remote_sender;
    w.dst    = (uint16_t)rt->remote_id;
    w.type   = (uint8_t)type;
    w.flags  = 0;
    w.seq    = seq;
    /* sent at once or not at all (then by the full path, which may wait or defer) */
    req = ucp_am_send_nbx(rt->remote_ep, RINGK_AM_MSG, &w, RINGK_WIRE_MSG_SHORT, payload,
                          length, &am_now_param);
    if (ucs_unlikely(req != NULL)) {
        __atomic_add_fetch(c, 1, __ATOMIC_RELEASE); /* the credit back */
        return ringk_send_last_full(from, type, payload, length, timeout_ms);
    }
    /* one thread at a time sends as a kernel */
    __atomic_store_n(&from->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&from->msgs_out, from->msgs_out + 1, __ATOMIC_RELAXED);
    from->iter_sends++;
    return 0;
}

int ringk_remote_publish(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *topic,
                         const void *payload, size_t length, int timeout_ms, unsigned *reached_p)
{
    ringk_remote_t *r = ctx->remote;
    unsigned reached = 0, nsubs;
    topic_hdr_t hdr;
    int rank, i, ret = 0;

    memset(&hdr, 0, sizeof(hdr));
    remote_msg_init(ctx, from, &hdr.msg, RINGK_MSG_DATA, RINGK_MSG_BROADCAST, length);
    snprintf(hdr.topic, sizeof(hdr.topic), "%s", topic);
    hdr.src_rank = (uint32_t)ctx->job.rank;
    /* one active message per process with subscribers, however many it has */
    for (rank = 0; rank < ctx->job.size; rank++) {
        if (rank == ctx->job.rank) {
            continue;
        }
        nsubs = 0;
        for (i = 0; i < RINGK_MAX_TOPICS; i++) {
            const topic_entry_t *t = &r->topics[(size_t)rank * RINGK_MAX_TOPICS + i];
            if (t->used && !strncmp(t->name, topic, RINGK_NAME_MAX)) {
                nsubs = t->nsubs;
            }
        }
        if (nsubs == 0) {
            continue;
        }
        /* backpressure: RINGK_TOPIC_WINDOW publishes on their way to that process */
        ret = credit_wait(ctx, rank, RINGK_TOPIC_SLOT, timeout_ms);
        if (ret != 0) {
            break;
        }
        if (am_send_wait(r, rank, RINGK_AM_TOPIC, &hdr, sizeof(hdr), payload, length) ==
            UCS_OK) {
            reached += nsubs;
        } else {
            ret = -EPIPE;
        }
    }
    if ((from != NULL) && (reached > 0)) {
        __atomic_store_n(&from->msgs_out, from->msgs_out + reached, __ATOMIC_RELAXED);
    }
    *reached_p = reached;
    return ret;
}

int ringk_remote_lookup(ringk_ctx_t *ctx, const char *name, int *rank_p, uint32_t *id_p)
{
    ringk_remote_t *r = ctx->remote;
    int rank, i;

    for (rank = 0; rank < ctx->job.size; rank++) {
        if (rank == ctx->job.rank) {
            continue;
        }
        for (i = 0; i < RINGK_DIR_ENTRIES; i++) {
            const dir_entry_t *e = &r->dir[(size_t)rank * RINGK_DIR_ENTRIES + i];
            if (e->used && !strncmp(e->name, name, RINGK_NAME_MAX)) {
                *rank_p = rank;
                *id_p   = e->id;
                return 0;
            }
        }
    }
    return -ENOENT;
}

/* For each local kernel that lists subscribes_to: which kernels of other processes it takes
 * messages from (those it names, and every process's host, which local sends do not check
 * either). Built once the directory is in; am_recv() refuses the others. */
static int allowed_build(ringk_remote_t *r)
{
    ringk_ctx_t *ctx = r->ctx;
    const ringk_kernel_t *k;
    unsigned i, j, e;
    int rank, ret = 0;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; (ret == 0) && (i < ctx->nkernels); i++) {
        k = ctx->kernels[i];
        if ((k == NULL) || (k->subscribes_to.count == 0)) {
            continue;
        }
        r->allowed[k->id] = calloc((size_t)r->size * RINGK_SLOTS, 1);
        if (r->allowed[k->id] == NULL) {
            ret = -ENOMEM;
            break;
        }
        for (rank = 0; rank < r->size; rank++) {
            r->allowed[k->id][rank * RINGK_SLOTS] = 1;
            for (e = 0; e < RINGK_DIR_ENTRIES; e++) {
                const dir_entry_t *d = &r->dir[(size_t)rank * RINGK_DIR_ENTRIES + e];

                for (j = 0; d->used && (j < k->subscribes_to.count); j++) {
                    if (!strncmp(d->name, k->subscribes_to.names[j], RINGK_NAME_MAX)) {
                        r->allowed[k->id][rank * RINGK_SLOTS + d->id] = 1;
                    }
                }
            }
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return ret;
}

/* ---- start and stop ------------------------------------------------------------------------- */

/* Frees what ringk_remote_start() allocated (each array may be NULL), and @a r. */
static void remote_free(ringk_remote_t *r)
{
    unsigned i;

    for (i = 0; i <= RINGK_MAX_KERNELS; i++) {
        free(r->allowed[i]);
    }
    free(r->eps);
    free(r->dead);
    free(r->left);
    free(r->acked);
    free(r->ack_due);
    free(r->window);
    free(r->credits);
    free(r->owed);
    free(r->owed_queued);
    free(r->owed_queue);
    free(r->dir);
    free(r->topics);
    free(r->barriers);
    free(r->event_state);
    free(r->event_kind);
    free(r->event_next);
    pthread_mutex_destroy(&r->nap_mu);
    pthread_cond_destroy(&r->nap_cv);
    free(r);
}

int ringk_remote_start(ringk_ctx_t *ctx)
{
    const int size = ctx->job.size, me = ctx->job.rank;
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features   = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
        .mt_workers_shared = 1
    };
    ucp_worker_params_t wparams = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_MULTI
    };
    ucp_am_handler_param_t am = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = RINGK_AM_MSG, .cb = am_recv, .arg = NULL, .flags = UCP_AM_FLAG_WHOLE_MSG
    };
    ucp_am_handler_param_t am_topic, am_barrier, am_bye, am_credit;
    topic_entry_t *mytopics = NULL, *mybarriers = NULL;
    ucp_address_t *addr;
    uint64_t len, maxlen = 0, *lens = NULL;
    uint8_t *mine = NULL, *all = NULL;
    dir_entry_t *entries = NULL;
    ringk_remote_t *r;
    ucp_config_t *config;
    pthread_condattr_t cattr;
    unsigned counts[RINGK_MAX_TOPICS > RINGK_MAX_BARRIERS ? RINGK_MAX_TOPICS :
                    RINGK_MAX_BARRIERS];
    const char *names[sizeof(counts) / sizeof(counts[0])];
    unsigned i, n;
    int ret = -EIO, rank;

    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    /* before anything can fail: remote_free() destroys them */
    pthread_mutex_init(&r->nap_mu, NULL);
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->nap_cv, &cattr);
    pthread_condattr_destroy(&cattr);
    r->eps  = calloc(size, sizeof(*r->eps));
    r->dead = calloc(size, sizeof(*r->dead));
    r->left = calloc(size, sizeof(*r->left));
    r->event_state = calloc(size, sizeof(*r->event_state));
    r->event_kind  = calloc(size, sizeof(*r->event_kind));
    r->event_next  = calloc(size, sizeof(*r->event_next));
    r->acked   = calloc(size, sizeof(*r->acked));
    r->ack_due = calloc(size, sizeof(*r->ack_due));
    r->window      = calloc((size_t)size * RINGK_SLOTS, sizeof(*r->window));
    r->credits     = calloc((size_t)size * RINGK_SLOTS, sizeof(*r->credits));
    r->owed        = calloc((size_t)size * RINGK_SLOTS, sizeof(*r->owed));
    r->owed_queued = calloc((size_t)size * RINGK_SLOTS, sizeof(*r->owed_queued));
    r->owed_queue  = calloc((size_t)size * RINGK_SLOTS, sizeof(*r->owed_queue));
    r->dir  = calloc((size_t)size * RINGK_DIR_ENTRIES, sizeof(*r->dir));
    r->topics = calloc((size_t)size * RINGK_MAX_TOPICS, sizeof(*r->topics));
    mytopics  = calloc(RINGK_MAX_TOPICS, sizeof(*mytopics));
    r->barriers = calloc((size_t)size * RINGK_MAX_BARRIERS, sizeof(*r->barriers));
    mybarriers  = calloc(RINGK_MAX_BARRIERS, sizeof(*mybarriers));
    lens    = calloc(size, sizeof(*lens));
    entries = calloc(RINGK_DIR_ENTRIES, sizeof(*entries));
    if (!r->eps || !r->dead || !r->left || !r->event_state || !r->event_kind ||
        !r->event_next || !r->acked || !r->ack_due || !r->window ||
        !r->credits || !r->owed || !r->owed_queued || !r->owed_queue || !r->dir || !r->topics ||
        !mytopics || !r->barriers || !mybarriers || !lens || !entries) {
        ret = -ENOMEM;
        goto out;
    }
    pthread_mutex_init(&r->backlog_mu, NULL);
    pthread_mutex_init(&r->owed_mu, NULL);
    pthread_mutex_init(&r->event_mu, NULL);
    r->ctx  = ctx;
    r->size = size;
    if ((ucp_config_read(NULL, NULL, &config) != UCS_OK) ||
        (ucp_init(&params, config, &r->context) != UCS_OK)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "ucp_init failed");
        goto out;
    }
    ucp_config_release(config);
    am.arg       = r;
    am_topic     = am;
    am_topic.id  = RINGK_AM_TOPIC;
    am_topic.cb  = am_topic_recv;
    am_barrier    = am;
    am_barrier.id = RINGK_AM_BARRIER;
    am_barrier.cb = am_barrier_recv;
    am_bye        = am;
    am_bye.id     = RINGK_AM_BYE;
    am_bye.cb     = am_bye_recv;
    am_credit     = am;
    am_credit.id  = RINGK_AM_CREDIT;
    am_credit.cb  = am_credit_recv;
    if ((ucp_worker_create(r->context, &wparams, &r->worker) != UCS_OK) ||
        (ucp_worker_get_efd(r->worker, &r->efd) != UCS_OK) ||
        (ucp_worker_set_am_recv_handler(r->worker, &am) != UCS_OK) ||
        (ucp_worker_set_am_recv_handler(r->worker, &am_topic) != UCS_OK) ||
        (ucp_worker_set_am_recv_handler(r->worker, &am_barrier) != UCS_OK) ||
        (ucp_worker_set_am_recv_handler(r->worker, &am_bye) != UCS_OK) ||
        (ucp_worker_set_am_recv_handler(r->worker, &am_credit) != UCS_OK) ||
        (ucp_worker_get_address(r->worker, &addr, &len) != UCS_OK)) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "cannot set up the UCP worker");
        goto out;
    }

    /* 1. address lengths, 2. addresses (padded to the longest), 3. kernel directories */
    ret = ctx->job.allgather(ctx->job.arg, &len, lens, sizeof(len));
    for (rank = 0; (ret == 0) && (rank < size); rank++) {
        if ((lens[rank] == 0) || (lens[rank] > 65536)) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "process %d sent a worker address of %llu bytes",
                          rank, (unsigned long long)lens[rank]);
            ret = -EPROTO;
        }
        maxlen = (lens[rank] > maxlen) ? lens[rank] : maxlen;
    }
    if (ret == 0) {
        mine = calloc(1, maxlen);
        all  = calloc(size, maxlen);
        if ((mine == NULL) || (all == NULL)) {
            ret = -ENOMEM;
        } else {
            memcpy(mine, addr, len);
            ret = ctx->job.allgather(ctx->job.arg, mine, all, maxlen);
        }
    }
    ucp_worker_release_address(r->worker, addr);
    if (ret == 0) {
        pthread_mutex_lock(&ctx->lock);
        for (i = 0; i < ctx->nkernels; i++) {
            if (ctx->kernels[i] != NULL) {
                strcpy(entries[i].name, ctx->kernels[i]->name);
                entries[i].id     = ctx->kernels[i]->id;
                entries[i].used   = 1;
                entries[i].window = ctx->kernels[i]->inbox_size;
            }
        }
        n = ringk_topic_list(ctx, names, counts);
        for (i = 0; i < n; i++) {
            strcpy(mytopics[i].name, names[i]);
            mytopics[i].nsubs = counts[i];
            mytopics[i].used  = 1;
        }
        n = ringk_barrier_list(ctx, names, counts);
        for (i = 0; i < n; i++) {
            strcpy(mybarriers[i].name, names[i]);
            mybarriers[i].nsubs = counts[i];
            mybarriers[i].used  = 1;
        }
        pthread_mutex_unlock(&ctx->lock);
        ret = ctx->job.allgather(ctx->job.arg, entries, r->dir,
                                 RINGK_DIR_ENTRIES * sizeof(*entries));
        ringk_wire_dir_fix(r->dir, (size_t)size * RINGK_DIR_ENTRIES); /* from peers */
        for (rank = 0; rank < size; rank++) { /* publishes to each process */
            r->window[rank * RINGK_SLOTS + RINGK_TOPIC_SLOT]  = RINGK_TOPIC_WINDOW;
            r->credits[rank * RINGK_SLOTS + RINGK_TOPIC_SLOT] = RINGK_TOPIC_WINDOW;
        }
        for (i = 0; i < (unsigned)size * RINGK_DIR_ENTRIES; i++) {
            const dir_entry_t *e = &r->dir[i];

            if (e->used) { /* every send starts with a full window */
                rank = (int)(i / RINGK_DIR_ENTRIES);
                r->window[rank * RINGK_SLOTS + e->id]  = e->window;
                r->credits[rank * RINGK_SLOTS + e->id] = e->window;
            }
        }
        ret = allowed_build(r);
    }
    if (ret == 0) {
        ret = ctx->job.allgather(ctx->job.arg, mytopics, r->topics,
                                 RINGK_MAX_TOPICS * sizeof(*mytopics));
        ringk_wire_topics_fix(r->topics, (size_t)size * RINGK_MAX_TOPICS); /* from peers */
    }
    if (ret == 0) {
        ret = ctx->job.allgather(ctx->job.arg, mybarriers, r->barriers,
                                 RINGK_MAX_BARRIERS * sizeof(*mybarriers));
        ringk_wire_topics_fix(r->barriers, (size_t)size * RINGK_MAX_BARRIERS); /* same shape */
    }
    for (rank = 0; (ret == 0) && (rank < size); rank++) {
        ucp_ep_params_t ep = {
            .field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
            .address         = (ucp_address_t*)(all + (size_t)rank * maxlen),
            .err_mode        = UCP_ERR_HANDLING_MODE_PEER,
            .err_handler.cb  = ep_error,
            .err_handler.arg = r
        };
        if ((rank != me) && (ucp_ep_create(r->worker, &ep, &r->eps[rank]) != UCS_OK)) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "cannot connect to process %d", rank);
            ret = -EHOSTUNREACH;
        }
    }
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "joining the job as rank %d of %d failed: %s", me,
                      size, strerror(-ret));
        goto out;
    }
    /* Published last, once nothing can fail: kernel threads progress the worker and resolve
     * routes to it once they see it, and the directory must be complete before any message
     * can make a kernel send. The progress thread starts before, but progresses nothing until
     * then (a message it took would make a handler send through a context without it). */
    if (pthread_create(&r->progress, NULL, progress_main, r) != 0) {
        ret = -EAGAIN;
        goto out;
    }
    __atomic_store_n(&ctx->remote, r, __ATOMIC_RELEASE);
    progress_kick(r); /* it waits for this */
    ringk_log_msg(ctx, RINGK_LOG_INFO, "rank %d of %d joined the job", me, size);
    ret = 0;
out:
    free(lens);
    free(mine);
    free(all);
    free(entries);
    free(mytopics);
    free(mybarriers);
    if (ret != 0) {
        __atomic_store_n(&ctx->remote, NULL, __ATOMIC_RELEASE);
        for (rank = 0; rank < size; rank++) {
            if (r->eps && r->eps[rank]) {
                ucp_ep_destroy(r->eps[rank]);
            }
        }
        if (r->worker) {
            ucp_worker_destroy(r->worker);
        }
        if (r->context) {
            ucp_cleanup(r->context);
        }
        remote_free(r);
    }
    return ret;
}

/* Leaves the job cleanly: everything sent so far is flushed out, then every reachable process is
 * told, and acknowledges, that this one leaves, so that its endpoint closing is not taken for a
 * failure. Bounded by RINGK_LEAVE_TIMEOUT_MS: a process that does not answer is left behind. */
static void remote_leave(ringk_remote_t *r)
{
    ucp_request_param_t param = {.op_attr_mask = 0};
    const uint64_t deadline = now_ms() + RINGK_LEAVE_TIMEOUT_MS;
    ucs_status_ptr_t req;
    int rank, waiting;

    req = ucp_worker_flush_nbx(r->worker, &param);
    if (UCS_PTR_IS_PTR(req)) {
        while ((ucp_request_check_status(req) == UCS_INPROGRESS) && (now_ms() < deadline)) {
            ucp_worker_progress(r->worker);
            bye_acks_send(r);
        }
        if (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ringk_log_msg(r->ctx, RINGK_LOG_WARN, "leaving the job: messages still in flight "
                          "after %d ms", RINGK_LEAVE_TIMEOUT_MS);
            ucp_request_cancel(r->worker, req);
        }
        ucp_request_free(req);
    }
    for (rank = 0; rank < r->size; rank++) {
        if ((r->eps[rank] != NULL) && !__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
            bye_send(r, rank, 0);
        }
    }
    do {
        ucp_worker_progress(r->worker);
        bye_acks_send(r);
        waiting = -1;
        for (rank = 0; rank < r->size; rank++) {
            if ((r->eps[rank] != NULL) && !__atomic_load_n(&r->acked[rank], __ATOMIC_ACQUIRE) &&
                !__atomic_load_n(&r->dead[rank], __ATOMIC_ACQUIRE)) {
                waiting = rank;
                break;
            }
        }
    } while ((waiting >= 0) && (now_ms() < deadline));
    if (waiting >= 0) {
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "leaving the job: process %d did not acknowledge "
                      "within %d ms", waiting, RINGK_LEAVE_TIMEOUT_MS);
    }
}

void ringk_remote_stop(ringk_ctx_t *ctx)
{
    ringk_remote_t *r = ctx->remote;
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
    backlog_t *b;
    void *req;
    int rank;
    unsigned id;

    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    progress_kick(r);
    pthread_join(r->progress, NULL);
    remote_leave(r);
    for (rank = 0; rank < ctx->job.size; rank++) {
        if (r->eps[rank] == NULL) {
            continue;
        }
        req = ucp_ep_close_nbx(r->eps[rank], &param);
        if (UCS_PTR_IS_PTR(req)) {
            while (ucp_request_check_status(req) == UCS_INPROGRESS) {
                ucp_worker_progress(r->worker);
            }
            ucp_request_free(req);
        }
    }
    for (id = 0; id <= RINGK_MAX_KERNELS; id++) {
        while ((b = r->backlog_head[id]) != NULL) {
            r->backlog_head[id] = b->next;
            if ((b->ref != NULL) && (--b->ref->remaining == 0)) {
                free(b->ref);
            }
            free(b);
        }
    }
    ucp_worker_destroy(r->worker);
    ucp_cleanup(r->context);
    pthread_mutex_destroy(&r->backlog_mu);
    pthread_mutex_destroy(&r->owed_mu);
    pthread_mutex_destroy(&r->event_mu);
    remote_free(r);
    __atomic_store_n(&ctx->remote, NULL, __ATOMIC_RELEASE); /* pairs with remote_of() */
}
