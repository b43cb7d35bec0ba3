/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API, part 3 (included by ringk_device.h): RINGK_DEVICE_ENTRY() and, under
 * nvcc, the CUDA runtime calls the executor makes for a device kernel, compiled in the
 * translation unit that defines the entry. */
#ifndef RINGK_API_RINGK_DEVICE_CUDA_H
#define RINGK_API_RINGK_DEVICE_CUDA_H

#ifndef RINGK_API_RINGK_DEVICE_H
#  error "include <ringk/api/ringk_device.h>, not this file"
#endif

#if defined(__CUDACC__)
#  include <sys/mman.h>
#  include <unistd.h>
/* The CUDA calls, once per translation unit that defines an entry (host code). */
#  define RINGK_CUDA_FN static
/* an error of a call: in @a why, and not left as the thread's last error (a later launch is
 * judged by cudaGetLastError) */
#  define RINGK_DEVICE_CUDA_WHY(err, what) \
    (cudaGetLastError(), snprintf(why, why_len, "%s: %s", what, cudaGetErrorString(err)), -EIO)
RINGK_CUDA_FN int ringk_cuda_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);

    if (err == cudaErrorNoDevice || (err == cudaSuccess && n == 0)) {
        snprintf(why, why_len, "no CUDA device");
        return -ENODEV;
    }
    if (err == cudaErrorInsufficientDriver) {
        int driver = 0; /* 0: the runtime found no driver at all */

        cudaGetLastError();
        cudaDriverGetVersion(&driver);
        if (driver == 0) {
            snprintf(why, why_len, "no NVIDIA driver (libcuda.so.1 not found)");
        } else {
            snprintf(why, why_len, "the NVIDIA driver supports CUDA %d.%d, older than the CUDA "
                     "runtime %d.%d this entry was built with", driver / 1000,
                     (driver % 1000) / 10, CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
        }
        return -ENODEV;
    }
    return (err == cudaSuccess) ? n : RINGK_DEVICE_CUDA_WHY(err, "cudaGetDeviceCount");
}
/* Makes @a device current for a call, then gives the caller's back (ringk_cuda_leave). */
RINGK_CUDA_FN int ringk_cuda_enter(int device, int *current, char *why, size_t why_len)
{
    cudaError_t err;

    *current = device;
    cudaGetDevice(current);
    if ((*current != device) && ((err = cudaSetDevice(device)) != cudaSuccess)) {
        return RINGK_DEVICE_CUDA_WHY(err, "cudaSetDevice");
    }
    return 0;
}
RINGK_CUDA_FN void ringk_cuda_leave(int device, int current)
{
    if (current != device) {
        cudaSetDevice(current);
    }
}
RINGK_CUDA_FN int ringk_cuda_alloc_device(int device, void **p, size_t bytes, char *why,
                                          size_t why_len)
{
    cudaError_t err;
    int current, ret = ringk_cuda_enter(device, &current, why, why_len);

    if (ret != 0) {
        return ret;
    }
    err = cudaMalloc(p, bytes);
    ringk_cuda_leave(device, current);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaMalloc");
}
RINGK_CUDA_FN int ringk_cuda_alloc_mapped(int device, void **host, void **dev, size_t bytes,
                                          char *why, size_t why_len)
{
    cudaError_t err;
    int current, ret = ringk_cuda_enter(device, &current, why, why_len);

    if (ret != 0) {
        return ret;
    }
    /* portable: pinned for every device's context, not only the current one's */
    err = cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess) {
        ringk_cuda_leave(device, current);
        return RINGK_DEVICE_CUDA_WHY(err, "cudaHostAlloc");
    }
    err = cudaHostGetDevicePointer(dev, *host, 0);
    if (err != cudaSuccess) {
        cudaFreeHost(*host);
    }
    ringk_cuda_leave(device, current);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaHostGetDevicePointer");
}
RINGK_CUDA_FN int ringk_cuda_copy_to_device(int device, void *dst, const void *src, size_t bytes,
                                            void *stream, char *why, size_t why_len)
{
    cudaError_t err;
    int current, ret = ringk_cuda_enter(device, &current, why, why_len);

    if (ret != 0) {
        return ret;
    }
    err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream);
    if (err == cudaSuccess) {
        err = cudaStreamSynchronize((cudaStream_t)stream);
    }
    ringk_cuda_leave(device, current);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaMemcpyAsync");
}
RINGK_CUDA_FN int ringk_cuda_stream_create(int device, void **stream, char *why, size_t why_len)
{
    cudaError_t err;
    int current, ret = ringk_cuda_enter(device, &current, why, why_len);

    if (ret != 0) {
        return ret;
    }
    /* non-blocking: it never synchronizes with the legacy NULL stream (docs/gpu.md) */
    err = cudaStreamCreateWithFlags((cudaStream_t*)stream, cudaStreamNonBlocking);
    ringk_cuda_leave(device, current);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaStreamCreateWithFlags");
}
/* Whether @a err ends the context: an error of a kernel that faulted, after which every call of
 * the process on the device fails the same way (docs/gpu.md, "Faults and stream capture"). */
RINGK_CUDA_FN int ringk_cuda_sticky(cudaError_t err)
{
    switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorMisalignedAddress:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorNvlinkUncorrectable:
        return 1;
    default:
        return 0;
    }
}
RINGK_CUDA_FN int ringk_cuda_stream_status(void *stream, char *why, size_t why_len)
{
    cudaError_t err = cudaStreamQuery((cudaStream_t)stream);

    if (err == cudaErrorNotReady) {
        cudaGetLastError(); /* not left as this thread's last error for its next launch check */
        return 0;
    }
    if (err != cudaSuccess) {
        RINGK_DEVICE_CUDA_WHY(err, "the device kernel's stream");
        return ringk_cuda_sticky(err) ? -EIO : -EAGAIN;
    }
    return 1;
}
RINGK_CUDA_FN void ringk_cuda_capture_mode(int *mode)
{
    enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)*mode;

    cudaThreadExchangeStreamCaptureMode(&m);
    *mode = (int)m;
}
RINGK_CUDA_FN void ringk_cuda_free_device(int device, void *p)
{
    char why[8];
    int current;

    if (ringk_cuda_enter(device, &current, why, sizeof(why)) == 0) {
        cudaFree(p);
        ringk_cuda_leave(device, current);
    }
}
RINGK_CUDA_FN void ringk_cuda_free_mapped(void *host)
{
    cudaFreeHost(host);
}
RINGK_CUDA_FN void ringk_cuda_stream_destroy(void *stream)
{
    cudaStreamDestroy((cudaStream_t)stream);
}
/* Makes sure kernel @a fn is loaded in the current device's context (docs/gpu.md, "Loading
 * kernels and their stack"): cudaFuncGetAttributes may answer from the module's image without
 * loading the kernel, so where the driver can tell (cuFuncIsLoaded, CUDA 12.4) the kernel is
 * loaded with cuFuncLoad and its state checked. 0, or -EIO with the reason. */
RINGK_CUDA_FN int ringk_cuda_load_verify(const void *fn, char *why, size_t why_len)
{
#if CUDART_VERSION >= 12050
    typedef int (*is_loaded_t)(int *state, cudaFunction_t f);
    typedef int (*load_t)(cudaFunction_t f);
    enum cudaDriverEntryPointQueryResult found;
    is_loaded_t is_loaded = NULL;
    load_t load           = NULL;
    cudaFunction_t f;
    cudaError_t err;
    int state = 0, res;

    if ((cudaGetDriverEntryPointByVersion("cuFuncIsLoaded", (void**)&is_loaded, 12040,
                                          cudaEnableDefault, &found) != cudaSuccess) ||
        (found != cudaDriverEntryPointSuccess) ||
        (cudaGetDriverEntryPointByVersion("cuFuncLoad", (void**)&load, 12040, cudaEnableDefault,
                                          &found) != cudaSuccess) ||
        (found != cudaDriverEntryPointSuccess)) {
        cudaGetLastError(); /* a driver before 12.4: it loads at cudaFuncGetAttributes */
        return 0;
    }
    if ((err = cudaGetFuncBySymbol(&f, fn)) != cudaSuccess) {
        return RINGK_DEVICE_CUDA_WHY(err, "cudaGetFuncBySymbol");
    }
    if (((res = is_loaded(&state, f)) == 0) && (state != 1)) {
        if ((res = load(f)) == 0) {
            res = is_loaded(&state, f);
        }
    }
    if ((res != 0) || (state != 1)) {
        snprintf(why, why_len, "the kernel is not loaded on the device (cuFuncLoad: CUresult %d, "
                 "loading state %d)", res, state);
        return -EIO;
    }
#else
    (void)fn; (void)why; (void)why_len; /* before 12.5 the runtime loads at the query */
#endif
    return 0;
}
/* Loads kernel @a fn on @a device; localSizeBytes is the local memory, stack included, that
 * each of its threads needs. */
RINGK_CUDA_FN int ringk_cuda_load(const void *fn, int device, size_t *stack_need, char *why,
                                  size_t why_len)
{
    struct cudaFuncAttributes attr;
    cudaError_t err;
    int current, ret = ringk_cuda_enter(device, &current, why, why_len);

    if (ret != 0) {
        return ret;
    }
    err = cudaFuncGetAttributes(&attr, fn);
    if (err == cudaSuccess) {
        ret = ringk_cuda_load_verify(fn, why, why_len);
    }
    ringk_cuda_leave(device, current);
    if (err != cudaSuccess) {
        return RINGK_DEVICE_CUDA_WHY(err, "cudaFuncGetAttributes");
    }
    *stack_need = attr.localSizeBytes;
    return ret;
}
RINGK_CUDA_FN int ringk_cuda_stack_raise(int device, size_t need, size_t *limit, char *why,
                                         size_t why_len)
{
    cudaError_t err;
    int current, ret = ringk_cuda_enter(device, &current, why, why_len);

    if (ret != 0) {
        return ret;
    }
    err = cudaDeviceGetLimit(limit, cudaLimitStackSize);
    if ((err == cudaSuccess) && (need > *limit)) {
        err = cudaDeviceSetLimit(cudaLimitStackSize, need);
        if (err == cudaSuccess) {
            err = cudaDeviceGetLimit(limit, cudaLimitStackSize);
        }
    }
    ringk_cuda_leave(device, current);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "cudaLimitStackSize");
}
/* Whether @a p is in a mapping of this process (else it is no host memory: an integer in a
 * kernel's arg, say, that the handler never reads through). */
RINGK_CUDA_FN int ringk_cuda_mapped_here(const void *p)
{
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
    unsigned char vec;

    return (mincore((void*)page, 1, &vec) == 0) || (errno != ENOMEM);
}
/* Whether code on @a device reads through @a p, by CUDA's account @a a of it, taken with
 * @a device current (devicePointer: the address that device uses; NULL where it has none).
 * @a pageable: the device reads any host memory (cudaDevAttrPageableMemoryAccess: HMM or ATS);
 * @a host_ptr: it reads pinned memory at the host's address too
 * (cudaDevAttrCanUseHostPointerForRegisteredMem). 1, or 0 with the reason in @a why. */
RINGK_CUDA_FN int ringk_cuda_judge(int device, const void *p, const struct cudaPointerAttributes *a,
                                   int pageable, int host_ptr, char *why, size_t why_len)
{
    if (a->type == cudaMemoryTypeManaged) {
        return 1;
    }
    if (a->type == cudaMemoryTypeDevice) {
        if (a->device == device) {
            return 1;
        }
        snprintf(why, why_len, "arg %p is memory of CUDA device %d, not of device %d", p,
                 a->device, device);
    } else if (a->type == cudaMemoryTypeHost) {
        if ((a->devicePointer == p) || ((a->devicePointer != NULL) && host_ptr)) {
            return 1;
        }
        if (a->devicePointer == NULL) {
            snprintf(why, why_len, "arg %p is pinned host memory not mapped for CUDA device %d "
                     "(cudaHostAllocMapped or cudaHostRegisterMapped; Portable for every "
                     "device)", p, device);
        } else {
            snprintf(why, why_len, "arg %p is pinned host memory at its host address: CUDA "
                     "device %d reads it at %p (cudaHostGetDevicePointer)", p, device,
                     a->devicePointer);
        }
    } else if (pageable) {
        return 1;
    } else {
        snprintf(why, why_len, "arg %p is host memory that CUDA device %d cannot read (no "
                 "pageable memory access): give it memory from cudaHostAlloc (mapped), "
                 "cudaMallocManaged or cudaMalloc", p, device);
    }
    return 0;
}
/* Memory the device cannot read faults there, and a fault ends the process's whole CUDA
 * context, every resident kernel with it. None of the queries waits for running kernels. */
RINGK_CUDA_FN int ringk_cuda_reaches(int device, const void *p, char *why, size_t why_len)
{
    struct cudaPointerAttributes a;
    cudaError_t err;
    int current, pageable = 0, host_ptr = 0, ret = ringk_cuda_enter(device, &current, why,
                                                                      why_len);

    if (ret != 0) {
        return ret;
    }
    err = cudaPointerGetAttributes(&a, p);
    if (err == cudaSuccess) {
        err = cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device);
    }
    if (err == cudaSuccess) {
        err = cudaDeviceGetAttribute(&host_ptr, cudaDevAttrCanUseHostPointerForRegisteredMem,
                                     device);
    }
    ringk_cuda_leave(device, current);
    if (err != cudaSuccess) {
        return RINGK_DEVICE_CUDA_WHY(err, "the device kernel's arg: a CUDA query");
    }
    if ((a.type == cudaMemoryTypeUnregistered) && !ringk_cuda_mapped_here(p)) {
        return 0;
    }
    return ringk_cuda_judge(device, p, &a, pageable, host_ptr, why, why_len) ? 0 : -EFAULT;
}
/* Launches kernel @a fn (an entry's __global__) on @a device with @a blocks blocks of
 * @a threads threads: a kernel of several blocks cooperatively, which makes all of them
 * resident together (or fails) and lets them synchronize as a grid. */
RINGK_CUDA_FN int ringk_cuda_launch(const void *fn, const ringk_dev_kernel_t *src,
                                    ringk_dev_kernel_t *k, int device, void *stream,
                                    uint32_t threads, uint32_t blocks, char *why, size_t why_len)
{
    void *args[2] = {(void*)&src, (void*)&k};
    cudaError_t err;
    int current, ret = ringk_cuda_enter(device, &current, why, why_len);

    if (ret != 0) {
        return ret;
    }
    cudaGetLastError(); /* the launch's own error only, below */
    if (blocks > 1) {
        err = cudaLaunchCooperativeKernel(fn, dim3(blocks), dim3(threads), args, 0,
                                          (cudaStream_t)stream);
    } else {
        err = cudaLaunchKernel(fn, dim3(1), dim3(threads), args, 0, (cudaStream_t)stream);
    }
    if (err == cudaSuccess) {
        err = cudaGetLastError();
    }
    ringk_cuda_leave(device, current);
    return (err == cudaSuccess) ? 0 : RINGK_DEVICE_CUDA_WHY(err, "kernel launch");
}
/* How many blocks of @a threads threads of kernel @a fn @a device holds at once: its
 * occupancy (registers, shared memory) times its multiprocessors, 1 without cooperative
 * launches; and the most threads a block of @a fn may have. None of the queries waits for
 * running kernels (the kernel was loaded before the first device kernel started). */
RINGK_CUDA_FN int ringk_cuda_fit(const void *fn, int device, uint32_t threads,
                                 uint32_t *max_blocks, uint32_t *max_threads, char *why,
                                 size_t why_len)
{
    struct cudaFuncAttributes attr;
    int current, per_sm = 0, sms = 0, coop = 0, ret = ringk_cuda_enter(device, &current, why,
                                                                         why_len);
    cudaError_t err;

    if (ret != 0) {
        return ret;
    }
    err = cudaFuncGetAttributes(&attr, fn);
    if (err == cudaSuccess) {
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    }
    if (err == cudaSuccess) {
        err = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device);
    }
    if ((err == cudaSuccess) && (threads <= (uint32_t)attr.maxThreadsPerBlock)) {
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, (int)threads, 0);
    }
    ringk_cuda_leave(device, current);
    if (err != cudaSuccess) {
        return RINGK_DEVICE_CUDA_WHY(err, "the kernel's occupancy");
    }
    *max_threads = (uint32_t)attr.maxThreadsPerBlock;
    *max_blocks  = (uint32_t)per_sm * (uint32_t)sms;
    if (!coop && (*max_blocks > 1)) {
        *max_blocks = 1;
    }
    return 0;
}
/* RINGK_DEVICE_ENTRY() with the __global__'s attributes @a bounds (empty, or
 * __launch_bounds__(n)). */
#  define RINGK_DEVICE_ENTRY_IN(sym, handler, bounds) \
    __global__ void bounds sym##_ringk_global(const ringk_dev_kernel_t *src, \
                                              ringk_dev_kernel_t *k) \
    { \
        ringk_dev_launch_run(src, k, handler); \
    } \
    static int sym##_ringk_launch(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *k, \
                                  int device, void *stream, uint32_t threads, uint32_t blocks, \
                                  char *why, size_t why_len) \
    { \
        return ringk_cuda_launch((const void*)sym##_ringk_global, src, k, device, stream, \
                                 threads, blocks, why, why_len); \
    } \
    static int sym##_ringk_load(int device, size_t *stack_need, char *why, size_t why_len) \
    { \
        return ringk_cuda_load((const void*)sym##_ringk_global, device, stack_need, why, \
                               why_len); \
    } \
    static int sym##_ringk_fit(int device, uint32_t threads, uint32_t *max_blocks, \
                               uint32_t *max_threads, char *why, size_t why_len) \
    { \
        return ringk_cuda_fit((const void*)sym##_ringk_global, device, threads, max_blocks, \
                              max_threads, why, why_len); \
    } \
    static const ringk_device_cuda_ops_t sym##_ringk_ops = { \
        ringk_cuda_device_count, ringk_cuda_alloc_device, \
        ringk_cuda_alloc_mapped, ringk_cuda_copy_to_device, ringk_cuda_stream_create, \
        sym##_ringk_launch, ringk_cuda_stream_status, ringk_cuda_free_device, \
        ringk_cuda_free_mapped, ringk_cuda_stream_destroy, sym##_ringk_load, \
        ringk_cuda_stack_raise, ringk_cuda_reaches, ringk_cuda_capture_mode, sym##_ringk_fit \
    }; \
    extern "C" const ringk_device_entry_t sym = { \
        RINGK_DEVICE_ENTRY_MAGIC, RINGK_DEV_ABI, RINGK_DEVICE_ENTRY_CUDA, #sym, NULL, \
        &sym##_ringk_ops \
    }; \
    /* known to libringk while the program or library is loaded */ \
    __attribute__((constructor)) static void sym##_ringk_register(void) \
    { \
        ringk_device_entry_register(&sym); \
    } \
    __attribute__((destructor)) static void sym##_ringk_unregister(void) \
    { \
        ringk_device_entry_unregister(&sym); \
    } \
    extern "C" const ringk_device_entry_t sym
#  define RINGK_DEVICE_ENTRY(sym, handler) RINGK_DEVICE_ENTRY_IN(sym, handler, )
#  define RINGK_DEVICE_ENTRY_THREADS(sym, handler, n) \
    RINGK_DEVICE_ENTRY_IN(sym, handler, __launch_bounds__(n))
#elif !defined(RINGK_DEVICE_ENTRY) /* else the program brings its own (the tests' stand-in) */
/**
 * Defines the device kernel entry @a sym (a const ringk_device_entry_t, given to
 * ringk_kernel_create as params.device_entry) whose loop hands messages to @a handler, a
 * function of type ringk_dev_handler_t (__device__ under nvcc), run by every thread of the
 * kernel on each message. Compiled by nvcc, @a sym is a CUDA kernel launched with the kernel's
 * threads and blocks; compiled as host C, the same source runs on the emulated device (a
 * thread of the host per thread of the kernel).
 */
#  define RINGK_DEVICE_ENTRY(sym, handler) \
    static void sym##_ringk_run(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *k) \
    { \
        ringk_dev_launch_run(src, k, handler); \
    } \
    const ringk_device_entry_t sym = { \
        RINGK_DEVICE_ENTRY_MAGIC, RINGK_DEV_ABI, RINGK_DEVICE_ENTRY_EMULATED, #sym, \
        sym##_ringk_run, NULL \
    }
#endif
#ifndef RINGK_DEVICE_ENTRY_THREADS
/**
 * RINGK_DEVICE_ENTRY() for kernels of up to @a n threads a block: under nvcc the entry is
 * compiled with __launch_bounds__(@a n), so that the compiler keeps its registers per thread
 * within what a block of @a n threads may have (spilling the rest to local memory). Without it
 * the loop and the handler take as many registers as they like, and a block of the entry may
 * have fewer threads than 1024 (ringk_kernel_create() then says how many). Elsewhere it is
 * RINGK_DEVICE_ENTRY().
 */
#  define RINGK_DEVICE_ENTRY_THREADS(sym, handler, n) RINGK_DEVICE_ENTRY(sym, handler)
#endif

#endif
