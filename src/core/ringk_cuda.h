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
 * context; @a mapped_p gets its base here. A mapping smaller than @a size is refused.
 * @return 0, or -EIO / -EINVAL / -ENODEV with the reason in @a why.
 */
int ringk_cuda_ipc_open(const void *handle, uint64_t size, void **mapped_p, char *why,
                        size_t why_len);

/** Unmaps what ringk_cuda_ipc_open() mapped. */
void ringk_cuda_ipc_close(void *mapped);

/** Copies @a len bytes between any two of host and device memory (on the calling thread's
 *  stream) and returns once the data has landed. */
int ringk_cuda_copy(void *dst, const void *src, size_t len, char *why, size_t why_len);

/** Pinned host memory for staging; NULL on failure. */
void *ringk_cuda_host_alloc(size_t len);
void ringk_cuda_host_free(void *ptr);

/**
 * Whether CUDA device @a dev's primary context exists in this process: 1, 0, or -1 when it
 * cannot be told. Asks the driver the process has loaded (libcuda.so.1), without loading it,
 * initialising it or making a context: no driver loaded, or not initialised, means no context.
 * Also in a build without CUDA (the program may use CUDA itself).
 */
int ringk_cuda_ctx_exists(int dev);

#endif
