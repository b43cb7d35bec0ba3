/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: device count and the P2P canary. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_cuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <unistd.h>

int ringk_cuda_usable(char *why, size_t why_len)
{
    if (access("/proc/driver/nvidia/version", R_OK) != 0) {
        snprintf(why, why_len, "no NVIDIA driver loaded (/proc/driver/nvidia/version)");
        return 0;
    }
    return ringk_cuda_device_count(why, why_len) > 0;
}

int ringk_cuda_current_busid(char *busid, size_t len, char *why, size_t why_len)
{
    cudaError_t err;
    int dev;

    if (!ringk_cuda_usable(why, why_len)) {
        return -ENODEV;
    }
    if (((err = cudaGetDevice(&dev)) != cudaSuccess) ||
        ((err = cudaDeviceGetPCIBusId(busid, (int)len, dev)) != cudaSuccess)) {
        snprintf(why, why_len, "the current CUDA device: %s", cudaGetErrorString(err));
        return -ENODEV;
    }
    snprintf(why, why_len, "the current CUDA device %d", dev);
    return 0;
}

/* Whether a usable driver exists, asked once: pointer queries are on data paths. */
static int ringk_cuda_usable_cached(void)
{
    static int usable = -1; /* racing first callers compute the same answer */
    char why[128];
    int u = __atomic_load_n(&usable, __ATOMIC_RELAXED);

    if (u < 0) {
        u = ringk_cuda_usable(why, sizeof(why));
        __atomic_store_n(&usable, u, __ATOMIC_RELAXED);
    }
    return u;
}

int ringk_cuda_ptr_is_device(const void *ptr, char *busid, size_t len)
{
    struct cudaPointerAttributes attr;

    if (!ringk_cuda_usable_cached() || (ptr == NULL)) {
        return 0;
    }
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        cudaGetLastError(); /* a host pointer the driver never saw */
        return 0;
    }
    if (attr.type != cudaMemoryTypeDevice) {
        return 0;
    }
    if ((busid != NULL) && (cudaDeviceGetPCIBusId(busid, (int)len, attr.device) != cudaSuccess)) {
        cudaGetLastError();
        busid[0] = '\0';
    }
    return 1;
}

/* The driver API's cuMemGetAddressRange, looked up in the driver the runtime loaded: the
 * runtime API has no way to find the allocation a pointer lies in. */
typedef int (*ringk_cu_range_fn_t)(unsigned long long *base, size_t *size, unsigned long long p);

static ringk_cu_range_fn_t ringk_cu_range;

static int ringk_cuda_range_fn(char *why, size_t why_len)
{
    ringk_cu_range_fn_t fn;
    void *lib;

    if (__atomic_load_n(&ringk_cu_range, __ATOMIC_ACQUIRE) != NULL) {
        return 0;
    }
    lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if ((lib == NULL) || ((*(void**)&fn = dlsym(lib, "cuMemGetAddressRange_v2")) == NULL)) {
        snprintf(why, why_len, "cuMemGetAddressRange_v2 not found in libcuda.so.1");
        return -ENODEV;
    }
    __atomic_store_n(&ringk_cu_range, fn, __ATOMIC_RELEASE); /* the library stays loaded */
    return 0;
}

int ringk_cuda_ptr_range(const void *ptr, uint64_t *base_p, uint64_t *size_p, char *busid,
                         size_t len)
{
    unsigned long long base;
    char why[128];
    size_t size;

    if (!ringk_cuda_ptr_is_device(ptr, busid, len) ||
        (ringk_cuda_range_fn(why, sizeof(why)) != 0) ||
        (ringk_cu_range(&base, &size, (unsigned long long)(uintptr_t)ptr) != 0)) {
        return 0;
    }
    *base_p = base;
    *size_p = size;
    return 1;
}

int ringk_cuda_ipc_export(const void *ptr, void *handle, uint64_t *base_p, uint64_t *size_p,
                          char *why, size_t why_len)
{
    struct cudaPointerAttributes attr;
    unsigned long long base;
    cudaIpcMemHandle_t h;
    size_t size;
    int ret, current = -1;

    ret = ringk_cuda_range_fn(why, why_len);
    if (ret != 0) {
        return ret;
    }
    /* A runtime call first: it makes a context current on this thread, which the driver call
     * below needs (a thread whose first CUDA call this is has none); and the pointer's device,
     * for the calls that follow, given back after. */
    if ((cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) ||
        (attr.type != cudaMemoryTypeDevice)) {
        cudaGetLastError();
        snprintf(why, why_len, "%p is not device memory", ptr);
        return -EINVAL;
    }
    if ((cudaGetDevice(&current) == cudaSuccess) && (current != attr.device) &&
        (cudaSetDevice(attr.device) != cudaSuccess)) {
        snprintf(why, why_len, "cudaSetDevice(%d): %s", attr.device,
                 cudaGetErrorString(cudaGetLastError()));
        return -EIO;
    }
    ret = ringk_cu_range(&base, &size, (unsigned long long)(uintptr_t)ptr);
    if (ret != 0) {
        snprintf(why, why_len, "cuMemGetAddressRange(%p) failed with CUresult %d", ptr, ret);
        ret = -EINVAL;
    } else if (cudaIpcGetMemHandle(&h, (void*)(uintptr_t)base) != cudaSuccess) {
        /* e.g. memory from cudaMallocAsync pools or cuMemCreate */
        snprintf(why, why_len, "cudaIpcGetMemHandle(0x%llx): %s", base,
                 cudaGetErrorString(cudaGetLastError()));
        ret = -EOPNOTSUPP;
    }
    if ((current >= 0) && (current != attr.device)) {
        cudaSetDevice(current);
    }
    if (ret != 0) {
        return ret;
    }
    memcpy(handle, &h, RINGK_CUDA_IPC_HANDLE_LEN);
    *base_p = base;
    *size_p = size;
    return 0;
}

int ringk_cuda_ipc_open(const void *handle, uint64_t size, void **mapped_p, char *why,
                        size_t why_len)
{
    unsigned long long base;
    cudaIpcMemHandle_t h;
    cudaError_t err;
    size_t real;
    int ret;

    if (!ringk_cuda_usable_cached()) {
        snprintf(why, why_len, "CUDA is not usable in this process (no driver or no device)");
        return -ENODEV;
    }
    memcpy(&h, handle, RINGK_CUDA_IPC_HANDLE_LEN);
    err = cudaIpcOpenMemHandle(mapped_p, h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, why_len, "cudaIpcOpenMemHandle: %s", cudaGetErrorString(err));
        return -EIO;
    }
    /* the peer's word for the allocation's size is checked against the mapping itself */
    ret = ringk_cuda_range_fn(why, why_len);
    if (ret == 0) {
        ret = ringk_cu_range(&base, &real, (unsigned long long)(uintptr_t)*mapped_p);
        if ((ret != 0) || (real < size)) {
            snprintf(why, why_len, "the mapped allocation is %zu bytes, the key says %llu "
                     "(CUresult %d)", real, (unsigned long long)size, ret);
            ret = -EINVAL;
        }
    }
    if (ret != 0) {
        cudaIpcCloseMemHandle(*mapped_p);
        *mapped_p = NULL;
        return ret;
    }
    return 0;
}

void ringk_cuda_ipc_close(void *mapped)
{
    cudaIpcCloseMemHandle(mapped);
}

int ringk_cuda_copy(void *dst, const void *src, size_t len, char *why, size_t why_len)
{
    /* cudaMemcpy may return before a device-to-device or pageable host-to-device copy has
     * landed: the copy goes on the calling thread's stream, which is then waited for. */
    cudaError_t err = cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, cudaStreamPerThread);

    if (err == cudaSuccess) {
        err = cudaStreamSynchronize(cudaStreamPerThread);
    }
    if (err != cudaSuccess) {
        cudaGetLastError(); /* not left for the application's next error check */
        snprintf(why, why_len, "cudaMemcpy(%p <- %p, %zu): %s", dst, src, len,
                 cudaGetErrorString(err));
        return -EIO;
    }
    return 0;
}

void *ringk_cuda_host_alloc(size_t len)
{
    void *ptr;

    return (cudaMallocHost(&ptr, len) == cudaSuccess) ? ptr : NULL;
}

void ringk_cuda_host_free(void *ptr)
{
    cudaFreeHost(ptr);
}

int ringk_cuda_device_count(char *why, size_t why_len)
{
    cudaError_t err;
    int n = 0;

    err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        return 0;
    }
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device");
    }
    return n;
}

#define CANARY_WORDS 4096

int ringk_cuda_p2p_canary(const char *busid_a, const char *busid_b, char *why, size_t why_len)
{
    uint32_t *host = NULL, *back = NULL, *mem_b = NULL, *mem_a = NULL;
    int dev_a, dev_b, can = 0, ret = -EIO, i, caller = 0;
    cudaError_t err;

    cudaGetDevice(&caller); /* the caller's current device is given back at the end */

    if ((cudaDeviceGetByPCIBusId(&dev_a, busid_a) != cudaSuccess) ||
        (cudaDeviceGetByPCIBusId(&dev_b, busid_b) != cudaSuccess)) {
        snprintf(why, why_len, "no CUDA device at %s or %s", busid_a, busid_b);
        return -ENODEV;
    }
    if (dev_a != dev_b) {
        if ((cudaDeviceCanAccessPeer(&can, dev_a, dev_b) != cudaSuccess) || !can) {
            snprintf(why, why_len, "cudaDeviceCanAccessPeer(%d, %d) says no", dev_a, dev_b);
            return -EPERM;
        }
        cudaSetDevice(dev_a);
        err = cudaDeviceEnablePeerAccess(dev_b, 0);
        if ((err != cudaSuccess) && (err != cudaErrorPeerAccessAlreadyEnabled)) {
            snprintf(why, why_len, "cudaDeviceEnablePeerAccess(%d -> %d): %s", dev_a, dev_b,
                     cudaGetErrorString(err));
            cudaSetDevice(caller);
            return -EPERM;
        }
        cudaGetLastError(); /* clear an 'already enabled' */
    }
    host = malloc(CANARY_WORDS * sizeof(*host));
    back = malloc(CANARY_WORDS * sizeof(*back));
    if ((host == NULL) || (back == NULL)) {
        snprintf(why, why_len, "out of host memory");
        ret = -ENOMEM;
        goto out;
    }
    for (i = 0; i < CANARY_WORDS; i++) {
        host[i] = 0x9e3779b9u * (uint32_t)(i + 1);
    }
    /* pattern into A's memory, A -> B over the peer path, B -> A back, compare */
    if (((err = cudaSetDevice(dev_b)) != cudaSuccess) ||
        ((err = cudaMalloc((void**)&mem_b, CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = cudaMemset(mem_b, 0, CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = cudaSetDevice(dev_a)) != cudaSuccess) ||
        ((err = cudaMalloc((void**)&mem_a, CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = cudaMemcpy(mem_a, host, CANARY_WORDS * sizeof(*host),
                           cudaMemcpyHostToDevice)) != cudaSuccess) ||
        ((err = cudaMemcpyPeer(mem_b, dev_b, mem_a, dev_a,
                               CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = cudaMemset(mem_a, 0, CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = cudaMemcpyPeer(mem_a, dev_a, mem_b, dev_b,
                               CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = cudaMemcpy(back, mem_a, CANARY_WORDS * sizeof(*back),
                           cudaMemcpyDeviceToHost)) != cudaSuccess)) {
        snprintf(why, why_len, "canary %s -> %s: %s", busid_a, busid_b, cudaGetErrorString(err));
        goto out;
    }
    if (memcmp(host, back, CANARY_WORDS * sizeof(*host)) != 0) {
        snprintf(why, why_len, "canary %s -> %s: data read back differs", busid_a, busid_b);
        goto out;
    }
    snprintf(why, why_len, "verified by a %zu-byte write/read canary",
             CANARY_WORDS * sizeof(*host));
    ret = 0;
out:
    if (mem_a != NULL) {
        cudaSetDevice(dev_a);
        cudaFree(mem_a);
    }
    if (mem_b != NULL) {
        cudaSetDevice(dev_b);
        cudaFree(mem_b);
    }
    free(back);
    free(host);
    cudaSetDevice(caller);
    return ret;
}

#else /* !HAVE_CUDA */

#define RINGK_NO_CUDA "built without CUDA"

int ringk_cuda_usable(char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return 0;
}

int ringk_cuda_current_busid(char *busid, size_t len, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

int ringk_cuda_ptr_is_device(const void *ptr, char *busid, size_t len)
{
    return 0;
}

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

void ringk_cuda_ipc_close(void *mapped)
{
}

int ringk_cuda_copy(void *dst, const void *src, size_t len, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -EIO;
}

void *ringk_cuda_host_alloc(size_t len)
{
    return NULL;
}

void ringk_cuda_host_free(void *ptr)
{
}

int ringk_cuda_device_count(char *why, size_t why_len)
{
    snprintf(why, why_len, "built without CUDA");
    return 0;
}

int ringk_cuda_p2p_canary(const char *busid_a, const char *busid_b, char *why, size_t why_len)
{
    snprintf(why, why_len, "built without CUDA: GPU paths are unavailable");
    return -ENODEV;
}

#endif

#define RINGK_CU_ERROR_NOT_INITIALIZED 3 /* CUDA_ERROR_NOT_INITIALIZED: no cuInit yet */

int ringk_cuda_ctx_exists(int dev)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    int (*get)(int *device, int ordinal);
    int (*state)(int device, unsigned *flags, int *active);
    int d, active = 0, ret = -1;
    unsigned flags;

    if (lib == NULL) {
        return 0;
    }
    *(void**)&get   = dlsym(lib, "cuDeviceGet");
    *(void**)&state = dlsym(lib, "cuDevicePrimaryCtxGetState");
    if ((get != NULL) && (state != NULL)) {
        ret = get(&d, dev);
        if (ret == RINGK_CU_ERROR_NOT_INITIALIZED) {
            ret = 0;
        } else if (ret == 0) {
            ret = (state(d, &flags, &active) == 0) ? (active != 0) : -1;
        } else {
            ret = -1;
        }
    }
    dlclose(lib);
    return ret;
}
