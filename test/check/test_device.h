/* SPDX-License-Identifier: BSD-3-Clause */
/* What test_device.c shares with test_device_streams.c, the cases only test_device_streams
 * runs (the executor's CUDA branch on the CUDA stand-in). */
#ifndef RINGK_TEST_DEVICE_H
#define RINGK_TEST_DEVICE_H

#include <check.h>
#include <ringk/api/ringk.h>
#include <stdint.h>

#ifdef TEST_DEVICE_STREAMS
#define TEST_DEVICE_INDEX 0 /* ringk_kernel_stats_t.device: the stand-in's CUDA device 0 */
#else
#define TEST_DEVICE_INDEX RINGK_DEVICE_EMULATED
#endif

/** A CPU kernel "cpu_sink" that counts what it takes in cpu_sink_count. */
extern uint64_t cpu_sink_count;
extern const ringk_kernel_params_t cpu_sink_params;
/** Sets RINGK_DEVICE_MAPPED_MB and RINGK_DEVICE_MEM_MB to @a mb (NULL: unset). */
void slabs_mb(const char *mb);
ringk_kernel_params_t small_params(const char *name, const ringk_device_entry_t *entry, ringk_dev_test_t *t);
/** Checked teardown: every device's slabs were freed with the test's last context. */
void slabs_teardown(void);
/** test_device_block.c: the cases of kernels of many threads. */
void test_device_block_cases(TCase *tc);
/** test_device_budget.c: what a message costs the loop, held to budgets. */
void test_device_budget_cases(TCase *tc);

#ifdef TEST_DEVICE_STREAMS
/** test_device_streams.c: its checked teardown, and its cases, those that must run first in
 *  one process (CK_FORK=no) and the one that must run last. */
void streams_teardown(void);
void test_device_streams_first(TCase *tc);
void test_device_streams_last(TCase *tc);
#endif

#endif
