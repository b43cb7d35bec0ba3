/* SPDX-License-Identifier: BSD-3-Clause */
/* Every public call of libringk (ringk.h, ringk_hlc.h, ringk_p2pq.h, ringk_ipc.h, the host side of the
 * device API) given a NULL or out-of-range argument: it returns its documented error (or value)
 * and says why in exactly one log line, through the context's hook when it has a context,
 * else the process's (ringk_log_hook_set). One row per case; test_abi.sh checks that every
 * exported function has a row here. */
#define _GNU_SOURCE
#include "test_log.h"
#include "test_util.h"

#include <ringk/api/ringk.h>
#include <ringk/api/ringk_device_abi.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

static char logbuf[16384];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_hook(void *arg, int level, const char *message)
{
    test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
}

/* What the rows call with: a context with the hook, a kernel of it, a queue, scratch space. */
static ringk_ctx_t *ctx;
static ringk_kernel_t *kern;
static ringk_p2pq_t *queue;
static ringk_msg_t msg;
static ringk_kernel_stats_t stats;
static ringk_p2pq_stats_t qstats;
static ringk_hlc_t clk;
static char elem[64];
static unsigned count;

static int nop_handler(ringk_kernel_t *k, const ringk_msg_t *m, void *arg)
{
    return 0;
}

/* an emulated launch that must not run */
static void emu_nothing(const ringk_dev_kernel_t *src, ringk_dev_kernel_t *state)
{
    ck_abort_msg("an emulated launch with bad arguments ran");
}

static void fixture_setup(void)
{
    static const char *barriers[] = {"b", NULL}, *routes[] = {"x", NULL};
    ringk_ctx_params_t cp = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG | RINGK_CTX_PARAM_FIELD_PIN,
                             .log = log_hook, .pin = 0};
    ringk_kernel_params_t kp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_BARRIERS | RINGK_KERNEL_PARAM_FIELD_PUBLISHES_TO,
        .name = "k", .handler = nop_handler, .barriers = barriers, .publishes_to = routes
    };
    ringk_p2pq_params_t qp = {.field_mask = RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE, .elem_size = 8};

    ck_assert_int_eq(ringk_log_hook_set(log_hook, NULL), 0);
    ck_assert_int_eq(ringk_ctx_create(&cp, &ctx), 0);
    ck_assert_int_eq(ringk_kernel_create(ctx, &kp, &kern), 0);
    ck_assert_int_eq(ringk_p2pq_create(&qp, &queue), 0);
    logbuf[0] = '\0';
}

static void fixture_teardown(void)
{
    ringk_p2pq_destroy(queue);
    ringk_ctx_destroy(ctx);
    ringk_log_hook_set(NULL, NULL);
}

/* A row's call, as a function: its result as a long (a pointer: 0 for NULL, else 1; a void
 * call: 0). */
#define ROW(fn, expr) static long fn(void) { return (long)(expr); }
#define ROW_PTR(fn, expr) static long fn(void) { return (expr) != NULL; }
#define ROW_VOID(fn, expr) static long fn(void) { expr; return 0; }

static ringk_build_info_t info_bad = {.field_mask = 1u << 9};
static ringk_ctx_params_t cp_bits = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG | (1u << 30),
                                     .log = log_hook};
static ringk_ctx_params_t cp_pool = {.field_mask = RINGK_CTX_PARAM_FIELD_POOL_THREADS,
                                     .pool_threads = 0};
static ringk_kernel_params_t kp_ok = {.field_mask = RINGK_KERNEL_PARAM_FIELD_NAME |
                                                    RINGK_KERNEL_PARAM_FIELD_HANDLER,
                                      .name = "k2", .handler = nop_handler};
static ringk_p2pq_params_t qp_size = {.field_mask = RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE,
                                      .elem_size = RINGK_P2PQ_ELEM_MAX + 1};
static ringk_p2pq_params_t qp_cap = {.field_mask = RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE |
                                                   RINGK_P2PQ_PARAM_FIELD_CAPACITY,
                                     .elem_size = 8, .capacity = 3};
static ringk_p2pq_params_t qp_bits = {.field_mask = RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE | (1u << 7),
                                      .elem_size = 8};
static ringk_p2pq_params_t qp_dev = {.field_mask = RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE |
                                                   RINGK_P2PQ_PARAM_FIELD_DEVICES,
                                     .elem_size = 8, .src_device = -7,
                                     .dst_device = RINGK_P2PQ_HOST};
static ringk_p2pq_info_t qinfo_bits = {.field_mask = 1u << 9};
static struct ringk_p2pq_dev *qview;
static ringk_ctx_t *ctx_out;
static ringk_kernel_t *kern_out;
static ringk_p2pq_t *queue_out;

ROW(info_null, ringk_build_info_query(NULL))
ROW(info_bits, ringk_build_info_query(&info_bad))
ROW_VOID(msg_init_null, ringk_msg_init(NULL, RINGK_MSG_DATA, 0, 0, 0))
ROW_VOID(msg_init_type, ringk_msg_init(&msg, (ringk_msg_type_t)9, 0, 0, 0))
ROW(msg_equal_null, ringk_msg_equal(NULL, &msg))
ROW(log_hook_null, ringk_log_hook_set(NULL, NULL))
ROW(ctx_create_null, ringk_ctx_create(NULL, NULL))
ROW(ctx_create_bits, ringk_ctx_create(&cp_bits, &ctx_out))
ROW(ctx_create_pool, ringk_ctx_create(&cp_pool, &ctx_out))
ROW(ctx_destroy_null, ringk_ctx_destroy(NULL))
ROW(ctx_start_null, ringk_ctx_start(NULL))
ROW(ctx_rank_null, ringk_ctx_rank(NULL))
ROW(ctx_size_null, ringk_ctx_size(NULL))
ROW(ctx_lost_null, ringk_ctx_peers_lost(NULL))
ROW_PTR(ctx_clock_null, ringk_ctx_clock(NULL))
ROW(kcreate_ctx, ringk_kernel_create(NULL, &kp_ok, &kern_out))
ROW(kcreate_params, ringk_kernel_create(ctx, NULL, &kern_out))
ROW(kcreate_out, ringk_kernel_create(ctx, &kp_ok, NULL))
ROW(kdestroy_null, ringk_kernel_destroy(NULL))
ROW(kactivate_null, ringk_kernel_activate(NULL))
ROW(kdeactivate_null, ringk_kernel_deactivate(NULL))
ROW(kterminate_null, ringk_kernel_terminate(NULL))
ROW(kid_null, ringk_kernel_id(NULL))
ROW_PTR(kctx_null, ringk_kernel_ctx(NULL))
ROW_PTR(kname_null, ringk_kernel_name(NULL))
ROW(kstats_null, ringk_kernel_stats_query(NULL, &stats))
ROW(kstats_out, ringk_kernel_stats_query(kern, NULL))
ROW(kstats_bits, (stats.field_mask = 1ull << 40, ringk_kernel_stats_query(kern, &stats)))
ROW(send_ctx, ringk_send(NULL, NULL, "k", RINGK_MSG_DATA, "x", 1, 0))
ROW(send_to, ringk_send(ctx, NULL, NULL, RINGK_MSG_DATA, "x", 1, 0))
ROW(send_payload, ringk_send(ctx, NULL, "k", RINGK_MSG_DATA, NULL, 5, 0))
ROW(send_type, ringk_send(ctx, NULL, "k", (ringk_msg_type_t)9, "x", 1, 0))
ROW(send_timeout, ringk_send(ctx, NULL, "k", RINGK_MSG_DATA, "x", 1, -2))
ROW(route_find_ctx, ringk_route_find(NULL, kern, "x"))
ROW(route_find_from, ringk_route_find(ctx, NULL, "x"))
ROW(route_find_to, ringk_route_find(ctx, kern, NULL))
ROW(send_route_from, ringk_send_route(ctx, NULL, 0, RINGK_MSG_DATA, "x", 1, 0))
ROW(send_route_range, ringk_send_route(ctx, kern, 1, RINGK_MSG_DATA, "x", 1, 0))
ROW(send_route_neg, ringk_send_route(ctx, kern, -1, RINGK_MSG_DATA, "x", 1, 0))
ROW(send_route_ctx, ringk_send_route(NULL, kern, 0, RINGK_MSG_DATA, "x", 1, 0))
ROW(publish_ctx, ringk_publish(NULL, NULL, "t", "x", 1, 0, NULL))
ROW(publish_topic, ringk_publish(ctx, NULL, NULL, "x", 1, 0, NULL))
ROW(publish_payload, ringk_publish(ctx, NULL, "t", NULL, 4, 0, NULL))
ROW(publish_timeout, ringk_publish(ctx, NULL, "t", "x", 1, -7, NULL))
ROW(barrier_kernel, ringk_barrier_wait(NULL, "b", 0))
ROW(barrier_name, ringk_barrier_wait(kern, NULL, 0))
ROW(barrier_timeout, ringk_barrier_wait(kern, "b", -5))
ROW_VOID(hlc_init_null, ringk_hlc_init(NULL))
ROW(hlc_tick_null, ringk_hlc_tick(NULL))
ROW(hlc_recv_null, ringk_hlc_recv(NULL, 5))
ROW(hlc_tick_ok, ringk_hlc_tick(&clk) == 0) /* a good clock: no line */
ROW(q_create_null, ringk_p2pq_create(NULL, &queue_out))
ROW(q_create_out, ringk_p2pq_create(&qp_size, NULL))
ROW(q_create_size, ringk_p2pq_create(&qp_size, &queue_out))
ROW(q_create_cap, ringk_p2pq_create(&qp_cap, &queue_out))
ROW(q_create_bits, ringk_p2pq_create(&qp_bits, &queue_out))
ROW(q_create_dev, ringk_p2pq_create(&qp_dev, &queue_out))
ROW(q_destroy_null, ringk_p2pq_destroy(NULL))
ROW(q_capacity_null, ringk_p2pq_capacity(NULL))
ROW(q_count_null, ringk_p2pq_count(NULL))
ROW(q_empty_null, ringk_p2pq_empty(NULL))
ROW(q_full_null, ringk_p2pq_full(NULL))
ROW(q_send_null, ringk_p2pq_send(NULL, elem))
ROW(q_send_elem, ringk_p2pq_send(queue, NULL))
ROW(q_send_batch_null, ringk_p2pq_send_batch(NULL, elem, 1, &count))
ROW(q_send_batch_elems, ringk_p2pq_send_batch(queue, NULL, 2, &count))
ROW(q_recv_null, ringk_p2pq_receive(NULL, elem))
ROW(q_recv_elem, ringk_p2pq_receive(queue, NULL))
ROW(q_recv_batch_null, ringk_p2pq_receive_batch(NULL, elem, 1, &count))
ROW(q_recv_batch_elems, ringk_p2pq_receive_batch(queue, NULL, 2, &count))
ROW(q_peek_null, ringk_p2pq_try_peek(NULL, elem))
ROW(q_peek_elem, ringk_p2pq_try_peek(queue, NULL))
ROW(q_clear_null, ringk_p2pq_clear(NULL, &count))
ROW(q_stats_null, ringk_p2pq_stats_query(NULL, &qstats))
ROW(q_stats_out, ringk_p2pq_stats_query(queue, NULL))
ROW(q_info_null, ringk_p2pq_info_query(NULL, &qinfo_bits))
ROW(q_info_bits, ringk_p2pq_info_query(queue, &qinfo_bits))
ROW(q_view_null, ringk_p2pq_dev_view(queue, NULL))
ROW(q_view_queue, ringk_p2pq_dev_view(NULL, &qview))
ROW(dev_register_null, ringk_device_entry_register(NULL))
ROW_VOID(dev_unregister_null, ringk_device_entry_unregister(NULL))
ROW(dev_kernels_neg, ringk_device_kernels(-1))
ROW(emu_launch_null, ringk_dev_emu_launch(NULL, NULL, (ringk_dev_kernel_t*)&msg, 1, 1))
ROW(emu_launch_zero, ringk_dev_emu_launch(emu_nothing, NULL, (ringk_dev_kernel_t*)&msg, 0, 1))
ROW(emu_launch_big, ringk_dev_emu_launch(emu_nothing, NULL, (ringk_dev_kernel_t*)&msg, 1024, 2))
ROW(emu_self_outside, ringk_dev_emu_self()->thread + ringk_dev_emu_self()->block)
ROW(emu_bucket_bad, ringk_dev_emu_bucket(99) + ringk_dev_emu_bucket(RINGK_DEV_BUCKET_PATH))
ROW_VOID(emu_tally_outside, ringk_dev_emu_tally(NULL, 0xffu))
static ringk_ipc_handle_t ipc_h, ipc_bad = {.type = RINGK_IPC_TYPE_LEGACY, .fd = -1, .size = 8,
                                            .offset = 8, .id = 1, .pid = 1, .device = "0:1.0"};
static ringk_ipc_cache_stats_t ipc_stats;
static ringk_ipc_channel_t *ipc_ch;
static void *ipc_ptr;
static ringk_ipc_channel_params_t ipc_cp_role = {.field_mask = RINGK_IPC_CHANNEL_PARAM_FIELD_PATH,
                                                 .path = "/tmp/x"};
static ringk_ipc_channel_params_t ipc_cp_kind = {
    .field_mask = RINGK_IPC_CHANNEL_PARAM_FIELD_KIND | RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE |
                  RINGK_IPC_CHANNEL_PARAM_FIELD_PATH, .kind = 5, .path = "/tmp/x"};
static ringk_ipc_channel_params_t ipc_cp_shm = {
    .field_mask = RINGK_IPC_CHANNEL_PARAM_FIELD_KIND | RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE |
                  RINGK_IPC_CHANNEL_PARAM_FIELD_PATH, .kind = RINGK_IPC_CHANNEL_SHM,
    .path = "a/b"};
ROW(ipc_export_null, ringk_ipc_export(NULL, 0, &ipc_h))
ROW(ipc_export_types, ringk_ipc_export(elem, 1u << 9, &ipc_h))
ROW(ipc_from_fd_len, ringk_ipc_handle_from_fd(0, 0, 0, &ipc_h))
ROW(ipc_from_fd_null, ringk_ipc_handle_from_fd(0, 8, 0, NULL))
ROW(ipc_release_null, ringk_ipc_handle_release(NULL))
ROW(ipc_import_null, ringk_ipc_import(NULL, &ipc_ptr))
ROW(ipc_import_offset, ringk_ipc_import(&ipc_bad, &ipc_ptr))
ROW(ipc_close_unknown, ringk_ipc_close(elem))
ROW(ipc_invalidate_pid, ringk_ipc_invalidate(0, 1))
ROW(ipc_stats_null, ringk_ipc_cache_stats_query(NULL))
ROW(ipc_stats_ok, ringk_ipc_cache_stats_query(&ipc_stats)) /* no line */
ROW(ipc_limit_zero, ringk_ipc_cache_limit_set(0))
ROW(ipc_open_null, ringk_ipc_channel_open(NULL, &ipc_ch))
ROW(ipc_open_role, ringk_ipc_channel_open(&ipc_cp_role, &ipc_ch))
ROW(ipc_open_kind, ringk_ipc_channel_open(&ipc_cp_kind, &ipc_ch))
ROW(ipc_open_shm_name, ringk_ipc_channel_open(&ipc_cp_shm, &ipc_ch))
ROW(ipc_close_null, ringk_ipc_channel_close(NULL))
ROW(ipc_send_null, ringk_ipc_channel_send(NULL, &ipc_h))
ROW(ipc_revoke_null, ringk_ipc_channel_revoke(NULL, 1))
ROW(ipc_recv_null, ringk_ipc_channel_recv(NULL, &ipc_h, 0))
ROW(ipc_peer_null, ringk_ipc_channel_peer(NULL, NULL, NULL))
static ringk_peer_info_t peer_info;
static char peer_mem[8];
ROW(peer_query_busid, ringk_peer_query("0000:07:00.0", "7", 0, &peer_info))
ROW(peer_query_flags, ringk_peer_query("07:00.0", "08:00.0", 1u << 7, &peer_info))
ROW(peer_can_neg, ringk_peer_can_access(-2, 0, &peer_info))
ROW(peer_cap_null, ringk_peer_capability(0, 1, NULL))
ROW(peer_enable_same, ringk_peer_enable(1, 1))
ROW(peer_disable_neg, ringk_peer_disable(0, -1))
ROW(peer_copy_null, ringk_peer_copy(NULL, peer_mem, 8, NULL))
ROW(peer_copy_async_null, ringk_peer_copy_async(peer_mem, NULL, 8, NULL, NULL))
ROW_PTR(peer_path_unknown, ringk_peer_path_name((ringk_peer_path_t)99)) /* "?", no line */

static const struct {
    const char *call;     /* the public function (test_abi.sh reads these names) */
    long      (*run)(void);
    long        expect;   /* its result (see ROW) */
    const char *log;      /* the one line it logs (a part of it), or NULL: none */
} rows[] = {
    {"ringk_build_info_query", info_null, -EINVAL, "ringk_build_info_query: info_p is NULL"},
    {"ringk_build_info_query", info_bits, -EINVAL, "field_mask 0x200 has unknown bits"},
    {"ringk_msg_init", msg_init_null, 0, "ringk_msg_init: msg is NULL"},
    {"ringk_msg_init", msg_init_type, 0, "type 9 is not data (0), control (1) or terminate"},
    {"ringk_msg_equal", msg_equal_null, 0, "ringk_msg_equal: a is NULL"},
    {"ringk_log_hook_set", log_hook_null, 0, NULL},
    {"ringk_ctx_create", ctx_create_null, -EINVAL, "ringk_ctx_create: ctx_p is NULL"},
    {"ringk_ctx_create", ctx_create_bits, -EINVAL, "field_mask 0x40000001 has unknown bits"},
    {"ringk_ctx_create", ctx_create_pool, -EINVAL, "pool_threads 0 is out of range 1..16"},
    {"ringk_ctx_destroy", ctx_destroy_null, -EINVAL, "ringk_ctx_destroy: ctx is NULL"},
    {"ringk_ctx_start", ctx_start_null, -EINVAL, "ringk_ctx_start: ctx is NULL"},
    {"ringk_ctx_rank", ctx_rank_null, -EINVAL, "ringk_ctx_rank: ctx is NULL"},
    {"ringk_ctx_size", ctx_size_null, -EINVAL, "ringk_ctx_size: ctx is NULL"},
    {"ringk_ctx_peers_lost", ctx_lost_null, -EINVAL, "ringk_ctx_peers_lost: ctx is NULL"},
    {"ringk_ctx_clock", ctx_clock_null, 0, "ringk_ctx_clock: ctx is NULL"},
    {"ringk_kernel_create", kcreate_ctx, -EINVAL, "ringk_kernel_create: ctx is NULL"},
    {"ringk_kernel_create", kcreate_params, -EINVAL, "ringk_kernel_create: params is NULL"},
    {"ringk_kernel_create", kcreate_out, -EINVAL, "ringk_kernel_create: kernel_p is NULL"},
    {"ringk_kernel_destroy", kdestroy_null, -EINVAL, "ringk_kernel_destroy: kernel is NULL"},
    {"ringk_kernel_activate", kactivate_null, -EINVAL, "ringk_kernel_activate: kernel is NULL"},
    {"ringk_kernel_deactivate", kdeactivate_null, -EINVAL,
     "ringk_kernel_deactivate: kernel is NULL"},
    {"ringk_kernel_terminate", kterminate_null, -EINVAL,
     "ringk_kernel_terminate: kernel is NULL"},
    {"ringk_kernel_id", kid_null, 0, "ringk_kernel_id: kernel is NULL"},
    {"ringk_kernel_ctx", kctx_null, 0, "ringk_kernel_ctx: kernel is NULL"},
    {"ringk_kernel_name", kname_null, 0, "ringk_kernel_name: kernel is NULL"},
    {"ringk_kernel_stats_query", kstats_null, -EINVAL, "ringk_kernel_stats_query: kernel is NULL"},
    {"ringk_kernel_stats_query", kstats_out, -EINVAL, "ringk_kernel_stats_query: stats_p is NULL"},
    {"ringk_kernel_stats_query", kstats_bits, -EINVAL, "field_mask 0x10000000000 has unknown"},
    {"ringk_send", send_ctx, -EINVAL, "ringk_send: ctx is NULL"},
    {"ringk_send", send_to, -EINVAL, "ringk_send: to is NULL"},
    {"ringk_send", send_payload, -EINVAL, "ringk_send: payload is NULL and length 5"},
    {"ringk_send", send_type, -EINVAL, "ringk_send: type 9 is not data (0)"},
    {"ringk_send", send_timeout, -EINVAL, "ringk_send: timeout_ms -2 is not"},
    {"ringk_route_find", route_find_ctx, -EINVAL, "ringk_route_find: ctx is NULL"},
    {"ringk_route_find", route_find_from, -EINVAL, "ringk_route_find: from is NULL"},
    {"ringk_route_find", route_find_to, -EINVAL, "ringk_route_find: to is NULL"},
    {"ringk_send_route", send_route_from, -EINVAL, "ringk_send_route: from is NULL"},
    {"ringk_send_route", send_route_range, -EINVAL, "kernel 'k': route 1 does not exist (it "
     "has 1)"},
    {"ringk_send_route", send_route_neg, -EINVAL, "kernel 'k': route -1 does not exist"},
    {"ringk_send_route", send_route_ctx, -EINVAL, "ringk_send_route: ctx is NULL"},
    {"ringk_publish", publish_ctx, -EINVAL, "ringk_publish: ctx is NULL"},
    {"ringk_publish", publish_topic, -EINVAL, "ringk_publish: topic is NULL"},
    {"ringk_publish", publish_payload, -EINVAL, "ringk_publish: payload is NULL and length 4"},
    {"ringk_publish", publish_timeout, -EINVAL, "ringk_publish: timeout_ms -7 is not"},
    {"ringk_barrier_wait", barrier_kernel, -EINVAL, "ringk_barrier_wait: kernel is NULL"},
    {"ringk_barrier_wait", barrier_name, -EINVAL, "ringk_barrier_wait: barrier is NULL"},
    {"ringk_barrier_wait", barrier_timeout, -EINVAL, "ringk_barrier_wait: timeout_ms -5 is not"},
    {"ringk_hlc_init", hlc_init_null, 0, "ringk_hlc_init: clock is NULL"},
    {"ringk_hlc_tick", hlc_tick_null, 0, "ringk_hlc_tick: clock is NULL"},
    {"ringk_hlc_recv", hlc_recv_null, 0, "ringk_hlc_recv: clock is NULL"},
    {"ringk_hlc_tick", hlc_tick_ok, 0, NULL},
    {"ringk_p2pq_create", q_create_null, -EINVAL, "ringk_p2pq_create: params is NULL"},
    {"ringk_p2pq_create", q_create_out, -EINVAL, "ringk_p2pq_create: queue_p is NULL"},
    {"ringk_p2pq_create", q_create_size, -EINVAL, "elem_size 4081 is not in 1..4080"},
    {"ringk_p2pq_create", q_create_cap, -EINVAL, "capacity 3 is not a power of 2 in 2..1048576"},
    {"ringk_p2pq_create", q_create_bits, -EINVAL, "field_mask 0x82 has unknown bits"},
    {"ringk_p2pq_create", q_create_dev, -EINVAL, "device -7 is not RINGK_P2PQ_HOST (-1), "
     "RINGK_P2PQ_EMULATED (-2) or a CUDA device ordinal"},
    {"ringk_p2pq_destroy", q_destroy_null, -EINVAL, "ringk_p2pq_destroy: queue is NULL"},
    {"ringk_p2pq_capacity", q_capacity_null, 0, "ringk_p2pq_capacity: queue is NULL"},
    {"ringk_p2pq_count", q_count_null, 0, "ringk_p2pq_count: queue is NULL"},
    {"ringk_p2pq_empty", q_empty_null, -EINVAL, "ringk_p2pq_empty: queue is NULL"},
    {"ringk_p2pq_full", q_full_null, -EINVAL, "ringk_p2pq_full: queue is NULL"},
    {"ringk_p2pq_send", q_send_null, -EINVAL, "ringk_p2pq_send: queue is NULL"},
    {"ringk_p2pq_send", q_send_elem, -EINVAL, "ringk_p2pq_send: elem is NULL"},
    {"ringk_p2pq_send_batch", q_send_batch_null, -EINVAL, "ringk_p2pq_send_batch: queue is NULL"},
    {"ringk_p2pq_send_batch", q_send_batch_elems, -EINVAL,
     "ringk_p2pq_send_batch: elems is NULL"},
    {"ringk_p2pq_receive", q_recv_null, -EINVAL, "ringk_p2pq_receive: queue is NULL"},
    {"ringk_p2pq_receive", q_recv_elem, -EINVAL, "ringk_p2pq_receive: elem is NULL"},
    {"ringk_p2pq_receive_batch", q_recv_batch_null, -EINVAL,
     "ringk_p2pq_receive_batch: queue is NULL"},
    {"ringk_p2pq_receive_batch", q_recv_batch_elems, -EINVAL,
     "ringk_p2pq_receive_batch: elems is NULL"},
    {"ringk_p2pq_try_peek", q_peek_null, -EINVAL, "ringk_p2pq_try_peek: queue is NULL"},
    {"ringk_p2pq_try_peek", q_peek_elem, -EINVAL, "ringk_p2pq_try_peek: elem is NULL"},
    {"ringk_p2pq_clear", q_clear_null, -EINVAL, "ringk_p2pq_clear: queue is NULL"},
    {"ringk_p2pq_stats_query", q_stats_null, -EINVAL, "ringk_p2pq_stats_query: queue is NULL"},
    {"ringk_p2pq_stats_query", q_stats_out, -EINVAL, "ringk_p2pq_stats_query: stats_p is NULL"},
    {"ringk_p2pq_info_query", q_info_null, -EINVAL, "ringk_p2pq_info_query: queue is NULL"},
    {"ringk_p2pq_info_query", q_info_bits, -EINVAL, "field_mask 0x200 has unknown bits (known: "
     "0xf)"},
    {"ringk_p2pq_dev_view", q_view_null, -EINVAL, "ringk_p2pq_dev_view: view_p is NULL"},
    {"ringk_p2pq_dev_view", q_view_queue, -EINVAL, "ringk_p2pq_dev_view: queue is NULL"},
    {"ringk_device_entry_register", dev_register_null, -EINVAL,
     "ringk_device_entry_register: entry is NULL"},
    {"ringk_device_kernels", dev_kernels_neg, -EINVAL, "ringk_device_kernels: device -1 is "
     "negative"},
    {"ringk_device_entry_unregister", dev_unregister_null, 0,
     "ringk_device_entry_unregister: entry is NULL"},
    {"ringk_dev_emu_launch", emu_launch_null, -EINVAL, "ringk_dev_emu_launch: run is NULL"},
    {"ringk_dev_emu_launch", emu_launch_zero, -EINVAL, "threads 0 x blocks 1: both must be"},
    {"ringk_dev_emu_launch", emu_launch_big, -E2BIG, "threads 1024 x blocks 2 is above the "
     "1024 threads"},
    /* takes no argument: outside a launch, thread 0 of block 0, nothing logged */
    {"ringk_dev_emu_self", emu_self_outside, 0, NULL},
    /* a bucket past the last is the path's (the old one, the path's, returned); a tally outside
     * a launch counts nothing: neither is an error a caller could act on, nothing logged */
    {"ringk_dev_emu_bucket", emu_bucket_bad, 0, NULL},
    {"ringk_dev_emu_tally", emu_tally_outside, 0, NULL},
    {"ringk_ipc_export", ipc_export_null, -EINVAL, "ringk_ipc_export: ptr is NULL"},
    {"ringk_ipc_export", ipc_export_types, -EINVAL, "types 0x200 has unknown bits (known: 0xe)"},
    {"ringk_ipc_handle_from_fd", ipc_from_fd_len, -EINVAL, "len 0, offset 0: len must be in"},
    {"ringk_ipc_handle_from_fd", ipc_from_fd_null, -EINVAL,
     "ringk_ipc_handle_from_fd: handle_p is NULL"},
    {"ringk_ipc_handle_release", ipc_release_null, 0, NULL},
    {"ringk_ipc_import", ipc_import_null, -EINVAL, "ringk_ipc_import: handle is NULL"},
    {"ringk_ipc_import", ipc_import_offset, -EINVAL, "offset 8 is not below size 8"},
    {"ringk_ipc_close", ipc_close_unknown, -ENOENT, "is not an address ringk_ipc_import gave"},
    {"ringk_ipc_invalidate", ipc_invalidate_pid, -EINVAL, "pid 0 is not a process id"},
    {"ringk_ipc_cache_stats_query", ipc_stats_null, -EINVAL,
     "ringk_ipc_cache_stats_query: stats_p is NULL"},
    {"ringk_ipc_cache_stats_query", ipc_stats_ok, 0, NULL},
    {"ringk_ipc_cache_limit_set", ipc_limit_zero, -EINVAL, "entries 0 is not in 1..65536"},
    {"ringk_ipc_channel_open", ipc_open_null, -EINVAL, "ringk_ipc_channel_open: params is NULL"},
    {"ringk_ipc_channel_open", ipc_open_role, -EINVAL, "role -1 is not LISTEN (0) or CONNECT"},
    {"ringk_ipc_channel_open", ipc_open_kind, -EINVAL, "kind 5 is not SOCKET (0), SHM (1)"},
    {"ringk_ipc_channel_open", ipc_open_shm_name, -EINVAL, "an SHM channel's path is a name"},
    {"ringk_ipc_channel_close", ipc_close_null, -EINVAL, "ringk_ipc_channel_close: channel is NULL"},
    {"ringk_ipc_channel_send", ipc_send_null, -EINVAL, "ringk_ipc_channel_send: channel is NULL"},
    {"ringk_ipc_channel_revoke", ipc_revoke_null, -EINVAL,
     "ringk_ipc_channel_revoke: channel is NULL"},
    {"ringk_ipc_channel_recv", ipc_recv_null, -EINVAL, "ringk_ipc_channel_recv: channel is NULL"},
    {"ringk_ipc_channel_peer", ipc_peer_null, -EINVAL, "ringk_ipc_channel_peer: channel is NULL"},
    {"ringk_peer_query", peer_query_busid, -EINVAL, "ringk_peer_query: '7' is not a PCI bus id"},
    {"ringk_peer_query", peer_query_flags, -EINVAL, "flags 0x80 has unknown bits (known: 0x1)"},
    {"ringk_peer_can_access", peer_can_neg, -EINVAL,
     "ringk_peer_can_access: device -2 is negative"},
    {"ringk_peer_capability", peer_cap_null, -EINVAL, "ringk_peer_capability: info_p is NULL"},
    {"ringk_peer_enable", peer_enable_same, -EINVAL,
     "ringk_peer_enable: devices 1 and 1: two different devices"},
    {"ringk_peer_disable", peer_disable_neg, -EINVAL, "ringk_peer_disable: devices 0 and -1"},
    {"ringk_peer_copy", peer_copy_null, -EINVAL, "ringk_peer_copy: dst is NULL"},
    {"ringk_peer_copy_async", peer_copy_async_null, -EINVAL, "ringk_peer_copy_async: src is NULL"},
    {"ringk_peer_path_name", peer_path_unknown, 1, NULL},
};

/* The number of lines in the log. */
static unsigned log_lines(void)
{
    unsigned n = 0;
    const char *p;

    pthread_mutex_lock(&log_mu);
    for (p = logbuf; (p = strchr(p, '\n')) != NULL; p++) {
        n++;
    }
    pthread_mutex_unlock(&log_mu);
    return n;
}

START_TEST(test_api_bad_argument)
{
    long got = rows[_i].run();

    ck_assert_msg(got == rows[_i].expect, "%s (row %d): returned %ld, not %ld", rows[_i].call,
                  _i, got, rows[_i].expect);
    if (rows[_i].log == NULL) {
        ck_assert_msg(log_lines() == 0, "%s (row %d): logged '%s'", rows[_i].call, _i, logbuf);
    } else {
        ck_assert_msg((log_lines() == 1) && (strstr(logbuf, rows[_i].log) != NULL),
                      "%s (row %d): logged '%s', not one line with '%s'", rows[_i].call, _i,
                      logbuf, rows[_i].log);
    }
}
END_TEST

/* The same bad argument many times in a row: said once, then how many more times, so that a
 * loop of failing calls does not flood the log. */
START_TEST(test_api_bad_argument_repeats)
{
    int i;

    for (i = 0; i < 1000; i++) {
        ck_assert_int_eq(ringk_send(ctx, NULL, NULL, RINGK_MSG_DATA, "x", 1, 0), -EINVAL);
    }
    ck_assert_int_eq(log_lines(), 1);
    ck_assert_int_eq(ringk_send(ctx, NULL, "k", RINGK_MSG_DATA, NULL, 1, 0), -EINVAL);
    ck_assert_int_eq(log_lines(), 3);
    ck_assert_msg(strstr(logbuf, "ringk_send: to is NULL\n(the line before was repeated 999 "
                         "more times: ringk_send: to is NULL)\nringk_send: payload is NULL") !=
                  NULL, "log: %s", logbuf);
}
END_TEST

/* With only the process's hook, the count of repeated lines still held back is said when the
 * context goes (as a context's own hook gets it then). */
START_TEST(test_api_repeats_said_at_destroy)
{
    ringk_ctx_params_t p = {.field_mask = RINGK_CTX_PARAM_FIELD_PIN, .pin = 0};
    ringk_ctx_t *c;
    int i;

    ck_assert_int_eq(ringk_ctx_create(&p, &c), 0);
    for (i = 0; i < 5; i++) {
        ck_assert_int_eq(ringk_publish(c, NULL, "nope", "x", 1, 0, NULL), -ENOENT);
    }
    ck_assert_int_eq(log_lines(), 1);
    ck_assert_int_eq(ringk_ctx_destroy(c), 0);
    ck_assert_msg(strstr(logbuf, "(the line before was repeated 4 more times: publish to topic "
                         "'nope'") != NULL, "log: %s", logbuf);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("api_args");
    TCase *tc = tcase_create("api_args");

    tcase_add_checked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_add_loop_test(tc, test_api_bad_argument, 0, sizeof(rows) / sizeof(rows[0]));
    tcase_add_test(tc, test_api_bad_argument_repeats);
    tcase_add_test(tc, test_api_repeats_said_at_destroy);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
