/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: topology files (hwloc XML with ringk's NVLink attributes). Loading must fail
 * cleanly or give a topology whose every pair classifies and maps to a path. */
#include <core/ringk_topo.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ringk_topo_t topo;
    static char path[64];
    ringk_topo_pair_t pair;
    ringk_policy_t pol;
    char err[512], reason[1024];
    unsigned a, b;
    FILE *f;

    if (path[0] == '\0') {
        snprintf(path, sizeof(path), "/tmp/ringk-fuzz-topo-%d.xml", (int)getpid());
    }
    f = fopen(path, "w");
    if (f == NULL) {
        return 0;
    }
    fwrite(data, 1, size, f);
    fclose(f);
    if (ringk_topo_load(&topo, path, err, sizeof(err)) == 0) {
        ringk_policy_parse(NULL, NULL, &pol, err, sizeof(err));
        for (a = 0; a < topo.ngpus; a++) {
            for (b = 0; b < topo.ngpus; b++) {
                ringk_topo_classify(&topo, a, b, &pair);
                ringk_policy_apply(&pol, &pair, reason, sizeof(reason));
            }
            ringk_topo_classify_numa(&topo, a, 0, &pair);
        }
    }
    return 0;
}
