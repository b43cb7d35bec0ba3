/* SPDX-License-Identifier: BSD-3-Clause */
/* examples/gpu/pingpong: what the device handler and the CPU handler of "pong" share. */
#ifndef RINGK_EXAMPLE_GPU_PINGPONG_H
#define RINGK_EXAMPLE_GPU_PINGPONG_H

#include "examples/gpu/example_gpu.h"

/* pong's state: in memory the device and the host both see (example_shared_alloc) */
typedef struct {
    uint64_t seen;    /* balls received */
    uint64_t errors;  /* balls that did not carry the count expected */
} pong_state_t;

/* One ball at pong: 1 to send it back, 0 for a malformed one. */
EXAMPLE_HD int pong_ball(pong_state_t *s, const void *payload, uint32_t len)
{
    const uint8_t *b = (const uint8_t*)payload;
    uint64_t v = 0;
    uint32_t i;

    if (len != sizeof(v)) {
        s->errors++;
        return 0;
    }
    for (i = 0; i < sizeof(v); i++) { /* the payload need not be 8-byte aligned */
        v |= (uint64_t)b[i] << (8 * i);
    }
    if (v != ++s->seen) {
        s->errors++;
    }
    return 1;
}

#ifdef __cplusplus
extern "C" {
#endif
extern const ringk_device_entry_t example_pong_entry;
#ifdef __cplusplus
}
#endif

#endif
