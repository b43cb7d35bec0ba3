// SPDX-License-Identifier: BSD-3-Clause
// The ring kernels bench/device_bench measures, as device entries of the device API: compiled
// by nvcc for the GPU run, and as host C for device_bench_emu (the emulated device), which
// checks the benchmark's ring-kernel half where there is no GPU.
#include "bench/src/device_bench.h"

RINGK_DEVICE static int echo(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return ringk_dev_send_route(k, 0, RINGK_MSG_DATA, ringk_dev_msg_payload(msg), msg->length,
                                RINGK_WAIT_FOREVER);
}

// "a": a ball from b goes back with value + 1 until the limit (then *arg, mapped, gets it); a
// burst sends 'limit' messages of BENCH_PAYLOAD bytes to the sink on route 1.
RINGK_DEVICE static int k2k_a(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const bench_ball_t *in = (const bench_ball_t*)ringk_dev_msg_payload(msg);
    bench_ball_t out;
    uint64_t i, p[BENCH_PAYLOAD / 8];
    int ret = 0;

    if (msg->length != sizeof(*in)) {
        return -1;
    }
    if (in->op == BENCH_OP_BALL) {
        if (in->value >= in->limit) {
            ringk_dev_store_rel_sys_u64((uint64_t*)arg, in->value);
            return 0;
        }
        out       = *in;
        out.value = in->value + 1;
        return ringk_dev_send_route(k, 0, RINGK_MSG_DATA, &out, sizeof(out), RINGK_WAIT_FOREVER);
    }
    for (i = 0; (i < in->limit) && (ret == 0); i++) {
        p[0] = i;
        p[1] = in->limit;
        ret  = ringk_dev_send_route(k, 1, RINGK_MSG_DATA, p, sizeof(p), RINGK_WAIT_FOREVER);
    }
    return ret;
}

// The sink: bursts' messages {i, limit} must come in order; the last one tells the host.
RINGK_DEVICE static int sink(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    bench_sink_t *s = (bench_sink_t*)arg;
    const uint64_t *p = (const uint64_t*)ringk_dev_msg_payload(msg);

    if ((msg->length != BENCH_PAYLOAD) || (p[0] != s->next)) {
        s->errors++;
    }
    s->next = p[0] + 1;
    s->count++;
    if (s->next == p[1]) {
        s->next = 0;
        ringk_dev_store_rel_sys_u64(s->done, s->count);
    }
    return 0;
}

// Handler work on all the kernel's threads: each its share, a barrier of the kernel (of its
// block when it has one), then thread 0 of block 0 tells the host.
RINGK_DEVICE static int work(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    bench_work_t *w   = (bench_work_t*)arg;
    const uint64_t *p = (const uint64_t*)ringk_dev_msg_payload(msg);
    uint32_t me = ringk_dev_block(k) * ringk_dev_threads(k) + ringk_dev_thread(k);

    if (msg->length != 2 * sizeof(uint64_t)) {
        return -1;
    }
    bench_work_elem(w, me, p[1]);
    ringk_dev_sync(k, RINGK_DEV_SYNC_KERNEL);
    if (me == 0) {
        ringk_dev_store_rel_sys_u64(w->done, p[0]);
    }
    return 0;
}

RINGK_DEVICE_ENTRY(bench_echo_entry, echo);
RINGK_DEVICE_ENTRY_THREADS(bench_work_entry, work, BENCH_WORK_THREADS);
RINGK_DEVICE_ENTRY(bench_k2k_a_entry, k2k_a);
RINGK_DEVICE_ENTRY(bench_sink_entry, sink);

