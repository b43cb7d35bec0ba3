/* SPDX-License-Identifier: BSD-3-Clause */
/* Credits that UCP refuses to send are not lost (driven by test_job.sh), 2 processes: rank 1's
 * kernel "sink" (inbox of W = 16, credits returned W / 4 at a time) takes M messages from rank 0,
 * which sends each with a bound of 10 s. In rank 1, this program's own ucp_am_send_nbx() (it
 * comes before libucp's in the symbol lookup) refuses every third credit message, FAULTS times
 * in all. Each refused batch would be 4 of rank 0's 16 credits gone for good: after four, rank 0
 * could send nothing more. The sink must get all M in order, rank 0 must not time out, and
 * rank 1's log must say that a credit message was not sent, in fewer lines than refusals (one a
 * second at most).
 * Also a send that stays in progress: in rank 0, the first message's UCP request is made to
 * read as in progress for HOLD_MS (ucp_request_check_status, also this program's), and with
 * RINGK_WAIT_WARN_MS=500 rank 0's log must say that the message has waited to leave.
 * Usage: job_credit_fault [M]
 * Prints one line per rank ending in OK or FAIL, then one for the script:
 * "RESULT job_credit_fault rank=R size=2 ok=0|1 key=value ..." (ok=1: exit 0). */
#define _GNU_SOURCE
#include "test_log.h"
#include "job_seq.h"

#include <ringk/api/ringk.h>
#include <ucp/api/ucp.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define W          16
#define FAULTS     12
#define AM_MSG     17 /* RINGK_AM_MSG (src/ringk/net/net.h) */
#define AM_CREDIT  21 /* RINGK_AM_CREDIT */
#define HOLD_MS    1600

typedef ucs_status_ptr_t (*am_send_fn_t)(ucp_ep_h, unsigned, const void*, size_t, const void*,
                                         size_t, const ucp_request_param_t*);

static int inject;             /* rank 1 only */
static int hold;               /* rank 0 only: the first message's request is held */
static void *held;             /* that request */
static struct timespec held_since;
static unsigned credit_sends;  /* credit messages libringk tried to send */
static unsigned injected;      /* of those, refused here */
static job_seq_t seq;
static char logbuf[8192];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void *header,
                                 size_t header_length, const void *buffer, size_t count,
                                 const ucp_request_param_t *param)
{
    static am_send_fn_t real;
    unsigned n;

    if (real == NULL) {
        real = (am_send_fn_t)dlsym(RTLD_NEXT, "ucp_am_send_nbx");
        if (real == NULL) {
            abort();
        }
    }
    if (inject && (id == AM_CREDIT)) {
        n = __atomic_add_fetch(&credit_sends, 1, __ATOMIC_RELAXED);
        if (((n % 3) == 0) && (__atomic_load_n(&injected, __ATOMIC_RELAXED) < FAULTS)) {
            __atomic_add_fetch(&injected, 1, __ATOMIC_RELAXED);
            return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
        }
    }
    if (hold && (id == AM_MSG) && !(param->op_attr_mask & UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL) &&
        __atomic_exchange_n(&hold, 0, __ATOMIC_ACQ_REL)) {
        /* a request even when sent at once, held in progress below */
        ucp_request_param_t p = *param;
        ucs_status_ptr_t req;

        p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        req = real(ep, id, header, header_length, buffer, count, &p);
        if (UCS_PTR_IS_PTR(req)) {
            clock_gettime(CLOCK_MONOTONIC, &held_since);
            __atomic_store_n(&held, req, __ATOMIC_RELEASE);
        }
        return req;
    }
    return real(ep, id, header, header_length, buffer, count, param);
}

ucs_status_t ucp_request_check_status(void *request)
{
    static ucs_status_t (*real)(void *request);
    struct timespec now;

    if (real == NULL) {
        real = (ucs_status_t (*)(void*))dlsym(RTLD_NEXT, "ucp_request_check_status");
        if (real == NULL) {
            abort();
        }
    }
    if ((request != NULL) && (request == __atomic_load_n(&held, __ATOMIC_ACQUIRE))) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - held_since.tv_sec) * 1000 +
            (now.tv_nsec - held_since.tv_nsec) / 1000000 < HOLD_MS) {
            return UCS_INPROGRESS;
        }
        __atomic_store_n(&held, NULL, __ATOMIC_RELEASE);
    }
    return real(request);
}

static void log_hook(void *arg, int level, const char *message)
{
    if (level <= RINGK_LOG_WARN) {
        test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
    }
}

int main(int argc, char **argv)
{
    const uint64_t m = (argc > 1) ? strtoull(argv[1], NULL, 10) : 5000;
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    ringk_ctx_params_t cp   = {.field_mask = RINGK_CTX_PARAM_FIELD_LOG, .log = log_hook};
    ringk_kernel_t *sink;
    ringk_ctx_t *ctx;
    uint64_t i;
    int rank, ret = 0, ok, logged;
    unsigned reports;
    const char *p;

    setenv("RINGK_WAIT_WARN_MS", "500", 1);
    if (ringk_ctx_create(&cp, &ctx) != 0) {
        return 1;
    }
    rank = ringk_ctx_rank(ctx);
    if (ringk_ctx_size(ctx) != 2) {
        fprintf(stderr, "job_credit_fault needs 2 processes, not %d\n", ringk_ctx_size(ctx));
        return 2;
    }
    if (rank == 1) {
        ringk_kernel_params_t p = {
            .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                          RINGK_KERNEL_PARAM_FIELD_MODE | RINGK_KERNEL_PARAM_FIELD_INBOX_SIZE |
                          RINGK_KERNEL_PARAM_FIELD_MAX_IN,
            .name = "sink", .handler = job_seq_handler, .arg = &seq,
            .mode = RINGK_MODE_EVENT_DRIVEN,
            .inbox_size = W, .max_in = 64
        };
        if (ringk_kernel_create(ctx, &p, &sink) != 0) {
            return 1;
        }
        inject = 1;
    }
    if (ringk_ctx_start(ctx) != 0) {
        return 1;
    }
    if (rank == 1) {
        for (i = 0; i < 60000; i++) { /* rank 0 terminates the sink, or gave up long ago */
            usleep(1000);
            ringk_kernel_stats_query(sink, &st);
            if (st.state == RINGK_KERNEL_TERMINATED) {
                break;
            }
        }
        ringk_ctx_destroy(ctx);
        for (p = logbuf, reports = 0;
             (p = strstr(p, "control message 21 to process 0 not sent: ")) != NULL; p++) {
            reports++;
        }
        logged = (reports >= 1) && (reports < FAULTS) &&
                 (strstr(logbuf, "(its credits are sent again)") != NULL);
        ok     = (seq.got == m) && (seq.bad == 0) && (injected == FAULTS) && logged;
        printf("credit fault [rank 1 of 2]: sink got %llu of %llu, %llu out of order; %u of %u "
               "credit messages refused (%u log lines%s): %s\n", (unsigned long long)seq.got,
               (unsigned long long)m, (unsigned long long)seq.bad, injected, credit_sends,
               reports, logged ? "" : ", not as expected", ok ? "OK" : "FAIL");
        printf("RESULT job_credit_fault rank=1 size=2 ok=%d got=%llu expected=%llu "
               "out_of_order=%llu refused=%u logged=%d reports=%u\n", ok,
               (unsigned long long)seq.got, (unsigned long long)m, (unsigned long long)seq.bad,
               injected, logged, reports);
        return ok ? 0 : 1;
    }
    hold = 1;
    for (i = 0; (ret == 0) && (i < m); i++) {
        ret = ringk_send(ctx, NULL, "sink", RINGK_MSG_DATA, &i, sizeof(i), 10000);
    }
    if (ret == 0) {
        ret = ringk_send(ctx, NULL, "sink", RINGK_MSG_TERMINATE, NULL, 0, 10000);
    } else {
        i--;
    }
    ringk_ctx_destroy(ctx);
    /* the held send: 1.6 s, warned of each 0.5 s */
    logged = (strstr(logbuf, "a message to process 1 (active message 17) has waited ") != NULL) &&
             (strstr(logbuf, " s to leave: UCP has not sent it") != NULL);
    ok = (ret == 0) && logged;
    printf("credit fault [rank 0 of 2]: %llu of %llu sent%s%s, the held send %s: %s\n",
           (unsigned long long)i, (unsigned long long)m, (ret == 0) ? "" : ", then ",
           (ret == 0) ? "" : strerror(-ret), logged ? "logged" : "not logged",
           ok ? "OK" : "FAIL");
    printf("RESULT job_credit_fault rank=0 size=2 ok=%d sent=%llu expected=%llu error=%d "
           "logged=%d\n", ok, (unsigned long long)i, (unsigned long long)m, -ret, logged);
    if (!logged) {
        fprintf(stderr, "rank 0 log: %s\n", logbuf);
    }
    return ok ? 0 : 1;
}
