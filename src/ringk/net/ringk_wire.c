/* SPDX-License-Identifier: BSD-3-Clause */
/* Checks of everything another process of a job sends (see ringk_wire.h). */
#include "net.h"
#include "ringk_wire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A fingerprint of the sizes, ids and constants of what processes of a job exchange (FNV-1a
 * over them). */
static uint32_t wire_shape(void)
{
    const uint32_t sizes[] = {
        sizeof(wire_msg_t), sizeof(credit_msg_t), sizeof(topic_hdr_t), sizeof(topic_entry_t),
        sizeof(barrier_msg_t), sizeof(bye_msg_t), sizeof(dir_entry_t),
        sizeof(ringk_dev_export_t), RINGK_NAME_MAX, RINGK_MAX_KERNELS, RINGK_MAX_TOPICS,
        RINGK_MAX_BARRIERS, RINGK_MAX_PAYLOAD, RINGK_RANK_SHIFT, RINGK_AM_MSG, RINGK_AM_TOPIC,
        RINGK_AM_BARRIER, RINGK_AM_BYE, RINGK_AM_CREDIT, RINGK_TOPIC_WINDOW, RINGK_TOPIC_SLOT,
        RINGK_WIRE_TIMESTAMP, RINGK_CREDIT_MAGIC, RINGK_BYE_MAGIC,
        offsetof(wire_msg_t, seq), offsetof(dir_entry_t, dev), offsetof(topic_hdr_t, src_rank)
    };
    uint32_t h = 2166136261u;
    size_t i;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        h = (h ^ sizes[i]) * 16777619u;
    }
    return h;
}

void ringk_wire_hello_make(wire_hello_t *h, uint64_t len, const ringk_node_id_t *node)
{
    memset(h, 0, sizeof(*h));
    h->magic   = RINGK_HELLO_MAGIC;
    h->wire    = RINGK_WIRE_VERSION;
    h->shape   = wire_shape();
    h->release = (RINGK_VERSION_MAJOR << 16) | (RINGK_VERSION_MINOR << 8) | RINGK_VERSION_PATCH;
    h->len     = len;
    h->node    = *node;
}

int ringk_wire_hello_check(const wire_hello_t *h, const wire_hello_t *mine, int rank, char *why,
                           size_t why_len)
{
    if (h->magic != RINGK_HELLO_MAGIC) {
        snprintf(why, why_len, "process %d's first words are not a ringk hello (0x%08x): is "
                 "every process of the job a ringk program, of the same release?", rank,
                 h->magic);
        return -EPROTO;
    }
    if ((h->wire != mine->wire) || (h->shape != mine->shape)) {
        snprintf(why, why_len, "process %d runs ringk %u.%u.%u (wire %u, layout %08x), this "
                 "process ringk %u.%u.%u (wire %u, layout %08x): every process of a job must "
                 "run the same ringk", rank, (h->release >> 16) & 0xffffu,
                 (h->release >> 8) & 0xffu, h->release & 0xffu, h->wire, h->shape,
                 (mine->release >> 16) & 0xffffu, (mine->release >> 8) & 0xffu,
                 mine->release & 0xffu, mine->wire, mine->shape);
        return -EPROTO;
    }
    if ((h->len == 0) || (h->len > RINGK_HELLO_ADDR_MAX)) {
        snprintf(why, why_len, "process %d sent a worker address of %llu bytes (1..%u)", rank,
                 (unsigned long long)h->len, RINGK_HELLO_ADDR_MAX);
        return -EPROTO;
    }
    return 0;
}

int ringk_wire_topic_parse(const void *header, size_t header_len, size_t data_len, int size,
                           int me, topic_hdr_t *hdr_p)
{
    topic_hdr_t hdr;

    if (header_len != sizeof(hdr)) {
        return -EPROTO;
    }
    memcpy(&hdr, header, sizeof(hdr));
    hdr.topic[RINGK_NAME_MAX - 1] = '\0';
    /* the publishing kernel is of the sending process, and the message is for every subscriber */
    if ((hdr.msg.length != data_len) || (data_len > RINGK_MAX_PAYLOAD) ||
        (hdr.msg.type > RINGK_MSG_TERMINATE) || !ringk_wire_other_rank(hdr.src_rank, size, me) ||
        (ringk_sender_rank(hdr.msg.sender) != hdr.src_rank) ||
        (ringk_sender_kernel(hdr.msg.sender) > RINGK_MAX_KERNELS) ||
        (hdr.msg.receiver != RINGK_MSG_BROADCAST)) {
        return -EPROTO;
    }
    hdr.msg.flags  = 0;
    hdr.msg.enq_ns = 0;
    *hdr_p = hdr;
    return 0;
}

int ringk_wire_barrier_parse(const void *header, size_t header_len, barrier_msg_t *m_p)
{
    barrier_msg_t m;

    if (header_len != sizeof(m)) {
        return -EPROTO;
    }
    memcpy(&m, header, sizeof(m));
    m.name[RINGK_NAME_MAX - 1] = '\0';
    if (m.release > 1) {
        return -EPROTO;
    }
    *m_p = m;
    return 0;
}

int ringk_wire_bye_parse(const void *header, size_t header_len, int size, int me, bye_msg_t *m_p)
{
    bye_msg_t m;

    if (header_len != sizeof(m)) {
        return -EPROTO;
    }
    memcpy(&m, header, sizeof(m));
    if ((m.magic != RINGK_BYE_MAGIC) || (m.ack > 1) || !ringk_wire_other_rank(m.rank, size, me)) {
        return -EPROTO;
    }
    *m_p = m;
    return 0;
}

int ringk_wire_credit_parse(const void *header, size_t header_len, int size, int me,
                            credit_msg_t *m_p)
{
    credit_msg_t m;

    if (header_len != sizeof(m)) {
        return -EPROTO;
    }
    memcpy(&m, header, sizeof(m));
    if ((m.magic != RINGK_CREDIT_MAGIC) || !ringk_wire_other_rank(m.rank, size, me) ||
        (m.id > RINGK_MAX_KERNELS)) { /* id 0: the topic slot */
        return -EPROTO;
    }
    *m_p = m;
    return 0;
}

void ringk_wire_dir_fix(dir_entry_t *entries, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        dir_entry_t *e = &entries[i];

        e->name[RINGK_NAME_MAX - 1] = '\0';
        e->dev.busid[sizeof(e->dev.busid) - 1] = '\0';
        if (!e->used) {
            continue;
        }
        if ((e->id < 1) || (e->id > RINGK_MAX_KERNELS) || (e->name[0] == '\0')) {
            e->used = 0;
            continue;
        }
        e->window = (e->window < 1) ? 1 : (e->window > 65536) ? 65536 : e->window;
        if (((e->dev.kind != RINGK_DEV_EXPORT_EMU) && (e->dev.kind != RINGK_DEV_EXPORT_CUDA)) ||
            (e->dev.receiver != e->id)) {
            memset(&e->dev, 0, sizeof(e->dev));
        }
    }
}

void ringk_wire_topics_fix(topic_entry_t *entries, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        entries[i].name[RINGK_NAME_MAX - 1] = '\0';
        if (entries[i].nsubs > RINGK_MAX_KERNELS) {
            entries[i].nsubs = RINGK_MAX_KERNELS;
        }
    }
}
