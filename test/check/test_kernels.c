/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests on a GPU: the ring protocol running on the device, the P2P canary, and the transport
 * moving CUDA memory between two processes along the path each endpoint chose. Skips without
 * CUDA or a GPU. CUDA is never initialised in the parent of a fork: the device count is asked
 * in a child, and each test process starts CUDA itself. */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <core/ringk_cuda.h>
#include <test/kernels/ringk_kernels.h>

#include <core/ringk_topo.h>
#include <ringk/api/ringk.h>
#include <uct/ringk/base/ringk_rkey.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <string.h>
#include <poll.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include "uct_node.h"

/* test_kernels_ipc.c: device memory shared between two processes by ringk_ipc handles */
void test_kernels_ipc_cases(TCase *tc);
/* test_kernels_peer.c: GPUs of one process, copies between them */
void test_kernels_peer_cases(TCase *tc);
/* test_kernels_p2pq.c: P2P queues with GPU endpoints */
void test_kernels_p2pq_cases(TCase *tc);

static const struct {
    uint32_t ncells, cell_size, nmsgs;
} selftest_cases[] = {
    {8, 64, 10000},   /* small ring: constant wrap-around and full-ring waits */
    {256, 64, 100000},
    {64, 256, 50000},
};

START_TEST(test_kernels_ring_selftest)
{
    unsigned verified = 0;
    char why[256] = "";

    ck_assert_msg(ringk_kernels_selftest(selftest_cases[_i].nmsgs, selftest_cases[_i].ncells,
                                         selftest_cases[_i].cell_size, &verified, why,
                                         sizeof(why)) == 0,
                  "device self-test failed: %s", why);
    ck_assert_uint_eq(verified, selftest_cases[_i].nmsgs);
}
END_TEST

/* The P2P canary between device 0 and each device (itself included) passes where peer access
 * exists, and where it does not it refuses with a reason instead of trusting the path. */
START_TEST(test_kernels_p2p_canary)
{
    char a[32], b[32], why[256];
    int n = 0, i, can, ret;

    ck_assert_int_eq(cudaGetDeviceCount(&n), cudaSuccess);
    ck_assert_int_eq(cudaDeviceGetPCIBusId(a, sizeof(a), 0), cudaSuccess);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(cudaDeviceGetPCIBusId(b, sizeof(b), i), cudaSuccess);
        can = 1;
        if (i != 0) {
            ck_assert_int_eq(cudaDeviceCanAccessPeer(&can, 0, i), cudaSuccess);
        }
        ret = ringk_cuda_p2p_canary(a, b, why, sizeof(why));
        if (can) {
            ck_assert_msg(ret == 0, "canary %s -> %s: %s", a, b, why);
            ck_assert_ptr_nonnull(strstr(why, "verified"));
        } else {
            ck_assert_int_eq(ret, -EPERM);
        }
        printf("# canary %s -> %s: %s\n", a, b, why);
    }
}
END_TEST


/* ---- CUDA memory through the transport ------------------------------------------------------ */

/* 5.5 MiB and a byte: staged transfers of the whole buffer take more 1 MiB chunks than the
 * staging pool has buffers, and end in a partial one */
#define GPU_BYTES ((11 << 20) / 2 + 1)

typedef struct {
    uint8_t  addr[64], dev_addr[64], rkey[256];
    uint64_t target;
} gpu_peer_t;

static void gpu_node_open(uct_node_t *n)
{
    const char *what = "";

    ck_assert_msg(uct_node_open(n, &what) == UCS_OK, "%s failed", what);
}

static uint8_t gpu_pat(size_t i)
{
    return (uint8_t)(i * 131 + 7);
}

/* The peer: CUDA memory on device @a dev, registered; its rkey goes to the parent, and at 'c'
 * its content goes back for the parent to compare. It progresses while it waits: the parent's
 * staged puts and gets (HOST_STAGED) are served by this process's progress. */
static void gpu_peer(int dev, int wfd, int rfd)
{
    static uint8_t back[GPU_BYTES];
    gpu_peer_t info;
    uct_node_t n;
    ucs_memory_type_t mem_type;
    uct_mem_h memh;
    void *target;
    char cmd;

    if ((cudaSetDevice(dev) != cudaSuccess) || (cudaMalloc(&target, GPU_BYTES) != cudaSuccess) ||
        (cudaMemset(target, 0, GPU_BYTES) != cudaSuccess)) {
        _exit(2);
    }
    gpu_node_open(&n);
    memset(&info, 0, sizeof(info));
    memcpy(info.addr, n.addr, sizeof(info.addr));
    memcpy(info.dev_addr, n.dev_addr, sizeof(info.dev_addr));
    if ((uct_md_detect_memory_type(n.md, target, GPU_BYTES, &mem_type) != UCS_OK) ||
        (mem_type != UCS_MEMORY_TYPE_CUDA) ||
        (uct_md_mem_reg(n.md, target, GPU_BYTES, UCT_MD_MEM_ACCESS_ALL, &memh) != UCS_OK) ||
        (uct_md_mkey_pack(n.md, memh, info.rkey) != UCS_OK)) {
        _exit(3);
    }
    info.target = (uintptr_t)target;
    if (write(wfd, &info, sizeof(info)) != sizeof(info)) {
        _exit(4);
    }
    fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        ssize_t got = read(rfd, &cmd, 1);

        if (got != 1) {
            if ((got == 0) || (errno != EAGAIN)) {
                break; /* the test process is gone (0: end of file, errno not set) */
            }
            uct_worker_progress(n.worker);
            continue;
        }
        if (cmd == 'c') {
            cudaMemcpy(back, target, GPU_BYTES, cudaMemcpyDeviceToHost);
            if (write(wfd, back, sizeof(back)) != sizeof(back)) {
                _exit(5);
            }
        } else {
            break;
        }
    }
    uct_md_mem_dereg(n.md, memh);
    uct_node_close(&n);
    cudaFree(target);
    _exit(0);
}

/* Forks the peer process, which runs @a peer(@a dev, its write end, its read end) and exits;
 * the parent gets its ends of the two pipes. Returns the pid, or -1 when the test cannot fork
 * a peer: with CK_FORK=no earlier tests started CUDA in this process, which a child cannot
 * use. The device may not exist: the parent checks after its own CUDA start. */
static pid_t gpu_fork_peer(void (*peer)(int dev, int wfd, int rfd), int dev, int *wfd_p,
                           int *rfd_p)
{
    int p2c[2], c2p[2];
    pid_t pid;

    if ((getenv("CK_FORK") != NULL) && !strcmp(getenv("CK_FORK"), "no")) {
        printf("# CK_FORK=no: the two-process GPU test is not run\n");
        return -1;
    }
    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(c2p[0]);
        close(p2c[1]);
        peer(dev, c2p[1], p2c[0]);
        _exit(0);
    }
    close(c2p[1]); /* a dead peer is then end-of-file, not a wait for the timeout */
    close(p2c[0]);
    *wfd_p = p2c[1];
    *rfd_p = c2p[0];
    return pid;
}

/* Asks the peer for a copy of its GPU_BYTES of device memory ('c'). */
static void gpu_peer_content(int wfd, int rfd, uint8_t *buf)
{
    ssize_t got;
    size_t len;

    ck_assert_int_eq(write(wfd, "c", 1), 1);
    for (len = 0; len < GPU_BYTES; len += (size_t)got) {
        got = read(rfd, buf + len, GPU_BYTES - len);
        ck_assert_int_gt(got, 0);
    }
}

/* Case: the two processes' devices, a forced path (NULL: the topology's choice), and
 * UCX_RINGK_GPU_STAGING (NULL: auto). */
static const struct {
    int         dev_a, dev_b;
    const char *force, *staging;
} gpu_rma_cases[] = {
    {0, 0, NULL, NULL},           /* one GPU: CUDA_IPC */
    {0, 1, NULL, NULL},           /* two GPUs: whatever the topology and canary say */
    {0, 1, "HOST_STAGED", NULL},  /* through pinned buffers here and the IPC mapping */
    {0, 0, "HOST_STAGED", NULL},
    {0, 0, "HOST_STAGED", "peer"}, /* through the staging area the peer serves: no IPC */
    {0, 1, "HOST_STAGED", "peer"},
};

START_TEST(test_kernels_gpu_rma)
{
    static uint8_t host[GPU_BYTES], back[GPU_BYTES], check[GPU_BYTES];
    ucs_status_t (*query)(uct_ep_h, const char**, const char**);
    ucs_status_t (*stage_stats)(uct_iface_h, uint64_t*, uint64_t*, uint64_t*);
    uint64_t served, failed, staged;
    int wfd, rfd, status, ndev = 0;
    const char *path, *reason;
    uct_rkey_bundle_t rkey, rkey2;
    ringk_ipc_cache_stats_t st0, st;
    uct_ep_params_t params;
    void *src, *dst;
    gpu_peer_t info;
    uct_mem_h memh, dst_memh;
    uct_node_t n;
    uct_iov_t iov;
    uct_ep_h ep;
    size_t i, len;
    pid_t pid;

    pid = gpu_fork_peer(gpu_peer, gpu_rma_cases[_i].dev_b, &wfd, &rfd);
    if (pid < 0) {
        return;
    }
    ck_assert_int_eq(cudaGetDeviceCount(&ndev), cudaSuccess);
    if (gpu_rma_cases[_i].dev_b >= ndev) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        printf("# %d device(s): case %d needs device %d, not run\n", ndev, _i,
               gpu_rma_cases[_i].dev_b);
        return;
    }
    if (gpu_rma_cases[_i].force != NULL) {
        setenv("RINGK_PATH", gpu_rma_cases[_i].force, 1);
    }
    if (gpu_rma_cases[_i].staging != NULL) {
        setenv("UCX_RINGK_GPU_STAGING", gpu_rma_cases[_i].staging, 1);
    }
    ck_assert_int_eq(cudaSetDevice(gpu_rma_cases[_i].dev_a), cudaSuccess);
    gpu_node_open(&n);
    unsetenv("RINGK_PATH");
    unsetenv("UCX_RINGK_GPU_STAGING");
    ck_assert_int_eq(read(rfd, &info, sizeof(info)), sizeof(info));
    params = (uct_ep_params_t){
        .field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                      UCT_EP_PARAM_FIELD_IFACE_ADDR,
        .iface      = n.iface,
        .dev_addr   = (const uct_device_addr_t*)info.dev_addr,
        .iface_addr = (const uct_iface_addr_t*)info.addr
    };
    ck_assert_int_eq(uct_ep_create(&params, &ep), UCS_OK);
    *(void**)&query = dlsym(RTLD_DEFAULT, "uct_ringk_ep_path_query");
    ck_assert_ptr_nonnull(query);
    ck_assert_int_eq(query(ep, &path, &reason), UCS_OK);
    *(void**)&stage_stats = dlsym(RTLD_DEFAULT, "uct_ringk_iface_stage_stats");
    ck_assert_ptr_nonnull(stage_stats);
    printf("# devices %d -> %d: path %s: %s\n", gpu_rma_cases[_i].dev_a,
           gpu_rma_cases[_i].dev_b, path, reason);
    ck_assert_msg(strstr(reason, "no GPU pair") == NULL, "UCX_RINGK_GPU=auto found no GPU: %s",
                  reason);
    if (gpu_rma_cases[_i].force != NULL) {
        ck_assert_str_eq(path, gpu_rma_cases[_i].force);
    } else if (gpu_rma_cases[_i].dev_a == gpu_rma_cases[_i].dev_b) {
        ck_assert_str_eq(path, "CUDA_IPC");
    }

    for (i = 0; i < GPU_BYTES; i++) {
        host[i] = gpu_pat(i);
    }
    ck_assert_int_eq(cudaMalloc(&src, GPU_BYTES), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&dst, GPU_BYTES), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(src, host, GPU_BYTES, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(uct_md_mem_reg(n.md, src, GPU_BYTES, UCT_MD_MEM_ACCESS_ALL, &memh),
                     UCS_OK);
    ck_assert_int_eq(uct_md_mem_reg(n.md, dst, GPU_BYTES, UCT_MD_MEM_ACCESS_ALL, &dst_memh),
                     UCS_OK);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&st0), 0);
    ck_assert_int_eq(uct_rkey_unpack(n.component, info.rkey, &rkey), UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(n.component, info.rkey, &rkey2), UCS_OK);
    /* the key's handle went through libringk's import cache (this program has libringk), once
     * mapped, once taken again */
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&st), 0);
    ck_assert_uint_eq(st.misses - st0.misses, 1);
    ck_assert_uint_eq(st.hits - st0.hits, 1);
    ck_assert_uint_eq(st.in_use, st0.in_use + 1);
    uct_rkey_release(n.component, &rkey2);
    /* GPU -> peer GPU at sizes from 1 byte to 1 MiB, read back GPU <- peer GPU (the whole
     * buffer below) */
    for (len = 1; len <= GPU_BYTES; len *= 16) {
        iov = (uct_iov_t){.buffer = src, .length = len, .memh = memh, .count = 1};
        ck_assert_int_eq(uct_ep_put_zcopy(ep, &iov, 1, info.target, rkey.rkey, NULL), UCS_OK);
        ck_assert_int_eq(cudaMemset(dst, 0, len), cudaSuccess);
        iov.buffer = dst;
        iov.memh   = dst_memh;
        ck_assert_int_eq(uct_ep_get_zcopy(ep, &iov, 1, info.target, rkey.rkey, NULL), UCS_OK);
        ck_assert_int_eq(cudaMemcpy(back, dst, len, cudaMemcpyDeviceToHost), cudaSuccess);
        ck_assert_mem_eq(back, host, len);
    }
    /* the whole buffer again, then a host buffer -> peer GPU by put_short; the peer looks at
     * once, with no other CUDA call here in between: the data must have landed on return */
    iov = (uct_iov_t){.buffer = src, .length = GPU_BYTES, .memh = memh, .count = 1};
    ck_assert_int_eq(uct_ep_put_zcopy(ep, &iov, 1, info.target, rkey.rkey, NULL), UCS_OK);
    ck_assert_int_eq(uct_ep_put_short(ep, host + 5, 200, info.target + 1000, rkey.rkey), UCS_OK);
    gpu_peer_content(wfd, rfd, check);
    ck_assert_mem_eq(check, host, 1000);
    ck_assert_mem_eq(check + 1000, host + 5, 200);
    ck_assert_mem_eq(check + 1200, host + 1200, GPU_BYTES - 1200);
    /* outside the region: refused */
    ck_assert_int_eq(uct_ep_put_short(ep, host, 16, info.target + GPU_BYTES - 8, rkey.rkey),
                     UCS_ERR_INVALID_PARAM);
    /* the path the bytes took: with GPU_STAGING=peer through the staging area the peer served
     * (every put and get of the case), else through the mapping (none) */
    ck_assert_int_eq(stage_stats(n.iface, &served, &failed, &staged), UCS_OK);
    printf("# devices %d -> %d, %s, staging %s: %" PRIu64 " staged transfers\n",
           gpu_rma_cases[_i].dev_a, gpu_rma_cases[_i].dev_b, path,
           gpu_rma_cases[_i].staging ? gpu_rma_cases[_i].staging : "auto", staged);
    if (gpu_rma_cases[_i].staging != NULL) {
        ck_assert_uint_eq(staged, 2 * 6 + 2);
    } else {
        ck_assert_uint_eq(staged, 0);
    }

    uct_rkey_release(n.component, &rkey);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&st), 0);
    ck_assert_uint_eq(st.in_use, st0.in_use); /* unused now, and kept for the next key */
    ck_assert_uint_eq(st.entries, st0.entries + 1);
    ck_assert_int_eq(ringk_ipc_invalidate(pid, 0), 1); /* before the peer frees it */
    uct_md_mem_dereg(n.md, memh);
    uct_md_mem_dereg(n.md, dst_memh);
    uct_ep_destroy(ep);
    ck_assert_int_eq(write(wfd, "q", 1), 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0), "peer status 0x%x", status);
    uct_node_close(&n);
    cudaFree(src);
    cudaFree(dst);
}
END_TEST

/* ---- CUDA memory through UCP over ringk ---------------------------------------------------- */

/* A UCP context and worker on ringk alone: no other transport can move device memory here
 * (the installed UCX has no CUDA transports), so data that arrives went along ringk's GPU path.
 * Protocols v2 (UCX_PROTO_ENABLE) honour the memory type: CUDA memory goes by zcopy only. */
static void gpu_ucp_open(ucp_context_h *ctx, ucp_worker_h *worker)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA};
    ucp_worker_params_t wparams = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE
    };
    ucp_config_t *config;

    ck_assert_int_eq(ucp_config_read(NULL, NULL, &config), UCS_OK);
    ck_assert_int_eq(ucp_config_modify(config, "TLS", "ringk"), UCS_OK);
    ck_assert_int_eq(ucp_config_modify(config, "PROTO_ENABLE", "y"), UCS_OK);
    ck_assert_int_eq(ucp_init(&params, config, ctx), UCS_OK);
    ucp_config_release(config);
    ck_assert_int_eq(ucp_worker_create(*ctx, &wparams, worker), UCS_OK);
}

static ucs_status_t gpu_ucp_wait(ucp_worker_h worker, void *req)
{
    ucs_status_t status;

    if (!UCS_PTR_IS_PTR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
    }
    ucp_request_free(req);
    return status;
}

/* The UCP peer: device memory mapped with ucp_mem_map; its worker address, rkey and address go
 * to the parent, then it progresses until asked for the content ('c') or told to quit. */
static void gpu_ucp_peer(int dev, int wfd, int rfd)
{
    static uint8_t back[GPU_BYTES];
    ucp_mem_map_params_t mparams;
    struct pollfd pfd = {.fd = rfd, .events = POLLIN};
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len, rkey_len;
    void *target, *rkey;
    uint64_t where;
    ucp_mem_h memh;
    char cmd;

    if ((cudaSetDevice(dev) != cudaSuccess) || (cudaMalloc(&target, GPU_BYTES) != cudaSuccess) ||
        (cudaMemset(target, 0, GPU_BYTES) != cudaSuccess)) {
        _exit(2);
    }
    gpu_ucp_open(&ctx, &worker);
    mparams = (ucp_mem_map_params_t){
        .field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                       UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .address     = target,
        .length      = GPU_BYTES,
        .memory_type = UCS_MEMORY_TYPE_CUDA
    };
    where = (uintptr_t)target;
    if ((ucp_mem_map(ctx, &mparams, &memh) != UCS_OK) ||
        (ucp_rkey_pack(ctx, memh, &rkey, &rkey_len) != UCS_OK) ||
        (ucp_worker_get_address(worker, &addr, &addr_len) != UCS_OK) ||
        (write(wfd, &addr_len, sizeof(addr_len)) != sizeof(addr_len)) ||
        (write(wfd, addr, addr_len) != (ssize_t)addr_len) ||
        (write(wfd, &rkey_len, sizeof(rkey_len)) != sizeof(rkey_len)) ||
        (write(wfd, rkey, rkey_len) != (ssize_t)rkey_len) ||
        (write(wfd, &where, sizeof(where)) != sizeof(where))) {
        _exit(3);
    }
    for (;;) {
        ucp_worker_progress(worker);
        if (poll(&pfd, 1, 0) == 0) {
            continue;
        }
        if ((read(rfd, &cmd, 1) != 1) || (cmd != 'c')) {
            break;
        }
        cudaMemcpy(back, target, GPU_BYTES, cudaMemcpyDeviceToHost);
        if (write(wfd, back, sizeof(back)) != sizeof(back)) {
            _exit(5);
        }
    }
    ucp_worker_release_address(worker, addr);
    ucp_rkey_buffer_release(rkey);
    ucp_mem_unmap(ctx, memh);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    cudaFree(target);
    _exit(0);
}

static void *gpu_read_blob(int fd, size_t *len_p)
{
    void *blob;

    ck_assert_int_eq(read(fd, len_p, sizeof(*len_p)), sizeof(*len_p));
    ck_assert_uint_lt(*len_p, 1 << 16);
    blob = malloc(*len_p);
    ck_assert_ptr_nonnull(blob);
    ck_assert_int_eq(read(fd, blob, *len_p), (ssize_t)*len_p);
    return blob;
}

/* Device memory -> peer device memory by ucp_put_nbx and back by ucp_get_nbx, from 8 bytes to
 * GPU_BYTES: case 0 names the memory type in each call; case 1 leaves it to UCP's detection, which
 * asks ringk's md (mem_query) with the memory-type cache off, as main() runs the tests. */
START_TEST(test_kernels_gpu_ucp_rma)
{
    static const size_t lens[] = {8, 4096, 65536, GPU_BYTES};
    static uint8_t host[GPU_BYTES], back[GPU_BYTES];
    int wfd, rfd, status, ndev = 0;
    ucp_mem_map_params_t mparams;
    ucp_request_param_t param;
    ucp_ep_params_t ep_params;
    ucp_mem_h src_memh = NULL, dst_memh = NULL;
    ucp_context_h ctx;
    ucp_worker_h worker;
    void *paddr, *prkey, *src, *dst;
    size_t plen, rkey_len, len, i;
    uint64_t target;
    ucp_rkey_h rkey;
    ucp_ep_h ep;
    pid_t pid;

    pid = gpu_fork_peer(gpu_ucp_peer, 0, &wfd, &rfd);
    if (pid < 0) {
        return;
    }
    ck_assert_int_eq(cudaGetDeviceCount(&ndev), cudaSuccess);
    ck_assert_int_gt(ndev, 0);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    gpu_ucp_open(&ctx, &worker);
    paddr = gpu_read_blob(rfd, &plen);
    prkey = gpu_read_blob(rfd, &rkey_len);
    ck_assert_int_eq(read(rfd, &target, sizeof(target)), sizeof(target));
    ep_params = (ucp_ep_params_t){.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                                  .address    = paddr};
    ck_assert_int_eq(ucp_ep_create(worker, &ep_params, &ep), UCS_OK);
    ck_assert_int_eq(ucp_ep_rkey_unpack(ep, prkey, &rkey), UCS_OK);

    for (i = 0; i < GPU_BYTES; i++) {
        host[i] = gpu_pat(i + (size_t)_i);
    }
    ck_assert_int_eq(cudaMalloc(&src, GPU_BYTES), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&dst, GPU_BYTES), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(src, host, GPU_BYTES, cudaMemcpyHostToDevice), cudaSuccess);
    param = (ucp_request_param_t){.op_attr_mask = 0};
    if (_i == 0) {
        param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        param.memory_type  = UCS_MEMORY_TYPE_CUDA;
    } else {
        mparams = (ucp_mem_map_params_t){
            .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
            .address    = src,
            .length     = GPU_BYTES
        };
        ck_assert_int_eq(ucp_mem_map(ctx, &mparams, &src_memh), UCS_OK);
        mparams.address = dst;
        ck_assert_int_eq(ucp_mem_map(ctx, &mparams, &dst_memh), UCS_OK);
    }
    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        len = lens[i];
        ck_assert_int_eq(cudaMemset(dst, 0, len), cudaSuccess);
        ck_assert_int_eq(gpu_ucp_wait(worker, ucp_put_nbx(ep, src, len, target, rkey, &param)),
                         UCS_OK);
        ck_assert_int_eq(gpu_ucp_wait(worker, ucp_ep_flush_nbx(ep, &param)), UCS_OK);
        ck_assert_int_eq(gpu_ucp_wait(worker, ucp_get_nbx(ep, dst, len, target, rkey, &param)),
                         UCS_OK);
        ck_assert_int_eq(cudaMemcpy(back, dst, len, cudaMemcpyDeviceToHost), cudaSuccess);
        ck_assert_msg(!memcmp(back, host, len), "%zu bytes: the device memory read back differs",
                      len);
    }
    /* the peer's own copy of its memory agrees */
    gpu_peer_content(wfd, rfd, back);
    ck_assert_mem_eq(back, host, GPU_BYTES);

    ucp_rkey_destroy(rkey);
    gpu_ucp_wait(worker, ucp_ep_close_nbx(ep, &(ucp_request_param_t){.op_attr_mask = 0}));
    if (src_memh != NULL) {
        ucp_mem_unmap(ctx, src_memh);
        ucp_mem_unmap(ctx, dst_memh);
    }
    ck_assert_int_eq(write(wfd, "q", 1), 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0), "peer status 0x%x", status);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    free(paddr);
    free(prkey);
    cudaFree(src);
    cudaFree(dst);
}
END_TEST

/* The device count, asked in a child so that this process never starts CUDA before the test
 * processes fork from it. */
static int device_count_in_child(char *why, size_t why_len)
{
    int fds[2], n = 0, status;
    char buf[256] = "";
    pid_t pid;

    if (pipe(fds) != 0) {
        snprintf(why, why_len, "pipe: %m");
        return 0;
    }
    pid = fork();
    if (pid == 0) {
        n = ringk_kernels_device_count(buf, sizeof(buf));
        if ((write(fds[1], &n, sizeof(n)) != sizeof(n)) ||
            (write(fds[1], buf, sizeof(buf)) != sizeof(buf))) {
            _exit(1);
        }
        _exit(0);
    }
    close(fds[1]);
    if ((pid < 0) || (read(fds[0], &n, sizeof(n)) != sizeof(n)) ||
        (read(fds[0], buf, sizeof(buf)) != sizeof(buf))) {
        snprintf(why, why_len, "the device-count child failed");
        n = 0;
    } else {
        snprintf(why, why_len, "%s", buf);
    }
    close(fds[0]);
    if (pid > 0) {
        waitpid(pid, &status, 0);
    }
    return n;
}

int main(int argc, char **argv)
{
    Suite *s = suite_create("kernels");
    TCase *tc;
    char why[256] = "";

    if (device_count_in_child(why, sizeof(why)) == 0) {
        return test_skip_all(why);
    }
    /* UCP finds device buffers through ringk's memory queries only with its memory-type cache
     * off: UCM of a UCX built without CUDA never sees cudaMalloc. libucs reads the setting
     * when it loads, so the test runs again with it. */
    if (getenv("UCX_MEMTYPE_CACHE") == NULL) {
        setenv("UCX_MEMTYPE_CACHE", "n", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    tc = tcase_create("ring");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_kernels_ring_selftest, 0,
                        sizeof(selftest_cases) / sizeof(selftest_cases[0]));
    tcase_add_test(tc, test_kernels_p2p_canary);
    suite_add_tcase(s, tc);
    tc = tcase_create("transport");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_kernels_gpu_rma, 0,
                        sizeof(gpu_rma_cases) / sizeof(gpu_rma_cases[0]));
    tcase_add_loop_test(tc, test_kernels_gpu_ucp_rma, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("ipc");
    tcase_set_timeout(tc, 120);
    test_kernels_ipc_cases(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("peer");
    tcase_set_timeout(tc, 120);
    test_kernels_peer_cases(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("p2pq");
    tcase_set_timeout(tc, 120);
    test_kernels_p2pq_cases(tc);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
#else
int main(int argc, char **argv)
{
    return test_skip_all("built without CUDA (configure --without-cuda or no CUDA Toolkit)");
}
#endif
