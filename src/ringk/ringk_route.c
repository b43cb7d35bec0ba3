/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: K2K routes: a sender's publishes_to entries, resolved at their first send to a
 * kernel of this process or of another. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_internal.h"
#include "net/ringk_net.h"
#include "ringk_route.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* Resolves route @a i of @a from on its first use: its kernel in this process or another;
 * -ENOENT (logged) when there is none yet. */
__attribute__((noinline)) int ringk_route_resolve(ringk_ctx_t *ctx, ringk_kernel_t *from,
                                                   unsigned i)
{
    const char *to_name = from->publishes_to.names[i];
    route_t *route = &from->routes[i];
    ringk_kernel_t *to;

    /* resolved again after a kernel was destroyed: nothing of the old target is kept */
    route->gen        = __atomic_load_n(&ctx->kernels_gen, __ATOMIC_ACQUIRE);
    route->target     = NULL;
    route->rank       = -1;
    route->remote_ep  = NULL;
    route->batch_lim  = 0;
    route->head_cache = 0;
    to = ringk_kernel_lookup(ctx, to_name);
    if (to != NULL) {
        route->allowed = ringk_kernel_accepts(to, from);
        /* what batch_send() may take on this route, checked once here; a device kernel's
         * loop takes single messages only (batch cells are the CPU dispatch loop's format) */
        route->batch_lim =
            (route->allowed && !from->timestamps && !to->timestamps && (to->dev == NULL)) ?
            RINGK_MIN(RINGK_MIN(RINGK_BATCH_MAX_LEN, to->max_in), from->max_out) + 1 : 0;
        __atomic_store_n(&route->target, to, __ATOMIC_RELEASE);
    } else if ((ringk_remote_of(ctx) != NULL) &&
               (ringk_remote_lookup(ctx, to_name, &route->rank, &route->remote_id) == 0)) {
        route->allowed = 1; /* the receiving process checks its subscribes_to */
        ringk_remote_route_init(ctx, from, route);
    } else {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "undeliverable: no kernel named '%s' (from '%s')",
                      to_name, from->name);
        return -ENOENT;
    }
    return 0;
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
