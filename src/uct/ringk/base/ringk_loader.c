/* SPDX-License-Identifier: BSD-3-Clause */
/* libuct_ringk.so, the file UCX loads (preloaded by ringk-run, or found by UCX >= 1.22 in
 * UCX_PLUGIN_PATH and its module directory): a loader that refers to nothing of UCX but the
 * public uct_component_register, so that it loads into any UCX release. It finds the release
 * the process runs and opens the transport itself (ringk_uct.so, in the same directory) only
 * when that is the release the transport was built against. The transport is built on UCX's
 * internal structs and symbols: in another release it could fail in the dynamic loader (an
 * undefined symbol ends the whole process there, before any code of ringk runs) or
 * misbehave, so it is not opened at all and the reason names both releases. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#define _GNU_SOURCE
#include "core/ringk_ucxver.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* the transport's file name, beside this loader */
#define RINGK_LOADER_IMPL "ringk_uct.so"

/* Errors go to stderr in one line: UCX's logger is not used, its symbols being internal. */
static void ringk_loader_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "[ringk] ERROR ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

/* The path of the transport: this loader's directory (as it was loaded) + RINGK_LOADER_IMPL.
 * 0, or -1 when it cannot be formed. */
static int ringk_loader_impl_path(char *path, size_t len)
{
    Dl_info info;
    const char *slash;
    int dir_len;

    if ((dladdr((void*)ringk_loader_impl_path, &info) == 0) || (info.dli_fname == NULL)) {
        return -1;
    }
    slash   = strrchr(info.dli_fname, '/');
    dir_len = (slash != NULL) ? (int)(slash - info.dli_fname) : 1;
    if (snprintf(path, len, "%.*s/%s", dir_len, (slash != NULL) ? info.dli_fname : ".",
                 RINGK_LOADER_IMPL) >= (int)len) {
        return -1;
    }
    return 0;
}

__attribute__((constructor)) static void ringk_loader_load(void)
{
    const ringk_ucxver_t built = {RINGK_UCX_BUILD_MAJOR, RINGK_UCX_BUILD_MINOR,
                                  RINGK_UCX_BUILD_PATCH};
    ringk_ucxver_t running;
    char msg[256], path[PATH_MAX];
    const char *err;

    if (ringk_ucxver_running(&running, msg, sizeof(msg)) != 0) {
        ringk_loader_error("ringk: cannot tell which UCX is running (%s); not registering the "
                           "ringk transport (built against UCX %s)", msg,
                           RINGK_UCX_BUILD_VERSION);
        return;
    }
    if (ringk_ucxver_check(&built, &running, msg, sizeof(msg)) != 0) {
        ringk_loader_error("%s%s", msg, "");
        return;
    }
    if (ringk_loader_impl_path(path, sizeof(path)) != 0) {
        ringk_loader_error("ringk: cannot locate the loader's own file to find %s%s; not "
                           "registering the ringk transport", RINGK_LOADER_IMPL, "");
        return;
    }
    /* RTLD_NOW: an unresolved symbol is an error here, not a crash at first use; GLOBAL: the
     * transport's own calls (uct_ringk_ep_path_query) are found by dlsym(RTLD_DEFAULT), as
     * those of a preloaded plugin are; NODELETE: its component stays registered with UCX for
     * the life of the process. */
    if (dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE) == NULL) {
        err = dlerror();
        ringk_loader_error("ringk: cannot load the ringk transport: %s%s; not registering it",
                           (err != NULL) ? err : path, "");
    }
}
