/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: export and import of device allocations by any IPC handle type (legacy
 * cudaIpc handles, and cuMem allocations as fabric handles or POSIX file descriptors), through
 * the runtime ringk_cuda.c loads and the driver API it loaded. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_cuda.h"
#include "ringk_cuda_rt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* The driver's virtual memory management calls, looked up in the driver the runtime loaded. */
#define RINGK_CU_VMM_CALLS(X) \
    X(cuMemRetainAllocationHandle) X(cuMemGetAllocationPropertiesFromHandle) \
    X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle) X(cuMemAddressReserve) \
    X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemRelease) \
    X(cuMemGetAddressRange) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuMemCreate) \
    X(cuMemGetAllocationGranularity)

static struct {
#define RINGK_CU_VMM_MEMBER(f) __typeof__(&f) f;
    RINGK_CU_VMM_CALLS(RINGK_CU_VMM_MEMBER)
#undef RINGK_CU_VMM_MEMBER
} vmm_cu;
static int vmm_cu_loaded;

/* cuda.h names some calls by macros of their versioned symbols (cuMemGetAddressRange is
 * cuMemGetAddressRange_v2): the symbol looked up is the macro's expansion. */
#define RINGK_STR2(s) #s
#define RINGK_STR(s)  RINGK_STR2(s)

static int vmm_cu_load(char *why, size_t why_len)
{
    void *lib, *fn;

    if (__atomic_load_n(&vmm_cu_loaded, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    if (!ringk_cudart(why, why_len)) {
        return -ENODEV;
    }
    lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (lib == NULL) {
        snprintf(why, why_len, "the CUDA driver (libcuda.so.1) is not loaded");
        return -ENODEV;
    }
#define RINGK_CU_VMM_LOAD(f) \
    if ((fn = dlsym(lib, RINGK_STR(f))) == NULL) { \
        snprintf(why, why_len, "%s not found in libcuda.so.1", RINGK_STR(f)); \
        return -ENODEV; \
    } \
    *(void**)&vmm_cu.f = fn;
    RINGK_CU_VMM_CALLS(RINGK_CU_VMM_LOAD)
#undef RINGK_CU_VMM_LOAD
    /* racing first callers store the same values; the library stays loaded */
    __atomic_store_n(&vmm_cu_loaded, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Makes device @a dev's primary context current (*ctx_p for vmm_ctx_leave): 0, or the CUresult
 * with @a why. */
static int vmm_ctx_enter(int dev, CUcontext *ctx_p, char *why, size_t why_len)
{
    CUdevice d;
    int ret;

    if ((ret = vmm_cu.cuDeviceGet(&d, dev)) != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuDeviceGet(%d) failed with CUresult %d", dev, ret);
        return ret;
    }
    if ((ret = vmm_cu.cuDevicePrimaryCtxRetain(ctx_p, d)) != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuDevicePrimaryCtxRetain(%d) failed with CUresult %d", dev, ret);
        return ret;
    }
    if ((ret = vmm_cu.cuCtxPushCurrent(*ctx_p)) != CUDA_SUCCESS) {
        vmm_cu.cuDevicePrimaryCtxRelease(d);
        snprintf(why, why_len, "cuCtxPushCurrent failed with CUresult %d", ret);
    }
    return ret;
}

static void vmm_ctx_leave(int dev)
{
    CUcontext popped;
    CUdevice d;

    vmm_cu.cuCtxPopCurrent(&popped);
    if (vmm_cu.cuDeviceGet(&d, dev) == CUDA_SUCCESS) {
        vmm_cu.cuDevicePrimaryCtxRelease(d);
    }
}

int ringk_cuda_ctx_push_existing(void)
{
    CUcontext ctx;
    int d;

    if (vmm_cu_load(NULL, 0) != 0) {
        return -1;
    }
    for (d = 0; d < RINGK_CUDA_DEVICES_MAX; d++) {
        if ((ringk_cuda_ctx_exists(d) == 1) && (vmm_ctx_enter(d, &ctx, NULL, 0) == CUDA_SUCCESS)) {
            return d;
        }
    }
    return -1;
}

void ringk_cuda_ctx_pop(int dev)
{
    vmm_ctx_leave(dev);
}

/* The fabric or POSIX handle of the cuMemCreate allocation @a ptr lies in (device @a dev), of
 * a type @a types allows and the allocation was made with: 0, -EOPNOTSUPP or -EIO with @a why.
 * @a legacy_why says why no legacy handle was had. */
static int vmm_export_cumem(const void *ptr, int dev, unsigned types, ringk_cuda_vmm_export_t *ex,
                            const char *legacy_why, char *why, size_t why_len)
{
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    CUdeviceptr base;
    CUcontext ctx;
    size_t size;
    int ret, fd = -1;

    if (vmm_ctx_enter(dev, &ctx, why, why_len) != CUDA_SUCCESS) {
        return -EIO;
    }
    ret = vmm_cu.cuMemRetainAllocationHandle(&h, (void*)ptr);
    if (ret != CUDA_SUCCESS) {
        vmm_ctx_leave(dev);
        snprintf(why, why_len, "not a cuMemCreate allocation (cuMemRetainAllocationHandle: "
                 "CUresult %d)%s%s", ret, legacy_why[0] ? "; legacy: " : "", legacy_why);
        return -EOPNOTSUPP;
    }
    memset(&prop, 0, sizeof(prop));
    ret = vmm_cu.cuMemGetAllocationPropertiesFromHandle(&prop, h);
    if ((ret == CUDA_SUCCESS) && (types & (1u << RINGK_CUDA_IPC_FABRIC)) &&
        (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) &&
        (vmm_cu.cuMemExportToShareableHandle(ex->bytes, h, CU_MEM_HANDLE_TYPE_FABRIC, 0) ==
         CUDA_SUCCESS)) {
        ex->type = RINGK_CUDA_IPC_FABRIC;
    } else if ((ret == CUDA_SUCCESS) && (types & (1u << RINGK_CUDA_IPC_POSIX_FD)) &&
               (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) &&
               (vmm_cu.cuMemExportToShareableHandle(&fd, h,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                    0) == CUDA_SUCCESS)) {
        ex->type = RINGK_CUDA_IPC_POSIX_FD;
        ex->fd   = fd;
    } else {
        snprintf(why, why_len, "the cuMemCreate allocation was made with handle types 0x%x, "
                 "none of those allowed (fabric 0x%x, POSIX fd 0x%x) that export",
                 (unsigned)prop.requestedHandleTypes, (unsigned)CU_MEM_HANDLE_TYPE_FABRIC,
                 (unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        ret = -EOPNOTSUPP;
    }
    ex->alloc = (uint64_t)h;
    if ((ret == CUDA_SUCCESS) &&
        (vmm_cu.cuMemGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)ptr) !=
         CUDA_SUCCESS)) {
        snprintf(why, why_len, "cuMemGetAddressRange(%p) failed", ptr);
        ret = -EIO;
    }
    vmm_cu.cuMemRelease(h); /* the retain above */
    vmm_ctx_leave(dev);
    if (ret != CUDA_SUCCESS) {
        if (fd >= 0) {
            close(fd);
        }
        ex->fd = -1;
        return ret;
    }
    ex->base = base;
    ex->size = size;
    return 0;
}

int ringk_cuda_vmm_export(const void *ptr, unsigned types, ringk_cuda_vmm_export_t *ex,
                          char *why, size_t why_len)
{
    char legacy_why[160] = "";
    int ret, dev;

    if (!ringk_cuda_usable_cached()) {
        snprintf(why, why_len, "CUDA is not usable in this process (no driver or no device)");
        return -ENODEV;
    }
    if ((ret = vmm_cu_load(why, why_len)) != 0) {
        return ret;
    }
    if ((ret = ringk_cuda_ptr_device(ptr, &dev, why, why_len)) != 0) {
        return ret;
    }
    if (ringk_rt.cudaDeviceGetPCIBusId(ex->busid, sizeof(ex->busid), dev) != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "cudaDeviceGetPCIBusId(%d) failed", dev);
        return -EIO;
    }
    ex->fd    = -1;
    ex->alloc = 0;
    if (types & (1u << RINGK_CUDA_IPC_LEGACY)) {
        ret = ringk_cuda_ipc_export(ptr, ex->bytes, &ex->base, &ex->size, legacy_why,
                                    sizeof(legacy_why));
        if (ret == 0) {
            ex->type = RINGK_CUDA_IPC_LEGACY;
            return 0;
        }
        if (ret != -EOPNOTSUPP) {
            snprintf(why, why_len, "%s", legacy_why);
            return ret;
        }
    }
    if (!(types & ((1u << RINGK_CUDA_IPC_FABRIC) | (1u << RINGK_CUDA_IPC_POSIX_FD)))) {
        snprintf(why, why_len, "no legacy handle (%s), and no other handle type was allowed",
                 legacy_why);
        return -EOPNOTSUPP;
    }
    return vmm_export_cumem(ptr, dev, types, ex, legacy_why, why, why_len);
}

/* Gives access to the mapping [va, +size): the owner (@a owner, -1 when this process does not
 * see it) reaches its own memory; the calling thread's device @a dev where it is the owner,
 * the owner is hidden (then the driver says), or CUDA gives the pair peer access. CUresult,
 * with @a why on failure. */
static int vmm_set_access(CUdeviceptr va, uint64_t size, int dev, int owner, char *why,
                          size_t why_len)
{
    CUmemAccessDesc access[2];
    size_t i, n = 0;
    int ret, can = 0;

    memset(access, 0, sizeof(access));
    if (owner >= 0) {
        access[n++].location.id = owner;
    }
    if ((owner < 0) ||
        ((dev != owner) && (ringk_rt.cudaDeviceCanAccessPeer(&can, dev, owner) == cudaSuccess) &&
         can)) {
        access[n++].location.id = dev;
    }
    ringk_rt.cudaGetLastError();
    for (i = 0; i < n; i++) {
        access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[i].flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    if ((ret = vmm_cu.cuMemSetAccess(va, size, access, n)) != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemSetAccess(device %d%s) failed with CUresult %d",
                 access[0].location.id, (n > 1) ? " and another" : "", ret);
    }
    return ret;
}

/* Maps the allocation of handle @a bytes or @a fd (type @a type) of @a size bytes in the primary
 * context of device @a at, with access as vmm_set_access(@a dev, @a owner) gives: 0 with its
 * address in *@a base_p, or -EIO with @a why. */
static int vmm_import_in(int type, const uint8_t *bytes, int fd, uint64_t size, int at, int dev,
                         int owner, void **base_p, char *why, size_t why_len)
{
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    CUcontext ctx;
    int ret;

    if (vmm_ctx_enter(at, &ctx, why, why_len) != CUDA_SUCCESS) {
        return -EIO;
    }
    ret = vmm_cu.cuMemImportFromShareableHandle(
            &h, (type == RINGK_CUDA_IPC_FABRIC) ? (void*)bytes : (void*)(uintptr_t)fd,
            (type == RINGK_CUDA_IPC_FABRIC) ? CU_MEM_HANDLE_TYPE_FABRIC :
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (ret != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemImportFromShareableHandle failed with CUresult %d", ret);
        goto err_leave;
    }
    if ((ret = vmm_cu.cuMemAddressReserve(&va, size, 0, 0, 0)) != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemAddressReserve(%llu bytes) failed with CUresult %d",
                 (unsigned long long)size, ret);
        goto err_release;
    }
    if ((ret = vmm_cu.cuMemMap(va, size, 0, h, 0)) != CUDA_SUCCESS) {
        /* a size that is not the allocation's (the exporter's word) fails here */
        snprintf(why, why_len, "cuMemMap(%llu bytes) failed with CUresult %d",
                 (unsigned long long)size, ret);
        goto err_free;
    }
    if ((ret = vmm_set_access(va, size, dev, owner, why, why_len)) != CUDA_SUCCESS) {
        vmm_cu.cuMemUnmap(va, size);
        goto err_free;
    }
    vmm_cu.cuMemRelease(h); /* the mapping holds the allocation */
    vmm_ctx_leave(at);
    *base_p = (void*)(uintptr_t)va;
    return 0;

err_free:
    vmm_cu.cuMemAddressFree(va, size);
err_release:
    vmm_cu.cuMemRelease(h);
err_leave:
    vmm_ctx_leave(at);
    return -EIO;
}

/* Whether cuMem calls can be made here: 0, or -ENODEV / the loader's error with @a why. */
static int vmm_ready(char *why, size_t why_len)
{
    if (!ringk_cuda_usable_cached()) {
        snprintf(why, why_len, "CUDA is not usable in this process (no driver or no device)");
        return -ENODEV;
    }
    return vmm_cu_load(why, why_len);
}

int ringk_cuda_vmm_import(int type, const uint8_t *bytes, int fd, const char *busid,
                          uint64_t size, void **base_p, char *why, size_t why_len)
{
    int ret, dev, owner;

    if (type == RINGK_CUDA_IPC_LEGACY) {
        /* on the calling thread's device, as cudaIpcOpenMemHandle maps (and lazily gives that
         * device peer access): what ringk_ipc_import() promises its caller */
        return ringk_cuda_ipc_open(bytes, size, base_p, why, why_len);
    }
    if ((ret = vmm_ready(why, why_len)) != 0) {
        return ret;
    }
    ringk_cuda_ipc_flush(); /* closes left for later, once no device kernel is resident */
    /* mapped in the exporter's GPU's context where this process sees it (CUDA_VISIBLE_DEVICES
     * may hide it: then the calling thread's device's), so that no other GPU gets a context;
     * access for both where they can have it (vmm_set_access()) */
    if (ringk_rt.cudaGetDevice(&dev) != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        dev = 0;
    }
    if (ringk_rt.cudaDeviceGetByPCIBusId(&owner, busid) != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        owner = -1;
    }
    return vmm_import_in(type, bytes, fd, size, (owner >= 0) ? owner : dev, dev, owner, base_p,
                         why, why_len);
}

int ringk_cuda_vmm_import_to(int dev, int fd, uint64_t size, void **base_p, char *why,
                             size_t why_len)
{
    int ret;

    if ((ret = vmm_ready(why, why_len)) != 0) {
        return ret;
    }
    ringk_cuda_ipc_flush();
    /* in @a dev's context, access for @a dev alone: the memory's own GPU gets no context here */
    return vmm_import_in(RINGK_CUDA_IPC_POSIX_FD, NULL, fd, size, dev, dev, dev, base_p, why,
                         why_len);
}

int ringk_cuda_vmm_grant(void *base, uint64_t size, int dev, char *why, size_t why_len)
{
    CUmemAccessDesc access;
    CUcontext ctx;
    int ret, keep;

    if ((ret = vmm_ready(why, why_len)) != 0) {
        return ret;
    }
    /* a device without a context of the process (RINGK_DEVICE_PEER=1 pairs those too) keeps
     * the one made here, as the runtime keeps the contexts it makes: released, it would be
     * torn down, and what it was given with it */
    keep = (ringk_cuda_ctx_exists(dev) == 0);
    if (vmm_ctx_enter(dev, &ctx, why, why_len) != CUDA_SUCCESS) {
        return -EIO;
    }
    /* only the location named changes: the devices that have access keep it */
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id   = dev;
    access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ret = vmm_cu.cuMemSetAccess((CUdeviceptr)(uintptr_t)base, size, &access, 1);
    if (keep) {
        vmm_cu.cuCtxPopCurrent(&ctx); /* popped, its retain kept */
    } else {
        vmm_ctx_leave(dev);
    }
    if (ret != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemSetAccess(device %d, %llu bytes) failed with CUresult %d",
                 dev, (unsigned long long)size, ret);
        return -EIO;
    }
    return 0;
}

/* cuMem mappings closed while device kernels were resident (cuMemUnmap may wait for the
 * device's work, as cudaIpcCloseMemHandle does), unmapped once none is: a list, most recent
 * first. */
typedef struct vmm_deferred {
    struct vmm_deferred *next;
    void                *base;
    uint64_t             size;
} vmm_deferred_t;

static pthread_mutex_t vmm_deferred_mu = PTHREAD_MUTEX_INITIALIZER;
static vmm_deferred_t *vmm_deferred;
static size_t          vmm_ndeferred;

static void vmm_unmap(void *base, uint64_t size)
{
    /* unmapping needs no context current: the address is the process's */
    vmm_cu.cuMemUnmap((CUdeviceptr)(uintptr_t)base, size);
    vmm_cu.cuMemAddressFree((CUdeviceptr)(uintptr_t)base, size);
}

int ringk_cuda_vmm_alloc(int dev, uint64_t size, void **ptr_p, uint64_t *size_p, int *fd_p,
                         char *why, size_t why_len)
{
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    CUdeviceptr va = 0;
    CUcontext ctx;
    size_t gran = 0;
    int ret, fd = -1;

    if (!ringk_cuda_usable_cached()) {
        snprintf(why, why_len, "CUDA is not usable in this process (no driver or no device)");
        return -ENODEV;
    }
    if ((ret = vmm_cu_load(why, why_len)) != 0) {
        return ret;
    }
    memset(&prop, 0, sizeof(prop));
    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (vmm_ctx_enter(dev, &ctx, why, why_len) != CUDA_SUCCESS) {
        return -EIO;
    }
    ret = vmm_cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if ((ret != CUDA_SUCCESS) || (gran == 0)) {
        snprintf(why, why_len, "cuMemGetAllocationGranularity(device %d, POSIX fd) failed with "
                 "CUresult %d", dev, ret);
        vmm_ctx_leave(dev);
        return -EOPNOTSUPP;
    }
    size = (size + gran - 1) / gran * gran;
    if ((ret = vmm_cu.cuMemCreate(&h, size, &prop, 0)) != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemCreate(%llu bytes on device %d, POSIX fd) failed with "
                 "CUresult %d", (unsigned long long)size, dev, ret);
        vmm_ctx_leave(dev);
        return (ret == CUDA_ERROR_OUT_OF_MEMORY) ? -ENOMEM : -EOPNOTSUPP;
    }
    if ((ret = vmm_cu.cuMemExportToShareableHandle(&fd, h,
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                   0)) != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemExportToShareableHandle(POSIX fd) failed with CUresult %d",
                 ret);
        fd = -1;
    } else if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) { /* a child's exec must not hold it */
        snprintf(why, why_len, "fcntl(FD_CLOEXEC): %s", strerror(errno));
        ret = CUDA_ERROR_UNKNOWN;
    } else if ((ret = vmm_cu.cuMemAddressReserve(&va, size, gran, 0, 0)) != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemAddressReserve(%llu bytes) failed with CUresult %d",
                 (unsigned long long)size, ret);
    } else if ((ret = vmm_cu.cuMemMap(va, size, 0, h, 0)) != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuMemMap(%llu bytes) failed with CUresult %d",
                 (unsigned long long)size, ret);
        vmm_cu.cuMemAddressFree(va, size);
    } else if ((ret = vmm_set_access(va, size, dev, dev, why, why_len)) != CUDA_SUCCESS) {
        vmm_unmap((void*)(uintptr_t)va, size);
    }
    vmm_cu.cuMemRelease(h); /* the mapping holds the allocation, the descriptor names it */
    vmm_ctx_leave(dev);
    if (ret != CUDA_SUCCESS) {
        if (fd >= 0) {
            close(fd);
        }
        return -EIO;
    }
    *ptr_p  = (void*)(uintptr_t)va;
    *size_p = size;
    *fd_p   = fd;
    return 0;
}

int ringk_cuda_host_map(int on, void *ptr, size_t len, void **dev_p, char *why,
                        size_t why_len)
{
    enum cudaStreamCaptureMode mode;
    cudaError_t err;
    CUcontext ctx;
    void *dev = NULL;
    int ret;

    if ((ret = vmm_cu_load(why, why_len)) != 0) {
        return ret;
    }
    /* in device @a on's primary context, pushed: no other GPU gets a context */
    if (vmm_ctx_enter(on, &ctx, why, why_len) != CUDA_SUCCESS) {
        return -EIO;
    }
    mode = ringk_cuda_capture_relax();
    err  = ringk_rt.cudaHostRegister(ptr, len, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (err == cudaSuccess) {
        err = ringk_rt.cudaHostGetDevicePointer(&dev, ptr, 0);
        if (err != cudaSuccess) {
            ringk_rt.cudaGetLastError();
            ringk_rt.cudaHostUnregister(ptr);
        }
    }
    if (err != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "cudaHostRegister(%zu bytes, mapped, on device %d): %s", len, on,
                 ringk_rt.cudaGetErrorString(err));
    }
    ringk_cuda_capture_end(mode);
    vmm_ctx_leave(on);
    if (err != cudaSuccess) {
        return -EIO;
    }
    *dev_p = dev;
    return 0;
}

void ringk_cuda_vmm_free(void *ptr, uint64_t size)
{
    if (ptr != NULL) {
        ringk_cuda_vmm_close(RINGK_CUDA_IPC_POSIX_FD, ptr, size); /* later while kernels run */
    }
}

void ringk_cuda_vmm_close(int type, void *base, uint64_t size)
{
    vmm_deferred_t *d;

    if (type == RINGK_CUDA_IPC_LEGACY) {
        ringk_cuda_ipc_close(base);
        return;
    }
    if (vmm_cu_load(NULL, 0) != 0) {
        return;
    }
    if ((ringk_cuda_resident(-1) > 0) && ((d = malloc(sizeof(*d))) != NULL)) {
        d->base = base;
        d->size = size;
        pthread_mutex_lock(&vmm_deferred_mu);
        d->next      = vmm_deferred;
        vmm_deferred = d;
        vmm_ndeferred++;
        pthread_mutex_unlock(&vmm_deferred_mu);
        return;
    }
    vmm_unmap(base, size);
}

size_t ringk_cuda_vmm_flush(void)
{
    vmm_deferred_t *list, *d;
    size_t n = 0;

    if ((ringk_cuda_resident(-1) > 0) || (vmm_cu_load(NULL, 0) != 0)) {
        return 0;
    }
    pthread_mutex_lock(&vmm_deferred_mu);
    list          = vmm_deferred;
    vmm_deferred  = NULL;
    vmm_ndeferred = 0;
    pthread_mutex_unlock(&vmm_deferred_mu);
    while ((d = list) != NULL) {
        list = d->next;
        vmm_unmap(d->base, d->size);
        free(d);
        n++;
    }
    return n;
}

size_t ringk_cuda_vmm_deferred(void)
{
    size_t n;

    pthread_mutex_lock(&vmm_deferred_mu);
    n = vmm_ndeferred;
    pthread_mutex_unlock(&vmm_deferred_mu);
    return n;
}

#else /* !HAVE_CUDA */

int ringk_cuda_vmm_export(const void *ptr, unsigned types, ringk_cuda_vmm_export_t *ex,
                          char *why, size_t why_len)
{
    (void)ptr;
    (void)types;
    (void)ex;
    snprintf(why, why_len, RINGK_NO_CUDA ": no device memory to export");
    return -ENODEV;
}

int ringk_cuda_vmm_import(int type, const uint8_t *bytes, int fd, const char *busid,
                          uint64_t size, void **base_p, char *why, size_t why_len)
{
    (void)type;
    (void)bytes;
    (void)fd;
    (void)busid;
    (void)size;
    (void)base_p;
    snprintf(why, why_len, RINGK_NO_CUDA ": a device allocation cannot be mapped");
    return -ENODEV;
}

int ringk_cuda_ctx_push_existing(void)
{
    return -1;
}

void ringk_cuda_ctx_pop(int dev)
{
    (void)dev;
}

int ringk_cuda_vmm_import_to(int dev, int fd, uint64_t size, void **base_p, char *why,
                             size_t why_len)
{
    (void)dev;
    (void)fd;
    (void)size;
    (void)base_p;
    snprintf(why, why_len, RINGK_NO_CUDA ": a device allocation cannot be mapped");
    return -ENODEV;
}

int ringk_cuda_vmm_grant(void *base, uint64_t size, int dev, char *why, size_t why_len)
{
    (void)base;
    (void)size;
    (void)dev;
    snprintf(why, why_len, RINGK_NO_CUDA ": no device memory to give access to");
    return -ENODEV;
}

int ringk_cuda_vmm_alloc(int dev, uint64_t size, void **ptr_p, uint64_t *size_p, int *fd_p,
                         char *why, size_t why_len)
{
    (void)dev;
    (void)size;
    (void)ptr_p;
    (void)size_p;
    (void)fd_p;
    snprintf(why, why_len, RINGK_NO_CUDA ": no device memory to allocate");
    return -ENODEV;
}

int ringk_cuda_host_map(int on, void *ptr, size_t len, void **dev_p, char *why,
                        size_t why_len)
{
    (void)on;
    (void)ptr;
    (void)len;
    (void)dev_p;
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

void ringk_cuda_vmm_free(void *ptr, uint64_t size)
{
    (void)ptr;
    (void)size;
}

void ringk_cuda_vmm_close(int type, void *base, uint64_t size)
{
    (void)type;
    (void)base;
    (void)size;
}

size_t ringk_cuda_vmm_flush(void)
{
    return 0;
}

size_t ringk_cuda_vmm_deferred(void)
{
    return 0;
}

#endif
