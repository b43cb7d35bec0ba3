/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ringk_shm: memory peers map, and RMA and atomics on it by loads and stores.
 *
 * The ringk_shm md allocates host memory as an owner-only memfd (mode 0600, sealed against
 * shrinking and growing, never linked anywhere) mapped into the owner. Its remote key names the
 * owner's pid, the memfd's descriptor and a random id that is also in the memfd's name. A peer
 * opens /proc/<pid>/fd/<fd> (the kernel allows it to processes of the same user), checks that
 * the file it got is that memfd (name, owner, mode, seals, size), and maps it once: keys to the
 * same allocation share the mapping, which goes with the last key. The seals make the size a
 * promise the owner cannot break, so a mapped byte never becomes a SIGBUS; a dead owner's
 * memory stays mapped until the keys to it are released.
 *
 * The "shm" device of the ringk transport on this md does put and get as memcpy and the
 * 32/64-bit atomics as CPU atomic instructions on the mapping. It has no active messages: the
 * "memory" device on the ringk md carries those and keeps cross-memory attach for memory that
 * is only registered (UCP, like posix with cma, uses this device for memory that ringk_shm
 * allocated and the other for the rest).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_shm.h"
#include "ringk_md.h"
#include "ringk_iface.h"
#include "ringk_ep.h"

#include <core/ringk_node.h>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>
#include <uct/base/uct_iface.h>
#include <uct/base/uct_iov.inl>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

/* ---- the md: allocation --------------------------------------------------------------------- */

/** One allocation of the ringk_shm md. */
typedef struct uct_ringk_shm_memh {
    void    *address;
    size_t   length;
    int      fd;
    int      huge;     /**< backed by huge pages */
    uint64_t seg_id;
} uct_ringk_shm_memh_t;

static ucs_status_t uct_ringk_shm_md_query(uct_md_h tl_md, uct_md_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    /* No REG: UCP sends registered memory to the ringk md (cross-memory attach), and rkey_ptr
     * is never asked of a key this md did not pack. */
    attr->cap.flags            = UCT_MD_FLAG_ALLOC | UCT_MD_FLAG_RKEY_PTR |
                                 UCT_MD_FLAG_NEED_RKEY;
    attr->cap.reg_mem_types    = 0;
    attr->cap.alloc_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.detect_mem_types = 0;
    attr->cap.max_alloc        = SIZE_MAX;
    attr->cap.max_reg          = 0;
    attr->rkey_packed_size     = sizeof(uct_ringk_shm_packed_rkey_t);
    attr->reg_cost             = ucs_linear_func_make(0, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

/* Creates, sizes, seals and maps one memfd of @a length bytes (a multiple of the page size the
 * flags imply). @return 0, or an errno with @a what naming the call that failed. */
static int uct_ringk_shm_create(uct_ringk_shm_memh_t *memh, size_t length, int huge,
                                const char **what)
{
    char name[64];
    int ret;

    snprintf(name, sizeof(name), UCT_RINGK_SHM_NAME_FMT, (unsigned long long)memh->seg_id);
    memh->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB : 0));
    if (memh->fd < 0) {
        *what = "memfd_create";
        return errno;
    }
    /* fallocate reserves the pages now: a shortage is an error here, not a SIGBUS at first
     * touch, in this process or a peer. */
    if ((fchmod(memh->fd, 0600) != 0) && (*what = "fchmod")) {
        goto err;
    }
    if ((ftruncate(memh->fd, length) != 0) && (*what = "ftruncate")) {
        goto err;
    }
    if ((fallocate(memh->fd, 0, 0, length) != 0) && (errno != EOPNOTSUPP) &&
        (*what = "fallocate")) {
        goto err;
    }
    /* Peers check these seals before they map: the size is fixed for good. */
    if ((fcntl(memh->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) &&
        (*what = "fcntl(F_ADD_SEALS)")) {
        goto err;
    }
    memh->address = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, memh->fd, 0);
    if ((memh->address == MAP_FAILED) && (*what = "mmap")) {
        goto err;
    }
    memh->length = length;
    memh->huge   = huge;
    return 0;

err:
    ret = errno;
    close(memh->fd);
    memh->fd = -1;
    return ret;
}

static ucs_status_t uct_ringk_shm_mem_alloc(uct_md_h tl_md, size_t *length_p, void **address_p,
                                            ucs_memory_type_t mem_type, unsigned flags,
                                            const char *alloc_name, uct_mem_h *memh_p)
{
    uct_ringk_md_t *md = ucs_derived_of(tl_md, uct_ringk_md_t);
    uct_ringk_shm_memh_t *memh;
    size_t page = ucs_get_page_size(), length;
    ssize_t huge_page;
    const char *what = "";
    int ret = ENOTSUP, tried_huge = 0;

    if (mem_type != UCS_MEMORY_TYPE_HOST) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (flags & UCT_MD_MEM_FLAG_FIXED) {
        return UCS_ERR_UNSUPPORTED; /* not advertised (no UCT_MD_FLAG_FIXED) */
    }
    if ((*length_p == 0) || (*length_p > SIZE_MAX / 2)) {
        ucs_error("ringk_shm: cannot allocate %zu bytes for '%s' (1 to %zu)", *length_p,
                  alloc_name, SIZE_MAX / 2);
        return UCS_ERR_INVALID_PARAM;
    }
    memh = ucs_calloc(1, sizeof(*memh), "ringk_shm_memh");
    if (memh == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memh->seg_id = ucs_generate_uuid((uintptr_t)memh);
    huge_page    = ucs_get_huge_page_size();
    if ((md->hugetlb != UCS_NO) && (huge_page > 0)) {
        tried_huge = 1;
        length     = ucs_align_up(*length_p, (size_t)huge_page);
        ret        = uct_ringk_shm_create(memh, length, 1, &what);
        if ((ret != 0) && (md->hugetlb == UCS_YES)) {
            ucs_error("ringk_shm: cannot allocate %zu bytes of huge pages for '%s' "
                      "(UCX_RINGK_HUGETLB_MODE=y): %s: %s", length, alloc_name, what,
                      strerror(ret));
            ucs_free(memh);
            return UCS_ERR_NO_MEMORY;
        }
    } else if (md->hugetlb == UCS_YES) {
        ucs_error("ringk_shm: UCX_RINGK_HUGETLB_MODE=y, but this system has no huge pages");
        ucs_free(memh);
        return UCS_ERR_NO_MEMORY;
    }
    if (ret != 0) {
        length = ucs_align_up(*length_p, page);
        ret    = uct_ringk_shm_create(memh, length, 0, &what);
    }
    if (ret != 0) {
        ucs_error("ringk_shm: cannot allocate %zu bytes for '%s': %s: %s", length, alloc_name,
                  what, strerror(ret));
        ucs_free(memh);
        return (ret == ENOMEM) || (ret == ENOSPC) ? UCS_ERR_NO_MEMORY : UCS_ERR_IO_ERROR;
    }
    ucs_debug("ringk_shm: allocated %zu bytes at %p for '%s' (fd %d id 0x%" PRIx64 "%s%s)",
              memh->length, memh->address, alloc_name, memh->fd, memh->seg_id,
              memh->huge ? ", huge pages" : "", (tried_huge && !memh->huge) ?
              ", huge pages unavailable" : "");
    *length_p  = memh->length;
    *address_p = memh->address;
    *memh_p    = memh;
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_mem_free(uct_md_h md, uct_mem_h tl_memh)
{
    uct_ringk_shm_memh_t *memh = tl_memh;

    /* Peers that mapped it keep their mapping (and the memory) until they release the key. */
    munmap(memh->address, memh->length);
    close(memh->fd);
    ucs_free(memh);
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_mkey_pack(uct_md_h md, uct_mem_h tl_memh,
                                            const uct_md_mkey_pack_params_t *params,
                                            void *rkey_buffer)
{
    const uct_ringk_shm_memh_t *memh = tl_memh;
    uct_ringk_shm_packed_rkey_t packed = {
        .magic   = UCT_RINGK_SHM_RKEY_MAGIC,
        .pid     = getpid(),
        .fd      = memh->fd,
        .seg_id  = memh->seg_id,
        .address = (uintptr_t)memh->address,
        .length  = memh->length
    };

    memcpy(rkey_buffer, &packed, sizeof(packed));
    return UCS_OK;
}

static void uct_ringk_shm_md_close(uct_md_h tl_md)
{
    ucs_free(ucs_derived_of(tl_md, uct_ringk_md_t));
}

uct_md_ops_t uct_ringk_shm_md_ops = {
    .close                  = uct_ringk_shm_md_close,
    .query                  = uct_ringk_shm_md_query,
    .mem_alloc              = uct_ringk_shm_mem_alloc,
    .mem_free               = uct_ringk_shm_mem_free,
    .mem_advise             = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg                = (uct_md_mem_reg_func_t)ucs_empty_function_return_unsupported,
    .mem_dereg              = (uct_md_mem_dereg_func_t)ucs_empty_function_return_unsupported,
    .mem_query              = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack              = uct_ringk_shm_mkey_pack,
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t)ucs_empty_function_return_zero_int,
    .detect_memory_type     = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported
};

/* ---- remote keys: the mappings of peers' allocations ----------------------------------------- */

/* bcopy copies straight into or out of the mapping as zcopy does, without UCP's zcopy request
 * around it (measured in bench/RESULTS.md). UCP takes bcopy below min_zcopy: puts below 32 KiB (the scratch after each
 * mapping holds what a put packs past an allocation's end; UCX's gtest test_zcopy_comp needs
 * put zcopy to take 64 KiB), gets below 1 MiB (get_bcopy knows its length before it copies). */
#define UCT_RINGK_SHM_PUT_MAX_BCOPY (32ul * 1024)
#define UCT_RINGK_SHM_GET_MIN_ZCOPY (1ul << 20)

/** A peer allocation mapped in this process, shared by every key to it. */
typedef struct uct_ringk_shm_map {
    uint32_t                  pid;
    uint64_t                  seg_id;
    uint64_t                  length;
    void                     *base;
    size_t                    span;   /**< what to unmap: the file, the scratch, the guard */
    unsigned                  refs;
    struct uct_ringk_shm_map *next;
} uct_ringk_shm_map_t;

static pthread_mutex_t uct_ringk_shm_maps_lock = PTHREAD_MUTEX_INITIALIZER;
static uct_ringk_shm_map_t *uct_ringk_shm_maps;

/* Opens the memfd the key names and checks it is that allocation: the memfd of that id, ours
 * and private, sealed at no less than the key's length. @return the descriptor, or -1 (logged). */
static int uct_ringk_shm_open(const uct_ringk_shm_packed_rkey_t *packed)
{
    char name[64], link[128];
    ringk_peer_err_t err;
    struct stat st;
    int fd, seals;

    snprintf(name, sizeof(name), UCT_RINGK_SHM_NAME_FMT, (unsigned long long)packed->seg_id);
    fd = ringk_node_open_peer(packed->pid, packed->fd, O_RDWR, name, &st, link, sizeof(link),
                              &err);
    switch (err) {
    case RINGK_PEER_OK:
        break;
    case RINGK_PEER_OPEN:
        ucs_error("ringk_shm: cannot open the peer allocation /proc/%u/fd/%d: %m", packed->pid,
                  packed->fd);
        return -1;
    case RINGK_PEER_NAME:
        ucs_error("ringk_shm: descriptor %d of pid %u is '%s', not the allocation the key "
                  "names ('%s')", packed->fd, packed->pid, link, name);
        return -1;
    case RINGK_PEER_OWNER:
        ucs_error("ringk_shm: the allocation of pid %u is owned by uid %u mode 0%o; only our "
                  "own 0600 memory is mapped", packed->pid, st.st_uid, st.st_mode & 0777);
        return -1;
    default:
        ucs_error("ringk_shm: cannot inspect the allocation of pid %u: %m", packed->pid);
        return -1;
    }
    seals = fcntl(fd, F_GET_SEALS);
    if ((seals < 0) || !(seals & F_SEAL_SHRINK) || ((uint64_t)st.st_size < packed->length)) {
        ucs_error("ringk_shm: the allocation of pid %u is %lld bytes%s, the key says %" PRIu64,
                  packed->pid, (long long)st.st_size,
                  ((seals >= 0) && (seals & F_SEAL_SHRINK)) ? "" : " and may shrink",
                  packed->length);
        close(fd);
        return -1;
    }
    return fd;
}

/* Maps @a length bytes of the peer's memfd @a fd, followed by UCT_RINGK_SHM_PUT_MAX_BCOPY bytes
 * of private anonymous memory (the scratch) and one inaccessible page. put_bcopy packs in place
 * at any offset inside the allocation: what a callback writes past the allocation's end lands
 * in the scratch, never in the peer's memory or ours, and the put is refused once its length
 * is known. The file part is aligned to the file's page size (huge pages on hugetlbfs).
 * @return the mapping's start, or MAP_FAILED (errno set); *span is what to unmap. */
static void *uct_ringk_shm_map_peer(int fd, uint64_t length, size_t *span)
{
    size_t page = ucs_get_page_size(), align = page, file_len, total;
    struct statfs sfs;
    char *resv, *base;
    int err;

    if ((fstatfs(fd, &sfs) == 0) && (sfs.f_type == HUGETLBFS_MAGIC) && (sfs.f_bsize > 0)) {
        align = (size_t)sfs.f_bsize;
    }
    file_len = ucs_align_up(length, align);
    *span    = file_len + UCT_RINGK_SHM_PUT_MAX_BCOPY + page;
    total    = *span + align - page;
    resv     = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (resv == MAP_FAILED) {
        return MAP_FAILED;
    }
    base = (char*)ucs_align_up_pow2((uintptr_t)resv, align);
    if ((mmap(base, file_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
         MAP_FAILED) ||
        (mprotect(base + file_len, UCT_RINGK_SHM_PUT_MAX_BCOPY, PROT_READ | PROT_WRITE) != 0)) {
        err = errno;
        munmap(resv, total);
        errno = err;
        return MAP_FAILED;
    }
    /* the alignment slack on either side goes back */
    if (base > resv) {
        munmap(resv, base - resv);
    }
    if (base + *span < resv + total) {
        munmap(base + *span, resv + total - (base + *span));
    }
    return base;
}

ucs_status_t uct_ringk_shm_rkey_unpack(const void *buffer, uct_ringk_shm_rkey_t *key)
{
    uct_ringk_shm_packed_rkey_t packed;
    uct_ringk_shm_map_t *map;
    ucs_status_t status = UCS_OK;
    int fd;

    memcpy(&packed, buffer, sizeof(packed));
    if ((packed.magic != UCT_RINGK_SHM_RKEY_MAGIC) || (packed.pid == 0) ||
        (packed.pid > INT32_MAX) || (packed.fd < 0) || (packed.reserved != 0) ||
        (packed.length < 8) || (packed.length > SIZE_MAX / 2) ||
        (packed.address + packed.length < packed.address)) {
        ucs_error("ringk_shm: invalid remote key (magic 0x%x pid %u fd %d range 0x%" PRIx64 "+%"
                  PRIu64 ")", packed.magic, packed.pid, packed.fd, packed.address,
                  packed.length);
        return UCS_ERR_INVALID_PARAM;
    }
    pthread_mutex_lock(&uct_ringk_shm_maps_lock);
    for (map = uct_ringk_shm_maps; map != NULL; map = map->next) {
        if ((map->pid == packed.pid) && (map->seg_id == packed.seg_id)) {
            break;
        }
    }
    if (map != NULL) {
        if (packed.length > map->length) {
            ucs_error("ringk_shm: key to allocation 0x%" PRIx64 " of pid %u says %" PRIu64
                      " bytes, it was mapped with %" PRIu64, packed.seg_id, packed.pid,
                      packed.length, map->length);
            status = UCS_ERR_INVALID_PARAM;
            goto out;
        }
        map->refs++;
    } else {
        fd = uct_ringk_shm_open(&packed);
        if (fd < 0) {
            status = UCS_ERR_UNREACHABLE;
            goto out;
        }
        map = ucs_calloc(1, sizeof(*map), "ringk_shm_map");
        if (map == NULL) {
            close(fd);
            status = UCS_ERR_NO_MEMORY;
            goto out;
        }
        map->base = uct_ringk_shm_map_peer(fd, packed.length, &map->span);
        close(fd);
        if (map->base == MAP_FAILED) {
            ucs_error("ringk_shm: mmap of %" PRIu64 " bytes of pid %u failed: %m",
                      packed.length, packed.pid);
            ucs_free(map);
            status = UCS_ERR_NO_MEMORY;
            goto out;
        }
        map->pid           = packed.pid;
        map->seg_id        = packed.seg_id;
        map->length        = packed.length;
        map->refs          = 1;
        map->next          = uct_ringk_shm_maps;
        uct_ringk_shm_maps = map;
    }
    key->kind    = UCT_RINGK_KEY_SHM;
    key->pid     = packed.pid;
    key->address = packed.address;
    key->length  = packed.length;
    key->mapped  = map->base;
    key->offset  = (intptr_t)((uintptr_t)map->base - packed.address);
    key->map     = map;
out:
    pthread_mutex_unlock(&uct_ringk_shm_maps_lock);
    return status;
}

void uct_ringk_shm_rkey_release(uct_ringk_shm_rkey_t *key)
{
    uct_ringk_shm_map_t **p, *map = key->map;

    pthread_mutex_lock(&uct_ringk_shm_maps_lock);
    if (--map->refs == 0) {
        for (p = &uct_ringk_shm_maps; *p != map; p = &(*p)->next) {
        }
        *p = map->next;
        munmap(map->base, map->span);
        ucs_free(map);
    }
    pthread_mutex_unlock(&uct_ringk_shm_maps_lock);
}

unsigned uct_ringk_shm_maps_count(void)
{
    const uct_ringk_shm_map_t *map;
    unsigned n = 0;

    pthread_mutex_lock(&uct_ringk_shm_maps_lock);
    for (map = uct_ringk_shm_maps; map != NULL; map = map->next) {
        n++;
    }
    pthread_mutex_unlock(&uct_ringk_shm_maps_lock);
    return n;
}

/* ---- the "shm" iface and its endpoints ------------------------------------------------------- */

/** What a peer needs: the process whose allocations its keys will name, and the iface's
 * liveness page (a one-page memfd whose first word says the iface closed). */
typedef struct uct_ringk_shm_iface_addr {
    uint64_t id;     /**< random; the page's memfd is named ringk-shm-if-<id> */
    uint32_t pid;
    int32_t  fd;     /**< the page's memfd in the owner */
} UCS_S_PACKED uct_ringk_shm_iface_addr_t;

#define UCT_RINGK_SHM_IFACE_NAME_FMT "ringk-shm-if-%016llx"

typedef struct uct_ringk_shm_iface {
    uct_base_iface_t     super;
    uint64_t             id;
    int                  live_fd;    /**< the liveness page */
    uint64_t            *closed;     /**< its first word: 1 once the iface closed */
    void                *sink;       /**< UCT_RINGK_SHM_PUT_MAX_BCOPY bytes: put_bcopy packs
                                          here when it does not start inside a key */
    uct_ringk_dev_addr_t dev_addr;
    int                  posted;     /**< an operation was posted since the last progress */
} uct_ringk_shm_iface_t;

typedef struct uct_ringk_shm_ep {
    uct_base_ep_t  super;
    uint32_t       peer_pid;
    unsigned long  start_time;   /**< the peer's start time, against pid reuse */
    const uint64_t *peer_closed; /**< the peer iface's liveness page, mapped read-only */
    int            failed;
} uct_ringk_shm_ep_t;

/* Where [remote_addr, +length) of a key of this ep's peer lies here; NULL when the key is not a
 * ringk_shm key of the peer or the range leaves its allocation (logged). */
static UCS_F_ALWAYS_INLINE void *
uct_ringk_shm_addr(uct_ringk_shm_ep_t *ep, uct_rkey_t rkey, uint64_t remote_addr, size_t length,
                   const char *op)
{
    const uct_ringk_shm_rkey_t *key = (const uct_ringk_shm_rkey_t*)rkey;

    /* Any ringk_shm key is mapped here whole, so the range is all that needs checking. The
     * offset wraps to a huge value when remote_addr lies below the key. rkey + 1 > 1 refuses
     * both NULL and UCT_INVALID_RKEY. */
    if (ucs_likely((rkey + 1 > 1) && (key->kind == UCT_RINGK_KEY_SHM) &&
                   (length <= key->length) &&
                   (remote_addr - key->address <= key->length - length))) {
        ucs_derived_of(ep->super.super.iface, uct_ringk_shm_iface_t)->posted = 1;
        return (void*)(uintptr_t)(remote_addr + key->offset);
    }
    ucs_error("ringk_shm ep %p: %s of %zu bytes at 0x%" PRIx64 " is outside the remote key "
              "(%s, pid %u, 0x%" PRIx64 "+%" PRIu64 ", peer pid %u)", ep, op, length,
              remote_addr, (rkey + 1 <= 1) ? "no key" : (key->kind == UCT_RINGK_KEY_SHM) ?
              "ringk_shm" : "not a ringk_shm key", (rkey + 1 > 1) ? key->pid : 0,
              (rkey + 1 > 1) ? key->address : 0, (rkey + 1 > 1) ? key->length : 0,
              ep->peer_pid);
    return NULL;
}

/* Copies of up to 16 bytes as at most two overlapping loads and stores, inline: a short put is
 * then a handful of instructions instead of a call into the library's memcpy. */
static UCS_F_ALWAYS_INLINE void uct_ringk_shm_copy(void *dst, const void *src, size_t length)
{
    uint64_t a, b;
    uint32_t c, d;

    if (length >= 8) {
        if (length > 16) {
            memcpy(dst, src, length);
            return;
        }
        memcpy(&a, src, 8);
        memcpy(&b, (const char*)src + length - 8, 8);
        memcpy(dst, &a, 8);
        memcpy((char*)dst + length - 8, &b, 8);
    } else if (length >= 4) {
        memcpy(&c, src, 4);
        memcpy(&d, (const char*)src + length - 4, 4);
        memcpy(dst, &c, 4);
        memcpy((char*)dst + length - 4, &d, 4);
    } else {
        while (length-- > 0) {
            ((char*)dst)[length] = ((const char*)src)[length];
        }
    }
}

static ucs_status_t uct_ringk_shm_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                               unsigned length, uint64_t remote_addr,
                                               uct_rkey_t rkey)
{
    uct_ringk_shm_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    void *dst;

    if (ucs_unlikely(length == 0)) {
        return UCS_OK;
    }
    dst = uct_ringk_shm_addr(ep, rkey, remote_addr, length, "put_short");
    if (ucs_unlikely(dst == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uct_ringk_shm_copy(dst, buffer, length);
    UCT_TL_EP_STAT_OP(&ep->super, PUT, SHORT, length);
    return UCS_OK;
}

static ssize_t uct_ringk_shm_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb, void *arg,
                                          uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_ringk_shm_iface_t *iface    = ucs_derived_of(tl_ep->iface, uct_ringk_shm_iface_t);
    uct_ringk_shm_ep_t *ep          = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    const uct_ringk_shm_rkey_t *key = (const uct_ringk_shm_rkey_t*)rkey;
    size_t length;

    /* Packed in place wherever it starts inside the allocation: the mapping goes on with
     * UCT_RINGK_SHM_PUT_MAX_BCOPY bytes of private scratch (uct_ringk_shm_map_peer), so a
     * callback that runs past the allocation's end writes there, and the put is refused once
     * its length is known (its bytes inside the allocation are written, as the fragments
     * before it of a larger put would be). A put that starts elsewhere packs into the iface's
     * sink: only an empty one succeeds. */
    if (ucs_likely((rkey + 1 > 1) && (key->kind == UCT_RINGK_KEY_SHM) &&
                   (remote_addr - key->address <= key->length))) {
        length = pack_cb((void*)(uintptr_t)(remote_addr + key->offset), arg);
        if (ucs_likely((length <= key->length - (remote_addr - key->address)) &&
                       (length <= UCT_RINGK_SHM_PUT_MAX_BCOPY))) {
            iface->posted = 1;
            UCT_TL_EP_STAT_OP(&ep->super, PUT, BCOPY, length);
            return length;
        }
    } else {
        length = pack_cb(iface->sink, arg);
        if (length == 0) {
            return 0;
        }
    }
    /* refused: too long for max_bcopy, or (logged by the range check) outside the key */
    if (length > UCT_RINGK_SHM_PUT_MAX_BCOPY) {
        ucs_error("ringk_shm ep %p: put_bcopy callback packed %zu bytes, more than max_bcopy "
                  "(%lu)", ep, length, UCT_RINGK_SHM_PUT_MAX_BCOPY);
    } else {
        uct_ringk_shm_addr(ep, rkey, remote_addr, length, "put_bcopy");
    }
    return UCS_ERR_INVALID_PARAM;
}

/* Copies between the iovecs and [remote_addr, +total) of the peer's allocation. */
static ucs_status_t uct_ringk_shm_ep_rma_iov(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                             uint64_t remote_addr, uct_rkey_t rkey, int write)
{
    uct_ringk_shm_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    size_t total           = uct_iov_total_length(iov, iovcnt);
    size_t i, len;
    char *remote;

    if (total == 0) {
        return UCS_OK;
    }
    remote = uct_ringk_shm_addr(ep, rkey, remote_addr, total, write ? "put_zcopy" :
                                                                        "get_zcopy");
    if (ucs_unlikely(remote == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iovcnt; i++) {
        len = uct_iov_get_length(&iov[i]);
        if (write) {
            memcpy(remote, iov[i].buffer, len);
        } else {
            memcpy(iov[i].buffer, remote, len);
        }
        remote += len;
    }
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                               size_t iovcnt, uint64_t remote_addr,
                                               uct_rkey_t rkey, uct_completion_t *comp)
{
    UCT_TL_EP_STAT_OP(ucs_derived_of(tl_ep, uct_base_ep_t), PUT, ZCOPY,
                      uct_iov_total_length(iov, iovcnt));
    return uct_ringk_shm_ep_rma_iov(tl_ep, iov, iovcnt, remote_addr, rkey, 1);
}

static ucs_status_t uct_ringk_shm_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb,
                                               void *arg, size_t length, uint64_t remote_addr,
                                               uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_ringk_shm_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    void *src;

    if (length > 0) {
        src = uct_ringk_shm_addr(ep, rkey, remote_addr, length, "get_bcopy");
        if (ucs_unlikely(src == NULL)) {
            return UCS_ERR_INVALID_PARAM;
        }
        unpack_cb(arg, src, length); /* straight from the peer's memory */
    } else {
        unpack_cb(arg, NULL, 0);
    }
    UCT_TL_EP_STAT_OP(&ep->super, GET, BCOPY, length);
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                               size_t iovcnt, uint64_t remote_addr,
                                               uct_rkey_t rkey, uct_completion_t *comp)
{
    UCT_TL_EP_STAT_OP(ucs_derived_of(tl_ep, uct_base_ep_t), GET, ZCOPY,
                      uct_iov_total_length(iov, iovcnt));
    return uct_ringk_shm_ep_rma_iov(tl_ep, iov, iovcnt, remote_addr, rkey, 0);
}

/* ---- atomics: CPU atomic instructions on the mapping --------------------------------------- */

/* The word at remote_addr, naturally aligned and inside the key, or NULL (logged). */
static UCS_F_ALWAYS_INLINE void *
uct_ringk_shm_atomic_addr(uct_ep_h tl_ep, uct_rkey_t rkey, uint64_t remote_addr, size_t size,
                          const char *op)
{
    uct_ringk_shm_ep_t *ep          = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    const uct_ringk_shm_rkey_t *key = (const uct_ringk_shm_rkey_t*)rkey;

    /* Keys are at least 8 bytes long (unpack checks), so length - size does not wrap. */
    if (ucs_likely((rkey + 1 > 1) && (key->kind == UCT_RINGK_KEY_SHM) &&
                   !(remote_addr & (size - 1)) &&
                   (remote_addr - key->address <= key->length - size))) {
        ucs_derived_of(ep->super.super.iface, uct_ringk_shm_iface_t)->posted = 1;
        return (void*)(uintptr_t)(remote_addr + key->offset);
    }
    if (remote_addr & (size - 1)) {
        ucs_error("ringk_shm ep %p: %s at 0x%" PRIx64 " is not %zu-byte aligned", ep, op,
                  remote_addr, size);
        return NULL;
    }
    return uct_ringk_shm_addr(ep, rkey, remote_addr, size, op); /* logs what is wrong */
}

/* Every atomic is sequentially consistent (a locked instruction on x86), as posix's are: UCP
 * mixes them with puts and gets of the same memory and orders them with fences and flushes
 * that complete at once here. */
#define UCT_RINGK_SHM_ATOMIC_OP(_ptr, _op, _value, _fetch) \
    switch (_op) { \
    case UCT_ATOMIC_OP_ADD:  _fetch = __atomic_fetch_add(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    case UCT_ATOMIC_OP_AND:  _fetch = __atomic_fetch_and(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    case UCT_ATOMIC_OP_OR:   _fetch = __atomic_fetch_or(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    case UCT_ATOMIC_OP_XOR:  _fetch = __atomic_fetch_xor(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    case UCT_ATOMIC_OP_SWAP: _fetch = __atomic_exchange_n(_ptr, _value, __ATOMIC_SEQ_CST); break; \
    default: \
        ucs_error("ringk_shm: atomic operation %d is not supported", (int)(_op)); \
        return UCS_ERR_UNSUPPORTED; \
    }

static ucs_status_t uct_ringk_shm_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode,
                                                   uint64_t value, uint64_t remote_addr,
                                                   uct_rkey_t rkey)
{
    uint64_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 8, "atomic64_post");
    uint64_t old;

    if (ucs_unlikely((ptr == NULL) || (opcode == UCT_ATOMIC_OP_SWAP))) {
        return (ptr == NULL) ? UCS_ERR_INVALID_PARAM : UCS_ERR_UNSUPPORTED;
    }
    UCT_RINGK_SHM_ATOMIC_OP(ptr, opcode, value, old);
    (void)old;
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_ep_atomic32_post(uct_ep_h tl_ep, unsigned opcode,
                                                   uint32_t value, uint64_t remote_addr,
                                                   uct_rkey_t rkey)
{
    uint32_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 4, "atomic32_post");
    uint32_t old;

    if (ucs_unlikely((ptr == NULL) || (opcode == UCT_ATOMIC_OP_SWAP))) {
        return (ptr == NULL) ? UCS_ERR_INVALID_PARAM : UCS_ERR_UNSUPPORTED;
    }
    UCT_RINGK_SHM_ATOMIC_OP(ptr, opcode, value, old);
    (void)old;
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_ep_atomic64_fetch(uct_ep_h tl_ep, uct_atomic_op_t opcode,
                                                    uint64_t value, uint64_t *result,
                                                    uint64_t remote_addr, uct_rkey_t rkey,
                                                    uct_completion_t *comp)
{
    uint64_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 8, "atomic64_fetch");

    if (ucs_unlikely(ptr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    UCT_RINGK_SHM_ATOMIC_OP(ptr, opcode, value, *result);
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_ep_atomic32_fetch(uct_ep_h tl_ep, uct_atomic_op_t opcode,
                                                    uint32_t value, uint32_t *result,
                                                    uint64_t remote_addr, uct_rkey_t rkey,
                                                    uct_completion_t *comp)
{
    uint32_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 4, "atomic32_fetch");

    if (ucs_unlikely(ptr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    UCT_RINGK_SHM_ATOMIC_OP(ptr, opcode, value, *result);
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                                    uint64_t swap, uint64_t remote_addr,
                                                    uct_rkey_t rkey, uint64_t *result,
                                                    uct_completion_t *comp)
{
    uint64_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 8, "atomic_cswap64");

    if (ucs_unlikely(ptr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* on failure the builtin leaves the value it found in 'compare' */
    __atomic_compare_exchange_n(ptr, &compare, swap, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *result = compare;
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_ep_atomic_cswap32(uct_ep_h tl_ep, uint32_t compare,
                                                    uint32_t swap, uint64_t remote_addr,
                                                    uct_rkey_t rkey, uint32_t *result,
                                                    uct_completion_t *comp)
{
    uint32_t *ptr = uct_ringk_shm_atomic_addr(tl_ep, rkey, remote_addr, 4, "atomic_cswap32");

    if (ucs_unlikely(ptr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    __atomic_compare_exchange_n(ptr, &compare, swap, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *result = compare;
    return UCS_OK;
}

/* ---- completion, ordering, failures ------------------------------------------------------ */

/* Every operation is complete when its call returns: stores are visible to the peer in program
 * order, so flush has nothing to wait for and fence needs only the compiler and the store
 * buffer ordered. */
static ucs_status_t uct_ringk_shm_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_ringk_shm_ep_t *ep = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);

    if (ucs_unlikely(ep->failed && !(flags & UCT_FLUSH_FLAG_CANCEL))) {
        return UCT_RINGK_EP_FAILED_STATUS;
    }
    ucs_memory_cpu_store_fence();
    UCT_TL_EP_STAT_FLUSH(&ep->super);
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    ucs_memory_cpu_store_fence();
    UCT_TL_EP_STAT_FENCE(ucs_derived_of(tl_ep, uct_base_ep_t));
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                              uct_completion_t *comp)
{
    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_memory_cpu_store_fence();
    UCT_TL_IFACE_STAT_FLUSH(ucs_derived_of(tl_iface, uct_base_iface_t));
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_iface_fence(uct_iface_h tl_iface, unsigned flags)
{
    ucs_memory_cpu_store_fence();
    UCT_TL_IFACE_STAT_FENCE(ucs_derived_of(tl_iface, uct_base_iface_t));
    return UCS_OK;
}

/* Never out of resources: a request is never queued, and UCT's answer to that is BUSY. */
static ucs_status_t uct_ringk_shm_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                                 unsigned flags)
{
    return UCS_ERR_BUSY;
}

static unsigned uct_ringk_shm_ep_err_progress(void *arg)
{
    uct_ringk_shm_ep_t *ep = arg;

    uct_iface_handle_ep_err(ep->super.super.iface, &ep->super.super,
                            UCT_RINGK_EP_FAILED_STATUS);
    return 1;
}

static int uct_ringk_shm_ep_err_cb_match(const ucs_callbackq_elem_t *elem, void *arg)
{
    return (elem->cb == uct_ringk_shm_ep_err_progress) && (elem->arg == arg);
}

/* A dead peer: its memory stays mapped (writes to it are lost, never a fault); the error is
 * reported once, from the worker's progress, as UCT expects. */
static ucs_status_t uct_ringk_shm_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_ringk_shm_ep_t *ep       = ucs_derived_of(tl_ep, uct_ringk_shm_ep_t);
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_ringk_shm_iface_t);

    UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    /* C4: pairs with the release store of 'closed' when the peer iface closes. */
    if (!ep->failed && (__atomic_load_n(ep->peer_closed, __ATOMIC_ACQUIRE) ||
                        (ucs_sys_get_proc_create_time(ep->peer_pid) != ep->start_time))) {
        ep->failed = 1;
        ucs_debug("ringk_shm ep %p: peer pid %u is gone", ep, ep->peer_pid);
        ucs_callbackq_add_safe(&iface->super.worker->super.progress_q,
                               uct_ringk_shm_ep_err_progress, ep, UCS_CALLBACKQ_FLAG_ONESHOT);
    }
    return UCS_OK;
}

/* Maps the peer iface's liveness page after checking it is that memfd, ours and private. */
static ucs_status_t uct_ringk_shm_ep_attach(uct_ringk_shm_ep_t *ep,
                                            const uct_ringk_shm_iface_addr_t *addr)
{
    char name[64], link[128];
    ringk_peer_err_t err;
    struct stat st;
    void *page;
    int fd;

    snprintf(name, sizeof(name), UCT_RINGK_SHM_IFACE_NAME_FMT, (unsigned long long)addr->id);
    fd = ringk_node_open_peer(addr->pid, addr->fd, O_RDONLY, name, &st, link, sizeof(link),
                              &err);
    if ((fd >= 0) && (st.st_size < (off_t)ucs_get_page_size())) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        ucs_error("ringk_shm: descriptor %d of pid %u ('%s') is not the iface page '%s' of our "
                  "user, mode 0600, a page long%s%s", addr->fd, addr->pid, link, name,
                  (err == RINGK_PEER_OPEN) ? ": " : "",
                  (err == RINGK_PEER_OPEN) ? strerror(errno) : "");
        return UCS_ERR_UNREACHABLE;
    }
    page = mmap(NULL, ucs_get_page_size(), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (page == MAP_FAILED) {
        ucs_error("ringk_shm: mmap of the peer iface's page failed: %m");
        return UCS_ERR_NO_MEMORY;
    }
    ep->peer_closed = page;
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_ringk_shm_ep_t, const uct_ep_params_t *params)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(params->iface, uct_ringk_shm_iface_t);
    uct_ringk_shm_iface_addr_t addr;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);
    memcpy(&addr, params->iface_addr, sizeof(addr));
    if ((addr.pid == 0) || (addr.pid > INT32_MAX) || (addr.fd < 0)) {
        ucs_error("ringk_shm: invalid peer address (pid %u fd %d)", addr.pid, addr.fd);
        return UCS_ERR_INVALID_ADDR;
    }
    self->peer_pid   = addr.pid;
    self->start_time = ucs_sys_get_proc_create_time(addr.pid);
    self->failed     = 0;
    if (self->start_time == 0) {
        ucs_error("ringk_shm: peer pid %u does not exist", addr.pid);
        return UCS_ERR_UNREACHABLE;
    }
    return uct_ringk_shm_ep_attach(self, &addr);
}

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_shm_ep_t)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(self->super.super.iface,
                                                  uct_ringk_shm_iface_t);

    ucs_callbackq_remove_if(&iface->super.worker->super.progress_q,
                            uct_ringk_shm_ep_err_cb_match, self);
    munmap((void*)self->peer_closed, ucs_get_page_size());
}

UCS_CLASS_DEFINE(uct_ringk_shm_ep_t, uct_base_ep_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_ringk_shm_ep_t, uct_ep_t, const uct_ep_params_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_ringk_shm_ep_t, uct_ep_t);

static ucs_status_t uct_ringk_shm_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_shm_iface_t);

    uct_base_iface_query(&iface->super, attr);
    attr->cap.flags = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_PUT_SHORT |
                      UCT_IFACE_FLAG_PUT_BCOPY | UCT_IFACE_FLAG_PUT_ZCOPY |
                      UCT_IFACE_FLAG_GET_BCOPY | UCT_IFACE_FLAG_GET_ZCOPY |
                      UCT_IFACE_FLAG_ATOMIC_CPU | UCT_IFACE_FLAG_PENDING |
                      UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_EP_CHECK |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;
    /* Every operation completes when posted: a send completion never has to be waited for. */
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP;

    /* zcopy starts where bcopy stops paying (UCT_RINGK_SHM_PUT_MAX_BCOPY). */
    attr->cap.put.max_short       = UINT_MAX;
    attr->cap.put.max_bcopy       = UCT_RINGK_SHM_PUT_MAX_BCOPY;
    attr->cap.put.min_zcopy       = UCT_RINGK_SHM_PUT_MAX_BCOPY;
    attr->cap.put.max_zcopy       = SIZE_MAX;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = IOV_MAX;
    attr->cap.get.max_short       = 0;
    attr->cap.get.max_bcopy       = SIZE_MAX;
    attr->cap.get.min_zcopy       = UCT_RINGK_SHM_GET_MIN_ZCOPY;
    attr->cap.get.max_zcopy       = SIZE_MAX;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = IOV_MAX;

    attr->cap.atomic32.op_flags  =
    attr->cap.atomic64.op_flags  = UCS_BIT(UCT_ATOMIC_OP_ADD) | UCS_BIT(UCT_ATOMIC_OP_AND) |
                                   UCS_BIT(UCT_ATOMIC_OP_OR) | UCS_BIT(UCT_ATOMIC_OP_XOR);
    attr->cap.atomic32.fop_flags =
    attr->cap.atomic64.fop_flags = UCS_BIT(UCT_ATOMIC_OP_ADD) | UCS_BIT(UCT_ATOMIC_OP_AND) |
                                   UCS_BIT(UCT_ATOMIC_OP_OR) | UCS_BIT(UCT_ATOMIC_OP_XOR) |
                                   UCS_BIT(UCT_ATOMIC_OP_SWAP) | UCS_BIT(UCT_ATOMIC_OP_CSWAP);

    attr->iface_addr_len      = sizeof(uct_ringk_shm_iface_addr_t);
    attr->device_addr_len     = sizeof(uct_ringk_dev_addr_t);
    attr->ep_addr_len         = 0;
    attr->max_conn_priv       = 0;
    /* A store into mapped memory: below the ringk device's message latency, so that UCP
     * prefers this device for the memory it can reach. */
    attr->latency             = ucs_linear_func_make(40e-9, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = 12000.0 * UCS_MBYTE;
    attr->overhead            = 5e-9;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_shm_iface_t);
    uct_ringk_shm_iface_addr_t a = {.id = iface->id, .pid = getpid(), .fd = iface->live_fd};

    memcpy(addr, &a, sizeof(a));
    return UCS_OK;
}

static ucs_status_t uct_ringk_shm_iface_get_device_address(uct_iface_h tl_iface,
                                                           uct_device_addr_t *addr)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_shm_iface_t);

    memcpy(addr, &iface->dev_addr, sizeof(iface->dev_addr));
    return UCS_OK;
}

static int uct_ringk_shm_iface_is_reachable(const uct_iface_h tl_iface,
                                            const uct_device_addr_t *dev_addr,
                                            const uct_iface_addr_t *iface_addr)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_shm_iface_t);
    char reason[128];

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        return 0;
    }
    if (!uct_ringk_dev_addr_reachable(&iface->dev_addr, dev_addr, UCT_RINGK_DEV_SHM, reason,
                                      sizeof(reason))) {
        ucs_debug("ringk_shm iface %p: peer not reachable: %s", iface, reason);
        return 0;
    }
    return 1;
}

static ucs_status_ptr_t uct_ringk_shm_ep_tag_rndv_zcopy(uct_ep_h ep, uct_tag_t tag,
                                                        const void *header,
                                                        unsigned header_length,
                                                        const uct_iov_t *iov, size_t iovcnt,
                                                        unsigned flags, uct_completion_t *comp)
{
    return UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
}

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_ringk_shm_iface_t, uct_iface_t);

/* Nothing ever waits in this iface, so its progress is a spin-wait hint: a program that calls
 * progress again and again with no operation in between is polling memory a peer writes (a
 * flag, the end of a put), and lets go of the line for a moment on each check instead of taking
 * it back from the writer at once. A program that posts between its calls pays nothing. */
static unsigned uct_ringk_shm_iface_progress(uct_iface_h tl_iface)
{
    uct_ringk_shm_iface_t *iface = ucs_derived_of(tl_iface, uct_ringk_shm_iface_t);

    if (iface->posted) {
        iface->posted = 0;
        return 0;
    }
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
    return 0;
}

static uct_iface_ops_t uct_ringk_shm_iface_ops = {
    .ep_put_short             = uct_ringk_shm_ep_put_short,
    .ep_put_bcopy             = uct_ringk_shm_ep_put_bcopy,
    .ep_put_zcopy             = uct_ringk_shm_ep_put_zcopy,
    .ep_get_short             = (uct_ep_get_short_func_t)ucs_empty_function_return_unsupported,
    .ep_get_bcopy             = uct_ringk_shm_ep_get_bcopy,
    .ep_get_zcopy             = uct_ringk_shm_ep_get_zcopy,
    .ep_am_short              = (uct_ep_am_short_func_t)ucs_empty_function_return_unsupported,
#ifdef HAVE_UCT_IFACE_OPS_T_EP_AM_SHORT_IOV
    .ep_am_short_iov          = (uct_ep_am_short_iov_func_t)ucs_empty_function_return_unsupported,
#endif
    .ep_am_bcopy              = (uct_ep_am_bcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_am_zcopy              = (uct_ep_am_zcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_atomic_cswap64        = uct_ringk_shm_ep_atomic_cswap64,
    .ep_atomic_cswap32        = uct_ringk_shm_ep_atomic_cswap32,
    .ep_atomic32_post         = uct_ringk_shm_ep_atomic32_post,
    .ep_atomic64_post         = uct_ringk_shm_ep_atomic64_post,
    .ep_atomic32_fetch        = uct_ringk_shm_ep_atomic32_fetch,
    .ep_atomic64_fetch        = uct_ringk_shm_ep_atomic64_fetch,
    .ep_tag_eager_short       = (uct_ep_tag_eager_short_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_eager_bcopy       = (uct_ep_tag_eager_bcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_eager_zcopy       = (uct_ep_tag_eager_zcopy_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_rndv_zcopy        = uct_ringk_shm_ep_tag_rndv_zcopy,
    .ep_tag_rndv_cancel       = (uct_ep_tag_rndv_cancel_func_t)ucs_empty_function_return_unsupported,
    .ep_tag_rndv_request      = (uct_ep_tag_rndv_request_func_t)ucs_empty_function_return_unsupported,
    .iface_tag_recv_zcopy     = (uct_iface_tag_recv_zcopy_func_t)ucs_empty_function_return_unsupported,
    .iface_tag_recv_cancel    = (uct_iface_tag_recv_cancel_func_t)ucs_empty_function_return_unsupported,
    .ep_pending_add           = uct_ringk_shm_ep_pending_add,
    .ep_pending_purge         = (uct_ep_pending_purge_func_t)ucs_empty_function,
    .ep_flush                 = uct_ringk_shm_ep_flush,
    .ep_fence                 = uct_ringk_shm_ep_fence,
    .ep_check                 = uct_ringk_shm_ep_check,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_ringk_shm_ep_t),
    .ep_connect               = (uct_ep_connect_func_t)ucs_empty_function_return_unsupported,
    .ep_disconnect            = (uct_ep_disconnect_func_t)ucs_empty_function_return_unsupported,
    .cm_ep_conn_notify        = (uct_cm_ep_conn_notify_func_t)ucs_empty_function_return_unsupported,
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_ringk_shm_ep_t),
    .ep_get_address           = (uct_ep_get_address_func_t)ucs_empty_function_return_unsupported,
    .ep_connect_to_ep         = (uct_ep_connect_to_ep_func_t)ucs_empty_function_return_unsupported,
    .iface_accept             = (uct_iface_accept_func_t)ucs_empty_function_return_unsupported,
    .iface_reject             = (uct_iface_reject_func_t)ucs_empty_function_return_unsupported,
    .iface_flush              = uct_ringk_shm_iface_flush,
    .iface_fence              = uct_ringk_shm_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_ringk_shm_iface_progress,
    .iface_event_fd_get       = (uct_iface_event_fd_get_func_t)ucs_empty_function_return_unsupported,
    .iface_event_arm          = (uct_iface_event_arm_func_t)ucs_empty_function_return_success,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_ringk_shm_iface_t),
    .iface_query              = uct_ringk_shm_iface_query,
    .iface_get_device_address = uct_ringk_shm_iface_get_device_address,
    .iface_get_address        = uct_ringk_shm_iface_get_address,
    .iface_is_reachable       = uct_ringk_shm_iface_is_reachable
};

static UCS_CLASS_INIT_FUNC(uct_ringk_shm_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params, const uct_iface_config_t *tl_config)
{
    const uct_ringk_iface_config_t *config = ucs_derived_of(tl_config, uct_ringk_iface_config_t);
    size_t align, align_offset;
    ucs_status_t status;
    char name[64];

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_ringk_shm_iface_ops,
                              &uct_base_iface_internal_ops, md, worker, params,
                              tl_config UCS_STATS_ARG(
                                  (params->field_mask & UCT_IFACE_PARAM_FIELD_STATS_ROOT) ?
                                  params->stats_root : NULL)
                              UCS_STATS_ARG(UCT_RINGK_SHM_MD_NAME));
    status = uct_ringk_iface_config_check(config);
    if (status != UCS_OK) {
        return status;
    }
    /* no active messages here, but the same parameters are refused as on the ring device */
    status = uct_ringk_iface_am_align(params, &align, &align_offset);
    if (status != UCS_OK) {
        return status;
    }
    uct_ringk_dev_addr_init(&self->dev_addr, UCT_RINGK_DEV_SHM);
    self->live_fd = -1;
    self->sink    = mmap(NULL, UCT_RINGK_SHM_PUT_MAX_BCOPY, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (self->sink == MAP_FAILED) {
        ucs_error("ringk_shm: mmap of the iface's put sink failed: %m");
        return UCS_ERR_NO_MEMORY;
    }
    self->id = ucs_generate_uuid((uintptr_t)self);
    snprintf(name, sizeof(name), UCT_RINGK_SHM_IFACE_NAME_FMT, (unsigned long long)self->id);
    self->live_fd = memfd_create(name, MFD_CLOEXEC);
    if ((self->live_fd < 0) || (fchmod(self->live_fd, 0600) != 0) ||
        (ftruncate(self->live_fd, ucs_get_page_size()) != 0)) {
        ucs_error("ringk_shm: cannot create the iface's page: %m");
        goto err;
    }
    self->closed = mmap(NULL, ucs_get_page_size(), PROT_READ | PROT_WRITE, MAP_SHARED,
                        self->live_fd, 0);
    if (self->closed == MAP_FAILED) {
        ucs_error("ringk_shm: mmap of the iface's page failed: %m");
        goto err;
    }
    return UCS_OK;

err:
    if (self->live_fd >= 0) {
        close(self->live_fd);
    }
    munmap(self->sink, UCT_RINGK_SHM_PUT_MAX_BCOPY);
    return UCS_ERR_IO_ERROR;
}

static UCS_CLASS_CLEANUP_FUNC(uct_ringk_shm_iface_t)
{
    uct_base_iface_progress_disable(&self->super.super, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    /* C4: peers' ep_check sees the iface gone. */
    __atomic_store_n(self->closed, 1, __ATOMIC_RELEASE);
    munmap(self->closed, ucs_get_page_size());
    close(self->live_fd);
    munmap(self->sink, UCT_RINGK_SHM_PUT_MAX_BCOPY);
}

UCS_CLASS_DEFINE(uct_ringk_shm_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_ringk_shm_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_ringk_shm_iface_t, uct_iface_t);

ucs_status_t uct_ringk_shm_iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config, uct_iface_h *iface_p)
{
    return UCS_CLASS_NEW_FUNC_NAME(uct_ringk_shm_iface_t)(md, worker, params, config, iface_p);
}
