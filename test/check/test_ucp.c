/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of UCP over ringk alone (UCX_TLS=ringk,self): tag messages between two processes with
 * every byte checked, a peer killed with SIGKILL during traffic, which the survivor must see
 * as an endpoint error within a few seconds without hanging, and a ping-pong of workers that
 * sleep in ucp_worker_wait (UCP_FEATURE_WAKEUP). Runs under contrib/ringk-run. */
#define _GNU_SOURCE
#include "test_util.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define MSG_TAG  0x1234
#define MSG_SIZE 1000

typedef struct {
    ucp_context_h context;
    ucp_worker_h  worker;
    ucp_ep_h      ep;
    int           ep_failed;
    ucs_status_t  err_status;
    double        failed_at;
} peer_t;

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    peer_t *p = arg;

    p->ep_failed  = 1;
    p->err_status = status;
    p->failed_at  = now_sec();
}

static void peer_init_features(peer_t *p, uint64_t features)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features   = features
    };
    ucp_worker_params_t wparams = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE
    };
    ucp_config_t *config;

    memset(p, 0, sizeof(*p));
    ck_assert_int_eq(ucp_config_read(NULL, NULL, &config), UCS_OK);
    ck_assert_int_eq(ucp_config_modify(config, "TLS", "ringk,self"), UCS_OK);
    ck_assert_int_eq(ucp_init(&params, config, &p->context), UCS_OK);
    ucp_config_release(config);
    ck_assert_int_eq(ucp_worker_create(p->context, &wparams, &p->worker), UCS_OK);
}

static void peer_init(peer_t *p)
{
    peer_init_features(p, UCP_FEATURE_TAG);
}

/* Sends our worker address on @a wfd, reads the peer's on @a rfd, connects with peer error
 * handling. */
static void peer_connect(peer_t *p, int wfd, int rfd)
{
    ucp_address_t *addr;
    size_t len, plen;
    void *paddr;
    ucp_ep_params_t ep_params;

    ck_assert_int_eq(ucp_worker_get_address(p->worker, &addr, &len), UCS_OK);
    ck_assert_int_eq(write(wfd, &len, sizeof(len)), sizeof(len));
    ck_assert_int_eq(write(wfd, addr, len), (ssize_t)len);
    ucp_worker_release_address(p->worker, addr);
    ck_assert_int_eq(read(rfd, &plen, sizeof(plen)), sizeof(plen));
    paddr = malloc(plen);
    ck_assert_int_eq(read(rfd, paddr, plen), (ssize_t)plen);
    ep_params = (ucp_ep_params_t){
        .field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .address         = paddr,
        .err_mode        = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler.cb  = err_cb,
        .err_handler.arg = p
    };
    ck_assert_int_eq(ucp_ep_create(p->worker, &ep_params, &p->ep), UCS_OK);
    free(paddr);
}

/* Waits for @a req (from a _nbx call) to finish; returns its status. */
static ucs_status_t wait_req(peer_t *p, void *req, double timeout)
{
    double deadline = now_sec() + timeout;
    ucs_status_t status;

    if (!UCS_PTR_IS_PTR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(p->worker);
        if (now_sec() > deadline) {
            return UCS_ERR_TIMED_OUT;
        }
    }
    ucp_request_free(req);
    return status;
}

static void fill(uint8_t *buf, uint64_t seq)
{
    size_t i;

    memcpy(buf, &seq, 8);
    for (i = 8; i < MSG_SIZE; i++) {
        buf[i] = (uint8_t)(seq * 3 + i);
    }
}

/* The child: connects and sends numbered messages until it is killed. */
static void child_sender(int wfd, int rfd)
{
    ucp_request_param_t param = {.op_attr_mask = 0};
    uint8_t buf[MSG_SIZE];
    uint64_t seq;
    peer_t p;

    peer_init(&p);
    peer_connect(&p, wfd, rfd);
    for (seq = 0;; seq++) {
        fill(buf, seq);
        if (wait_req(&p, ucp_tag_send_nbx(p.ep, buf, MSG_SIZE, MSG_TAG, &param), 60) !=
            UCS_OK) {
            _exit(3);
        }
    }
}

START_TEST(test_ucp_kill9_peer_detected)
{
    ucp_request_param_t param = {.op_attr_mask = 0};
    int p2c[2], c2p[2], bad = 0;
    uint8_t buf[MSG_SIZE], expect[MSG_SIZE];
    double killed_at;
    ucs_status_t status;
    void *req;
    uint64_t seq;
    pid_t pid;
    peer_t p;

    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_sender(c2p[1], p2c[0]);
    }
    peer_init(&p);
    peer_connect(&p, p2c[1], c2p[0]);
    /* receive 2000 messages in order, every byte checked */
    for (seq = 0; seq < 2000; seq++) {
        req    = ucp_tag_recv_nbx(p.worker, buf, MSG_SIZE, MSG_TAG, (ucp_tag_t)-1, &param);
        status = wait_req(&p, req, 30);
        ck_assert_int_eq(status, UCS_OK);
        fill(expect, seq);
        bad += (memcmp(buf, expect, MSG_SIZE) != 0);
    }
    ck_assert_int_eq(bad, 0);

    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    killed_at = now_sec();
    /* The survivor keeps sending to the dead peer and receiving what is left: nothing may
     * hang, and the endpoint error must come within a few seconds. */
    while (!p.ep_failed && (now_sec() - killed_at < 10)) {
        fill(buf, 0);
        status = wait_req(&p, ucp_tag_send_nbx(p.ep, buf, MSG_SIZE, MSG_TAG + 1, &param), 10);
        ck_assert_int_ne(status, UCS_ERR_TIMED_OUT);
        ucp_worker_progress(p.worker);
    }
    ck_assert_msg(p.ep_failed, "no endpoint error 10 s after kill -9");
    ck_assert_msg(p.failed_at - killed_at < 5.0, "endpoint error after %.2f s",
                  p.failed_at - killed_at);
    printf("# endpoint error %.3f s after kill -9\n", p.failed_at - killed_at);
    /* a send on the failed endpoint completes with an error, promptly */
    status = wait_req(&p, ucp_tag_send_nbx(p.ep, buf, MSG_SIZE, MSG_TAG, &param), 5);
    ck_assert_int_ne(status, UCS_ERR_TIMED_OUT);
    ck_assert_int_ne(status, UCS_OK);
    /* with the status the error handler got (UCX's gtest test_ucp_peer_failure) */
    ck_assert_int_eq(status, p.err_status);
    req = ucp_ep_close_nb(p.ep, UCP_EP_CLOSE_MODE_FORCE);
    ck_assert_int_ne(wait_req(&p, req, 5), UCS_ERR_TIMED_OUT);
    ucp_worker_destroy(p.worker);
    ucp_cleanup(p.context);
}
END_TEST

/* Waits for @a req sleeping in ucp_worker_wait whenever progress finds nothing to do. */
static ucs_status_t wait_req_sleeping(peer_t *p, void *req, unsigned *sleeps_p)
{
    ucs_status_t status;

    if (!UCS_PTR_IS_PTR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        if (ucp_worker_progress(p->worker) != 0) {
            continue;
        }
        status = ucp_worker_arm(p->worker);
        if (status == UCS_OK) {
            ck_assert_int_eq(ucp_worker_wait(p->worker), UCS_OK);
            (*sleeps_p)++;
        } else {
            ck_assert_int_eq(status, UCS_ERR_BUSY);
        }
    }
    ucp_request_free(req);
    return status;
}

/* Ping-pong of ROUNDS messages; each side sleeps in ucp_worker_wait between them. */
#define WAKEUP_ROUNDS 200

static unsigned pingpong_sleeping(peer_t *p, int first)
{
    ucp_request_param_t param = {.op_attr_mask = 0};
    uint8_t buf[MSG_SIZE], expect[MSG_SIZE];
    unsigned sleeps = 0;
    uint64_t seq;

    for (seq = 0; seq < WAKEUP_ROUNDS; seq++) {
        if ((seq % 2) == (uint64_t)!first) {
            fill(buf, seq);
            ck_assert_int_eq(wait_req_sleeping(p, ucp_tag_send_nbx(p->ep, buf, MSG_SIZE, MSG_TAG,
                                                                    &param), &sleeps), UCS_OK);
        } else {
            ck_assert_int_eq(wait_req_sleeping(p, ucp_tag_recv_nbx(p->worker, buf, MSG_SIZE,
                                                                    MSG_TAG, (ucp_tag_t)-1,
                                                                    &param), &sleeps), UCS_OK);
            fill(expect, seq);
            ck_assert_int_eq(memcmp(buf, expect, MSG_SIZE), 0);
        }
    }
    return sleeps;
}

/* UCP_FEATURE_WAKEUP needs an AM transport with send-completion and receive events: over
 * ringk alone the workers connect, and both sides sleep in ucp_worker_wait and are woken by
 * the other's messages (UCX's gtest test_ucp_wakeup). */
START_TEST(test_ucp_wakeup_pingpong)
{
    int p2c[2], c2p[2], status;
    unsigned sleeps;
    char *info = NULL;
    size_t info_len = 0;
    FILE *f;
    pid_t pid;
    peer_t p;

    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        peer_init_features(&p, UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP);
        peer_connect(&p, c2p[1], p2c[0]);
        pingpong_sleeping(&p, 0);
        _exit(0);
    }
    peer_init_features(&p, UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP);
    peer_connect(&p, p2c[1], c2p[0]);
    /* the lanes are ringk's */
    f = open_memstream(&info, &info_len);
    ucp_ep_print_info(p.ep, f);
    fclose(f);
    ck_assert_msg(strstr(info, "ringk/ring") != NULL, "ep info: %s", info);
    free(info);
    sleeps = pingpong_sleeping(&p, 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0), "child status 0x%x", status);
    ck_assert_uint_gt(sleeps, 0);
    printf("# %d round trips, %u sleeps in ucp_worker_wait\n", WAKEUP_ROUNDS / 2, sleeps);
    ck_assert_int_ne(wait_req(&p, ucp_ep_close_nb(p.ep, UCP_EP_CLOSE_MODE_FORCE), 5),
                     UCS_ERR_TIMED_OUT);
    ucp_worker_destroy(p.worker);
    ucp_cleanup(p.context);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ucp");
    TCase *tc;

    tc = tcase_create("failure");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ucp_kill9_peer_detected);
    suite_add_tcase(s, tc);
    tc = tcase_create("wakeup");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ucp_wakeup_pingpong);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
