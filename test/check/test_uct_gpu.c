/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the ringk transport's GPU memory paths, chosen per endpoint from the two GPUs'
 * places in the topology. */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "test_util.h"
#include "test_uct.h"
#include "test_uct_ep.h"

#include <core/ringk_cuda.h>
#include <core/ringk_ring.h>
#include <core/ringk_topo.h>
#include <uct/ringk/base/ringk_rkey.h>
#include <uct/ringk/ring/ringk_seg.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucs/debug/log_def.h>
#include <inttypes.h>
#include <limits.h>
#include <time.h>
#include <uct/api/uct.h>
#include <unistd.h>

/* ---- GPU memory paths: chosen per endpoint from the two GPUs' places ------------------------ */

/* Each case: a topology fixture, the GPU of each iface (UCX_RINGK_GPU), the overrides, and the
 * path and words of the reason the endpoint must report (NULL path: ep_create must fail). No
 * GPU is needed: the locations come from the configuration and the topology from the file. */
static const struct {
    const char *topo, *gpu_a, *gpu_b, *p2p_level, *force;
    const char *path, *why;
} gpu_paths[] = {
    {"nvswitch-8gpu.xml", "0000:14:00.0", "0000:94:00.0", NULL, NULL, "P2P_NVLINK",
     "GPU 0000:14:00.0 -> 0000:94:00.0 (GPU0-GPU4 of"},
    {"nvswitch-8gpu.xml", "0000:14:00.0", "0000:94:00.0", NULL, NULL, "P2P_NVLINK",
     "NVSwitch fabric: 18 NVLinks (gen 4)"},
    {"nvswitch-8gpu.xml", "0000:18:00.0", "0000:18:00.0", NULL, NULL, "CUDA_IPC",
     "one GPU, its memory mapped by CUDA IPC"},
    {"pcie-4gpu.xml", "0000:04:00.0", "05:00.0", NULL, NULL, "P2P_PCIE",
     "share a PCIe switch (1 switch level)"},
    {"pcie-4gpu.xml", "0000:04:00.0", "0000:07:00.0", NULL, NULL, "HOST_STAGED",
     "HOST_BRIDGE is beyond RINGK_P2P_LEVEL=PCIE_SWITCH"},
    {"pcie-4gpu.xml", "0000:04:00.0", "0000:07:00.0", "HOST_BRIDGE", NULL, "P2P_PCIE",
     "HOST_BRIDGE within RINGK_P2P_LEVEL=HOST_BRIDGE"},
    {"pcie-4gpu.xml", "0000:04:00.0", "0000:07:00.0", NULL, "CUDA_IPC", "CUDA_IPC",
     "forced by RINGK_PATH=CUDA_IPC"},
    {"pcie-4gpu.xml", "0000:04:00.0", "0000:05:00.0", NULL, "P2P_NVLINK", NULL,
     "RINGK_PATH=P2P_NVLINK cannot serve a PCIE_SWITCH pair"},
    {"dual-socket.xml", "0000:17:00.0", "0000:b1:00.0", NULL, NULL, "P2P_NVLINK",
     "2 direct NVLinks (gen 3)"},
    {"dual-socket.xml", "0000:3b:00.0", "0000:b1:00.0", NULL, NULL, "HOST_STAGED",
     "CROSS_SOCKET is beyond RINGK_P2P_LEVEL"},
    {"vm-flat.xml", "0000:00:05.0", "0000:99:00.0", NULL, NULL, "HOST_STAGED",
     "0000:99:00.0 is not in the topology of"},
    {"pcie-4gpu.xml", "0000:04:00.0", "none", NULL, NULL, "HOST_STAGED",
     "no GPU pair (this process: a GPU; the peer: none)"},
    {"pcie-4gpu.xml", "none", "none", NULL, "P2P_PCIE", "HOST_STAGED",
     "RINGK_PATH is ignored: host memory has only the host-staged path"},
    {"no-such-file.xml", "0000:04:00.0", "0000:05:00.0", NULL, NULL, "HOST_STAGED",
     "no topology ("},
};

START_TEST(test_uct_ep_gpu_path)
{
    ucs_status_t (*query)(uct_ep_h, const char**, const char**);
    const char *src = getenv("RINGK_TOP_SRCDIR"), *path, *reason;
    char file[1024];
    ucs_status_t status;
    node_t a, b;
    uct_ep_h ep;

    *(void**)&query = test_plugin_sym("uct_ringk_ep_path_query");
    ck_assert_ptr_nonnull(query);
    snprintf(file, sizeof(file), "%s/test/check/topo/%s", src ? src : "..",
             gpu_paths[_i].topo);
    setenv("RINGK_TOPO_FILE", file, 1);
    if (gpu_paths[_i].p2p_level != NULL) {
        setenv("RINGK_P2P_LEVEL", gpu_paths[_i].p2p_level, 1);
    }
    if (gpu_paths[_i].force != NULL) {
        setenv("RINGK_PATH", gpu_paths[_i].force, 1);
    }
    node_open(&a, "GPU", gpu_paths[_i].gpu_a);
    node_open(&b, "GPU", gpu_paths[_i].gpu_b);
    unsetenv("RINGK_P2P_LEVEL");
    unsetenv("RINGK_PATH");
    status = node_try_connect(&a, &b, &ep);
    unsetenv("RINGK_TOPO_FILE");
    if (gpu_paths[_i].path == NULL) {
        ck_assert_int_eq(status, UCS_ERR_UNREACHABLE);
        ck_assert_msg(strstr(test_captured, gpu_paths[_i].why) != NULL, "logged '%s'",
                      test_captured);
    } else {
        ck_assert_int_eq(status, UCS_OK);
        ck_assert_int_eq(query(ep, &path, &reason), UCS_OK);
        ck_assert_msg(!strcmp(path, gpu_paths[_i].path) &&
                      (strstr(reason, gpu_paths[_i].why) != NULL), "%s -> %s on %s: path %s, "
                      "reason '%s'", gpu_paths[_i].gpu_a, gpu_paths[_i].gpu_b, gpu_paths[_i].topo,
                      path, reason);
        /* host memory still goes through the rings, whatever the GPU path */
        ck_assert_msg(strstr(reason, "host memory: shared-memory rings") != NULL, "%s", reason);
        send_msg(&a, ep, SEND_SHORT, 0, 64, &b);
        wait_recv(&b, 1);
        uct_ep_destroy(ep);
    }
    node_close(&b);
    node_close(&a);
}
END_TEST

/* The transport's UCX_RINGK_TOPO_FILE / UCX_RINGK_PATH / UCX_RINGK_P2P_LEVEL are used, and win
 * over the plain RINGK_* names of the environment (set here to values that would fail). */
START_TEST(test_uct_ep_gpu_path_ucx_config)
{
    static const struct {
        const char *level, *force, *path, *why;
    } cases[] = {
        {NULL, "CUDA_IPC", "CUDA_IPC", "forced by UCX_RINGK_PATH=CUDA_IPC"},
        {"HOST_BRIDGE", NULL, "P2P_PCIE", "HOST_BRIDGE within UCX_RINGK_P2P_LEVEL=HOST_BRIDGE"},
    };
    ucs_status_t (*query)(uct_ep_h, const char**, const char**);
    const char *src = getenv("RINGK_TOP_SRCDIR"), *path, *reason;
    char file[1024];
    node_t a, b;
    uct_ep_h ep;

    *(void**)&query = test_plugin_sym("uct_ringk_ep_path_query");
    ck_assert_ptr_nonnull(query);
    snprintf(file, sizeof(file), "%s/test/check/topo/pcie-4gpu.xml", src ? src : "..");
    setenv("UCX_RINGK_TOPO_FILE", file, 1);
    setenv("RINGK_TOPO_FILE", "/nonexistent/topology.xml", 1);
    setenv("RINGK_PATH", "P2P_NVLINK", 1);       /* no NVLink in the file: unreachable */
    setenv("RINGK_P2P_LEVEL", "SAME_DEVICE", 1); /* P2P for no pair of two GPUs */
    if (cases[_i].force != NULL) {
        setenv("UCX_RINGK_PATH", cases[_i].force, 1);
    } else {
        /* an empty UCX setting leaves the plain one in force: overridden here by the level */
        unsetenv("RINGK_PATH");
        setenv("UCX_RINGK_P2P_LEVEL", cases[_i].level, 1);
    }
    node_open(&a, "GPU", "0000:04:00.0");
    node_open(&b, "GPU", "0000:07:00.0");
    unsetenv("UCX_RINGK_TOPO_FILE");
    unsetenv("UCX_RINGK_PATH");
    unsetenv("UCX_RINGK_P2P_LEVEL");
    unsetenv("RINGK_TOPO_FILE");
    unsetenv("RINGK_PATH");
    unsetenv("RINGK_P2P_LEVEL");
    ck_assert_int_eq(node_try_connect(&a, &b, &ep), UCS_OK);
    ck_assert_int_eq(query(ep, &path, &reason), UCS_OK);
    ck_assert_msg(!strcmp(path, cases[_i].path) && (strstr(reason, cases[_i].why) != NULL),
                  "path %s, reason '%s'", path, reason);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

/* Without a usable CUDA driver the md registers host memory only, detects host pointers as host,
 * and a peer's CUDA remote key is unreachable, never mapped (a key of this process is used in
 * place); a CUDA key whose range leaves its allocation is refused before any CUDA call. */
static char libringk_log[1024];

static void libringk_log_hook(void *arg, int level, const char *message)
{
    (void)arg;
    (void)level;
    snprintf(libringk_log + strlen(libringk_log), sizeof(libringk_log) - strlen(libringk_log),
             "%s\n", message);
}

/* In a process that has libringk, a peer's CUDA key is imported through libringk's import
 * cache (which then says why it cannot map it here), not by the transport's own table. */
static void rkey_through_libringk(uct_ringk_packed_rkey_t packed)
{
    const char *dir = getenv("RINGK_TOP_BUILDDIR");
    int (*hook_set)(void (*)(void*, int, const char*), void*);
    uct_rkey_bundle_t rkey;
    char path[PATH_MAX];
    void *lib;

#ifndef HAVE_CUDA
    printf("# built without CUDA: the transport maps no CUDA memory, through libringk or not\n");
    return;
#endif
    snprintf(path, sizeof(path), "%s/src/ringk/.libs/libringk.so.1", dir ? dir : ".");
    if ((dir == NULL) || ((lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL)) == NULL)) {
        printf("# libringk not found (RINGK_TOP_BUILDDIR): a key through its cache is not "
               "checked\n");
        return;
    }
    *(void**)&hook_set = dlsym(lib, "ringk_log_hook_set");
    ck_assert_ptr_nonnull(hook_set);
    ck_assert_int_eq(hook_set(libringk_log_hook, NULL), 0);
    packed.ipc_valid = 1;
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &rkey), UCS_OK);
    ck_assert_msg(strstr(libringk_log, "ringk_ipc_import") != NULL, "libringk logged '%s'",
                  libringk_log);
    /* not mapped: reached by staging */
    ck_assert_ptr_null(((uct_ringk_rkey_t*)rkey.rkey)->mapped);
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &rkey), UCS_OK);
    hook_set(NULL, NULL);
}

START_TEST(test_uct_ep_cuda_rkey_without_gpu)
{
    uct_ringk_packed_rkey_t packed = {
        .hdr = {.magic = UCT_RINGK_RKEY_MAGIC, .pid = 1234, .address = 0x7f0000001000,
                .length = 4096},
        .mem_type = UCS_MEMORY_TYPE_CUDA, .gpu = 0, .alloc_base = 0x7f0000000000,
        .alloc_size = 1 << 20
    };
    ucs_memory_type_t mem_type;
    uct_rkey_bundle_t rkey;
    uct_md_attr_t attr;
    ucs_status_t status;
    static char host[64];
    char why[128];
    uct_md_h md;
    int i;

    if (ringk_cuda_usable(why, sizeof(why))) {
        printf("# CUDA is usable here: the no-GPU behaviour is not checked\n");
        return;
    }
    md = test_ringk_md_open();
    ck_assert_int_eq(uct_md_query(md, &attr), UCS_OK);
    ck_assert_uint_eq(attr.cap.reg_mem_types, UCS_BIT(UCS_MEMORY_TYPE_HOST));
    ck_assert_uint_eq(attr.cap.detect_mem_types, 0);
    ck_assert_uint_ge(attr.rkey_packed_size, sizeof(packed));
    ck_assert_int_eq(uct_md_detect_memory_type(md, host, sizeof(host), &mem_type), UCS_OK);
    ck_assert_int_eq(mem_type, UCS_MEMORY_TYPE_HOST);

    packed.gpu       = ringk_busid_pack("0000:14:00.0");
    /* cannot be mapped here, or the owner could not export it: a key all the same, which
     * puts and gets reach through the staging area the owner serves */
    for (i = 0; i < 2; i++) {
        packed.ipc_valid = !i;
        ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &rkey), UCS_OK);
        ck_assert_ptr_null(((uct_ringk_rkey_t*)rkey.rkey)->mapped);
        ck_assert_int_eq(((uct_ringk_rkey_t*)rkey.rkey)->own, 0);
        ck_assert_int_eq(((uct_ringk_rkey_t*)rkey.rkey)->dev, -1); /* no stream to copy on */
        ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &rkey), UCS_OK);
    }
    /* a key of this very process is not mapped but used in place */
    packed.hdr.pid = (uint32_t)getpid();
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &rkey), UCS_OK);
    ck_assert_ptr_eq(((uct_ringk_rkey_t*)rkey.rkey)->mapped, (void*)(uintptr_t)packed.alloc_base);
    ck_assert_int_eq(((uct_ringk_rkey_t*)rkey.rkey)->own, 1);
    /* its GPU's ordinal here, when this process sees a GPU at that bus id (none here: the
     * copies then go on the calling thread's device's stream) */
    {
        int dev = -1;
        char why[128];

        if (ringk_cuda_busid_dev("0000:14:00.0", &dev, why, sizeof(why)) != 0) {
            dev = -1;
        }
        ck_assert_int_eq(((uct_ringk_rkey_t*)rkey.rkey)->dev, dev);
    }
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &rkey), UCS_OK);
    rkey.rkey   = 0; /* never unpacked, as UCX's perftest releases keys on its error path */
    rkey.handle = NULL;
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &rkey), UCS_OK);
    packed.hdr.pid = 1234;

    rkey_through_libringk(packed);

    packed.hdr.address = packed.alloc_base + packed.alloc_size - 100; /* runs past its allocation */
    test_capture_errors_begin();
    status = uct_rkey_unpack(test_ringk_component(), &packed, &rkey);
    test_capture_errors_end();
    ck_assert_int_eq(status, UCS_ERR_INVALID_PARAM);
    ck_assert_msg(strstr(test_captured, "is not inside its allocation") != NULL, "logged '%s'",
                  test_captured);
    uct_md_close(md);
}
END_TEST

void test_uct_gpu_tests(TCase *local)
{
    tcase_add_loop_test(local, test_uct_ep_gpu_path, 0, sizeof(gpu_paths) / sizeof(gpu_paths[0]));
    tcase_add_loop_test(local, test_uct_ep_gpu_path_ucx_config, 0, 2);
    tcase_add_test(local, test_uct_ep_cuda_rkey_without_gpu);
}
