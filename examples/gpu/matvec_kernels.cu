// SPDX-License-Identifier: BSD-3-Clause
// The device half of examples/gpu/matvec: "mv" as a device kernel of one block, whose threads
// share the rows of each product. Compiled by nvcc it runs on a GPU; compiled as host C, on the
// emulated device.
#include "examples/gpu/matvec.h"

// Every thread of the kernel runs this on each message: its rows of y = A x, a barrier, and the
// block sends the reply together (ringk_dev_send_route_block: one message, every thread
// copying a share of it).
RINGK_DEVICE static int mv_dev(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    mv_state_t *s       = (mv_state_t*)arg;
    const mv_msg_t *in  = (const mv_msg_t*)ringk_dev_msg_payload(msg);
    int me  = (int)ringk_dev_thread(k);
    int all = (int)ringk_dev_threads(k);

    if ((msg->length == sizeof(mv_msg_t)) && (in->seq == 0)) {
        mv_fill(s, me, all); // the matrix, by all threads
        return 0;
    }
    if (msg->length != mv_len(s->n)) {
        if (me == 0) {
            s->bad++;
        }
        return -1;
    }
    mv_rows(s, in->v, me, all);
    if (me == 0) {
        s->out->seq = in->seq;
    }
    if ((me == all - 1) && (me < s->n)) {
        s->threads_used = all; // the last thread had rows: the product took all of them
    }
    ringk_dev_sync(k, RINGK_DEV_SYNC_BLOCK);
    return ringk_dev_send_route_block(k, 0, RINGK_MSG_DATA, s->out, mv_len(s->n),
                                      RINGK_WAIT_FOREVER);
}

RINGK_DEVICE_ENTRY_THREADS(example_mv_entry, mv_dev, 256);
