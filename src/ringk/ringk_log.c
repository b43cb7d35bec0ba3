/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk logging: the process's log hook (for calls that have no context, and contexts made
 * without a hook of their own), a context's hook, the collapse of a line repeated many times
 * (a send that fails in a loop) into one line and a count, and the refusal of bad arguments. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "ringk_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The process's hook: log and arg change together under mu. */
static struct {
    pthread_mutex_t   mu;
    ringk_log_func_t  log;
    void             *arg;
    ringk_log_state_t st;
} proc_log = {.mu = PTHREAD_MUTEX_INITIALIZER, .st = {.mu = PTHREAD_MUTEX_INITIALIZER}};

/* Under st->mu: the count of lines held back, said through @a log. */
static void repeats_say(ringk_log_state_t *st, ringk_log_func_t log, void *arg)
{
    char line[RINGK_LOG_LINE + 64];

    if (st->repeats == 0) {
        return;
    }
    snprintf(line, sizeof(line), "(the line before was repeated %u more times: %.*s)",
             st->repeats, RINGK_LOG_LINE / 2, st->last);
    st->repeats = 0;
    if (log != NULL) {
        log(arg, st->last_level, line);
    }
}

void ringk_log_flush(ringk_log_state_t *st, ringk_log_func_t log, void *arg)
{
    pthread_mutex_lock(&st->mu);
    repeats_say(st, log, arg);
    pthread_mutex_unlock(&st->mu);
}

int ringk_log_hook_set(ringk_log_func_t log, void *arg)
{
    ringk_log_func_t old;
    void *old_arg;

    pthread_mutex_lock(&proc_log.mu);
    old          = proc_log.log;
    old_arg      = proc_log.arg;
    proc_log.log = log;
    proc_log.arg = arg;
    pthread_mutex_unlock(&proc_log.mu);
    /* what the old hook held back is said through it, not the new one, which starts afresh */
    pthread_mutex_lock(&proc_log.st.mu);
    repeats_say(&proc_log.st, old, old_arg);
    proc_log.st.last[0] = '\0';
    pthread_mutex_unlock(&proc_log.st.mu);
    return 0;
}

/* Says @a line through @a log unless it repeats the line before (then it is counted). The hook
 * is called under st->mu, so that lines of one state keep their order. */
static void log_line(ringk_log_state_t *st, ringk_log_func_t log, void *arg, int level,
                     const char *line)
{
    const uint64_t now = ringk_now_ns();

    pthread_mutex_lock(&st->mu);
    if ((level == st->last_level) && !strcmp(line, st->last) &&
        (now - st->since_ns < RINGK_LOG_REPEAT_MS * 1000000ull)) {
        st->repeats++;
        pthread_mutex_unlock(&st->mu);
        return;
    }
    repeats_say(st, log, arg);
    snprintf(st->last, sizeof(st->last), "%s", line);
    st->last_level = level;
    st->since_ns   = now;
    log(arg, level, line);
    pthread_mutex_unlock(&st->mu);
}

/* The hook and state lines of @a ctx go to: its own, else the process's. 0 when none. */
static int log_dest(ringk_ctx_t *ctx, ringk_log_func_t *log_p, void **arg_p,
                    ringk_log_state_t **st_p)
{
    if ((ctx != NULL) && (ctx->log != NULL)) {
        *log_p = ctx->log;
        *arg_p = ctx->log_arg;
        *st_p  = &ctx->log_state;
        return 1;
    }
    pthread_mutex_lock(&proc_log.mu);
    *log_p = proc_log.log;
    *arg_p = proc_log.arg;
    pthread_mutex_unlock(&proc_log.mu);
    *st_p = &proc_log.st;
    return *log_p != NULL;
}

static void log_va(ringk_ctx_t *ctx, int level, const char *prefix, const char *fmt, va_list ap)
{
    char buf[RINGK_LOG_LINE];
    ringk_log_state_t *st;
    ringk_log_func_t log;
    size_t n;
    void *arg;

    if (!log_dest(ctx, &log, &arg, &st)) {
        return;
    }
    n = (size_t)snprintf(buf, sizeof(buf), "%s", prefix);
    vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
    log_line(st, log, arg, level, buf);
}

void ringk_log_flush_ctx(ringk_ctx_t *ctx)
{
    ringk_log_state_t *st;
    ringk_log_func_t log;
    void *arg;

    if (log_dest(ctx, &log, &arg, &st)) {
        ringk_log_flush(st, log, arg);
    }
}

void ringk_log_msg(ringk_ctx_t *ctx, int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_va(ctx, level, "", fmt, ap);
    va_end(ap);
}

int ringk_log_bad_arg(ringk_ctx_t *ctx, const char *fn, const char *fmt, ...)
{
    char prefix[64];
    va_list ap;

    snprintf(prefix, sizeof(prefix), "%s: ", fn);
    va_start(ap, fmt);
    log_va(ctx, RINGK_LOG_ERROR, prefix, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

int ringk_log_check_timeout(ringk_ctx_t *ctx, const char *fn, int timeout_ms)
{
    if (timeout_ms < RINGK_WAIT_FOREVER) {
        return ringk_log_bad_arg(ctx, fn, "timeout_ms %d is not RINGK_WAIT_FOREVER (-1), "
                                 "RINGK_WAIT_NONE (0) or milliseconds", timeout_ms);
    }
    return 0;
}

int ringk_log_check_payload(ringk_ctx_t *ctx, const char *fn, const void *payload,
                            size_t length)
{
    if ((payload == NULL) && (length > 0)) {
        return ringk_log_bad_arg(ctx, fn, "payload is NULL and length %zu", length);
    }
    return 0;
}
