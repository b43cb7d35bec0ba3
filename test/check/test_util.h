/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared helpers of the Check test binaries: TAP output, fork mode, skip reporting. */
#ifndef RINGK_TEST_UTIL_H
#define RINGK_TEST_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/** Whether address @a p lies in a mapping of this process (/proc/self/maps: no system call on
 *  the address itself, which memcheck would report for an unmapped one); -1 if unreadable. */
static inline int test_is_mapped(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    unsigned long lo, hi, a = (unsigned long)p;
    char line[512];
    int in = 0;

    if (f == NULL) {
        return -1;
    }
    while (!in && (fgets(line, sizeof(line), f) != NULL)) {
        in = (sscanf(line, "%lx-%lx", &lo, &hi) == 2) && (a >= lo) && (a < hi);
    }
    fclose(f);
    return in;
}

/** Reports the whole binary as skipped in TAP (automake's tap-driver counts it). */
static inline int test_skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    fflush(stdout);
    return 0;
}

/** Seconds of CLOCK_MONOTONIC. */
static inline double test_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/** Waits up to @a seconds for the counter at @a counter, which other threads add to, to reach
 *  @a value; fails the test with both numbers when it does not. */
static inline void test_wait_u64(const uint64_t *counter, uint64_t value, double seconds)
{
    double deadline = test_now_s() + seconds;

    while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < value) {
        ck_assert_msg(test_now_s() < deadline, "waited %.0f s: %llu of %llu", seconds,
                      (unsigned long long)__atomic_load_n(counter, __ATOMIC_ACQUIRE),
                      (unsigned long long)value);
        usleep(100);
    }
}

/**
 * Runs @a suite in fork mode (unless CK_FORK=no) with TAP output on stdout; a crash or a timeout
 * stays inside its test and is reported as a failure of that test.
 */
static inline int test_run_suite(Suite *suite)
{
    SRunner *sr = srunner_create(suite);
    int failed;

    /* fork mode unless CK_FORK=no (ThreadSanitizer cannot follow a fork) */
    srunner_set_fork_status(sr, CK_FORK_GETENV);
    srunner_set_tap(sr, "-");
    srunner_run_all(sr, CK_SILENT);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return (failed == 0) ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
