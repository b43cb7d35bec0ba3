/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk logging, inside the library: the process's hook, a context's hook, and the
 * collapse of repeated lines. Included by ringk_internal.h and by the files that need no
 * more of it (messages, the P2P queue, build information). */
#ifndef RINGK_LOG_H
#define RINGK_LOG_H

#include <ringk/api/ringk.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define RINGK_LOG_LINE       512   /* bytes of one message, the rest cut */
#define RINGK_LOG_REPEAT_MS  10000 /* an identical line within this long is counted, not said */

/** Where a series of lines goes, and what it said last: a line said again (same level and
 *  text) within RINGK_LOG_REPEAT_MS of the first of its run is counted instead, and the
 *  count is said before the next different line, when the run is older than that, or at
 *  ringk_log_flush(). */
typedef struct ringk_log_state {
    pthread_mutex_t mu;
    char            last[RINGK_LOG_LINE];
    int             last_level;
    unsigned        repeats;   /* lines like last[] not said yet */
    uint64_t        since_ns;  /* when last[] was said */
} ringk_log_state_t;

/** Logs through @a ctx's hook, or the process's hook (ringk_log_hook_set()) when @a ctx is
 *  NULL or has none; nothing when neither is set. */
void ringk_log_msg(ringk_ctx_t *ctx, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Logs "@a fn: ..." at ERROR (as ringk_log_msg) and returns -EINVAL: the refusal of a bad
 *  argument of public call @a fn. */
int ringk_log_bad_arg(ringk_ctx_t *ctx, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** The checks of arguments several calls share, of public call @a fn: 0, or -EINVAL logged as
 *  ringk_log_bad_arg() does. A timeout is RINGK_WAIT_FOREVER, RINGK_WAIT_NONE or milliseconds;
 *  a payload is not NULL unless it is empty. */
int ringk_log_check_timeout(ringk_ctx_t *ctx, const char *fn, int timeout_ms);
int ringk_log_check_payload(ringk_ctx_t *ctx, const char *fn, const void *payload,
                            size_t length);

/** Says the count of lines held back in @a st (see ringk_log_state_t) through @a log. */
void ringk_log_flush(ringk_log_state_t *st, ringk_log_func_t log, void *arg);

/** Says the count of lines held back where @a ctx's lines go (its hook, or the process's). */
void ringk_log_flush_ctx(ringk_ctx_t *ctx);

#endif
