/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk node identity: boot id, pid and IPC namespaces, /dev/shm. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_node.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* FNV-1a, 64 bits: a stable hash of a few bytes. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    while (len-- > 0) {
        h ^= *p++;
        h *= 0x100000001b3ull;
    }
    return h;
}

void ringk_node_id_get(ringk_node_id_t *id)
{
    const uint64_t seed = 0xcbf29ce484222325ull;
    char boot[64] = "";
    struct stat st;
    uint64_t h;
    FILE *f;

    memset(id, 0, sizeof(*id));
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, sizeof(boot), f) != NULL) {
            id->boot = fnv1a(seed, boot, strlen(boot));
        }
        fclose(f);
    }
    if (stat("/proc/self/ns/pid", &st) == 0) {
        id->pid_ns = st.st_ino;
    }
    h = seed;
    if (stat("/proc/self/ns/ipc", &st) == 0) {
        h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
    }
    /* The wakeup socket is an abstract unix socket, which lives in the network namespace: a
     * process in another network namespace is another host for ringk. */
    if (stat("/proc/self/ns/net", &st) == 0) {
        h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
    }
    if (stat("/dev/shm", &st) == 0) {
        h = fnv1a(h, &st.st_dev, sizeof(st.st_dev));
        h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
    }
    id->ipc_shm = h;
}

int ringk_node_id_same(const ringk_node_id_t *a, const ringk_node_id_t *b, char *reason,
                       size_t reason_len)
{
    if (a->boot != b->boot) {
        snprintf(reason, reason_len, "different kernel boot ids: another node");
        return 0;
    }
    if (a->pid_ns != b->pid_ns) {
        snprintf(reason, reason_len, "same kernel but different PID namespaces: the peer's "
                 "/proc/<pid>/fd cannot be reached");
        return 0;
    }
    if (a->ipc_shm != b->ipc_shm) {
        snprintf(reason, reason_len, "same kernel but different IPC or network namespace or "
                 "/dev/shm: another container");
        return 0;
    }
    snprintf(reason, reason_len, "same node: same boot id, PID, IPC and network namespaces and "
             "/dev/shm");
    return 1;
}

/* Whether this process has CAP_SYS_PTRACE in its effective set (/proc/self/status CapEff). */
static int ringk_node_cap_sys_ptrace(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    uint64_t cap = 0;
    char line[256];

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "CapEff: %" SCNx64, &cap) == 1) {
            break;
        }
    }
    fclose(f);
    return (cap >> 19) & 1; /* CAP_SYS_PTRACE */
}

int ringk_node_ptrace_allow(const char *scope_file, char *why, size_t why_len)
{
    FILE *f = fopen(scope_file, "r");
    int scope = -1;

    if (f == NULL) {
        snprintf(why, why_len, "no Yama (%s: %s): peers of this user may attach", scope_file,
                 strerror(errno));
        return 1;
    }
    if (fscanf(f, "%d", &scope) != 1) {
        scope = -1;
    }
    fclose(f);
    switch (scope) {
    case 0:
        snprintf(why, why_len, "Yama ptrace_scope 0: peers of this user may attach");
        return 1;
    case 1:
        if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0) {
            snprintf(why, why_len, "Yama ptrace_scope 1: PR_SET_PTRACER_ANY set, peers of "
                     "this user may attach");
            return 1;
        }
        snprintf(why, why_len, "Yama ptrace_scope 1 and prctl(PR_SET_PTRACER) failed: %s",
                 strerror(errno));
        return 0;
    case 2:
        if (ringk_node_cap_sys_ptrace()) {
            snprintf(why, why_len, "Yama ptrace_scope 2: this process has CAP_SYS_PTRACE");
            return 1;
        }
        snprintf(why, why_len, "Yama ptrace_scope 2 and no CAP_SYS_PTRACE: peers cannot "
                 "open this process's segment");
        return 0;
    default:
        snprintf(why, why_len, "Yama ptrace_scope %d (%s): attaching is disabled", scope,
                 scope_file);
        return 0;
    }
}

int ringk_node_open_peer(uint32_t pid, int fd, int flags, const char *name, struct stat *st,
                         char *link, size_t link_len, ringk_peer_err_t *err_p)
{
    char path[64], want[128];
    ssize_t n;
    int ours, saved;

    link[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%" PRIu32 "/fd/%d", pid, fd);
    ours = open(path, O_CLOEXEC | flags);
    if (ours < 0) {
        *err_p = RINGK_PEER_OPEN;
        return -1;
    }
    /* what was opened, named through our own descriptor */
    snprintf(path, sizeof(path), "/proc/self/fd/%d", ours);
    n = readlink(path, link, link_len - 1);
    link[(n > 0) ? n : 0] = '\0';
    if (name != NULL) {
        snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
        if (strcmp(link, want) != 0) {
            *err_p = RINGK_PEER_NAME;
            goto err;
        }
    }
    if (fstat(ours, st) != 0) {
        *err_p = RINGK_PEER_STAT;
        goto err;
    }
    if ((st->st_uid != geteuid()) || ((st->st_mode & 077) != 0) || !S_ISREG(st->st_mode)) {
        *err_p = RINGK_PEER_OWNER;
        goto err;
    }
    *err_p = RINGK_PEER_OK;
    return ours;

err:
    saved = errno;
    close(ours);
    errno = saved;
    return -1;
}

const char *ringk_node_proc_stat(int pid, char *buf, size_t len)
{
    char path[64];
    ssize_t n;
    int fd;

    if ((pid <= 0) || (len < 2)) {
        return NULL;
    }
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        return NULL;
    }
    n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0) {
        return NULL;
    }
    buf[n] = '\0';
    return strrchr(buf, ')');
}

ssize_t ringk_node_recv_fd(int s, void *buf, size_t len, int *fd_p, int *nfd_p, int *flags_p)
{
    union {
        char           buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } cbuf;
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    struct msghdr mh;
    struct cmsghdr *cm;
    size_t i;
    ssize_t n;
    int got;

    *fd_p  = -1;
    *nfd_p = 0;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov        = &iov;
    mh.msg_iovlen     = 1;
    mh.msg_control    = cbuf.buf;
    mh.msg_controllen = sizeof(cbuf.buf);
    do {
        n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    } while ((n < 0) && (errno == EINTR));
    if (n < 0) {
        *flags_p = 0;
        return -errno;
    }
    *flags_p = mh.msg_flags;
    for (cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
        if ((cm->cmsg_level != SOL_SOCKET) || (cm->cmsg_type != SCM_RIGHTS)) {
            continue;
        }
        for (i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
            memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (*fd_p < 0) {
                *fd_p = got;
            } else {
                close(got);
            }
            (*nfd_p)++;
        }
    }
    return n;
}
