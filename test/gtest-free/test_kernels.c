/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the CUDA kernels: the ring protocol running on a GPU. Skips without CUDA or a GPU. */
#include "ringk_config.h"
#include "test_util.h"

#include <errno.h>

#ifdef HAVE_CUDA
#include <core/ringk_cuda.h>
#include <kernels/ringk_kernels.h>

#include <cuda_runtime_api.h>
#include <string.h>

static const struct {
    uint32_t ncells, cell_size, nmsgs;
} selftest_cases[] = {
    {8, 64, 10000},   /* small ring: constant wrap-around and full-ring waits */
    {256, 64, 100000},
    {64, 256, 50000},
};

START_TEST(test_kernels_ring_selftest)
{
    unsigned verified = 0;
    char why[256] = "";

    ck_assert_msg(ringk_kernels_selftest(selftest_cases[_i].nmsgs, selftest_cases[_i].ncells,
                                         selftest_cases[_i].cell_size, &verified, why,
                                         sizeof(why)) == 0,
                  "device self-test failed: %s", why);
    ck_assert_uint_eq(verified, selftest_cases[_i].nmsgs);
}
END_TEST

/* The P2P canary between device 0 and each device (itself included) passes where peer access
 * exists, and where it does not it refuses with a reason instead of trusting the path. */
START_TEST(test_kernels_p2p_canary)
{
    char a[32], b[32], why[256];
    int n = 0, i, can, ret;

    ck_assert_int_eq(cudaGetDeviceCount(&n), cudaSuccess);
    ck_assert_int_eq(cudaDeviceGetPCIBusId(a, sizeof(a), 0), cudaSuccess);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(cudaDeviceGetPCIBusId(b, sizeof(b), i), cudaSuccess);
        can = 1;
        if (i != 0) {
            ck_assert_int_eq(cudaDeviceCanAccessPeer(&can, 0, i), cudaSuccess);
        }
        ret = ringk_cuda_p2p_canary(a, b, why, sizeof(why));
        if (can) {
            ck_assert_msg(ret == 0, "canary %s -> %s: %s", a, b, why);
            ck_assert_ptr_nonnull(strstr(why, "verified"));
        } else {
            ck_assert_int_eq(ret, -EPERM);
        }
        printf("# canary %s -> %s: %s\n", a, b, why);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc;
    char why[256] = "";

    if (ringk_kernels_device_count(why, sizeof(why)) == 0) {
        return test_skip_all(why);
    }
    tc = tcase_create("ring");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_kernels_ring_selftest, 0,
                        sizeof(selftest_cases) / sizeof(selftest_cases[0]));
    tcase_add_test(tc, test_kernels_p2p_canary);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
#else
int main(void)
{
    return test_skip_all("built without CUDA (configure --without-cuda or no CUDA Toolkit)");
}
#endif
