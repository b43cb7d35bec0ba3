// SPDX-License-Identifier: BSD-3-Clause
// The device half of examples/gpu/heat: a strip as a device kernel of many threads. Compiled by
// nvcc it runs on a GPU, where its halo rows go straight into the neighbours' device inboxes;
// compiled as host C, on the emulated device.
#include "examples/gpu/heat.h"

// Every thread of the kernel runs this on each message. The loop's thread (thread 0 of block
// 0) alone keeps the strip's state: it applies the message, sends what the strip has to send,
// and says what comes next; when a step's halos are in, all threads update their share of the
// strip's cells, and the loop's thread ends the step.
RINGK_DEVICE static int strip_dev(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    heat_strip_t *s = (heat_strip_t*)arg;
    int me   = (int)(ringk_dev_block(k) * ringk_dev_threads(k) + ringk_dev_thread(k));
    int all  = (int)(ringk_dev_blocks(k) * ringk_dev_threads(k));
    int lead = (me == 0), to, r, act, ret = 0;
    uint32_t len;

    if (lead) {
        s->act = (strip_event(s, ringk_dev_msg_payload(msg), msg->length) != 0) ?
                 HEAT_ACT_ERROR : HEAT_ACT_DONE;
        s->err = -1;
    }
    for (;;) {
        if (lead && (s->act != HEAT_ACT_ERROR)) {
            while ((r = strip_next_step(s, &to, &len)) == 1) {
                ret = ringk_dev_send(k, s->name[to], RINGK_MSG_DATA, s->out, len,
                                     RINGK_WAIT_FOREVER);
                if (ret != 0) {
                    break;
                }
            }
            s->act = (ret != 0) ? HEAT_ACT_ERROR : (r == 2) ? HEAT_ACT_UPDATE : HEAT_ACT_DONE;
            s->err = ret;
        }
        ringk_dev_sync(k, RINGK_DEV_SYNC_KERNEL); // the decision, seen by all
        act = s->act;
        if (act != HEAT_ACT_UPDATE) {
            break;
        }
        heat_update_part(s->cur, s->next, s->rows, s->cols, s->r0, s->nrows, me, all);
        if ((me == all - 1) && (me < s->nrows * s->cols)) {
            s->threads_used = all; // the last thread had cells: the update took all of them
        }
        ringk_dev_sync(k, RINGK_DEV_SYNC_KERNEL); // the step's cells, all of them
        if (lead) {
            strip_stepped(s);
        }
    }
    return (act == HEAT_ACT_ERROR) ? s->err : 0;
}

RINGK_DEVICE_ENTRY(example_heat_strip_entry, strip_dev);
