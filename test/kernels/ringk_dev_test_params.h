/* SPDX-License-Identifier: BSD-3-Clause */
/* Host side of the test kernels (ringk_dev_test.h): the parameters every program that creates
 * them starts from (test_device, job_device). */
#ifndef RINGK_DEV_TEST_PARAMS_H
#define RINGK_DEV_TEST_PARAMS_H

#include "test/kernels/ringk_dev_test.h"

#include <ringk/api/ringk.h>

/* Parameters of a device kernel (CUDA backend only) named @a name running @a entry with the
 * result block @a t, of one thread (the handlers of ringk_dev_test_t are written for one; the
 * kernels of many are test_device_block.c's); the caller adds fields. */
static inline ringk_kernel_params_t dev_params(const char *name,
                                               const ringk_device_entry_t *entry,
                                               ringk_dev_test_t *t)
{
    ringk_kernel_params_t p = {
        .field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_BACKENDS |
                        RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY | RINGK_KERNEL_PARAM_FIELD_THREADS,
        .name         = name,
        .backends     = RINGK_BACKEND_CUDA,
        .device_entry = entry,
        .arg          = t,
        .threads      = 1
    };

    return p;
}

#endif
