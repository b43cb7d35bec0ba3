/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk IPC channels over a Unix sequenced-packet socket: descriptors travel with
 * SCM_RIGHTS, the kernel says who the peer is (SO_PEERCRED). */
#define _GNU_SOURCE /* accept4, struct ucred, SO_PEERCRED */
#include "ringk_config.h"

#include "ipc.h"
#include "../ringk_log.h"
#include <core/ringk_node.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int ipc_sock_send(ringk_ipc_channel_t *ch, const ipc_wire_t *w, int fd)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {(void*)w, sizeof(*w)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;
    ssize_t n;

    if (fd >= 0) {
        memset(cbuf, 0, sizeof(cbuf));
        mh.msg_control    = cbuf;
        mh.msg_controllen = sizeof(cbuf);
        cm                = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level    = SOL_SOCKET;
        cm->cmsg_type     = SCM_RIGHTS;
        cm->cmsg_len      = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    do {
        n = sendmsg(ch->fd, &mh, MSG_NOSIGNAL);
    } while ((n < 0) && (errno == EINTR));
    if (n < 0) {
        return ((errno == EPIPE) || (errno == ECONNRESET)) ? ipc_peer_gone(ch) : -errno;
    }
    return (n == (ssize_t)sizeof(*w)) ? 0 :
                                        ipc_channel_fail(ch, -EIO, "a short send (%zd bytes)", n);
}

/* Receives one message and at most one descriptor (*fd_p, -1 if none): 0, -EAGAIN, -EPIPE,
 * -EPROTO. */
int ipc_sock_recv(ringk_ipc_channel_t *ch, ipc_wire_t *w, int *fd_p, uint64_t deadline)
{
    struct pollfd pfd = {ch->fd, POLLIN, 0};
    int fd, nfd, flags, ret;
    ssize_t n;

    *fd_p = -1;
    do {
        ret = poll(&pfd, 1, ipc_ms_left(deadline));
    } while ((ret < 0) && (errno == EINTR));
    if (ret == 0) {
        return -EAGAIN;
    }
    n = ringk_node_recv_fd(ch->fd, w, sizeof(*w), &fd, &nfd, &flags);
    if (n == -EAGAIN) {
        return -EAGAIN;
    }
    if ((n == 0) || (n == -ECONNRESET)) {
        return ipc_peer_gone(ch);
    }
    if (n < 0) {
        return ipc_channel_fail(ch, (int)n, "recvmsg: %s", strerror((int)-n));
    }
    if ((n != (ssize_t)sizeof(*w)) || (flags & (MSG_TRUNC | MSG_CTRUNC)) || (nfd > 1)) {
        if (fd >= 0) {
            close(fd);
        }
        return ipc_channel_fail(ch, -EPROTO, "a message of %zd bytes (flags 0x%x) with %d "
                                "descriptors: messages are %zu bytes with at most one", n,
                                flags, nfd, sizeof(*w));
    }
    *fd_p = fd;
    return 0;
}

/* The listener: binds @a path (mode 0600), waits for one peer, unlinks the path. Returns the
 * connected socket, or -errno (logged). */
static int sock_accept(ringk_ipc_channel_t *ch, const struct sockaddr_un *sa, uint64_t deadline)
{
    struct pollfd pfd;
    int s, fd, ret;

    if ((s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0) {
        return -errno;
    }
    /* the mode bind gives the socket file comes from the socket's: only this user may connect
     * (the credentials are checked all the same) */
    fchmod(s, 0600);
    if (bind(s, (const struct sockaddr*)sa, sizeof(*sa)) != 0) {
        ret = (errno == EADDRINUSE) ? -EEXIST : -errno;
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc socket channel: bind %s: %s",
                      sa->sun_path, strerror(-ret));
        close(s);
        return ret;
    }
    fd = -1;
    if (listen(s, 1) != 0) {
        ret = -errno;
        goto out_unlink;
    }
    pfd = (struct pollfd){s, POLLIN, 0};
    do {
        ret = poll(&pfd, 1, ipc_ms_left(deadline));
    } while ((ret < 0) && (errno == EINTR));
    if (ret <= 0) {
        ret = (ret == 0) ? -ETIMEDOUT : -errno;
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc socket channel: no peer connected to "
                      "%s in %d ms", sa->sun_path, ch->timeout_ms);
        goto out_unlink;
    }
    fd  = accept4(s, NULL, NULL, SOCK_CLOEXEC);
    ret = (fd < 0) ? -errno : 0;
out_unlink:
    unlink(sa->sun_path); /* one peer per channel: the path is not needed any more */
    close(s);
    return (ret != 0) ? ret : fd;
}

/* The connecting end: connects to @a path, waiting for it to appear. Returns the socket, or
 * -errno (logged). */
static int sock_connect(const struct sockaddr_un *sa, uint64_t deadline)
{
    unsigned us = 50;
    int s, ret;

    if ((s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0) {
        return -errno;
    }
    while (connect(s, (const struct sockaddr*)sa, sizeof(*sa)) != 0) {
        if (((errno != ENOENT) && (errno != ECONNREFUSED) && (errno != EINTR)) ||
            (ipc_ms_left(deadline) == 0)) {
            ret = (ipc_ms_left(deadline) == 0) ? -ETIMEDOUT : -errno;
            ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc socket channel: connect %s: %s",
                          sa->sun_path, strerror(-ret));
            close(s);
            return ret;
        }
        ipc_backoff(&us);
    }
    return s;
}

int ipc_sock_open(ringk_ipc_channel_t *ch, const char *path, uint64_t deadline)
{
    struct sockaddr_un sa;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    ipc_wire_t hello, theirs;
    int fd, ret;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    fd = (ch->role == RINGK_IPC_CHANNEL_LISTEN) ? sock_accept(ch, &sa, deadline) :
                                                  sock_connect(&sa, deadline);
    if (fd < 0) {
        return fd;
    }
    ch->fd = fd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        return ipc_channel_fail(ch, -errno, "SO_PEERCRED: %s", strerror(errno));
    }
    if (cred.uid != geteuid()) {
        return ipc_channel_fail(ch, -EPERM, "the peer is user %u, this process is user %u",
                                (unsigned)cred.uid, (unsigned)geteuid());
    }
    if (cred.pid == 0) {
        return ipc_channel_fail(ch, -EXDEV, "the peer's process is not visible from this "
                                "process's pid namespace (another container)");
    }
    ipc_hello_init(&hello);
    if ((ret = ipc_sock_send(ch, &hello, -1)) != 0) {
        return ret;
    }
    ret = ipc_sock_recv(ch, &theirs, &fd, deadline);
    if (fd >= 0) {
        close(fd);
        return ipc_channel_fail(ch, -EPROTO, "a descriptor came with the peer's hello");
    }
    if (ret != 0) {
        return (ret == -EAGAIN) ? ipc_channel_fail(ch, -ETIMEDOUT, "no hello from the peer") :
                                  ret;
    }
    return ipc_hello_check(ch, &theirs, cred.pid, cred.uid);
}
