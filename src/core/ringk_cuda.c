/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: device count, pointer queries, copies, staging buffers and the P2P
 * canary, through the CUDA runtime loaded when first needed (dlopen), so that neither library
 * needs libcudart to load and a CPU-only program runs where it is absent. CUDA IPC is in
 * ringk_cuda_ipc.c. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_cuda.h"
#include "ringk_cuda_rt.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <unistd.h>

/* the runtime's calls (ringk_cuda_rt.h), resolved by cudart_open() */
ringk_cudart_t ringk_rt;

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
    if ((missing == NULL) && ((*(void**)&ringk_rt.f = dlsym(lib, #f)) == NULL)) { \
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
int ringk_cudart(char *why, size_t why_len)
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
    if (((err = ringk_rt.cudaGetDevice(&dev)) != cudaSuccess) ||
        ((err = ringk_rt.cudaDeviceGetPCIBusId(busid, (int)len, dev)) != cudaSuccess)) {
        snprintf(why, why_len, "the current CUDA device: %s", ringk_rt.cudaGetErrorString(err));
        return -ENODEV;
    }
    snprintf(why, why_len, "the current CUDA device %d", dev);
    return 0;
}

/* Whether a usable driver exists, asked once: pointer queries are on data paths. */
int ringk_cuda_usable_cached(void)
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
    if (ringk_rt.cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        ringk_rt.cudaGetLastError(); /* a host pointer the driver never saw */
        return 0;
    }
    if (attr.type != cudaMemoryTypeDevice) {
        return 0;
    }
    if ((busid != NULL) &&
        (ringk_rt.cudaDeviceGetPCIBusId(busid, (int)len, attr.device) != cudaSuccess)) {
        ringk_rt.cudaGetLastError();
        busid[0] = '\0';
    }
    return 1;
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

/* The copy stream of device @a dev (the calling thread's current device for -1): 0 with it in
 * *@a s, or the error. */
cudaError_t ringk_cuda_copy_stream(int dev, cudaStream_t *s)
{
    cudaError_t err = cudaSuccess;
    int cur = 0;

    if ((dev < 0) && ((err = ringk_rt.cudaGetDevice(&dev)) != cudaSuccess)) {
        return err;
    }
    if (dev >= RINGK_CUDA_COPY_STREAMS) {
        *s = cudaStreamPerThread; /* a device past those of any machine ringk knows */
        return cudaSuccess;
    }
    pthread_mutex_lock(&copy_streams.mu);
    if (copy_streams.s[dev] == NULL) {
        ringk_rt.cudaGetDevice(&cur);
        if ((cur == dev) || ((err = ringk_rt.cudaSetDevice(dev)) == cudaSuccess)) {
            err = ringk_rt.cudaStreamCreateWithFlags(&copy_streams.s[dev],
                                                     cudaStreamNonBlocking);
            ringk_rt.cudaSetDevice(cur);
        }
    }
    *s = copy_streams.s[dev];
    pthread_mutex_unlock(&copy_streams.mu);
    return err;
}

/* The calling thread in relaxed stream capture mode: a capture the program makes in another
 * thread (global mode, the default) neither forbids ringk's calls nor is invalidated by them.
 * Returns the mode before, for ringk_cuda_capture_end(). */
enum cudaStreamCaptureMode ringk_cuda_capture_relax(void)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;

    ringk_rt.cudaThreadExchangeStreamCaptureMode(&mode);
    return mode;
}

void ringk_cuda_capture_end(enum cudaStreamCaptureMode mode)
{
    ringk_rt.cudaThreadExchangeStreamCaptureMode(&mode);
}

int ringk_cuda_copy(void *dst, const void *src, size_t len, char *why, size_t why_len)
{
    char ignored[64];
    int dev = -1;

    /* on the stream of the GPU the device memory is on (dst's, else src's): not a stream, or a
     * context, of whatever GPU the calling thread has current */
    if (ringk_cudart(NULL, 0) &&
        (ringk_cuda_ptr_device(dst, &dev, ignored, sizeof(ignored)) != 0) &&
        (ringk_cuda_ptr_device(src, &dev, ignored, sizeof(ignored)) != 0)) {
        dev = -1;
    }
    return ringk_cuda_copy_on(dev, dst, src, len, why, why_len);
}

int ringk_cuda_copy_on(int dev, void *dst, const void *src, size_t len, char *why,
                       size_t why_len)
{
    enum cudaStreamCaptureMode mode;
    cudaStream_t s = NULL;
    cudaError_t err;

    if (!ringk_cudart(why, why_len)) {
        return -EIO;
    }
    /* cudaMemcpy may return before a device-to-device or pageable host-to-device copy has
     * landed: the copy goes on the device's copy stream, which is then waited for. */
    mode = ringk_cuda_capture_relax();
    err  = ringk_cuda_copy_stream(dev, &s);
    if (err == cudaSuccess) {
        err = ringk_rt.cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, s);
    }
    if (err == cudaSuccess) {
        err = ringk_rt.cudaStreamSynchronize(s);
    }
    ringk_cuda_capture_end(mode);
    if (err != cudaSuccess) {
        ringk_rt.cudaGetLastError(); /* not left for the application's next error check */
        snprintf(why, why_len, "cudaMemcpy(%p <- %p, %zu): %s", dst, src, len,
                 ringk_rt.cudaGetErrorString(err));
        return -EIO;
    }
    return 0;
}

void *ringk_cuda_host_alloc(size_t len)
{
    enum cudaStreamCaptureMode mode;
    void *ptr = NULL;

    if (ringk_cudart(NULL, 0)) {
        mode = ringk_cuda_capture_relax();
        if (ringk_rt.cudaMallocHost(&ptr, len) != cudaSuccess) {
            ringk_rt.cudaGetLastError();
            ptr = NULL;
        }
        ringk_cuda_capture_end(mode);
    }
    return ptr;
}

void ringk_cuda_host_free(void *ptr)
{
    enum cudaStreamCaptureMode mode;

    if (ringk_cudart(NULL, 0)) { /* it was allocated: loaded */
        mode = ringk_cuda_capture_relax();
        ringk_rt.cudaFreeHost(ptr);
        ringk_cuda_capture_end(mode);
    }
}

/* Host mappings given back while device kernels were resident: unregistered and unmapped by
 * the next flush after none is (ringk_cuda_host_flush), most recent first. */
typedef struct host_deferred {
    struct host_deferred *next;
    void                 *ptr, *map;
    size_t                map_len;
} host_deferred_t;

static pthread_mutex_t  host_deferred_mu = PTHREAD_MUTEX_INITIALIZER;
static host_deferred_t *host_deferred;
static size_t           host_ndeferred;

int ringk_cuda_host_register(void *ptr, size_t len)
{
    enum cudaStreamCaptureMode mode;
    int pinned = 0;

    if (ringk_cudart(NULL, 0) && ringk_cuda_driver_initialized() &&
        (ringk_cuda_resident(-1) == 0)) {
        if (__atomic_load_n(&host_ndeferred, __ATOMIC_RELAXED) > 0) {
            ringk_cuda_host_flush(); /* what releases left while kernels ran */
        }
        mode   = ringk_cuda_capture_relax();
        pinned = (ringk_rt.cudaHostRegister(ptr, len, cudaHostRegisterDefault) == cudaSuccess);
        if (!pinned) {
            ringk_rt.cudaGetLastError();
        }
        ringk_cuda_capture_end(mode);
    }
    return pinned;
}

int ringk_cuda_host_unregister(void *ptr)
{
    enum cudaStreamCaptureMode mode;
    int cur = -1, pushed = -1;

    if (!ringk_cudart(NULL, 0)) {
        return 0;
    }
    if (ringk_cuda_resident(-1) > 0) {
        return -EBUSY; /* as cudaIpcCloseMemHandle, it may wait for the device's work */
    }
    /* made on a thread whose current device has no context (a device proxy, say), the call
     * would give that device one: the context of a device that has one is pushed for it */
    if (ringk_rt.cudaGetDevice(&cur) != cudaSuccess) {
        ringk_rt.cudaGetLastError(); /* only its own error: the application's stays */
    } else if (ringk_cuda_ctx_exists(cur) != 1) {
        pushed = ringk_cuda_ctx_push_existing();
    }
    mode = ringk_cuda_capture_relax();
    if (ringk_rt.cudaHostUnregister(ptr) != cudaSuccess) {
        ringk_rt.cudaGetLastError(); /* not left for the application's next error check */
    }
    ringk_cuda_capture_end(mode);
    if (pushed >= 0) {
        ringk_cuda_ctx_pop(pushed);
    }
    return 0;
}

int ringk_cuda_host_release(void *ptr, void *map, size_t map_len)
{
    host_deferred_t *d;

    if (__atomic_load_n(&host_ndeferred, __ATOMIC_RELAXED) > 0) {
        ringk_cuda_host_flush(); /* what earlier calls left, where no kernel is resident now */
    }
    if (ringk_cuda_host_unregister(ptr) == 0) {
        munmap(map, map_len);
        return 1;
    }
    d = malloc(sizeof(*d));
    if (d == NULL) {
        return -ENOMEM; /* mapped for good: unmapped, pages CUDA still holds could come back */
    }
    d->ptr     = ptr;
    d->map     = map;
    d->map_len = map_len;
    pthread_mutex_lock(&host_deferred_mu);
    d->next       = host_deferred;
    host_deferred = d;
    __atomic_add_fetch(&host_ndeferred, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&host_deferred_mu);
    return 0;
}

size_t ringk_cuda_host_flush(void)
{
    host_deferred_t *list, *d;
    size_t n = 0;

    if (ringk_cuda_resident(-1) > 0) {
        return 0;
    }
    pthread_mutex_lock(&host_deferred_mu);
    list          = host_deferred;
    host_deferred = NULL;
    __atomic_store_n(&host_ndeferred, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&host_deferred_mu);
    while ((d = list) != NULL) {
        list = d->next;
        if (ringk_cuda_host_unregister(d->ptr) == 0) {
            munmap(d->map, d->map_len);
            free(d);
            n++;
        } else { /* a kernel came meanwhile: later */
            pthread_mutex_lock(&host_deferred_mu);
            d->next       = host_deferred;
            host_deferred = d;
            __atomic_add_fetch(&host_ndeferred, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&host_deferred_mu);
        }
    }
    return n;
}

size_t ringk_cuda_host_deferred(void)
{
    return __atomic_load_n(&host_ndeferred, __ATOMIC_RELAXED); /* a hint for pollers */
}

int ringk_cuda_device_count(char *why, size_t why_len)
{
    cudaError_t err;
    int n = 0;

    if (!ringk_cudart(why, why_len)) {
        return 0;
    }
    err = ringk_rt.cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s", ringk_rt.cudaGetErrorString(err));
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

    if ((ringk_rt.cudaDeviceCanAccessPeer(&can, dev_a, dev_b) != cudaSuccess) || !can) {
        snprintf(why, why_len, "cudaDeviceCanAccessPeer(%d, %d) says no", dev_a, dev_b);
        return -EPERM;
    }
    ringk_rt.cudaSetDevice(dev_a);
    err = ringk_rt.cudaDeviceEnablePeerAccess(dev_b, 0);
    if ((err != cudaSuccess) && (err != cudaErrorPeerAccessAlreadyEnabled)) {
        snprintf(why, why_len, "cudaDeviceEnablePeerAccess(%d -> %d): %s", dev_a, dev_b,
                 ringk_rt.cudaGetErrorString(err));
        return -EPERM;
    }
    ringk_rt.cudaGetLastError(); /* clear an 'already enabled' */
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
    if (!ringk_cudart(why, why_len)) {
        return -ENODEV;
    }
    ringk_rt.cudaGetDevice(&caller); /* the caller's current device is given back at the end */

    if ((ringk_rt.cudaDeviceGetByPCIBusId(&dev_a, busid_a) != cudaSuccess) ||
        (ringk_rt.cudaDeviceGetByPCIBusId(&dev_b, busid_b) != cudaSuccess)) {
        snprintf(why, why_len, "no CUDA device at %s or %s", busid_a, busid_b);
        return -ENODEV;
    }
    if ((dev_a != dev_b) && (canary_peer_enable(dev_a, dev_b, why, why_len) != 0)) {
        ringk_rt.cudaSetDevice(caller);
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
    if (((err = ringk_rt.cudaSetDevice(dev_b)) != cudaSuccess) ||
        ((err = ringk_rt.cudaMalloc((void**)&mem_b, CANARY_WORDS * sizeof(*mem_b))) !=
         cudaSuccess) ||
        ((err = ringk_rt.cudaMemset(mem_b, 0, CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = ringk_rt.cudaSetDevice(dev_a)) != cudaSuccess) ||
        ((err = ringk_rt.cudaMalloc((void**)&mem_a, CANARY_WORDS * sizeof(*mem_a))) !=
         cudaSuccess) ||
        ((err = ringk_rt.cudaMemcpy(mem_a, host, CANARY_WORDS * sizeof(*host),
                           cudaMemcpyHostToDevice)) != cudaSuccess) ||
        ((err = ringk_rt.cudaMemcpyPeer(mem_b, dev_b, mem_a, dev_a,
                               CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = ringk_rt.cudaMemset(mem_a, 0, CANARY_WORDS * sizeof(*mem_a))) != cudaSuccess) ||
        ((err = ringk_rt.cudaMemcpyPeer(mem_a, dev_a, mem_b, dev_b,
                               CANARY_WORDS * sizeof(*mem_b))) != cudaSuccess) ||
        ((err = ringk_rt.cudaMemcpy(back, mem_a, CANARY_WORDS * sizeof(*back),
                           cudaMemcpyDeviceToHost)) != cudaSuccess)) {
        snprintf(why, why_len, "canary %s -> %s: %s", busid_a, busid_b,
                 ringk_rt.cudaGetErrorString(err));
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
        ringk_rt.cudaSetDevice(dev_a);
        ringk_rt.cudaFree(mem_a);
    }
    if (mem_b != NULL) {
        ringk_rt.cudaSetDevice(dev_b);
        ringk_rt.cudaFree(mem_b);
    }
    free(back);
    free(host);
    ringk_rt.cudaSetDevice(caller);
    return ret;
}

#else /* !HAVE_CUDA */

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

int ringk_cuda_copy(void *dst, const void *src, size_t len, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -EIO;
}

int ringk_cuda_copy_on(int dev, void *dst, const void *src, size_t len, char *why,
                       size_t why_len)
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

int ringk_cuda_host_register(void *ptr, size_t len)
{
    return 0;
}

int ringk_cuda_host_unregister(void *ptr)
{
    return 0;
}

int ringk_cuda_host_release(void *ptr, void *map, size_t map_len)
{
    (void)ptr;
    munmap(map, map_len);
    return 1;
}

size_t ringk_cuda_host_flush(void)
{
    return 0;
}

size_t ringk_cuda_host_deferred(void)
{
    return 0;
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
