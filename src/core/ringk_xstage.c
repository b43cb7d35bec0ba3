/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk cross-process staging: the area, the initiator's pipelined transfer and the target's
 * service of posted slots (layout and protocol in ringk_xstage.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#endif
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_xstage.h"
#include "ringk_cuda.h"
#include "ringk_node.h"
#include "ringk_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XSTAGE_PAGE        4096ull
#define XSTAGE_SPINS       256u  /* polls of a slot between two idle calls */

static ringk_xstage_shm_t *xstage_hdr(const ringk_xstage_t *xs)
{
    return (ringk_xstage_shm_t*)xs->base;
}

static ringk_xstage_slot_shm_t *xstage_slot(const ringk_xstage_t *xs, unsigned slot)
{
    return (ringk_xstage_slot_shm_t*)((char*)xs->base + RINGK_XSTAGE_LINE * (1u + slot));
}

static uint64_t xstage_data_off(unsigned nslots)
{
    return (RINGK_XSTAGE_LINE * (1ull + nslots) + XSTAGE_PAGE - 1) & ~(XSTAGE_PAGE - 1);
}

/* The limits both ends hold an area's geometry to; 0 or -EINVAL with @a why. */
static int xstage_geometry_check(unsigned nslots, uint64_t slot_bytes, char *why, size_t why_len)
{
    if ((nslots == 0) || (nslots > RINGK_XSTAGE_MAX_SLOTS)) {
        snprintf(why, why_len, "%u staging slots (1 to %u)", nslots, RINGK_XSTAGE_MAX_SLOTS);
        return -EINVAL;
    }
    if ((slot_bytes < XSTAGE_PAGE) || (slot_bytes > RINGK_XSTAGE_MAX_SLOT) ||
        ((slot_bytes % XSTAGE_PAGE) != 0)) {
        snprintf(why, why_len, "staging slot of %" PRIu64 " bytes (a multiple of %llu from "
                 "%llu to %llu)", slot_bytes, XSTAGE_PAGE, XSTAGE_PAGE, RINGK_XSTAGE_MAX_SLOT);
        return -EINVAL;
    }
    return 0;
}

int ringk_xstage_create(unsigned nslots, uint64_t slot_bytes, ringk_xstage_t *xs, char *why,
                        size_t why_len)
{
    ringk_xstage_shm_t *hdr;
    uint64_t bytes;
    int fd, err;

    if ((err = xstage_geometry_check(nslots, slot_bytes, why, why_len)) != 0) {
        return err;
    }
    bytes = xstage_data_off(nslots) + nslots * slot_bytes;
    fd    = memfd_create(RINGK_XSTAGE_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        err = -errno;
        snprintf(why, why_len, "memfd_create(%s): %s", RINGK_XSTAGE_NAME, strerror(-err));
        return err;
    }
    /* owner-only, and its size fixed, so a target's mapping never loses its pages */
    if ((fchmod(fd, 0600) != 0) || (ftruncate(fd, (off_t)bytes) != 0) ||
        (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)) {
        err = -errno;
        snprintf(why, why_len, "staging area of %" PRIu64 " bytes: %s", bytes, strerror(-err));
        goto err_close;
    }
    xs->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (xs->base == MAP_FAILED) {
        err = -errno;
        snprintf(why, why_len, "mmap of the staging area (%" PRIu64 " bytes): %s", bytes,
                 strerror(-err));
        goto err_close;
    }
    xs->bytes      = bytes;
    xs->nslots     = nslots;
    xs->slot_bytes = slot_bytes;
    xs->data_off   = xstage_data_off(nslots);
    xs->fd         = fd;
    xs->peer_pid   = 0;
    xs->seq        = 0;
    xs->served     = 0;
    xs->failed     = 0;
    xs->broken     = 0;
    hdr            = xstage_hdr(xs);
    hdr->version    = RINGK_XSTAGE_VERSION;
    hdr->nslots     = nslots;
    hdr->slot_bytes = slot_bytes;
    hdr->data_off   = xs->data_off;
    hdr->bytes      = bytes;
    hdr->owner_pid  = (uint32_t)getpid();
    /* the magic last: a target that reads it reads a whole header (the attach is later) */
    __atomic_store_n(&hdr->magic, RINGK_XSTAGE_MAGIC, __ATOMIC_RELEASE);
    return 0;

err_close:
    close(fd);
    return err;
}

/* Checks the header of a mapped area of @a pid against @a file_bytes; fills @a xs. */
static int xstage_header_check(ringk_xstage_t *xs, uint32_t pid, uint64_t file_bytes, char *why,
                               size_t why_len)
{
    const ringk_xstage_shm_t *hdr = xstage_hdr(xs);
    /* the header is a peer's writing: each field read once */
    uint64_t magic      = __atomic_load_n(&hdr->magic, __ATOMIC_ACQUIRE);
    uint32_t version    = hdr->version, nslots = hdr->nslots, owner = hdr->owner_pid;
    uint64_t slot_bytes = hdr->slot_bytes, data_off = hdr->data_off, bytes = hdr->bytes;
    int err;

    if ((magic != RINGK_XSTAGE_MAGIC) || (version != RINGK_XSTAGE_VERSION) || (owner != pid)) {
        snprintf(why, why_len, "not a ringk staging area of pid %" PRIu32 " (magic 0x%" PRIx64
                 ", version %" PRIu32 " of %u, owner %" PRIu32 ")", pid, magic, version,
                 RINGK_XSTAGE_VERSION, owner);
        return -EINVAL;
    }
    if ((err = xstage_geometry_check(nslots, slot_bytes, why, why_len)) != 0) {
        return err;
    }
    if ((data_off != xstage_data_off(nslots)) ||
        (bytes != data_off + nslots * slot_bytes) || (bytes > file_bytes)) {
        snprintf(why, why_len, "staging area of pid %" PRIu32 " says %" PRIu64 " bytes (data at "
                 "%" PRIu64 ", %u slots of %" PRIu64 "); its file has %" PRIu64, pid, bytes,
                 data_off, nslots, slot_bytes, file_bytes);
        return -EINVAL;
    }
    xs->nslots     = nslots;
    xs->slot_bytes = slot_bytes;
    xs->data_off   = data_off;
    return 0;
}

int ringk_xstage_attach(uint32_t pid, int fd, ringk_xstage_t *xs, char *why, size_t why_len)
{
    ringk_peer_err_t perr;
    char link[128];
    struct stat st;
    int ours, seals, err;

    ours = ringk_node_open_peer(pid, fd, O_RDWR, RINGK_XSTAGE_NAME, &st, link, sizeof(link),
                                &perr);
    if (ours < 0) {
        err = (errno != 0) ? -errno : -EPERM;
        snprintf(why, why_len, "/proc/%" PRIu32 "/fd/%d: %s", pid, fd,
                 (perr == RINGK_PEER_NAME)  ? "not a ringk staging area" :
                 (perr == RINGK_PEER_OWNER) ? "not this user's 0600 memfd" : strerror(-err));
        return (perr == RINGK_PEER_NAME || perr == RINGK_PEER_OWNER) ? -EPERM : err;
    }
    /* sealed against shrinking: the mapping below can never lose its pages (SIGBUS) */
    seals = fcntl(ours, F_GET_SEALS);
    if ((seals < 0) || !(seals & F_SEAL_SHRINK) || (st.st_size < (off_t)XSTAGE_PAGE) ||
        ((uint64_t)st.st_size > xstage_data_off(RINGK_XSTAGE_MAX_SLOTS) +
                                RINGK_XSTAGE_MAX_SLOTS * RINGK_XSTAGE_MAX_SLOT)) {
        snprintf(why, why_len, "staging area of pid %" PRIu32 ": %lld bytes, seals 0x%x",
                 pid, (long long)st.st_size, seals);
        close(ours);
        return -EINVAL;
    }
    xs->base = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, ours, 0);
    close(ours);
    if (xs->base == MAP_FAILED) {
        err = -errno;
        snprintf(why, why_len, "mmap of the staging area of pid %" PRIu32 ": %s", pid,
                 strerror(-err));
        return err;
    }
    xs->bytes = st.st_size;
    if ((err = xstage_header_check(xs, pid, st.st_size, why, why_len)) != 0) {
        munmap(xs->base, st.st_size);
        return err;
    }
    xs->fd       = -1;
    xs->peer_pid = pid;
    xs->seq      = 0;
    xs->served   = 0;
    xs->failed   = 0;
    xs->broken   = 0;
    return 0;
}

void ringk_xstage_close(ringk_xstage_t *xs)
{
    if (xs->base != NULL) {
        munmap(xs->base, xs->bytes);
        xs->base = NULL;
    }
    if (xs->fd >= 0) {
        close(xs->fd);
        xs->fd = -1;
    }
}

void ringk_xstage_close_pinned(ringk_xstage_t *xs)
{
    if (xs->base != NULL) {
        ringk_cuda_host_release(xs->base, xs->base, xs->bytes);
        xs->base = NULL;
    }
    ringk_xstage_close(xs);
}

/* ---- the target ------------------------------------------------------------------------- */

static int xstage_serve_one(ringk_xstage_t *xs, unsigned slot,
                            const ringk_xstage_target_ops_t *ops)
{
    ringk_xstage_slot_shm_t *line = xstage_slot(xs, slot);
    /* a peer's writing: read once, after the acquire of posted (X1) */
    uint32_t op   = __atomic_load_n(&line->op, __ATOMIC_RELAXED);
    uint64_t addr = __atomic_load_n(&line->addr, __ATOMIC_RELAXED);
    uint64_t len  = __atomic_load_n(&line->len, __ATOMIC_RELAXED);

    if (((op != RINGK_XSTAGE_PUT) && (op != RINGK_XSTAGE_GET)) || (len == 0) ||
        (len > xs->slot_bytes) || (addr + len < addr)) {
        return -EINVAL;
    }
    return ops->check(ops->arg, xs, (int)op, addr, len) ?:
           ops->copy(ops->arg, (int)op, ringk_xstage_data(xs, slot), addr, len);
}

unsigned ringk_xstage_serve(ringk_xstage_t *xs, const ringk_xstage_target_ops_t *ops)
{
    ringk_xstage_slot_shm_t *line;
    uint64_t posted;
    unsigned slot, count = 0;
    int status;

    for (slot = 0; slot < xs->nslots; slot++) {
        line = xstage_slot(xs, slot);
        /* X1 (target): pairs with the initiator's release of posted */
        posted = ringk_load_acquire_u64(&line->posted);
        if (posted == ringk_load_relaxed_u64(&line->done)) {
            continue;
        }
        status = xstage_serve_one(xs, slot, ops);
        __atomic_store_n(&line->status, status, __ATOMIC_RELAXED);
        /* X2: status and a get's data before done; pairs with the initiator's acquire */
        ringk_store_release_u64(&line->done, posted);
        if (status == 0) {
            xs->served++;
        } else {
            xs->failed++;
        }
        count++;
    }
    return count;
}

/* ---- the initiator ---------------------------------------------------------------------- */

/* Waits until @a slot's request (posted by this transfer: its bit in *@a pending) is served;
 * its status, or idle's error (the area is then broken: the target may still write a slot). */
static int xstage_wait(ringk_xstage_t *xs, unsigned slot, unsigned *pending,
                       const ringk_xstage_io_t *io, char *why, size_t why_len)
{
    ringk_xstage_slot_shm_t *line = xstage_slot(xs, slot);
    uint64_t want                 = ringk_load_relaxed_u64(&line->posted);
    unsigned spins                = 0;
    int32_t status;
    int err;

    if (!(*pending & (1u << slot))) {
        return 0;
    }
    /* X2 (initiator): pairs with the target's release of done */
    while (ringk_load_acquire_u64(&line->done) != want) {
        if (++spins < XSTAGE_SPINS) {
            continue;
        }
        spins = 0;
        if ((io->idle != NULL) && ((err = io->idle(io->arg)) != 0)) {
            xs->broken = err;
            snprintf(why, why_len, "the target of the staging area stopped serving it: %s",
                     strerror(-err));
            return err;
        }
        sched_yield();
    }
    *pending &= ~(1u << slot);
    status    = __atomic_load_n(&line->status, __ATOMIC_RELAXED);
    if (status != 0) {
        /* the target's word: anything but a small negative errno is an I/O error */
        err = ((status < 0) && (status > -4096)) ? status : -EIO;
        snprintf(why, why_len, "the target refused %s of %" PRIu64 " bytes at 0x%" PRIx64 ": %s",
                 (line->op == RINGK_XSTAGE_GET) ? "a get" : "a put", line->len, line->addr,
                 strerror(-err));
        return err;
    }
    return 0;
}

static void xstage_post(ringk_xstage_t *xs, unsigned slot, unsigned *pending, int op,
                        uint64_t addr, uint64_t len)
{
    ringk_xstage_slot_shm_t *line = xstage_slot(xs, slot);

    __atomic_store_n(&line->op, (uint32_t)op, __ATOMIC_RELAXED);
    __atomic_store_n(&line->addr, addr, __ATOMIC_RELAXED);
    __atomic_store_n(&line->len, len, __ATOMIC_RELAXED);
    /* X1: the request (and a put's data) before posted; pairs with X1 (target) */
    ringk_store_release_u64(&line->posted, ++xs->seq);
    *pending |= 1u << slot;
}

/* Waits for every slot this transfer still has posted; @a err, or the first error. */
static int xstage_drain(ringk_xstage_t *xs, unsigned *pending, const ringk_xstage_io_t *io,
                        int err, char *why, size_t why_len)
{
    char ignored[256];
    unsigned slot;
    int ret;

    for (slot = 0; (slot < xs->nslots) && (xs->broken == 0); slot++) {
        ret = xstage_wait(xs, slot, pending, io, (err == 0) ? why : ignored,
                          (err == 0) ? why_len : sizeof(ignored));
        err = (err != 0) ? err : ret;
    }
    return (xs->broken != 0) ? xs->broken : err;
}

static uint64_t xstage_min(uint64_t a, uint64_t b)
{
    return (a < b) ? a : b;
}

/* One chunk of a transfer: @a k of the chunks, at @a off; 0 or an error with @a why. */
static int xstage_chunk(ringk_xstage_t *xs, int op, uint64_t addr, uint64_t len, uint64_t k,
                        unsigned *pending, const ringk_xstage_io_t *io, char *why,
                        size_t why_len)
{
    unsigned slot  = (unsigned)(k % xs->nslots);
    uint64_t off   = k * xs->slot_bytes;
    uint64_t chunk = xstage_min(xs->slot_bytes, len - off);
    uint64_t next  = off + xs->nslots * xs->slot_bytes;
    int err;

    if (op == RINGK_XSTAGE_PUT) {
        /* the slot's last chunk must be in before it takes this one */
        if ((err = xstage_wait(xs, slot, pending, io, why, why_len)) != 0) {
            return err;
        }
        if ((err = io->stage_out(io->arg, ringk_xstage_data(xs, slot), off, chunk)) != 0) {
            snprintf(why, why_len, "staging out chunk %" PRIu64 ": %s", k, strerror(-err));
            return err;
        }
        xstage_post(xs, slot, pending, op, addr + off, chunk);
        return 0;
    }
    if ((err = xstage_wait(xs, slot, pending, io, why, why_len)) != 0) {
        return err;
    }
    if ((err = io->stage_in(io->arg, ringk_xstage_data(xs, slot), off, chunk)) != 0) {
        snprintf(why, why_len, "staging in chunk %" PRIu64 ": %s", k, strerror(-err));
        return err;
    }
    if (next < len) { /* the slot asks for its next chunk while the others are filled */
        xstage_post(xs, slot, pending, op, addr + next, xstage_min(xs->slot_bytes, len - next));
    }
    return 0;
}

int ringk_xstage_transfer(ringk_xstage_t *xs, int op, uint64_t addr, uint64_t len,
                          const ringk_xstage_io_t *io, char *why, size_t why_len)
{
    unsigned pending = 0;
    uint64_t nchunks, k, off;
    int err = 0;

    if (xs->broken != 0) {
        snprintf(why, why_len, "the staging area is broken: %s", strerror(-xs->broken));
        return xs->broken;
    }
    if (((op != RINGK_XSTAGE_PUT) && (op != RINGK_XSTAGE_GET)) || (addr + len < addr)) {
        snprintf(why, why_len, "staging op %d of %" PRIu64 " bytes at 0x%" PRIx64, op, len,
                 addr);
        return -EINVAL;
    }
    nchunks = (len + xs->slot_bytes - 1) / xs->slot_bytes;
    /* a get asks for its first slots' worth ahead: the target fills them while we empty one */
    for (k = 0; (op == RINGK_XSTAGE_GET) && (k < nchunks) && (k < xs->nslots); k++) {
        off = k * xs->slot_bytes;
        xstage_post(xs, (unsigned)k, &pending, op, addr + off,
                    xstage_min(xs->slot_bytes, len - off));
    }
    for (k = 0; (k < nchunks) && (err == 0); k++) {
        err = xstage_chunk(xs, op, addr, len, k, &pending, io, why, why_len);
    }
    return xstage_drain(xs, &pending, io, err, why, why_len);
}
