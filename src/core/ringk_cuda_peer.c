/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk CUDA wrappers: two GPUs of one process: device ordinals and bus ids, peer access, copies
 * between the devices by a chosen movement (one device's copy, the copy engine peer to peer,
 * or staged through pinned host buffers with ringk_stage.c's schedule), and their timing. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_cuda.h"
#include "ringk_cuda_rt.h"
#include "ringk_stage.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Leaves device @a dev current, the one before in *@a cur_p: 0, or -EIO. */
static int peer_set_device(int dev, int *cur_p, char *why, size_t why_len)
{
    cudaError_t err;

    *cur_p = dev;
    ringk_rt.cudaGetDevice(cur_p);
    if ((*cur_p != dev) && ((err = ringk_rt.cudaSetDevice(dev)) != cudaSuccess)) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "cudaSetDevice(%d): %s", dev, ringk_rt.cudaGetErrorString(err));
        return -EIO;
    }
    return 0;
}

int ringk_cuda_dev_busid(int dev, char *busid, size_t len, char *why, size_t why_len)
{
    cudaError_t err;
    int n;

    if (!ringk_cuda_usable(why, why_len)) {
        return -ENODEV;
    }
    n = ringk_cuda_device_count(why, why_len);
    if ((dev < 0) || (dev >= n)) {
        snprintf(why, why_len, "no CUDA device %d (this process sees %d)", dev, n);
        return -ENODEV;
    }
    if ((err = ringk_rt.cudaDeviceGetPCIBusId(busid, (int)len, dev)) != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "cudaDeviceGetPCIBusId(%d): %s", dev,
                 ringk_rt.cudaGetErrorString(err));
        return -ENODEV;
    }
    return 0;
}

int ringk_cuda_busid_dev(const char *busid, int *dev_p, char *why, size_t why_len)
{
    if (!ringk_cuda_usable_cached()) {
        ringk_cuda_usable(why, why_len);
        return -ENODEV;
    }
    if (ringk_rt.cudaDeviceGetByPCIBusId(dev_p, busid) != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "no CUDA device at %s", busid);
        return -ENODEV;
    }
    return 0;
}

int ringk_cuda_ptr_ordinal(const void *ptr, int *dev_p, char *why, size_t why_len)
{
    if (!ringk_cuda_usable_cached()) {
        ringk_cuda_usable(why, why_len);
        return -ENODEV;
    }
    return ringk_cuda_ptr_device(ptr, dev_p, why, why_len);
}

void *ringk_cuda_dev_alloc(int dev, size_t len, char *why, size_t why_len)
{
    enum cudaStreamCaptureMode mode;
    cudaError_t err;
    void *p = NULL;
    int cur;

    if (peer_set_device(dev, &cur, why, why_len) != 0) {
        return NULL;
    }
    mode = ringk_cuda_capture_relax();
    if ((err = ringk_rt.cudaMalloc(&p, len)) != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "cudaMalloc(%zu) on device %d: %s", len, dev,
                 ringk_rt.cudaGetErrorString(err));
        p = NULL;
    }
    ringk_cuda_capture_end(mode);
    ringk_rt.cudaSetDevice(cur);
    return p;
}

void ringk_cuda_dev_free(void *ptr)
{
    enum cudaStreamCaptureMode mode;

    if ((ptr != NULL) && ringk_cudart(NULL, 0)) {
        mode = ringk_cuda_capture_relax();
        ringk_rt.cudaFree(ptr);
        ringk_cuda_capture_end(mode);
    }
}

/* by device: bit p, peer access from it to device p is on (turned on here, or found so) */
static uint32_t peer_on[RINGK_CUDA_DEVICES_MAX];

static int peer_set(int dev, int peer, int enable, int check, char *why, size_t why_len);

int ringk_cuda_peer_set(int dev, int peer, int enable, char *why, size_t why_len)
{
    return peer_set(dev, peer, enable, 1, why, why_len);
}

int ringk_cuda_peer_set_idle(int dev, int peer, char *why, size_t why_len)
{
    return peer_set(dev, peer, 1, 0, why, why_len);
}

/* ringk_cuda_peer_set(), with the check that no ringk device kernel of @a dev exists where
 * @a check. */
static int peer_set(int dev, int peer, int enable, int check, char *why, size_t why_len)
{
    const int known = (dev >= 0) && (dev < RINGK_CUDA_DEVICES_MAX) && (peer >= 0) &&
                      (peer < RINGK_CUDA_DEVICES_MAX);
    cudaError_t err;
    int can = 0, cur, ret;

    if (enable && known && ((__atomic_load_n(&peer_on[dev], __ATOMIC_RELAXED) >> peer) & 1u)) {
        return 0; /* on already: no call on the device's context */
    }
    if (check && (ringk_cuda_resident(dev) > 0)) {
        snprintf(why, why_len, "device %d runs ringk device kernels, under which peer access "
                 "from it is not turned %s (the call may wait for them)", dev,
                 enable ? "on" : "off");
        return -EBUSY;
    }
    if (enable && ((ringk_rt.cudaDeviceCanAccessPeer(&can, dev, peer) != cudaSuccess) || !can)) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "cudaDeviceCanAccessPeer(%d, %d) says no", dev, peer);
        return -EPERM;
    }
    if ((ret = peer_set_device(dev, &cur, why, why_len)) != 0) {
        return ret;
    }
    err = enable ? ringk_rt.cudaDeviceEnablePeerAccess(peer, 0) :
                   ringk_rt.cudaDeviceDisablePeerAccess(peer);
    ringk_rt.cudaSetDevice(cur);
    if ((err == cudaErrorPeerAccessAlreadyEnabled) || (err == cudaErrorPeerAccessNotEnabled)) {
        ringk_rt.cudaGetLastError(); /* already so: not left for the application */
        err = cudaSuccess;
    }
    if (known && (err == cudaSuccess)) {
        if (enable) {
            __atomic_or_fetch(&peer_on[dev], 1u << peer, __ATOMIC_RELAXED);
        } else {
            __atomic_and_fetch(&peer_on[dev], ~(1u << peer), __ATOMIC_RELAXED);
        }
    }
    if (err != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        snprintf(why, why_len, "cudaDevice%sPeerAccess(%d -> %d): %s",
                 enable ? "Enable" : "Disable", dev, peer, ringk_rt.cudaGetErrorString(err));
        return enable ? -EPERM : -EIO;
    }
    return 0;
}

int ringk_cuda_peer_atomics(int dev, int peer)
{
    int v = 0;

    if ((dev == peer) || !ringk_cuda_usable_cached()) {
        return (dev == peer) ? 1 : -1;
    }
    if (ringk_rt.cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, dev,
                                           peer) != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        return -1;
    }
    return v != 0;
}

/* The process's pool of pinned bounce buffers for staged copies, made at the first one (not
 * while device kernels are resident: then pageable buffers, slower, which never wait), and the
 * events that order a chunk's copy out after its copy in, one set per device. */
static ringk_stage_pool_t stage_pool;
static pthread_mutex_t    stage_mu = PTHREAD_MUTEX_INITIALIZER;
static int                stage_pinned[RINGK_STAGE_BUFS];
static cudaEvent_t        stage_ev[RINGK_CUDA_DEVICES_MAX][RINGK_STAGE_BUFS];
/* for a copy within one device, the stream its chunks are copied out on (its copy stream
 * copies them in), so that the two overlap; made and used only while no ringk device kernel
 * runs there */
static cudaStream_t       stage_out[RINGK_CUDA_DEVICES_MAX];

static cudaError_t stage_out_stream(int dev, cudaStream_t *s)
{
    cudaError_t err = cudaSuccess;
    int cur;
    char why[128];

    pthread_mutex_lock(&stage_mu);
    if ((stage_out[dev] == NULL) && (peer_set_device(dev, &cur, why, sizeof(why)) == 0)) {
        err = ringk_rt.cudaStreamCreateWithFlags(&stage_out[dev], cudaStreamNonBlocking);
        ringk_rt.cudaSetDevice(cur);
    }
    *s = stage_out[dev];
    pthread_mutex_unlock(&stage_mu);
    return ((err == cudaSuccess) && (*s == NULL)) ? cudaErrorInvalidDevice : err;
}

static ringk_stage_pool_t *stage_pool_get(int src_dev, char *why, size_t why_len)
{
    ringk_stage_pool_t *pool = &stage_pool;
    cudaError_t err = cudaSuccess;
    unsigned i;
    int cur;

    pthread_mutex_lock(&stage_mu);
    pool->chunk = RINGK_STAGE_CHUNK;
    for (i = 0; i < RINGK_STAGE_BUFS; i++) {
        if ((pool->buf[i] == NULL) &&
            ((pool->buf[i] = ringk_cuda_stage_get(RINGK_STAGE_CHUNK, &stage_pinned[i])) ==
             NULL)) {
            break;
        }
    }
    if (i < RINGK_STAGE_BUFS) {
        pthread_mutex_unlock(&stage_mu);
        snprintf(why, why_len, "out of memory for %u staging buffers of %u bytes",
                 RINGK_STAGE_BUFS, RINGK_STAGE_CHUNK);
        return NULL;
    }
    if (stage_ev[src_dev][RINGK_STAGE_BUFS - 1] == NULL) {
        /* all of the device's events, or none: a failure is tried again at the next copy */
        cudaEvent_t ev[RINGK_STAGE_BUFS] = {NULL};

        if (peer_set_device(src_dev, &cur, why, why_len) != 0) {
            pthread_mutex_unlock(&stage_mu);
            return NULL;
        }
        for (i = 0; (i < RINGK_STAGE_BUFS) && (err == cudaSuccess); i++) {
            err = ringk_rt.cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming);
        }
        ringk_rt.cudaSetDevice(cur);
        if (err != cudaSuccess) {
            for (i = 0; i < RINGK_STAGE_BUFS; i++) {
                if (ev[i] != NULL) {
                    ringk_rt.cudaEventDestroy(ev[i]);
                }
            }
            pthread_mutex_unlock(&stage_mu);
            ringk_rt.cudaGetLastError();
            snprintf(why, why_len, "cudaEventCreateWithFlags on device %d: %s", src_dev,
                     ringk_rt.cudaGetErrorString(err));
            return NULL;
        }
        memcpy(stage_ev[src_dev], ev, sizeof(ev));
    }
    pthread_mutex_unlock(&stage_mu);
    return pool;
}

/* A staged copy under way: its two ends and the streams its chunks go on. */
typedef struct {
    void         *dst;
    const void   *src;
    int           src_dev;
    cudaStream_t  s_in, s_out;  /* one stream (the application's) or each device's */
    cudaError_t   err;
} peer_stage_t;

static void CUDART_CB peer_stage_done(void *arg)
{
    unsigned b = (unsigned)(uintptr_t)arg;

    ringk_stage_release(&stage_pool, b); /* no CUDA call may be made here */
}

static int peer_stage_in(void *arg, unsigned b, size_t off, size_t len)
{
    peer_stage_t *st = arg;

    st->err = ringk_rt.cudaMemcpyAsync(stage_pool.buf[b], (const char*)st->src + off, len,
                                       cudaMemcpyDefault, st->s_in);
    if ((st->err == cudaSuccess) && (st->s_in != st->s_out)) {
        st->err = ringk_rt.cudaEventRecord(stage_ev[st->src_dev][b], st->s_in);
        if (st->err != cudaSuccess) {
            ringk_rt.cudaStreamSynchronize(st->s_in); /* the copy in no longer writes it */
        }
    }
    return (st->err == cudaSuccess) ? 0 : -EIO;
}

static int peer_stage_out(void *arg, unsigned b, size_t off, size_t len)
{
    peer_stage_t *st = arg;

    if (st->s_in != st->s_out) {
        st->err = ringk_rt.cudaStreamWaitEvent(st->s_out, stage_ev[st->src_dev][b], 0);
    }
    if (st->err == cudaSuccess) {
        st->err = ringk_rt.cudaMemcpyAsync((char*)st->dst + off, stage_pool.buf[b], len,
                                           cudaMemcpyDefault, st->s_out);
    }
    if (st->err == cudaSuccess) {
        st->err = ringk_rt.cudaLaunchHostFunc(st->s_out, peer_stage_done, (void*)(uintptr_t)b);
    }
    if (st->err != cudaSuccess) {
        /* its copy in no longer writes it, nor a copy out already queued reads it */
        ringk_rt.cudaStreamSynchronize(st->s_in);
        if (st->s_out != st->s_in) {
            ringk_rt.cudaStreamSynchronize(st->s_out);
        }
        ringk_stage_release(&stage_pool, b);
        return -EIO;
    }
    return 0;
}

/* Queues a staged copy on @a s (the application's stream), or with @a wait on the two devices'
 * copy streams and waits for it. */
static cudaError_t peer_copy_staged(void *dst, int dst_dev, const void *src, int src_dev,
                                    size_t len, cudaStream_t s, int wait, char *why,
                                    size_t why_len)
{
    peer_stage_t st = {.dst = dst, .src = src, .src_dev = src_dev, .s_in = s, .s_out = s};
    ringk_stage_ops_t ops = {.arg = &st, .copy_in = peer_stage_in, .copy_out = peer_stage_out};
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    int ret;

    if ((src_dev >= RINGK_CUDA_DEVICES_MAX) || (dst_dev >= RINGK_CUDA_DEVICES_MAX)) {
        snprintf(why, why_len, "a staged copy between devices %d and %d: ringk stages for "
                 "devices 0 to %d", src_dev, dst_dev, RINGK_CUDA_DEVICES_MAX - 1);
        return cudaErrorInvalidDevice;
    }
    if (!wait && (ringk_rt.cudaStreamIsCapturing(s, &capture) != cudaSuccess)) {
        ringk_rt.cudaGetLastError(); /* not left for the application's next check */
        capture = cudaStreamCaptureStatusNone;
    }
    if (!wait && (capture != cudaStreamCaptureStatusNone)) {
        /* the buffers are given back by host functions of the stream: in a graph they would
         * run at each of its launches, long after this call, or never */
        snprintf(why, why_len, "a staged copy cannot be captured into a CUDA graph (its "
                 "staging buffers are given back by host functions as the stream runs)");
        return cudaErrorStreamCaptureUnsupported;
    }
    if ((ops.pool = stage_pool_get(src_dev, why, why_len)) == NULL) {
        return cudaErrorMemoryAllocation;
    }
    /* waited for: copies in on the source's copy stream, out on the destination's; on one
     * device out on a stream of its own, so that the two overlap, unless ringk device kernels
     * run there (a stream made or used beside them could share a resident kernel's hardware
     * queue: the copy stream alone then) */
    if (wait) {
        st.err = ringk_cuda_copy_stream(src_dev, &st.s_in);
        st.s_out = st.s_in;
        if ((st.err == cudaSuccess) && (dst_dev != src_dev)) {
            st.err = ringk_cuda_copy_stream(dst_dev, &st.s_out);
        } else if ((st.err == cudaSuccess) && (ringk_cuda_resident(dst_dev) == 0)) {
            st.err = stage_out_stream(dst_dev, &st.s_out);
        }
        if (st.err != cudaSuccess) {
            return st.err;
        }
    }
    ret = ringk_stage_run(&ops, len);
    if ((ret == -ETIMEDOUT) && (st.err == cudaSuccess)) {
        snprintf(why, why_len, "no staging buffer came free in %u ms: the copies queued before "
                 "(on %s) did not run", RINGK_STAGE_WAIT_MS, wait ? "ringk's copy streams" :
                 "the application's stream, which may wait for the application");
        st.err = cudaErrorNotReady;
    }
    if (wait) { /* both: after an error the copy stream of the source may still run */
        cudaError_t e1 = ringk_rt.cudaStreamSynchronize(st.s_out);
        cudaError_t e2 = ringk_rt.cudaStreamSynchronize(st.s_in);

        if (st.err == cudaSuccess) {
            st.err = (e1 != cudaSuccess) ? e1 : e2;
        }
    }
    return st.err;
}

int ringk_cuda_peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t len,
                         int how, int async, void *stream, char *why, size_t why_len)
{
    enum cudaStreamCaptureMode mode;
    cudaStream_t s = stream;
    cudaError_t err = cudaSuccess;
    int wait = !async;

    if (!ringk_cudart(why, why_len)) {
        return -ENODEV;
    }
    mode = ringk_cuda_capture_relax();
    if (how == RINGK_CUDA_MOVE_STAGED) {
        err = peer_copy_staged(dst, dst_dev, src, src_dev, len, s, wait, why, why_len);
    } else {
        if (wait) { /* the copy goes on the destination's copy stream, waited for */
            err = ringk_cuda_copy_stream(dst_dev, &s);
        }
        if ((err == cudaSuccess) && (how == RINGK_CUDA_MOVE_PEER)) {
            err = ringk_rt.cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, len, s);
        } else if (err == cudaSuccess) {
            err = ringk_rt.cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice, s);
        }
        if ((err == cudaSuccess) && wait) {
            err = ringk_rt.cudaStreamSynchronize(s);
        }
    }
    ringk_cuda_capture_end(mode);
    if (err != cudaSuccess) {
        ringk_rt.cudaGetLastError();
        if ((err != cudaErrorMemoryAllocation) && (err != cudaErrorInvalidDevice) &&
            (err != cudaErrorNotReady) && (err != cudaErrorStreamCaptureUnsupported)) {
            snprintf(why, why_len, "copy of %zu bytes from device %d to device %d: %s", len,
                     src_dev, dst_dev, ringk_rt.cudaGetErrorString(err));
        }
        return -EIO;
    }
    return 0;
}

/* Seconds of one synchronous copy by movement @a how; < 0 on an error. */
static double peer_time_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t len,
                             int how, char *why, size_t why_len)
{
    struct timespec t0, t1;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (ringk_cuda_peer_copy(dst, dst_dev, src, src_dev, len, how, 0, NULL, why, why_len) != 0) {
        return -1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

static int peer_cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

/* The median of RINGK_CUDA_MEASURE_ROUNDS timed copies of @a len bytes (after one untimed). */
static double peer_median(void *dst, int dst_dev, const void *src, int src_dev, size_t len,
                          int how, char *why, size_t why_len)
{
    double t[RINGK_CUDA_MEASURE_ROUNDS];
    int i;

    if (peer_time_copy(dst, dst_dev, src, src_dev, len, how, why, why_len) < 0) {
        return -1;
    }
    for (i = 0; i < RINGK_CUDA_MEASURE_ROUNDS; i++) {
        if ((t[i] = peer_time_copy(dst, dst_dev, src, src_dev, len, how, why, why_len)) < 0) {
            return -1;
        }
    }
    qsort(t, RINGK_CUDA_MEASURE_ROUNDS, sizeof(t[0]), peer_cmp_double);
    return t[RINGK_CUDA_MEASURE_ROUNDS / 2];
}

int ringk_cuda_peer_measure(int dev, int peer, int how, double *gbps_p, double *lat_us_p,
                            char *why, size_t why_len)
{
    void *mem[2] = {NULL, NULL};
    int devs[2] = {dev, peer}, i, cur, ret = -EIO, n;
    double t_bw, t_lat;

    if ((n = ringk_cuda_resident(-1)) > 0) {
        snprintf(why, why_len, "this process has %d ringk device kernels: allocating device "
                 "memory to measure with would wait for them", n);
        return -EBUSY;
    }
    if (!ringk_cudart(why, why_len)) {
        return -ENODEV;
    }
    for (i = 0; i < 2; i++) {
        if ((ret = peer_set_device(devs[i], &cur, why, why_len)) != 0) {
            goto out;
        }
        if (ringk_rt.cudaMalloc(&mem[i], RINGK_CUDA_MEASURE_BYTES) != cudaSuccess) {
            ringk_rt.cudaGetLastError();
            ringk_rt.cudaSetDevice(cur);
            snprintf(why, why_len, "cudaMalloc of %u bytes on device %d failed",
                     RINGK_CUDA_MEASURE_BYTES, devs[i]);
            ret = -ENOMEM;
            goto out;
        }
        ringk_rt.cudaSetDevice(cur);
    }
    ret   = -EIO;
    t_bw  = peer_median(mem[1], peer, mem[0], dev, RINGK_CUDA_MEASURE_BYTES, how, why, why_len);
    t_lat = (t_bw < 0) ? -1 : peer_median(mem[1], peer, mem[0], dev, 4, how, why, why_len);
    if ((t_bw > 0) && (t_lat > 0)) {
        *gbps_p   = (double)RINGK_CUDA_MEASURE_BYTES / t_bw * 1e-9;
        *lat_us_p = t_lat * 1e6;
        ret       = 0;
    }
out:
    for (i = 0; i < 2; i++) {
        if (mem[i] != NULL) {
            ringk_rt.cudaFree(mem[i]);
        }
    }
    return ret;
}

#else

int ringk_cuda_dev_busid(int dev, char *busid, size_t len, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

int ringk_cuda_busid_dev(const char *busid, int *dev_p, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

int ringk_cuda_ptr_ordinal(const void *ptr, int *dev_p, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

void *ringk_cuda_dev_alloc(int dev, size_t len, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return NULL;
}

void ringk_cuda_dev_free(void *ptr)
{
}

int ringk_cuda_peer_set(int dev, int peer, int enable, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

int ringk_cuda_peer_set_idle(int dev, int peer, char *why, size_t why_len)
{
    return ringk_cuda_peer_set(dev, peer, 1, why, why_len);
}

int ringk_cuda_peer_atomics(int dev, int peer)
{
    return -1;
}

int ringk_cuda_peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t len,
                         int how, int async, void *stream, char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

int ringk_cuda_peer_measure(int dev, int peer, int how, double *gbps_p, double *lat_us_p,
                            char *why, size_t why_len)
{
    snprintf(why, why_len, RINGK_NO_CUDA);
    return -ENODEV;
}

#endif
