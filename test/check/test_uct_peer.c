/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the ringk host data path with other processes: a hostile peer writing malformed
 * cells, two processes (AM and RMA, the wakeup fd, a sender killed with SIGKILL), and many peers. */
#define _GNU_SOURCE
#include "test_util.h"
#include "test_uct.h"
#include "test_uct_ep.h"

#include <core/ringk_cuda.h>
#include <core/ringk_ring.h>
#include <core/ringk_topo.h>
#include <uct/ringk/base/ringk_rkey.h>
#include <uct/ringk/ring/ringk_seg.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucs/debug/log_def.h>
#include <inttypes.h>
#include <time.h>
#include <uct/api/uct.h>
#include <unistd.h>

/* ---- hostile peer ------------------------------------------------------------------------------ */

/* Maps a node's receive segment the way a peer does, through its iface address. */
static void *map_segment(node_t *n, uint64_t *bytes_p)
{
    uint64_t seg_bytes;
    uint32_t pid;
    int32_t fd;
    char path[64];
    void *seg;
    int f;

    memcpy(&seg_bytes, n->addr + 8, 8);
    memcpy(&pid, n->addr + 16, 4);
    memcpy(&fd, n->addr + 20, 4);
    snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, fd);
    f = open(path, O_RDWR);
    ck_assert_int_ge(f, 0);
    seg = mmap(NULL, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    close(f);
    ck_assert_ptr_ne(seg, MAP_FAILED);
    *bytes_p = seg_bytes;
    return seg;
}

/* Maps @a n's receive segment as a peer would and attaches its shared lane (lane 0). */
static void *shared_lane_attach(node_t *n, ringk_ring_t *ring, uint64_t *bytes_p)
{
    void *seg = map_segment(n, bytes_p);
    const uct_ringk_seg_shm_t *hdr = seg;

    ck_assert_int_eq(ringk_ring_attach(ring, (char*)seg + hdr->rings_offset, hdr->lane_stride),
                     0);
    return seg;
}

/* The end of a test that wrote into @a b's shared lane: @a b got @a nrecv messages, all intact;
 * then everything goes. */
static void shared_lane_test_end(node_t *a, node_t *b, uct_ep_h ep, void *seg, uint64_t bytes,
                                 uint64_t nrecv)
{
    ck_assert_uint_eq(b->nrecv, nrecv);
    ck_assert_uint_eq(b->nbad, 0);
    munmap(seg, bytes);
    uct_ep_destroy(ep);
    node_close(b);
    node_close(a);
}

static const struct {
    uint32_t len;
    uint16_t ncells;
    uint8_t  id;
    const char *what;
} bad_cells[] = {
    {16, 1, 200, "am id 200"},
    {16, 0, AM_ID, "cells 0"},
    {16, 60000, AM_ID, "cells 60000"},
    {100000, 1, AM_ID, "length 100000"},
    {49, 1, AM_ID, "length 49"},
};

START_TEST(test_uct_ep_malformed_cells)
{
    node_t a, b;
    uct_ep_h ep;
    uint64_t bytes, pos;
    ringk_ring_t ring;
    void *seg;
    uint64_t seq;

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ep  = node_connect(&a, b.addr, b.dev_addr); /* an honest sender on its own lane */
    /* the hostile writer uses the shared lane, as a sender without a lane of its own would */
    seg = shared_lane_attach(&b, &ring, &bytes);
    ck_assert(ringk_ring_mp_claim(&ring, 1, &pos));
    seq = 0;
    ringk_ring_write(&ring, pos, 0, &seq, 8);
    ringk_ring_publish(&ring, pos, bad_cells[_i].len, bad_cells[_i].ncells, bad_cells[_i].id, 0);

    test_capture_errors_begin();
    send_msg(&a, ep, SEND_SHORT, 0, 64, &b);
    send_msg(&a, ep, SEND_BCOPY, 1, 3000, &b);
    wait_recv(&b, 2);
    test_capture_errors_end();
    /* the malformed cell is dropped with an error, the honest lane is intact */
    ck_assert_msg(strstr(test_captured, "dropping malformed message") != NULL, "log: %s",
                  test_captured);
    shared_lane_test_end(&a, &b, ep, seg, bytes, 2);
}
END_TEST

/* Processes whose rings differ: a sender whose largest message the peer cannot take is refused
 * at endpoint creation, naming both limits; one whose cells differ in size from the peer's packs
 * its largest messages in place over as many of the peer's cells as they take, across many
 * wrap-arounds of the peer's ring, and every one arrives intact. */
/* UCX_RINGK_HOST_RMA=staged to an iface of this very process (UCX's loopback tests, one
 * thread progressing both): the memory is copied in place, nothing is staged, nothing waits. */
START_TEST(test_uct_ep_staged_self)
{
    static uint8_t target[1 << 20], src[1 << 20], dst[1 << 20];
    ucs_status_t (*stats)(uct_iface_h, uint64_t*, uint64_t*, uint64_t*);
    uint64_t served, failed, sent;
    uint8_t packed[256];
    uct_rkey_bundle_t rkey;
    uct_mem_h memh;
    uct_iov_t iov;
    node_t a, b;
    uct_ep_h ep;

    *(void**)&stats = test_plugin_sym("uct_ringk_iface_stage_stats");
    ck_assert_ptr_nonnull(stats);
    node_open(&a, "HOST_RMA", "staged");
    node_open(&b, NULL, NULL);
    ck_assert_int_eq(node_try_connect(&a, &b, &ep), UCS_OK);
    ck_assert_int_eq(uct_md_mem_reg(b.md, target, sizeof(target), UCT_MD_MEM_ACCESS_ALL, &memh),
                     UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(b.md, memh, packed), UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), packed, &rkey), UCS_OK);
    fill_msg(src, 9, sizeof(src));
    iov = (uct_iov_t){.buffer = src, .length = sizeof(src), .count = 1};
    ck_assert_int_eq(uct_ep_put_zcopy(ep, &iov, 1, (uintptr_t)target, rkey.rkey, NULL), UCS_OK);
    ck_assert_int_eq(memcmp(target, src, sizeof(src)), 0);
    iov.buffer = dst;
    ck_assert_int_eq(uct_ep_get_zcopy(ep, &iov, 1, (uintptr_t)target, rkey.rkey, NULL), UCS_OK);
    ck_assert_int_eq(memcmp(dst, src, sizeof(src)), 0);
    ck_assert_int_eq(stats(a.iface, &served, &failed, &sent), UCS_OK);
    ck_assert_uint_eq(sent, 0);
    ck_assert_int_eq(stats(b.iface, &served, &failed, &sent), UCS_OK);
    ck_assert_uint_eq(served, 0);
    uct_rkey_release(test_ringk_component(), &rkey);
    uct_md_mem_dereg(b.md, memh);
    uct_ep_destroy(ep);
    node_close(&a);
    node_close(&b);
}
END_TEST

START_TEST(test_uct_ep_peer_limits)
{
    node_t a, b;
    uct_ep_h ep;
    ucs_status_t status;
    unsigned i;

    node_open(&a, "SEG_SIZE", "16k");
    node_open(&b, NULL, NULL);
    status = node_try_connect(&a, &b, &ep);
    ck_assert_int_eq(status, UCS_ERR_UNREACHABLE);
    ck_assert_msg(strstr(test_captured, "takes messages of up to 8192 bytes, this iface sends up "
                         "to 16384") != NULL, "logged '%s'", test_captured);
    ep = node_connect(&b, a.addr, a.dev_addr); /* the other way round: the smaller fits */
    send_msg(&b, ep, SEND_BCOPY, 0, 8192, &a);
    wait_recv(&a, 1);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);

    /* 256-byte cells sending into 64-byte cells: 8 KiB takes 129 of the peer's cells */
    node_open(&a, "CELL_SIZE", "256");
    node_open(&b, NULL, NULL);
    ep = node_connect(&a, b.addr, b.dev_addr);
    for (i = 0; i < 64; i++) {
        send_msg(&a, ep, SEND_BCOPY, i, 8192, &b);
        wait_recv(&b, i + 1);
    }
    ck_assert_uint_eq(b.nbad, 0);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

/* Cells a sender claimed and gave up (as am_zcopy does when copying its data fails) are passed
 * over: the messages sent after them on the same lane arrive, and nothing is logged. With one
 * lane, the test's writer and the endpoint share lane 0. */
START_TEST(test_uct_ep_cancelled_cells_passed)
{
    node_t a, b;
    uct_ep_h ep;
    uint64_t bytes, pos;
    ringk_ring_t ring;
    void *seg;

    node_open(&a, "LANES", "1");
    node_open(&b, "LANES", "1");
    ep  = node_connect(&a, b.addr, b.dev_addr);
    seg = shared_lane_attach(&b, &ring, &bytes);
    test_capture_errors_begin();
    send_msg(&a, ep, SEND_SHORT, 0, 64, &b);
    wait_recv(&b, 1);
    ck_assert(ringk_ring_mp_claim(&ring, 3, &pos));
    ringk_ring_cancel(&ring, pos, 3);
    send_msg(&a, ep, SEND_SHORT, 1, 64, &b);
    send_msg(&a, ep, SEND_BCOPY, 2, 3000, &b);
    wait_recv(&b, 3);
    test_capture_errors_end();
    ck_assert_msg(test_captured[0] == '\0', "logged: %s", test_captured);
    shared_lane_test_end(&a, &b, ep, seg, bytes, 3);
}
END_TEST

/* ---- two processes ---------------------------------------------------------------------------- */

typedef struct {
    uint8_t  addr[64];
    uint8_t  dev_addr[64];
    uint8_t  rkey[256];
    uint64_t target;
} peer_info_t;

/* Entries in /dev/shm that ringk or UCX could have made (ringk's segments are unlinked memfds,
 * so none is expected). Others are not counted: tests run in parallel, and Open MPI's segments
 * from test_job.sh came and went during this test once in CI, as did test_ipc's mailboxes
 * ("ringk-test-ipc-*") beside it under valgrind. contrib/test.sh checks all of /dev/shm after
 * the whole suite. */
static int count_dev_shm(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        n += ((strstr(e->d_name, "ringk") != NULL) || (strstr(e->d_name, "ucx") != NULL)) &&
             (strncmp(e->d_name, "ringk-test-", 11) != 0); /* another test program's own */
    }
    closedir(d);
    return n;
}

/* Receiver child: opens an iface, publishes its address and a registered 4 MiB buffer, counts
 * messages until it has @a expect, then reports count and errors and waits for the parent. */
static void child_receiver(int wfd, int rfd, uint64_t expect)
{
    static uint8_t target[4 << 20];
    peer_info_t info = {{0}};
    uct_mem_h memh;
    uint64_t result[2];
    char go;
    node_t n;

    node_open(&n, NULL, NULL);
    memcpy(info.addr, n.addr, sizeof(info.addr));
    memcpy(info.dev_addr, n.dev_addr, sizeof(info.dev_addr));
    ck_assert_int_eq(uct_md_mem_reg(n.md, target, sizeof(target), UCT_MD_MEM_ACCESS_ALL, &memh), UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(n.md, memh, info.rkey), UCS_OK);
    info.target = (uintptr_t)target;
    ck_assert_int_eq(write(wfd, &info, sizeof(info)), sizeof(info));
    wait_recv(&n, expect);
    result[0] = n.nrecv;
    result[1] = n.nbad;
    ck_assert_int_eq(write(wfd, result, sizeof(result)), sizeof(result));
    /* wait for the parent's RMA checks, reading our buffer back through a message */
    ck_assert_int_eq(read(rfd, &go, 1), 1);
    ck_assert_int_eq(write(wfd, target, 4096), 4096);
    ck_assert_int_eq(read(rfd, &go, 1), 1);
    uct_md_mem_dereg(n.md, memh);
    node_close(&n);
    _exit(0);
}

START_TEST(test_uct_ep_two_process_am_rma)
{
    int p2c[2], c2p[2], status;
    peer_info_t info;
    uint64_t result[2], seq = 0;
    static uint8_t buf[4096], back[4096], src[1 << 20], dst[1 << 20];
    uct_rkey_bundle_t rkey;
    const uint64_t nmsgs = 3 * 2000;
    uct_iov_t iov;
    node_t a;
    uct_ep_h ep;
    pid_t pid;
    size_t len;
    int mode, i;

    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_receiver(c2p[1], p2c[0], nmsgs);
    }
    ck_assert_int_eq(read(c2p[0], &info, sizeof(info)), sizeof(info));
    node_open(&a, NULL, NULL);
    ep = node_connect(&a, info.addr, info.dev_addr);
    /* the path the endpoint actually uses, through the plugin's query, and why */
    {
        ucs_status_t (*query)(uct_ep_h, const char**, const char**);
        const char *path, *reason;
        char why[128];

        *(void**)&query = test_plugin_sym("uct_ringk_ep_path_query");
        ck_assert_ptr_nonnull(query);
        ck_assert_int_eq(query(ep, &path, &reason), UCS_OK);
        /* with a usable GPU both processes are on the current one, device 0: its memory goes
         * by CUDA IPC; host memory takes the shared-memory rings either way */
        ck_assert_str_eq(path, ringk_cuda_usable(why, sizeof(why)) ? "CUDA_IPC" : "HOST_STAGED");
        ck_assert_msg(strstr(reason, "shared-memory rings") && strstr(reason, "memfd") &&
                      strstr(reason, "same node: same boot id, PID, IPC and network namespaces"),
                      "reason: %s", reason);
        ck_assert_msg(strstr(reason, "own lane 1") != NULL, "reason: %s", reason);
        printf("# two processes: path %s: %s\n", path, reason);
    }
    /* 2000 messages of each kind, sizes cycling from 8 bytes to the maximum */
    for (mode = 0; mode < SEND_MODES; mode++) {
        for (i = 0; i < 2000; i++) {
            len = 8 + (i * 97) % (mode_max(&a, mode) - 7);
            send_msg(&a, ep, mode, seq++, len, NULL);
        }
    }
    ck_assert_int_eq(read(c2p[0], result, sizeof(result)), sizeof(result));
    ck_assert_uint_eq(result[0], nmsgs);
    ck_assert_uint_eq(result[1], 0);

    /* RMA into the other process, at sizes from 1 byte to 1 MiB, read back by get */
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), info.rkey, &rkey), UCS_OK);
    for (len = 1; len <= sizeof(src); len *= 8) {
        fill_msg(src, len + 1, len < 8 ? 8 : len);
        iov = (uct_iov_t){.buffer = src, .length = len, .count = 1};
        ck_assert_int_eq(uct_ep_put_zcopy(ep, &iov, 1, info.target + 4096, rkey.rkey, NULL),
                         UCS_OK);
        iov.buffer = dst;
        memset(dst, 0, len);
        ck_assert_int_eq(uct_ep_get_zcopy(ep, &iov, 1, info.target + 4096, rkey.rkey, NULL),
                         UCS_OK);
        ck_assert_mem_eq(dst, src, len);
    }
    fill_msg(buf, 77, sizeof(buf));
    ck_assert_int_eq(uct_ep_put_short(ep, buf, sizeof(buf), info.target, rkey.rkey), UCS_OK);
    ck_assert_int_eq(write(p2c[1], "g", 1), 1);
    ck_assert_int_eq(read(c2p[0], back, sizeof(back)), sizeof(back));
    ck_assert_mem_eq(back, buf, sizeof(buf)); /* seen by the child itself */
    uct_rkey_release(test_ringk_component(), &rkey);
    ck_assert_int_eq(write(p2c[1], "q", 1), 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    uct_ep_destroy(ep);
    node_close(&a);
}
END_TEST

/* Staged RMA's target: a child that registers a buffer, publishes it, and progresses (serving
 * the parent's staging area) until told: 'd' deregisters the buffer, 'q' reports what its
 * iface served and refused and the buffer's first bytes, and exits. */
static void child_stage_target(int wfd, int rfd)
{
    static uint8_t target[4 << 20];
    ucs_status_t (*stats)(uct_iface_h, uint64_t*, uint64_t*, uint64_t*);
    peer_info_t info = {{0}};
    uint64_t result[3];
    uct_mem_h memh;
    char cmd;
    node_t n;

    *(void**)&stats = test_plugin_sym("uct_ringk_iface_stage_stats");
    node_open(&n, NULL, NULL);
    memcpy(info.addr, n.addr, sizeof(info.addr));
    memcpy(info.dev_addr, n.dev_addr, sizeof(info.dev_addr));
    ck_assert_int_eq(uct_md_mem_reg(n.md, target, sizeof(target), UCT_MD_MEM_ACCESS_ALL, &memh),
                     UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(n.md, memh, info.rkey), UCS_OK);
    info.target = (uintptr_t)target;
    ck_assert_int_eq(write(wfd, &info, sizeof(info)), sizeof(info));
    fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        uct_worker_progress(n.worker);
        if (read(rfd, &cmd, 1) != 1) {
            continue;
        }
        if (cmd == 'd') {
            ck_assert_int_eq(uct_md_mem_dereg(n.md, memh), UCS_OK);
            ck_assert_int_eq(write(wfd, "d", 1), 1);
        } else if (cmd == 'q') {
            break;
        }
    }
    ck_assert_ptr_nonnull(stats);
    ck_assert_int_eq(stats(n.iface, &result[0], &result[1], &result[2]), UCS_OK);
    ck_assert_int_eq(write(wfd, result, sizeof(result)), sizeof(result));
    ck_assert_int_eq(write(wfd, target, 4096), 4096);
    node_close(&n);
    _exit(0);
}

/* UCX_RINGK_HOST_RMA=staged: puts and gets into another process's host memory through the
 * endpoint's staging area, served by the peer's progress (the data path the HOST_STAGED path
 * takes for GPU memory, with memcpy for the CUDA copies): every size from a byte to 3 MiB and a
 * part (laps of the four 1 MiB slots), an iov of two buffers, put_short and get_bcopy; the
 * peer's count of served requests says the staging area carried them; once the peer has
 * deregistered the buffer it refuses a put the old key still allows; once it is gone a put
 * fails instead of waiting. */
START_TEST(test_uct_ep_two_process_staged)
{
    static uint8_t src[4 << 20], dst[4 << 20], part[4096];
    ucs_status_t (*stats)(uct_iface_h, uint64_t*, uint64_t*, uint64_t*);
    const size_t lens[] = {1, 4095, 1 << 20, (3 << 20) + 12345};
    uint64_t result[3], served, failed, sent, chunks = 0;
    int p2c[2], c2p[2], status;
    uct_rkey_bundle_t rkey;
    uct_iov_t iov[2];
    peer_info_t info;
    unsigned i;
    char ack;
    node_t a;
    uct_ep_h ep;
    pid_t pid;

    *(void**)&stats = test_plugin_sym("uct_ringk_iface_stage_stats");
    ck_assert_ptr_nonnull(stats);
    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_stage_target(c2p[1], p2c[0]);
    }
    ck_assert_int_eq(read(c2p[0], &info, sizeof(info)), sizeof(info));
    node_open(&a, "HOST_RMA", "staged");
    ep = node_connect(&a, info.addr, info.dev_addr);
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), info.rkey, &rkey), UCS_OK);
    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        fill_msg(src, i + 1, lens[i] < 8 ? 8 : lens[i]);
        iov[0] = (uct_iov_t){.buffer = src, .length = lens[i], .count = 1};
        ck_assert_int_eq(uct_ep_put_zcopy(ep, iov, 1, info.target + 64, rkey.rkey, NULL),
                         UCS_OK);
        memset(dst, 0, lens[i]);
        iov[0].buffer = dst;
        ck_assert_int_eq(uct_ep_get_zcopy(ep, iov, 1, info.target + 64, rkey.rkey, NULL),
                         UCS_OK);
        ck_assert_msg(memcmp(dst, src, lens[i]) == 0, "%zu bytes back differ", lens[i]);
        chunks += 2 * ((lens[i] + (1 << 20) - 1) >> 20);
    }
    /* two buffers in one put: each lands after the other */
    fill_msg(src, 50, 8192);
    fill_msg(part, 51, sizeof(part));
    iov[0] = (uct_iov_t){.buffer = src, .length = 8192, .count = 1};
    iov[1] = (uct_iov_t){.buffer = part, .length = sizeof(part), .count = 1};
    ck_assert_int_eq(uct_ep_put_zcopy(ep, iov, 2, info.target, rkey.rkey, NULL), UCS_OK);
    memset(dst, 0, 8192 + sizeof(part));
    iov[0] = (uct_iov_t){.buffer = dst, .length = 8192 + sizeof(part), .count = 1};
    ck_assert_int_eq(uct_ep_get_zcopy(ep, iov, 1, info.target, rkey.rkey, NULL), UCS_OK);
    ck_assert_int_eq(memcmp(dst, src, 8192), 0);
    ck_assert_int_eq(memcmp(dst + 8192, part, sizeof(part)), 0);
    fill_msg(part, 52, 64);
    ck_assert_int_eq(uct_ep_put_short(ep, part, 64, info.target, rkey.rkey), UCS_OK);
    chunks += 4;
    ck_assert_int_eq(stats(a.iface, &served, &failed, &sent), UCS_OK);
    ck_assert_uint_eq(sent, 2 * (sizeof(lens) / sizeof(lens[0])) + 3);

    /* the peer no longer gives the range: refused there, an error here */
    ck_assert_int_eq(write(p2c[1], "d", 1), 1);
    ck_assert_int_eq(read(c2p[0], &ack, 1), 1);
    test_capture_errors_begin();
    ck_assert_int_eq(uct_ep_put_short(ep, part, 8, info.target, rkey.rkey), UCS_ERR_REJECTED);
    test_capture_errors_end();
    ck_assert_msg(strstr(test_captured, "refused a put") != NULL, "logged '%s'", test_captured);

    ck_assert_int_eq(write(p2c[1], "q", 1), 1);
    ck_assert_int_eq(read(c2p[0], result, sizeof(result)), sizeof(result));
    ck_assert_int_eq(read(c2p[0], part, 4096), 4096);
    ck_assert_uint_eq(result[0], chunks); /* every chunk went through the staging area */
    ck_assert_uint_eq(result[1], 1);
    fill_msg(src, 52, 64);
    ck_assert_int_eq(memcmp(part, src, 64), 0); /* the put_short, seen by the peer itself */
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && (WEXITSTATUS(status) == 0));

    /* the peer is gone: a staged put ends with an error */
    test_capture_errors_begin();
    ck_assert_int_ne(uct_ep_put_short(ep, part, 8, info.target, rkey.rkey), UCS_OK);
    test_capture_errors_end();
    uct_rkey_release(test_ringk_component(), &rkey);
    uct_ep_destroy(ep);
    node_close(&a);
}
END_TEST

START_TEST(test_uct_ep_event_fd_wakeup)
{
    int p2c[2], c2p[2], fd, status, n_wake = 0, i;
    peer_info_t info;
    struct pollfd pfd;
    node_t a, b;
    uct_ep_h ep;
    pid_t pid;
    char go;

    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    node_open(&b, NULL, NULL);
    ck_assert_int_eq(uct_iface_event_fd_get(b.iface, &fd), UCS_OK);
    memcpy(info.addr, b.addr, sizeof(info.addr));
    memcpy(info.dev_addr, b.dev_addr, sizeof(info.dev_addr));
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* sender child: one message each time the parent says it sleeps */
        node_open(&a, NULL, NULL);
        ep = node_connect(&a, info.addr, info.dev_addr);
        for (i = 0; i < 5; i++) {
            ck_assert_int_eq(read(p2c[0], &go, 1), 1);
            usleep(20000); /* let the parent enter poll() */
            send_msg(&a, ep, SEND_SHORT, i, 16, NULL);
        }
        ck_assert_int_eq(read(p2c[0], &go, 1), 1);
        uct_ep_destroy(ep);
        node_close(&a);
        _exit(0);
    }
    for (i = 0; i < 5; i++) {
        while (uct_iface_event_arm(b.iface, UCT_EVENT_RECV) == UCS_ERR_BUSY) {
            uct_worker_progress(b.worker);
        }
        ck_assert_int_eq(write(p2c[1], "s", 1), 1);
        pfd = (struct pollfd){.fd = fd, .events = POLLIN};
        /* sleep: the sender's message must wake us well before the timeout */
        ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
        n_wake++;
        wait_recv(&b, (uint64_t)i + 1);
        /* with the message consumed nothing is left, and a fresh arm succeeds; with a message
         * waiting, arm says BUSY */
    }
    ck_assert_int_eq(n_wake, 5);
    ck_assert_uint_eq(b.nrecv, 5);
    ck_assert_uint_eq(b.nbad, 0);
    ck_assert_int_eq(write(p2c[1], "q", 1), 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    node_close(&b);
}
END_TEST

START_TEST(test_uct_ep_arm_busy_with_message)
{
    node_t a, b;
    uct_ep_h ep;
    int fd;

    node_open(&a, NULL, NULL);
    node_open(&b, NULL, NULL);
    ck_assert_int_eq(uct_iface_event_fd_get(b.iface, &fd), UCS_OK);
    ck_assert_int_eq(uct_iface_event_arm(b.iface, UCT_EVENT_RECV), UCS_OK);
    ep = node_connect(&a, b.addr, b.dev_addr);
    send_msg(&a, ep, SEND_SHORT, 0, 16, NULL);
    ck_assert_int_eq(uct_iface_event_arm(b.iface, UCT_EVENT_RECV), UCS_ERR_BUSY);
    wait_recv(&b, 1);
    ck_assert_int_eq(uct_iface_event_arm(b.iface, UCT_EVENT_RECV), UCS_OK);
    uct_ep_destroy(ep);
    node_close(&b);
    node_close(&a);
}
END_TEST

/* A sender child floods the parent; the parent kills it with SIGKILL mid-stream. The parent
 * must go on: its ep to the dead child reports an error, its lane is reclaimed, and a new
 * sender gets a lane and is delivered in order. Nothing appears in /dev/shm. */
START_TEST(test_uct_ep_kill9_sender)
{
    int c2p[2], shm_before = count_dev_shm(), i;
    peer_info_t info;
    node_t b, c;
    uct_ep_h back_ep, ep2;
    uint64_t before;
    pid_t pid;

    ck_assert_int_eq(pipe(c2p), 0);
    node_open(&b, "LANES", "2"); /* one own lane: the dead sender's must come back */
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        node_t a;
        uct_ep_h ep;
        uint64_t seq = 0;

        node_open(&a, NULL, NULL);
        ep = node_connect(&a, b.addr, b.dev_addr);
        memset(&info, 0, sizeof(info)); /* no rkey here: valgrind saw it written uninitialised */
        memcpy(info.addr, a.addr, sizeof(info.addr));
        memcpy(info.dev_addr, a.dev_addr, sizeof(info.dev_addr));
        victim_child = 1; /* from here on it can be killed at any instruction */
        if (write(c2p[1], &info, sizeof(info)) != sizeof(info)) {
            _exit(3);
        }
        for (;;) {
            send_msg(&a, ep, (seq % 3), seq, 8 + (seq * 13) % (mode_max(&a, seq % 3) - 8), &a);
            seq++;
        }
    }
    ck_assert_int_eq(read(c2p[0], &info, sizeof(info)), sizeof(info));
    back_ep = node_connect(&b, info.addr, info.dev_addr);
    wait_recv(&b, 5000);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    before = b.nrecv;
    for (i = 0; i < 100000; i++) {
        uct_worker_progress(b.worker); /* drains what the child published; must not hang */
    }
    ck_assert_uint_ge(b.nrecv, before);
    ck_assert_uint_eq(b.nbad, 0);
    /* the ep to the dead process reports the failure */
    ck_assert_int_eq(uct_ep_check(back_ep, 0, NULL), UCS_OK);
    for (i = 0; (i < 100000) && (b.nerr == 0); i++) {
        uct_worker_progress(b.worker);
    }
    ck_assert_int_eq(b.nerr, 1);
    /* the dead sender's lane is reclaimed: a new sender gets it and is delivered in order */
    for (i = 0; i < 1000; i++) {
        uct_worker_progress(b.worker);
    }
    node_open(&c, NULL, NULL);
    ep2 = node_connect(&c, b.addr, b.dev_addr);
    b.expect_seq = 1000000;
    before       = b.nrecv;
    for (i = 0; i < 100; i++) {
        send_msg(&c, ep2, SEND_BCOPY, 1000000 + i, 100, &b);
    }
    wait_recv(&b, before + 100);
    ck_assert_uint_eq(b.nbad, 0);
    ck_assert_int_eq(count_dev_shm(), shm_before);
    uct_ep_destroy(ep2);
    node_close(&c);
    uct_ep_destroy(back_ep);
    node_close(&b);
}
END_TEST

/* ---- many peers ---------------------------------------------------------------------------- */

#define MANY_PEERS 70

static uint64_t many_expect[MANY_PEERS];
static uint64_t many_bad, many_recv;

static ucs_status_t many_am_cb(void *arg, void *data, size_t length, unsigned flags)
{
    uint64_t seq, sender, n;
    size_t i;

    memcpy(&seq, data, 8);
    sender = seq >> 32;
    n      = seq & 0xffffffffu;
    if ((sender >= MANY_PEERS) || (n != many_expect[sender])) {
        many_bad++;
        return UCS_OK;
    }
    for (i = 8; i < length; i++) {
        if (((uint8_t*)data)[i] != pat(seq, i)) {
            many_bad++;
            break;
        }
    }
    many_expect[sender]++;
    many_recv++;
    return UCS_OK;
}

/* 70 senders into one iface with 16 lanes: 15 get lanes of their own, 55 share lane 0; every
 * message arrives, in order per sender. */
START_TEST(test_uct_ep_many_peers)
{
    static node_t senders[MANY_PEERS];
    uct_ep_h eps[MANY_PEERS];
    const int rounds = 50;
    node_t b;
    int i, r;

    node_open(&b, "LANES", "16");
    ck_assert_int_eq(uct_iface_set_am_handler(b.iface, AM_ID, many_am_cb, NULL, 0), UCS_OK);
    memset(many_expect, 0, sizeof(many_expect));
    many_bad = many_recv = 0;
    for (i = 0; i < MANY_PEERS; i++) {
        node_open(&senders[i], NULL, NULL);
        eps[i] = node_connect(&senders[i], b.addr, b.dev_addr);
    }
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < MANY_PEERS; i++) {
            send_msg(&senders[i], eps[i], r % SEND_MODES, ((uint64_t)i << 32) | r,
                     8 + (r * 37 + i) % 1500, &b);
        }
    }
    while (many_recv < (uint64_t)MANY_PEERS * rounds) {
        uct_worker_progress(b.worker);
    }
    ck_assert_uint_eq(many_bad, 0);
    for (i = 0; i < MANY_PEERS; i++) {
        ck_assert_uint_eq(many_expect[i], rounds);
        uct_ep_destroy(eps[i]);
        node_close(&senders[i]);
    }
    node_close(&b);
}
END_TEST

void test_uct_peer_tests(TCase *local, TCase *process)
{
    tcase_add_test(local, test_uct_ep_cancelled_cells_passed);
    tcase_add_test(local, test_uct_ep_peer_limits);
    tcase_add_test(local, test_uct_ep_staged_self);
    tcase_add_loop_test(local, test_uct_ep_malformed_cells, 0,
                        sizeof(bad_cells) / sizeof(bad_cells[0]));
    tcase_add_test(local, test_uct_ep_arm_busy_with_message);
    tcase_add_test(local, test_uct_ep_many_peers);
    tcase_add_test(process, test_uct_ep_two_process_am_rma);
    tcase_add_test(process, test_uct_ep_two_process_staged);
    tcase_add_test(process, test_uct_ep_event_fd_wakeup);
    tcase_add_test(process, test_uct_ep_kill9_sender);
}
