/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of UCP over ringk alone (UCX_TLS=ringk,self): tag messages between two processes with
 * every byte checked, and a peer killed with SIGKILL during traffic, which the survivor must see
 * as an endpoint error within a few seconds without hanging. Runs under contrib/ringk-run. */
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

    p->ep_failed = 1;
    p->failed_at = now_sec();
}

static void peer_init(peer_t *p)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features   = UCP_FEATURE_TAG
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
    req = ucp_ep_close_nb(p.ep, UCP_EP_CLOSE_MODE_FORCE);
    ck_assert_int_ne(wait_req(&p, req, 5), UCS_ERR_TIMED_OUT);
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
    return test_run_suite(s);
}
