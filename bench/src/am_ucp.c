/* SPDX-License-Identifier: BSD-3-Clause */
/* Raw UCP active-message ping-pong between two processes (fork, addresses over a pipe): the
 * reference for libringk's cross-process K2K. One thread per process progresses its worker and
 * answers; 8-byte payload, eager. Prints "RESULT <us per round trip>" from the parent.
 *   am_ucp pingpong [N]      single-threaded workers (UCS_THREAD_MODE_SINGLE): the reference
 *   am_ucp pingpong_mt [N]   thread-safe workers (UCS_THREAD_MODE_MULTI), as a runtime whose
 *                            threads share a worker must create them: what the locking costs */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

static uint64_t got, last;

static ucs_status_t on_am(void *arg, const void *header, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *param)
{
    memcpy(&last, data, sizeof(last));
    got++;
    return UCS_OK;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void send_wait(ucp_worker_h w, ucp_ep_h ep, uint64_t *v)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = UCP_AM_SEND_FLAG_EAGER};
    void *req = ucp_am_send_nbx(ep, 17, NULL, 0, v, sizeof(*v), &p);

    if (UCS_PTR_IS_PTR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(w);
        }
        ucp_request_free(req);
    }
}

int main(int argc, char **argv)
{
    uint64_t n = (argc > 2) ? strtoull(argv[2], NULL, 10) : 20000, i, v, bad = 0;
    int p2c[2], c2p[2], parent;
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_am_handler_param_t am = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB,
        .id = 17, .cb = on_am
    };
    int mt = (argc > 1) && !strcmp(argv[1], "pingpong_mt");
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_address_t *addr;
    size_t len, plen;
    ucp_ep_h ep;
    void *paddr;
    pid_t pid;
    double t0;

    if (mt) {
        wp.thread_mode = UCS_THREAD_MODE_MULTI;
    }
    if (pipe(p2c) || pipe(c2p)) {
        return 1;
    }
    pid    = fork();
    parent = (pid != 0);
    if (ucp_init(&params, NULL, &ctx) != UCS_OK || ucp_worker_create(ctx, &wp, &w) != UCS_OK ||
        ucp_worker_set_am_recv_handler(w, &am) != UCS_OK ||
        ucp_worker_get_address(w, &addr, &len) != UCS_OK) {
        return 1;
    }
    /* exchange addresses: length, then bytes */
    if (write(parent ? p2c[1] : c2p[1], &len, sizeof(len)) != sizeof(len) ||
        write(parent ? p2c[1] : c2p[1], addr, len) != (ssize_t)len ||
        read(parent ? c2p[0] : p2c[0], &plen, sizeof(plen)) != sizeof(plen)) {
        return 1;
    }
    paddr = malloc(plen);
    if (read(parent ? c2p[0] : p2c[0], paddr, plen) != (ssize_t)plen) {
        return 1;
    }
    {
        ucp_ep_params_t ep_params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                                     .address = paddr};
        if (ucp_ep_create(w, &ep_params, &ep) != UCS_OK) {
            return 1;
        }
    }
    t0 = now();
    for (i = 0; i < n; i++) {
        if (parent) {
            v = i;
            send_wait(w, ep, &v);
            while (got <= i) {
                ucp_worker_progress(w);
            }
            bad += (last != i);
        } else {
            while (got <= i) {
                ucp_worker_progress(w);
            }
            v = last;
            send_wait(w, ep, &v);
        }
    }
    t0 = now() - t0;
    /* let the last message leave before tearing down */
    for (i = 0; i < 1000; i++) {
        ucp_worker_progress(w);
    }
    if (parent) {
        waitpid(pid, NULL, 0);
        if (bad) {
            return 1;
        }
        printf("RESULT %.4f\n", t0 / n * 1e6);
    }
    return 0;
}
