/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: device count, pointer queries, IPC handles, copies and the P2P canary,
 * through the CUDA runtime loaded when first needed (dlopen), so that neither library needs
 * libcudart to load and a CPU-only program runs where it is absent. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_cuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <unistd.h>

/* The runtime calls made here, resolved by name in the CUDA runtime of the release built
 * against (RINGK_CUDART_SONAME, found by the loader's path or in RINGK_CUDART_DIR). */
#define RINGK_CUDART_CALLS(X) \
    X(cudaGetDevice) X(cudaSetDevice) X(cudaGetDeviceCount) X(cudaDeviceGetPCIBusId) \
    X(cudaDeviceGetByPCIBusId) X(cudaDeviceCanAccessPeer) X(cudaDeviceEnablePeerAccess) \
    X(cudaGetErrorString) X(cudaGetLastError) X(cudaPointerGetAttributes) \
    X(cudaIpcGetMemHandle) X(cudaIpcOpenMemHandle) X(cudaIpcCloseMemHandle) \
    X(cudaMalloc) X(cudaFree) X(cudaMallocHost) X(cudaFreeHost) X(cudaMemset) X(cudaMemcpy) \
    X(cudaMemcpyAsync) X(cudaMemcpyPeer) X(cudaStreamSynchronize) X(cudaStreamCreateWithFlags) \
    X(cudaThreadExchangeStreamCaptureMode)

static struct {
#define RINGK_CUDART_MEMBER(f) __typeof__(&f) f;
    RINGK_CUDART_CALLS(RINGK_CUDART_MEMBER)
#undef RINGK_CUDART_MEMBER
} rt;

static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static int            rt_loaded;          /* every call of rt resolved */
static char           rt_why[256];        /* why not */

static void cudart_open(void)
{
    void *lib = dlopen(RINGK_CUDART_SONAME, RTLD_NOW | RTLD_GLOBAL);
    const char *missing = NULL;

    if (lib == NULL) {
        lib = dlopen(RINGK_CUDART_DIR "/" RINGK_CUDART_SONAME, RTLD_NOW | RTLD_GLOBAL);
    }
    if (lib == NULL) {
        snprintf(rt_why, sizeof(rt_why), "the CUDA runtime " RINGK_CUDART_SONAME " cannot be "
                 "loaded (not in the loader's path nor in " RINGK_CUDART_DIR ")");
        return;
    }
#define RINGK_CUDART_RESOLVE(f) \
    if ((missing == NULL) && ((*(void**)&rt.f = dlsym(lib, #f)) == NULL)) { \
        missing = #f; \
    }
    RINGK_CUDART_CALLS(RINGK_CUDART_RESOLVE)
#undef RINGK_CUDART_RESOLVE
    if (missing != NULL) {
        snprintf(rt_why, sizeof(rt_why), "the CUDA runtime " RINGK_CUDART_SONAME " has no %s",
                 missing);
        return; /* the library stays loaded: CUDA unloads badly */
    }
    __atomic_store_n(&rt_loaded, 1, __ATOMIC_RELEASE);
}

/* Loads the CUDA runtime once: 1 when its calls can be made, else 0 with the reason in @a why
 * (may be NULL). */
static int cudart(char *why, size_t why_len)
{
    pthread_once(&rt_once, cudart_open);
    if (__atomic_load_n(&rt_loaded, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    if (why != NULL) {
        snprintf(why, why_len, "%s", rt_why);
    }
    return 0;
}

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
    if (((err = rt.cudaGetDevice(&dev)) != cudaSuccess) ||
        ((err = rt.cudaDeviceGetPCIBusId(busid, (int)len, dev)) != cudaSuccess)) {
        snprintf(why, why_len, "the current CUDA device: %s", rt.cudaGetErrorString(err));
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
    if (rt.cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        rt.cudaGetLastError(); /* a host pointer the driver never saw */
        return 0;
    }
    if (attr.type != cudaMemoryTypeDevice) {
        return 0;
    }
    if ((busid != NULL) && (rt.cudaDeviceGetPCIBusId(busid, (int)len, attr.device) != cudaSuccess)) {
        rt.cudaGetLastError();
        busid[0] = '\0';
    }
    return 1;
}

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
        (rt.cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) ||
        (ringk_cu_range_on(attr.device, ptr, &base, &size, why, sizeof(why)) != 0)) {
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

    if (!cudart(why, why_len)) {
        return -ENODEV;
    }
    ret = ringk_cu_load(why, why_len);
    if (ret != 0) {
        return ret;
    }
    /* the pointer's device, for the calls that follow, given back after */
    if ((rt.cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) ||
        (attr.type != cudaMemoryTypeDevice)) {
        rt.cudaGetLastError();
        snprintf(why, why_len, "%p is not device memory", ptr);
        return -EINVAL;
    }
    if ((rt.cudaGetDevice(&current) == cudaSuccess) && (current != attr.device) &&
        (rt.cudaSetDevice(attr.device) != cudaSuccess)) {
        snprintf(why, why_len, "rt.cudaSetDevice(%d): %s", attr.device,
                 rt.cudaGetErrorString(rt.cudaGetLastError()));
        return -EIO;
    }
    if (ringk_cu_range_on(attr.device, ptr, &base, &size, why, why_len) != 0) {
        ret = -EINVAL;
    } else if (rt.cudaIpcGetMemHandle(&h, (void*)(uintptr_t)base) != cudaSuccess) {
        /* e.g. memory from cudaMallocAsync pools or cuMemCreate */
        snprintf(why, why_len, "rt.cudaIpcGetMemHandle(0x%llx): %s", base,
                 rt.cudaGetErrorString(rt.cudaGetLastError()));
        ret = -EOPNOTSUPP;
    }
    if ((current >= 0) && (current != attr.device)) {
        rt.cudaSetDevice(current);
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
    struct cudaPointerAttributes attr;
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
    err = rt.cudaIpcOpenMemHandle(mapped_p, h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        rt.cudaGetLastError();
        snprintf(why, why_len, "cudaIpcOpenMemHandle: %s", rt.cudaGetErrorString(err));
        return -EIO;
    }
    /* the peer's word for the allocation's size is checked against the mapping itself */
    ret = ringk_cu_load(why, why_len);
    if ((ret == 0) && (rt.cudaPointerGetAttributes(&attr, *mapped_p) != cudaSuccess)) {
        rt.cudaGetLastError();
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
        rt.cudaIpcCloseMemHandle(*mapped_p);
        *mapped_p = NULL;
        return ret;
    }
    return 0;
}

void ringk_cuda_ipc_close(void *mapped)
{
    if (cudart(NULL, 0)) { /* it was opened: loaded */
        rt.cudaIpcCloseMemHandle(mapped);
    }
}

/* The process's copy streams, one per device, made at the first copy on it and kept: a stream
 * per thread (cudaStreamPerThread) would make a stream for each new thread, and a stream made
 * while device kernels are resident may be given the hardware queue one of them holds, behind
 * which it waits for ever (docs/gpu.md, "Hardware queues and streams"). */
#define RINGK_CUDA_COPY_STREAMS 16
static struct {
    pthread_mutex_t mu;
    cudaStream_t    s[RINGK_CUDA_COPY_STREAMS];
} copy_streams = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The copy stream of the calling thread's current device: 0 with it in *@a s, or the error. */
static cudaError_t copy_stream(cudaStream_t *s)
{
    cudaError_t err;
    int dev = 0;

    if ((err = rt.cudaGetDevice(&dev)) != cudaSuccess) {
        return err;
    }
    if ((dev < 0) || (dev >= RINGK_CUDA_COPY_STREAMS)) {
        *s = cudaStreamPerThread; /* a device past those of any machine ringk knows */
        return cudaSuccess;
    }
    pthread_mutex_lock(&copy_streams.mu);
    if (copy_streams.s[dev] == NULL) {
        err = rt.cudaStreamCreateWithFlags(&copy_streams.s[dev], cudaStreamNonBlocking);
    }
    *s = copy_streams.s[dev];
    pthread_mutex_unlock(&copy_streams.mu);
    return err;
}

/* The calling thread in relaxed stream capture mode: a capture the program makes in another
 * thread (global mode, the default) neither forbids ringk's calls nor is invalidated by them.
 * Returns the mode before, for capture_end(). */
static enum cudaStreamCaptureMode capture_relax(void)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;

    rt.cudaThreadExchangeStreamCaptureMode(&mode);
    return mode;
}

static void capture_end(enum cudaStreamCaptureMode mode)
{
    rt.cudaThreadExchangeStreamCaptureMode(&mode);
}

int ringk_cuda_copy(void *dst, const void *src, size_t len, char *why, size_t why_len)
{
    enum cudaStreamCaptureMode mode;
    cudaStream_t s = NULL;
    cudaError_t err;

    if (!cudart(why, why_len)) {
        return -EIO;
    }
    /* cudaMemcpy may return before a device-to-device or pageable host-to-device copy has
     * landed: the copy goes on the device's copy stream, which is then waited for. */
    mode = capture_relax();
    err  = copy_stream(&s);
    if (err == cudaSuccess) {
        err = rt.cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, s);
    }
    if (err == cudaSuccess) {
        err = rt.cudaStreamSynchronize(s);
    }
    capture_end(mode);
    if (err != cudaSuccess) {
        rt.cudaGetLastError(); /* not left for the application's next error check */
        snprintf(why, why_len, "rt.cudaMemcpy(%p <- %p, %zu): %s", dst, src, len,
                 rt.cudaGetErrorString(err));
        return -EIO;
    }
    return 0;
}

void *ringk_cuda_host_alloc(size_t len)
{
    enum cudaStreamCaptureMode mode;
    void *ptr = NULL;

    if (cudart(NULL, 0)) {
        mode = capture_relax();
        if (rt.cudaMallocHost(&ptr, len) != cudaSuccess) {
            rt.cudaGetLastError();
            ptr = NULL;
        }
        capture_end(mode);
    }
    return ptr;
}

void ringk_cuda_host_free(void *ptr)
{
    enum cudaStreamCaptureMode mode;

    if (cudart(NULL, 0)) { /* it was allocated: loaded */
        mode = capture_relax();
        rt.cudaFreeHost(ptr);
        capture_end(mode);
    }
}

int ringk_cuda_device_count(char *why, size_t why_len)
{
    cudaError_t err;
    int n = 0;

    if (!cudart(why, why_len)) {
        return 0;
    }
    err = rt.cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s", rt.cudaGetErrorString(err));
        return 0;
    }
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device");
    }
    return n;
}

#define CANARY_WORDS 4096

/* Lets device @a dev_a reach @a dev_b's memory (leaves @a dev_a current): 0, or -EPERM. */
static int canary_peer_enable(int dev_a, int dev_b, char *why, size_t why_len)
{
    cudaError_t err;
    int can = 0;

    if ((rt.cudaDeviceCanAccessPeer(&can, dev_a, dev_b) != cudaSuccess) || !can) {
        snprintf(why, why_len, "cudaDeviceCanAccessPeer(%d, %d) says no", dev_a, dev_b);
        return -EPERM;
    }
    rt.cudaSetDevice(dev_a);
    err = rt.cudaDeviceEnablePeerAccess(dev_b, 0);
    if ((err != cudaSuccess) && (err != cudaErrorPeerAccessAlreadyEnabled)) {
        snprintf(why, why_len, "cudaDeviceEnablePeerAccess(%d -> %d): %s", dev_a, dev_b,
                 rt.cudaGetErrorString(err));
        return -EPERM;
    }
    rt.cudaGetLastError(); /* clear an 'already enabled' */
    return 0;
}

int ringk_cuda_p2p_canary(const char *busid_a, const char *busid_b, char *why, size_t why_len)
{
    uint32_t *host = NULL, *back = NULL, *mem_b = NULL, *mem_a = NULL;
    int dev_a, dev_b, ret = -EIO, i, caller = 0, n;
    cudaError_t err;

    if ((n = ringk_cuda_resident(-1)) > 0) {
        snprintf(why, why_len, "this process has %d ringk device kernels on its GPUs: the "
                 "canary's allocations would wait for them", n);
        return -EBUSY;
    }
    if (!cudart(why, why_len)) {
        return -ENODEV;
    }
    rt.cudaGetDevice(&caller); /* the caller's current device is given back at the end */

    if ((rt.cudaDeviceGetByPCIBusId(&dev_a, busid_a) != cudaSuccess) ||
        (rt.cudaDeviceGetByPCIBusId(&dev_b, busid_b) != cudaSuccess)) {
        snprintf(why, why_len, "no CUDA device at %s or %s", busid_a, busid_b);
        return -ENODEV;
    }
    if ((dev_a != dev_b) && (canary_peer_enable(dev_a, dev_b, why, why_len) != 0)) {
        rt.cudaSetDevice(caller);
        return -EPERM;
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
    if (((err = rt.cudaSetDevice(dev_b)) != cudaSuccess) ||
        ((err = rt.cudaMalloc((void**)&mem_b, CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = rt.cudaMemset(mem_b, 0, CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = rt.cudaSetDevice(dev_a)) != cudaSuccess) ||
        ((err = rt.cudaMalloc((void**)&mem_a, CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = rt.cudaMemcpy(mem_a, host, CANARY_WORDS * sizeof(*host),
                           cudaMemcpyHostToDevice)) != cudaSuccess) ||
        ((err = rt.cudaMemcpyPeer(mem_b, dev_b, mem_a, dev_a,
                               CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = rt.cudaMemset(mem_a, 0, CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = rt.cudaMemcpyPeer(mem_a, dev_a, mem_b, dev_b,
                               CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = rt.cudaMemcpy(back, mem_a, CANARY_WORDS * sizeof(*back),
                           cudaMemcpyDeviceToHost)) != cudaSuccess)) {
        snprintf(why, why_len, "canary %s -> %s: %s", busid_a, busid_b, rt.cudaGetErrorString(err));
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
        rt.cudaSetDevice(dev_a);
        rt.cudaFree(mem_a);
    }
    if (mem_b != NULL) {
        rt.cudaSetDevice(dev_b);
        rt.cudaFree(mem_b);
    }
    free(back);
    free(host);
    rt.cudaSetDevice(caller);
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

/* libringk's count of its device kernels, where the process has libringk: a weak reference
 * (the transport is loaded into programs without it), resolved when this library is loaded;
 * else looked up when asked, for a libringk loaded later or with RTLD_LOCAL. */
extern int ringk_device_kernels(int device) __attribute__((weak, visibility("default")));

typedef int (*ringk_kernels_fn_t)(int device);

static ringk_kernels_fn_t ringk_kernels_fn(void)
{
    static ringk_kernels_fn_t found; /* once found, kept: libringk is not unloaded under it */
    ringk_kernels_fn_t fn = __atomic_load_n(&found, __ATOMIC_ACQUIRE);
    void *lib;

    if (fn == NULL) {
        fn = ringk_device_kernels;
    }
    if ((fn == NULL) && ((lib = dlopen("libringk.so.1", RTLD_LAZY | RTLD_NOLOAD)) != NULL)) {
        *(void**)&fn = dlsym(lib, "ringk_device_kernels");
        dlclose(lib);
    }
    if (fn != NULL) {
        __atomic_store_n(&found, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

int ringk_cuda_resident(int dev)
{
    ringk_kernels_fn_t fn = ringk_kernels_fn();
    int d, n = 0;

    if (fn == NULL) {
        return 0;
    }
    if (dev >= 0) {
        return fn(dev);
    }
    for (d = 0; d < RINGK_CUDA_DEVICES_MAX; d++) {
        n += fn(d);
    }
    return n;
}

/* Pinned staging buffers given back while device kernels were resident, for the next taker. */
#define RINGK_CUDA_STAGE_SPARES 8
static struct {
    pthread_mutex_t mu;
    void           *p[RINGK_CUDA_STAGE_SPARES];
    size_t          len[RINGK_CUDA_STAGE_SPARES];
} stage_spares = {.mu = PTHREAD_MUTEX_INITIALIZER};

void *ringk_cuda_stage_get(size_t len, int *pinned_p)
{
    void *p = NULL;
    unsigned i;

    pthread_mutex_lock(&stage_spares.mu);
    for (i = 0; (i < RINGK_CUDA_STAGE_SPARES) && (p == NULL); i++) {
        if ((stage_spares.p[i] != NULL) && (stage_spares.len[i] >= len)) {
            p                 = stage_spares.p[i];
            stage_spares.p[i] = NULL;
        }
    }
    pthread_mutex_unlock(&stage_spares.mu);
    if ((p == NULL) && (ringk_cuda_resident(-1) == 0)) {
        p = ringk_cuda_host_alloc(len);
    }
    *pinned_p = (p != NULL);
    return (p != NULL) ? p : malloc(len);
}

void ringk_cuda_stage_put(void *p, size_t len, int pinned)
{
    unsigned i;

    if ((p == NULL) || !pinned) {
        free(p);
        return;
    }
    if (ringk_cuda_resident(-1) == 0) {
        ringk_cuda_host_free(p);
        return;
    }
    pthread_mutex_lock(&stage_spares.mu);
    for (i = 0; (i < RINGK_CUDA_STAGE_SPARES) && (p != NULL); i++) {
        if (stage_spares.p[i] == NULL) {
            stage_spares.p[i]   = p;
            stage_spares.len[i] = len;
            p                   = NULL;
        }
    }
    pthread_mutex_unlock(&stage_spares.mu);
    /* more spares than places: kept until the process exits (a free would wait) */
}

#define RINGK_CU_ERROR_NOT_INITIALIZED 3 /* CUDA_ERROR_NOT_INITIALIZED: no cuInit yet */

int ringk_cuda_driver_initialized(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    int (*count)(int *n);
    int n, ret = 1;

    if (lib == NULL) {
        return 0;
    }
    *(void**)&count = dlsym(lib, "cuDeviceGetCount");
    if ((count != NULL) && (count(&n) == RINGK_CU_ERROR_NOT_INITIALIZED)) {
        ret = 0;
    }
    dlclose(lib);
    return ret;
}

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
