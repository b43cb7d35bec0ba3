/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the service by which a process hands the descriptor of its CUDA device memory to
 * the device kernels' hosts of other processes of the node (ringk_dev_share.c). A cuMem
 * allocation's POSIX descriptor names an allocation of the driver, not a file: /proc/<pid>/fd
 * cannot open it again, so it travels by SCM_RIGHTS. A thread answers on an abstract Unix
 * socket "ringk-devmem-<pid>-<token in 16 hex digits>" (the token of the process's directory
 * entries), to processes of its own user that name that token; the asker checks that the
 * socket is that process's and of its user (SO_PEERCRED), so that another process cannot
 * stand in for it under its name. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"
#include "core/ringk_node.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define FDSVC_MAGIC    0x6d65647665646b72ull /* "rkdevdem" */
#define FDSVC_RECV_MS  250                   /* how long the service waits for a request */

struct ringk_dev_fdsvc {
    int       sock;     /* listening */
    int       stop[2];  /* a pipe: written to stop the thread */
    int       fd;       /* what it hands out */
    uint64_t  token, bytes;
    uint64_t  given;    /* descriptors handed out (atomic) */
    pid_t     pid;      /* the process whose thread it is (a fork()ed child has none) */
    pthread_t thread;
};

/* A request names the token; the answer says the size, and carries the descriptor where
 * status is 0. */
typedef struct {
    uint64_t magic, token;
} fdsvc_req_t;

typedef struct {
    uint64_t magic, token, bytes;
    int32_t  status;
    uint32_t pad;
} fdsvc_ans_t;

/* The socket's abstract name (a leading NUL), its length for bind / connect in *@a len_p. */
static void fdsvc_addr(struct sockaddr_un *sa, socklen_t *len_p, uint32_t pid, uint64_t token)
{
    int n;

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "ringk-devmem-%" PRIu32 "-%016"
                 PRIx64, pid, token);
    *len_p = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* Answers one connection @a c: the descriptor to a process of this user naming the token. */
static void fdsvc_answer(ringk_dev_fdsvc_t *svc, int c)
{
    struct timeval tv = { .tv_sec = FDSVC_RECV_MS / 1000,
                          .tv_usec = (FDSVC_RECV_MS % 1000) * 1000 };
    union {
        char           buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    fdsvc_req_t req;
    fdsvc_ans_t ans;
    struct iovec iov = { .iov_base = &ans, .iov_len = sizeof(ans) };
    struct msghdr mh;
    struct cmsghdr *cm;

    memset(&ans, 0, sizeof(ans));
    memset(&mh, 0, sizeof(mh));
    ans.magic  = FDSVC_MAGIC;
    ans.status = -EPERM;
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if ((getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) ||
        (cred.uid != geteuid()) ||
        (recv(c, &req, sizeof(req), 0) != (ssize_t)sizeof(req)) ||
        (req.magic != FDSVC_MAGIC) || (req.token != svc->token)) {
        send(c, &ans, sizeof(ans), MSG_NOSIGNAL); /* refused: no descriptor */
        return;
    }
    ans.token  = svc->token;
    ans.bytes  = svc->bytes;
    ans.status = 0;
    mh.msg_iov        = &iov;
    mh.msg_iovlen     = 1;
    mh.msg_control    = u.buf;
    mh.msg_controllen = sizeof(u.buf);
    cm                = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level    = SOL_SOCKET;
    cm->cmsg_type     = SCM_RIGHTS;
    cm->cmsg_len      = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &svc->fd, sizeof(int));
    if (sendmsg(c, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(ans)) {
        __atomic_add_fetch(&svc->given, 1, __ATOMIC_RELAXED);
    }
}

static void *fdsvc_thread(void *arg)
{
    ringk_dev_fdsvc_t *svc = arg;
    struct pollfd pf[2] = { { .fd = svc->sock, .events = POLLIN },
                            { .fd = svc->stop[0], .events = POLLIN } };
    int c;

    for (;;) {
        if ((poll(pf, 2, -1) < 0) && (errno != EINTR)) {
            break;
        }
        if (pf[1].revents != 0) {
            break;
        }
        if (pf[0].revents & POLLIN) {
            c = accept4(svc->sock, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0) {
                fdsvc_answer(svc, c);
                close(c);
            }
        }
    }
    return NULL;
}

int ringk_dev_fdsvc_start(ringk_dev_fdsvc_t **svc_p, int fd, uint64_t token, uint64_t bytes,
                          char *why, size_t why_len)
{
    ringk_dev_fdsvc_t *svc = calloc(1, sizeof(*svc));
    struct sockaddr_un sa;
    socklen_t len;
    int err;

    if (svc == NULL) {
        snprintf(why, why_len, "no memory");
        return -ENOMEM;
    }
    svc->stop[0] = svc->stop[1] = -1;
    svc->pid     = getpid();
    svc->fd      = fd;
    svc->token   = token;
    svc->bytes   = bytes;
    fdsvc_addr(&sa, &len, (uint32_t)getpid(), token);
    /* non-blocking: a connection gone between poll() and accept4() does not stop the thread */
    svc->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if ((svc->sock < 0) || (bind(svc->sock, (struct sockaddr*)&sa, len) != 0) ||
        (listen(svc->sock, 16) != 0) || (pipe2(svc->stop, O_CLOEXEC) != 0)) {
        err = -errno;
        snprintf(why, why_len, "the socket @%s: %s", sa.sun_path + 1, strerror(-err));
        goto err;
    }
    if ((err = -pthread_create(&svc->thread, NULL, fdsvc_thread, svc)) != 0) {
        snprintf(why, why_len, "pthread_create: %s", strerror(-err));
        goto err;
    }
    *svc_p = svc;
    return 0;

err:
    if (svc->sock >= 0) {
        close(svc->sock);
    }
    if (svc->stop[0] >= 0) {
        close(svc->stop[0]);
        close(svc->stop[1]);
    }
    free(svc);
    return err;
}

uint64_t ringk_dev_fdsvc_stop(ringk_dev_fdsvc_t *svc)
{
    uint64_t given;
    char b = 1;

    if (svc == NULL) {
        return 0;
    }
    if (svc->pid != getpid()) { /* a fork()ed child: its parent's thread serves on */
        close(svc->sock);
        close(svc->stop[0]);
        close(svc->stop[1]);
        free(svc);
        return 0;
    }
    while ((write(svc->stop[1], &b, 1) < 0) && (errno == EINTR)) {
    }
    pthread_join(svc->thread, NULL);
    close(svc->sock); /* the name goes with the socket: later connects are refused */
    close(svc->stop[0]);
    close(svc->stop[1]);
    given = __atomic_load_n(&svc->given, __ATOMIC_RELAXED);
    free(svc);
    return given;
}

/* The answer on @a c within @a timeout_ms: 0 with the descriptor in *@a fd_p, or -errno. */
static int fdsvc_recv(int c, uint64_t token, int timeout_ms, int *fd_p, uint64_t *bytes_p,
                      char *why, size_t why_len)
{
    struct pollfd pf = { .fd = c, .events = POLLIN };
    fdsvc_ans_t ans;
    int fd, nfd, flags;
    ssize_t n;

    if (poll(&pf, 1, timeout_ms) <= 0) {
        snprintf(why, why_len, "no answer within %d ms", timeout_ms);
        return -ETIMEDOUT;
    }
    n = ringk_node_recv_fd(c, &ans, sizeof(ans), &fd, &nfd, &flags);
    if ((n == (ssize_t)sizeof(ans)) && (ans.magic == FDSVC_MAGIC) && (ans.status == 0) &&
        (ans.token == token) && (nfd == 1) && !(flags & (MSG_CTRUNC | MSG_TRUNC))) {
        *fd_p    = fd;
        *bytes_p = ans.bytes;
        return 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    if ((n == (ssize_t)sizeof(ans)) && (ans.magic == FDSVC_MAGIC) && (ans.status != 0)) {
        snprintf(why, why_len, "refused (%s)", strerror(-ans.status));
        return -EPERM;
    }
    snprintf(why, why_len, "a malformed answer (%zd bytes, %d descriptors)", n, nfd);
    return -EPROTO;
}

/* Connects @a c to @a sa within @a timeout_ms (a full backlog answers EAGAIN: tried again
 * every 10 ms): 0, or -errno. */
static int fdsvc_connect(int c, const struct sockaddr_un *sa, socklen_t len, int timeout_ms)
{
    int waited;

    for (waited = 0;; waited += 10) {
        if (connect(c, (const struct sockaddr*)sa, len) == 0) {
            return 0;
        }
        if ((errno != EAGAIN) || (waited >= timeout_ms)) {
            return (errno == EAGAIN) ? -ETIMEDOUT : -errno;
        }
        usleep(10000);
    }
}

int ringk_dev_fdsvc_fetch(uint32_t pid, uint64_t token, int timeout_ms, int *fd_p,
                          uint64_t *bytes_p, char *why, size_t why_len)
{
    fdsvc_req_t req = { .magic = FDSVC_MAGIC, .token = token };
    struct sockaddr_un sa;
    struct ucred cred = { .pid = -1, .uid = (uid_t)-1, .gid = (gid_t)-1 };
    socklen_t len, clen = sizeof(cred);
    int c, err;

    fdsvc_addr(&sa, &len, pid, token);
    /* non-blocking: neither a full backlog nor a silent service holds the caller past its
     * timeout (it may hold its context's lock) */
    c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c < 0) {
        err = -errno;
        snprintf(why, why_len, "socket: %s", strerror(-err));
        return err;
    }
    if ((err = fdsvc_connect(c, &sa, len, timeout_ms)) != 0) {
        snprintf(why, why_len, "no descriptor service @%s (%s)", sa.sun_path + 1,
                 strerror(-err));
        close(c);
        return (err == -ETIMEDOUT) ? err : -ESRCH;
    }
    /* the kernel's word on who listens there: that process, of this user */
    if ((getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) ||
        (cred.pid != (pid_t)pid) || (cred.uid != geteuid())) {
        snprintf(why, why_len, "@%s is served by process %d of user %u, not process %" PRIu32
                 " of this user", sa.sun_path + 1, (int)cred.pid, (unsigned)cred.uid, pid);
        close(c);
        return -EPERM;
    }
    if (send(c, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
        err = -errno;
        snprintf(why, why_len, "send to @%s: %s", sa.sun_path + 1, strerror(-err));
        close(c);
        return err;
    }
    err = fdsvc_recv(c, token, timeout_ms, fd_p, bytes_p, why, why_len);
    close(c);
    return err;
}
