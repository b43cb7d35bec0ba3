/* SPDX-License-Identifier: BSD-3-Clause */
/* What the files of test_runtime share: its helpers (test_runtime.c) and the cases each file
 * adds to the program's TCases. */
#ifndef RINGK_TEST_RUNTIME_H
#define RINGK_TEST_RUNTIME_H

#include <ringk/api/ringk.h>

#include <check.h>
#include <pthread.h>
#include <stdint.h>

/** What the contexts of ctx_new() logged at WARN or worse, and its lock. */
extern char logbuf[16384];
extern pthread_mutex_t log_mu;
void log_hook(void *arg, int level, const char *message);

/** A context logging into logbuf, unpinned; fails the test if it cannot be created. */
ringk_ctx_t *ctx_new(void);
double now_s(void);
/** Waits up to 30 s for *counter to reach @a value. */
void wait_for(volatile uint64_t *counter, uint64_t value);

/** Messages count_handler() took, and the parameters of a kernel that counts them. */
extern uint64_t counted;
int count_handler(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg);
ringk_kernel_params_t counter_params(const char *name, unsigned inbox, int inactive);

/** The batch-cell tests' context and sink (test_runtime.c), which test_runtime_route.c's
 * sequence-delta case reuses, and the count of a cycle's middle kernel. */
#define BATCH_N 200
extern ringk_ctx_t *batch_ctx;
extern uint64_t batch_got, batch_bad, batch_next_v, batch_next_seq;
int batch_sink(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg);
extern uint64_t cycle_b;

void test_runtime_clock_tests(TCase *tc);
void test_runtime_route_tests(TCase *tc);
void test_runtime_topic_tests(TCase *tc);
void test_runtime_stats_tests(TCase *tc);
void test_runtime_errors_tests(TCase *tc);
void test_runtime_p2pq_tests(TCase *tc);

#endif
