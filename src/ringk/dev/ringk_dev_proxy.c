/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the device proxy: one host thread per context that serves its device kernels. It
 * drains each kernel's outbox (sends and publishes the kernel made through the host: to CPU
 * kernels, to other processes, to kernels of another device) by sending as the kernel through
 * the runtime, rings the relaunch of event-driven kernels that a device sender found returned
 * (their doorbell), turns a terminate message a device kernel took into its terminate, and
 * marks a kernel terminated once its loop is done. A device polls no host thread, so the proxy
 * polls: spinning while there was work, then napping longer and longer (at most
 * PROXY_NAP_MAX_US). */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#define PROXY_SPINS       20000   /* idle rounds before the proxy yields, then naps */
#define PROXY_NAP_MAX_US  200     /* its longest nap: what it adds to an idle outbox's first
                                     message */
#define PROXY_BUDGET      64      /* outbox records per kernel per round (fairness) */
#define PROXY_PUBLISH_MS  1000    /* how long a publish of a device kernel may wait for room */
#define RINGK_DEV_UNKNOWN_NS 5000000000ull /* how long a kernel's stream may answer only errors
                                              that say nothing of its launch */

/* Answers the device kernel's barrier wait with @a result. */
static void proxy_barrier_answer(ringk_kernel_t *k, int result)
{
    ringk_dev_host_t *d = k->dev;

    d->bar_pending = 0;
    __atomic_store_n(&d->ctl->barrier_result, result, __ATOMIC_RELAXED);
    /* the device reads the result after it sees this (acquire) */
    __atomic_store_n(&d->ctl->barrier_done, ++d->bar_answered, __ATOMIC_RELEASE);
}

/* A barrier wait of @a k: arrives for it, and answers now or once the generation passed (the
 * wait stays pending meanwhile: proxy_barrier_poll). */
static void proxy_barrier(ringk_kernel_t *k, const ringk_dev_out_t *rec)
{
    ringk_dev_host_t *d = k->dev;
    int ret = ringk_barrier_arrive(k, k->barriers.names[rec->op_arg], &d->bar_gen);

    if (ret != 0) {
        proxy_barrier_answer(k, (ret == 1) ? 0 : ret);
        return;
    }
    d->bar_pending     = 1;
    d->bar_index       = rec->op_arg;
    d->bar_deadline_ns = (rec->timeout_ms >= 0) ?
                         ringk_now_ns() + (uint64_t)rec->timeout_ms * 1000000u : 0;
}

/* A pending barrier wait: answered once its generation passed, it timed out, or a process
 * taking part is gone. A kernel being terminated leaves the barrier and gets -ECANCELED, so
 * that a wait without a bound cannot hold the terminate (and the context's destroy) forever. */
static unsigned proxy_barrier_poll(ringk_kernel_t *k)
{
    ringk_dev_host_t *d = k->dev;
    int cancel  = (ringk_load_i(&k->state) >= RINGK_KERNEL_TERMINATING);
    int expired = cancel || ((d->bar_deadline_ns != 0) && (ringk_now_ns() >= d->bar_deadline_ns));
    int ret = ringk_barrier_poll(k, k->barriers.names[d->bar_index], d->bar_gen, expired);

    if (ret == -EAGAIN) {
        return 0;
    }
    proxy_barrier_answer(k, (cancel && (ret == -ETIMEDOUT)) ? -ECANCELED : ret);
    return 1;
}

/* Sends or publishes the outbox record @a rec of device kernel @a k, as @a k: 0, -EAGAIN (a
 * full inbox or no credit: the record stays, the device sees its outbox fill), or another
 * error (counted in send_failed and logged). */
static int proxy_send(ringk_ctx_t *ctx, ringk_kernel_t *k, uint8_t op,
                      const ringk_dev_out_t *rec)
{
    const void *payload = rec + 1;
    unsigned delivered  = 0;
    int ret;

    if (rec->msg.timestamp != 0) {
        ringk_hlc_recv(&ctx->clock, rec->msg.timestamp); /* the device's stamp comes first */
    }
    if (op == RINGK_DEV_OUT_SEND) {
        /* the message keeps the sequence number the device gave it */
        __atomic_store_n(&k->seq, rec->msg.seq, __ATOMIC_RELAXED);
        return ringk_send_route(ctx, k, (int)rec->op_arg, (ringk_msg_type_t)rec->msg.type,
                                payload, rec->msg.length, RINGK_WAIT_NONE);
    }
    /* a publish that reached some subscribers cannot be given back: it waits (bounded) */
    ret = ringk_publish(ctx, k, k->topics_pub.names[rec->op_arg], payload, rec->msg.length,
                        PROXY_PUBLISH_MS, &delivered);
    /* the kernel's msgs_out counts a publish once per subscriber reached, as a CPU kernel's */
    __atomic_add_fetch(&k->dev->published, delivered, __ATOMIC_RELAXED);
    return (ret < 0) ? ((ret == -EAGAIN) ? -ETIMEDOUT : ret) : 0;
}

/* Whether the record of @a len bytes in the cell at @a cell is one the proxy can act on. */
static int proxy_record_ok(const ringk_kernel_t *k, const ringk_cell_hdr_t *cell, uint32_t len,
                           const ringk_dev_out_t *rec)
{
    uint32_t n = (cell->id == RINGK_DEV_OUT_SEND)    ? k->publishes_to.count :
                 (cell->id == RINGK_DEV_OUT_PUBLISH) ? k->topics_pub.count :
                 (cell->id == RINGK_DEV_OUT_BARRIER) ? k->barriers.count : 0;

    return (len >= sizeof(*rec)) && (n > 0) &&
           (rec->op_arg < n) && (rec->msg.length == len - sizeof(*rec)) &&
           (rec->msg.length <= k->max_out) && (rec->msg.type <= RINGK_MSG_TERMINATE);
}

/* Drains up to PROXY_BUDGET records of @a k's outbox; returns how many it took. */
static unsigned proxy_drain(ringk_ctx_t *ctx, ringk_kernel_t *k)
{
    ringk_dev_host_t *d = k->dev;
    const ringk_cell_hdr_t *cell;
    const ringk_dev_out_t *rec;
    uint64_t head = d->out_head;
    unsigned n = 0;
    uint32_t len, ncells;
    uint8_t flags;
    int ret;

    while (n < PROXY_BUDGET) {
        cell = ringk_ring_peek(&d->outbox, &head);
        if (cell == NULL) {
            break;
        }
        len    = cell->len;
        ncells = cell->ncells;
        flags  = cell->flags;
        rec    = (const ringk_dev_out_t*)ringk_ring_payload(&d->outbox, head);
        /* written by the device: checked before use */
        if ((ringk_ring_msg_check(&d->outbox, head, len, ncells, flags, d->outbox.ncells) != 0) ||
            !proxy_record_ok(k, cell, len, rec)) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "device kernel '%s': malformed outbox record at "
                          "%llu (length %u, op %u)", k->name, (unsigned long long)head, len,
                          cell->id);
            __atomic_add_fetch(&d->send_failed, 1, __ATOMIC_RELAXED);
            /* its cells where their count fits the ring, each cleared (the device reads no
             * cell before it publishes); else the one */
            if (ringk_ring_msg_check(&d->outbox, head, len, ncells, flags,
                                     d->outbox.ncells) != 0) {
                ncells = 1;
            }
            ringk_ring_release(&d->outbox, head, ncells, 0xff);
            head += ncells;
            continue;
        }
        /* every continuation cell cleared: the device publishes without reading the outbox
         * first (ringk_ring_publish_hdr(), ringk_dev_claim_publish()) */
        flags |= RINGK_CELL_FLAG_CLEAR;
        if (cell->id == RINGK_DEV_OUT_BARRIER) {
            proxy_barrier(k, rec); /* the device waits: nothing follows it in the outbox */
            ringk_ring_release(&d->outbox, head, ncells, flags);
            head += ncells;
            n++;
            continue;
        }
        ret = proxy_send(ctx, k, cell->id, rec);
        if (ret == -EAGAIN) {
            break; /* tried again next round; the device meanwhile sees its outbox fill */
        }
        if (ret != 0) {
            __atomic_add_fetch(&d->send_failed, 1, __ATOMIC_RELAXED);
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "device kernel '%s': %s on %s %u failed: %s",
                          k->name, (cell->id == RINGK_DEV_OUT_SEND) ? "send" : "publish",
                          (cell->id == RINGK_DEV_OUT_SEND) ? "route" : "topic", rec->op_arg,
                          strerror(-ret));
        }
        ringk_ring_release(&d->outbox, head, ncells, flags);
        head += ncells;
        n++;
    }
    d->out_head = head;
    return n;
}

/* Marks @a k terminated (its loop finished, or it can no longer run), waking its waiters. */
static void proxy_terminated(ringk_kernel_t *k)
{
    pthread_mutex_lock(&k->mu);
    __atomic_store_n(&k->state, RINGK_KERNEL_TERMINATED, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

/* A CUDA kernel whose launch failed (a fault in its loop or handler) never sets 'done': its
 * stream is looked at every millisecond, and on a sticky error (one that ends the device's
 * context) the kernel is logged and marked terminated, so that a terminate or the context's
 * destroy does not wait for it forever. Its device inbox is never closed, but no kernel of the
 * device is left to send to it directly (host senders read its state). Any other error of the
 * query says nothing of the launch, which may run on (a query the program's stream capture
 * refused, say): logged once, and the kernel stays as it is, unless CUDA answers nothing else
 * for RINGK_DEV_UNKNOWN_NS: then it is marked terminated too (a terminate or destroy must not
 * wait for ever), while its memory and stream stay taken until its launch is seen to return
 * (dev_join). */
/* Moves @a d from LAUNCHED to FAULTED under its launch lock, so that a wake-up that looked at
 * its state before cannot launch it after (dev_launch): 1 moved; 0 not LAUNCHED, or the lock
 * busy (a launch, or a join that may hold it for seconds: the next round tries again). */
static int proxy_fault_move(ringk_dev_host_t *d)
{
    int moved;

    if (pthread_mutex_trylock(&d->mu) != 0) {
        return 0;
    }
    moved = ringk_dev_life_move(d, RINGK_DEV_LIFE(LAUNCHED), RINGK_DEV_FAULTED);
    pthread_mutex_unlock(&d->mu);
    return moved;
}

static unsigned proxy_fault(ringk_kernel_t *k, uint64_t now)
{
    ringk_dev_host_t *d = k->dev;
    char why[160] = "";
    int st;

    /* a kernel not launched yet, faulted already or joined: nothing to look at */
    if ((d->stream == NULL) || (ringk_dev_life(d) != RINGK_DEV_LAUNCHED) ||
        (now < d->fault_check_ns)) {
        return 0;
    }
    d->fault_check_ns = now + 1000000u;
    st = ringk_dev_stream_status(d, why, sizeof(why));
    if ((st == -EAGAIN) && !d->status_warned) {
        d->status_warned = 1;
        ringk_log_msg(k->ctx, RINGK_LOG_WARN, "kernel '%s': CUDA could not say whether its "
                      "launch on CUDA device %d runs (%s): not taken for a fault", k->name,
                      d->device->cuda_index, why);
    }
    if (st != -EAGAIN) {
        d->unknown_since_ns = 0;
    } else if (d->unknown_since_ns == 0) {
        d->unknown_since_ns = now;
    } else if ((now - d->unknown_since_ns >= RINGK_DEV_UNKNOWN_NS) && proxy_fault_move(d)) {
        ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s': CUDA has answered only errors about "
                      "its launch on CUDA device %d for %llu s (%s): it is terminated, and its "
                      "memory kept while the launch may run", k->name, d->device->cuda_index,
                      RINGK_DEV_UNKNOWN_NS / 1000000000ull, why);
        proxy_terminated(k);
        return 1;
    }
    if ((st != -EIO) || !proxy_fault_move(d)) {
        return 0;
    }
    ringk_log_msg(k->ctx, RINGK_LOG_ERROR, "kernel '%s' failed on CUDA device %d (%s): it is "
                  "terminated", k->name, d->device->cuda_index, why);
    proxy_terminated(k);
    return 1;
}

/* The control words of @a k that ask the host for something; @a now: this round's clock. */
static unsigned proxy_control(ringk_kernel_t *k, uint64_t now)
{
    ringk_dev_ctl_t *c = k->dev->ctl;
    unsigned did = k->dev->bar_pending ? proxy_barrier_poll(k) : 0;

    if (__atomic_load_n(&c->doorbell, __ATOMIC_ACQUIRE)) {
        /* the device sender took 'idle' back already: it asks for the launch. On the emulated
         * device a launch joins the last one: while that still runs (it is returning, or the
         * proxy rang for a process that ended: ringk_dev_remote.c) the doorbell stays for a
         * later round, so the proxy never waits for a launch's handler */
        __atomic_store_n(&c->doorbell, 0, __ATOMIC_RELAXED);
        if ((k->dev->device->cuda_index < 0) ? (ringk_exec_dev_launch_idle(k) == -EBUSY)
                                             : (ringk_exec_dev_launch(k), 0)) {
            __atomic_store_n(&c->doorbell, 1, __ATOMIC_RELAXED);
        } else {
            did++;
        }
    }
    if (__atomic_load_n(&c->term_req, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&c->term_req, 0, __ATOMIC_RELAXED);
        ringk_kernel_terminating(k);
        did++;
    }
    if (__atomic_load_n(&c->done, __ATOMIC_ACQUIRE) &&
        (ringk_load_i(&k->state) != RINGK_KERNEL_TERMINATED)) {
        proxy_terminated(k);
        did++;
    }
    return did + proxy_fault(k, now);
}

static void *proxy_main(void *arg)
{
    ringk_ctx_t *ctx    = arg;
    ringk_devs_t *devs  = ctx->devs;
    ringk_qs_slot_t *qs = ringk_qs_register(ctx);
    unsigned i, count, did, idle = 0, nap_us = 1;
    uint64_t now;
    ringk_kernel_t *k;

    while (!__atomic_load_n(&devs->stop, __ATOMIC_ACQUIRE)) {
        ringk_qs_quiescent(ctx, qs);
        now   = ringk_now_ns(); /* once a round, for every kernel's fault check */
        did   = 0;
        count = __atomic_load_n(&ctx->nkernels, __ATOMIC_ACQUIRE);
        for (i = 0; i < count; i++) {
            k = __atomic_load_n(&ctx->kernels[i], __ATOMIC_ACQUIRE);
            if ((k == NULL) || (k->dev == NULL)) {
                continue;
            }
            did += proxy_drain(ctx, k);
            did += proxy_control(k, now);
        }
        did += ringk_dev_remote_watch(ctx, now);
        if (did > 0) {
            idle   = 0;
            nap_us = 1;
            continue;
        }
        if (++idle < PROXY_SPINS) {
            if ((idle & 63) == 0) {
                sched_yield();
            }
            continue;
        }
        {
            struct timespec ts = {0, (long)nap_us * 1000};
            ringk_qs_offline(qs);
            nanosleep(&ts, NULL);
            ringk_qs_online(qs);
        }
        nap_us = (nap_us < PROXY_NAP_MAX_US / 2) ? 2 * nap_us : PROXY_NAP_MAX_US;
    }
    ringk_qs_unregister(qs);
    return NULL;
}

int ringk_dev_proxy_start(ringk_ctx_t *ctx)
{
    ringk_devs_t *devs = ctx->devs;

    if (devs->proxy_started) {
        return 0;
    }
    if (pthread_create(&devs->proxy, NULL, proxy_main, ctx) != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "cannot start the device proxy thread");
        return -EAGAIN;
    }
    devs->proxy_started = 1;
    return 0;
}
