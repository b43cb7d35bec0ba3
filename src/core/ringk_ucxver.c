/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk_ucxver: finds the running UCX release and compares it with the one built against. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#define _GNU_SOURCE
#include "ringk_ucxver.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ringk_ucxver_parse(const char *str, ringk_ucxver_t *ver_p)
{
    unsigned long part[3];
    const char *p = str;
    char *end;
    int i;

    if (str == NULL) {
        return -EINVAL;
    }
    for (i = 0; i < 3; i++) {
        if ((*p < '0') || (*p > '9')) {
            return -EINVAL;
        }
        errno   = 0;
        part[i] = strtoul(p, &end, 10);
        if ((errno != 0) || (part[i] > UINT_MAX)) {
            return -EINVAL;
        }
        p = end;
        if (i < 2) {
            if (*p != '.') {
                return -EINVAL;
            }
            p++;
        }
    }
    ver_p->major = part[0];
    ver_p->minor = part[1];
    ver_p->patch = part[2];
    return 0;
}

int ringk_ucxver_check(const ringk_ucxver_t *built, const ringk_ucxver_t *running,
                       char *msg, size_t msg_len)
{
    if ((built->major == running->major) && (built->minor == running->minor) &&
        (built->patch == running->patch)) {
        return 0;
    }
    snprintf(msg, msg_len,
             "ringk plugin was built against UCX %u.%u.%u but this process runs UCX %u.%u.%u; "
             "not registering the ringk transport (rebuild ringk against UCX %u.%u.%u)",
             built->major, built->minor, built->patch, running->major, running->minor,
             running->patch, running->major, running->minor, running->patch);
    return -EPROTO;
}

/* Declared by libuct; only its address is taken, to find which libuct is loaded. */
extern void uct_component_register(void *component);

typedef void (*get_version_func_t)(unsigned *, unsigned *, unsigned *);

/* dl_iterate_phdr callback: copies the path of a loaded libucp.so* into @a arg (PATH_MAX). */
static int ucxver_find_loaded_ucp(struct dl_phdr_info *info, size_t size, void *arg)
{
    const char *name = info->dlpi_name, *base;

    if ((name == NULL) || (*name == '\0')) {
        return 0;
    }
    base = strrchr(name, '/');
    base = (base != NULL) ? base + 1 : name;
    if ((strncmp(base, "libucp.so", 9) != 0) || (strlen(name) >= PATH_MAX)) {
        return 0;
    }
    strcpy(arg, name);
    return 1;
}

/* The version of the libucp already mapped into this process, wherever it lives (an installed
 * UCX, a build tree, a prefix of its own): 0, or -ENOENT when no libucp is mapped. */
static int ucxver_from_loaded_ucp(ringk_ucxver_t *ver_p)
{
    char path[PATH_MAX];
    get_version_func_t get_version;
    void *ucp;

    if (dl_iterate_phdr(ucxver_find_loaded_ucp, path) == 0) {
        return -ENOENT;
    }
    ucp = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (ucp == NULL) {
        return -ENOENT;
    }
    get_version = (get_version_func_t)dlsym(ucp, "ucp_get_version");
    if (get_version != NULL) {
        get_version(&ver_p->major, &ver_p->minor, &ver_p->patch);
    }
    dlclose(ucp);
    return (get_version != NULL) ? 0 : -ENOENT;
}

/* Where a libucp may sit relative to the directory of the loaded libuct: an installation
 * (both in one directory) and a UCX build tree (src/uct/.libs and src/ucp/.libs). */
static const char *const ucxver_ucp_places[] = {"libucp.so.0", "../../ucp/.libs/libucp.so.0"};

int ringk_ucxver_running(ringk_ucxver_t *ver_p, char *why, size_t why_len)
{
    const char *fake = getenv("RINGK_TEST_FAKE_UCX_VERSION");
    char path[PATH_MAX], dir[PATH_MAX];
    get_version_func_t get_version;
    Dl_info info;
    size_t i, off = 0;
    char *slash;
    void *ucp;

    if ((fake != NULL) && (*fake != '\0')) {
        if (ringk_ucxver_parse(fake, ver_p) != 0) {
            snprintf(why, why_len, "RINGK_TEST_FAKE_UCX_VERSION '%s' is not MAJOR.MINOR.PATCH",
                     fake);
            return -EINVAL;
        }
        return 0;
    }

    /* A process that uses UCP has its libucp mapped before any constructor runs, and one
     * loaded later (by an MPI component) is there when a plugin is dlopen-ed. */
    if (ucxver_from_loaded_ucp(ver_p) == 0) {
        return 0;
    }
    /* A process without UCP (a UCT program, or any program the preload reaches): the libucp
     * of the same UCX, found from where the loaded libuct is. */
    if ((dladdr((void*)uct_component_register, &info) == 0) || (info.dli_fname == NULL)) {
        snprintf(why, why_len, "cannot locate the loaded libuct");
        return -ENOENT;
    }
    if (snprintf(dir, sizeof(dir), "%s", info.dli_fname) >= (int)sizeof(dir)) {
        snprintf(why, why_len, "libuct path too long");
        return -ENAMETOOLONG;
    }
    slash = strrchr(dir, '/');
    if (slash == NULL) {
        snprintf(why, why_len, "libuct path '%s' has no directory", info.dli_fname);
        return -ENOENT;
    }
    *slash = '\0';
    why[0] = '\0';
    for (i = 0; i < sizeof(ucxver_ucp_places) / sizeof(ucxver_ucp_places[0]); i++) {
        if (snprintf(path, sizeof(path), "%s/%s", dir, ucxver_ucp_places[i]) >=
            (int)sizeof(path)) {
            continue;
        }
        /* libucp may be mapped but not yet initialised (we run in a constructor);
         * ucp_get_version only returns constants, so that is fine. If it is not loaded, load
         * it for good (RTLD_NODELETE): its constructors register config tables that must not
         * dangle. */
        ucp = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
        if (ucp == NULL) {
            ucp = dlopen(path, RTLD_LAZY | RTLD_NODELETE);
        }
        if (ucp == NULL) {
            off += snprintf(why + off, (off < why_len) ? why_len - off : 0, "%scannot open %s",
                            (off > 0) ? "; " : "", path);
            continue;
        }
        get_version = (get_version_func_t)dlsym(ucp, "ucp_get_version");
        if (get_version != NULL) {
            get_version(&ver_p->major, &ver_p->minor, &ver_p->patch);
        }
        dlclose(ucp);
        if (get_version != NULL) {
            return 0;
        }
        off += snprintf(why + off, (off < why_len) ? why_len - off : 0,
                        "%s%s has no ucp_get_version", (off > 0) ? "; " : "", path);
    }
    return -ENOENT;
}
