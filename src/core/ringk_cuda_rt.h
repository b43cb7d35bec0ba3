/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers, inside: the CUDA runtime's calls as ringk_cuda.c loads them (dlopen), for
 * the files that wrap the runtime (ringk_cuda.c, ringk_cuda_ipc.c). Not for other callers. */
#ifndef RINGK_CUDA_RT_H
#define RINGK_CUDA_RT_H

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <stddef.h>

/* The runtime calls made, resolved by name in the CUDA runtime of the release built against
 * (RINGK_CUDART_SONAME, found by the loader's path or in RINGK_CUDART_DIR). */
#define RINGK_CUDART_CALLS(X) \
    X(cudaGetDevice) X(cudaSetDevice) X(cudaGetDeviceCount) X(cudaDeviceGetPCIBusId) \
    X(cudaDeviceGetByPCIBusId) X(cudaDeviceCanAccessPeer) X(cudaDeviceEnablePeerAccess) \
    X(cudaGetErrorString) X(cudaGetLastError) X(cudaPointerGetAttributes) \
    X(cudaIpcGetMemHandle) X(cudaIpcOpenMemHandle) X(cudaIpcCloseMemHandle) \
    X(cudaMalloc) X(cudaFree) X(cudaMallocHost) X(cudaFreeHost) X(cudaMemset) X(cudaMemcpy) \
    X(cudaMemcpyAsync) X(cudaMemcpyPeer) X(cudaStreamSynchronize) X(cudaStreamCreateWithFlags) \
    X(cudaThreadExchangeStreamCaptureMode) X(cudaDeviceDisablePeerAccess) \
    X(cudaDeviceGetP2PAttribute) X(cudaMemcpyPeerAsync) X(cudaLaunchHostFunc) \
    X(cudaEventCreateWithFlags) X(cudaEventRecord) X(cudaStreamWaitEvent) \
    X(cudaHostRegister) X(cudaHostUnregister) X(cudaStreamIsCapturing) \
    X(cudaEventDestroy) X(cudaHostGetDevicePointer)

typedef struct {
#define RINGK_CUDART_MEMBER(f) __typeof__(&f) f;
    RINGK_CUDART_CALLS(RINGK_CUDART_MEMBER)
#undef RINGK_CUDART_MEMBER
} ringk_cudart_t;

/* Valid once ringk_cudart() returned 1. */
extern ringk_cudart_t ringk_rt;

/* Loads the CUDA runtime once: 1 when its calls can be made, else 0 with the reason in @a why
 * (may be NULL). */
int ringk_cudart(char *why, size_t why_len);

/* ringk_cuda_usable(), asked once per process: pointer queries are on data paths. */
int ringk_cuda_usable_cached(void);

/* The copy stream of device @a dev (the calling thread's current device for -1), made at its
 * first use and kept: cudaSuccess with it in *@a s, or the error. */
cudaError_t ringk_cuda_copy_stream(int dev, cudaStream_t *s);

/* The calling thread in relaxed stream capture mode (a capture the program makes in another
 * thread neither forbids ringk's calls nor is invalidated by them), and back. */
enum cudaStreamCaptureMode ringk_cuda_capture_relax(void);
void ringk_cuda_capture_end(enum cudaStreamCaptureMode mode);

/* The CUDA device of device memory @a ptr in *@a dev_p: 0, or -EINVAL ("not device memory",
 * in @a why). The runtime must be loaded. */
int ringk_cuda_ptr_device(const void *ptr, int *dev_p, char *why, size_t why_len);
#endif

#define RINGK_NO_CUDA "built without CUDA"

#endif
