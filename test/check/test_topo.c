/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the topology module: the class and path of every pair on each hwloc XML fixture of
 * test/check/topo/, every override, estimates, and bad files and bad override values. */
#include "test_util.h"

#include <core/ringk_node.h>
#include <core/ringk_topo.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ringk_topo_t topo;

static const char *fixture(const char *name)
{
    static char path[1024];
    const char *src = getenv("RINGK_TOP_SRCDIR");

    snprintf(path, sizeof(path), "%s/test/check/topo/%s", src ? src : ".", name);
    return path;
}

static void load(const char *name)
{
    char err[512] = "";

    ck_assert_msg(ringk_topo_load(&topo, fixture(name), err, sizeof(err)) == 0, "%s: %s", name,
                  err);
}

/* Expected label matrix and default-policy paths of each fixture ("N" = P2P_NVLINK,
 * "P" = P2P_PCIE, "I" = CUDA_IPC, "H" = HOST_STAGED), row by row. */
static const struct {
    const char *file;
    unsigned    ngpus, npackages;
    const char *labels[8][8];
    const char *paths[8];
} fixtures[] = {
    {"nvswitch-8gpu.xml", 8, 2,
     {{"X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18"},
      {"NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18"},
      {"NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18"},
      {"NV18", "NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18"},
      {"NV18", "NV18", "NV18", "NV18", "X", "NV18", "NV18", "NV18"},
      {"NV18", "NV18", "NV18", "NV18", "NV18", "X", "NV18", "NV18"},
      {"NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "X", "NV18"},
      {"NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "X"}},
     {"INNNNNNN", "NINNNNNN", "NNINNNNN", "NNNINNNN", "NNNNINNN", "NNNNNINN", "NNNNNNIN",
      "NNNNNNNI"}},
    {"pcie-4gpu.xml", 4, 1,
     {{"X", "PIX", "PHB", "PHB"}, {"PIX", "X", "PHB", "PHB"}, {"PHB", "PHB", "X", "PIX"},
      {"PHB", "PHB", "PIX", "X"}},
     {"IPHH", "PIHH", "HHIP", "HHPI"}},
    {"dual-socket.xml", 3, 2,
     {{"X", "PHB", "NV2"}, {"PHB", "X", "SYS"}, {"NV2", "SYS", "X"}},
     {"IHN", "HIH", "NHI"}},
    {"vm-flat.xml", 4, 1,
     {{"X", "PHB", "PHB", "PHB"}, {"PHB", "X", "PHB", "PHB"}, {"PHB", "PHB", "X", "PHB"},
      {"PHB", "PHB", "PHB", "X"}},
     {"IHHH", "HIHH", "HHIH", "HHHI"}},
    {"no-gpu.xml", 0, 1, {{NULL}}, {NULL}},
};

static char path_letter(int path)
{
    switch (path) {
    case RINGK_PATH_P2P_NVLINK:  return 'N';
    case RINGK_PATH_P2P_PCIE:    return 'P';
    case RINGK_PATH_CUDA_IPC:    return 'I';
    case RINGK_PATH_HOST_STAGED: return 'H';
    default:                     return '?';
    }
}

START_TEST(test_topo_fixture_pairs)
{
    ringk_policy_t pol;
    ringk_topo_pair_t pair;
    char err[256], label[16], reason[512];
    unsigned a, b;
    int path;

    load(fixtures[_i].file);
    ck_assert_uint_eq(topo.ngpus, fixtures[_i].ngpus);
    ck_assert_uint_eq(topo.npackages, fixtures[_i].npackages);
    ck_assert_int_eq(ringk_policy_parse(NULL, NULL, &pol, err, sizeof(err)), 0);
    for (a = 0; a < topo.ngpus; a++) {
        for (b = 0; b < topo.ngpus; b++) {
            ringk_topo_classify(&topo, a, b, &pair);
            ringk_path_class_label(&pair, label, sizeof(label));
            ck_assert_msg(!strcmp(label, fixtures[_i].labels[a][b]),
                          "%s GPU%u-GPU%u: %s, expected %s (%s)", fixtures[_i].file, a, b, label,
                          fixtures[_i].labels[a][b], pair.reason);
            ck_assert_msg(pair.reason[0] != '\0', "no reason for GPU%u-GPU%u", a, b);
            path = ringk_policy_apply(&pol, &pair, reason, sizeof(reason));
            ck_assert_msg(path_letter(path) == fixtures[_i].paths[a][b],
                          "%s GPU%u-GPU%u: path %c, expected %c (%s)", fixtures[_i].file, a, b,
                          path_letter(path), fixtures[_i].paths[a][b], reason);
            /* symmetric */
            {
                ringk_topo_pair_t rev;
                ringk_topo_classify(&topo, b, a, &rev);
                ck_assert_int_eq(rev.cls, pair.cls);
            }
        }
    }
}
END_TEST

START_TEST(test_topo_estimates)
{
    ringk_topo_pair_t pair;

    load("nvswitch-8gpu.xml");
    ringk_topo_classify(&topo, 0, 7, &pair);
    ck_assert_int_eq(pair.cls, RINGK_CLASS_NVLINK);
    ck_assert_uint_eq(pair.nvlinks, 18);
    ck_assert(pair.bw_gbps > 449.9 && pair.bw_gbps < 450.1); /* 18 links x 25 GB/s (gen 4) */
    load("dual-socket.xml");
    ringk_topo_classify(&topo, 0, 2, &pair);
    ck_assert(pair.bw_gbps > 49.9 && pair.bw_gbps < 50.1);   /* 2 links x 25 GB/s (gen 3) */
    ringk_topo_classify(&topo, 1, 2, &pair);
    ck_assert_int_eq(pair.cls, RINGK_CLASS_CROSS_SOCKET);
    ck_assert(pair.bw_gbps > 15.7 && pair.bw_gbps < 15.8);   /* half of gen4 x16 */
    load("pcie-4gpu.xml");
    ringk_topo_classify(&topo, 0, 1, &pair);
    ck_assert(pair.bw_gbps > 31.4 && pair.bw_gbps < 31.6);   /* gen4 x16 */
    ck_assert_uint_eq(pair.switches, 1);
    ck_assert(pair.lat_us < 1.5);
    ringk_topo_classify(&topo, 0, 2, &pair);
    ck_assert(pair.lat_us > 1.5); /* through the host bridge costs more than one switch */
}
END_TEST

START_TEST(test_topo_gpu_numa)
{
    ringk_topo_pair_t pair;

    load("dual-socket.xml");
    ringk_topo_classify_numa(&topo, 0, 0, &pair);
    ck_assert_int_eq(pair.cls, RINGK_CLASS_HOST_BRIDGE);
    ringk_topo_classify_numa(&topo, 0, 1, &pair);
    ck_assert_int_eq(pair.cls, RINGK_CLASS_CROSS_SOCKET);
    ringk_topo_classify_numa(&topo, 2, 1, &pair);
    ck_assert_int_eq(pair.cls, RINGK_CLASS_HOST_BRIDGE);
    ringk_topo_classify_numa(&topo, 2, 5, &pair);
    ck_assert_int_eq(pair.cls, RINGK_CLASS_NONE);
    ck_assert_ptr_nonnull(strstr(pair.reason, "NUMA node 5"));
}
END_TEST

/* overrides: fixture, GPU pair, RINGK_P2P_LEVEL, RINGK_PATH, expected path (-EINVAL: refused) */
static const struct {
    const char *file;
    unsigned    a, b;
    const char *level, *path;
    int         expect;
} overrides[] = {
    {"pcie-4gpu.xml", 0, 2, "PHB", NULL, RINGK_PATH_P2P_PCIE},
    {"pcie-4gpu.xml", 0, 2, "host_bridge", NULL, RINGK_PATH_P2P_PCIE},
    {"pcie-4gpu.xml", 0, 1, "LOC", NULL, RINGK_PATH_HOST_STAGED},
    {"pcie-4gpu.xml", 0, 1, "NVL", NULL, RINGK_PATH_HOST_STAGED},
    {"pcie-4gpu.xml", 0, 1, "PIX", NULL, RINGK_PATH_P2P_PCIE},
    {"dual-socket.xml", 1, 2, "SYS", NULL, RINGK_PATH_P2P_PCIE},
    {"dual-socket.xml", 1, 2, "PHB", NULL, RINGK_PATH_HOST_STAGED},
    {"dual-socket.xml", 0, 2, "NVL", NULL, RINGK_PATH_P2P_NVLINK},
    {"dual-socket.xml", 0, 2, "LOC", NULL, RINGK_PATH_HOST_STAGED},
    {"pcie-4gpu.xml", 0, 1, NULL, "HOST_STAGED", RINGK_PATH_HOST_STAGED},
    {"pcie-4gpu.xml", 0, 2, NULL, "cuda_ipc", RINGK_PATH_CUDA_IPC},
    {"pcie-4gpu.xml", 0, 2, NULL, "P2P_PCIE", RINGK_PATH_P2P_PCIE},
    {"pcie-4gpu.xml", 0, 1, NULL, "P2P_NVLINK", -EINVAL},
    {"nvswitch-8gpu.xml", 0, 5, NULL, "P2P_NVLINK", RINGK_PATH_P2P_NVLINK},
    {"nvswitch-8gpu.xml", 0, 5, "LOC", "P2P_PCIE", RINGK_PATH_P2P_PCIE},
};

START_TEST(test_topo_overrides)
{
    ringk_policy_t pol;
    ringk_topo_pair_t pair;
    char err[256], reason[512];
    int path;

    load(overrides[_i].file);
    ck_assert_int_eq(ringk_policy_parse(overrides[_i].level, overrides[_i].path, &pol, err,
                                        sizeof(err)), 0);
    ringk_topo_classify(&topo, overrides[_i].a, overrides[_i].b, &pair);
    path = ringk_policy_apply(&pol, &pair, reason, sizeof(reason));
    ck_assert_msg(path == overrides[_i].expect, "%s GPU%u-GPU%u level %s path %s: %d (%s)",
                  overrides[_i].file, overrides[_i].a, overrides[_i].b, overrides[_i].level,
                  overrides[_i].path, path, reason);
    if (overrides[_i].path != NULL) {
        ck_assert_msg(strstr(reason, "RINGK_PATH") != NULL, "reason: %s", reason);
    }
}
END_TEST

START_TEST(test_topo_env_policy)
{
    ringk_policy_t pol;
    char err[256];

    setenv("RINGK_P2P_LEVEL", "SYS", 1);
    setenv("RINGK_PATH", "HOST_STAGED", 1);
    ck_assert_int_eq(ringk_policy_from_env(&pol, err, sizeof(err)), 0);
    ck_assert_int_eq(pol.p2p_level, RINGK_CLASS_CROSS_SOCKET);
    ck_assert(pol.forced);
    ck_assert_int_eq(pol.path, RINGK_PATH_HOST_STAGED);
    unsetenv("RINGK_PATH");
    ck_assert_int_eq(ringk_policy_from_env(&pol, err, sizeof(err)), 0);
    ck_assert(!pol.forced);
    unsetenv("RINGK_P2P_LEVEL");
}
END_TEST

static const struct {
    const char *level, *path, *expect;
} bad_policy[] = {
    {"fast", NULL, "RINGK_P2P_LEVEL 'fast' is not one of"},
    {"PCIE", NULL, "RINGK_P2P_LEVEL 'PCIE' is not one of"},
    {NULL, "nvlink", "RINGK_PATH 'nvlink' is not one of P2P_NVLINK, P2P_PCIE, CUDA_IPC, HOST_STAGED"},
    {NULL, "HOST", "RINGK_PATH 'HOST' is not one of"},
};

START_TEST(test_topo_bad_policy)
{
    ringk_policy_t pol = {.p2p_level = RINGK_CLASS_NONE};
    char err[256] = "";

    ck_assert_int_eq(ringk_policy_parse(bad_policy[_i].level, bad_policy[_i].path, &pol, err,
                                        sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, bad_policy[_i].expect) != NULL, "error: %s", err);
    ck_assert_int_eq(pol.p2p_level, RINGK_CLASS_NONE); /* output untouched on error */
}
END_TEST

/* Writes @a text into a temporary file and returns its path. */
static const char *tmp_file(const char *text)
{
    static char path[64];
    FILE *f;

    snprintf(path, sizeof(path), "/tmp/ringk-topo-test-%d.xml", (int)getpid());
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* A fixture with one attribute value replaced, written to a temporary file. */
static const char *edited_fixture(const char *name, const char *from, const char *to)
{
    static char text[1 << 20];
    char *hit, out[1 << 20];
    size_t n;
    FILE *f = fopen(fixture(name), "r");

    ck_assert_ptr_nonnull(f);
    n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    hit = strstr(text, from);
    ck_assert_ptr_nonnull(hit);
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(hit - text), text, to, hit + strlen(from));
    return tmp_file(out);
}

static const struct {
    const char *what, *from, *to, *expect;
} bad_files[] = {
    {"nvlink count", "0000:b1:00.0:2\"", "0000:b1:00.0:x\"", "link count 'x' is not 1..64"},
    {"nvlink entry", "0000:b1:00.0:2\"", "gpu3\"", "entry 'gpu3' is not BUSID:LINKS"},
    {"nvlink version", "RingkNVLinkVersion\" value=\"3\"", "RingkNVLinkVersion\" value=\"9\"",
     "RingkNVLinkVersion '9' is not a number 0..5"},
    {"missing version", "name=\"RingkNVLinkVersion\"", "name=\"SomethingElse\"",
     "lists NVLinks but no RingkNVLinkVersion"},
};

START_TEST(test_topo_bad_files)
{
    char err[512] = "";
    const char *path;
    int ret;

    ret = ringk_topo_load(&topo, "/nonexistent/topo.xml", err, sizeof(err));
    ck_assert_int_eq(ret, -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/topo.xml"));

    path = tmp_file("this is not XML\n");
    err[0] = '\0';
    ck_assert_int_eq(ringk_topo_load(&topo, path, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, path));

    path = tmp_file("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n  <object type=\"Mach");
    err[0] = '\0';
    ck_assert_int_eq(ringk_topo_load(&topo, path, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, path));
    unlink(path);
}
END_TEST

/* Regression (found by test/fuzz/fuzz_topo): a malformed file on which hwloc 2.9 itself
 * crashes is refused with a clear error, and the caller lives on. */
START_TEST(test_topo_file_crashing_hwloc)
{
    char err[512] = "";

    ck_assert_int_eq(ringk_topo_load(&topo, fixture("bad/hwloc-crash.xml"), err, sizeof(err)),
                     -EINVAL);
    ck_assert_msg(strstr(err, "is malformed: hwloc crashed reading it") != NULL, "error: %s",
                  err);
    load("pcie-4gpu.xml"); /* and the next load works */
    ck_assert_uint_eq(topo.ngpus, 4);
}
END_TEST

START_TEST(test_topo_bad_nvlink_info)
{
    char err[512] = "";
    const char *path = edited_fixture("dual-socket.xml", bad_files[_i].from, bad_files[_i].to);

    ck_assert_int_eq(ringk_topo_load(&topo, path, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, bad_files[_i].expect) != NULL, "%s: error '%s'",
                  bad_files[_i].what, err);
    unlink(path);
}
END_TEST

START_TEST(test_topo_this_machine)
{
    ringk_topo_pair_t pair;
    char err[512] = "";

    ck_assert_int_eq(ringk_topo_load(&topo, NULL, err, sizeof(err)), 0);
    ck_assert_str_eq(topo.source, "this machine");
    ck_assert_uint_ge(topo.ncores, 1);
    ck_assert_uint_ge(topo.npackages, 1);
    /* this machine has no GPU: classification of a missing GPU says so, no crash */
    ringk_topo_classify(&topo, topo.ngpus, topo.ngpus + 1, &pair);
    ck_assert_int_eq(pair.cls, RINGK_CLASS_NONE);
}
END_TEST

/* A P2P path is trusted only after its canary: from a file it is left unverified; on "this
 * machine" without working peer access (here: no GPU) it falls back to HOST_STAGED and says
 * why. */
START_TEST(test_topo_canary_fallback)
{
    ringk_policy_t pol;
    ringk_topo_pair_t pair;
    char err[256], reason[1024];
    int path;

    load("pcie-4gpu.xml");
    ck_assert_int_eq(ringk_policy_parse(NULL, NULL, &pol, err, sizeof(err)), 0);
    ringk_topo_classify(&topo, 0, 1, &pair);
    path = ringk_policy_apply(&pol, &pair, reason, sizeof(reason));
    ck_assert_int_eq(path, RINGK_PATH_P2P_PCIE);
    path = ringk_topo_verify_path(&topo, 0, 1, path, reason, sizeof(reason), NULL);
    ck_assert_int_eq(path, RINGK_PATH_P2P_PCIE);
    ck_assert_ptr_nonnull(strstr(reason, "not verified (topology from a file)"));

    /* the same GPUs claimed to be on this machine: the canary cannot pass here */
    snprintf(topo.source, sizeof(topo.source), "this machine");
    path = ringk_policy_apply(&pol, &pair, reason, sizeof(reason));
    path = ringk_topo_verify_path(&topo, 0, 1, path, reason, sizeof(reason), NULL);
    ck_assert_int_eq(path, RINGK_PATH_HOST_STAGED);
    ck_assert_msg(strstr(reason, "P2P_PCIE failed its canary") != NULL, "reason: %s", reason);
    ck_assert_ptr_nonnull(strstr(reason, "falling back to HOST_STAGED"));
    ck_assert_ptr_null(strstr(reason, "first endpoint"));
    /* the pair's next endpoints take that outcome: no second canary (its CUDA calls can wait
     * for resident kernels) */
    path = ringk_policy_apply(&pol, &pair, reason, sizeof(reason));
    path = ringk_topo_verify_path(&topo, 0, 1, path, reason, sizeof(reason), NULL);
    ck_assert_int_eq(path, RINGK_PATH_HOST_STAGED);
    ck_assert_msg(strstr(reason, "P2P_PCIE failed its canary") != NULL, "reason: %s", reason);
    ck_assert_msg(strstr(reason, "at this process's first endpoint of the pair") != NULL,
                  "reason: %s", reason);
}
END_TEST

/* Bus ids as they travel in addresses: both spellings, either case, round trip; junk refused. */
START_TEST(test_topo_busid_pack)
{
    static const char *bad[] = {"", "auto", "0000:07:00", "0000:07:00.8", "0000:07:20.0",
                                "0000:07:00.0x", " 0000:07:00.0", "-1:07:00.0", "07:00",
                                "0000:107:00.0", NULL};
    char buf[32];
    uint64_t p;
    int i;

    p = ringk_busid_pack("0000:3B:1f.7");
    ck_assert_uint_ne(p, 0);
    ringk_busid_unpack(p, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0000:3b:1f.7");
    ck_assert_uint_eq(ringk_busid_pack("3b:1f.7"), p);
    ck_assert_uint_ne(ringk_busid_pack("0001:3b:1f.7"), p);
    ck_assert_uint_ne(ringk_busid_pack("0000:00:00.0"), 0); /* a valid id is never 0 */
    for (i = 0; bad[i] != NULL; i++) {
        ck_assert_msg(ringk_busid_pack(bad[i]) == 0, "'%s' was taken as a bus id", bad[i]);
    }
    ck_assert_uint_eq(ringk_busid_pack(NULL), 0);
    load("dual-socket.xml");
    ck_assert_int_eq(ringk_topo_find_gpu(&topo, "0000:B1:00.0"), 2);
    ck_assert_int_eq(ringk_topo_find_gpu(&topo, "17:00.0"), 0);
    ck_assert_int_eq(ringk_topo_find_gpu(&topo, "0000:99:00.0"), -1);
    ck_assert_int_eq(ringk_topo_find_gpu(&topo, "nonsense"), -1);
}
END_TEST

/* Yama's ptrace_scope decides whether peers may open this process's segment: 0 or no Yama,
 * yes; 1, after prctl(PR_SET_PTRACER_ANY) (which fails where there is no Yama); 2, with
 * CAP_SYS_PTRACE; 3, never. Each answer says which case it was. */
START_TEST(test_node_ptrace_scope)
{
    static const struct {
        const char *content, *yes, *no;
    } cases[] = {
        {NULL, "no Yama", NULL},
        {"0\n", "ptrace_scope 0", NULL},
        {"1\n", "PR_SET_PTRACER_ANY set", "prctl(PR_SET_PTRACER) failed"},
        {"2\n", "has CAP_SYS_PTRACE", "no CAP_SYS_PTRACE"},
        {"3\n", NULL, "attaching is disabled"},
    };
    char path[64], why[256];
    unsigned i;
    FILE *f;
    int ret;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(path, sizeof(path), "/tmp/ringk-ptrace-scope.%d", (int)getpid());
        unlink(path);
        if (cases[i].content != NULL) {
            f = fopen(path, "w");
            ck_assert_ptr_nonnull(f);
            fputs(cases[i].content, f);
            fclose(f);
        }
        ret = ringk_node_ptrace_allow(path, why, sizeof(why));
        unlink(path);
        if (ret) {
            ck_assert_msg((cases[i].yes != NULL) && (strstr(why, cases[i].yes) != NULL),
                          "case %u: allowed, saying '%s'", i, why);
        } else {
            ck_assert_msg((cases[i].no != NULL) && (strstr(why, cases[i].no) != NULL),
                          "case %u: refused, saying '%s'", i, why);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("topo");
    TCase *tc;

    tc = tcase_create("classify");
    tcase_add_loop_test(tc, test_topo_fixture_pairs, 0, sizeof(fixtures) / sizeof(fixtures[0]));
    tcase_add_test(tc, test_topo_estimates);
    tcase_add_test(tc, test_topo_gpu_numa);
    tcase_add_test(tc, test_topo_this_machine);
    tcase_add_test(tc, test_topo_busid_pack);
    suite_add_tcase(s, tc);

    tc = tcase_create("policy");
    tcase_add_loop_test(tc, test_topo_overrides, 0, sizeof(overrides) / sizeof(overrides[0]));
    tcase_add_test(tc, test_topo_env_policy);
    tcase_add_test(tc, test_topo_canary_fallback);
    tcase_add_loop_test(tc, test_topo_bad_policy, 0, sizeof(bad_policy) / sizeof(bad_policy[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_add_test(tc, test_topo_bad_files);
    tcase_add_test(tc, test_topo_file_crashing_hwloc);
    tcase_add_test(tc, test_node_ptrace_scope);
    tcase_add_loop_test(tc, test_topo_bad_nvlink_info, 0, sizeof(bad_files) / sizeof(bad_files[0]));
    suite_add_tcase(s, tc);

    return test_run_suite(s);
}
