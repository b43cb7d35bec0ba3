/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the hello every process of a job sends first (src/ringk/net/ringk_wire.c): a
 * process of another wire or layout is refused with both sides' release, wire and layout named,
 * one of another release that speaks the same wire is taken, and a worker address length out
 * of range is refused. */
#define _GNU_SOURCE
#include "test_util.h"

#include <ringk/net/ringk_wire.h>

#include <errno.h>
#include <string.h>

static wire_hello_t hello(uint64_t len)
{
    ringk_node_id_t node = {.boot = 1, .pid_ns = 2, .ipc_shm = 3};
    wire_hello_t h;

    ringk_wire_hello_make(&h, len, &node);
    return h;
}

START_TEST(test_wire_hello_same)
{
    wire_hello_t mine = hello(200), other = hello(RINGK_HELLO_ADDR_MAX);
    char why[256] = "";

    ck_assert_uint_eq(mine.magic, RINGK_HELLO_MAGIC);
    ck_assert_uint_eq(mine.wire, RINGK_WIRE_VERSION);
    ck_assert_uint_eq(mine.node.pid_ns, 2);
    ck_assert_int_eq(ringk_wire_hello_check(&mine, &mine, 0, why, sizeof(why)), 0);
    ck_assert_int_eq(ringk_wire_hello_check(&other, &mine, 1, why, sizeof(why)), 0);
    other.release = mine.release + 1; /* another release of the same wire mixes */
    ck_assert_int_eq(ringk_wire_hello_check(&other, &mine, 1, why, sizeof(why)), 0);
    ck_assert_str_eq(why, "");
}
END_TEST

START_TEST(test_wire_hello_other_build)
{
    wire_hello_t mine = hello(200), other = hello(200);
    char why[512];

    other.wire    = mine.wire + 1;
    other.release = (1u << 16) | (2u << 8) | 3u;
    ck_assert_int_eq(ringk_wire_hello_check(&other, &mine, 3, why, sizeof(why)), -EPROTO);
    ck_assert_msg(strstr(why, "process 3 runs ringk 1.2.3 (wire 2, layout") != NULL, "%s", why);
    ck_assert_msg(strstr(why, "this process ringk") != NULL, "%s", why);
    ck_assert_msg(strstr(why, "must run the same ringk") != NULL, "%s", why);
    other       = hello(200);
    other.shape = mine.shape ^ 1u; /* sizes changed without a new wire version */
    ck_assert_int_eq(ringk_wire_hello_check(&other, &mine, 1, why, sizeof(why)), -EPROTO);
    ck_assert_msg(strstr(why, "process 1 runs ringk") != NULL, "%s", why);
    other       = hello(200);
    other.magic = 0x12345678u; /* not a ringk hello at all */
    ck_assert_int_eq(ringk_wire_hello_check(&other, &mine, 2, why, sizeof(why)), -EPROTO);
    ck_assert_msg(strstr(why, "process 2's first words are not a ringk hello (0x12345678)") !=
                  NULL, "%s", why);
}
END_TEST

START_TEST(test_wire_hello_address)
{
    wire_hello_t mine = hello(200), other = hello(0);
    char why[256];

    ck_assert_int_eq(ringk_wire_hello_check(&other, &mine, 1, why, sizeof(why)), -EPROTO);
    ck_assert_msg(strstr(why, "process 1 sent a worker address of 0 bytes (1..65536)") != NULL,
                  "%s", why);
    other = hello(RINGK_HELLO_ADDR_MAX + 1ull);
    ck_assert_int_eq(ringk_wire_hello_check(&other, &mine, 1, why, sizeof(why)), -EPROTO);
    ck_assert_msg(strstr(why, "65537 bytes") != NULL, "%s", why);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("wire");
    TCase *tc = tcase_create("hello");

    tcase_add_test(tc, test_wire_hello_same);
    tcase_add_test(tc, test_wire_hello_other_build);
    tcase_add_test(tc, test_wire_hello_address);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
