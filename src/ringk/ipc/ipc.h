/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk IPC, inside: what the handle code, the cache and the three kinds of channel share:
 * the message every channel carries, the channel, and the helpers. */
#ifndef RINGK_IPC_IPC_H
#define RINGK_IPC_IPC_H

#include <ringk/api/ringk_ipc.h>

#include <assert.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/** Process @a pid's start time (field 22 of /proc/<pid>/stat, clock ticks since boot), which
 *  tells a process from a later one given the same pid; 0 when it cannot be read. */
uint64_t ringk_ipc_proc_start(int32_t pid);

/** Checks every field of a handle from elsewhere: 0, or -EINVAL with the field and its limit in
 *  @a why. */
int ringk_ipc_handle_check(const ringk_ipc_handle_t *h, char *why, size_t why_len);

/** Forgets this process's export of id @a id: exported again, the allocation gets a new id
 *  (the importers revoked the old one). */
void ringk_ipc_export_forget(uint64_t id);

/* The message (docs/ipc.md has its layout). */
#define WIRE_MAGIC   0x50494b52u /* "RKIP" */
#define WIRE_VERSION 1u

typedef enum { WIRE_HELLO = 1, WIRE_HANDLE = 2, WIRE_REVOKE = 3 } wire_kind_t;

/* One message, the same on every channel (168 bytes: one atomic write into a pipe). */
typedef struct ipc_wire {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;       /* wire_kind_t */
    int32_t  pid;        /* the sender */
    uint32_t uid;
    uint64_t start;      /* HELLO: the sender's start time (ringk_ipc_proc_start) */
    uint64_t node[3];    /* HELLO: the sender's ringk_node_id_t */
    uint32_t type;       /* HANDLE: ringk_ipc_type_t */
    uint32_t has_fd;     /* HANDLE: a descriptor comes with this message (socket only) */
    uint64_t size;       /* HANDLE */
    uint64_t offset;     /* HANDLE */
    uint64_t id;         /* HANDLE; REVOKE: the allocation */
    int32_t  owner;      /* HANDLE: the handle's pid (must be the sender) */
    uint32_t reserved;   /* 0 */
    char     device[16]; /* HANDLE */
    uint8_t  bytes[RINGK_IPC_HANDLE_BYTES];
} ipc_wire_t;

static_assert(sizeof(ipc_wire_t) == 168, "ipc_wire_t is 168 bytes on every ABI");
static_assert(sizeof(ipc_wire_t) <= PIPE_BUF, "a message is one atomic write into a pipe");

/* The shared-memory mailbox (ipc_shm.c). */
typedef struct ipc_chan_shm ipc_chan_shm_t;
typedef struct ipc_box_shm  ipc_box_shm_t;

/** One end of a channel. */
struct ringk_ipc_channel {
    ringk_ipc_channel_kind_t kind;
    ringk_ipc_channel_role_t role;
    int                      fd;        /**< socket or pipe; -1 for SHM */
    int                      timeout_ms;
    int                      broken;    /**< 0, or the -errno every later call returns */
    int32_t                  peer_pid;  /**< 0 where it cannot be known (a PIPE's sender) */
    uint32_t                 peer_uid;
    uint64_t                 peer_start;
    ipc_chan_shm_t          *shm;       /**< SHM: the mailbox */
    ipc_box_shm_t           *tx, *rx;   /**< SHM: the boxes this end writes and reads */
};

#define IPC_CHANNEL_TIMEOUT_DEFAULT 10000 /* ms */

/* ---- helpers (ipc_channel.c) ---- */

/** CLOCK_MONOTONIC in ms. */
uint64_t ipc_now_ms(void);
/** Milliseconds left until @a deadline (UINT64_MAX: for ever): -1 for ever, else >= 0. */
int ipc_ms_left(uint64_t deadline);
/** The deadline @a timeout_ms from now (-1: UINT64_MAX, for ever). */
uint64_t ipc_deadline_of(int timeout_ms);
/** A short sleep between polls of shared memory or of a path not there yet: 50 us growing to
 *  2 ms (*@a us holds the next one). */
void ipc_backoff(unsigned *us);
/** A message of @a kind from this process. */
void ipc_wire_init(ipc_wire_t *w, wire_kind_t kind);
/** This process's hello. */
void ipc_hello_init(ipc_wire_t *w);
/** Checks the peer's hello against the kernel's credentials (@a cred_pid 0: none, then
 *  against /proc) and this node: 0, -EPERM, -EXDEV or -EPROTO (logged); sets the peer. */
int ipc_hello_check(ringk_ipc_channel_t *ch, const ipc_wire_t *w, int32_t cred_pid,
                    uint32_t cred_uid);
const char *ipc_kind_name(ringk_ipc_channel_kind_t kind);
/** Marks the channel unusable with @a err, logged with the reason; returns @a err. */
int ipc_channel_fail(ringk_ipc_channel_t *ch, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** The peer is gone: -EPIPE from now on, and its imports are forgotten. */
int ipc_peer_gone(ringk_ipc_channel_t *ch);
/** Whether the peer process still runs (pid and start time; one not known is assumed to). */
int ipc_peer_alive(const ringk_ipc_channel_t *ch);

/* ---- the kinds: open (the hello exchanged), send one message, receive one ---- */

int ipc_sock_open(ringk_ipc_channel_t *ch, const char *path, uint64_t deadline);
int ipc_sock_send(ringk_ipc_channel_t *ch, const ipc_wire_t *w, int fd);
/** One message and at most one descriptor (*@a fd_p, -1 if none). */
int ipc_sock_recv(ringk_ipc_channel_t *ch, ipc_wire_t *w, int *fd_p, uint64_t deadline);

int ipc_shm_open(ringk_ipc_channel_t *ch, const char *name, uint64_t deadline);
int ipc_shm_send(ringk_ipc_channel_t *ch, const ipc_wire_t *w, uint64_t deadline);
int ipc_shm_recv(ringk_ipc_channel_t *ch, ipc_wire_t *w, uint64_t deadline);
/** Marks this end closed for the peer and unmaps the mailbox. */
void ipc_shm_close(ringk_ipc_channel_t *ch);

int ipc_pipe_open(ringk_ipc_channel_t *ch, const char *path, uint64_t deadline);
int ipc_pipe_send(ringk_ipc_channel_t *ch, const ipc_wire_t *w, uint64_t deadline);
int ipc_pipe_recv(ringk_ipc_channel_t *ch, ipc_wire_t *w, uint64_t deadline);

#endif
