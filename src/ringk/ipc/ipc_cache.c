/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk IPC handles: export of device allocations, handles of shared host memory, and the
 * process's import cache (one mapping per exported allocation, reference counted, bounded,
 * forgotten when its exporter revokes it or dies). */
#define _GNU_SOURCE /* F_GET_SEALS, F_SEAL_SHRINK */
#include "ringk_config.h"

#include "ipc.h"
#include "../ringk_log.h"

#include <core/ringk_cuda.h>
#include <core/ringk_node.h>
#include <ringk/api/ringk_ipc.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define IPC_CACHE_DEFAULT 256u
#define IPC_CACHE_MAX     65536u

/* One imported allocation. Life: MAPPED (in use while refs > 0, else cached) -> GONE (revoked
 * or its exporter dead: unmapped at its last reference, kept as a tombstone so later imports of
 * it get -ESTALE) -> freed when tombstones overflow the limit. */
typedef enum { ENTRY_MAPPED, ENTRY_GONE } entry_state_t;

typedef struct ipc_entry {
    struct ipc_entry *next;
    entry_state_t     state;
    int32_t           pid;
    uint64_t          start;   /* the exporter's start time (/proc/<pid>/stat), 0 unknown */
    uint64_t          id;
    ringk_ipc_type_t  type;
    int               host;    /* host memory (mmap), else device (CUDA) */
    int               own;     /* device memory this process exported: used in place, nothing
                                  mapped (CUDA refuses to open a process's own handle) */
    void             *base;    /* the mapping, NULL once unmapped */
    uint64_t          size;
    uint64_t          key;     /* handle_key() of the handle it was mapped from */
    unsigned          refs;
    uint64_t          used;    /* the cache's clock at its last import: LRU eviction */
} ipc_entry_t;

/* An allocation this process exported: exported again, it keeps its id (importers reuse their
 * mapping); once revoked, or when another allocation took its address, it gets a new id. */
typedef struct ipc_export {
    struct ipc_export *next;
    uint64_t           base, size, key, id;
    int                type;
} ipc_export_t;

#define IPC_EXPORTS_MAX 4096u /* exports remembered; the oldest is forgotten beyond it */

static struct {
    pthread_mutex_t         mu;
    ipc_entry_t            *head;
    unsigned                limit;  /* 0 until the first use reads the default */
    uint64_t                clock;
    ringk_ipc_cache_stats_t st;
    ipc_export_t           *exports;   /* newest first */
    unsigned                nexports;
    uint64_t                serial;    /* exports made: the top 16 bits of a new id */
} ipc_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* What tells one allocation's handle from another's: the handle's bytes (LEGACY, FABRIC), or
 * the exporter's key of it (a POSIX_FD handle's descriptor number means nothing elsewhere). */
static uint64_t bytes_key(const uint8_t *bytes)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    size_t i;

    for (i = 0; i < RINGK_IPC_HANDLE_BYTES; i++) {
        h = (h ^ bytes[i]) * 1099511628211ull;
    }
    return h;
}

/* The id of an export of (base, size, key) of @a type: the one it had, or a new one. */
static uint64_t export_id(uint64_t base, uint64_t size, uint64_t key, int type)
{
    ipc_export_t *x, **pp;
    uint64_t id;

    pthread_mutex_lock(&ipc_cache.mu);
    for (x = ipc_cache.exports; x != NULL; x = x->next) {
        if ((x->base == base) && (x->size == size) && (x->key == key) && (x->type == type)) {
            id = x->id;
            pthread_mutex_unlock(&ipc_cache.mu);
            return id;
        }
    }
    id = base ^ (++ipc_cache.serial << 48);
    id = (id == 0) ? 1 : id;
    if ((x = calloc(1, sizeof(*x))) != NULL) {
        *x = (ipc_export_t){ipc_cache.exports, base, size, key, id, type};
        ipc_cache.exports = x;
        if (++ipc_cache.nexports > IPC_EXPORTS_MAX) {
            for (pp = &ipc_cache.exports; (*pp)->next != NULL; pp = &(*pp)->next) {
            }
            free(*pp);
            *pp = NULL;
            ipc_cache.nexports--;
        }
    }
    pthread_mutex_unlock(&ipc_cache.mu);
    return id;
}

void ringk_ipc_export_forget(uint64_t id)
{
    ipc_export_t **pp, *x;

    pthread_mutex_lock(&ipc_cache.mu);
    for (pp = &ipc_cache.exports; *pp != NULL;) {
        if ((*pp)->id == id) {
            x   = *pp;
            *pp = x->next;
            free(x);
            ipc_cache.nexports--;
        } else {
            pp = &(*pp)->next;
        }
    }
    pthread_mutex_unlock(&ipc_cache.mu);
}

/* handle_key() of @a h: see bytes_key(); a POSIX_FD handle's key is its file's identity for
 * host memory, else 0 (the id alone). */
static uint64_t handle_key(const ringk_ipc_handle_t *h)
{
    return (h->type == RINGK_IPC_TYPE_POSIX_FD) ? 0 : bytes_key(h->bytes);
}

uint64_t ringk_ipc_proc_start(int32_t pid)
{
    unsigned long long start = 0;
    const char *p;
    char buf[1024];
    int i;

    if ((p = ringk_node_proc_stat(pid, buf, sizeof(buf))) == NULL) {
        return 0;
    }
    for (i = 2; (i < 22) && (p != NULL); i++) { /* field 22: starttime */
        p = strchr(p + 1, ' ');
    }
    if ((p == NULL) || (sscanf(p + 1, "%llu", &start) != 1)) {
        return 0;
    }
    return start;
}

/* Whether exporter (pid, start) still runs: start 0 (unknown) trusts the pid alone. */
static int exporter_alive(int32_t pid, uint64_t start)
{
    uint64_t now;

    if ((kill(pid, 0) != 0) && (errno == ESRCH)) {
        return 0;
    }
    now = ringk_ipc_proc_start(pid);
    return (start == 0) || (now == 0) || (now == start);
}

static void cache_limit_init(void)
{
    const char *env;
    char *end;
    unsigned long v;

    if (ipc_cache.limit != 0) {
        return;
    }
    ipc_cache.limit = IPC_CACHE_DEFAULT;
    if ((env = getenv("RINGK_IPC_CACHE_MAX")) != NULL) {
        errno = 0;
        v     = strtoul(env, &end, 10);
        if ((errno != 0) || (*end != '\0') || (end == env) || (v < 1) || (v > IPC_CACHE_MAX)) {
            ringk_log_msg(NULL, RINGK_LOG_WARN, "RINGK_IPC_CACHE_MAX '%s' is not in 1..%u; "
                          "the import cache holds %u entries", env, IPC_CACHE_MAX,
                          IPC_CACHE_DEFAULT);
        } else {
            ipc_cache.limit = (unsigned)v;
        }
    }
}

static void entry_unmap(ipc_entry_t *e)
{
    if (e->base == NULL) {
        return;
    }
    if (e->own) {
        /* nothing was mapped */
    } else if (e->host) {
        munmap(e->base, e->size);
    } else {
        ringk_cuda_vmm_close(e->type, e->base, e->size);
    }
    e->base = NULL;
}

/* Counts entries and tombstones; frees tombstones beyond the limit (oldest first) and unmaps
 * unused mappings beyond it (least recently used first). Under the lock. */
static void cache_trim(unsigned limit)
{
    ipc_entry_t **pp, **oldest;
    unsigned mapped, gone;

    for (;;) {
        mapped = gone = 0;
        oldest = NULL;
        for (pp = &ipc_cache.head; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->state == ENTRY_GONE) {
                gone += ((*pp)->refs == 0);
                continue;
            }
            mapped++;
        }
        if ((mapped <= limit) && (gone <= limit)) {
            return;
        }
        /* the victim: an unused tombstone when they overflow, else an unused mapping */
        for (pp = &ipc_cache.head; *pp != NULL; pp = &(*pp)->next) {
            if (((*pp)->refs != 0) ||
                (((*pp)->state == ENTRY_GONE) != (gone > limit))) {
                continue;
            }
            if ((oldest == NULL) || ((*pp)->used < (*oldest)->used)) {
                oldest = pp;
            }
        }
        if (oldest == NULL) {
            return; /* every mapping is in use */
        }
        pp = oldest;
        {
            ipc_entry_t *e = *pp;

            if (e->state == ENTRY_MAPPED) {
                ipc_cache.st.evictions++;
            }
            entry_unmap(e);
            *pp = e->next;
            free(e);
        }
    }
}

static void cache_stats_count(void)
{
    ipc_entry_t *e;

    ipc_cache.st.entries = ipc_cache.st.in_use = 0;
    for (e = ipc_cache.head; e != NULL; e = e->next) {
        if (e->state == ENTRY_MAPPED) {
            ipc_cache.st.entries++;
            ipc_cache.st.in_use += (e->refs != 0);
        }
    }
    ipc_cache.st.limit = ipc_cache.limit;
}

/* Marks @a e gone (unmapped now if unused). Under the lock. */
static void entry_forget(ipc_entry_t *e)
{
    if (e->state == ENTRY_GONE) {
        return;
    }
    e->state = ENTRY_GONE;
    ipc_cache.st.invalidations++;
    if (e->refs == 0) {
        entry_unmap(e);
    }
}

int ringk_ipc_handle_check(const ringk_ipc_handle_t *h, char *why, size_t why_len)
{
    size_t i, len;

    if ((h->type != RINGK_IPC_TYPE_LEGACY) && (h->type != RINGK_IPC_TYPE_FABRIC) &&
        (h->type != RINGK_IPC_TYPE_POSIX_FD)) {
        snprintf(why, why_len, "type %d is not LEGACY (1), FABRIC (2) or POSIX_FD (3)",
                 (int)h->type);
        return -EINVAL;
    }
    if ((h->size < 1) || (h->size > RINGK_IPC_SIZE_MAX)) {
        snprintf(why, why_len, "size %llu is not in 1..%llu", (unsigned long long)h->size,
                 (unsigned long long)RINGK_IPC_SIZE_MAX);
        return -EINVAL;
    }
    if (h->offset >= h->size) {
        snprintf(why, why_len, "offset %llu is not below size %llu",
                 (unsigned long long)h->offset, (unsigned long long)h->size);
        return -EINVAL;
    }
    if (h->id == 0) {
        snprintf(why, why_len, "id is 0");
        return -EINVAL;
    }
    if (h->pid <= 0) {
        snprintf(why, why_len, "pid %d is not a process id", (int)h->pid);
        return -EINVAL;
    }
    if ((h->type == RINGK_IPC_TYPE_POSIX_FD) != (h->fd >= 0)) {
        snprintf(why, why_len, "fd %d with type %d (a descriptor goes with POSIX_FD only)",
                 h->fd, (int)h->type);
        return -EINVAL;
    }
    len = strnlen(h->device, sizeof(h->device));
    if (len == sizeof(h->device)) {
        snprintf(why, why_len, "device is not NUL-terminated within %zu bytes",
                 sizeof(h->device));
        return -EINVAL;
    }
    for (i = 0; i < len; i++) { /* a PCI bus id: hex digits, ':' and '.' */
        char c = h->device[i];

        if (!(((c >= '0') && (c <= '9')) || ((c >= 'a') && (c <= 'f')) ||
              ((c >= 'A') && (c <= 'F')) || (c == ':') || (c == '.'))) {
            snprintf(why, why_len, "device has byte 0x%02x at %zu (a PCI bus id is hex digits, "
                     "':' and '.')", (unsigned char)c, i);
            return -EINVAL;
        }
    }
    if ((h->type != RINGK_IPC_TYPE_POSIX_FD) && (len == 0)) {
        snprintf(why, why_len, "a %s handle names no device",
                 (h->type == RINGK_IPC_TYPE_LEGACY) ? "LEGACY" : "FABRIC");
        return -EINVAL;
    }
    return 0;
}

/* Whether descriptor @a fd is shared host memory of this user that holds @a size bytes: 1 (a
 * regular file), 0 (not a regular file: a device handle), or -EPERM / -EINVAL with @a why. */
static int fd_is_host_memory(int fd, uint64_t size, char *why, size_t why_len)
{
    struct stat st;
    int seals;

    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "fstat of descriptor %d: %s", fd, strerror(errno));
        return -EINVAL;
    }
    if (!S_ISREG(st.st_mode)) {
        return 0;
    }
    if ((st.st_uid != geteuid()) || (st.st_mode & 077)) {
        snprintf(why, why_len, "descriptor %d is a file of user %u with mode %04o (shared memory "
                 "must be this user's, %u, with mode 0600 or stricter)", fd,
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return -EPERM;
    }
    if ((uint64_t)st.st_size < size) {
        snprintf(why, why_len, "descriptor %d holds %llu bytes, fewer than the size %llu", fd,
                 (unsigned long long)st.st_size, (unsigned long long)size);
        return -EINVAL;
    }
    /* a file its owner could shrink under the mapping would fault the importer (SIGBUS) */
    seals = fcntl(fd, F_GET_SEALS);
    if ((seals < 0) || !(seals & F_SEAL_SHRINK)) {
        snprintf(why, why_len, "descriptor %d is not sealed against shrinking (a memfd made "
                 "with MFD_ALLOW_SEALING and F_SEAL_SHRINK added)", fd);
        return -EPERM;
    }
    return 1;
}

int ringk_ipc_export(const void *ptr, unsigned types, ringk_ipc_handle_t *handle_p)
{
    const unsigned known = RINGK_IPC_TYPE_BIT(RINGK_IPC_TYPE_LEGACY) |
                           RINGK_IPC_TYPE_BIT(RINGK_IPC_TYPE_FABRIC) |
                           RINGK_IPC_TYPE_BIT(RINGK_IPC_TYPE_POSIX_FD);
    ringk_cuda_vmm_export_t ex;
    ringk_ipc_handle_t h;
    char why[256];
    int ret;

    if ((ptr == NULL) || (handle_p == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL",
                                 (ptr == NULL) ? "ptr" : "handle_p");
    }
    if (types & ~known) {
        return ringk_log_bad_arg(NULL, __func__, "types 0x%x has unknown bits (known: 0x%x)",
                                 types, known);
    }
    if (types == RINGK_IPC_TYPES_ANY) {
        types = known;
    }
    memset(&ex, 0, sizeof(ex));
    ret = ringk_cuda_vmm_export(ptr, types, &ex, why, sizeof(why));
    if (ret != 0) {
        ringk_log_msg(NULL, (ret == -EINVAL) ? RINGK_LOG_ERROR : RINGK_LOG_WARN,
                      "ringk_ipc_export: %p: %s", ptr, why);
        return ret;
    }
    memset(&h, 0, sizeof(h));
    h.type   = (ringk_ipc_type_t)ex.type;
    h.fd     = ex.fd;
    h.size   = ex.size;
    h.offset = (uint64_t)(uintptr_t)ptr - ex.base;
    h.pid    = (int32_t)getpid();
    h.id     = export_id(ex.base, ex.size,
                         (ex.type == RINGK_CUDA_IPC_POSIX_FD) ? ex.alloc : bytes_key(ex.bytes),
                         ex.type);
    memcpy(h.bytes, ex.bytes, sizeof(h.bytes));
    snprintf(h.device, sizeof(h.device), "%s", ex.busid);
    *handle_p = h;
    return 0;
}

int ringk_ipc_handle_from_fd(int fd, uint64_t len, uint64_t offset, ringk_ipc_handle_t *handle_p)
{
    ringk_ipc_handle_t h;
    struct stat st;
    char why[256];
    int ret, dup_fd;

    if (handle_p == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "handle_p is NULL");
    }
    if ((len < 1) || (len > RINGK_IPC_SIZE_MAX) || (offset >= len)) {
        return ringk_log_bad_arg(NULL, __func__, "len %llu, offset %llu: len must be in 1..%llu "
                                 "and offset below it", (unsigned long long)len,
                                 (unsigned long long)offset,
                                 (unsigned long long)RINGK_IPC_SIZE_MAX);
    }
    if (fd < 0) {
        return ringk_log_bad_arg(NULL, __func__, "fd %d is not a descriptor", fd);
    }
    ret = fd_is_host_memory(fd, len, why, sizeof(why));
    if (ret <= 0) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_ipc_handle_from_fd: %s",
                      (ret == 0) ? "not a regular file (a cuMem handle comes from "
                      "ringk_ipc_export)" : why);
        return (ret == 0) ? -EINVAL : ret;
    }
    if ((fstat(fd, &st) != 0) || ((dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)) {
        return -errno;
    }
    memset(&h, 0, sizeof(h));
    h.type   = RINGK_IPC_TYPE_POSIX_FD;
    h.fd     = dup_fd;
    h.size   = len;
    h.offset = offset;
    h.pid    = (int32_t)getpid();
    /* the file (device and inode) is the allocation: exported again, the same id */
    h.id     = export_id((uint64_t)st.st_ino, len, (uint64_t)st.st_dev, RINGK_IPC_TYPE_POSIX_FD);
    *handle_p = h;
    return 0;
}

int ringk_ipc_handle_release(ringk_ipc_handle_t *handle)
{
    if (handle == NULL) {
        return 0;
    }
    if ((handle->type == RINGK_IPC_TYPE_POSIX_FD) && (handle->fd >= 0)) {
        close(handle->fd);
    }
    memset(handle, 0, sizeof(*handle));
    handle->fd = -1;
    return 0;
}

/* The mapping of @a h: host memory by mmap (a POSIX_FD handle that names no device), device
 * memory through CUDA; device memory this process exported itself in place (*@a own_p 1).
 * Under the lock. */
static int handle_map(const ringk_ipc_handle_t *h, void **base_p, int *host_p, int *own_p,
                      char *why, size_t why_len)
{
    ipc_export_t *x;
    void *p;
    int ret;

    *own_p  = 0;
    *host_p = (h->type == RINGK_IPC_TYPE_POSIX_FD) && (h->device[0] == '\0');
    if (!*host_p && (h->pid == (int32_t)getpid())) {
        /* device memory of this process: the allocation it exported, in place */
        for (x = ipc_cache.exports; (x != NULL) && (x->id != h->id); x = x->next) {
        }
        if ((x != NULL) && (x->size == h->size) && (x->type == (int)h->type) &&
            (x->key == handle_key(h))) {
            *base_p = (void*)(uintptr_t)x->base;
            *own_p  = 1;
            return 0;
        }
    }
    if (!*host_p) {
        return ringk_cuda_vmm_import(h->type, h->bytes, h->fd, h->device, h->size, base_p, why,
                                     why_len);
    }
    ret = fd_is_host_memory(h->fd, h->size, why, why_len);
    if (ret <= 0) {
        if (ret == 0) {
            snprintf(why, why_len, "descriptor %d of a host-memory handle (no device) is not a "
                     "regular file", h->fd);
        }
        return (ret == 0) ? -EINVAL : ret;
    }
    p = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
    if (p == MAP_FAILED) {
        snprintf(why, why_len, "mmap of %llu bytes: %s", (unsigned long long)h->size,
                 strerror(errno));
        return -EIO;
    }
    *base_p = p;
    return 0;
}

/* The entry of the handle's (pid, id), forgotten first if its exporter is found dead; NULL if
 * none. Under the lock. */
static ipc_entry_t *cache_find(const ringk_ipc_handle_t *h)
{
    ipc_entry_t *e;

    for (e = ipc_cache.head; e != NULL; e = e->next) {
        if ((e->pid == h->pid) && (e->id == h->id)) {
            if ((e->state == ENTRY_MAPPED) && !exporter_alive(e->pid, e->start)) {
                entry_forget(e); /* the pid is another process's now, or nobody's */
            }
            return e;
        }
    }
    return NULL;
}

/* Maps @a h into a new entry with one reference, making room first: 0, or -ENOSPC / -ENOMEM /
 * the mapping's error (logged). Under the lock: a second import of the same handle meanwhile
 * must find this one (CUDA refuses a second open of a legacy handle). */
static int cache_map(const ringk_ipc_handle_t *h, void **ptr_p)
{
    char why[256];
    ipc_entry_t *e;
    void *base;
    int ret, host, own;

    cache_trim(ipc_cache.limit - 1); /* unused mappings go first, least recently used first */
    cache_stats_count();
    if (ipc_cache.st.entries >= ipc_cache.limit) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_ipc_import: the import cache holds its "
                      "limit of %u entries, all in use (ringk_ipc_close some, or raise it with "
                      "ringk_ipc_cache_limit_set / RINGK_IPC_CACHE_MAX)", ipc_cache.limit);
        return -ENOSPC;
    }
    if ((e = calloc(1, sizeof(*e))) == NULL) {
        return -ENOMEM;
    }
    ret = handle_map(h, &base, &host, &own, why, sizeof(why));
    if (ret != 0) {
        free(e);
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_ipc_import: process %d's allocation %llx "
                      "(%llu bytes): %s", (int)h->pid, (unsigned long long)h->id,
                      (unsigned long long)h->size, why);
        return ret;
    }
    e->state = ENTRY_MAPPED;
    e->pid   = h->pid;
    e->start = ringk_ipc_proc_start(h->pid);
    e->id    = h->id;
    e->type  = h->type;
    e->host  = host;
    e->own   = own;
    e->base  = base;
    e->size  = h->size;
    e->key   = handle_key(h);
    e->refs  = 1;
    e->used  = ++ipc_cache.clock;
    e->next  = ipc_cache.head;
    ipc_cache.head = e;
    ipc_cache.st.misses++;
    *ptr_p = (uint8_t*)base + h->offset;
    return 0;
}

int ringk_ipc_import(const ringk_ipc_handle_t *h, void **ptr_p)
{
    ipc_entry_t *found;
    char why[256];
    int ret;

    if ((h == NULL) || (ptr_p == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (h == NULL) ? "handle" : "ptr_p");
    }
    if (ringk_ipc_handle_check(h, why, sizeof(why)) != 0) {
        return ringk_log_bad_arg(NULL, __func__, "%s", why);
    }
    pthread_mutex_lock(&ipc_cache.mu);
    cache_limit_init();
    found = cache_find(h);
    if ((found != NULL) && (found->state == ENTRY_MAPPED)) {
        if ((found->key != handle_key(h)) || (found->type != h->type) ||
            (found->size != h->size)) {
            pthread_mutex_unlock(&ipc_cache.mu);
            return ringk_log_bad_arg(NULL, __func__, "process %d's allocation %llx came with "
                                     "another handle (type %d, %llu bytes) than the one mapped "
                                     "(type %d, %llu bytes)", (int)h->pid,
                                     (unsigned long long)h->id, (int)h->type,
                                     (unsigned long long)h->size, (int)found->type,
                                     (unsigned long long)found->size);
        }
        found->refs++; /* a hit (the offset is within: the sizes are equal) */
        found->used = ++ipc_cache.clock;
        ipc_cache.st.hits++;
        *ptr_p = (uint8_t*)found->base + h->offset;
        pthread_mutex_unlock(&ipc_cache.mu);
        return 0;
    }
    if ((found != NULL) && exporter_alive(h->pid, found->start)) {
        pthread_mutex_unlock(&ipc_cache.mu);
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_ipc_import: process %d revoked allocation "
                      "%llx", (int)h->pid, (unsigned long long)h->id);
        return -ESTALE;
    }
    if (!exporter_alive(h->pid, 0)) {
        pthread_mutex_unlock(&ipc_cache.mu);
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_ipc_import: process %d, which exported "
                      "allocation %llx, is gone", (int)h->pid, (unsigned long long)h->id);
        return -ESRCH;
    }
    if (found != NULL) { /* a tombstone of the process that had this pid before */
        found->pid = 0;
    }
    ret = cache_map(h, ptr_p);
    pthread_mutex_unlock(&ipc_cache.mu);
    return ret;
}

int ringk_ipc_close(void *ptr)
{
    ipc_entry_t *e;

    pthread_mutex_lock(&ipc_cache.mu);
    for (e = ipc_cache.head; e != NULL; e = e->next) {
        if ((e->refs != 0) && (e->base != NULL) && ((uint8_t*)ptr >= (uint8_t*)e->base) &&
            ((uint8_t*)ptr < (uint8_t*)e->base + e->size)) {
            break;
        }
    }
    if (e == NULL) {
        pthread_mutex_unlock(&ipc_cache.mu);
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_ipc_close: %p is not an address "
                      "ringk_ipc_import gave", ptr);
        return -ENOENT;
    }
    if ((--e->refs == 0) && (e->state == ENTRY_MAPPED) && !exporter_alive(e->pid, e->start)) {
        entry_forget(e);
    }
    if ((e->refs == 0) && (e->state == ENTRY_GONE)) {
        entry_unmap(e);
    }
    cache_trim(ipc_cache.limit);
    pthread_mutex_unlock(&ipc_cache.mu);
    return 0;
}

int ringk_ipc_invalidate(int32_t pid, uint64_t id)
{
    ipc_entry_t *e;
    int n = 0;

    if (pid <= 0) {
        return ringk_log_bad_arg(NULL, __func__, "pid %d is not a process id", (int)pid);
    }
    pthread_mutex_lock(&ipc_cache.mu);
    cache_limit_init();
    for (e = ipc_cache.head; e != NULL; e = e->next) {
        if ((e->pid == pid) && ((id == 0) || (e->id == id)) && (e->state == ENTRY_MAPPED)) {
            entry_forget(e);
            n++;
        }
    }
    cache_trim(ipc_cache.limit);
    pthread_mutex_unlock(&ipc_cache.mu);
    return n;
}

int ringk_ipc_cache_stats_query(ringk_ipc_cache_stats_t *stats_p)
{
    if (stats_p == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "stats_p is NULL");
    }
    pthread_mutex_lock(&ipc_cache.mu);
    cache_limit_init();
    cache_stats_count();
    *stats_p = ipc_cache.st;
    pthread_mutex_unlock(&ipc_cache.mu);
    return 0;
}

int ringk_ipc_cache_limit_set(unsigned entries)
{
    if ((entries < 1) || (entries > IPC_CACHE_MAX)) {
        return ringk_log_bad_arg(NULL, __func__, "entries %u is not in 1..%u", entries,
                                 IPC_CACHE_MAX);
    }
    pthread_mutex_lock(&ipc_cache.mu);
    ipc_cache.limit = entries;
    cache_trim(entries);
    pthread_mutex_unlock(&ipc_cache.mu);
    return 0;
}
