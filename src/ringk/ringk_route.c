/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: K2K routes: a sender's publishes_to entries, resolved at their first send to a
 * kernel of this process or of another. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_internal.h"
#include "net/ringk_net.h"
#include "ringk_route.h"
#include "core/ringk_node.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RINGK_HAVE_VALGRIND_H 1
#endif
#endif

/* Set once, when the library is loaded under valgrind: routes then compare names byte by byte
 * (ringk_route_name_init), since memcheck would report the bytes ringk_route_name_eq()'s word
 * loads read past a name's end. */
static int names_bytewise;

static void __attribute__((constructor)) names_check_valgrind(void)
{
#ifdef RINGK_HAVE_VALGRIND_H
    names_bytewise = (RUNNING_ON_VALGRIND != 0);
#else
    const char *pre = getenv("LD_PRELOAD");

    names_bytewise = (pre != NULL) && (strstr(pre, "vgpreload") != NULL);
#endif
}

/* Sets the words ringk_route_name_eq() compares a name with: the name @a name (a zero-padded
 * ringk_name_t) of route @a rt if it has fewer than 16 characters, else byte by byte. */
void ringk_route_name_init(route_t *rt, const char *name)
{
    rt->name_len  = (uint32_t)strlen(name);
    rt->name_m[0] = rt->name_m[1] = 0;
    memcpy(rt->name_w, name, sizeof(rt->name_w)); /* RINGK_NAME_MAX > 16 */
    if ((rt->name_len < 8) && !names_bytewise) {
        rt->name_m[0] = ~UINT64_C(0) >> (8 * (7 - rt->name_len));
    } else if ((rt->name_len < 16) && !names_bytewise) {
        rt->name_m[0] = ~UINT64_C(0);
        rt->name_m[1] = ~UINT64_C(0) >> (8 * (15 - rt->name_len));
    }
    rt->name_w[0] &= rt->name_m[0];
    rt->name_w[1] &= rt->name_m[1];
}

ringk_kernel_t *ringk_kernel_find(ringk_ctx_t *ctx, const char *name)
{
    unsigned i;

    for (i = 0; i < ctx->nkernels; i++) {
        if ((ctx->kernels[i] != NULL) && !strcmp(ctx->kernels[i]->name, name)) {
            return ctx->kernels[i];
        }
    }
    return NULL;
}

ringk_kernel_t *ringk_kernel_lookup(ringk_ctx_t *ctx, const char *name)
{
    ringk_kernel_t *k;

    pthread_mutex_lock(&ctx->lock);
    k = ringk_kernel_find(ctx, name);
    pthread_mutex_unlock(&ctx->lock);
    return k;
}

#define RINGK_MIN(a, b) (((a) < (b)) ? (a) : (b))

/* The number of @a from's route to kernel @a to_name, or -EPERM (logged) when it has none. */
int ringk_route_index(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name)
{
    unsigned i;

    for (i = 0; i < from->publishes_to.count; i++) {
        if (ringk_name_eq(from->publishes_to.names[i], to_name)) {
            return (int)i;
        }
    }
    ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s' has no route to '%s' (publishes_to)",
                  from->name, to_name);
    return -EPERM;
}

/* Binds @a route, of @a from (NULL: a send of the host), to the kernel named route->name in this
 * process or another: its kind, its target, and what may be sent on it; -ENOENT (logged) when
 * there is no such kernel (yet). */
static int route_bind(ringk_ctx_t *ctx, const ringk_kernel_t *from, route_t *route)
{
    ringk_kernel_t *to;
    uint32_t max;

    /* bound again after a kernel was destroyed: nothing of the old target is kept */
    route->gen        = __atomic_load_n(&ctx->kernels_gen, __ATOMIC_ACQUIRE);
    route->kind       = RINGK_ROUTE_UNRESOLVED;
    route->target     = NULL;
    route->rank       = -1;
    route->remote_ep  = NULL;
    route->ok_len     = 0;
    route->batch_lim  = 0;
    route->head_cache = 0;
    to = ringk_kernel_lookup(ctx, route->name);
    if (to != NULL) {
        route->allowed = (from == NULL) || ringk_kernel_accepts(to, from);
        max            = (from != NULL) ? RINGK_MIN(to->max_in, from->max_out) : to->max_in;
        route->ok_len  = route->allowed ? max + 1 : 0;
        /* what batch_send() may take on this route, checked once here; a device kernel's
         * loop takes single messages only (batch cells are the CPU dispatch loop's format) */
        route->batch_lim =
            ((from != NULL) && route->allowed && !from->timestamps && !to->timestamps &&
             (to->dev == NULL)) ? RINGK_MIN(RINGK_BATCH_MAX_LEN, max) + 1 : 0;
        route->target = to;
        __atomic_store_n(&route->kind, RINGK_ROUTE_LOCAL, __ATOMIC_RELEASE);
    } else if ((ringk_remote_of(ctx) != NULL) &&
               (ringk_remote_lookup(ctx, route->name, &route->rank, &route->remote_id) == 0)) {
        route->allowed = 1; /* the receiving process checks its subscribes_to and max_in */
        route->ok_len  = (from != NULL) ? from->max_out + 1 : UINT32_MAX;
        ringk_remote_route_init(ctx, from, route);
        __atomic_store_n(&route->kind, RINGK_ROUTE_REMOTE, __ATOMIC_RELEASE);
    } else {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: no kernel named '%s'%s%s%s",
                      route->name, (from != NULL) ? " (from '" : "",
                      (from != NULL) ? from->name : "", (from != NULL) ? "')" : "");
        return -ENOENT;
    }
    return 0;
}

/* Resolves route @a i of @a from on its first use, and again once ctx->kernels_gen moved on. */
__attribute__((noinline)) int ringk_route_resolve(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                   unsigned i)
{
    from->routes[i].name = from->publishes_to.names[i];
    return route_bind(ctx, from, &from->routes[i]);
}

int ringk_route_host(ringk_ctx_t *ctx, const char *to_name, route_t *route)
{
    memset(route, 0, sizeof(*route));
    route->name  = to_name;
    route->index = UINT32_MAX; /* no bit: it never opens a batch cell */
    return route_bind(ctx, NULL, route);
}

int ringk_route_find(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *to_name)
{
    if ((ctx == NULL) || (from == NULL) || (to_name == NULL)) {
        return ringk_log_bad_arg((ctx != NULL) ? ctx : (from != NULL) ? from->ctx : NULL,
                                 __func__, "%s is NULL", (ctx == NULL) ? "ctx" :
                                 (from == NULL) ? "from" : "to");
    }
    if (from->ctx != ctx) {
        return ringk_log_bad_arg(ctx, __func__, "kernel '%s' belongs to another context",
                                 from->name);
    }
    return ringk_route_index(ctx, from, to_name);
}

int ringk_job_dev_lookup(ringk_ctx_t *ctx, const char *name, int *rank_p, ringk_dev_export_t *e_p)
{
    return (ringk_remote_of(ctx) != NULL) ? ringk_remote_dev_lookup(ctx, name, rank_p, e_p)
                                          : -ENOENT;
}

int ringk_job_rank_gone(const ringk_ctx_t *ctx, int rank)
{
    return (ringk_remote_of(ctx) != NULL) && ringk_remote_gone(ctx, rank);
}

/* Whether zombie @a pid has no thread left: a main thread that ended while others run shows
 * 'Z' too, with Threads above 1 in /proc/<pid>/status. */
static int zombie_threadless(int pid)
{
    char path[64], line[128];
    long threads = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if ((f = fopen(path, "re")) == NULL) {
        return errno == ENOENT; /* reaped meanwhile */
    }
    while ((fgets(line, sizeof(line), f) != NULL) &&
           (sscanf(line, "Threads: %ld", &threads) != 1)) {
    }
    fclose(f);
    return threads == 1;
}

int ringk_job_rank_dead(const ringk_ctx_t *ctx, int rank)
{
    const char *close_paren;
    char buf[256];
    uint32_t pid;

    /* lost (a process that said goodbye left nothing behind) and of this node (a pid is a
     * node's); a pid out of range (0: none known; above INT_MAX kill() takes it for a group) */
    if ((ringk_remote_of(ctx) == NULL) || !ringk_remote_lost_here(ctx, rank) ||
        ((pid = ringk_remote_rank_pid(ctx, rank)) == 0) || (pid > INT_MAX)) {
        return 0;
    }
    if (kill((pid_t)pid, 0) != 0) {
        return errno == ESRCH;
    }
    /* there: a zombie (ended, not yet reaped) is dead too once no thread of it runs; a reused
     * pid reads as alive */
    close_paren = ringk_node_proc_stat((int)pid, buf, sizeof(buf));
    return (close_paren != NULL) && (close_paren[1] == ' ') &&
           ((close_paren[2] == 'Z') || (close_paren[2] == 'X')) && zombie_threadless((int)pid);
}
