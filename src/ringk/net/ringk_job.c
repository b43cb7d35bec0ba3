/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk job bootstrap from the environment: RINGK_ROOT=host:port, RINGK_RANK, RINGK_SIZE give
 * an allgather over TCP; rank 0 listens, the others connect, each round within
 * RINGK_JOIN_TIMEOUT_MS. Everything a peer sends is checked (rank, length) before use; a
 * round that fails keeps what went wrong (ringk_job_env_why) for the caller's log line. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define JOB_TIMEOUT_MS_DEFAULT 60000   /* RINGK_JOIN_TIMEOUT_MS when unset */
#define JOB_TIMEOUT_MS_MAX     3600000 /* its largest accepted value */

typedef struct {
    char     root[300];   /* RINGK_ROOT as given, for messages */
    char     host[256];
    char     port[16];
    int      rank, size;
    long     timeout_ms;  /* RINGK_JOIN_TIMEOUT_MS: each round's limit */
    int      listen_fd;   /* rank 0, kept across rounds */
    char     why[640];    /* what the last round that failed met */
} env_job_t;

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Reads or writes exactly @a len bytes, waiting at most until @a deadline. */
static int xfer(int fd, void *buf, size_t len, int writing, double deadline)
{
    struct pollfd pfd = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
    char *p = buf;
    ssize_t n;

    while (len > 0) {
        if (poll(&pfd, 1, (int)(deadline - now_ms())) <= 0) {
            return -ETIMEDOUT;
        }
        n = writing ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n <= 0) {
            return (n == 0) ? -ECONNRESET : -errno;
        }
        p   += n;
        len -= n;
    }
    return 0;
}

/* A rank other than 0: connects to the root (which may not listen yet), sends its part and
 * receives everything. */
static int allgather_leaf(env_job_t *job, const void *in, void *out, size_t len,
                          double deadline)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    uint64_t hdr[2];
    int fd, ret, one = 1;

    if (getaddrinfo(job->host, job->port, &hints, &ai) != 0) {
        snprintf(job->why, sizeof(job->why), "RINGK_ROOT host '%s' cannot be resolved",
                 job->host);
        return -EHOSTUNREACH;
    }
    for (;;) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if ((fd >= 0) && (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)) {
            break;
        }
        ret = errno;
        if (fd >= 0) {
            close(fd);
        }
        if (now_ms() > deadline) {
            freeaddrinfo(ai);
            snprintf(job->why, sizeof(job->why), "rank %d could not connect to rank 0 at "
                     "RINGK_ROOT %s within RINGK_JOIN_TIMEOUT_MS %ld ms (last: %s); is rank 0 "
                     "running, with the same RINGK_ROOT?", job->rank, job->root, job->timeout_ms,
                     strerror(ret));
            return -ETIMEDOUT;
        }
        usleep(20000);
    }
    freeaddrinfo(ai);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    hdr[0] = job->rank;
    hdr[1] = len;
    if (((ret = xfer(fd, hdr, sizeof(hdr), 1, deadline)) == 0) &&
        ((ret = xfer(fd, (void*)in, len, 1, deadline)) == 0)) {
        ret = xfer(fd, out, len * job->size, 0, deadline);
    }
    close(fd);
    if (ret != 0) {
        snprintf(job->why, sizeof(job->why), "rank %d, connected to rank 0 at RINGK_ROOT %s, "
                 "did not get every rank's part within RINGK_JOIN_TIMEOUT_MS %ld ms: %s (rank 0 "
                 "waits for all %d ranks)", job->rank, job->root, job->timeout_ms,
                 strerror(-ret), job->size);
    }
    return ret;
}

/* The root: accepts every other rank, checks its header (a peer's: rank in range, not seen
 * yet, the agreed length), receives its part, then sends everything to each. */
static int allgather_root(env_job_t *job, void *out, size_t len, double deadline)
{
    int *fds = calloc(job->size, sizeof(*fds));
    int fd, i, ret = 0;
    uint64_t hdr[2], bad_len = 0;

    if (fds == NULL) {
        return -ENOMEM;
    }
    for (i = 1; (i < job->size) && (ret == 0); i++) {
        struct pollfd pfd = {.fd = job->listen_fd, .events = POLLIN};

        if (poll(&pfd, 1, (int)(deadline - now_ms())) <= 0) {
            ret = -ETIMEDOUT;
            break;
        }
        fd = accept4(job->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            ret = -errno;
            break;
        }
        ret = xfer(fd, hdr, sizeof(hdr), 0, deadline);
        if ((ret == 0) && ((hdr[0] == 0) || (hdr[0] >= (uint64_t)job->size) ||
                           (fds[hdr[0]] != 0) || (hdr[1] != len))) {
            bad_len = (hdr[1] != len) ? hdr[1] : 0;
            ret     = -EPROTO;
        }
        if (ret == 0) {
            fds[hdr[0]] = fd;
            ret = xfer(fd, (char*)out + hdr[0] * len, len, 0, deadline);
        } else {
            close(fd);
        }
    }
    if ((ret != 0) && (bad_len != 0)) {
        /* every round's parts are the same size in every process of one ringk build */
        snprintf(job->why, sizeof(job->why), "rank 0, listening at RINGK_ROOT %s: rank %llu "
                 "sent a part of %llu bytes where this process sends %zu: processes of "
                 "different ringk builds, or not ringk's exchange", job->root,
                 (unsigned long long)hdr[0], (unsigned long long)bad_len, len);
    } else if (ret != 0) {
        snprintf(job->why, sizeof(job->why), "rank 0, listening at RINGK_ROOT %s, heard from %d "
                 "of the other %d ranks within RINGK_JOIN_TIMEOUT_MS %ld ms: %s", job->root,
                 i - 1, job->size - 1, job->timeout_ms, strerror(-ret));
    }
    for (i = 1; i < job->size; i++) {
        if (fds[i] > 0) {
            if (ret == 0) {
                ret = xfer(fds[i], out, len * job->size, 1, deadline);
            }
            close(fds[i]);
        }
    }
    free(fds);
    return ret;
}

static int env_allgather(void *arg, const void *in, void *out, size_t len)
{
    env_job_t *job  = arg;
    double deadline = now_ms() + (double)job->timeout_ms;

    memcpy((char*)out + (size_t)job->rank * len, in, len);
    if (job->size == 1) {
        return 0;
    }
    return (job->rank != 0) ? allgather_leaf(job, in, out, len, deadline) :
                              allgather_root(job, out, len, deadline);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v;

    if ((s == NULL) || (*s == '\0')) {
        return -EINVAL;
    }
    errno = 0;
    v     = strtol(s, &end, 10);
    if ((errno != 0) || (*end != '\0') || (v < lo) || (v > hi)) {
        return -EINVAL;
    }
    *out = (int)v;
    return 0;
}

/* RINGK_JOIN_TIMEOUT_MS into @a ej: 0, or -EINVAL with @a err. */
static int timeout_from_env(env_job_t *ej, char *err, size_t err_len)
{
    const char *s = getenv("RINGK_JOIN_TIMEOUT_MS");
    int v;

    ej->timeout_ms = JOB_TIMEOUT_MS_DEFAULT;
    if ((s == NULL) || (*s == '\0')) {
        return 0;
    }
    if (parse_int(s, 1, JOB_TIMEOUT_MS_MAX, &v) != 0) {
        snprintf(err, err_len, "RINGK_JOIN_TIMEOUT_MS '%s' is not a number of milliseconds in "
                 "1..%d", s, JOB_TIMEOUT_MS_MAX);
        return -EINVAL;
    }
    ej->timeout_ms = v;
    return 0;
}

/* Rank 0 of a job of several processes listens on RINGK_ROOT: 0, or -EINVAL with @a err. */
static int root_listen(env_job_t *ej, char *err, size_t err_len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *ai;
    int one = 1;

    if (getaddrinfo(ej->host, ej->port, &hints, &ai) != 0) {
        snprintf(err, err_len, "RINGK_ROOT host '%s' cannot be resolved", ej->host);
        return -EINVAL;
    }
    ej->listen_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(ej->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if ((ej->listen_fd < 0) || (bind(ej->listen_fd, ai->ai_addr, ai->ai_addrlen) != 0) ||
        (listen(ej->listen_fd, ej->size) != 0)) {
        snprintf(err, err_len, "rank 0 cannot listen on RINGK_ROOT %s: %s", ej->root,
                 strerror(errno));
        freeaddrinfo(ai);
        return -EINVAL;
    }
    freeaddrinfo(ai);
    return 0;
}

static int env_set(const char *v)
{
    return (v != NULL) && (*v != '\0');
}

/* The job variables a partial set lacks, for a job of @a size processes (0: RINGK_SIZE is not
 * set), as "RINGK_SIZE and RINGK_ROOT" in @a buf: RINGK_SIZE always, RINGK_RANK and RINGK_ROOT
 * unless it is 1. 0 when the set is whole, else -EINVAL with @a err naming them. */
static int job_env_missing(const char *root, const char *rank, const char *size, int nprocs,
                           char *err, size_t err_len)
{
    const char *missing[3];
    char list[64] = "";
    unsigned n = 0, i;

    if (!env_set(size)) {
        missing[n++] = "RINGK_SIZE";
    }
    if (nprocs != 1) {
        if (!env_set(rank)) {
            missing[n++] = "RINGK_RANK";
        }
        if (!env_set(root)) {
            missing[n++] = "RINGK_ROOT";
        }
    }
    if (n == 0) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                 (i == 0) ? "" : (i + 1 == n) ? " and " : ", ", missing[i]);
    }
    snprintf(err, err_len, "the job's environment is incomplete: %s %s not set (RINGK_ROOT '%s', "
             "RINGK_RANK '%s', RINGK_SIZE '%s'; a job of several processes needs all three, a "
             "job of one none or RINGK_SIZE=1)", list, (n == 1) ? "is" : "are",
             root ? root : "", rank ? rank : "", size ? size : "");
    return -EINVAL;
}

int ringk_job_from_env(ringk_job_t *job, char *err, size_t err_len)
{
    const char *root = getenv("RINGK_ROOT"), *rank = getenv("RINGK_RANK"),
               *size = getenv("RINGK_SIZE"), *colon;
    env_job_t *ej;
    int port;

    if (!env_set(root) && !env_set(rank) && !env_set(size)) {
        job->rank = 0;
        job->size = 1;
        job->allgather = NULL;
        return 1; /* no job in the environment: one process */
    }
    if (!env_set(size)) {
        return job_env_missing(root, rank, size, 0, err, err_len); /* -EINVAL, naming them */
    }
    ej = calloc(1, sizeof(*ej));
    if (ej == NULL) {
        return -ENOMEM;
    }
    ej->listen_fd = -1;
    if (parse_int(size, 1, 4096, &ej->size) != 0) {
        snprintf(err, err_len, "RINGK_SIZE '%s' is not a number 1..4096", size);
        goto err;
    }
    if (job_env_missing(root, rank, size, ej->size, err, err_len) != 0) {
        goto err;
    }
    if (env_set(rank) && (parse_int(rank, 0, ej->size - 1, &ej->rank) != 0)) {
        snprintf(err, err_len, "RINGK_RANK '%s' is not a number 0..%d", rank, ej->size - 1);
        goto err;
    }
    if (timeout_from_env(ej, err, err_len) != 0) {
        goto err;
    }
    if (ej->size > 1) {
        colon = strrchr(root, ':');
        if ((colon == NULL) || (colon == root) || ((size_t)(colon - root) >= sizeof(ej->host)) ||
            (strlen(root) >= sizeof(ej->root)) || (parse_int(colon + 1, 1, 65535, &port) != 0)) {
            snprintf(err, err_len, "RINGK_ROOT '%s' is not HOST:PORT (port 1..65535)", root);
            goto err;
        }
        strcpy(ej->root, root);
        memcpy(ej->host, root, colon - root);
        snprintf(ej->port, sizeof(ej->port), "%d", port);
        if ((ej->rank == 0) && (root_listen(ej, err, err_len) != 0)) {
            goto err;
        }
    }
    job->rank      = ej->rank;
    job->size      = ej->size;
    job->allgather = env_allgather;
    job->arg       = ej;
    return 0;

err:
    if (ej->listen_fd >= 0) {
        close(ej->listen_fd);
    }
    free(ej);
    return -EINVAL;
}

const char *ringk_job_env_why(const ringk_job_t *job)
{
    const env_job_t *ej = job->arg;

    return ((job->allgather == env_allgather) && (ej != NULL) && (ej->why[0] != '\0')) ?
           ej->why : NULL;
}

void ringk_job_env_release(ringk_job_t *job)
{
    env_job_t *ej;

    if ((job->allgather != env_allgather) || (job->arg == NULL)) {
        return;
    }
    ej = job->arg;
    if (ej->listen_fd >= 0) {
        close(ej->listen_fd);
    }
    free(ej);
    job->arg = NULL;
}
