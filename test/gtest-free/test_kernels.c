/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the CUDA kernels: the ring protocol running on a GPU. Skips without CUDA or a GPU. */
#include "ringk_config.h"
#include "test_util.h"

#ifdef HAVE_CUDA
#include <kernels/ringk_kernels.h>

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
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
#else
int main(void)
{
    return test_skip_all("built without CUDA (configure --without-cuda or no CUDA Toolkit)");
}
#endif
