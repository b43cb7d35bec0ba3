/* SPDX-License-Identifier: BSD-3-Clause */
/* What the files of the UCT data-path tests share (test_uct_ep.c): a test node (one worker with
 * one ringk iface, the messages it received), message patterns, and sending in each mode. */
#ifndef RINGK_TEST_UCT_EP_H
#define RINGK_TEST_UCT_EP_H

#include <check.h>
#include <stdint.h>
#include <unistd.h>
#include <uct/api/uct.h>

#define AM_ID       5
#define MAX_MSG     (16 * 1024)

typedef struct {
    ucs_async_context_t *async;
    uct_worker_h         worker;
    uct_md_h             md;
    uct_iface_h          iface;
    uct_iface_attr_t     attr;
    uint8_t              addr[64];
    uint8_t              dev_addr[64];
    /* received messages: sequence numbers in arrival order, bytes checked on arrival */
    uint64_t             nrecv;
    uint64_t             nbad;
    uint64_t             expect_seq;
    int                  nerr;        /* endpoint errors reported */
    ucs_status_t         err_status;  /* the status of the last one */
} node_t;

typedef enum { SEND_SHORT, SEND_BCOPY, SEND_ZCOPY, SEND_MODES } send_mode_t;

/* A process that a test kills with SIGKILL must not use Check's macros while it can be killed:
 * every passing assertion writes a record into Check's message file, shared with the runner
 * across fork(), and a record cut short by the kill corrupts it ("Bad message type arg",
 * seen once in CI). Such a child sets this and fails with _exit(3) instead. */
extern int victim_child;

#define SEND_ASSERT(expr, ...)                                                                    \
    do {                                                                                          \
        if (victim_child) {                                                                       \
            if (!(expr)) {                                                                        \
                _exit(3);                                                                         \
            }                                                                                     \
        } else {                                                                                  \
            ck_assert_msg(expr, __VA_ARGS__);                                                     \
        }                                                                                         \
    } while (0)

uint8_t pat(uint64_t seq, size_t i);
size_t fill_msg(uint8_t *buf, uint64_t seq, size_t len);
void node_open(node_t *n, const char *name, const char *value);
void node_close(node_t *n);
double now_sec(void);
void wait_recv(node_t *n, uint64_t count);
ucs_status_t node_try_connect(node_t *from, const node_t *to, uct_ep_h *ep_p);
uct_ep_h node_connect(node_t *from, const uint8_t *addr, const uint8_t *dev_addr);
void send_msg(node_t *n, uct_ep_h ep, send_mode_t mode, uint64_t seq, size_t len,
              node_t *progress_node);
size_t mode_max(node_t *n, send_mode_t mode);

/** The hostile-peer, two-process and many-peer cases (test_uct_peer.c), and the GPU path
 * cases (test_uct_gpu.c), added to the ep_local and ep_process TCases. */
void test_uct_peer_tests(TCase *local, TCase *process);
void test_uct_gpu_tests(TCase *local);

#endif
