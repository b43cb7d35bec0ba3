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
 * The "mapped" device of the ringk transport on this md does put and get as memcpy and the
 * 32/64-bit atomics as CPU atomic instructions on the mapping. It has no active messages: the
 * "ring" device on the ringk md carries those and keeps cross-memory attach for memory that
 * is only registered (UCP, like posix with cma, uses this device for memory that ringk_shm
 * allocated and the other for the rest).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#endif
#include "config.h"       /* the UCX build's configuration: ucx-build/config.h */
#include "ringk_config.h"

#include "ringk_shm_int.h"

#include <core/ringk_node.h>
#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#ifdef HAVE_UCS_SYS_PTR_ARITH_H
#include <ucs/sys/ptr_arith.h> /* ucs_align_up and ucs_align_up_pow2 */
#endif
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>

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

static ucs_status_t uct_ringk_shm_md_query(uct_md_h tl_md, uct_ringk_md_attr_t *attr)
{
    __typeof__(&UCT_RINGK_MD_CAP(attr)) cap = &UCT_RINGK_MD_CAP(attr);

    uct_ringk_md_attr_base(attr);
    /* No REG: UCP sends registered memory to the ringk md (cross-memory attach), and rkey_ptr
     * is never asked of a key this md did not pack. */
    cap->flags             = UCT_MD_FLAG_ALLOC | UCT_MD_FLAG_RKEY_PTR | UCT_MD_FLAG_NEED_RKEY;
    cap->reg_mem_types     = 0;
    cap->alloc_mem_types   = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    cap->access_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    cap->detect_mem_types  = 0;
    cap->max_alloc         = SIZE_MAX;
    cap->max_reg           = 0;
    attr->rkey_packed_size = sizeof(uct_ringk_shm_packed_rkey_t);
    attr->reg_cost         = ucs_linear_func_make(0, 0);
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
                                            ucs_memory_type_t mem_type,
                                            UCT_RINGK_MEM_ALLOC_SYS_DEV_ARG unsigned flags,
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

static ucs_status_t uct_ringk_shm_mkey_pack(UCT_RINGK_MKEY_PACK_ARGS(md, tl_memh))
{
    const uct_ringk_shm_memh_t *memh = tl_memh;
    uct_ringk_shm_packed_rkey_t packed = {
        .hdr    = uct_ringk_rkey_hdr(UCT_RINGK_SHM_RKEY_MAGIC, (uintptr_t)memh->address,
                                     memh->length),
        .fd     = memh->fd,
        .seg_id = memh->seg_id
    };

    memcpy(rkey_buffer, &packed, sizeof(packed));
    return UCS_OK;
}

uct_md_ops_t uct_ringk_shm_md_ops = {
    UCT_RINGK_BASE_MD_OPS,
    .query                  = uct_ringk_shm_md_query,
    .mem_alloc              = uct_ringk_shm_mem_alloc,
    .mem_free               = uct_ringk_shm_mem_free,
    .mem_reg                = (uct_md_mem_reg_func_t)ucs_empty_function_return_unsupported,
    .mem_dereg              = (uct_md_mem_dereg_func_t)ucs_empty_function_return_unsupported,
    .mem_query              = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack              = uct_ringk_shm_mkey_pack,
    .detect_memory_type     = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported
};

/* ---- remote keys: the mappings of peers' allocations ----------------------------------------- */
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
    fd = ringk_node_open_peer(packed->hdr.pid, packed->fd, O_RDWR, name, &st, link, sizeof(link),
                              &err);
    switch (err) {
    case RINGK_PEER_OK:
        break;
    case RINGK_PEER_OPEN:
        ucs_error("ringk_shm: cannot open the peer allocation /proc/%u/fd/%d: %m", packed->hdr.pid,
                  packed->fd);
        return -1;
    case RINGK_PEER_NAME:
        ucs_error("ringk_shm: descriptor %d of pid %u is '%s', not the allocation the key "
                  "names ('%s')", packed->fd, packed->hdr.pid, link, name);
        return -1;
    case RINGK_PEER_OWNER:
        ucs_error("ringk_shm: the allocation of pid %u is owned by uid %u mode 0%o; only our "
                  "own 0600 memory is mapped", packed->hdr.pid, st.st_uid, st.st_mode & 0777);
        return -1;
    default:
        ucs_error("ringk_shm: cannot inspect the allocation of pid %u: %m", packed->hdr.pid);
        return -1;
    }
    seals = fcntl(fd, F_GET_SEALS);
    if ((seals < 0) || !(seals & F_SEAL_SHRINK) || ((uint64_t)st.st_size < packed->hdr.length)) {
        ucs_error("ringk_shm: the allocation of pid %u is %lld bytes%s, the key says %" PRIu64,
                  packed->hdr.pid, (long long)st.st_size,
                  ((seals >= 0) && (seals & F_SEAL_SHRINK)) ? "" : " and may shrink",
                  packed->hdr.length);
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
    if (!uct_ringk_rkey_hdr_valid(&packed.hdr, UCT_RINGK_SHM_RKEY_MAGIC) || (packed.fd < 0) ||
        (packed.reserved != 0) || (packed.hdr.length < 8) ||
        (packed.hdr.length > SIZE_MAX / 2)) {
        ucs_error("ringk_shm: invalid remote key (magic 0x%x pid %u fd %d range 0x%" PRIx64 "+%"
                  PRIu64 ")", packed.hdr.magic, packed.hdr.pid, packed.fd, packed.hdr.address,
                  packed.hdr.length);
        return UCS_ERR_INVALID_PARAM;
    }
    pthread_mutex_lock(&uct_ringk_shm_maps_lock);
    for (map = uct_ringk_shm_maps; map != NULL; map = map->next) {
        if ((map->pid == packed.hdr.pid) && (map->seg_id == packed.seg_id)) {
            break;
        }
    }
    if (map != NULL) {
        if (packed.hdr.length > map->length) {
            ucs_error("ringk_shm: key to allocation 0x%" PRIx64 " of pid %u says %" PRIu64
                      " bytes, it was mapped with %" PRIu64, packed.seg_id, packed.hdr.pid,
                      packed.hdr.length, map->length);
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
        map->base = uct_ringk_shm_map_peer(fd, packed.hdr.length, &map->span);
        close(fd);
        if (map->base == MAP_FAILED) {
            ucs_error("ringk_shm: mmap of %" PRIu64 " bytes of pid %u failed: %m",
                      packed.hdr.length, packed.hdr.pid);
            ucs_free(map);
            status = UCS_ERR_NO_MEMORY;
            goto out;
        }
        map->pid           = packed.hdr.pid;
        map->seg_id        = packed.seg_id;
        map->length        = packed.hdr.length;
        map->refs          = 1;
        map->next          = uct_ringk_shm_maps;
        uct_ringk_shm_maps = map;
    }
    key->kind    = UCT_RINGK_KEY_SHM;
    key->pid     = packed.hdr.pid;
    key->address = packed.hdr.address;
    key->length  = packed.hdr.length;
    key->mapped  = map->base;
    key->offset  = (intptr_t)((uintptr_t)map->base - packed.hdr.address);
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
