/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the regions device kernels hold in the slabs of their device. The slabs are
 * allocated once, before any kernel of the device runs; a kernel's region is found in them
 * first-fit between the regions held, so the memory of destroyed kernels is taken again while
 * other kernels run, with no CUDA call. The callers hold the process's device lock. And the
 * file that holds the slabs another process may map (ringk_dev_remote.c, ringk_dev_share.c). */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t align_up(size_t v)
{
    return (v + RINGK_DEV_SLAB_ALIGN - 1) & ~(size_t)(RINGK_DEV_SLAB_ALIGN - 1);
}

/* The lowest aligned offset of slab @a s (0 mapped, 1 device memory) of @a device, of size
 * @a size, where @a bytes overlap no region held: 0 with it in *@a at_p, or -ENOMEM. */
static int gap_find(const ringk_dev_device_t *device, int s, size_t size, size_t bytes,
                    size_t *at_p)
{
    const ringk_dev_region_t *r;
    size_t at = 0;
    int moved;

    if (bytes > size) {
        return -ENOMEM;
    }
    do { /* each move passes the end of a region, so this ends */
        moved = 0;
        for (r = device->regions; (r != NULL) && (at <= size - bytes); r = r->next) {
            if ((r->len[s] > 0) && (at < r->at[s] + r->len[s]) && (r->at[s] < at + bytes)) {
                at    = align_up(r->at[s] + r->len[s]);
                moved = 1;
            }
        }
    } while (moved && (at <= size - bytes));
    if (at > size - bytes) {
        return -ENOMEM;
    }
    *at_p = at;
    return 0;
}

int ringk_dev_region_take(ringk_dev_device_t *device, size_t mapped, size_t mem,
                          ringk_dev_region_t **region_p, char *why, size_t why_len)
{
    ringk_dev_region_t *r;
    int s = 0;

    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        if (why != NULL) {
            snprintf(why, why_len, "no memory for a region record");
        }
        return -ENOMEM;
    }
    r->len[0] = mapped;
    r->len[1] = mem;
    if ((gap_find(device, 0, device->mapped.size, mapped, &r->at[0]) != 0) ||
        (gap_find(device, s = 1, device->mem.size, mem, &r->at[1]) != 0)) {
        if (why != NULL) {
            snprintf(why, why_len, "the device slabs are full: no room for %zu bytes in the "
                     "%zu MiB of %s (%s)", s ? mem : mapped,
                     (s ? device->mem.size : device->mapped.size) >> 20,
                     s ? "device memory" : "mapped memory",
                     s ? "RINGK_DEVICE_MEM_MB" : "RINGK_DEVICE_MAPPED_MB");
        }
        free(r);
        return -ENOMEM;
    }
    r->holds      = 1;
    r->next       = device->regions;
    device->regions = r;
    *region_p     = r;
    return 0;
}

void ringk_dev_region_put(ringk_dev_device_t *device, ringk_dev_region_t *region)
{
    ringk_dev_region_t **pp;

    if ((__atomic_sub_fetch(&region->holds, 1, __ATOMIC_ACQ_REL) > 0) ||
        __atomic_load_n(&region->exported, __ATOMIC_ACQUIRE)) {
        return; /* exported: kept taken until the slabs go */
    }
    for (pp = &device->regions; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == region) {
            *pp = region->next;
            break;
        }
    }
    free(region);
}

void ringk_dev_regions_clear(ringk_dev_device_t *device)
{
    ringk_dev_region_t *r;

    while ((r = device->regions) != NULL) {
        device->regions = r->next;
        free(r);
    }
}

static uint64_t token_new(void)
{
    uint64_t t = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if ((fd < 0) || (read(fd, &t, sizeof(t)) != (ssize_t)sizeof(t))) {
        t = ringk_now_ns() ^ ((uint64_t)getpid() << 32);
    }
    if (fd >= 0) {
        close(fd);
    }
    return t | 1; /* never 0: 0 is "not shared" */
}

int ringk_dev_slab_file_make(ringk_dev_device_t *device, size_t bytes, char *why,
                             size_t why_len)
{
    ringk_dev_slab_file_t *hdr;
    uint8_t *base;
    int fd, err;

    fd = memfd_create(RINGK_DEV_SLAB_FILE, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        err = -errno;
        snprintf(why, why_len, "memfd_create: %s", strerror(-err));
        return err;
    }
    /* owner-only, and its size fixed: another process's mapping never loses its pages */
    if ((fchmod(fd, 0600) != 0) || (ftruncate(fd, (off_t)bytes) != 0) ||
        (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)) {
        err = -errno;
        snprintf(why, why_len, "a memfd of %zu bytes: %s", bytes, strerror(-err));
        close(fd);
        return err;
    }
    base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        err = -errno;
        snprintf(why, why_len, "mmap of %zu bytes: %s", bytes, strerror(-err));
        close(fd);
        return err;
    }
    hdr              = (ringk_dev_slab_file_t*)base;
    hdr->version     = RINGK_DEV_SLAB_FILE_VERSION;
    hdr->owner_pid   = (uint32_t)getpid();
    hdr->token       = token_new();
    hdr->bytes       = bytes;
    __atomic_store_n(&hdr->magic, RINGK_DEV_SLAB_FILE_MAGIC, __ATOMIC_RELEASE);
    device->file       = base;
    device->file_bytes = bytes;
    device->file_fd    = fd;
    device->file_token = hdr->token;
    return 0;
}
