/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: memory shared between processes of one node by handle (CUDA IPC handles, and file
 * descriptors of shared memory), the channels that carry handles between processes with the
 * peer's credentials checked, and the process's import cache; usable without a context. */
#ifndef RINGK_API_RINGK_IPC_H
#define RINGK_API_RINGK_IPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- handles -------------------------------------------------------------------------------- */

/** What a handle is. */
typedef enum ringk_ipc_type {
    RINGK_IPC_TYPE_NONE     = 0,
    RINGK_IPC_TYPE_LEGACY   = 1, /**< a cudaIpcMemHandle_t (memory of cudaMalloc) */
    RINGK_IPC_TYPE_FABRIC   = 2, /**< a CUmemFabricHandle (cuMemCreate memory made with
                                      CU_MEM_HANDLE_TYPE_FABRIC) */
    RINGK_IPC_TYPE_POSIX_FD = 3  /**< a file descriptor: a cuMem POSIX handle (cuMemCreate
                                      memory made with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                                      or shared host memory: a memfd sealed against shrinking,
                                      which import maps with mmap */
} ringk_ipc_type_t;

/** ringk_ipc_export()'s types: the handle types it may choose from. */
#define RINGK_IPC_TYPES_ANY 0u
#define RINGK_IPC_TYPE_BIT(t) (1u << (t))

#define RINGK_IPC_HANDLE_BYTES 64 /**< bytes of a legacy or fabric handle */
#define RINGK_IPC_SIZE_MAX     (1ull << 46) /**< largest allocation a handle may describe */

/** A handle to an allocation of another process, or one to give to another process. */
typedef struct ringk_ipc_handle {
    ringk_ipc_type_t type;
    int      fd;                            /**< POSIX_FD: the descriptor, which the handle owns
                                                 (ringk_ipc_handle_release closes it); else -1 */
    uint8_t  bytes[RINGK_IPC_HANDLE_BYTES]; /**< LEGACY, FABRIC: the handle; else zeros */
    uint64_t size;                          /**< bytes of the shared allocation, 1 to
                                                 RINGK_IPC_SIZE_MAX */
    uint64_t offset;                        /**< of the exported address in it (< size) */
    uint64_t id;                            /**< the exporter's id of the allocation, != 0:
                                                 the cache's key with pid */
    int32_t  pid;                           /**< the exporting process */
    char     device[16];                    /**< PCI bus id of its GPU ("0000:07:00.0"), or ""
                                                 for host memory */
} ringk_ipc_handle_t;

/**
 * Exports the device allocation @a ptr lies in: the handle type is the first of LEGACY, FABRIC,
 * POSIX_FD (among @a types, RINGK_IPC_TYPE_BIT()s, or RINGK_IPC_TYPES_ANY) that the allocation
 * supports, said in handle_p->type. Legacy handles come from cudaMalloc memory; cuMemCreate
 * memory exports the types it was made with. @return 0; -EINVAL (NULL, unknown type bits, not
 * device memory); -ENODEV (no usable CUDA); -EOPNOTSUPP (the allocation supports none of
 * @a types: the reason is logged).
 */
int ringk_ipc_export(const void *ptr, unsigned types, ringk_ipc_handle_t *handle_p);

/**
 * A POSIX_FD handle of @a len bytes of shared host memory in descriptor @a fd (a memfd owned by
 * this user with no group or other permission, sealed with F_SEAL_SHRINK so that it cannot
 * shrink under an importer's mapping), at @a offset; the handle takes a duplicate of @a fd.
 * @return 0; -EINVAL (a bad value, named in the log); -EPERM (not a file of this user with mode
 * 0600 or stricter, or not sealed against shrinking); -EMFILE.
 */
int ringk_ipc_handle_from_fd(int fd, uint64_t len, uint64_t offset, ringk_ipc_handle_t *handle_p);

/** Closes what a handle owns (its descriptor) and clears it; NULL or a cleared handle is a
 *  no-op. @return 0. */
int ringk_ipc_handle_release(ringk_ipc_handle_t *handle);

/* ---- imports and the cache ------------------------------------------------------------------ */

/**
 * Maps the allocation of another process (or of this one) that @a handle names, through the
 * process's import cache: a second import of the same (pid, id) reuses the mapping (CUDA
 * refuses a second open of one legacy handle in a process). *ptr_p gets the exported address
 * here (the mapping's base + offset). Each successful import takes a reference that
 * ringk_ipc_close() gives back. A handle of a process that has died, or of an allocation its
 * exporter revoked, is refused. @return 0; -EINVAL (a malformed handle, named in the log);
 * -ESRCH (the exporter is dead); -ESTALE (revoked); -ENOSPC (the cache holds its limit of
 * entries, all in use); -ENODEV (a device handle without usable CUDA); -EIO (the mapping
 * failed, logged).
 */
int ringk_ipc_import(const ringk_ipc_handle_t *handle, void **ptr_p);

/** Gives back the reference ringk_ipc_import() took for @a ptr; the last reference of an
 *  entry revoked or of a dead exporter unmaps it, others stay cached for reuse until evicted.
 *  @return 0, or -ENOENT (not an address ringk_ipc_import() gave). */
int ringk_ipc_close(void *ptr);

/**
 * Forgets the imports of process @a pid's allocation @a id (every allocation of @a pid for
 * @a id 0): unmapped now where nothing holds them, else at their last ringk_ipc_close(); later
 * imports of them get -ESTALE (for @a id 0, until @a pid exports again under a new id). The
 * socket channel calls it when the exporter says so (ringk_ipc_channel_revoke) and for all of
 * a peer's imports when the peer goes away. @return how many entries it forgot, or -EINVAL
 * (@a pid <= 0).
 */
int ringk_ipc_invalidate(int32_t pid, uint64_t id);

/** Statistics of the import cache (counters since the process started). */
typedef struct ringk_ipc_cache_stats {
    uint64_t hits;          /**< imports that reused a mapping */
    uint64_t misses;        /**< imports that mapped */
    uint64_t evictions;     /**< unused mappings unmapped to make room */
    uint64_t invalidations; /**< entries forgotten (revoked, or their exporter died) */
    unsigned entries;       /**< mappings held now */
    unsigned in_use;        /**< of entries, those with references */
    unsigned limit;         /**< entries the cache holds at most */
} ringk_ipc_cache_stats_t;

/** Copies the import cache's statistics. @return 0, or -EINVAL (NULL). */
int ringk_ipc_cache_stats_query(ringk_ipc_cache_stats_t *stats_p);

/**
 * Sets the most entries the import cache holds (1 to 65536; the default is 256, or
 * RINGK_IPC_CACHE_MAX read at the first import): unused entries beyond it are unmapped now.
 * @return 0, or -EINVAL.
 */
int ringk_ipc_cache_limit_set(unsigned entries);

/* ---- channels ------------------------------------------------------------------------------- */

/** How handles travel between two processes of the node. */
typedef enum ringk_ipc_channel_kind {
    RINGK_IPC_CHANNEL_SOCKET = 0, /**< a Unix SOCK_SEQPACKET socket at a path: descriptors
                                       travel (SCM_RIGHTS), the peer's credentials come from the
                                       kernel (SO_PEERCRED) */
    RINGK_IPC_CHANNEL_SHM    = 1, /**< a mailbox in a shared memory file (/dev/shm/NAME),
                                       unlinked once both ends have it: no descriptors */
    RINGK_IPC_CHANNEL_PIPE   = 2  /**< a named pipe (FIFO) at a path, one way (the listener
                                       receives), unlinked once both ends have it: no
                                       descriptors */
} ringk_ipc_channel_kind_t;

/** Which end of a channel. */
typedef enum ringk_ipc_channel_role {
    RINGK_IPC_CHANNEL_LISTEN  = 0, /**< creates the path and waits for the other end */
    RINGK_IPC_CHANNEL_CONNECT = 1  /**< opens the path the other end created */
} ringk_ipc_channel_role_t;

enum ringk_ipc_channel_param_field {
    RINGK_IPC_CHANNEL_PARAM_FIELD_KIND    = 1u << 0,
    RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE    = 1u << 1,
    RINGK_IPC_CHANNEL_PARAM_FIELD_PATH    = 1u << 2,
    RINGK_IPC_CHANNEL_PARAM_FIELD_TIMEOUT = 1u << 3
};

typedef struct ringk_ipc_channel_params {
    uint64_t                 field_mask;
    ringk_ipc_channel_kind_t kind;       /**< default SOCKET */
    ringk_ipc_channel_role_t role;       /**< required */
    const char              *path;       /**< required: the socket's or the FIFO's path (at most
                                              107 bytes), or the SHM file's NAME (no '/') */
    int                      timeout_ms; /**< how long open waits for the other end (default
                                              10000; -1: for ever) */
} ringk_ipc_channel_params_t;

/** One end of a channel between two processes of this user on this node. */
typedef struct ringk_ipc_channel ringk_ipc_channel_t;

/**
 * Opens one end of a channel and waits for the other: both ends exchange a hello that names
 * their process and node, and each refuses a peer of another user (-EPERM), of another node or
 * container (-EXDEV), or one whose process the credentials do not match (-EPERM), with the
 * reason logged. A listener's path must not exist yet (-EEXIST). @return 0; -EINVAL; -ETIMEDOUT
 * (no peer in timeout_ms); -EPERM; -EXDEV; -EEXIST; -errno of the system call that failed.
 */
int ringk_ipc_channel_open(const ringk_ipc_channel_params_t *params,
                           ringk_ipc_channel_t **channel_p);

/** Closes the end and removes what it created; a socket peer sees the end and forgets its
 *  imports from this process (ringk_ipc_invalidate). @return 0, or -EINVAL (NULL). */
int ringk_ipc_channel_close(ringk_ipc_channel_t *channel);

/**
 * Sends a handle to the peer. A POSIX_FD handle's descriptor travels only over a socket
 * (-EOPNOTSUPP elsewhere). The handle must be this process's (pid == getpid()). @return 0;
 * -EINVAL; -EOPNOTSUPP; -EPIPE (the peer is gone); -EAGAIN (a full SHM mailbox, after the
 * channel's timeout); -ENOTSUP (a PIPE channel's listener end: it only receives).
 */
int ringk_ipc_channel_send(ringk_ipc_channel_t *channel, const ringk_ipc_handle_t *handle);

/**
 * Tells the peer that allocation @a id is being freed: the peer's cache forgets its imports of
 * it when it next receives (ringk_ipc_channel_recv handles the notice itself). @return as
 * ringk_ipc_channel_send().
 */
int ringk_ipc_channel_revoke(ringk_ipc_channel_t *channel, uint64_t id);

/**
 * Receives the next handle into *@a handle_p (the caller releases it with
 * ringk_ipc_handle_release), waiting up to @a timeout_ms (0: not at all, -1: for ever). Every
 * field is checked (type, size and offset bounds, the device id's form, the pid against the
 * peer's credentials); a revocation met on the way is applied to the cache. @return 0;
 * -EAGAIN (nothing within the timeout); -EPIPE (the peer is gone: its imports are forgotten);
 * -EPROTO (a malformed message: logged, the channel is closed for further use); -ENOTSUP (a
 * PIPE channel's connecting end: it only sends).
 */
int ringk_ipc_channel_recv(ringk_ipc_channel_t *channel, ringk_ipc_handle_t *handle_p,
                           int timeout_ms);

/** The peer's process and user, from the kernel (socket) or its hello checked against /proc
 *  (SHM, PIPE). @return 0, or -EINVAL. */
int ringk_ipc_channel_peer(const ringk_ipc_channel_t *channel, int32_t *pid_p, uint32_t *uid_p);

#ifdef __cplusplus
}
#endif

#endif
