/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU memory through ringk between two processes, side by side with the copies it is measured
 * against, in one run:
 *   d2d          cudaMemcpy device-to-device in one process: the limit
 *   staged       device -> pinned host -> device in one process (two cudaMemcpy)
 *   ipc_put/get  uct_ep_put_zcopy / get_zcopy to the peer's device memory on the endpoint's
 *                default path (CUDA_IPC: both processes on device 0)
 *   host_put/get the same forced to HOST_STAGED (RINGK_PATH): through this process's pinned
 *                buffers into the peer's IPC mapping, chunks overlapped (one-sided)
 *   peer_put/get HOST_STAGED with UCX_RINGK_GPU_STAGING=peer: through the endpoint's staging
 *                area, which the peer's progress serves: copy out here, copy in there, no IPC
 * Each round runs every method at every size back to back (interleaved); the figures are the
 * medians over the rounds of the time per operation, with GB/s and the ratio to d2d and to
 * staged. The path of each endpoint is read back from the transport and checked, and an
 * untimed first round checks that every size arrives intact along both paths.
 *   gpu_rma [-r ROUNDS] [-m MAX_BYTES]     (run through contrib/ringk-run)
 * Lines "RESULT method bytes usec GB/s x_d2d x_staged" are for scripts. Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <uct/api/uct.h>
#include <unistd.h>

#include "uct_node.h"

#define MAX_ROUNDS 64

static const size_t sizes[] = {8, 64 << 10, 1 << 20, 64 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

enum { M_D2D, M_STAGED, M_IPC_PUT, M_IPC_GET, M_HOST_PUT, M_HOST_GET, M_PEER_PUT, M_PEER_GET,
       NMETHODS };
static const char *method_names[NMETHODS] = {"d2d", "staged", "ipc_put", "ipc_get", "host_put",
                                             "host_get", "peer_put", "peer_get"};

typedef struct {
    uint8_t  addr[64], dev_addr[64], rkey[256];
    uint64_t target;
} peer_info_t;

#define DIE(...) do { fprintf(stderr, "gpu_rma: " __VA_ARGS__); fputc('\n', stderr); exit(1); } \
                 while (0)
#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
                        DIE("%s: %s", #call, cudaGetErrorString(e_)); } } while (0)
#define UCS(call) do { ucs_status_t s_ = (call); if (s_ != UCS_OK) { \
                       DIE("%s: %s", #call, ucs_status_string(s_)); } } while (0)

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void node_open(uct_node_t *n)
{
    const char *what = "";
    ucs_status_t s = uct_node_open(n, &what);

    if (s != UCS_OK) {
        DIE("%s: %s", what, ucs_status_string(s));
    }
}

/* The peer: device memory on device 0, registered; progresses until the parent is done (its
 * progress serves the parent's staged puts and gets on the HOST_STAGED path). */
static void peer(size_t bytes, int wfd, int rfd)
{
    peer_info_t info;
    uct_mem_h memh;
    void *target;
    uct_node_t n;
    char c;

    CUDA(cudaSetDevice(0));
    CUDA(cudaMalloc(&target, bytes));
    CUDA(cudaMemset(target, 0, bytes));
    node_open(&n);
    memset(&info, 0, sizeof(info));
    memcpy(info.addr, n.addr, sizeof(info.addr));
    memcpy(info.dev_addr, n.dev_addr, sizeof(info.dev_addr));
    UCS(uct_md_mem_reg(n.md, target, bytes, UCT_MD_MEM_ACCESS_ALL, &memh));
    UCS(uct_md_mkey_pack(n.md, memh, info.rkey));
    info.target = (uintptr_t)target;
    if (write(wfd, &info, sizeof(info)) != sizeof(info)) {
        DIE("peer: write: %m");
    }
    fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        ssize_t got = read(rfd, &c, 1);

        if (got == 1) {
            if (c == 'q') {
                break;
            }
        } else if ((got == 0) || (errno != EAGAIN)) {
            break; /* the benchmark is gone (0: end of file, errno not set) */
        } else {
            uct_worker_progress(n.worker);
        }
    }
    uct_md_mem_dereg(n.md, memh);
    uct_node_close(&n);
    cudaFree(target);
    exit(0);
}

typedef struct {
    uct_node_t        node;
    uct_ep_h          ep;
    uct_rkey_bundle_t rkey;
    uct_mem_h         src_memh, dst_memh;
} path_t;

static void path_open(path_t *p, const peer_info_t *info, const char *force,
                      const char *staging, void *src, void *dst, size_t bytes)
{
    ucs_status_t (*query)(uct_ep_h, const char**, const char**);
    const char *path, *reason;
    uct_ep_params_t params;

    if (force != NULL) {
        setenv("RINGK_PATH", force, 1);
    }
    if (staging != NULL) {
        setenv("UCX_RINGK_GPU_STAGING", staging, 1);
    }
    node_open(&p->node);
    unsetenv("RINGK_PATH");
    unsetenv("UCX_RINGK_GPU_STAGING");
    params = (uct_ep_params_t){
        .field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                      UCT_EP_PARAM_FIELD_IFACE_ADDR,
        .iface      = p->node.iface,
        .dev_addr   = (const uct_device_addr_t*)info->dev_addr,
        .iface_addr = (const uct_iface_addr_t*)info->addr
    };
    UCS(uct_ep_create(&params, &p->ep));
    *(void**)&query = dlsym(RTLD_DEFAULT, "uct_ringk_ep_path_query");
    if (query == NULL) {
        DIE("uct_ringk_ep_path_query not found: not the ringk transport");
    }
    UCS(query(p->ep, &path, &reason));
    printf("# endpoint%s%s: path %s (%s)\n", force ? " forced to " : "", force ? force : "",
           path, reason);
    if (strcmp(path, force ? force : "CUDA_IPC")) {
        DIE("expected path %s, the transport chose %s", force ? force : "CUDA_IPC", path);
    }
    UCS(uct_md_mem_reg(p->node.md, src, bytes, UCT_MD_MEM_ACCESS_ALL, &p->src_memh));
    UCS(uct_md_mem_reg(p->node.md, dst, bytes, UCT_MD_MEM_ACCESS_ALL, &p->dst_memh));
    UCS(uct_rkey_unpack(p->node.component, info->rkey, &p->rkey));
}

static void path_close(path_t *p)
{
    uct_rkey_release(p->node.component, &p->rkey);
    uct_md_mem_dereg(p->node.md, p->src_memh);
    uct_md_mem_dereg(p->node.md, p->dst_memh);
    uct_ep_destroy(p->ep);
    uct_node_close(&p->node);
}

/* One put or get, returned once the data has landed (ringk completes GPU zcopy in the call; an
 * operation in flight is waited for by an endpoint flush). */
static void rma(path_t *p, int get, void *buf, size_t len, uint64_t target)
{
    uct_iov_t iov = {.buffer = buf, .length = len, .count = 1,
                     .memh = get ? p->dst_memh : p->src_memh};
    ucs_status_t s;

    s = get ? uct_ep_get_zcopy(p->ep, &iov, 1, target, p->rkey.rkey, NULL) :
              uct_ep_put_zcopy(p->ep, &iov, 1, target, p->rkey.rkey, NULL);
    if (s == UCS_INPROGRESS) {
        while ((s = uct_ep_flush(p->ep, 0, NULL)) == UCS_INPROGRESS ||
               (s == UCS_ERR_NO_RESOURCE)) {
            uct_worker_progress(p->node.worker);
        }
    }
    if (s != UCS_OK) {
        DIE("%s of %zu bytes: %s", get ? "get" : "put", len, ucs_status_string(s));
    }
}

/* Puts a pattern to the peer and gets it back along each path, at each size: the figures are
 * of copies that move the right bytes. */
static void verify(path_t *ipc, path_t *host, path_t *peer, void *src, void *dst,
                   size_t max_bytes, uint64_t target)
{
    static const char *names[3] = {"CUDA IPC", "host staged", "staged by the peer"};
    path_t *paths[3] = {ipc, host, peer};
    uint8_t *want, *got;
    size_t s, i, len;
    int p;

    want = malloc(max_bytes);
    got  = malloc(max_bytes);
    if ((want == NULL) || (got == NULL)) {
        DIE("cannot allocate %zu bytes to check the copies", max_bytes);
    }
    for (p = 0; p < 3; p++) {
        /* bytes of each path's own, so that a path that moved nothing cannot pass on what the
         * one before it put into the target */
        for (i = 0; i < max_bytes; i++) {
            want[i] = (uint8_t)(i * 131 + 7 + 29 * (size_t)p);
        }
        CUDA(cudaMemcpy(src, want, max_bytes, cudaMemcpyHostToDevice));
        for (s = 0; s < NSIZES; s++) {
            len = sizes[s];
            if (len > max_bytes) {
                continue;
            }
            CUDA(cudaMemset(dst, 0, len));
            rma(paths[p], 0, src, len, target);
            rma(paths[p], 1, dst, len, target);
            CUDA(cudaMemcpy(got, dst, len, cudaMemcpyDeviceToHost));
            if (memcmp(got, want, len) != 0) {
                DIE("%s: %zu bytes put and got back differ", names[p], len);
            }
        }
    }
    free(want);
    free(got);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static double t[NMETHODS][NSIZES][MAX_ROUNDS];
    size_t max_bytes = sizes[NSIZES - 1], len, s, it, iters;
    int rounds = 9, opt, p2c[2], c2p[2], ndev = 0, m, r, status = 0;
    path_t ipc, host, served;
    void *src, *dst, *pinned;
    peer_info_t info;
    struct cudaDeviceProp prop;
    double t0, med[NMETHODS];
    pid_t pid;
    char c = 'q';

    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed at its time limit keeps its lines */
    while ((opt = getopt(argc, argv, "r:m:")) != -1) {
        if (opt == 'r') {
            rounds = atoi(optarg);
        } else if (opt == 'm') {
            max_bytes = strtoull(optarg, NULL, 0);
        } else {
            fprintf(stderr, "usage: gpu_rma [-r ROUNDS (1..%d)] [-m MAX_BYTES]\n", MAX_ROUNDS);
            return 2;
        }
    }
    if ((rounds < 1) || (rounds > MAX_ROUNDS)) {
        fprintf(stderr, "gpu_rma: -r %d: rounds must be 1..%d\n", rounds, MAX_ROUNDS);
        return 2;
    }
    if ((pipe(p2c) != 0) || (pipe(c2p) != 0)) {
        DIE("pipe: %m");
    }
    /* fork before this process starts CUDA: a forked child cannot use its parent's CUDA */
    pid = fork();
    if (pid == 0) {
        close(c2p[0]);
        close(p2c[1]);
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            exit(77);
        }
        peer(max_bytes, c2p[1], p2c[0]);
    }
    close(c2p[1]);
    close(p2c[0]);
    if ((cudaGetDeviceCount(&ndev) != cudaSuccess) || (ndev == 0)) {
        printf("gpu_rma: no CUDA device (%s): nothing to measure\n",
               cudaGetErrorString(cudaGetLastError()));
        waitpid(pid, &status, 0);
        return 77;
    }
    CUDA(cudaSetDevice(0));
    CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("# gpu_rma: %s (compute %d.%d), %d rounds interleaved, medians\n", prop.name,
           prop.major, prop.minor, rounds);
    if (read(c2p[0], &info, sizeof(info)) != sizeof(info)) {
        waitpid(pid, &status, 0);
        DIE("the peer did not start (exit status 0x%x)", status);
    }
    CUDA(cudaMalloc(&src, max_bytes));
    CUDA(cudaMalloc(&dst, max_bytes));
    CUDA(cudaMallocHost(&pinned, max_bytes));
    CUDA(cudaMemset(src, 0x5a, max_bytes));
    path_open(&ipc, &info, NULL, NULL, src, dst, max_bytes);
    path_open(&host, &info, "HOST_STAGED", NULL, src, dst, max_bytes);
    path_open(&served, &info, "HOST_STAGED", "peer", src, dst, max_bytes);

    /* an untimed round first (the staging buffer and the IPC mapping are set up lazily), in
     * which every size is put and got back along both paths and checked */
    verify(&ipc, &host, &served, src, dst, max_bytes, info.target);
    for (r = 0; r < rounds; r++) {
        for (s = 0; s < NSIZES; s++) {
            len = sizes[s];
            if (len > max_bytes) {
                continue;
            }
            /* about 20 ms of work per method and size on a PCIe 4 GPU, at least 3 */
            iters = len >= (1 << 20) ? 3 + (64 << 20) / len : 200;
            for (m = 0; m < NMETHODS; m++) {
                t0 = now();
                for (it = 0; it < iters; it++) {
                    switch (m) {
                    case M_D2D:
                        CUDA(cudaMemcpy(dst, src, len, cudaMemcpyDeviceToDevice));
                        CUDA(cudaDeviceSynchronize());
                        break;
                    case M_STAGED:
                        CUDA(cudaMemcpy(pinned, src, len, cudaMemcpyDeviceToHost));
                        CUDA(cudaMemcpy(dst, pinned, len, cudaMemcpyHostToDevice));
                        break;
                    case M_IPC_PUT:  rma(&ipc, 0, src, len, info.target); break;
                    case M_IPC_GET:  rma(&ipc, 1, dst, len, info.target); break;
                    case M_HOST_PUT: rma(&host, 0, src, len, info.target); break;
                    case M_HOST_GET: rma(&host, 1, dst, len, info.target); break;
                    case M_PEER_PUT: rma(&served, 0, src, len, info.target); break;
                    default:         rma(&served, 1, dst, len, info.target); break;
                    }
                }
                t[m][s][r] = (now() - t0) / (double)iters * 1e6;
            }
        }
        fprintf(stderr, "gpu_rma: round %d of %d done\n", r + 1, rounds);
    }

    printf("%-9s %10s %12s %10s %8s %9s\n", "method", "bytes", "usec/op", "GB/s", "x d2d",
           "x staged");
    for (s = 0; s < NSIZES; s++) {
        if (sizes[s] > max_bytes) {
            continue;
        }
        for (m = 0; m < NMETHODS; m++) {
            qsort(t[m][s], (size_t)rounds, sizeof(double), cmp_double);
            med[m] = (rounds % 2) ? t[m][s][rounds / 2] :
                     (t[m][s][rounds / 2 - 1] + t[m][s][rounds / 2]) / 2;
        }
        for (m = 0; m < NMETHODS; m++) {
            /* time ratios: above 1 means slower than the reference */
            printf("%-9s %10zu %12.2f %10.2f %8.2f %9.2f\n", method_names[m], sizes[s], med[m],
                   sizes[s] / med[m] / 1e3, med[m] / med[M_D2D], med[m] / med[M_STAGED]);
            printf("RESULT %s %zu %.3f %.3f %.3f %.3f\n", method_names[m], sizes[s], med[m],
                   sizes[s] / med[m] / 1e3, med[m] / med[M_D2D], med[m] / med[M_STAGED]);
        }
    }
    path_close(&ipc);
    path_close(&host);
    path_close(&served);
    if (write(p2c[1], &c, 1) != 1 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        DIE("the peer failed (status 0x%x)", status);
    }
    cudaFree(src);
    cudaFree(dst);
    cudaFreeHost(pinned);
    return 0;
}
