/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk network layer: which UCX transports reach the other processes of the job, said once
 * at start (a line at INFO per process), and a warning when processes of this node are reached
 * without ringk although the ringk transport is installed: a job started without ringk-run
 * works, over TCP loopback, tens of times slower, and would otherwise say nothing. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "net.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uct/api/uct.h>
#include <unistd.h>

#define REPORT_LANES 160 /* bytes of the lane list of one endpoint */

/* The transports of @a ep's lanes ("tl/dev", unique, in lane order) into @a lanes, and the
 * one carrying active messages into @a am ("?" when UCX's report has no such lane). UCX
 * 1.13's API has no query for them: they are read off ucp_ep_print_info(), whose lane lines
 * read "lane[N]: IDX:TL/DEV.PORT md[..] ... -> ... am ...". */
static void ep_transports(ucp_ep_h ep, char *am, size_t am_len, char *lanes, size_t lanes_len)
{
    char *buf = NULL, *line, *save = NULL, tl[64];
    size_t len = 0, used = 0;
    FILE *f = open_memstream(&buf, &len);
    int idx;

    snprintf(am, am_len, "?");
    lanes[0] = '\0';
    if (f == NULL) {
        return;
    }
    ucp_ep_print_info(ep, f);
    fclose(f);
    for (line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *at = strstr(line, "lane["), *dot;

        if ((at == NULL) || ((at = strstr(at, "]:")) == NULL) ||
            (sscanf(at + 2, " %d:%63s", &idx, tl) != 2)) {
            continue;
        }
        dot = strrchr(tl, '.'); /* the port: "ringk/ring.0" */
        if (dot != NULL) {
            *dot = '\0';
        }
        for (at = strstr(line, " am"); at != NULL; at = strstr(at + 1, " am")) {
            if ((at[3] == '\0') || (at[3] == ' ')) { /* " am", not " am_bw#0" */
                snprintf(am, am_len, "%s", tl);
            }
        }
        if ((strstr(lanes, tl) == NULL) && (used + strlen(tl) + 2 < lanes_len)) {
            used += (size_t)snprintf(lanes + used, lanes_len - used, "%s%s", used ? " " : "",
                                     tl);
        }
    }
    free(buf);
}

/* Whether UCT has the ringk component in this process (the plugin is loaded). */
static int ringk_loaded(void)
{
    uct_component_h *comps;
    unsigned n, i;
    int found = 0;

    if (uct_query_components(&comps, &n) != UCS_OK) {
        return 0;
    }
    for (i = 0; (i < n) && !found; i++) {
        uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};

        found = (uct_component_query(comps[i], &attr) == UCS_OK) && !strcmp(attr.name, "ringk");
    }
    uct_release_component_list(comps);
    return found;
}

/* Where the ringk plugin is installed, in @a path: RINGK_PLUGIN (as ringk-run reads it), the
 * plugin directory beside this libringk (a relocated or DESTDIR install), or the configured
 * one. 1 when a file is there, else 0. */
static int ringk_installed(char *path, size_t len)
{
    const char *env = getenv("RINGK_PLUGIN");
    char self[4096];
    Dl_info info;

    if ((env != NULL) && (*env != '\0')) {
        snprintf(path, len, "%s", env);
        return access(path, R_OK) == 0;
    }
    if ((dladdr((void*)ringk_ctx_create, &info) != 0) && (info.dli_fname != NULL)) {
        snprintf(self, sizeof(self), "%s", info.dli_fname);
        snprintf(path, len, "%s/%s/libuct_ringk.so", dirname(self), RINGK_PLUGINRELDIR);
        if (access(path, R_OK) == 0) {
            return 1;
        }
    }
    snprintf(path, len, "%s/libuct_ringk.so", RINGK_PLUGINDIR);
    return access(path, R_OK) == 0;
}

/* The warning for the @a n processes of this node reached without ringk (@a ranks, @a am:
 * how). */
static void report_local_slow(ringk_remote_t *r, int n, const char *ranks, const char *am)
{
    const char *who = (n == 1) ? "process" : "processes", *are = (n == 1) ? "is" : "are";
    const char *tls = getenv("UCX_TLS");
    char path[4200];

    if (ringk_loaded()) {
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "%s %s of this node %s reached over %s, not "
                      "ringk, though the ringk transport is loaded: UCX did not select it "
                      "(UCX_TLS=%s)", who, ranks, are, am, (tls != NULL) ? tls : "unset");
    } else if (ringk_installed(path, sizeof(path))) {
        ringk_log_msg(r->ctx, RINGK_LOG_WARN, "%s %s of this node %s reached over %s, not "
                      "ringk: the ringk transport is installed (%s) but not loaded in this "
                      "process; start the job with ringk-run (ringk-run(1)), which loads it",
                      who, ranks, are, am, path);
    } else {
        ringk_log_msg(r->ctx, RINGK_LOG_INFO, "%s %s of this node %s reached over %s: no ringk "
                      "transport is installed (%s)", who, ranks, are, am, path);
    }
}

void net_report_transports(ringk_remote_t *r, const ringk_node_id_t *nodes)
{
    const int me = r->ctx->job.rank;
    char am[64], lanes[REPORT_LANES], why[128], slow[128] = "", slow_am[64] = "";
    size_t used = 0;
    int rank, local, nslow = 0;

    for (rank = 0; rank < r->size; rank++) {
        if (rank == me) {
            continue;
        }
        local = ringk_node_id_same(&nodes[me], &nodes[rank], why, sizeof(why));
        ep_transports(r->eps[rank], am, sizeof(am), lanes, sizeof(lanes));
        ringk_log_msg(r->ctx, RINGK_LOG_INFO, "process %d (%s) is reached over %s (lanes: %s)",
                      rank, local ? "this node" : "another node", am, lanes);
        if (local && strncmp(am, "ringk/", 6)) {
            if (used + 16 < sizeof(slow)) {
                used += (size_t)snprintf(slow + used, sizeof(slow) - used, "%s%d",
                                         used ? ", " : "", rank);
            } else if (slow[used - 1] != '.') {
                used += (size_t)snprintf(slow + used, sizeof(slow) - used, ", ...");
            }
            snprintf(slow_am, sizeof(slow_am), "%s", am);
            nslow++;
        }
    }
    if (nslow > 0) {
        report_local_slow(r, nslow, slow, slow_am);
    }
}
