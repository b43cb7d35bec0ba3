/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the ringk UCT component as a UCX program sees it: found through the public UCT API,
 * its configuration errors, and the UCX version guard. Runs under contrib/ringk-run. */
#include "ringk_config.h"
#include "test_util.h"
#include "test_uct.h"

#include <core/ringk_ucxver.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucs/debug/log_def.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static uct_component_h find_component(const char *name)
{
    uct_component_h *components, found = NULL;
    uct_component_attr_t attr;
    unsigned n, i;

    ck_assert_int_eq(uct_query_components(&components, &n), UCS_OK);
    for (i = 0; i < n; i++) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        ck_assert_int_eq(uct_component_query(components[i], &attr), UCS_OK);
        if (!strcmp(attr.name, name)) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    return found;
}

uct_component_h test_ringk_component(void)
{
    uct_component_h c = find_component("ringk");

    ck_assert_msg(c != NULL, "component 'ringk' not registered; run this test through "
                             "contrib/ringk-run (it preloads the plugin)");
    return c;
}

ucs_status_t test_uct_config_set(void *config, const char *name, const char *value)
{
    ucs_status_t status = uct_config_modify(config, name, value);
    char full[128];

    if (status != UCS_ERR_NO_ELEM) {
        return status;
    }
    snprintf(full, sizeof(full), "RINGK_%s", name);
    return uct_config_modify(config, full, value);
}

void *test_plugin_sym(const char *name)
{
    /* the transport (ringk_uct.so, which the loader libuct_ringk.so opens) */
    static const char *const libs[] = {"ringk_uct.so", "libuct_ringk.so", "libuct_ringk.so.0"};
    void *sym, *lib;
    size_t i;

    test_ringk_component(); /* UCX's module loader loads the plugin at its first query */
    sym = dlsym(RTLD_DEFAULT, name);
    for (i = 0; (sym == NULL) && (i < sizeof(libs) / sizeof(libs[0])); i++) {
        lib = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
        if (lib != NULL) {
            sym = dlsym(lib, name);
            dlclose(lib);
        }
    }
    return sym;
}

uct_md_h test_ringk_md_open(void)
{
    uct_md_config_t *config;
    uct_md_h md;

    ck_assert_int_eq(uct_md_config_read(test_ringk_component(), NULL, NULL, &config), UCS_OK);
    ck_assert_int_eq(uct_md_open(test_ringk_component(), "ringk", config, &md), UCS_OK);
    uct_config_release(config);
    return md;
}

uct_ep_h test_uct_connect(uct_iface_h iface, const void *addr, const void *dev_addr)
{
    uct_ep_params_t params = {
        .field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                      UCT_EP_PARAM_FIELD_IFACE_ADDR,
        .iface      = iface,
        .dev_addr   = (const uct_device_addr_t*)dev_addr,
        .iface_addr = (const uct_iface_addr_t*)addr
    };
    uct_ep_h ep;

    ck_assert(uct_iface_is_reachable(iface, (const uct_device_addr_t*)dev_addr,
                                     (const uct_iface_addr_t*)addr));
    ck_assert_int_eq(uct_ep_create(&params, &ep), UCS_OK);
    return ep;
}

char test_captured[8192];

static ucs_log_func_rc_t capture_log(const char *file, unsigned line, const char *function,
                                     ucs_log_level_t level,
                                     const ucs_log_component_config_t *comp_conf,
                                     const char *message, va_list ap)
{
    size_t len = strlen(test_captured);

    if (level <= UCS_LOG_LEVEL_WARN) {
        vsnprintf(test_captured + len, sizeof(test_captured) - len, message, ap);
        strncat(test_captured, "\n", sizeof(test_captured) - strlen(test_captured) - 1);
    }
    return UCS_LOG_FUNC_RC_STOP;
}

void test_capture_errors_begin(void)
{
    test_captured[0] = '\0';
    ucs_log_push_handler(capture_log);
}

void test_capture_errors_end(void)
{
    ucs_log_pop_handler();
}

/* Runs a shell command, returns its exit status and its stdout+stderr in @a out. */
static int run_cmd(const char *cmd, char *out, size_t out_len)
{
    FILE *f = popen(cmd, "r");
    char drain[4096];
    size_t n = 0, r;
    int status;

    ck_assert_ptr_nonnull(f);
    while ((n < out_len - 1) && ((r = fread(out + n, 1, out_len - 1 - n, f)) > 0)) {
        n += r;
    }
    out[n] = '\0';
    while (fread(drain, 1, sizeof(drain), f) > 0) {
        /* the rest, unread, would block the command on a full pipe and pclose for ever */
    }
    status = pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- component, md and transport --------------------------------------------------------- */

START_TEST(test_component_found)
{
    uct_md_resource_desc_t md_res[4];
    uct_component_attr_t attr = {
        .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT
    };

    ck_assert_int_eq(uct_component_query(test_ringk_component(), &attr), UCS_OK);
    ck_assert_str_eq(attr.name, "ringk");
    ck_assert_uint_eq(attr.md_resource_count, 2); /* ringk and ringk_shm (test_uct_shm.c) */
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = md_res;
    ck_assert_int_eq(uct_component_query(test_ringk_component(), &attr), UCS_OK);
    ck_assert_str_eq(md_res[0].md_name, "ringk");
}
END_TEST

START_TEST(test_component_tl_resources)
{
    uct_md_h md = test_ringk_md_open();
    uct_tl_resource_desc_t *res;
    unsigned n;

    ck_assert_int_eq(uct_md_query_tl_resources(md, &res, &n), UCS_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(res[0].tl_name, "ringk");
    ck_assert_str_eq(res[0].dev_name, "ring");
    ck_assert_int_eq(res[0].dev_type, UCT_DEVICE_TYPE_SHM);
    uct_release_tl_resource_list(res);
    uct_md_close(md);
}
END_TEST

/* The device names of both mds, by default and with UCX_RINGK_LEGACY_DEVICE_NAMES=y (the names
 * of ringk 0.4), which an iface opens by as well; a bad value fails the md's configuration. */
static void md_device_name_check(const char *md_name, const char *want)
{
    uct_md_config_t *config;
    uct_tl_resource_desc_t *res;
    uct_md_h md;
    unsigned n;

    ck_assert_int_eq(uct_md_config_read(test_ringk_component(), NULL, NULL, &config), UCS_OK);
    ck_assert_int_eq(uct_md_open(test_ringk_component(), md_name, config, &md), UCS_OK);
    uct_config_release(config);
    ck_assert_int_eq(uct_md_query_tl_resources(md, &res, &n), UCS_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(res[0].tl_name, "ringk");
    ck_assert_str_eq(res[0].dev_name, want);
    uct_release_tl_resource_list(res);
    uct_md_close(md);
}

START_TEST(test_component_legacy_device_names)
{
    uct_md_config_t *config;

    md_device_name_check("ringk", "ring");
    md_device_name_check("ringk_shm", "mapped");
    setenv("UCX_RINGK_LEGACY_DEVICE_NAMES", "y", 1);
    md_device_name_check("ringk", "memory");
    md_device_name_check("ringk_shm", "shm");
    setenv("UCX_RINGK_LEGACY_DEVICE_NAMES", "perhaps", 1);
    ck_assert_int_ne(uct_md_config_read(test_ringk_component(), NULL, NULL, &config), UCS_OK);
    unsetenv("UCX_RINGK_LEGACY_DEVICE_NAMES");
    md_device_name_check("ringk", "ring");
}
END_TEST

/* Opens a ringk iface with one configuration variable changed; returns the status. */
static ucs_status_t iface_open_with(const char *name, const char *value, uct_iface_h *iface_p)
{
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_iface_config_t *config;
    uct_iface_params_t params = {
        .field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                UCT_IFACE_PARAM_FIELD_DEVICE,
        .open_mode            = UCT_IFACE_OPEN_MODE_DEVICE,
        .mode.device.tl_name  = "ringk",
        .mode.device.dev_name = "ring"
    };
    ucs_status_t status;
    uct_md_h md = test_ringk_md_open();

    ck_assert_int_eq(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async), UCS_OK);
    ck_assert_int_eq(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker), UCS_OK);
    ck_assert_int_eq(uct_md_iface_config_read(md, "ringk", NULL, NULL, &config), UCS_OK);
    if (name != NULL) {
        status = test_uct_config_set(config, name, value);
        if (status != UCS_OK) {
            uct_config_release(config); /* ASan's leak check found this missing */
            return status; /* rejected by the parser itself */
        }
    }
    status = uct_iface_open(md, worker, &params, config, iface_p);
    uct_config_release(config);
    return status;
}

START_TEST(test_iface_open_default)
{
    uct_iface_attr_t attr;
    uct_iface_h iface;

    ck_assert_int_eq(iface_open_with(NULL, NULL, &iface), UCS_OK);
    ck_assert_int_eq(uct_iface_query(iface, &attr), UCS_OK);
    /* the exact capability set is checked in test_uct_ep_query_caps */
    ck_assert_uint_eq(attr.iface_addr_len, 32);
    ck_assert_uint_le(attr.device_addr_len, 31); /* UCP's limit for a device address */
    uct_iface_close(iface);
}
END_TEST

static const struct {
    const char *name, *value, *expect;
} bad_config[] = {
    {"RING_SIZE", "1000", "UCX_RINGK_RING_SIZE 1000 is not a power of 2 between 2 and 65536"},
    {"RING_SIZE", "1", "UCX_RINGK_RING_SIZE 1 is not a power of 2 between 2 and 65536"},
    {"RING_SIZE", "131072", "UCX_RINGK_RING_SIZE 131072 is not a power of 2 between 2 and 65536"},
    {"CELL_SIZE", "96", "UCX_RINGK_CELL_SIZE 96 is not a power of 2 between 64 and 4096"},
    {"CELL_SIZE", "32", "UCX_RINGK_CELL_SIZE 32 is not a power of 2 between 64 and 4096"},
    {"CELL_SIZE", "8k", "UCX_RINGK_CELL_SIZE 8192 is not a power of 2 between 64 and 4096"},
    {"LANES", "0", "UCX_RINGK_LANES 0 is out of range 1..1024"},
    {"LANES", "2000", "UCX_RINGK_LANES 2000 is out of range 1..1024"},
    {"SEG_SIZE", "16", "UCX_RINGK_SEG_SIZE 16 is out of range 64..1048576"},
    {"SEG_SIZE", "2m", "UCX_RINGK_SEG_SIZE 2097152 is out of range 64..1048576"},
    {"POLL_BATCH", "0", "UCX_RINGK_POLL_BATCH 0 is out of range 1..1024"},
    {"LIVENESS_INTERVAL", "5000s", "UCX_RINGK_LIVENESS_INTERVAL 5000.000s is out of range 0..3600s"},
    {"GPU", "gpu0", "UCX_RINGK_GPU 'gpu0' is not auto, none or a PCI bus id such as 0000:07:00.0"},
    {"GPU", "0000:07:00.9", "UCX_RINGK_GPU '0000:07:00.9' is not auto, none or a PCI bus id"},
    {"PATH", "fast", "UCX_RINGK_PATH 'fast' is not one of P2P_NVLINK, P2P_PCIE, CUDA_IPC, "
     "HOST_STAGED"},
    {"P2P_LEVEL", "far", "UCX_RINGK_P2P_LEVEL 'far' is not one of SAME_DEVICE (LOC)"},
};

START_TEST(test_iface_config_errors)
{
    uct_iface_h iface;
    ucs_status_t status;

    test_capture_errors_begin();
    status = iface_open_with(bad_config[_i].name, bad_config[_i].value, &iface);
    test_capture_errors_end();
    ck_assert_int_eq(status, UCS_ERR_INVALID_PARAM);
    ck_assert_msg(strstr(test_captured, bad_config[_i].expect) != NULL,
                  "expected error '%s', logged '%s'", bad_config[_i].expect, test_captured);
}
END_TEST

START_TEST(test_iface_bad_path_override)
{
    uct_iface_h iface;
    ucs_status_t status;

    setenv("RINGK_PATH", "fast", 1);
    test_capture_errors_begin();
    status = iface_open_with(NULL, NULL, &iface);
    test_capture_errors_end();
    unsetenv("RINGK_PATH");
    ck_assert_int_eq(status, UCS_ERR_INVALID_PARAM);
    ck_assert_msg(strstr(test_captured, "RINGK_PATH 'fast' is not one of P2P_NVLINK, P2P_PCIE, "
                         "CUDA_IPC, HOST_STAGED") != NULL, "logged '%s'", test_captured);
}
END_TEST

/* The receive segment (lanes x ring, allocated and zeroed at open) has a limit of its own,
 * which each setting within its range can pass together. */
START_TEST(test_iface_segment_too_big)
{
    uct_iface_h iface;
    ucs_status_t status;

    setenv("UCX_RINGK_LANES", "1024", 1);
    test_capture_errors_begin();
    status = iface_open_with("RING_SIZE", "65536", &iface);
    test_capture_errors_end();
    unsetenv("UCX_RINGK_LANES");
    ck_assert_int_eq(status, UCS_ERR_INVALID_PARAM);
    ck_assert_msg(strstr(test_captured, "UCX_RINGK_LANES 1024 x RING_SIZE 65536 x CELL_SIZE 64 = "
                         "4294967296 bytes of receive segment, above its limit of 1024 MiB")
                  != NULL, "logged '%s'", test_captured);
}
END_TEST

/* Active messages smaller than UCP's rendezvous messages (a ring of 4 cells): the iface opens
 * (UCT alone works with it) with a warning that names the settings. */
START_TEST(test_iface_small_am_warns)
{
    uct_iface_h iface;

    test_capture_errors_begin();
    ck_assert_int_eq(iface_open_with("RING_SIZE", "4", &iface), UCS_OK);
    test_capture_errors_end();
    ck_assert_msg(strstr(test_captured, "ringk: active messages of at most 112 bytes "
                         "(UCX_RINGK_SEG_SIZE 8192, RING_SIZE 4, CELL_SIZE 64): UCP needs 512")
                  != NULL, "logged '%s'", test_captured);
    uct_iface_close(iface);
}
END_TEST

START_TEST(test_iface_config_unparsable)
{
    uct_iface_h iface;

    /* Not a number at all: UCX's own parser refuses it before the iface sees it. */
    ck_assert_int_ne(iface_open_with("RING_SIZE", "lots", &iface), UCS_OK);
}
END_TEST

/* ---- version guard ------------------------------------------------------------------------ */

static const struct {
    const char *built, *running;
    int         expect;
} ver_cases[] = {
    {"1.13.1", "1.13.1", 0},      {"1.13.1", "1.13.0", -EPROTO}, {"1.13.1", "1.14.1", -EPROTO},
    {"1.13.1", "2.13.1", -EPROTO}, {"1.22.0", "1.22.0", 0},      {"1.22.0", "1.22.0-rc1", 0},
};

START_TEST(test_version_check_table)
{
    ringk_ucxver_t b, r;
    char msg[256] = "";

    ck_assert_int_eq(ringk_ucxver_parse(ver_cases[_i].built, &b), 0);
    ck_assert_int_eq(ringk_ucxver_parse(ver_cases[_i].running, &r), 0);
    ck_assert_int_eq(ringk_ucxver_check(&b, &r, msg, sizeof(msg)), ver_cases[_i].expect);
    if (ver_cases[_i].expect != 0) {
        ck_assert_ptr_nonnull(strstr(msg, "built against UCX"));
        ck_assert_ptr_nonnull(strstr(msg, "this process runs UCX"));
    }
}
END_TEST

START_TEST(test_version_parse_rejects)
{
    static const char *bad[] = {"", "1", "1.13", "a.b.c", "1..3", "1.13.x", "-1.2.3",
                                "99999999999.1.1"};
    ringk_ucxver_t v;
    unsigned i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(ringk_ucxver_parse(bad[i], &v) == -EINVAL, "accepted '%s'", bad[i]);
    }
    ck_assert_int_eq(ringk_ucxver_parse(NULL, &v), -EINVAL);
}
END_TEST

START_TEST(test_version_running_matches)
{
    ringk_ucxver_t v;
    char why[256];
    unsigned major, minor, patch;

    unsetenv("RINGK_TEST_FAKE_UCX_VERSION");
    ck_assert_int_eq(ringk_ucxver_running(&v, why, sizeof(why)), 0);
    ucp_get_version(&major, &minor, &patch);
    ck_assert_uint_eq(v.major, major);
    ck_assert_uint_eq(v.minor, minor);
    ck_assert_uint_eq(v.patch, patch);
}
END_TEST

static const char *ucx_info(void)
{
    const char *p = getenv("UCX_INFO");
    return (p != NULL && *p != '\0') ? p : "ucx_info";
}

static const char *wrapper(void)
{
    static char path[1024];
    const char *top = getenv("RINGK_TOP_BUILDDIR");

    snprintf(path, sizeof(path), "%s/contrib/ringk-run", top ? top : ".");
    return path;
}

START_TEST(test_version_guard_refuses_mismatch)
{
    static char out[1 << 17];
    char cmd[2048];

    /* The wrapper preloads the plugin into a UCX that claims another release; the dynamic
     * loader's log shows which files were opened. */
    snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD RINGK_TEST_FAKE_UCX_VERSION=1.12.0 "
             "LD_DEBUG=files %s %s -d 2>&1", wrapper(), ucx_info());
    ck_assert_int_eq(run_cmd(cmd, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "Transport: ringk") == NULL, "ringk registered despite mismatch");
    /* the loader ran, and the transport, built on the internals of another release, was
     * never opened (in a real mismatch it could stop the process in the dynamic loader) */
    ck_assert_msg(strstr(out, "/libuct_ringk.so") != NULL, "no loader in: %.2000s", out);
    ck_assert_msg(strstr(out, "ringk_uct.so") == NULL, "the transport was opened: %.2000s",
                  strstr(out, "ringk_uct.so"));
    /* both releases named: the one it was built against and the one it found */
    ck_assert_msg(strstr(out, "built against UCX " RINGK_UCX_BUILD_VERSION
                              " but this process runs UCX 1.12.0") != NULL,
                  "no clear version error in: %.2000s", out);
    /* and the other transports are still there: the program was not harmed */
    ck_assert_ptr_nonnull(strstr(out, "Transport: posix"));
}
END_TEST

START_TEST(test_version_guard_accepts_match)
{
    static char out[1 << 17];
    char cmd[2048];

    snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD -u RINGK_TEST_FAKE_UCX_VERSION "
             "LD_DEBUG=files %s %s -d 2>&1", wrapper(), ucx_info());
    ck_assert_int_eq(run_cmd(cmd, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "Transport: ringk") != NULL, "ringk not listed: %.2000s", out);
    /* the loader opened the transport beside it */
    ck_assert_msg(strstr(out, "/ringk_uct.so") != NULL, "no transport opened: %.2000s", out);
}
END_TEST

/* UCX libraries in the layout of a UCX build tree (libucp and libuct in directories of their
 * own, as src/ucp/.libs and src/uct/.libs): the plugin still finds the running version and
 * registers, and a program without libucp that the preload reaches logs no error. The layout
 * is made of links to the installed libraries; the loader's log shows that they were used. */
START_TEST(test_version_build_tree_layout)
{
    char cmd[4096], out[1 << 16];

    snprintf(cmd, sizeof(cmd),
             "d=$(mktemp -d) && info=$(command -v %s) && lp= && "
             "for l in ucs uct ucm ucp; do "
             "  p=$(ldd \"$info\" | awk -v n=lib$l.so.0 '$1 == n {print $3}') && "
             "  mkdir -p $d/src/$l/.libs && ln -s \"$p\" $d/src/$l/.libs/lib$l.so.0 && "
             "  lp=$lp${lp:+:}$d/src/$l/.libs; "
             "done && "
             "env -u LD_PRELOAD -u RINGK_TEST_FAKE_UCX_VERSION LD_LIBRARY_PATH=$lp LD_DEBUG=libs "
             "  %s \"$info\" -d >$d/out 2>&1; "
             "grep -q \"calling init: $d/src/uct/.libs/libuct.so.0\" $d/out && "
             "  echo 'layout used'; "
             "grep -v '^ *[0-9]*:' $d/out; "
             /* a program without libucp that the preload reaches (a shell, a tool): the
              * libucp of the build tree is found from libuct's place */
             "env -u LD_PRELOAD -u RINGK_TEST_FAKE_UCX_VERSION LD_LIBRARY_PATH=$lp "
             "  %s sh -c 'echo no-ucp program ran' 2>&1; "
             "rm -rf $d",
             ucx_info(), wrapper(), wrapper());
    ck_assert_int_eq(run_cmd(cmd, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "layout used") != NULL, "the links were not loaded: %.2000s", out);
    ck_assert_msg(strstr(out, "cannot tell which UCX") == NULL, "%.2000s", out);
    ck_assert_msg(strstr(out, "Transport: ringk") != NULL, "ringk not listed: %.2000s", out);
    ck_assert_msg(strstr(out, "no-ucp program ran") != NULL, "%.2000s", out);
}
END_TEST

START_TEST(test_without_wrapper_unaffected)
{
    char cmd[2048], out[1 << 16];

    snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD -u UCX_PLUGIN_PATH %s -d 2>&1", ucx_info());
    ck_assert_int_eq(run_cmd(cmd, out, sizeof(out)), 0);
    ck_assert_ptr_null(strstr(out, "ringk"));
    ck_assert_ptr_nonnull(strstr(out, "Transport: posix"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("uct");
    TCase *tc;

    tc = tcase_create("component");
    tcase_add_test(tc, test_component_found);
    tcase_add_test(tc, test_component_tl_resources);
    tcase_add_test(tc, test_component_legacy_device_names);
    suite_add_tcase(s, tc);

    tc = tcase_create("config");
    tcase_add_test(tc, test_iface_open_default);
    tcase_add_loop_test(tc, test_iface_config_errors, 0, sizeof(bad_config) / sizeof(bad_config[0]));
    tcase_add_test(tc, test_iface_config_unparsable);
    tcase_add_test(tc, test_iface_segment_too_big);
    tcase_add_test(tc, test_iface_small_am_warns);
    tcase_add_test(tc, test_iface_bad_path_override);
    suite_add_tcase(s, tc);

    tc = tcase_create("version");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_version_check_table, 0, sizeof(ver_cases) / sizeof(ver_cases[0]));
    tcase_add_test(tc, test_version_parse_rejects);
    tcase_add_test(tc, test_version_running_matches);
    tcase_add_test(tc, test_version_guard_refuses_mismatch);
    tcase_add_test(tc, test_version_guard_accepts_match);
    tcase_add_test(tc, test_version_build_tree_layout);
    tcase_add_test(tc, test_without_wrapper_unaffected);
    suite_add_tcase(s, tc);

    test_uct_ep_tcases(s);
    test_uct_shm_tcases(s);
    return test_run_suite(s);
}
