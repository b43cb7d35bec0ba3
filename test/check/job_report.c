/* SPDX-License-Identifier: BSD-3-Clause */
/* What a job says about how its processes are connected (driven by test_job.sh): every rank
 * creates a context, joins the job and leaves it, counting what the log hook got at start:
 * "process N (this node) is reached over TL/DEV" lines at INFO (reached), those over ringk
 * (over_ringk), and the warning that processes of this node are reached without ringk while
 * the ringk transport is installed (warned). Started through ringk-run every peer is reached
 * over ringk and nothing warns; started without it, over TCP, with the warning. Prints what it
 * logged, then "RESULT job_report rank=R size=N ok=1 reached=.. over_ringk=.. warned=..". */
#include <ringk/api/ringk.h>

#include <stdio.h>
#include <string.h>

static int reached, over_ringk, warned;

static void hook(void *arg, int level, const char *message)
{
    if (level > RINGK_LOG_INFO) {
        return;
    }
    printf("log %d: %s\n", level, message);
    if (strstr(message, "(this node) is reached over ") != NULL) {
        reached++;
        over_ringk += (strstr(message, "is reached over ringk/") != NULL);
    }
    warned += (level == RINGK_LOG_WARN) && (strstr(message, "not ringk") != NULL) &&
              (strstr(message, "start the job with ringk-run") != NULL);
}

int main(void)
{
    ringk_ctx_params_t p = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = hook};
    ringk_ctx_t *ctx;
    int ret, rank, size;

    ret = ringk_ctx_create(&p, &ctx);
    if (ret != 0) {
        printf("ringk_ctx_create: %d\n", ret);
        return 1;
    }
    ret  = ringk_ctx_start(ctx);
    rank = ringk_ctx_rank(ctx);
    size = ringk_ctx_size(ctx);
    ringk_ctx_destroy(ctx);
    printf("RESULT job_report rank=%d size=%d ok=%d reached=%d over_ringk=%d warned=%d\n", rank,
           size, ret == 0, reached, over_ringk, warned);
    return (ret == 0) ? 0 : 1;
}
