/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: calls of a handler that runs in a UCP receive callback and would have to wait,
 * queued and made in order once the callback returned. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- calls deferred from a handler run in a receive callback (ringk_tls_inline) ---- */

typedef struct ringk_deferred {
    struct ringk_deferred *next;
    ringk_defer_kind_t           kind;
    ringk_ctx_t           *ctx;       /* the context the call was made on */
    ringk_kernel_t        *from;      /* the sender (NULL: the host), or the kernel to terminate
                                         * or destroy */
    int                    route;     /* RINGK_DEFER_SEND_ROUTE */
    const char            *name;      /* kernel (RINGK_DEFER_SEND) or topic
                                         * (RINGK_DEFER_PUBLISH), in data */
    ringk_msg_type_t       type;
    int                    timeout_ms;
    size_t                 length;
    uint8_t                data[];    /* the payload, then the name */
} ringk_deferred_t;

/* Queues a call of the handler running in the receive callback, to be made once the callback
 * returned (ringk_deferred_run): 0, or -ENOMEM. The caller has published what the handler
 * batched so far (ringk_flush_running): the batched path of ringk_send(), which does not look
 * at defer_head, then finds no open cell. */
__attribute__((noinline)) int ringk_defer_call(ringk_ctx_t *ctx, ringk_defer_kind_t kind,
                                                ringk_kernel_t *from, int route,
                                                const char *name, ringk_msg_type_t type,
                                                const void *payload, size_t length,
                                                int timeout_ms)
{
    ringk_kernel_t *k   = ringk_tls_inline;
    size_t name_len     = (name != NULL) ? strlen(name) + 1 : 0;
    ringk_deferred_t *d = malloc(sizeof(*d) + length + name_len);

    if (d == NULL) {
        return -ENOMEM;
    }
    d->next       = NULL;
    d->ctx        = ctx;
    d->kind       = kind;
    d->from       = from;
    d->route      = route;
    d->type       = type;
    d->timeout_ms = timeout_ms;
    d->length     = length;
    if (length > 0) {
        memcpy(d->data, payload, length);
    }
    d->name = NULL;
    if (name != NULL) {
        memcpy(d->data + length, name, name_len);
        d->name = (const char*)(d->data + length);
    }
    if (k->defer_tail != NULL) {
        k->defer_tail->next = d;
    } else {
        k->defer_head = d;
    }
    k->defer_tail = d;
    __atomic_store_n(&k->deferred, k->deferred + 1, __ATOMIC_RELAXED);
    return 0;
}

/* A send from a handler running in the receive callback while earlier calls of it wait to be
 * made: queued behind them (FIFO), or -EAGAIN for a send that must not wait. */
int ringk_defer_behind(ringk_ctx_t *ctx, ringk_defer_kind_t kind, ringk_kernel_t *from, int route,
                        const char *name, ringk_msg_type_t type, const void *payload,
                        size_t length, int timeout_ms)
{
    if (timeout_ms == RINGK_WAIT_NONE) {
        return -EAGAIN;
    }
    return ringk_defer_call(ctx, kind, from, route, name, type, payload, length, timeout_ms);
}

/* Makes the calls that kernel @a k's handler deferred in a receive callback, in order, on k's
 * thread, as its handler would have (batched sends, waits): the failures are counted and
 * logged, since the handler was told 0. */
__attribute__((noinline)) void ringk_deferred_run(ringk_kernel_t *k)
{
    ringk_deferred_t *d;
    unsigned reached;
    int ret;

    ringk_tls_running   = k;
    k->iter_sends = 0;
    while ((d = k->defer_head) != NULL) {
        k->defer_head = d->next;
        switch (d->kind) {
        case RINGK_DEFER_SEND:
            ret = ringk_send(d->ctx, d->from, d->name, d->type, d->data, d->length,
                             d->timeout_ms);
            break;
        case RINGK_DEFER_SEND_ROUTE:
            ret = ringk_send_route(d->ctx, d->from, d->route, d->type, d->data, d->length,
                                   d->timeout_ms);
            break;
        case RINGK_DEFER_PUBLISH:
            ret = ringk_publish(d->ctx, d->from, d->name, d->data, d->length, d->timeout_ms,
                                &reached);
            break;
        case RINGK_DEFER_DESTROY:
            ret = ringk_kernel_destroy(d->from);
            break;
        default:
            ret = ringk_kernel_terminate(d->from);
            break;
        }
        if (ret < 0) {
            __atomic_store_n(&k->deferred_failed, k->deferred_failed + 1, __ATOMIC_RELAXED);
            ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': a %s its handler made in a "
                          "receive callback, deferred until the callback returned, failed: %s",
                          k->name, (d->kind == RINGK_DEFER_PUBLISH) ? "publish" :
                          (d->kind == RINGK_DEFER_TERMINATE) ? "terminate" :
                          (d->kind == RINGK_DEFER_DESTROY) ? "destroy" : "send",
                          strerror(-ret));
        }
        free(d);
    }
    k->defer_tail = NULL;
    if (k->open_batches != 0) {
        ringk_batch_flush_all(k);
    }
    ringk_tls_running = NULL;
}
