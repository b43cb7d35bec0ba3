/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk IPC channels: the calls, the hello both ends exchange, and the checks of every
 * message before it is believed (the kinds of channel are ipc_sock.c, ipc_shm.c, ipc_pipe.c). */
#include "ringk_config.h"

#include "ipc.h"
#include "../ringk_log.h"

#include <core/ringk_node.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

uint64_t ipc_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Milliseconds left until @a deadline (UINT64_MAX: for ever): -1 for ever, else >= 0. */
int ipc_ms_left(uint64_t deadline)
{
    uint64_t now;

    if (deadline == UINT64_MAX) {
        return -1;
    }
    now = ipc_now_ms();
    return (now >= deadline) ? 0 : (int)((deadline - now > 60000) ? 60000 : deadline - now);
}

uint64_t ipc_deadline_of(int timeout_ms)
{
    return (timeout_ms < 0) ? UINT64_MAX : ipc_now_ms() + (uint64_t)timeout_ms;
}

/* A short sleep between polls of shared memory or of a path that is not there yet: 50 us
 * growing to 2 ms. */
void ipc_backoff(unsigned *us)
{
    struct timespec ts = {0, (long)*us * 1000};

    nanosleep(&ts, NULL);
    *us = (*us >= 2000) ? 2000 : *us * 2;
}

void ipc_wire_init(ipc_wire_t *w, wire_kind_t kind)
{
    memset(w, 0, sizeof(*w));
    w->magic   = WIRE_MAGIC;
    w->version = WIRE_VERSION;
    w->kind    = (uint16_t)kind;
    w->pid     = (int32_t)getpid();
    w->uid     = (uint32_t)geteuid();
}

void ipc_hello_init(ipc_wire_t *w)
{
    ringk_node_id_t id;

    ipc_wire_init(w, WIRE_HELLO);
    w->start = ringk_ipc_proc_start(w->pid);
    ringk_node_id_get(&id);
    w->node[0] = id.boot;
    w->node[1] = id.pid_ns;
    w->node[2] = id.ipc_shm;
}

const char *ipc_kind_name(ringk_ipc_channel_kind_t kind)
{
    return (kind == RINGK_IPC_CHANNEL_SOCKET) ? "socket" :
           (kind == RINGK_IPC_CHANNEL_SHM) ? "shm" : "pipe";
}

/* Marks the channel unusable with @a err, logged with the reason. */
int ipc_channel_fail(ringk_ipc_channel_t *ch, int err, const char *fmt, ...)
{
    char why[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (ch->broken == 0) {
        ch->broken = err;
    }
    ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc %s channel: %s", ipc_kind_name(ch->kind), why);
    return err;
}

/* The peer is gone: its imports are forgotten (their memory may be freed any time now). */
int ipc_peer_gone(ringk_ipc_channel_t *ch)
{
    if (ch->broken == 0) {
        ch->broken = -EPIPE;
        if (ch->peer_pid > 0) {
            ringk_ipc_invalidate(ch->peer_pid, 0);
        }
    }
    return -EPIPE;
}

/* Whether the peer process still runs (pid and start time; a peer not known is assumed to). */
int ipc_peer_alive(const ringk_ipc_channel_t *ch)
{
    uint64_t start;

    if (ch->peer_pid <= 0) {
        return 1;
    }
    if ((kill(ch->peer_pid, 0) != 0) && (errno == ESRCH)) {
        return 0;
    }
    start = ringk_ipc_proc_start(ch->peer_pid);
    return (start == 0) || (ch->peer_start == 0) || (start == ch->peer_start);
}

/* Checks a hello against what the kernel said of the peer (@a cred_pid, @a cred_uid; 0 and
 * geteuid() where the channel has no kernel credentials) and against this node: 0, -EPERM or
 * -EXDEV (logged). */
int ipc_hello_check(ringk_ipc_channel_t *ch, const ipc_wire_t *w, int32_t cred_pid,
                    uint32_t cred_uid)
{
    ringk_node_id_t mine, theirs;
    char path[64], reason[160];
    struct stat st;

    if ((w->magic != WIRE_MAGIC) || (w->version != WIRE_VERSION) || (w->kind != WIRE_HELLO)) {
        return ipc_channel_fail(ch, -EPROTO, "the peer's first message is not a hello of "
                                "version %u (magic 0x%08x, version %u, kind %u)", WIRE_VERSION,
                                w->magic, w->version, w->kind);
    }
    if (w->uid != (uint32_t)geteuid()) {
        return ipc_channel_fail(ch, -EPERM, "the peer says it is user %u, this process is user %u",
                                w->uid, (unsigned)geteuid());
    }
    if ((cred_pid != 0) && ((w->pid != cred_pid) || (w->uid != cred_uid))) {
        return ipc_channel_fail(ch, -EPERM, "the peer says it is process %d of user %u, the kernel "
                                "says %d of %u", (int)w->pid, w->uid, (int)cred_pid, cred_uid);
    }
    if (cred_pid == 0) {
        /* no kernel credentials: the process it names must be this user's and have started
         * when it says */
        snprintf(path, sizeof(path), "/proc/%d", (int)w->pid);
        if ((w->pid <= 0) || (stat(path, &st) != 0) || (st.st_uid != geteuid()) ||
            (ringk_ipc_proc_start(w->pid) != w->start)) {
            return ipc_channel_fail(ch, -EPERM, "the peer names process %d, which is not a process "
                                    "of user %u started when it says", (int)w->pid,
                                    (unsigned)geteuid());
        }
    }
    ringk_node_id_get(&mine);
    theirs.boot    = w->node[0];
    theirs.pid_ns  = w->node[1];
    theirs.ipc_shm = w->node[2];
    if (!ringk_node_id_same(&mine, &theirs, reason, sizeof(reason))) {
        return ipc_channel_fail(ch, -EXDEV, "process %d is on another node or container: %s",
                                (int)w->pid, reason);
    }
    ch->peer_pid   = w->pid;
    ch->peer_uid   = w->uid;
    ch->peer_start = w->start;
    return 0;
}


/* ---- the calls ------------------------------------------------------------------------------ */

int ringk_ipc_channel_open(const ringk_ipc_channel_params_t *params,
                           ringk_ipc_channel_t **channel_p)
{
    const uint64_t known = RINGK_IPC_CHANNEL_PARAM_FIELD_KIND |
                           RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE |
                           RINGK_IPC_CHANNEL_PARAM_FIELD_PATH |
                           RINGK_IPC_CHANNEL_PARAM_FIELD_TIMEOUT;
    ringk_ipc_channel_t *ch;
    const char *path;
    uint64_t deadline;
    size_t len;
    int ret;

    if ((params == NULL) || (channel_p == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL",
                                 (params == NULL) ? "params" : "channel_p");
    }
    if (params->field_mask & ~known) {
        return ringk_log_bad_arg(NULL, __func__, "field_mask 0x%llx has unknown bits (known: "
                                 "0x%llx)", (unsigned long long)params->field_mask,
                                 (unsigned long long)known);
    }
    if ((params->field_mask & RINGK_IPC_CHANNEL_PARAM_FIELD_KIND) &&
        ((unsigned)params->kind > RINGK_IPC_CHANNEL_PIPE)) {
        return ringk_log_bad_arg(NULL, __func__, "kind %d is not SOCKET (0), SHM (1) or PIPE "
                                 "(2)", (int)params->kind);
    }
    if (!(params->field_mask & RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE) ||
        ((unsigned)params->role > RINGK_IPC_CHANNEL_CONNECT)) {
        return ringk_log_bad_arg(NULL, __func__, "role %d is not LISTEN (0) or CONNECT (1) "
                                 "(required: RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE)",
                                 (params->field_mask & RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE) ?
                                 (int)params->role : -1);
    }
    path = (params->field_mask & RINGK_IPC_CHANNEL_PARAM_FIELD_PATH) ? params->path : NULL;
    len  = (path != NULL) ? strlen(path) : 0;
    if ((len == 0) || (len > sizeof(((struct sockaddr_un*)0)->sun_path) - 1)) {
        return ringk_log_bad_arg(NULL, __func__, "path is %s%zu bytes long (1..%zu, required)",
                                 (path == NULL) ? "missing, " : "", len,
                                 sizeof(((struct sockaddr_un*)0)->sun_path) - 1);
    }
    if ((params->field_mask & RINGK_IPC_CHANNEL_PARAM_FIELD_KIND) &&
        (params->kind == RINGK_IPC_CHANNEL_SHM) && (strchr(path, '/') != NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "path '%s': an SHM channel's path is a name in "
                                 "/dev/shm, without '/'", path);
    }
    if ((params->field_mask & RINGK_IPC_CHANNEL_PARAM_FIELD_TIMEOUT) &&
        (params->timeout_ms < -1)) {
        return ringk_log_bad_arg(NULL, __func__, "timeout_ms %d is not -1 (for ever) or >= 0",
                                 params->timeout_ms);
    }
    if ((ch = calloc(1, sizeof(*ch))) == NULL) {
        return -ENOMEM;
    }
    ch->kind       = (params->field_mask & RINGK_IPC_CHANNEL_PARAM_FIELD_KIND) ?
                     params->kind : RINGK_IPC_CHANNEL_SOCKET;
    ch->role       = params->role;
    ch->fd         = -1;
    ch->timeout_ms = (params->field_mask & RINGK_IPC_CHANNEL_PARAM_FIELD_TIMEOUT) ?
                     params->timeout_ms : IPC_CHANNEL_TIMEOUT_DEFAULT;
    deadline       = ipc_deadline_of(ch->timeout_ms);
    switch (ch->kind) {
    case RINGK_IPC_CHANNEL_SOCKET:
        ret = ipc_sock_open(ch, path, deadline);
        break;
    case RINGK_IPC_CHANNEL_SHM:
        ret = ipc_shm_open(ch, path, deadline);
        break;
    default:
        ret = ipc_pipe_open(ch, path, deadline);
        break;
    }
    if (ret != 0) {
        ch->peer_pid = 0; /* nothing was imported through it */
        ringk_ipc_channel_close(ch);
        return ret;
    }
    *channel_p = ch;
    return 0;
}

int ringk_ipc_channel_close(ringk_ipc_channel_t *ch)
{
    if (ch == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "channel is NULL");
    }
    if (ch->fd >= 0) {
        close(ch->fd);
    }
    if (ch->shm != NULL) {
        ipc_shm_close(ch);
    }
    if ((ch->kind == RINGK_IPC_CHANNEL_SOCKET) && (ch->broken == 0) && (ch->peer_pid > 0)) {
        /* this end is gone: the peer's memory is not ours to keep using */
        ringk_ipc_invalidate(ch->peer_pid, 0);
    }
    free(ch);
    return 0;
}

/* Sends @a w (with descriptor @a fd on a socket). */
static int channel_send(ringk_ipc_channel_t *ch, const ipc_wire_t *w, int fd)
{
    uint64_t deadline = ipc_deadline_of(ch->timeout_ms);

    if (ch->broken != 0) {
        return ch->broken;
    }
    if ((ch->kind == RINGK_IPC_CHANNEL_PIPE) && (ch->role == RINGK_IPC_CHANNEL_LISTEN)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc pipe channel: the listening end only "
                      "receives (a pipe is one way)");
        return -ENOTSUP;
    }
    switch (ch->kind) {
    case RINGK_IPC_CHANNEL_SOCKET:
        return ipc_sock_send(ch, w, fd);
    case RINGK_IPC_CHANNEL_SHM:
        return ipc_shm_send(ch, w, deadline);
    default:
        return ipc_pipe_send(ch, w, deadline);
    }
}

int ringk_ipc_channel_send(ringk_ipc_channel_t *ch, const ringk_ipc_handle_t *h)
{
    char why[256];
    ipc_wire_t w;

    if ((ch == NULL) || (h == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (ch == NULL) ? "channel" :
                                 "handle");
    }
    if (ringk_ipc_handle_check(h, why, sizeof(why)) != 0) {
        return ringk_log_bad_arg(NULL, __func__, "%s", why);
    }
    if (h->pid != (int32_t)getpid()) {
        return ringk_log_bad_arg(NULL, __func__, "the handle is process %d's, not this "
                                 "process's (%d): only the exporter sends it",
                                 (int)h->pid, (int)getpid());
    }
    if ((h->type == RINGK_IPC_TYPE_POSIX_FD) && (ch->kind != RINGK_IPC_CHANNEL_SOCKET)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_ipc_channel_send: a POSIX_FD handle's "
                      "descriptor cannot travel through a %s channel (only a socket carries "
                      "descriptors)", ipc_kind_name(ch->kind));
        return -EOPNOTSUPP;
    }
    ipc_wire_init(&w, WIRE_HANDLE);
    w.type   = (uint32_t)h->type;
    w.has_fd = (h->type == RINGK_IPC_TYPE_POSIX_FD);
    w.size   = h->size;
    w.offset = h->offset;
    w.id     = h->id;
    w.owner  = h->pid;
    memcpy(w.device, h->device, sizeof(w.device));
    memcpy(w.bytes, h->bytes, sizeof(w.bytes));
    return channel_send(ch, &w, w.has_fd ? h->fd : -1);
}

int ringk_ipc_channel_revoke(ringk_ipc_channel_t *ch, uint64_t id)
{
    ipc_wire_t w;

    if ((ch == NULL) || (id == 0)) {
        return ringk_log_bad_arg(NULL, __func__, "%s", (ch == NULL) ? "channel is NULL" :
                                 "id is 0");
    }
    ringk_ipc_export_forget(id); /* exported again, a new id: the peer's is a tombstone */
    ipc_wire_init(&w, WIRE_REVOKE);
    w.id = id;
    return channel_send(ch, &w, -1);
}

/* Turns a checked HANDLE message into *@a h (taking @a fd): 0, or -EPROTO (logged). */
static int wire_to_handle(ringk_ipc_channel_t *ch, const ipc_wire_t *w, int fd,
                          ringk_ipc_handle_t *h)
{
    char why[256];

    memset(h, 0, sizeof(*h));
    h->type   = (ringk_ipc_type_t)w->type;
    h->fd     = fd;
    h->size   = w->size;
    h->offset = w->offset;
    h->id     = w->id;
    h->pid    = w->owner;
    memcpy(h->device, w->device, sizeof(h->device));
    memcpy(h->bytes, w->bytes, sizeof(h->bytes));
    if ((w->has_fd != 0) != (fd >= 0)) {
        snprintf(why, sizeof(why), "the message says %s descriptor and %s came",
                 w->has_fd ? "a" : "no", (fd >= 0) ? "one" : "none");
    } else if ((ch->peer_pid > 0) && (w->owner != ch->peer_pid)) {
        snprintf(why, sizeof(why), "the handle is process %d's, the peer is process %d",
                 (int)w->owner, (int)ch->peer_pid);
    } else if (ringk_ipc_handle_check(h, why, sizeof(why)) == 0) {
        return 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    memset(h, 0, sizeof(*h));
    h->fd = -1;
    return ipc_channel_fail(ch, -EPROTO, "a malformed handle from process %d: %s",
                            (int)ch->peer_pid, why);
}

int ringk_ipc_channel_recv(ringk_ipc_channel_t *ch, ringk_ipc_handle_t *handle_p,
                           int timeout_ms)
{
    uint64_t deadline;
    ipc_wire_t w;
    int ret, fd;

    if ((ch == NULL) || (handle_p == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (ch == NULL) ? "channel" :
                                 "handle_p");
    }
    if (timeout_ms < -1) {
        return ringk_log_bad_arg(NULL, __func__, "timeout_ms %d is not -1 (for ever) or >= 0",
                                 timeout_ms);
    }
    if (ch->broken != 0) {
        return ch->broken;
    }
    if ((ch->kind == RINGK_IPC_CHANNEL_PIPE) && (ch->role == RINGK_IPC_CHANNEL_CONNECT)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc pipe channel: the connecting end only "
                      "sends (a pipe is one way)");
        return -ENOTSUP;
    }
    deadline = ipc_deadline_of(timeout_ms);
    for (;;) {
        fd = -1;
        switch (ch->kind) {
        case RINGK_IPC_CHANNEL_SOCKET:
            ret = ipc_sock_recv(ch, &w, &fd, deadline);
            break;
        case RINGK_IPC_CHANNEL_SHM:
            ret = ipc_shm_recv(ch, &w, deadline);
            break;
        default:
            ret = ipc_pipe_recv(ch, &w, deadline);
            break;
        }
        if (ret != 0) {
            return ret;
        }
        if ((w.magic != WIRE_MAGIC) || (w.version != WIRE_VERSION) ||
            (w.pid != ch->peer_pid) || (w.reserved != 0) ||
            ((w.kind != WIRE_HANDLE) && (w.kind != WIRE_REVOKE))) {
            if (fd >= 0) {
                close(fd);
            }
            return ipc_channel_fail(ch, -EPROTO, "a message that is not a handle or a revocation "
                                    "of process %d (magic 0x%08x, version %u, kind %u, sender %d)",
                                    (int)ch->peer_pid, w.magic, w.version, w.kind, (int)w.pid);
        }
        if (w.kind == WIRE_HANDLE) {
            return wire_to_handle(ch, &w, fd, handle_p);
        }
        if (fd >= 0) {
            close(fd);
            return ipc_channel_fail(ch, -EPROTO, "a descriptor came with a revocation");
        }
        if (w.id == 0) {
            return ipc_channel_fail(ch, -EPROTO, "a revocation of id 0");
        }
        ringk_ipc_invalidate(ch->peer_pid, w.id);
    }
}

int ringk_ipc_channel_peer(const ringk_ipc_channel_t *ch, int32_t *pid_p, uint32_t *uid_p)
{
    if ((ch == NULL) || (pid_p == NULL) || (uid_p == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (ch == NULL) ? "channel" :
                                 (pid_p == NULL) ? "pid_p" : "uid_p");
    }
    *pid_p = ch->peer_pid;
    *uid_p = ch->peer_uid;
    return 0;
}
