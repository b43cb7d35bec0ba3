/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: configuration strings from the environment and the UCX version parser
 * (RINGK_P2P_LEVEL, RINGK_PATH, RINGK_TEST_FAKE_UCX_VERSION-style version strings). */
#include <core/ringk_topo.h>
#include <core/ringk_ucxver.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[256], err[256];
    ringk_policy_t pol;
    ringk_ucxver_t v, w = {1, 13, 1};
    size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1;
    char *split;

    memcpy(s, data, n);
    s[n] = '\0';
    ringk_ucxver_parse(s, &v);
    if (ringk_ucxver_parse(s, &v) == 0) {
        ringk_ucxver_check(&w, &v, err, sizeof(err));
    }
    split = strchr(s, '|');
    if (split != NULL) {
        *split++ = '\0';
    }
    if (ringk_policy_parse(s, split, &pol, err, sizeof(err)) == 0) {
        if ((unsigned)pol.p2p_level >= RINGK_CLASS_COUNT) {
            abort();
        }
    }
    return 0;
}
