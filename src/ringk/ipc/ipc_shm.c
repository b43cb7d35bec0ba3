/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk IPC channels through a mailbox in a shared-memory file (/dev/shm/NAME, mode 0600,
 * unlinked once both ends have it): two single-producer rings of messages, no descriptors. */
#include "ringk_config.h"

#include "ipc.h"
#include "../ringk_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_MAGIC   0x4d48534bu /* "KSHM" */
#define SHM_VERSION 1u
#define SHM_SLOTS   16u         /* messages a direction holds */
#define SHM_LINE    64

/* One direction: a single-producer, single-consumer ring of messages.
 *
 *   +-----------+-----------+----------------------------------------+
 *   | prod (64) | cons (64) | slot[0] .. slot[SHM_SLOTS-1] (168 each)  |
 *   +-----------+-----------+----------------------------------------+
 */
struct ipc_box_shm {
    uint64_t   prod;      /* messages written (the sender's) */
    uint8_t    pad0[SHM_LINE - 8];
    uint64_t   cons;      /* messages read (the receiver's) */
    uint32_t   closed;    /* the sender closed its end */
    uint8_t    pad1[SHM_LINE - 12];
    ipc_wire_t slot[SHM_SLOTS];
};

/* The file: a header, then box[0] (listener -> connector) and box[1] (connector -> listener). */
struct ipc_chan_shm {
    uint32_t      magic;   /* written last by the listener (release): the file is ready */
    uint32_t      version;
    uint32_t      slots;
    uint32_t      slot_bytes;
    uint8_t       pad[SHM_LINE - 16];
    ipc_box_shm_t box[2];
};

static_assert(sizeof(ipc_box_shm_t) % SHM_LINE == 0, "a box is whole cache lines");
static_assert(offsetof(ipc_box_shm_t, cons) == SHM_LINE, "prod and cons on their own lines");
static_assert(offsetof(ipc_chan_shm_t, box) == SHM_LINE, "the header is one line");


int ipc_shm_send(ringk_ipc_channel_t *ch, const ipc_wire_t *w, uint64_t deadline)
{
    uint64_t prod = ch->tx->prod, cons; /* prod: this end's own */
    unsigned us = 50;

    for (;;) {
        /* S1: the slot is free once the receiver moved past it; pairs with R2 */
        cons = __atomic_load_n(&ch->tx->cons, __ATOMIC_ACQUIRE);
        if (cons > prod) {
            return ipc_channel_fail(ch, -EPROTO, "the peer's read count %llu is past the %llu "
                                    "messages sent", (unsigned long long)cons,
                                    (unsigned long long)prod);
        }
        if (prod - cons < SHM_SLOTS) {
            break;
        }
        if (!ipc_peer_alive(ch)) {
            return ipc_peer_gone(ch);
        }
        if (ipc_ms_left(deadline) == 0) {
            return -EAGAIN;
        }
        ipc_backoff(&us);
    }
    ch->tx->slot[prod % SHM_SLOTS] = *w;
    /* S2: publish the message; pairs with R1 */
    __atomic_store_n(&ch->tx->prod, prod + 1, __ATOMIC_RELEASE);
    return 0;
}

int ipc_shm_recv(ringk_ipc_channel_t *ch, ipc_wire_t *w, uint64_t deadline)
{
    uint64_t cons = ch->rx->cons, prod; /* cons: this end's own */
    unsigned us = 50;

    for (;;) {
        /* R1: the message is written once prod passed it; pairs with S2 */
        prod = __atomic_load_n(&ch->rx->prod, __ATOMIC_ACQUIRE);
        if ((prod < cons) || (prod - cons > SHM_SLOTS)) {
            return ipc_channel_fail(ch, -EPROTO, "the peer's write count %llu is not within %u of "
                                    "the %llu messages read", (unsigned long long)prod, SHM_SLOTS,
                                    (unsigned long long)cons);
        }
        if (prod != cons) {
            break;
        }
        if (__atomic_load_n(&ch->rx->closed, __ATOMIC_ACQUIRE) || !ipc_peer_alive(ch)) {
            return ipc_peer_gone(ch);
        }
        if (ipc_ms_left(deadline) == 0) {
            return -EAGAIN;
        }
        ipc_backoff(&us);
    }
    *w = ch->rx->slot[cons % SHM_SLOTS];
    /* R2: give the slot back; pairs with S1 */
    __atomic_store_n(&ch->rx->cons, cons + 1, __ATOMIC_RELEASE);
    return 0;
}

/* The mailbox file @a path: the listener creates it (mode 0600, sized), the connecting end
 * opens it once it exists, is this user's with mode 0600 and is sized. Returns the descriptor,
 * or -errno (logged). */
static int shm_file(const ringk_ipc_channel_t *ch, const char *path, uint64_t deadline)
{
    struct stat st;
    unsigned us = 50;
    int fd, ret;

    if (ch->role == RINGK_IPC_CHANNEL_LISTEN) {
        fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            ret = -errno;
            ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc shm channel: create /dev/shm%s: %s",
                          path, strerror(errno));
            return ret;
        }
        fchmod(fd, 0600); /* whatever the umask */
        if (ftruncate(fd, sizeof(ipc_chan_shm_t)) != 0) {
            ret = -errno;
            close(fd);
            shm_unlink(path);
            return ret;
        }
        return fd;
    }
    while ((fd = shm_open(path, O_RDWR | O_CLOEXEC, 0)) < 0) {
        if ((errno != ENOENT) || (ipc_ms_left(deadline) == 0)) {
            ret = (errno == ENOENT) ? -ETIMEDOUT : -errno;
            ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc shm channel: open /dev/shm%s: %s",
                          path, strerror(-ret));
            return ret;
        }
        ipc_backoff(&us);
    }
    if ((fstat(fd, &st) != 0) || !S_ISREG(st.st_mode) || (st.st_uid != geteuid()) ||
        (st.st_mode & 077)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk ipc shm channel: /dev/shm%s is not a file "
                      "of user %u with mode 0600 (owner %u, mode %04o)", path,
                      (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        close(fd);
        return -EPERM;
    }
    while ((uint64_t)st.st_size < sizeof(ipc_chan_shm_t)) { /* the listener sizes it */
        if ((ipc_ms_left(deadline) == 0) || (fstat(fd, &st) != 0)) {
            close(fd);
            return -ETIMEDOUT;
        }
        ipc_backoff(&us);
    }
    return fd;
}

int ipc_shm_open(ringk_ipc_channel_t *ch, const char *name, uint64_t deadline)
{
    char path[128];
    ipc_wire_t hello, theirs;
    unsigned us = 50;
    void *p;
    int fd, ret;

    snprintf(path, sizeof(path), "/%s", name);
    if ((fd = shm_file(ch, path, deadline)) < 0) {
        return fd;
    }
    p = mmap(NULL, sizeof(ipc_chan_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ret = (p == MAP_FAILED) ? -errno : 0;
    close(fd);
    if (ret != 0) {
        if (ch->role == RINGK_IPC_CHANNEL_LISTEN) {
            shm_unlink(path);
        }
        return ret;
    }
    ch->shm = p;
    if (ch->role == RINGK_IPC_CHANNEL_LISTEN) {
        ch->shm->version    = SHM_VERSION;
        ch->shm->slots      = SHM_SLOTS;
        ch->shm->slot_bytes = sizeof(ipc_wire_t);
        /* M1: the header and the zeroed boxes before the magic; pairs with M2 */
        __atomic_store_n(&ch->shm->magic, SHM_MAGIC, __ATOMIC_RELEASE);
        ch->tx = &ch->shm->box[0];
        ch->rx = &ch->shm->box[1];
    } else {
        /* M2: pairs with M1 */
        while (__atomic_load_n(&ch->shm->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC) {
            if (ipc_ms_left(deadline) == 0) {
                return ipc_channel_fail(ch, -ETIMEDOUT, "/dev/shm%s was never made ready", path);
            }
            ipc_backoff(&us);
        }
        if ((ch->shm->version != SHM_VERSION) || (ch->shm->slots != SHM_SLOTS) ||
            (ch->shm->slot_bytes != sizeof(ipc_wire_t))) {
            return ipc_channel_fail(ch, -EPROTO, "/dev/shm%s has version %u, %u slots of %u bytes "
                                    "(this library: %u, %u of %zu)", path, ch->shm->version,
                                    ch->shm->slots, ch->shm->slot_bytes, SHM_VERSION, SHM_SLOTS,
                                    sizeof(ipc_wire_t));
        }
        shm_unlink(path); /* both ends have it now */
        ch->tx = &ch->shm->box[1];
        ch->rx = &ch->shm->box[0];
        ipc_hello_init(&hello);
        if ((ret = ipc_shm_send(ch, &hello, deadline)) != 0) {
            return ret;
        }
    }
    ret = ipc_shm_recv(ch, &theirs, deadline);
    if (ch->role == RINGK_IPC_CHANNEL_LISTEN) {
        shm_unlink(path); /* the peer did, or never came */
    }
    if (ret != 0) {
        return (ret == -EAGAIN) ? ipc_channel_fail(ch, -ETIMEDOUT, "no peer's hello in /dev/shm%s "
                                                   "in %d ms", path, ch->timeout_ms) : ret;
    }
    /* the listener answers before it checks, as on a socket: a peer it refuses then refuses
     * it too, and says why, instead of finding the channel closed */
    if (ch->role == RINGK_IPC_CHANNEL_LISTEN) {
        ipc_hello_init(&hello);
        if ((ret = ipc_shm_send(ch, &hello, deadline)) != 0) {
            return ret;
        }
    }
    return ipc_hello_check(ch, &theirs, 0, 0);
}

void ipc_shm_close(ringk_ipc_channel_t *ch)
{
    if (ch->tx != NULL) {
        /* C1: the peer's receive sees the end after the last message; pairs with its acquire
         * of closed in ipc_shm_recv */
        __atomic_store_n(&ch->tx->closed, 1, __ATOMIC_RELEASE);
    }
    munmap(ch->shm, sizeof(ipc_chan_shm_t));
    ch->shm = NULL;
}
