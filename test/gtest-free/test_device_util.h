/* SPDX-License-Identifier: BSD-3-Clause */
/* What the device executor's tests share (test_device on the emulated device, test_device_gpu
 * on a GPU): a context whose log lines up to TEST_DEVICE_LOG_LEVEL (default RINGK_LOG_WARN)
 * land in logbuf, and the parameters of a device kernel. */
#ifndef RINGK_TEST_DEVICE_UTIL_H
#define RINGK_TEST_DEVICE_UTIL_H

#include "test_log.h"
#include "test_util.h"

#include "kernels/ringk_dev_test.h"
#include <ringk/api/ringk.h>

#include <pthread.h>

#ifndef TEST_DEVICE_LOG_LEVEL
#define TEST_DEVICE_LOG_LEVEL RINGK_LOG_WARN
#endif

static char logbuf[16384];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_hook(void *arg, int level, const char *message)
{
    if (level <= TEST_DEVICE_LOG_LEVEL) {
        test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
    }
}

static ringk_ctx_t *ctx_new(void)
{
    ringk_ctx_params_t p = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = log_hook};
    ringk_ctx_t *ctx;

    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_ctx_create(&p, &ctx), 0);
    return ctx;
}

/* Parameters of a device kernel (CUDA backend only) named @a name running @a entry with the
 * result block @a t; the caller adds fields. */
static ringk_kernel_params_t dev_params(const char *name, const ringk_device_entry_t *entry,
                                        ringk_dev_test_t *t)
{
    ringk_kernel_params_t p = {
        .field_mask   = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_BACKENDS |
                        RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY,
        .name         = name,
        .backends     = RINGK_BACKEND_CUDA,
        .device_entry = entry,
        .arg          = t
    };

    return p;
}

#endif
