/* SPDX-License-Identifier: BSD-3-Clause */
/* On a GPU: device memory shared between two processes by ringk_ipc handles, each type the
 * allocation supports (a legacy handle of cudaMalloc memory, a POSIX descriptor of cuMemCreate
 * memory passed over the socket channel), written on both sides and checked on both; and a
 * legacy handle opened twice through the transport's table of mappings. */
#define _GNU_SOURCE
#include "ringk_config.h"
#include "test_util.h"

#ifdef HAVE_CUDA
#include <core/ringk_cuda.h>
#include <ringk/api/ringk.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define IPC_BYTES (4u << 20)

/* How the exporter allocates: the handle type ringk_ipc_export must then choose. */
static const struct {
    const char      *name;
    ringk_ipc_type_t type;
} ipc_cases[] = {
    {"cudaMalloc", RINGK_IPC_TYPE_LEGACY},
    {"cuMemCreate with POSIX descriptors", RINGK_IPC_TYPE_POSIX_FD},
};

/* cuMemCreate memory of @a len bytes on device 0 that exports POSIX descriptors, through the
 * driver the runtime loaded: its address, or 0 with the reason printed. */
static CUdeviceptr vmm_alloc(size_t len)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                       unsigned long long);
    CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                    unsigned long long);
    CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
    CUresult (*gran)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUmemAllocationProp prop;
    CUmemAccessDesc desc;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    size_t g = 0;

    if (lib == NULL) {
        printf("# libcuda.so.1 is not loaded\n");
        return 0;
    }
    *(void**)&create  = dlsym(lib, "cuMemCreate");
    *(void**)&reserve = dlsym(lib, "cuMemAddressReserve");
    *(void**)&map     = dlsym(lib, "cuMemMap");
    *(void**)&access  = dlsym(lib, "cuMemSetAccess");
    *(void**)&gran    = dlsym(lib, "cuMemGetAllocationGranularity");
    *(void**)&release = dlsym(lib, "cuMemRelease");
    if (!create || !reserve || !map || !access || !gran || !release) {
        printf("# the driver lacks a cuMem call\n");
        return 0;
    }
    memset(&prop, 0, sizeof(prop));
    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if ((gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) || (g == 0) ||
        (len % g != 0) || (create(&h, len, &prop, 0) != CUDA_SUCCESS)) {
        printf("# cuMemCreate of %zu bytes (granularity %zu) failed\n", len, g);
        return 0;
    }
    memset(&desc, 0, sizeof(desc));
    desc.location = prop.location;
    desc.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((reserve(&va, len, 0, 0, 0) != CUDA_SUCCESS) || (map(va, len, 0, h, 0) != CUDA_SUCCESS) ||
        (access(va, len, &desc, 1) != CUDA_SUCCESS)) {
        printf("# mapping the cuMemCreate allocation failed\n");
        return 0;
    }
    release(h); /* the mapping holds it */
    return va;
}

/* The exporter (a child): allocates, fills the first half with 0xa5, exports, sends the handle
 * over the socket channel at @a path, then once the importer says it wrote (a byte on @a rfd)
 * checks that the second half is 0x5a. Exits 0 when all held, else a step number. */
static void exporter(int c, const char *path, int rfd)
{
    ringk_ipc_channel_params_t cp = {
        .field_mask = RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE | RINGK_IPC_CHANNEL_PARAM_FIELD_PATH |
                      RINGK_IPC_CHANNEL_PARAM_FIELD_TIMEOUT,
        .role = RINGK_IPC_CHANNEL_LISTEN, .path = path,
        .timeout_ms = 60000 /* the importer starts CUDA meanwhile */
    };
    static uint8_t host[IPC_BYTES];
    ringk_ipc_channel_t *ch;
    ringk_ipc_handle_t h;
    void *dev = NULL;
    char go;
    size_t i;

    if (cudaFree(0) != cudaSuccess) {
        _exit(10);
    }
    if (ipc_cases[c].type == RINGK_IPC_TYPE_LEGACY) {
        if (cudaMalloc(&dev, IPC_BYTES) != cudaSuccess) {
            _exit(11);
        }
    } else if ((dev = (void*)(uintptr_t)vmm_alloc(IPC_BYTES)) == NULL) {
        _exit(19); /* no cuMem memory with POSIX descriptors here: said on stdout */
    }
    if ((cudaMemset(dev, 0xa5, IPC_BYTES / 2) != cudaSuccess) ||
        (cudaDeviceSynchronize() != cudaSuccess)) {
        _exit(12);
    }
    if (ringk_ipc_export((uint8_t*)dev + 4096, RINGK_IPC_TYPES_ANY, &h) != 0) {
        _exit(13);
    }
    if ((h.type != ipc_cases[c].type) || (h.offset != 4096) || (h.size < IPC_BYTES)) {
        printf("# exported as type %d, offset %llu, size %llu\n", (int)h.type,
               (unsigned long long)h.offset, (unsigned long long)h.size);
        _exit(14);
    }
    {
        /* imported by the process that exported it: the allocation itself, nothing mapped
         * (CUDA refuses to open a process's own legacy handle) */
        void *own = NULL;

        if ((ringk_ipc_import(&h, &own) != 0) || (own != (uint8_t*)dev + 4096) ||
            (ringk_ipc_close(own) != 0)) {
            printf("# own import: %p, not %p\n", own, (void*)((uint8_t*)dev + 4096));
            _exit(20);
        }
    }
    if ((ringk_ipc_channel_open(&cp, &ch) != 0) || (ringk_ipc_channel_send(ch, &h) != 0)) {
        _exit(15);
    }
    if (read(rfd, &go, 1) != 1) {
        _exit(16);
    }
    if (cudaMemcpy(host, dev, IPC_BYTES, cudaMemcpyDeviceToHost) != cudaSuccess) {
        _exit(17);
    }
    for (i = IPC_BYTES / 2; i < IPC_BYTES; i++) {
        if (host[i] != 0x5a) {
            printf("# byte %zu is 0x%02x, not the importer's 0x5a\n", i, host[i]);
            _exit(18);
        }
    }
    ringk_ipc_channel_revoke(ch, h.id);
    ringk_ipc_channel_close(ch);
    ringk_ipc_handle_release(&h);
    _exit(0);
}

/* Two processes on device 0: the importer (this one) maps the exporter's allocation through
 * the handle type the allocation supports, reads what the exporter wrote and writes what it
 * checks; a second import reuses the mapping (CUDA refuses a second open of a legacy handle). */
/* The table of mappings under the transport's remote keys (core's, linked into this test as
 * into the plugin): two opens of one legacy handle take one mapping, opened once; the last
 * close unmaps it (no device kernel is resident), so libringk can map it next. */
static void shared_mapping(const ringk_ipc_handle_t *h)
{
    uint64_t opens0, hits0, opens, hits;
    void *a = NULL, *b = NULL;
    char why[256];

    ringk_cuda_ipc_stats(&opens0, &hits0);
    ck_assert_msg(ringk_cuda_ipc_open(h->bytes, h->size, &a, why, sizeof(why)) == 0, "%s", why);
    ck_assert_msg(ringk_cuda_ipc_open(h->bytes, h->size, &b, why, sizeof(why)) == 0, "%s", why);
    ck_assert_ptr_eq(a, b);
    ck_assert_int_eq(ringk_cuda_ipc_open(h->bytes, h->size + 1, &b, why, sizeof(why)), -EINVAL);
    ringk_cuda_ipc_stats(&opens, &hits);
    ck_assert_uint_eq(opens - opens0, 1);
    ck_assert_uint_eq(hits - hits0, 1);
    ringk_cuda_ipc_close(a);
    ringk_cuda_ipc_close(a);
    ck_assert_uint_eq(ringk_cuda_ipc_deferred(), 0);
}

START_TEST(test_kernels_ipc_two_process)
{
    ringk_ipc_channel_params_t cp = {
        .field_mask = RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE | RINGK_IPC_CHANNEL_PARAM_FIELD_PATH |
                      RINGK_IPC_CHANNEL_PARAM_FIELD_TIMEOUT,
        .role = RINGK_IPC_CHANNEL_CONNECT,
        .timeout_ms = 60000 /* the exporter starts CUDA, allocates and exports first */
    };
    static uint8_t host[IPC_BYTES];
    ringk_ipc_cache_stats_t st;
    ringk_ipc_channel_t *ch;
    ringk_ipc_handle_t h;
    char path[64];
    int go[2], status;
    uint8_t *p, *q;
    pid_t pid;
    size_t i;

    if ((getenv("CK_FORK") != NULL) && !strcmp(getenv("CK_FORK"), "no")) {
        printf("# CK_FORK=no: the two-process GPU test is not run\n");
        return;
    }
    snprintf(path, sizeof(path), "/tmp/ringk-test-kipc.%d", (int)getpid());
    cp.path = path;
    ck_assert_int_eq(pipe(go), 0);
    pid = fork(); /* before this process starts CUDA */
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(go[1]);
        exporter(_i, path, go[0]);
    }
    close(go[0]);
    if (ringk_ipc_channel_open(&cp, &ch) != 0) {
        /* the exporter never listened: say why it stopped (19: no cuMem memory here) */
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 19), "%s: no channel; the "
                      "exporter exited with %d", ipc_cases[_i].name,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        printf("# %s: the exporter could not make cuMem memory with POSIX descriptors here: "
               "not run\n", ipc_cases[_i].name);
        return;
    }
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 60000), 0);
    ck_assert_int_eq(h.type, ipc_cases[_i].type);
    ck_assert_int_eq(cudaFree(0), cudaSuccess);
    if (h.type == RINGK_IPC_TYPE_LEGACY) {
        shared_mapping(&h);
    }
    ck_assert_int_eq(ringk_ipc_import(&h, (void**)&p), 0);
    ck_assert_int_eq(ringk_ipc_import(&h, (void**)&q), 0);
    ck_assert_ptr_eq(p, q);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&st), 0);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.misses, 1);
    p -= h.offset; /* the allocation's base here */
    ck_assert_int_eq(cudaMemcpy(host, p, IPC_BYTES / 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (i = 0; i < IPC_BYTES / 2; i++) {
        ck_assert_msg(host[i] == 0xa5, "%s: byte %zu is 0x%02x, not 0xa5", ipc_cases[_i].name,
                      i, host[i]);
    }
    ck_assert_int_eq(cudaMemset(p + IPC_BYTES / 2, 0x5a, IPC_BYTES / 2), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(write(go[1], "x", 1), 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0), "%s: the exporter exited "
                  "with %d", ipc_cases[_i].name, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    /* the revocation, then the end: the mapping is forgotten at its last close */
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 10000), -EPIPE);
    ck_assert_int_eq(ringk_ipc_close(q), 0);
    ck_assert_int_eq(ringk_ipc_close(q), 0);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&st), 0);
    ck_assert_uint_eq(st.entries, 0);
    ck_assert_uint_eq(st.invalidations, 1);
    ringk_ipc_handle_release(&h);
    ringk_ipc_channel_close(ch);
}
END_TEST

void test_kernels_ipc_cases(TCase *tc)
{
    tcase_add_loop_test(tc, test_kernels_ipc_two_process, 0,
                        (int)(sizeof(ipc_cases) / sizeof(ipc_cases[0])));
}
#endif
