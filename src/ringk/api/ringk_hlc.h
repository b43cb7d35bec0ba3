/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the hybrid logical clock that stamps messages (ringk_ctx_clock()), usable on its
 * own. */
#ifndef RINGK_API_RINGK_HLC_H
#define RINGK_API_RINGK_HLC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- hybrid logical clock ------------------------------------------------------------------ */

/**
 * A hybrid logical clock in one 64-bit word: milliseconds since the Unix epoch in the upper 48
 * bits, a logical counter in the lower 16. Both parts change together in one atomic update.
 */
typedef struct ringk_hlc {
    uint64_t word;
} ringk_hlc_t;

#define RINGK_HLC_PHYSICAL_MS(_t) ((_t) >> 16)
#define RINGK_HLC_LOGICAL(_t)     ((_t) & 0xffffu)

/** Starts @a clock at the current time. */
void ringk_hlc_init(ringk_hlc_t *clock);

/** A local or send event: returns a timestamp greater than every earlier one of @a clock. */
uint64_t ringk_hlc_tick(ringk_hlc_t *clock);

/** A receive event of a message stamped @a remote: the result exceeds both @a remote and every
 *  earlier timestamp of @a clock. */
uint64_t ringk_hlc_recv(ringk_hlc_t *clock, uint64_t remote);

#ifdef __cplusplus
}
#endif

#endif
