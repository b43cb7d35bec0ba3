/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: the allocation a device pointer lies in, and CUDA IPC (export, import,
 * unmap) of device memory between processes, through the runtime ringk_cuda.c loads and the
 * driver calls the runtime has no counterpart for. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_cuda.h"
#include "ringk_cuda_rt.h"
#include "ringk_maprefs.h"

#include <ringk/api/ringk_ipc.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA

/* The driver API's calls to find the allocation a pointer lies in (the runtime API has none),
 * looked up in the driver the runtime loaded. cuMemGetAddressRange needs a current context,
 * which a thread whose CUDA calls all went through the runtime may not have: the pointer's
 * device's primary context is pushed around it. */
typedef struct {
    int (*range)(unsigned long long *base, size_t *size, unsigned long long p);
    int (*dev_get)(int *device, int ordinal);
    int (*retain)(void **ctx, int device);
    int (*release)(int device);
    int (*push)(void *ctx);
    int (*pop)(void **ctx);
} ringk_cu_t;

static ringk_cu_t ringk_cu;
static int        ringk_cu_loaded;

static int ringk_cu_load(char *why, size_t why_len)
{
    static const char *const names[] = {
        "cuMemGetAddressRange_v2", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
        "cuDevicePrimaryCtxRelease_v2", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2"
    };
    void *fns[sizeof(names) / sizeof(names[0])];
    ringk_cu_t cu;
    void *lib;
    size_t i;

    if (__atomic_load_n(&ringk_cu_loaded, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if ((lib == NULL) || ((fns[i] = dlsym(lib, names[i])) == NULL)) {
            snprintf(why, why_len, "%s not found in libcuda.so.1", names[i]);
            return -ENODEV;
        }
    }
    *(void**)&cu.range   = fns[0];
    *(void**)&cu.dev_get = fns[1];
    *(void**)&cu.retain  = fns[2];
    *(void**)&cu.release = fns[3];
    *(void**)&cu.push    = fns[4];
    *(void**)&cu.pop     = fns[5];
    ringk_cu = cu; /* racing first callers store the same values; the library stays loaded */
    __atomic_store_n(&ringk_cu_loaded, 1, __ATOMIC_RELEASE);
    return 0;
}

/* The allocation of device @a device's memory that @a ptr lies in: 0, or the CUresult (with
 * the failing call in @a why). */
static int ringk_cu_range_on(int device, const void *ptr, unsigned long long *base_p,
                             size_t *size_p, char *why, size_t why_len)
{
    void *ctx = NULL, *popped;
    const char *call;
    int dev, ret;

    if ((ret = ringk_cu.dev_get(&dev, device)) != 0) {
        call = "cuDeviceGet";
    } else if ((ret = ringk_cu.retain(&ctx, dev)) != 0) {
        call = "cuDevicePrimaryCtxRetain";
    } else {
        if ((ret = ringk_cu.push(ctx)) != 0) {
            call = "cuCtxPushCurrent";
        } else {
            call = "cuMemGetAddressRange";
            ret  = ringk_cu.range(base_p, size_p, (unsigned long long)(uintptr_t)ptr);
            ringk_cu.pop(&popped);
        }
        ringk_cu.release(dev);
    }
    if (ret != 0) {
        snprintf(why, why_len, "%s(%p, device %d) failed with CUresult %d", call, ptr, device,
                 ret);
    }
    return ret;
}

int ringk_cuda_ptr_range(const void *ptr, uint64_t *base_p, uint64_t *size_p, char *busid,
                         size_t len)
{
    struct cudaPointerAttributes attr;
    unsigned long long base;
    char why[160];
    size_t size;

    if (!ringk_cuda_ptr_is_device(ptr, busid, len) || (ringk_cu_load(why, sizeof(why)) != 0) ||
        (ringk_rt.cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) ||
        (ringk_cu_range_on(attr.device, ptr, &base, &size, why, sizeof(why)) != 0)) {
        return 0;
    }
    *base_p = base;
    *size_p = size;
    return 1;
}

int ringk_cuda_ptr_device(const void *ptr, int *dev_p, char *why, size_t why_len)
{
    struct cudaPointerAttributes attr;

    if ((ringk_rt.cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) ||
        (attr.type != cudaMemoryTypeDevice)) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "%p is not device memory", ptr);
        return -EINVAL;
    }
    *dev_p = attr.device;
    return 0;
}

int ringk_cuda_ipc_export(const void *ptr, void *handle, uint64_t *base_p, uint64_t *size_p,
                          char *why, size_t why_len)
{
    unsigned long long base;
    cudaIpcMemHandle_t h;
    size_t size;
    int ret, dev, current = -1;

    if (!ringk_cudart(why, why_len)) {
        return -ENODEV;
    }
    ret = ringk_cu_load(why, why_len);
    if (ret != 0) {
        return ret;
    }
    /* the pointer's device, for the calls that follow, given back after */
    if ((ret = ringk_cuda_ptr_device(ptr, &dev, why, why_len)) != 0) {
        return ret;
    }
    if ((ringk_rt.cudaGetDevice(&current) == cudaSuccess) && (current != dev) &&
        (ringk_rt.cudaSetDevice(dev) != cudaSuccess)) {
        snprintf(why, why_len, "cudaSetDevice(%d): %s", dev,
                 ringk_rt.cudaGetErrorString(ringk_rt.cudaGetLastError()));
        return -EIO;
    }
    if (ringk_cu_range_on(dev, ptr, &base, &size, why, why_len) != 0) {
        ret = -EINVAL;
    } else if (ringk_rt.cudaIpcGetMemHandle(&h, (void*)(uintptr_t)base) != cudaSuccess) {
        /* e.g. memory from cudaMallocAsync pools or cuMemCreate */
        snprintf(why, why_len, "cudaIpcGetMemHandle(0x%llx): %s", base,
                 ringk_rt.cudaGetErrorString(ringk_rt.cudaGetLastError()));
        ret = -EOPNOTSUPP;
    }
    if ((current >= 0) && (current != dev)) {
        ringk_rt.cudaSetDevice(current);
    }
    if (ret != 0) {
        return ret;
    }
    memcpy(handle, &h, RINGK_CUDA_IPC_HANDLE_LEN);
    *base_p = base;
    *size_p = size;
    return 0;
}

/* The process's mappings of other processes' allocations, one per handle: a handle imported
 * again takes the mapping held (CUDA refuses a second open), and a mapping no one holds is
 * unmapped when no device kernel is resident (cudaIpcCloseMemHandle waits for the device's
 * work: docs/gpu.md, "Implicit synchronization"), else kept until then. */
static ringk_maprefs_t ipc_maps = RINGK_MAPREFS_INIT;

static void ipc_close_raw(void *mapped)
{
    ringk_rt.cudaIpcCloseMemHandle(mapped);
}

/* Opens handle @a key and checks that the mapping holds @a size bytes. */
static int ipc_open_raw(const uint8_t *key, uint64_t size, void **mapped_p, char *why,
                        size_t why_len)
{
    struct cudaPointerAttributes attr;
    unsigned long long base;
    cudaIpcMemHandle_t h;
    cudaError_t err;
    size_t real;
    int ret;

    memcpy(&h, key, RINGK_CUDA_IPC_HANDLE_LEN);
    err = ringk_rt.cudaIpcOpenMemHandle(mapped_p, h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "cudaIpcOpenMemHandle: %s", ringk_rt.cudaGetErrorString(err));
        return -EIO;
    }
    /* the peer's word for the allocation's size is checked against the mapping itself */
    ret = ringk_cu_load(why, why_len);
    if ((ret == 0) && (ringk_rt.cudaPointerGetAttributes(&attr, *mapped_p) != cudaSuccess)) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "the mapping %p is not known to CUDA", *mapped_p);
        ret = -EINVAL;
    } else if ((ret == 0) &&
               (ringk_cu_range_on(attr.device, *mapped_p, &base, &real, why, why_len) != 0)) {
        ret = -EINVAL;
    } else if ((ret == 0) && (real < size)) {
        snprintf(why, why_len, "the mapped allocation is %zu bytes, the key says %llu", real,
                 (unsigned long long)size);
        ret = -EINVAL;
    }
    if (ret != 0) {
        ringk_rt.cudaIpcCloseMemHandle(*mapped_p);
        *mapped_p = NULL;
        return ret;
    }
    return 0;
}

int ringk_cuda_ipc_open(const void *handle, uint64_t size, void **mapped_p, char *why,
                        size_t why_len)
{
    if (!ringk_cuda_usable_cached()) {
        snprintf(why, why_len, "CUDA is not usable in this process (no driver or no device)");
        return -ENODEV;
    }
    ringk_cuda_ipc_flush(); /* closes left for later, once no device kernel is resident */
    return ringk_maprefs_get(&ipc_maps, handle, size, ipc_open_raw, mapped_p, why, why_len);
}

/* Makes the GPU of PCI bus id @a busid current where this process sees it: 1 with the
 * device that was current in *@a cur_p (for ipc_dev_leave()), or 0 with nothing changed (no
 * usable CUDA, no bus id, a GPU hidden from this process). */
static int ipc_dev_enter(const char *busid, int *cur_p)
{
    int dev;

    if (!ringk_cuda_usable_cached() || !ringk_cudart(NULL, 0) || (busid == NULL) ||
        (busid[0] == '\0')) {
        return 0;
    }
    if ((ringk_rt.cudaDeviceGetByPCIBusId(&dev, busid) != cudaSuccess) ||
        (ringk_rt.cudaGetDevice(cur_p) != cudaSuccess) ||
        ((dev != *cur_p) && (ringk_rt.cudaSetDevice(dev) != cudaSuccess))) {
        ringk_rt.cudaGetLastError();
        return 0;
    }
    return 1;
}

static void ipc_dev_leave(int cur)
{
    ringk_rt.cudaSetDevice(cur);
}

int ringk_cuda_ipc_open_on(const char *busid, const void *handle, uint64_t size,
                           void **mapped_p, char *why, size_t why_len)
{
    int cur, entered = ipc_dev_enter(busid, &cur), ret;

    ret = ringk_cuda_ipc_open(handle, size, mapped_p, why, why_len);
    if (entered) {
        ipc_dev_leave(cur);
    }
    return ret;
}

void ringk_cuda_ipc_stats(uint64_t *opens_p, uint64_t *hits_p)
{
    pthread_mutex_lock(&ipc_maps.mu);
    *opens_p = ipc_maps.opens;
    *hits_p  = ipc_maps.hits;
    pthread_mutex_unlock(&ipc_maps.mu);
}

/* libringk's import cache, where the process has libringk: weak references (the transport is
 * loaded into programs without it), resolved when this library is loaded, else looked up when
 * asked, as ringk_cuda_resident() finds libringk's kernel count. */
extern int ringk_ipc_import(const ringk_ipc_handle_t *handle, void **ptr_p)
    __attribute__((weak, visibility("default")));
extern int ringk_ipc_close(void *ptr) __attribute__((weak, visibility("default")));

typedef struct {
    int (*import)(const ringk_ipc_handle_t *handle, void **ptr_p);
    int (*close)(void *ptr);
} ipc_ringk_t;

static int ipc_ringk_find(ipc_ringk_t *fns)
{
    static ipc_ringk_t found; /* once found, kept: libringk is not unloaded under it */
    static int         have;
    void *lib;

    if (__atomic_load_n(&have, __ATOMIC_ACQUIRE)) {
        *fns = found;
        return 1;
    }
    fns->import = ringk_ipc_import;
    fns->close  = ringk_ipc_close;
    if (((fns->import == NULL) || (fns->close == NULL)) &&
        ((lib = dlopen("libringk.so.1", RTLD_LAZY | RTLD_NOLOAD)) != NULL)) {
        *(void**)&fns->import = dlsym(lib, "ringk_ipc_import");
        *(void**)&fns->close  = dlsym(lib, "ringk_ipc_close");
        dlclose(lib);
    }
    if ((fns->import == NULL) || (fns->close == NULL)) {
        return 0;
    }
    found = *fns; /* racing first callers store the same values */
    __atomic_store_n(&have, 1, __ATOMIC_RELEASE);
    return 1;
}

/* The cache id of a legacy handle the transport imports: the handle's bytes hashed (FNV-1a),
 * with the top bit set, which libringk's exporters' ids (addresses) leave clear. */
static uint64_t ipc_handle_id(const uint8_t *bytes)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;

    for (i = 0; i < RINGK_CUDA_IPC_HANDLE_LEN; i++) {
        h = (h ^ bytes[i]) * 0x100000001b3ull;
    }
    return h | (1ull << 63);
}

int ringk_cuda_ipc_open_shared(const void *handle, uint64_t size, uint32_t pid,
                               const char *busid, void **mapped_p, int *shared_p, char *why,
                               size_t why_len)
{
    ringk_ipc_handle_t h = {.type = RINGK_IPC_TYPE_LEGACY, .fd = -1, .size = size,
                            .pid = (int32_t)pid};
    ipc_ringk_t fns;
    int ret, cur = 0, entered;

    *shared_p = 0;
    if (!ipc_ringk_find(&fns)) {
        return ringk_cuda_ipc_open_on(busid, handle, size, mapped_p, why, why_len);
    }
    memcpy(h.bytes, handle, RINGK_CUDA_IPC_HANDLE_LEN);
    h.id = ipc_handle_id(h.bytes);
    snprintf(h.device, sizeof(h.device), "%s", busid);
    /* libringk maps a legacy handle on the calling thread's device: the memory's GPU is made
     * current for it, as for this library's own table (ringk_cuda_ipc_open_on()) */
    entered = ipc_dev_enter(busid, &cur);
    ret     = fns.import(&h, mapped_p);
    if (entered) {
        ipc_dev_leave(cur);
    }
    if (ret != 0) {
        snprintf(why, why_len, "libringk's import cache refused it (%d, logged by libringk)",
                 ret);
        return ret;
    }
    *shared_p = 1;
    return 0;
}

void ringk_cuda_ipc_close_shared(void *mapped, int shared)
{
    ipc_ringk_t fns;

    if (shared && ipc_ringk_find(&fns)) {
        fns.close(mapped);
    } else if (!shared) {
        ringk_cuda_ipc_close(mapped);
    }
}

size_t ringk_cuda_ipc_deferred(void)
{
    return ringk_maprefs_unused(&ipc_maps);
}

size_t ringk_cuda_ipc_flush(void)
{
    if ((ringk_cuda_resident(-1) != 0) || !ringk_cudart(NULL, 0)) {
        return 0;
    }
    return ringk_maprefs_flush(&ipc_maps, ipc_close_raw) + ringk_cuda_vmm_flush() +
           ringk_cuda_host_flush();
}

void ringk_cuda_ipc_close(void *mapped)
{
    if (!ringk_cudart(NULL, 0)) { /* never opened: nothing to close */
        return;
    }
    ringk_maprefs_put(&ipc_maps, mapped, ringk_cuda_resident(-1) == 0, ipc_close_raw);
}

#else /* !HAVE_CUDA */

int ringk_cuda_ptr_range(const void *ptr, uint64_t *base_p, uint64_t *size_p, char *busid,
                         size_t len)
{
    return 0;
}

int ringk_cuda_ipc_export(const void *ptr, void *handle, uint64_t *base_p, uint64_t *size_p,
                          char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

int ringk_cuda_ipc_open(const void *handle, uint64_t size, void **mapped_p, char *why,
                        size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA ": CUDA memory of a peer cannot be mapped");
    return -ENODEV;
}

int ringk_cuda_ipc_open_on(const char *busid, const void *handle, uint64_t size,
                           void **mapped_p, char *why, size_t why_len)
{
    return ringk_cuda_ipc_open(handle, size, mapped_p, why, why_len);
}

void ringk_cuda_ipc_close(void *mapped)
{
}

void ringk_cuda_ipc_stats(uint64_t *opens_p, uint64_t *hits_p)
{
    *opens_p = *hits_p = 0;
}

int ringk_cuda_ipc_open_shared(const void *handle, uint64_t size, uint32_t pid,
                               const char *busid, void **mapped_p, int *shared_p, char *why,
                               size_t why_len)
{
    *shared_p = 0;
    return ringk_cuda_ipc_open(handle, size, mapped_p, why, why_len);
}

void ringk_cuda_ipc_close_shared(void *mapped, int shared)
{
}

size_t ringk_cuda_ipc_deferred(void)
{
    return 0;
}

size_t ringk_cuda_ipc_flush(void)
{
    return 0;
}

#endif
