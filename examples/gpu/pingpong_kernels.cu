// SPDX-License-Identifier: BSD-3-Clause
// The device half of examples/gpu/pingpong: "pong" as a device kernel. Compiled by nvcc it
// runs on a GPU; compiled as host C, on the emulated device.
#include "examples/gpu/pingpong.h"

// Each ball carries n: pong's n-th ball must carry n (nothing lost or reordered); it goes
// back to ping (route 0) at once.
RINGK_DEVICE static int pong_dev(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    return pong_ball((pong_state_t*)arg, ringk_dev_msg_payload(msg), msg->length) ?
           ringk_dev_send_route(k, 0, RINGK_MSG_DATA, ringk_dev_msg_payload(msg), msg->length,
                                RINGK_WAIT_FOREVER) : -1;
}

RINGK_DEVICE_ENTRY(example_pong_entry, pong_dev);
