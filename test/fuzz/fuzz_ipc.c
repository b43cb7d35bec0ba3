/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: what the peer of an IPC channel (ringk_ipc.h) writes. The first byte picks
 * the channel: a shared-memory mailbox whose write count, closed flag and slots are the input
 * (as a hostile peer may write them at any moment), or a socket whose messages (each with a
 * length and maybe a descriptor) are the input. Every handle a receive accepts must be safe to
 * use: its type known, its size and offset in range, its device terminated, a descriptor with
 * POSIX_FD and only then, the peer's own; it is then imported (through the cache) and
 * released. */
#define _GNU_SOURCE /* memfd_create */
#include "ipc_shm.c" /* the mailbox's layout */

#include <ringk/ipc/ipc.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* The target has no libringk: its log goes nowhere. */
void ringk_log_msg(ringk_ctx_t *ctx, int level, const char *fmt, ...)
{
    (void)ctx;
    (void)level;
    (void)fmt;
}

int ringk_log_bad_arg(ringk_ctx_t *ctx, const char *fn, const char *fmt, ...)
{
    (void)ctx;
    (void)fn;
    (void)fmt;
    return -EINVAL;
}

static void check(int ok)
{
    if (!ok) {
        abort();
    }
}

/* A message's sender (bytes 8-11) and a handle's owner (bytes 80-83) of 0 become this
 * process's pid, the peer's in this target: the inputs stay valid from run to run; other
 * values are a peer naming someone else. */
static void own_pids(uint8_t *msg, size_t len)
{
    int32_t me = (int32_t)getpid(), v;

    if (len >= 12) {
        memcpy(&v, msg + 8, 4);
        if (v == 0) {
            memcpy(msg + 8, &me, 4);
        }
    }
    if (len >= 84) {
        memcpy(&v, msg + 80, 4);
        if (v == 0) {
            memcpy(msg + 80, &me, 4);
        }
    }
}

/* Receives until the channel says no more, checking and using each handle accepted. */
static void drain(ringk_ipc_channel_t *ch)
{
    ringk_ipc_handle_t h;
    void *p;
    int i, ret;

    for (i = 0; i < 64; i++) {
        ret = ringk_ipc_channel_recv(ch, &h, 0);
        if (ret != 0) {
            check((ret == -EAGAIN) || (ret == -EPIPE) || (ret == -EPROTO) || (ret == -EIO));
            if (ret != -EAGAIN) {
                check(ringk_ipc_channel_recv(ch, &h, 0) == ret); /* and so it stays */
            }
            return;
        }
        check((h.type >= RINGK_IPC_TYPE_LEGACY) && (h.type <= RINGK_IPC_TYPE_POSIX_FD));
        check((h.size >= 1) && (h.size <= RINGK_IPC_SIZE_MAX) && (h.offset < h.size));
        check(memchr(h.device, '\0', sizeof(h.device)) != NULL);
        check((h.type == RINGK_IPC_TYPE_POSIX_FD) == (h.fd >= 0));
        check((h.pid == ch->peer_pid) && (h.id != 0));
        if (ringk_ipc_import(&h, &p) == 0) {
            check(ringk_ipc_close(p) == 0);
        }
        ringk_ipc_handle_release(&h);
    }
}

static void fuzz_shm(const uint8_t *data, size_t size)
{
    ringk_ipc_channel_t ch;
    ipc_chan_shm_t *shm = calloc(1, sizeof(*shm));
    size_t n;

    check(shm != NULL);
    memset(&ch, 0, sizeof(ch));
    ch.kind       = RINGK_IPC_CHANNEL_SHM;
    ch.role       = RINGK_IPC_CHANNEL_LISTEN;
    ch.fd         = -1;
    ch.peer_pid   = getpid();
    ch.peer_start = ringk_ipc_proc_start(ch.peer_pid);
    ch.shm        = shm;
    ch.tx         = &shm->box[0];
    ch.rx         = &shm->box[1];
    /* the peer's words: its write count, its closed flag, then the slots */
    if (size >= 9) {
        memcpy(&shm->box[1].prod, data, 8);
        shm->box[1].closed = data[8] & 1;
        data += 9;
        size -= 9;
    }
    n = (size < sizeof(shm->box[1].slot)) ? size : sizeof(shm->box[1].slot);
    memcpy(shm->box[1].slot, data, n);
    for (size_t i = 0; i < SHM_SLOTS; i++) {
        own_pids((uint8_t*)&shm->box[1].slot[i], sizeof(ipc_wire_t));
    }
    drain(&ch);
    free(shm);
}

static void fuzz_sock(const uint8_t *data, size_t size)
{
    ringk_ipc_channel_t ch;
    char cbuf[CMSG_SPACE(2 * sizeof(int))];
    uint8_t msg[256];
    struct msghdr mh;
    struct cmsghdr *cm;
    struct iovec iov;
    int sv[2], fds[2], nfd, len;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        return;
    }
    /* messages: a byte of length (0..255, times 1; 168 is a whole message) and descriptors
     * (bits 0-1 of the next byte: 0, 1 or 2 memfds), then the bytes */
    while (size >= 2) {
        len = data[0];
        nfd = data[1] % 3;
        data += 2;
        size -= 2;
        len = ((size_t)len > size) ? (int)size : len;
        memset(&mh, 0, sizeof(mh));
        memcpy(msg, data, (size_t)len);
        own_pids(msg, (size_t)len);
        iov.iov_base   = msg;
        iov.iov_len    = (size_t)len;
        mh.msg_iov     = &iov;
        mh.msg_iovlen  = 1;
        fds[0] = fds[1] = -1;
        if (nfd > 0) {
            fds[0] = memfd_create("fuzz_ipc", MFD_CLOEXEC);
            fds[1] = (nfd > 1) ? memfd_create("fuzz_ipc", MFD_CLOEXEC) : -1;
            memset(cbuf, 0, sizeof(cbuf));
            mh.msg_control    = cbuf;
            mh.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
            cm                = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level    = SOL_SOCKET;
            cm->cmsg_type     = SCM_RIGHTS;
            cm->cmsg_len      = CMSG_LEN(nfd * sizeof(int));
            memcpy(CMSG_DATA(cm), fds, nfd * sizeof(int));
        }
        if (len > 0) {
            sendmsg(sv[1], &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (fds[0] >= 0) {
            close(fds[0]);
        }
        if (fds[1] >= 0) {
            close(fds[1]);
        }
        data += len;
        size -= (size_t)len;
    }
    close(sv[1]);
    memset(&ch, 0, sizeof(ch));
    ch.kind       = RINGK_IPC_CHANNEL_SOCKET;
    ch.role       = RINGK_IPC_CHANNEL_CONNECT;
    ch.fd         = sv[0];
    ch.peer_pid   = getpid();
    ch.peer_start = ringk_ipc_proc_start(ch.peer_pid);
    drain(&ch);
    close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    if (data[0] & 1) {
        fuzz_sock(data + 1, size - 1);
    } else {
        fuzz_shm(data + 1, size - 1);
    }
    ringk_ipc_invalidate(getpid(), 0); /* each input starts with nothing revoked in use */
    return 0;
}
