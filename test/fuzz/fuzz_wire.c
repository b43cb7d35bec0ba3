/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: what another process of a libringk job sends. The first byte picks the
 * message (K2K header, topic publish, barrier, goodbye, credits, the directory or topic tables
 * or the hello of the start exchange) and the job's size and our rank; the rest are the bytes as received.
 * Whatever is accepted must be safe to use: ids, ranks and counts in range, names terminated. */
#include <ringk/net/ringk_wire.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dir_entry_t dir[8];
    static topic_entry_t topics[8];
    remote_hdr_t msg;
    topic_hdr_t topic;
    barrier_msg_t barrier;
    bye_msg_t bye;
    credit_msg_t credit;
    wire_hello_t hello, mine;
    ringk_node_id_t node;
    char why[256];
    size_t hlen, dlen, i;
    int job, me;

    if (size < 4) {
        return 0;
    }
    job  = 1 + data[1] % 64;          /* processes in the job */
    me   = data[2] % job;             /* our rank */
    dlen = data[3] * 16u;             /* payload bytes that came with the header */
    hlen = size - 4;
    data += 4;
    switch (data[-4] % 8) {
    case 0:
        if (ringk_wire_msg_parse(data, hlen, dlen, job, me, &msg) == 0) {
            check((msg.dst >= 1) && (msg.dst <= RINGK_MAX_KERNELS));
            check((msg.src_rank < (uint32_t)job) && ((int)msg.src_rank != me));
            check((msg.msg.length == dlen) && (msg.msg.type <= RINGK_MSG_TERMINATE));
        }
        break;
    case 1:
        if (ringk_wire_topic_parse(data, hlen, dlen, job, me, &topic) == 0) {
            check(memchr(topic.topic, '\0', sizeof(topic.topic)) != NULL);
            check(topic.msg.length == dlen);
            check((topic.src_rank < (uint32_t)job) && ((int)topic.src_rank != me));
            check(ringk_sender_rank(topic.msg.sender) == topic.src_rank);
            check(ringk_sender_kernel(topic.msg.sender) <= RINGK_MAX_KERNELS);
            check((topic.msg.receiver == RINGK_MSG_BROADCAST) && (dlen <= RINGK_MAX_PAYLOAD));
        }
        break;
    case 2:
        if (ringk_wire_barrier_parse(data, hlen, &barrier) == 0) {
            check(memchr(barrier.name, '\0', sizeof(barrier.name)) != NULL);
            check(barrier.release <= 1);
        }
        break;
    case 3:
        if (ringk_wire_bye_parse(data, hlen, job, me, &bye) == 0) {
            check((bye.rank < (uint32_t)job) && ((int)bye.rank != me) && (bye.ack <= 1));
        }
        break;
    case 4:
        if (ringk_wire_credit_parse(data, hlen, job, me, &credit) == 0) {
            check((credit.rank < (uint32_t)job) && ((int)credit.rank != me));
            check(credit.id <= RINGK_MAX_KERNELS); /* 0: the topic slot */
        }
        break;
    case 5:
        memset(dir, 0, sizeof(dir));
        memcpy(dir, data, (hlen < sizeof(dir)) ? hlen : sizeof(dir));
        ringk_wire_dir_fix(dir, 8);
        for (i = 0; i < 8; i++) {
            check(strlen(dir[i].name) < RINGK_NAME_MAX);
            check(!dir[i].used || ((dir[i].id >= 1) && (dir[i].id <= RINGK_MAX_KERNELS) &&
                                   (dir[i].window >= 1) && (dir[i].window <= 65536)));
            /* a device inbox offered by a kernel is that kernel's, or none at all */
            check(!dir[i].used || ((dir[i].dev.kind == RINGK_DEV_EXPORT_NONE) &&
                                   (dir[i].dev.pid == 0) && (dir[i].dev.inbox_off == 0)) ||
                  (((dir[i].dev.kind == RINGK_DEV_EXPORT_EMU) ||
                    (dir[i].dev.kind == RINGK_DEV_EXPORT_CUDA)) &&
                   (dir[i].dev.receiver == dir[i].id)));
            check(memchr(dir[i].dev.busid, '\0', sizeof(dir[i].dev.busid)) != NULL);
        }
        break;
    case 7:
        memset(&hello, 0, sizeof(hello));
        memcpy(&hello, data, (hlen < sizeof(hello)) ? hlen : sizeof(hello));
        memset(&node, 0, sizeof(node));
        ringk_wire_hello_make(&mine, 100, &node);
        if (ringk_wire_hello_check(&hello, &mine, me, why, sizeof(why)) == 0) {
            check((hello.magic == RINGK_HELLO_MAGIC) && (hello.wire == RINGK_WIRE_VERSION));
            check((hello.len >= 1) && (hello.len <= RINGK_HELLO_ADDR_MAX));
        } else {
            check(memchr(why, '\0', sizeof(why)) != NULL);
        }
        break;
    default:
        memset(topics, 0, sizeof(topics));
        memcpy(topics, data, (hlen < sizeof(topics)) ? hlen : sizeof(topics));
        ringk_wire_topics_fix(topics, 8);
        for (i = 0; i < 8; i++) {
            check(strlen(topics[i].name) < RINGK_NAME_MAX);
            check(topics[i].nsubs <= RINGK_MAX_KERNELS);
        }
        break;
    }
    return 0;
}
