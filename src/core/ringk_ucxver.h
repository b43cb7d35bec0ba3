/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk_ucxver: which UCX this process runs, and whether the plugin may register into it. */
#ifndef RINGK_CORE_UCXVER_H
#define RINGK_CORE_UCXVER_H

#include <stddef.h>

/** A UCX release number. */
typedef struct ringk_ucxver {
    unsigned major;
    unsigned minor;
    unsigned patch;
} ringk_ucxver_t;

/**
 * Parses "MAJOR.MINOR.PATCH" (an optional suffix after the patch number is ignored).
 * @return 0, or -EINVAL when @a str is not a version.
 */
int ringk_ucxver_parse(const char *str, ringk_ucxver_t *ver_p);

/**
 * Decides whether a plugin built against @a built may register into @a running. The plugin uses
 * UCX's internal structs, whose layout may change in any release, so the whole release number
 * must match. On a mismatch writes a message naming both versions into @a msg.
 * @return 0 when compatible, -EPROTO otherwise.
 */
int ringk_ucxver_check(const ringk_ucxver_t *built, const ringk_ucxver_t *running,
                       char *msg, size_t msg_len);

/**
 * Finds the version of the UCX loaded into this process: ucp_get_version() of the libucp mapped
 * into it (found among the loaded objects, wherever it lives), or else of the libucp that sits
 * next to the loaded libuct. The environment variable RINGK_TEST_FAKE_UCX_VERSION, meant for
 * the test suite only, replaces the answer.
 * @return 0, or a negative errno with a reason in @a why.
 */
int ringk_ucxver_running(ringk_ucxver_t *ver_p, char *why, size_t why_len);

#endif
