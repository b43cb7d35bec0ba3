// SPDX-License-Identifier: BSD-3-Clause
// Device kernels of the device executor's tests, written once: compiled by nvcc they run on a
// GPU (test_kernels), compiled as C for the host (gcc -x c) the same source runs on the emulated
// device (test_device). Each handler records what it saw in a ringk_dev_test_t its argument
// points to (mapped memory on a GPU), checked by the host after the kernel terminated.
#include "test/kernels/ringk_dev_test.h"

// Counts messages and checks FIFO per sender: a payload is {producer, n}, and producer p's
// n-th message must come after its (n-1)-th; bytes after those 8 are summed. Records which
// messages came as the loop's staged copy (those of the host ingress ring).
RINGK_DEVICE static int dev_count(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_test_t *t = (ringk_dev_test_t*)arg;
    const uint32_t *p   = (const uint32_t*)ringk_dev_msg_payload(msg);
    const uint8_t *b    = (const uint8_t*)ringk_dev_msg_payload(msg);
    uint32_t i;

    if ((const uint8_t*)msg == k->stage + RINGK_CELL_HDR_BYTES) {
        t->staged++;
    }
    for (i = 8; i < msg->length; i++) {
        t->tail_sum += b[i];
    }
    if ((msg->length < 8) || (p[0] >= RINGK_DEV_TEST_PRODUCERS)) {
        t->bad++;
        return -1;
    }
    if (p[1] != t->next[p[0]]) {
        t->out_of_order++;
    }
    t->next[p[0]] = p[1] + 1;
    t->sum += p[1];
    if (msg->timestamp != 0) {
        t->stamped++;
    }
    t->ring_scopes = k->inbox.scope | (k->ingress.scope << 8) | (k->outbox.scope << 16);
    ringk_dev_store_rel_sys_u64(&t->count, t->count + 1);
    return 0;
}

// Replies on route 0 with the same payload (a ping-pong's far end).
RINGK_DEVICE static int dev_echo(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_test_t *t = (ringk_dev_test_t*)arg;
    int ret = ringk_dev_send_route(k, 0, RINGK_MSG_DATA, ringk_dev_msg_payload(msg), msg->length,
                                   RINGK_WAIT_FOREVER);

    if (ret != 0) {
        t->last_error = ret;
        return -1;
    }
    ringk_dev_store_rlx_sys_u64(&t->hlc, ringk_dev_hlc_tick(k));
    ringk_dev_store_rel_sys_u64(&t->count, t->count + 1);
    return 0;
}

// Forwards each message to the kernel named "sink" (by name: the device looks the route up).
// A payload of three words {producer, n, b} is a burst: {producer, n + i} for i < b, sent in
// this one call; codes[0] then gets how many of the kernel's sends its control block did not
// show yet (the loop stores its counters between turns, not per send). A payload of one word
// sends nothing: it rings the doorbell of route 0's direct target, as a sender that took the
// target's 'idle' does after its publish (W2), here late (codes[1]: 1 when it rang). A payload
// of four words claims cells on route 0 and leaves them unpublished, as a sender that dies
// between its claim and its publish (codes[2]: 1 when the claim was in a direct target); one of
// five words {producer, n, ...} sends {producer, n} on route 0 and publishes it without the
// wake-up, as a sender that dies right after its publish (codes[3]: 1 when it was direct).
RINGK_DEVICE static int dev_forward(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_test_t *t = (ringk_dev_test_t*)arg;
    const uint32_t *p   = (const uint32_t*)ringk_dev_msg_payload(msg);
    uint32_t v[2], i;
    int ret;

    if (msg->length == 4) {
        t->codes[1] = (int)(k->targets_copied & 1u);
        if (t->codes[1]) {
            ringk_dev_store_rel_sys_i32(&k->targets[0].ctl->doorbell, 1);
        }
        ringk_dev_store_rel_sys_u64(&t->count, t->count + 1);
        return 0;
    }
    if ((msg->length == 16) || (msg->length == 20)) {
        ringk_dev_claim_t cl;
        int claimed = (ringk_dev_send_claim(k, 0, RINGK_MSG_DATA, 8, RINGK_WAIT_FOREVER,
                                            &cl) == 0);
        int direct  = claimed && cl.direct;

        t->codes[(msg->length == 16) ? 2 : 3] = direct;
        if (claimed && (!direct || (msg->length == 20))) {
            ringk_dev_copy(cl.payload, p, 8);
            if (direct) {
                ringk_dev_claim_publish(&cl);
            } else {
                ringk_dev_commit(&cl); /* through the host: an ordinary send */
            }
        }
        ringk_dev_store_rel_sys_u64(&t->count, t->count + 1);
        return 0;
    }
    if (msg->length == 12) {
        for (i = 0, ret = 0; (i < p[2]) && (ret == 0); i++) {
            v[0] = p[0];
            v[1] = p[1] + i;
            ret  = ringk_dev_send(k, "sink", RINGK_MSG_DATA, v, sizeof(v), RINGK_WAIT_FOREVER);
        }
        t->codes[0] = (int)(k->own.msgs_out - ringk_dev_load_rlx_sys_u64(&k->ctl->msgs_out));
    } else {
        ret = ringk_dev_send(k, "sink", RINGK_MSG_DATA, ringk_dev_msg_payload(msg), msg->length,
                             RINGK_WAIT_FOREVER);
    }
    if (ret != 0) {
        t->last_error = ret;
        return -1;
    }
    ringk_dev_store_rel_sys_u64(&t->count, t->count + 1);
    return 0;
}

// Publishes each message to topic "t".
RINGK_DEVICE static int dev_publish(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_test_t *t = (ringk_dev_test_t*)arg;
    int ret = ringk_dev_publish(k, "t", ringk_dev_msg_payload(msg), msg->length,
                                RINGK_WAIT_FOREVER);

    if (ret != 0) {
        t->last_error = ret;
        return -1;
    }
    ringk_dev_store_rel_sys_u64(&t->count, t->count + 1);
    return 0;
}

// Tries the calls a handler can get wrong and records each return code: a route that does not
// exist, a name it does not publish to, a topic it does not publish to, a message above its
// max_out, a bad type.
RINGK_DEVICE static int dev_bad(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_test_t *t = (ringk_dev_test_t*)arg;

    t->codes[0] = ringk_dev_send_route(k, 5, RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_NONE);
    t->codes[1] = ringk_dev_send(k, "nobody", RINGK_MSG_DATA, NULL, 0, RINGK_WAIT_NONE);
    t->codes[2] = ringk_dev_publish(k, "nowhere", NULL, 0, RINGK_WAIT_NONE);
    /* refused on its length before any byte is read */
    t->codes[3] = ringk_dev_send_route(k, 0, RINGK_MSG_DATA, ringk_dev_msg_payload(msg),
                                       RINGK_DEV_TEST_BIG, RINGK_WAIT_NONE);
    t->codes[4] = ringk_dev_send_route(k, 0, 77, NULL, 0, RINGK_WAIT_NONE);
    t->codes[5] = (int)ringk_dev_id(k);
    t->codes[6] = (ringk_dev_hlc_tick(k) > 0) && (ringk_dev_hlc_now(k) > 0);
    ringk_dev_store_rel_sys_u64(&t->count, t->count + 1);
    return 0;
}

// Waits at barrier "b" for each message, with the timeout in ms its payload's first word
// gives, and records the result of the n-th wait in codes[n % 8].
RINGK_DEVICE static int dev_barrier(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_test_t *t = (ringk_dev_test_t*)arg;
    const uint32_t *p   = (const uint32_t*)ringk_dev_msg_payload(msg);
    int ret = ringk_dev_barrier_wait(k, "b", (msg->length >= 4) ? (int)p[0] : 1000);

    t->codes[t->count % 8] = ret;
    if (ringk_dev_barrier_wait(k, "nobody", 0) != -ENOENT) {
        t->bad++;
    }
    ringk_dev_store_rel_sys_u64(&t->count, t->count + 1);
    return 0;
}

// Receives from within the handler (ringk_dev_recv), as the payload's first word says:
//   0 {0, n}: a group of four: takes {0, n+1..n+3} with a bound, each must follow in order;
//   1: probes: nothing queued (-EAGAIN), a 20 ms bound (-ETIMEDOUT), a NULL buffer (-EINVAL);
//   2: the next message (8 bytes) into 4 bytes (-EMSGSIZE, its length), then into 64 (0);
//   3: takes messages until recv fails (a 300 ms bound): codes[6] the failure, codes[7] how
//      many it took;
//   4: a filler, counted.
RINGK_DEVICE static int dev_recv(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_test_t *t = (ringk_dev_test_t*)arg;
    const uint32_t *p   = (const uint32_t*)ringk_dev_msg_payload(msg);
    union {
        ringk_msg_t m;
        uint8_t     bytes[sizeof(ringk_msg_t) + 64];
    } in;
    const uint32_t *q = (const uint32_t*)ringk_dev_msg_payload(&in.m);
    uint32_t i, got = 1;
    int ret = 0;

    if (p[0] == 0) {
        for (i = 1; (i < 4) && (ret == 0); i++) {
            ret = ringk_dev_recv(k, &in.m, 64, 5000);
            if ((ret == 0) && ((in.m.length != 8) || (q[0] != 0) || (q[1] != p[1] + i))) {
                t->out_of_order++;
            }
            got += (ret == 0);
        }
        t->last_error = (ret != 0) ? ret : t->last_error;
    } else if (p[0] == 1) {
        t->codes[0] = ringk_dev_recv(k, &in.m, 64, RINGK_WAIT_NONE);
        t->codes[1] = ringk_dev_recv(k, &in.m, 64, 20);
        t->codes[2] = ringk_dev_recv(k, NULL, 64, RINGK_WAIT_NONE);
    } else if (p[0] == 2) {
        t->codes[3] = ringk_dev_recv(k, &in.m, 4, 5000);
        t->codes[4] = (int)in.m.length;
        t->codes[5] = ringk_dev_recv(k, &in.m, 64, 5000);
        got++;
    } else if (p[0] == 3) {
        for (i = 0; (ret = ringk_dev_recv(k, &in.m, 64, 300)) == 0; i++) {
        }
        t->codes[6] = ret;
        t->codes[7] = (int)i;
        got += i;
    }
    ringk_dev_store_rel_sys_u64(&t->count, t->count + got);
    return 0;
}

// ---- the block-level tests: a handler run by every thread of the kernel ----------------------

RINGK_DEVICE static void bt_add(uint64_t *p, uint64_t v)
{
#if defined(__CUDA_ARCH__)
    atomicAdd((unsigned long long*)p, (unsigned long long)v);
#else
    __atomic_add_fetch(p, v, __ATOMIC_RELAXED);
#endif
}

// One scope's check of OP_SYNC: each thread writes its value, syncs, reads its neighbour's
// (the next thread of its warp, of its block, or the same thread of the next block) and syncs
// again before the next write.
RINGK_DEVICE static void bt_sync_check(ringk_dev_kernel_t *k, ringk_dev_btest_t *t, int scope,
                                       uint32_t value, uint32_t me, uint32_t other)
{
    t->slot[me] = value + me;
    if (ringk_dev_sync(k, scope) != 0) {
        bt_add(&t->bad, 1);
    }
    if (t->slot[other] != value + other) {
        bt_add(&t->bad, 1);
    }
    ringk_dev_sync(k, scope);
}

// The kernel under test of the block-level tests: the payload's first word says what its
// threads do together (RINGK_DEV_BTEST_* in ringk_dev_test.h); each records what it saw.
RINGK_DEVICE static int dev_block(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_btest_t *t = (ringk_dev_btest_t*)arg;
    const uint32_t *p    = (const uint32_t*)ringk_dev_msg_payload(msg);
    const uint32_t *q    = (const uint32_t*)ringk_dev_msg_payload(&t->in.m);
    uint32_t th = ringk_dev_thread(k), nt = ringk_dev_threads(k);
    uint32_t b = ringk_dev_block(k), nb = ringk_dev_blocks(k);
    uint32_t me = b * nt + th, all = nt * nb, i, n, lanes, base, got = 1;
    uint32_t v[2];
    uint64_t sum = 0;
    int ret = 0;

    t->hits[me]++; // this thread's own slot
    if (me == 0) {
        t->shape[0] = nt;
        t->shape[1] = nb;
    }
    switch (p[0]) {
    case RINGK_DEV_BTEST_SUM:
        for (i = me; i < p[1]; i += all) {
            sum += p[2 + i];
        }
        t->part[me] = sum;
        ringk_dev_sync(k, RINGK_DEV_SYNC_KERNEL);
        if (me == 0) {
            for (i = 0, sum = 0; i < all; i++) {
                sum += t->part[i];
            }
            t->sum += sum;
        }
        break;
    case RINGK_DEV_BTEST_SYNC:
        base  = th & ~(RINGK_DEV_WARP - 1u);
        lanes = (nt - base < RINGK_DEV_WARP) ? nt - base : RINGK_DEV_WARP;
        bt_sync_check(k, t, RINGK_DEV_SYNC_WARP, (p[1] * 3 + 0) * 4096, me,
                      b * nt + base + (th - base + 1) % lanes);
        bt_sync_check(k, t, RINGK_DEV_SYNC_BLOCK, (p[1] * 3 + 1) * 4096, me,
                      b * nt + (th + 1) % nt);
        bt_sync_check(k, t, RINGK_DEV_SYNC_KERNEL, (p[1] * 3 + 2) * 4096, me,
                      ((b + 1) % nb) * nt + th);
        if (ringk_dev_sync(k, 7) != -EINVAL) {
            bt_add(&t->bad, 1);
        }
        break;
    case RINGK_DEV_BTEST_ERR:
        ret = (me == p[1]) ? -(int)p[3] : (me == p[2]) ? -(int)p[4] : 0;
        break;
    case RINGK_DEV_BTEST_SEND:
        v[0] = me;
        v[1] = p[1];
        t->codes[me] = ringk_dev_send_route(k, 0, RINGK_MSG_DATA, v, sizeof(v),
                                            RINGK_WAIT_FOREVER);
        break;
    case RINGK_DEV_BTEST_BSEND:
        n = p[2];
        for (i = th; i < n; i += nt) {
            t->words[b][i] = (i == 0) ? b : (i == 1) ? p[1] : b * 1000 + i + p[1];
        }
        ringk_dev_sync(k, RINGK_DEV_SYNC_BLOCK);
        t->codes[me] = ringk_dev_send_route_block(k, 0, RINGK_MSG_DATA, t->words[b], 4 * n,
                                                  RINGK_WAIT_FOREVER);
        break;
    case RINGK_DEV_BTEST_RECV:
        ret = ringk_dev_recv(k, &t->in.m, 64, 5000);
        t->codes[me] = ret;
        if ((ret != 0) || (t->in.m.length != 8) || (q[1] != p[1] + 1)) {
            bt_add(&t->bad, 1);
        }
        got += (ret == 0);
        break;
    case RINGK_DEV_BTEST_PARTIAL:
        if (th == 1) {
            t->codes[1] = (p[1] == 0) ? ringk_dev_sync(k, RINGK_DEV_SYNC_BLOCK) :
                          (p[1] == 1) ? ringk_dev_recv(k, &t->in.m, 64, 0) :
                          ringk_dev_send_route_block(k, 0, RINGK_MSG_DATA, t->words[0], 8, 0);
        }
        break;
    case RINGK_DEV_BTEST_BARRIER:
        t->codes[me] = ringk_dev_barrier_wait(k, "b", 5000);
        break;
    default:
        bt_add(&t->bad, 1);
    }
    if (me == 0) {
        ringk_dev_store_rel_sys_u64(&t->count, t->count + got);
    }
    return ret;
}

// The sink of dev_block's sends (one thread): a message of 8 bytes is a thread's {index,
// round}, checked in order per thread; a longer one a block's collective message, every word
// checked.
RINGK_DEVICE static int dev_tally(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    ringk_dev_btest_t *t = (ringk_dev_btest_t*)arg;
    const uint32_t *p    = (const uint32_t*)ringk_dev_msg_payload(msg);
    uint32_t n = msg->length / 4, j;
    int ok;

    (void)k;
    if (msg->length == 8) {
        if ((p[0] >= RINGK_DEV_BTEST_THREADS) || (p[1] != t->tally_next[p[0]])) {
            t->tally_bad++;
        } else {
            t->tally_next[p[0]] = p[1] + 1;
        }
    } else {
        ok = (n >= 2) && (p[0] < RINGK_DEV_BTEST_BLOCKS);
        for (j = 2; ok && (j < n); j++) {
            ok = (p[j] == p[0] * 1000 + j + p[1]);
        }
        if (ok) {
            t->tally_blocks++;
        } else {
            t->tally_bad++;
        }
    }
    ringk_dev_store_rel_sys_u64(&t->tally, t->tally + 1);
    return 0;
}

// bounded for the most threads the tests give it (a GPU block of it may have that many)
// ---- the budget tests' kernels: handlers that touch nothing across the bus, so that what the
// tally counts is the loop's and the sends' (the host reads msgs_in from the statistics) ------

// Takes each message and does nothing with it.
RINGK_DEVICE static int dev_quiet(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    (void)k;
    (void)msg;
    (void)arg;
    return 0;
}

// A payload {n} sends n messages {i} on route 0, in this one call (a burst).
RINGK_DEVICE static int dev_burst(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const uint32_t *p = (const uint32_t*)ringk_dev_msg_payload(msg);
    uint32_t i;
    int ret = 0;

    (void)arg;
    for (i = 0; (msg->length >= 4) && (i < p[0]) && (ret == 0); i++) {
        ret = ringk_dev_send_route(k, 0, RINGK_MSG_DATA, &i, sizeof(i), RINGK_WAIT_FOREVER);
    }
    return ret;
}

// A payload {n, ...} of up to 256 bytes: {n - 1, ...} (as long) sent on route 0 while n > 0
// (a ball bounced between two kernels, or a kernel and a CPU kernel).
RINGK_DEVICE static int dev_bounce(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    const uint32_t *p = (const uint32_t*)ringk_dev_msg_payload(msg);
    uint32_t ball[64], i, len = (msg->length < sizeof(ball)) ? msg->length : sizeof(ball);

    (void)arg;
    if ((len < 4) || (p[0] == 0)) {
        return 0;
    }
    ball[0] = p[0] - 1;
    for (i = 1; i < len / 4; i++) {
        ball[i] = p[i];
    }
    return ringk_dev_send_route(k, 0, RINGK_MSG_DATA, ball, len & ~3u, RINGK_WAIT_FOREVER);
}

RINGK_DEVICE_ENTRY_THREADS(ringk_dev_test_block, dev_block, RINGK_DEV_BTEST_THREADS);
RINGK_DEVICE_ENTRY(ringk_dev_test_quiet, dev_quiet);
RINGK_DEVICE_ENTRY(ringk_dev_test_burst, dev_burst);
RINGK_DEVICE_ENTRY(ringk_dev_test_bounce, dev_bounce);
RINGK_DEVICE_ENTRY(ringk_dev_test_tally, dev_tally);
RINGK_DEVICE_ENTRY(ringk_dev_test_count, dev_count);
RINGK_DEVICE_ENTRY(ringk_dev_test_echo, dev_echo);
RINGK_DEVICE_ENTRY(ringk_dev_test_forward, dev_forward);
RINGK_DEVICE_ENTRY(ringk_dev_test_publish, dev_publish);
RINGK_DEVICE_ENTRY(ringk_dev_test_bad, dev_bad);
RINGK_DEVICE_ENTRY(ringk_dev_test_barrier, dev_barrier);
RINGK_DEVICE_ENTRY(ringk_dev_test_recv, dev_recv);

#if defined(__CUDACC__)
// The arg check's rules, for test_device_gpu's test of them without a GPU: CUDA's account of
// a pointer (type, owning device, the device's address of it) as the test makes it up.
extern "C" int ringk_dev_test_judge(int device, const void *p, int type, int owner,
                                    const void *dev_ptr, int pageable, int host_ptr, char *why,
                                    size_t why_len)
{
    struct cudaPointerAttributes a;

    memset(&a, 0, sizeof(a));
    a.type          = (enum cudaMemoryType)type;
    a.device        = owner;
    a.devicePointer = (void*)dev_ptr;
    return ringk_cuda_judge(device, p, &a, pageable, host_ptr, why, why_len);
}
extern "C" int ringk_dev_test_mapped_here(const void *p)
{
    return ringk_cuda_mapped_here(p);
}
#endif
