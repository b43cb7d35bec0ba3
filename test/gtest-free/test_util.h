/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared helpers of the Check test binaries: TAP output, fork mode, skip reporting. */
#ifndef RINGK_TEST_UTIL_H
#define RINGK_TEST_UTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/** Reports the whole binary as skipped in TAP (automake's tap-driver counts it). */
static inline int test_skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    fflush(stdout);
    return 0;
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
