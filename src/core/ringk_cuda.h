/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: the only code that calls the CUDA runtime. Built without CUDA, every
 * call reports the GPU paths unavailable. */
#ifndef RINGK_CORE_CUDA_H
#define RINGK_CORE_CUDA_H

#include <stddef.h>
#include <stdint.h>

/** Bytes of a CUDA IPC memory handle (cudaIpcMemHandle_t). */
#define RINGK_CUDA_IPC_HANDLE_LEN 64

/** Number of usable CUDA devices; 0 with the reason in @a why when there is none. */
int ringk_cuda_device_count(char *why, size_t why_len);

/**
 * The run-time canary of a P2P path: device @a busid_a writes a pattern into memory of device
 * @a busid_b through peer access, reads it back the same way and compares, so a path the
 * topology allows is trusted only once it has worked.
 * @return 0 when verified; -ENODEV (no CUDA, no such device), -EPERM (no peer access) or -EIO
 *         (wrong data or a CUDA error), with the reason in @a why.
 */
int ringk_cuda_p2p_canary(const char *busid_a, const char *busid_b, char *why, size_t why_len);

/**
 * Tells whether CUDA may be used at all: built with CUDA, the NVIDIA driver is loaded
 * (/proc/driver/nvidia exists) and a device exists. Without a driver no CUDA call is made, so
 * processes on machines without GPUs never initialise the CUDA runtime.
 * @return 1 or 0, with the reason in @a why.
 */
int ringk_cuda_usable(char *why, size_t why_len);

/** PCI bus id ("0000:07:00.0") of the calling thread's current CUDA device; 0, or -ENODEV. */
int ringk_cuda_current_busid(char *busid, size_t len, char *why, size_t why_len);

/**
 * Tells whether @a ptr is CUDA device memory; if it is, the bus id of its device goes to
 * @a busid (may be NULL). Returns 0 without calling CUDA when ringk_cuda_usable() says no.
 */
int ringk_cuda_ptr_is_device(const void *ptr, char *busid, size_t len);

/**
 * The CUDA allocation containing @a ptr: its base and size, and the bus id of its device in
 * @a busid (may be NULL). Returns 1 for device memory, 0 for anything else (host memory, no
 * usable CUDA), without calling CUDA when ringk_cuda_usable() says no.
 */
int ringk_cuda_ptr_range(const void *ptr, uint64_t *base_p, uint64_t *size_p, char *busid,
                         size_t len);

/**
 * Exports the device allocation containing @a ptr for CUDA IPC: its handle, base and size.
 * @return 0, or -EINVAL / -ENODEV, or -EOPNOTSUPP for memory CUDA IPC cannot export (stream-
 *         ordered pools, cuMemCreate), with the reason in @a why.
 */
int ringk_cuda_ipc_export(const void *ptr, void *handle, uint64_t *base_p, uint64_t *size_p,
                          char *why, size_t why_len);

/**
 * Maps a peer's exported allocation, said to be @a size bytes, into the current device's
 * context; @a mapped_p gets its base here. A mapping smaller than @a size is refused. A handle
 * mapped already (by this library's copy of core) is not opened again: its mapping is given
 * with a reference more (ringk_maprefs.h).
 * @return 0, or -EIO / -EINVAL (also: the handle is mapped for another size) / -ENODEV, with
 *         the reason in @a why.
 */
int ringk_cuda_ipc_open(const void *handle, uint64_t size, void **mapped_p, char *why,
                        size_t why_len);

/** ringk_cuda_ipc_open() with the GPU of PCI bus id @a busid current (the GPU the memory is on,
 *  where this process sees it; else the current one), so that the mapping is made in that GPU's
 *  context: no peer access is needed between the caller's current GPU and the memory's, and
 *  copies on that GPU's copy stream use it directly. The caller's current device is kept. */
int ringk_cuda_ipc_open_on(const char *busid, const void *handle, uint64_t size,
                           void **mapped_p, char *why, size_t why_len);

/** Drops a reference to what ringk_cuda_ipc_open() mapped; at the last the mapping is unmapped,
 *  or, while the process has device kernels (which the unmapping would wait for), kept and
 *  unmapped by a later ringk_cuda_ipc_flush(), ringk_cuda_ipc_open() or ringk_cuda_ipc_close()
 *  made when none is left (an open of its handle meanwhile takes it again). */
void ringk_cuda_ipc_close(void *mapped);

/** Unmaps the mappings ringk_cuda_ipc_close() and ringk_cuda_vmm_close() kept, and gives back
 *  the host memory ringk_cuda_host_release() kept, when the process has no device kernel;
 *  returns how many. */
size_t ringk_cuda_ipc_flush(void);

/** How many mappings ringk_cuda_ipc_close() kept for later. */
size_t ringk_cuda_ipc_deferred(void);

/**
 * ringk_cuda_ipc_open() of the allocation of process @a pid on the GPU of PCI bus id @a busid
 * through libringk's import cache where the process has libringk (*@a shared_p 1), so that
 * libringk's imports and the transport's keys of one allocation share one mapping, and unused
 * mappings stay cached; else through this library's table (*@a shared_p 0).
 * @return as ringk_cuda_ipc_open(), or libringk's import's error.
 */
int ringk_cuda_ipc_open_shared(const void *handle, uint64_t size, uint32_t pid,
                               const char *busid, void **mapped_p, int *shared_p, char *why,
                               size_t why_len);

/** Gives back what ringk_cuda_ipc_open_shared() mapped, as it said (@a shared). */
void ringk_cuda_ipc_close_shared(void *mapped, int shared);

/** Handles ringk_cuda_ipc_open() opened, and opens that took a mapping held, since the start. */
void ringk_cuda_ipc_stats(uint64_t *opens_p, uint64_t *hits_p);

/** IPC handle types (the values of libringk's ringk_ipc_type_t). */
#define RINGK_CUDA_IPC_LEGACY   1 /**< cudaIpcMemHandle_t */
#define RINGK_CUDA_IPC_FABRIC   2 /**< CUmemFabricHandle */
#define RINGK_CUDA_IPC_POSIX_FD 3 /**< a cuMem POSIX file descriptor */

/** What ringk_cuda_vmm_export() gives. */
typedef struct ringk_cuda_vmm_export {
    int      type;                           /**< RINGK_CUDA_IPC_* */
    int      fd;                             /**< POSIX_FD: the descriptor (the caller's to
                                                  close); else -1 */
    uint8_t  bytes[RINGK_CUDA_IPC_HANDLE_LEN]; /**< LEGACY, FABRIC: the handle */
    uint64_t base, size;                     /**< the allocation */
    uint64_t alloc;                          /**< FABRIC, POSIX_FD: the driver's handle of the
                                                  allocation (tells it from a later one at the
                                                  same address); LEGACY: 0 */
    char     busid[16];                      /**< PCI bus id of its device */
} ringk_cuda_vmm_export_t;

/**
 * Exports the device allocation @a ptr lies in by the first handle type, of legacy, fabric and
 * POSIX fd, that @a types (bit 1 << RINGK_CUDA_IPC_*) allows and the allocation supports
 * (legacy: cudaMalloc memory; fabric and POSIX fd: cuMemCreate memory made with that type).
 * @return 0; -EINVAL (not device memory), -ENODEV (no CUDA), -EOPNOTSUPP (no allowed type),
 *         -EIO, with the reason in @a why.
 */
int ringk_cuda_vmm_export(const void *ptr, unsigned types, ringk_cuda_vmm_export_t *ex,
                          char *why, size_t why_len);

/**
 * Maps an allocation of another process exported as @a type (@a bytes for legacy and fabric,
 * @a fd for POSIX fd) of @a size bytes on the device of PCI bus id @a busid, readable and
 * writable from that device; *@a base_p gets its address here.
 * @return 0; -ENODEV (no CUDA, no such device), -EIO / -EINVAL with the reason in @a why.
 */
int ringk_cuda_vmm_import(int type, const uint8_t *bytes, int fd, const char *busid,
                          uint64_t size, void **base_p, char *why, size_t why_len);

/**
 * Maps the cuMem allocation of POSIX file descriptor @a fd (@a size bytes) in the primary
 * context of CUDA device @a dev (an ordinal of this process), readable and writable from @a dev
 * only, wherever the memory is (its own GPU, or a peer's that @a dev reaches over P2P): the
 * GPU the memory is on gets no context here. *@a base_p gets its address; undone by
 * ringk_cuda_vmm_close(RINGK_CUDA_IPC_POSIX_FD, ...).
 * @return 0; -ENODEV (no CUDA), -EIO with the reason in @a why.
 */
int ringk_cuda_vmm_import_to(int dev, int fd, uint64_t size, void **base_p, char *why,
                             size_t why_len);

/**
 * Allocates @a size bytes (rounded up to the driver's granularity: the size in *@a size_p) of
 * device memory on CUDA device @a dev (an ordinal of this process) with cuMemCreate, mapped
 * here readable and writable from @a dev, exportable as a POSIX file descriptor: that
 * descriptor in *@a fd_p (the caller's to close; the memory lives while a mapping or a
 * descriptor names it). No call that waits for the device is made.
 * @return 0; -ENODEV (no CUDA), -EOPNOTSUPP (no POSIX fd handles), -ENOMEM, -EIO, with the
 *         reason in @a why.
 */
int ringk_cuda_vmm_alloc(int dev, uint64_t size, void **ptr_p, uint64_t *size_p, int *fd_p,
                         char *why, size_t why_len);

/**
 * Gives CUDA device @a dev (an ordinal of this process) read and write access to the cuMem
 * mapping [@a base, +@a size) that ringk_cuda_vmm_alloc() or ringk_cuda_vmm_import() made,
 * keeping the access other devices have: the memory's own GPU's, a peer's over P2P (where the
 * pair cannot, the driver refuses).
 * @return 0; -ENODEV (no CUDA), -EIO with the reason in @a why.
 */
int ringk_cuda_vmm_grant(void *base, uint64_t size, int dev, char *why, size_t why_len);

/** Unmaps what ringk_cuda_vmm_alloc() mapped, as ringk_cuda_vmm_close() (later, while ringk
 *  device kernels of the process run: cuMemUnmap may wait for the device's work). */
void ringk_cuda_vmm_free(void *ptr, uint64_t size);

/** Unmaps what ringk_cuda_vmm_import() mapped (a legacy mapping as ringk_cuda_ipc_close()). */
void ringk_cuda_vmm_close(int type, void *base, uint64_t size);

/** Unmaps the cuMem mappings ringk_cuda_vmm_close() left mapped because ringk device kernels
 *  were resident (cuMemUnmap may wait for the device's work), once none is: how many. */
size_t ringk_cuda_vmm_flush(void);

/** cuMem mappings closed and left mapped until no device kernel is resident. */
size_t ringk_cuda_vmm_deferred(void);

/** Copies @a len bytes between any two of host and device memory (on the copy stream of the
 *  GPU the device memory is on: @a dst's, else @a src's, else the calling thread's current
 *  device) and returns once the data has landed. */
int ringk_cuda_copy(void *dst, const void *src, size_t len, char *why, size_t why_len);

/** ringk_cuda_copy() on the copy stream of device @a dev (an ordinal of this process; -1: the
 *  calling thread's current device), whatever device the calling thread has current. */
int ringk_cuda_copy_on(int dev, void *dst, const void *src, size_t len, char *why,
                       size_t why_len);

/** Pinned host memory; NULL on failure. Waits for every kernel on the device: see
 *  ringk_cuda_stage_get() for staging. */
void *ringk_cuda_host_alloc(size_t len);
void ringk_cuda_host_free(void *ptr);

/** Pins mapped host memory for copies (cudaHostRegister) where CUDA is usable and no ringk
 *  device kernel is resident (the call waits for the device); 1 pinned, 0 left pageable. */
int ringk_cuda_host_register(void *ptr, size_t len);
/** Undoes ringk_cuda_host_register() of @a ptr (when it returned 1): 0; or -EBUSY, nothing
 *  done, while ringk device kernels are resident (the call may wait for the device): the
 *  caller must then keep the memory mapped (unmapped, pages CUDA still holds pinned could be
 *  mapped at that address again); ringk_cuda_host_release() does that for it. */
int ringk_cuda_host_unregister(void *ptr);

/** Gives back host memory @a ptr that ringk_cuda_host_register() or ringk_cuda_host_map()
 *  registered, with the mapping [@a map, +@a map_len) it lies in: unregistered and unmapped
 *  now, or, while ringk device kernels are resident (the unregistration may wait for the
 *  device), by the first ringk_cuda_ipc_flush(), ringk_cuda_host_release() or
 *  ringk_cuda_host_register() once none is (of the same library: libringk and the transport
 *  each keep their own list); until then the pages stay mapped (unmapped, pages CUDA still
 *  holds pinned could be mapped at that address again).
 *  Memory never registered (no CUDA) is unmapped now. @return 1 now, 0 later, -ENOMEM kept
 *  mapped for good. */
int ringk_cuda_host_release(void *ptr, void *map, size_t map_len);
/** Unregisters and unmaps what ringk_cuda_host_release() left for later, where no ringk
 *  device kernel is resident: how many (ringk_cuda_ipc_flush() calls it). */
size_t ringk_cuda_host_flush(void);
/** Host mappings ringk_cuda_host_release() left for later (a relaxed read: cheap to poll). */
size_t ringk_cuda_host_deferred(void);

/** Registers host memory [@a ptr, +@a len) (a shared mapping another process may map too)
 *  with CUDA, in the context of device @a on (an ordinal of this process), mapped into the
 *  device address space (cudaHostRegisterMapped | Portable): its device address in *@a dev_p;
 *  undone by ringk_cuda_host_unregister(). The calling thread's device is kept. The call may
 *  wait for the device's work: the caller makes it only where no ringk device kernel's launch
 *  may be resident (libringk knows: ringk_dev_cuda_launched(); ringk_cuda_resident() counts
 *  kernels made, launched or not). @return 0; -ENODEV (no CUDA); -EIO, with the reason in
 *  @a why. */
int ringk_cuda_host_map(int on, void *ptr, size_t len, void **dev_p, char *why,
                        size_t why_len);

/** Pushes, on the calling thread, the primary context of the first device that has one
 *  (retained while pushed): its ordinal, to give to ringk_cuda_ctx_pop(); -1 where none has
 *  one (nothing pushed). For a call that would otherwise give the thread's current device a
 *  context of its own. */
int ringk_cuda_ctx_push_existing(void);
/** Pops what ringk_cuda_ctx_push_existing() pushed for device @a dev. */
void ringk_cuda_ctx_pop(int dev);

/** CUDA devices ringk_cuda_resident(-1) looks at. */
#define RINGK_CUDA_DEVICES_MAX 8

/**
 * The ringk device kernels of this process on CUDA device @a dev (libringk's count, where the
 * process has libringk; else 0), or on any of its first RINGK_CUDA_DEVICES_MAX devices for
 * @a dev -1. While there is one, no call that waits for the whole device may be made.
 */
int ringk_cuda_resident(int dev);

/**
 * A staging buffer of @a len bytes for GPU copies: pinned (*@a pinned_p 1) where that can be
 * had without waiting for a device, that is from a spare pinned buffer, or newly allocated
 * while the process has no ringk device kernel; else pageable memory (*@a pinned_p 0: slower
 * copies, which never wait for the device). NULL when out of memory.
 */
void *ringk_cuda_stage_get(size_t len, int *pinned_p);

/** Gives back what ringk_cuda_stage_get() gave: a pinned buffer is freed while the process has no
 *  ringk device kernel, else kept as a spare (a free would wait for them). */
void ringk_cuda_stage_put(void *p, size_t len, int pinned);

/**
 * Whether CUDA device @a dev's primary context exists in this process: 1, 0, or -1 when it
 * cannot be told. Asks the driver the process has loaded (libcuda.so.1), without loading it,
 * initialising it or making a context: no driver loaded, or not initialised, means no context.
 * Also in a build without CUDA (the program may use CUDA itself).
 */
int ringk_cuda_ctx_exists(int dev);

/**
 * Whether the CUDA driver the process has loaded (libcuda.so.1) was initialized (cuInit), asked
 * without loading or initializing it: 0 when it is not loaded or not initialized, 1 when it is
 * or when it cannot be told. The driver reads CUDA_DEVICE_MAX_CONNECTIONS when it is
 * initialized.
 */
int ringk_cuda_driver_initialized(void);

/* ---- two GPUs of one process (ringk_cuda_peer.c) ---- */

/** PCI bus id of CUDA device @a dev: 0, or -ENODEV with the reason (no CUDA, no such device). */
int ringk_cuda_dev_busid(int dev, char *busid, size_t len, char *why, size_t why_len);

/** The CUDA device at PCI bus id @a busid in *@a dev_p: 0, or -ENODEV with the reason. */
int ringk_cuda_busid_dev(const char *busid, int *dev_p, char *why, size_t why_len);

/** The CUDA device of device memory @a ptr in *@a dev_p: 0; -EINVAL (not device memory) or
 *  -ENODEV (no usable CUDA), with the reason. */
int ringk_cuda_ptr_ordinal(const void *ptr, int *dev_p, char *why, size_t why_len);

/** Peer access from device @a dev to @a peer's memory on (@a enable 1) or off; already so is 0
 *  (remembered: no CUDA call then). Not while ringk device kernels run on @a dev (the call on
 *  its context may wait for them). @return 0; -EPERM (CUDA says the pair cannot), -EBUSY,
 *  -EIO, -ENODEV, with the reason. */
int ringk_cuda_peer_set(int dev, int peer, int enable, char *why, size_t why_len);
/** ringk_cuda_peer_set(dev, peer, 1) for a caller that knows no ringk device kernel of @a dev
 *  is launched (libringk: kernels made in a job before ringk_ctx_start are not), where
 *  ringk_cuda_resident() would count them. */
int ringk_cuda_peer_set_idle(int dev, int peer, char *why, size_t why_len);

/** @a len bytes of device memory on device @a dev (the current device kept); NULL with the
 *  reason. Waits for the device's kernels, as cudaMalloc does. */
void *ringk_cuda_dev_alloc(int dev, size_t len, char *why, size_t why_len);
void ringk_cuda_dev_free(void *ptr);

/** Whether atomics of @a dev on @a peer's memory are native: 1, 0, -1 (unknown). */
int ringk_cuda_peer_atomics(int dev, int peer);

/** How ringk_cuda_peer_copy() moves data. */
#define RINGK_CUDA_MOVE_SAME   0 /**< one device's copy */
#define RINGK_CUDA_MOVE_PEER   1 /**< cudaMemcpyPeerAsync (the copy engine, P2P when enabled) */
#define RINGK_CUDA_MOVE_STAGED 2 /**< through the pinned bounce buffers (ringk_stage.h) */

/**
 * Copies @a len bytes from @a src on device @a src_dev to @a dst on device @a dst_dev by
 * movement @a how: queued on the application's stream @a stream (a cudaStream_t) with
 * @a async, else on the devices' copy streams and waited for.
 * @return 0; -ENODEV; -EIO with the reason.
 */
int ringk_cuda_peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t len,
                         int how, int async, void *stream, char *why, size_t why_len);

#define RINGK_CUDA_MEASURE_BYTES (64u << 20) /**< ringk_cuda_peer_measure()'s bandwidth copy */
#define RINGK_CUDA_MEASURE_ROUNDS 5

/**
 * The bandwidth (GB/s, copies of RINGK_CUDA_MEASURE_BYTES) and latency (microseconds, 4 bytes)
 * of movement @a how from device @a dev to @a peer: medians of RINGK_CUDA_MEASURE_ROUNDS
 * synchronous copies, each timed from its call to its return.
 * @return 0; -EBUSY (device kernels resident), -ENOMEM, -ENODEV, -EIO, with the reason.
 */
int ringk_cuda_peer_measure(int dev, int peer, int how, double *gbps_p, double *lat_us_p,
                            char *why, size_t why_len);

#endif
