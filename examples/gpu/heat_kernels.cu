// SPDX-License-Identifier: BSD-3-Clause
// The device half of examples/gpu/heat: a strip as a device kernel. Compiled by nvcc it runs
// on a GPU, where its halo rows go straight into the neighbours' device inboxes; compiled as
// host C, on the emulated device.
#include "examples/gpu/heat.h"

RINGK_DEVICE static int strip_dev(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    heat_strip_t *s = (heat_strip_t*)arg;
    uint32_t len;
    int to, ret;

    if (strip_event(s, ringk_dev_msg_payload(msg), msg->length) != 0) {
        return -1;
    }
    while (strip_next(s, &to, &len)) {
        ret = ringk_dev_send(k, s->name[to], RINGK_MSG_DATA, s->out, len, RINGK_WAIT_FOREVER);
        if (ret != 0) {
            return ret;
        }
    }
    return 0;
}

RINGK_DEVICE_ENTRY(example_heat_strip_entry, strip_dev);
