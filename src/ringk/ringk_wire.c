/* SPDX-License-Identifier: BSD-3-Clause */
/* Checks of everything another process of a job sends (see ringk_wire.h). */
#include "ringk_wire.h"

#include <errno.h>
#include <string.h>

/* A rank that names another process of the job (not us). */
static int other_rank(uint32_t rank, int size, int me)
{
    return (rank < (uint32_t)size) && ((int)rank != me);
}

int ringk_wire_msg_parse(const void *header, size_t header_len, size_t data_len, int size,
                         int me, remote_hdr_t *hdr_p)
{
    const int stamped = (header_len == sizeof(wire_msg_t));
    wire_msg_t w;

    if (!stamped && (header_len != RINGK_WIRE_MSG_SHORT)) {
        return -EPROTO;
    }
    /* fixed-size copies: no call into the C library on every message */
    memcpy(&w, header, RINGK_WIRE_MSG_SHORT);
    w.timestamp = 0;
    if (stamped) {
        memcpy(&w.timestamp, (const uint8_t*)header + RINGK_WIRE_MSG_SHORT,
               sizeof(w.timestamp));
    }
    /* the flags say exactly whether the timestamp is there */
    if ((w.flags != (stamped ? RINGK_WIRE_TIMESTAMP : 0)) || (data_len > RINGK_MAX_PAYLOAD) ||
        (w.type > RINGK_MSG_TERMINATE) || (w.dst == 0) || (w.dst > RINGK_MAX_KERNELS) ||
        !other_rank(w.sender >> RINGK_RANK_SHIFT, size, me) ||
        ((w.sender & ((1u << RINGK_RANK_SHIFT) - 1)) > RINGK_MAX_KERNELS)) {
        return -EPROTO;
    }
    hdr_p->msg.sender    = w.sender;
    hdr_p->msg.receiver  = w.dst;
    hdr_p->msg.type      = w.type;
    hdr_p->msg.flags     = 0;
    hdr_p->msg.length    = (uint32_t)data_len;
    hdr_p->msg.seq       = w.seq;
    hdr_p->msg.timestamp = w.timestamp;
    hdr_p->msg.enq_ns    = 0;
    hdr_p->dst           = w.dst;
    hdr_p->src_rank      = w.sender >> RINGK_RANK_SHIFT;
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
    if ((hdr.msg.length != data_len) || (hdr.msg.type > RINGK_MSG_TERMINATE) ||
        !other_rank(hdr.src_rank, size, me)) {
        return -EPROTO;
    }
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
    if ((m.magic != RINGK_BYE_MAGIC) || (m.ack > 1) || !other_rank(m.rank, size, me)) {
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
    if ((m.magic != RINGK_CREDIT_MAGIC) || !other_rank(m.rank, size, me) ||
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
        if (!e->used) {
            continue;
        }
        if ((e->id < 1) || (e->id > RINGK_MAX_KERNELS) || (e->name[0] == '\0')) {
            e->used = 0;
            continue;
        }
        e->window = (e->window < 1) ? 1 : (e->window > 65536) ? 65536 : e->window;
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
