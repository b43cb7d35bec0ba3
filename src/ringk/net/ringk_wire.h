/* SPDX-License-Identifier: BSD-3-Clause */
/* What processes of a libringk job send each other: the headers of the active messages and the
 * tables exchanged at start, and the checks every one of them passes before it is used. All of
 * it comes from another process and is trusted for nothing; the checks are pure functions, so
 * test/fuzz/fuzz_wire.c can feed them anything. */
#ifndef RINGK_WIRE_H
#define RINGK_WIRE_H

#include "core/ringk_node.h"
#include "ringk/ringk_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A remote K2K message as the receiver keeps it: the message header, the receiving kernel's id
 * and the sending process (whose credit it used). */
typedef struct {
    ringk_msg_t msg;
    uint32_t    dst;
    uint32_t    src_rank;
} remote_hdr_t;

/* ... and as it travels: 16 bytes (24 with the sender's clock), so that an 8-byte message with
 * UCP's header fits one 64-byte cell of the ringk transport. The sending process is the rank in
 * the sender id; the length is the active message's data length. */
typedef struct wire_msg {
    uint32_t sender;     /* rank << RINGK_RANK_SHIFT | kernel id (0: the host) */
    uint16_t dst;        /* the receiving kernel's id */
    uint8_t  type;       /* ringk_msg_type_t */
    uint8_t  flags;      /* RINGK_WIRE_TIMESTAMP: timestamp is there */
    uint64_t seq;
    uint64_t timestamp;  /* the sender's hybrid logical clock, only with RINGK_WIRE_TIMESTAMP */
} wire_msg_t;

#define RINGK_WIRE_TIMESTAMP 1u
#define RINGK_WIRE_MSG_SHORT offsetof(wire_msg_t, timestamp) /* bytes without the timestamp */

/* Credits: a process may have at most `window` messages (the receiving kernel's inbox size) on
 * their way to one kernel of another process: sent, and not yet in that kernel's inbox. The
 * receiver returns credits as messages enter the inbox, in batches of a quarter window, so a
 * full inbox pushes back on the senders (-EAGAIN, or a wait) and the receiver's backlog is
 * bounded by (processes - 1) x window per kernel. */
typedef struct {
    uint32_t magic;
    uint32_t rank;   /* the process returning the credits */
    uint32_t id;     /* its kernel, or 0: the publishes of the receiver to that process */
    uint32_t count;
} credit_msg_t;

#define RINGK_CREDIT_MAGIC 0x72637264u /* "rcrd" */

/* The wire header of a topic publish: the message header, the topic and the sending process
 * (a publish takes one credit of the receiving process's topic slot, whatever its subscribers). */
typedef struct {
    ringk_msg_t msg;
    char        topic[RINGK_NAME_MAX];
    uint32_t    src_rank;
    uint32_t    pad;
} topic_hdr_t;

/* One process's topic entry, as exchanged at start: a topic with local subscribers. */
typedef struct {
    char     name[RINGK_NAME_MAX];
    uint32_t nsubs;
    uint32_t used;
} topic_entry_t;

/* A barrier message: a process arrived (to rank 0), or everyone did (from rank 0). */
typedef struct {
    char     name[RINGK_NAME_MAX];
    uint64_t generation;
    uint32_t release;   /* 0: arrival of a process, 1: release */
    uint32_t pad;
} barrier_msg_t;

/* A process leaving the job says so to every other before it closes its endpoints. */
typedef struct {
    uint32_t rank;
    uint32_t magic;
    uint32_t ack;   /* 0: "I leave", 1: "I saw that you leave" */
    uint32_t pad;
} bye_msg_t;

#define RINGK_BYE_MAGIC 0x72627965u /* "rbye" */

/* One process's directory entry, as exchanged at start. */
typedef struct {
    char     name[RINGK_NAME_MAX];
    uint32_t id;
    uint32_t used;
    uint32_t window;   /* credits each other process gets for this kernel */
    uint32_t pid;      /* the process's (not checked: only ever given to kill(pid, 0)) */
    ringk_dev_export_t dev; /* a device kernel's inbox as others may write it: kind NONE, or
                               checked against the file it names before any use */
} dir_entry_t;

/* What each process says first at start, before anything else is exchanged: the wire it
 * speaks, the length of its worker's address, and its node (to tell which processes share one:
 * net_report.c). Its layout stays the same in every release, so that processes of different
 * builds read each other's and can say which one differs. */
typedef struct {
    uint32_t        magic;    /* RINGK_HELLO_MAGIC */
    uint32_t        wire;     /* RINGK_WIRE_VERSION */
    uint32_t        shape;    /* ringk_wire_shape(): the sizes of what is exchanged */
    uint32_t        release;  /* RINGK_VERSION_MAJOR << 16 | MINOR << 8 | PATCH */
    uint64_t        len;      /* bytes of its worker's address */
    ringk_node_id_t node;
} wire_hello_t;

/* the layout every release keeps */
_Static_assert(sizeof(ringk_node_id_t) == 24, "a hello's node is three 64-bit words");
_Static_assert((offsetof(wire_hello_t, len) == 16) && (offsetof(wire_hello_t, node) == 24) &&
               (sizeof(wire_hello_t) == 48), "wire_hello_t's layout is fixed");

#define RINGK_HELLO_MAGIC   0x72686c6fu /* "rhlo" */
/* Raised with every change to what processes of a job send each other (the messages above,
 * the tables exchanged at start, what they mean); ringk_wire_shape() catches a change of size
 * that was not. */
#define RINGK_WIRE_VERSION  1u
#define RINGK_HELLO_ADDR_MAX 65536 /* the longest worker address taken from another process */

/** This build's hello, for a worker address of @a len bytes on node @a node. */
void ringk_wire_hello_make(wire_hello_t *h, uint64_t len, const ringk_node_id_t *node);
/** Checks the hello of process @a rank against ours (@a mine): 0, or -EPROTO with the reason
 *  in @a why (another wire, release or layout, or an address length out of range). */
int ringk_wire_hello_check(const wire_hello_t *h, const wire_hello_t *mine, int rank, char *why,
                           size_t why_len);

/** A rank that names another process of the job of @a size processes (not us, @a me). */
static inline int ringk_wire_other_rank(uint32_t rank, int size, int me)
{
    return (rank < (uint32_t)size) && ((int)rank != me);
}

/** Checks a K2K message header (wire_msg_t) arriving with @a data_len payload bytes for a job
 *  of @a size processes in which we are @a me, and copies it into @a w_p (timestamp 0 when it
 *  has none). @return 0 or -EPROTO. Inline: it runs for every message from another process. */
static inline int ringk_wire_msg_check(const void *header, size_t header_len, size_t data_len,
                                       int size, int me, wire_msg_t *w_p)
{
    const int stamped = (header_len == sizeof(wire_msg_t));

    if (!stamped && (header_len != RINGK_WIRE_MSG_SHORT)) {
        return -EPROTO;
    }
    /* fixed-size copies: no call into the C library on every message */
    memcpy(w_p, header, RINGK_WIRE_MSG_SHORT);
    w_p->timestamp = 0;
    if (stamped) {
        memcpy(&w_p->timestamp, (const uint8_t*)header + RINGK_WIRE_MSG_SHORT,
               sizeof(w_p->timestamp));
    }
    /* the flags say exactly whether the timestamp is there */
    if ((w_p->flags != (stamped ? RINGK_WIRE_TIMESTAMP : 0)) || (data_len > RINGK_MAX_PAYLOAD) ||
        (w_p->type > RINGK_MSG_TERMINATE) || (w_p->dst == 0) || (w_p->dst > RINGK_MAX_KERNELS) ||
        !ringk_wire_other_rank(ringk_sender_rank(w_p->sender), size, me) ||
        (ringk_sender_kernel(w_p->sender) > RINGK_MAX_KERNELS)) {
        return -EPROTO;
    }
    return 0;
}

/** Unpacks a header that ringk_wire_msg_check() accepted into @a hdr_p. */
static inline void ringk_wire_msg_unpack(const wire_msg_t *w, size_t data_len,
                                         remote_hdr_t *hdr_p)
{
    hdr_p->msg.sender    = w->sender;
    hdr_p->msg.receiver  = w->dst;
    hdr_p->msg.type      = w->type;
    hdr_p->msg.flags     = 0;
    hdr_p->msg.length    = (uint32_t)data_len;
    hdr_p->msg.seq       = w->seq;
    hdr_p->msg.timestamp = w->timestamp;
    hdr_p->msg.enq_ns    = 0;
    hdr_p->dst           = w->dst;
    hdr_p->src_rank      = ringk_sender_rank(w->sender);
}

/** ringk_wire_msg_check(), then ringk_wire_msg_unpack() into @a hdr_p. @return 0 or -EPROTO. */
static inline int ringk_wire_msg_parse(const void *header, size_t header_len, size_t data_len,
                                       int size, int me, remote_hdr_t *hdr_p)
{
    wire_msg_t w;

    if (ringk_wire_msg_check(header, header_len, data_len, size, me, &w) != 0) {
        return -EPROTO;
    }
    ringk_wire_msg_unpack(&w, data_len, hdr_p);
    return 0;
}

/** Checks a topic publish header; the topic name comes back terminated. @return 0 or -EPROTO. */
int ringk_wire_topic_parse(const void *header, size_t header_len, size_t data_len, int size,
                           int me, topic_hdr_t *hdr_p);
/** Checks a barrier arrival or release; the name comes back terminated. */
int ringk_wire_barrier_parse(const void *header, size_t header_len, barrier_msg_t *m_p);
/** Checks a goodbye or its acknowledgement from another process of the job. */
int ringk_wire_bye_parse(const void *header, size_t header_len, int size, int me, bye_msg_t *m_p);
/** Checks returned credits from another process of the job. */
int ringk_wire_credit_parse(const void *header, size_t header_len, int size, int me,
                            credit_msg_t *m_p);
/** Makes a directory, topic or barrier table received at start safe to use in place: names
 *  terminated, ids and counts in range (an entry out of range is marked unused). */
void ringk_wire_dir_fix(dir_entry_t *entries, size_t n);
void ringk_wire_topics_fix(topic_entry_t *entries, size_t n);

#endif
