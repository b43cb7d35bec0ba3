/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk IPC channels through a named pipe (a FIFO, mode 0600, unlinked once both ends have
 * it): one way, the listener receives; no descriptors. */
#include "ringk_config.h"

#include "ipc.h"
#include "../ringk_log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ipc_pipe_send(ringk_ipc_channel_t *ch, const ipc_wire_t *w, uint64_t deadline)
{
    struct pollfd pfd = {ch->fd, POLLOUT, 0};
    ssize_t n;
    int ret;

    for (;;) {
        n = write(ch->fd, w, sizeof(*w)); /* one atomic write (<= PIPE_BUF) */
        if (n == (ssize_t)sizeof(*w)) {
            return 0;
        }
        if ((n < 0) && (errno == EPIPE)) {
            return ipc_peer_gone(ch);
        }
        if ((n >= 0) || ((errno != EAGAIN) && (errno != EINTR))) {
            return ipc_channel_fail(ch, -EIO, "write: %s", (n < 0) ? strerror(errno) : "short");
        }
        do {
            ret = poll(&pfd, 1, ipc_ms_left(deadline));
        } while ((ret < 0) && (errno == EINTR));
        if (ret == 0) {
            return -EAGAIN;
        }
    }
}

int ipc_pipe_recv(ringk_ipc_channel_t *ch, ipc_wire_t *w, uint64_t deadline)
{
    struct pollfd pfd = {ch->fd, POLLIN, 0};
    size_t got = 0;
    ssize_t n;
    int ret;

    while (got < sizeof(*w)) {
        /* poll before reading: a FIFO whose writer has not opened it yet reads as its end,
         * while poll waits for the writer (no hang-up is reported before a writer came) */
        do {
            ret = poll(&pfd, 1, (got == 0) ? ipc_ms_left(deadline) : 1000);
        } while ((ret < 0) && (errno == EINTR));
        if ((ret == 0) && (got == 0)) {
            return -EAGAIN;
        }
        if (ret == 0) {
            return ipc_channel_fail(ch, -EPROTO, "a message stopped after %zu of %zu bytes", got,
                                    sizeof(*w));
        }
        n = read(ch->fd, (char*)w + got, sizeof(*w) - got);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            return ipc_peer_gone(ch); /* the writer closed (or died) */
        } else if ((errno != EAGAIN) && (errno != EINTR)) {
            return ipc_channel_fail(ch, -EIO, "read: %s", strerror(errno));
        }
    }
    return 0;
}

int ipc_pipe_open(ringk_ipc_channel_t *ch, const char *path, uint64_t deadline)
{
    ipc_wire_t hello, theirs;
    struct stat st;
    unsigned us = 50;
    int ret;

    if (ch->role == RINGK_IPC_CHANNEL_LISTEN) {
        if (mkfifo(path, 0600) != 0) {
            ret = -errno;
            ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc pipe channel: mkfifo %s: %s", path,
                          strerror(errno));
            return ret;
        }
        chmod(path, 0600); /* whatever the umask */
        /* non-blocking: open returns at once, and poll waits for the writer's hello (a FIFO
         * that never had a writer reports no hang-up) */
        ch->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (ch->fd < 0) {
            ret = -errno;
            unlink(path);
            return ret;
        }
        ret = ipc_pipe_recv(ch, &theirs, deadline);
        unlink(path); /* the peer has it open, or never came */
        if (ret != 0) {
            return (ret == -EAGAIN) ? ipc_channel_fail(ch, -ETIMEDOUT, "no writer's hello in %s in "
                                                       "%d ms", path, ch->timeout_ms) : ret;
        }
        return ipc_hello_check(ch, &theirs, 0, 0);
    }
    /* the writer: a FIFO of this user that nobody else may open */
    while ((ch->fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
        if (((errno != ENOENT) && (errno != ENXIO)) || (ipc_ms_left(deadline) == 0)) {
            ret = ((errno == ENOENT) || (errno == ENXIO)) ? -ETIMEDOUT : -errno;
            ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc pipe channel: open %s: %s", path,
                          strerror(-ret));
            return ret;
        }
        ipc_backoff(&us);
    }
    if ((fstat(ch->fd, &st) != 0) || !S_ISFIFO(st.st_mode) || (st.st_uid != geteuid()) ||
        (st.st_mode & 077)) {
        return ipc_channel_fail(ch, -EPERM, "%s is not a FIFO of user %u with mode 0600 (owner %u, "
                                "mode %04o)", path, (unsigned)geteuid(), (unsigned)st.st_uid,
                                (unsigned)(st.st_mode & 07777));
    }
    ch->peer_uid = st.st_uid; /* the reader's process cannot be known from a FIFO */
    ipc_hello_init(&hello);
    return ipc_pipe_send(ch, &hello, deadline);
}
