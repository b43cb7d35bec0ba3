/* SPDX-License-Identifier: BSD-3-Clause */
/* The sink of the job programs: a kernel handler that takes 8-byte payloads which must come as
 * 0, 1, 2, ... from one sender. */
#ifndef RINGK_TEST_JOB_SEQ_H
#define RINGK_TEST_JOB_SEQ_H

#include <ringk/api/ringk.h>

#include <stdint.h>
#include <string.h>

/** What the sink counted: messages, and of those, the ones out of order or not 8 bytes. */
typedef struct {
    uint64_t got, bad;
} job_seq_t;

/** The handler (@a arg: a job_seq_t, written by the kernel's one running thread). */
static inline int job_seq_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    job_seq_t *s = arg;
    uint64_t v;

    if (msg->length != sizeof(v)) {
        s->bad++;
        return 0;
    }
    memcpy(&v, ringk_msg_payload(msg), sizeof(v));
    s->bad += (v != s->got);
    s->got++;
    return 0;
}

#endif
