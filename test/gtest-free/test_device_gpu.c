/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the device executor with the kernels of kernels/ringk_dev_test.cu compiled by nvcc.
 * Without a GPU: a CUDA-only kernel is refused with -ENODEV and the reason, CPU | CUDA runs on
 * the CPU. With a GPU: the emulated-device scenarios again on the device (every message once in
 * order, CPU <-> GPU ping-pong, GPU-to-GPU sends with relaunch), and the runtime's and the
 * transport's CUDA-touching calls (kernel create and destroy; the transport's copies, bounce
 * buffer allocation, IPC export and open) made while resident kernels run, each with a bounded
 * wait. */
#include "ringk_config.h"
#include "test_log.h"
#include "test_util.h"

#include <errno.h>
#include <string.h>

#ifdef HAVE_CUDA
#define TEST_DEVICE_LOG_LEVEL RINGK_LOG_INFO
#include "core/ringk_cuda.h"
#include "test_device_util.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int ndevices;

/* Whether the driver's library can be loaded (a machine with an NVIDIA driver has it). */
static int libcuda_loadable(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY);

    if (lib != NULL) {
        dlclose(lib);
    }
    return lib != NULL;
}

static uint64_t cpu_count;

static int cpu_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    __atomic_add_fetch(&cpu_count, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Without a GPU, a CUDA-only kernel of a CUDA entry is -ENODEV with the reason; with one, a
 * placement past the devices is. CPU | CUDA falls back to the CPU handler then. */
START_TEST(test_device_gpu_nodev)
{
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t p = dev_params("k", &ringk_dev_test_count, NULL);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_DEVICE};
    ringk_kernel_t *k;

    if (ndevices > 0) {
        p.field_mask |= RINGK_KERNEL_PARAM_FIELD_PLACEMENT;
        p.placement   = ndevices;
    }
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), -ENODEV);
    ck_assert_msg((strstr(logbuf, "no CUDA device") != NULL) ||
                  (strstr(logbuf, "no NVIDIA driver") != NULL) ||
                  (strstr(logbuf, "CUDA devices") != NULL), "log: %s", logbuf);
    if ((access("/proc/driver/nvidia/version", R_OK) != 0) && !libcuda_loadable()) {
        /* no driver at all: said so, not as CUDA's "driver version is insufficient" */
        ck_assert_msg((strstr(logbuf, "no NVIDIA driver (libcuda.so.1 not found)") != NULL) &&
                      (strstr(logbuf, "insufficient") == NULL), "log: %s", logbuf);
    }
    cpu_count     = 0;
    p.field_mask |= RINGK_KERNEL_PARAM_FIELD_HANDLER;
    p.backends    = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA;
    p.handler     = cpu_handler;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(ringk_kernel_stats_query(k, &st), 0);
    ck_assert_int_eq(st.device, RINGK_DEVICE_NONE);
    ck_assert_int_eq(ringk_send(ctx, NULL, "k", RINGK_MSG_DATA, NULL, 0, 1000), 0);
    test_wait_u64(&cpu_count, 1, 30);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* A result block in mapped memory: the host's address, and the device's in *dev_p. */
static ringk_dev_test_t *test_block(ringk_dev_test_t **dev_p)
{
    void *host, *dev;

    ck_assert_int_eq(cudaHostAlloc(&host, sizeof(ringk_dev_test_t), cudaHostAllocMapped), 0);
    ck_assert_int_eq(cudaHostGetDevicePointer(&dev, host, 0), 0);
    memset(host, 0, sizeof(ringk_dev_test_t));
    *dev_p = dev;
    return host;
}

/* The arg check's rules on CUDA's account of a pointer (no GPU needed): managed memory and the
 * kernel's device's own memory pass, another device's does not; pinned memory passes at the
 * address the device uses (at the host's only where the device reads that too), not where it
 * is not mapped for the device; other host memory only with pageable memory access; an
 * address in no mapping of the process is no memory at all (an integer). */
START_TEST(test_device_gpu_arg_rules)
{
    static int word;
    const void *p = &word, *q = (const void*)((uintptr_t)&word + 4096);
    char why[256];
    int local = 0;

#define JUDGE(dev, type, owner, dp, pageable, host_ptr) \
    ringk_dev_test_judge(dev, p, type, owner, dp, pageable, host_ptr, why, sizeof(why))
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeManaged, 0, p, 0, 0), 1);
    ck_assert_int_eq(JUDGE(1, cudaMemoryTypeDevice, 1, p, 0, 0), 1);
    ck_assert_int_eq(JUDGE(1, cudaMemoryTypeDevice, 0, p, 1, 1), 0);
    ck_assert_msg(strstr(why, "is memory of CUDA device 0, not of device 1") != NULL, "%s", why);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeHost, 0, p, 0, 0), 1);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeHost, 0, q, 1, 0), 0);
    ck_assert_msg(strstr(why, "pinned host memory at its host address: CUDA device 0 reads it "
                              "at") != NULL, "%s", why);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeHost, 0, q, 0, 1), 1);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeHost, 0, NULL, 1, 1), 0);
    ck_assert_msg(strstr(why, "not mapped for CUDA device 0") != NULL, "%s", why);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeUnregistered, -2, NULL, 0, 1), 0);
    ck_assert_msg(strstr(why, "host memory that CUDA device 0 cannot read") != NULL, "%s", why);
    ck_assert_int_eq(JUDGE(0, cudaMemoryTypeUnregistered, -2, NULL, 1, 0), 1);
#undef JUDGE
    ck_assert_int_eq(ringk_dev_test_mapped_here(&word), 1);
    ck_assert_int_eq(ringk_dev_test_mapped_here(&local), 1);
    ck_assert_int_eq(ringk_dev_test_mapped_here((const void*)(uintptr_t)42), 0);
}
END_TEST

/* A kernel's arg in ordinary host memory: refused with -EFAULT and the reason where the GPU has
 * no pageable memory access (a fault would end the context), taken and used where it has;
 * mapped memory at its device address is taken either way. */
START_TEST(test_device_gpu_arg)
{
    static ringk_dev_test_t plain;
    ringk_dev_test_t *t, *t_d;
    ringk_ctx_t *ctx = ctx_new();
    ringk_kernel_params_t p;
    ringk_kernel_t *k;
    uint32_t v[2] = {0, 0}; /* producer 0's first message */
    int pageable = 0;

    ck_assert_int_eq(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0),
                     cudaSuccess);
    printf("# CUDA device 0: pageable memory access %d\n", pageable);
    memset(&plain, 0, sizeof(plain));
    p = dev_params("plain", &ringk_dev_test_count, &plain);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), pageable ? 0 : -EFAULT);
    if (pageable) {
        ck_assert_int_eq(ringk_send(ctx, NULL, "plain", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
        test_wait_u64(&plain.count, 1, 30);
    } else {
        ck_assert_msg(strstr(logbuf, "kernel 'plain' (CUDA backend only): arg 0x") != NULL,
                      "log: %s", logbuf);
    }
    t = test_block(&t_d);
    p = dev_params("mapped", &ringk_dev_test_count, t_d);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "mapped", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&t->count, 1, 30);
    ringk_ctx_destroy(ctx);
    cudaFreeHost(t);
}
END_TEST

/* Host threads' sends reach a GPU kernel in order; two GPU kernels forward into it device to
 * device; an event-driven GPU kernel is relaunched by its messages; and while they are resident,
 * more device kernels are created and destroyed (each call bounded by the test's timeout). */
START_TEST(test_device_gpu_scenarios)
{
    static const char *const to_sink[] = {"sink", NULL};
    enum { N = 2000 };
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t *ts_d, *tf_d, *tx_d;
    ringk_dev_test_t *ts = test_block(&ts_d), *tf = test_block(&tf_d), *tx = test_block(&tx_d);
    ringk_kernel_params_t p = dev_params("sink", &ringk_dev_test_count, ts_d);
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_kernel_t *sink, *fwd, *extra;
    uint32_t i, v[2];

    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &sink), 0);
    p = dev_params("fwd", &ringk_dev_test_forward, tf_d);
    p.field_mask    |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO | RINGK_KERNEL_PARAM_FIELD_MODE |
                       RINGK_KERNEL_PARAM_FIELD_MAX_ITERATIONS;
    p.publishes_to   = to_sink;
    p.mode           = RINGK_MODE_EVENT_DRIVEN;
    p.max_iterations = 1000;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &fwd), 0);
    for (i = 0; i < N; i++) {
        v[0] = i % 2;
        v[1] = i / 2;
        ck_assert_int_eq(ringk_send(ctx, NULL, (i % 2) ? "fwd" : "sink", RINGK_MSG_DATA, v,
                                    sizeof(v), RINGK_WAIT_FOREVER), 0);
    }
    test_wait_u64(&ts->count, N, 60);
    ck_assert_uint_eq(ts->out_of_order, 0);
    ck_assert_uint_eq(ts->ring_scopes, RINGK_RING_SCOPE_DEVICE | (RINGK_RING_SCOPE_SYSTEM << 8) |
                                       (RINGK_RING_SCOPE_SYSTEM << 16));
    /* the host's messages came as the staged copy in device memory, the forwarded ones not */
    ck_assert_uint_eq(ts->staged, N / 2);
    /* messages of several cells: the staged copy's first cell and the rest, byte for byte */
    {
        uint8_t big[1003];
        uint64_t big_sum = 0;

        memcpy(big, (uint32_t[2]){2, 0}, 8); /* producer 2, its messages 0..2 */
        for (i = 8; i < sizeof(big); i++) {
            big[i]   = (uint8_t)(i * 13 + 5);
            big_sum += big[i];
        }
        for (i = 0; i < 3; i++) {
            ((uint32_t*)big)[1] = i;
            ck_assert_int_eq(ringk_send(ctx, NULL, "sink", RINGK_MSG_DATA, big, sizeof(big),
                                        RINGK_WAIT_FOREVER), 0);
        }
        test_wait_u64(&ts->count, N + 3, 60);
        ck_assert_uint_eq(ts->tail_sum, 3 * big_sum);
        ck_assert_uint_eq(ts->staged, N / 2 + 3);
        ck_assert_uint_eq(ts->out_of_order, 0);
    }
    /* fwd counts a message after its send returned: the sink may have counted it first */
    test_wait_u64(&tf->count, N / 2, 30);
    ck_assert_int_eq(tf->last_error, 0);
    for (i = 0; i < 30000; i++) {
        ck_assert_int_eq(ringk_kernel_stats_query(fwd, &st), 0);
        if (st.sent_direct == N / 2) {
            break;
        }
        usleep(1000);
    }
    ck_assert_int_eq(st.device, 0);
    ck_assert_uint_eq(st.sent_direct, N / 2);
    /* resident kernels run: create and destroy another, twice (its memory comes from the slabs
     * allocated before they ran, the second time the first one's memory again); a create or
     * destroy that waited for them would hang here, and the test's timeout fails it */
    for (i = 0; i < 2; i++) {
        p = dev_params("extra", &ringk_dev_test_count, tx_d);
        ck_assert_int_eq(ringk_kernel_create(ctx, &p, &extra), 0);
        v[0] = 0;
        v[1] = i;
        ck_assert_int_eq(ringk_send(ctx, NULL, "extra", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
        test_wait_u64(&tx->count, i + 1, 30);
        ck_assert_int_eq(ringk_kernel_destroy(extra), 0);
    }
    ck_assert_uint_eq(tx->out_of_order, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

static uint64_t pongs;

static int ping_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint32_t v[2];

    memcpy(v, ringk_msg_payload(msg), sizeof(v));
    if (++v[1] < 1000) {
        ringk_send_route(ringk_kernel_ctx(k), k, 0, RINGK_MSG_DATA, v, sizeof(v),
                         RINGK_WAIT_FOREVER);
    }
    __atomic_add_fetch(&pongs, 1, __ATOMIC_RELEASE);
    return 0;
}

/* A CPU kernel and a GPU kernel bounce a message 1000 times. */
START_TEST(test_device_gpu_pingpong)
{
    static const char *const to_echo[] = {"echo", NULL}, *const to_ping[] = {"ping", NULL};
    ringk_ctx_t *ctx = ctx_new();
    ringk_dev_test_t *t_d, *t = test_block(&t_d);
    ringk_kernel_params_t p = dev_params("echo", &ringk_dev_test_echo, t_d);
    ringk_kernel_params_t cp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "ping", .handler = ping_handler, .publishes_to = to_echo
    };
    ringk_kernel_t *echo, *ping;
    uint32_t v[2] = {0, 0};

    pongs = 0;
    p.field_mask  |= RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO;
    p.publishes_to = to_ping;
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &echo), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &cp, &ping), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "echo", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&pongs, 1000, 60);
    ck_assert_int_eq(t->last_error, 0);
    ringk_ctx_destroy(ctx);
}
END_TEST

/* ---- no deadlock with resident kernels ------------------------------------------------------ */

enum { OP_COPY_D2D, OP_COPY_H2D, OP_COPY_D2H, OP_HOST_ALLOC, OP_IPC_EXPORT, OP_IPC_OPEN };

typedef struct {
    int     op;
    void   *dst, *src;
    size_t  len;
    uint8_t handle[128];
    int     ret, done;
    char    why[160];
} cuda_call_t;

static void *call_main(void *arg)
{
    cuda_call_t *c = arg;
    uint64_t base, size;
    void *p;

    switch (c->op) {
    case OP_COPY_D2D:
    case OP_COPY_H2D:
    case OP_COPY_D2H:
        c->ret = ringk_cuda_copy(c->dst, c->src, c->len, c->why, sizeof(c->why));
        break;
    case OP_HOST_ALLOC: /* the transport's pinned GPU bounce buffer, freed (as the transport
                         * does, at its iface's close) once no kernel runs */
        c->dst = ringk_cuda_host_alloc(c->len);
        c->ret = (c->dst != NULL) ? 0 : -ENOMEM;
        break;
    case OP_IPC_EXPORT:
        c->ret = ringk_cuda_ipc_export(c->src, c->handle, &base, &size, c->why, sizeof(c->why));
        break;
    case OP_IPC_OPEN: /* of this process's own handle: refused, but it must return */
        c->ret = ringk_cuda_ipc_open(c->handle, c->len, &p, c->why, sizeof(c->why));
        if (c->ret == 0) {
            ringk_cuda_ipc_close(p);
        }
        break;
    }
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Makes @a c on a thread of its own and waits for it at most 20 s: a call that waits for the
 * resident kernels fails the test, naming itself (its thread is left behind). */
static int bounded_call(cuda_call_t *c, const char *what)
{
    struct timespec ts = {0, 1000000};
    pthread_t th;
    int i;

    ck_assert_int_eq(pthread_create(&th, NULL, call_main, c), 0);
    for (i = 0; (i < 20000) && !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE); i++) {
        nanosleep(&ts, NULL);
    }
    ck_assert_msg(__atomic_load_n(&c->done, __ATOMIC_ACQUIRE), "%s did not return in 20 s with "
                  "resident kernels running", what);
    pthread_join(th, NULL);
    return c->ret;
}

/* With persistent device kernels resident (one taking messages all along), the transport's
 * CUDA calls each return within a bound and do their work, and the kernel still runs. */
START_TEST(test_device_gpu_no_deadlock)
{
    enum { LEN = 1 << 20 };
    ringk_ctx_t *ctx;
    ringk_dev_test_t *t_d, *t = test_block(&t_d);
    ringk_kernel_params_t p;
    ringk_kernel_t *k;
    uint8_t *dev_a, *dev_b, *pinned, *pageable = malloc(LEN);
    void *bounce;
    cuda_call_t c;
    uint32_t v[2] = {0, 0}, i;

    /* every buffer before any kernel runs */
    ck_assert_int_eq(cudaMalloc((void**)&dev_a, LEN), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void**)&dev_b, LEN), cudaSuccess);
    ck_assert_int_eq(cudaMallocHost((void**)&pinned, LEN), cudaSuccess);
    ck_assert_ptr_nonnull(pageable);
    for (i = 0; i < LEN; i++) {
        pinned[i] = (uint8_t)(i * 7 + 1);
    }
    ctx = ctx_new();
    p   = dev_params("sink", &ringk_dev_test_count, t_d);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    p = dev_params("other", &ringk_dev_test_count, NULL);
    ck_assert_int_eq(ringk_kernel_create(ctx, &p, &k), 0);
    ck_assert_int_eq(ringk_send(ctx, NULL, "sink", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    test_wait_u64(&t->count, 1, 30); /* resident and taking messages */

    memset(&c, 0, sizeof(c));
    c.op = OP_COPY_H2D; c.dst = dev_a; c.src = pinned; c.len = LEN;
    ck_assert_int_eq(bounded_call(&c, "copy host -> device (ringk_cuda_copy)"), 0);
    memset(&c, 0, sizeof(c));
    c.op = OP_COPY_D2D; c.dst = dev_b; c.src = dev_a; c.len = LEN;
    ck_assert_int_eq(bounded_call(&c, "copy device -> same device (ringk_cuda_copy)"), 0);
    memset(&c, 0, sizeof(c));
    c.op = OP_COPY_D2H; c.dst = pageable; c.src = dev_b; c.len = LEN;
    ck_assert_int_eq(bounded_call(&c, "copy device -> pageable host (ringk_cuda_copy)"), 0);
    ck_assert_int_eq(memcmp(pageable, pinned, LEN), 0);
    memset(&c, 0, sizeof(c));
    c.op = OP_HOST_ALLOC; c.len = 4 << 20;
    ck_assert_int_eq(bounded_call(&c, "pinned allocation (ringk_cuda_host_alloc)"), 0);
    bounce = c.dst;
    memset(&c, 0, sizeof(c));
    c.op = OP_IPC_EXPORT; c.src = dev_a;
    ck_assert_int_eq(bounded_call(&c, "IPC export (ringk_cuda_ipc_export)"), 0);
    c.op = OP_IPC_OPEN; c.len = LEN; c.done = 0;
    bounded_call(&c, "IPC open (ringk_cuda_ipc_open)"); /* its result: refused in-process */

    for (i = 1; i < 100; i++) { /* the kernel kept running through all of it */
        v[1] = i;
        ck_assert_int_eq(ringk_send(ctx, NULL, "sink", RINGK_MSG_DATA, v, sizeof(v), 1000), 0);
    }
    test_wait_u64(&t->count, 100, 30);
    ck_assert_uint_eq(t->out_of_order, 0);
    ringk_ctx_destroy(ctx);
    ringk_cuda_host_free(bounce);
    cudaFree(dev_a);
    cudaFree(dev_b);
    cudaFreeHost(pinned);
    free(pageable);
}
END_TEST

/* The device count, asked in a child: CUDA must not be initialised in this process before
 * Check forks the test processes from it (CUDA in a forked child of a process that used it is
 * undefined). */
static int device_count_in_child(void)
{
    int fds[2], n = 0, status;
    pid_t pid;

    if (pipe(fds) != 0) {
        return 0;
    }
    pid = fork();
    if (pid == 0) {
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            n = 0;
        }
        _exit((write(fds[1], &n, sizeof(n)) == sizeof(n)) ? 0 : 1);
    }
    close(fds[1]);
    if ((pid < 0) || (read(fds[0], &n, sizeof(n)) != sizeof(n))) {
        n = 0;
    }
    close(fds[0]);
    if (pid > 0) {
        waitpid(pid, &status, 0);
    }
    return n;
}

int main(void)
{
    Suite *s  = suite_create("device_gpu");
    TCase *tc = tcase_create("device_gpu");

    const char *only = getenv("RINGK_DEVICE_GPU_ONLY");

    ndevices = device_count_in_child();
    /* short: a test that hangs costs the lent GPU's time (CK_TIMEOUT_MULTIPLIER scales it) */
    tcase_set_timeout(tc, 60);
    /* RINGK_DEVICE_GPU_ONLY=name: that GPU test alone (compute-sanitizer serializes kernel
     * launches, so only one resident kernel at a time can run under it) */
    if (only == NULL) {
        tcase_add_test(tc, test_device_gpu_nodev);
        tcase_add_test(tc, test_device_gpu_arg_rules);
    }
    if (ndevices > 0) {
        if ((only == NULL) || !strcmp(only, "scenarios")) {
            tcase_add_test(tc, test_device_gpu_scenarios);
        }
        if ((only == NULL) || !strcmp(only, "pingpong")) {
            tcase_add_test(tc, test_device_gpu_pingpong);
        }
        if ((only == NULL) || !strcmp(only, "no_deadlock")) {
            tcase_add_test(tc, test_device_gpu_no_deadlock);
        }
        if ((only == NULL) || !strcmp(only, "arg")) {
            tcase_add_test(tc, test_device_gpu_arg);
        }
    } else {
        printf("# no CUDA device: the GPU scenarios are not run (test_device runs them on the "
               "emulated device)\n");
    }
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
#else
int main(void)
{
    return test_skip_all("built without CUDA (configure --without-cuda or no CUDA Toolkit)");
}
#endif
