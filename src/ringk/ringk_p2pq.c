/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk P2P message queue: fixed-size elements from one sender to one receiver over a ring of
 * the core protocol, one element per cell. The ring and the queue's shared state go where the
 * endpoints reach them (host memory, pinned host memory, the receiving GPU's memory); the send
 * and receive are ringk_p2pq_dev.h's, which kernels call too. */
#include "ringk_config.h"

#include "ringk_log.h"

#include <core/ringk_cuda.h>
#include <core/ringk_ring.h>
#include <ringk/api/ringk.h>
#include <ringk/api/ringk_p2pq_dev.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(RINGK_P2PQ_AGAIN == -EAGAIN, "the device code's EAGAIN");

struct ringk_p2pq {
    ringk_p2pq_dev_t *dev;      /* the shared state, at the endpoints' address */
    void             *mem;      /* the allocation holding it and the ring */
    ringk_p2pq_mode_t mode;
    int               src_device, dst_device, direct_p2p;
    unsigned          capacity;
    size_t            elem_size;
    char              reason[RINGK_P2PQ_REASON_LEN];
};

/* The shared state's bytes, rounded to whole lines: the ring follows it. */
#define P2PQ_DEV_BYTES \
    ((sizeof(ringk_p2pq_dev_t) + RINGK_RING_LINE - 1) & ~(size_t)(RINGK_RING_LINE - 1))

static int p2pq_check_params(const ringk_p2pq_params_t *params, ringk_p2pq_t **queue_p,
                             unsigned *capacity_p)
{
    const uint64_t known = RINGK_P2PQ_PARAM_FIELD_CAPACITY | RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE |
                           RINGK_P2PQ_PARAM_FIELD_DEVICES;

    if ((params == NULL) || (queue_p == NULL)) {
        return ringk_log_bad_arg(NULL, "ringk_p2pq_create", "%s is NULL",
                                 (params == NULL) ? "params" : "queue_p");
    }
    if (params->field_mask & ~known) {
        return ringk_log_bad_arg(NULL, "ringk_p2pq_create", "field_mask 0x%llx has unknown bits "
                                 "(known: 0x%llx)", (unsigned long long)params->field_mask,
                                 (unsigned long long)known);
    }
    if (!(params->field_mask & RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE) ||
        (params->elem_size < 1) || (params->elem_size > RINGK_P2PQ_ELEM_MAX)) {
        return ringk_log_bad_arg(NULL, "ringk_p2pq_create", "elem_size %zu is not in 1..%u "
                                 "(required: RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE)",
                                 (params->field_mask & RINGK_P2PQ_PARAM_FIELD_ELEM_SIZE) ?
                                 params->elem_size : 0, RINGK_P2PQ_ELEM_MAX);
    }
    *capacity_p = 1024;
    if (params->field_mask & RINGK_P2PQ_PARAM_FIELD_CAPACITY) {
        *capacity_p = params->capacity;
        if ((*capacity_p < 2) || (*capacity_p > (1u << 20)) ||
            (*capacity_p & (*capacity_p - 1))) {
            return ringk_log_bad_arg(NULL, "ringk_p2pq_create", "capacity %u is not a power of "
                                     "2 in 2..1048576", *capacity_p);
        }
    }
    return 0;
}

/* Where the ring of @a q goes (q->mode, q->direct_p2p, q->reason), from its endpoints:
 * 0, or the refusal (logged). */
static int p2pq_place(ringk_p2pq_t *q)
{
    int s = q->src_device, d = q->dst_device, i, ret, n = 0;
    const int dev[2] = {s, d};
    ringk_peer_info_t info;
    char busid[16], why[256];

    for (i = 0; i < 2; i++) {
        if (dev[i] < RINGK_P2PQ_EMULATED) {
            return ringk_log_bad_arg(NULL, "ringk_p2pq_create", "device %d is not "
                                     "RINGK_P2PQ_HOST (-1), RINGK_P2PQ_EMULATED (-2) or a CUDA "
                                     "device ordinal", dev[i]);
        }
        n += (dev[i] >= 0);
    }
    if ((n > 0) && ((s == RINGK_P2PQ_EMULATED) || (d == RINGK_P2PQ_EMULATED))) {
        return ringk_log_bad_arg(NULL, "ringk_p2pq_create", "devices %d -> %d: the emulated "
                                 "device and a GPU share no memory", s, d);
    }
    for (i = 0; i < 2; i++) {
        if ((dev[i] >= 0) && (ringk_cuda_dev_busid(dev[i], busid, sizeof(busid), why,
                                                   sizeof(why)) != 0)) {
            ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_p2pq_create: device %d: %s", dev[i],
                          why);
            return -ENODEV;
        }
    }
    q->mode = RINGK_P2PQ_MODE_PINNED_HOST;
    if (n == 0) {
        q->mode = RINGK_P2PQ_MODE_HOST_MEMORY;
        snprintf(q->reason, sizeof(q->reason), "no GPU endpoint: host memory");
    } else if (n == 1) {
        snprintf(q->reason, sizeof(q->reason), "the host and GPU %d: pinned host memory, which "
                 "the GPU reaches over its bus", (s >= 0) ? s : d);
    } else if (s == d) {
        q->mode = RINGK_P2PQ_MODE_DEVICE_MEMORY;
        snprintf(q->reason, sizeof(q->reason), "one GPU: its memory");
    } else if (ringk_cuda_resident(-1) > 0) {
        /* turning peer access on, as allocating, may wait for a resident kernel: refused in
         * p2pq_alloc() before any such call */
        snprintf(q->reason, sizeof(q->reason), "GPU %d -> GPU %d", s, d);
    } else if (((ret = ringk_peer_can_access(s, d, &info)) == 0) && info.can_access &&
               ((ret = ringk_peer_enable(s, d)) == 0)) {
        q->mode       = RINGK_P2PQ_MODE_DEVICE_MEMORY;
        q->direct_p2p = 1;
        snprintf(q->reason, sizeof(q->reason), "GPU %d writes GPU %d's memory by %s (%.180s)",
                 s, d, ringk_peer_path_name(info.path), info.reason);
    } else {
        snprintf(q->reason, sizeof(q->reason), "GPU %d -> GPU %d: pinned host memory (%.200s)",
                 s, d, (ret != 0) ? "peer access refused" : info.reason);
    }
    return 0;
}

/* The queue's memory, with the shared state and an empty ring in it (q->mem, q->dev). */
static int p2pq_alloc(ringk_p2pq_t *q, uint32_t cell)
{
    uint64_t bytes = P2PQ_DEV_BYTES + ringk_ring_bytes(q->capacity, cell);
    ringk_p2pq_dev_t *img = NULL;
    char why[256];
    int ret = 0;

    if ((q->mode != RINGK_P2PQ_MODE_HOST_MEMORY) && (ringk_cuda_resident(-1) > 0)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_p2pq_create: %s: the process has ringk "
                      "device kernels, which allocating GPU or pinned memory would wait for",
                      q->reason);
        return -EBUSY;
    }
    if (q->mode == RINGK_P2PQ_MODE_HOST_MEMORY) {
        if (posix_memalign(&q->mem, 4096, bytes) != 0) {
            q->mem = NULL;
        }
    } else if (q->mode == RINGK_P2PQ_MODE_PINNED_HOST) {
        q->mem = ringk_cuda_host_alloc(bytes);
    } else {
        q->mem = ringk_cuda_dev_alloc(q->dst_device, bytes, why, sizeof(why));
    }
    if (q->mem == NULL) {
        return -ENOMEM;
    }
    /* in GPU memory the state is made on the host and copied there */
    img = (q->mode == RINGK_P2PQ_MODE_DEVICE_MEMORY) ? NULL : q->mem;
    if ((img == NULL) && (posix_memalign((void**)&img, 4096, bytes) != 0)) {
        return -ENOMEM;
    }
    memset(img, 0, P2PQ_DEV_BYTES);
    ringk_ring_init(&img->ring, (uint8_t*)img + P2PQ_DEV_BYTES, bytes - P2PQ_DEV_BYTES,
                    q->capacity, cell);
    ringk_ring_view(&img->ring, (uint8_t*)q->mem + P2PQ_DEV_BYTES,
                    ringk_ring_log2(q->capacity), cell);
    img->magic     = RINGK_P2PQ_DEV_MAGIC;
    img->elem_size = (uint32_t)q->elem_size;
    if (img != q->mem) {
        /* on the copy stream of the queue's GPU, made here (not while kernels run, when a new
         * stream could share a resident kernel's hardware queue): its snapshots use it too */
        if (ringk_cuda_copy_on(q->dst_device, q->mem, img, bytes, why, sizeof(why)) != 0) {
            ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_p2pq_create: %s", why);
            ret = -EIO;
        }
        free(img);
    }
    q->dev = q->mem;
    return ret;
}

static void p2pq_free_mem(ringk_p2pq_t *q)
{
    switch (q->mode) {
    case RINGK_P2PQ_MODE_HOST_MEMORY:   free(q->mem); break;
    case RINGK_P2PQ_MODE_PINNED_HOST:   ringk_cuda_host_free(q->mem); break;
    case RINGK_P2PQ_MODE_DEVICE_MEMORY: ringk_cuda_dev_free(q->mem); break;
    }
}

int ringk_p2pq_create(const ringk_p2pq_params_t *params, ringk_p2pq_t **queue_p)
{
    unsigned capacity = 0, cell = RINGK_RING_CELL_MIN;
    ringk_p2pq_t *q;
    int ret;

    if ((ret = p2pq_check_params(params, queue_p, &capacity)) != 0) {
        return ret;
    }
    while (cell < RINGK_CELL_HDR_BYTES + params->elem_size) {
        cell *= 2;
    }
    if ((q = calloc(1, sizeof(*q))) == NULL) {
        return -ENOMEM;
    }
    q->elem_size  = params->elem_size;
    q->capacity   = capacity;
    q->src_device = q->dst_device = RINGK_P2PQ_HOST;
    if (params->field_mask & RINGK_P2PQ_PARAM_FIELD_DEVICES) {
        q->src_device = params->src_device;
        q->dst_device = params->dst_device;
    }
    if (((ret = p2pq_place(q)) != 0) || ((ret = p2pq_alloc(q, cell)) != 0)) {
        if (q->mem != NULL) {
            p2pq_free_mem(q);
        }
        free(q);
        return ret;
    }
    *queue_p = q;
    return 0;
}

int ringk_p2pq_destroy(ringk_p2pq_t *q)
{
    if (q == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "queue is NULL");
    }
    if ((q->mode != RINGK_P2PQ_MODE_HOST_MEMORY) && (ringk_cuda_resident(-1) > 0)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_p2pq_destroy: the process has ringk device "
                      "kernels, which freeing GPU or pinned memory would wait for: kept");
        return -EBUSY;
    }
    p2pq_free_mem(q);
    free(q);
    return 0;
}

unsigned ringk_p2pq_capacity(const ringk_p2pq_t *q)
{
    if (q == NULL) {
        ringk_log_bad_arg(NULL, __func__, "queue is NULL");
        return 0;
    }
    return q->capacity;
}

/* A copy of the shared state, and the ring's consumer position, of a queue in GPU memory. */
static int p2pq_snapshot(const ringk_p2pq_t *q, ringk_p2pq_dev_t *snap, uint64_t *cons_p)
{
    char why[256];

    if ((ringk_cuda_copy_on(q->dst_device, snap, q->dev, sizeof(*snap), why,
                            sizeof(why)) != 0) ||
        (ringk_cuda_copy_on(q->dst_device, cons_p, &snap->ring.cons->pos, sizeof(*cons_p), why,
                            sizeof(why)) != 0)) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "ringk_p2pq: reading the queue in GPU %d's "
                      "memory: %s", q->dst_device, why);
        return -EIO;
    }
    return 0;
}

/* Elements written and not yet taken (ringk_p2pq_count()); 0 when a GPU copy failed. */
static unsigned p2pq_count(const ringk_p2pq_t *q)
{
    ringk_p2pq_dev_t snap;
    uint64_t cons = 0;

    if (q->mode != RINGK_P2PQ_MODE_DEVICE_MEMORY) {
        return ringk_p2pq_dev_count(q->dev);
    }
    if (p2pq_snapshot(q, &snap, &cons) != 0) {
        return 0;
    }
    return (snap.tx.published > cons) ? (unsigned)(snap.tx.published - cons) : 0;
}

unsigned ringk_p2pq_count(const ringk_p2pq_t *q)
{
    if (q == NULL) {
        ringk_log_bad_arg(NULL, __func__, "queue is NULL");
        return 0;
    }
    return p2pq_count(q);
}

int ringk_p2pq_empty(const ringk_p2pq_t *q)
{
    if (q == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "queue is NULL");
    }
    return p2pq_count(q) == 0;
}

int ringk_p2pq_full(const ringk_p2pq_t *q)
{
    if (q == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "queue is NULL");
    }
    return p2pq_count(q) >= q->capacity;
}

/* 0 when the host is the endpoint @a end (0 sender, 1 receiver) of @a q, else -EPERM (logged)
 * or -EINVAL for the NULL @a q or @a ptr (named @a what). */
static int p2pq_host_end(const char *fn, const ringk_p2pq_t *q, const void *ptr,
                         const char *what, int end)
{
    int dev;

    if ((q == NULL) || (ptr == NULL)) {
        return ringk_log_bad_arg(NULL, fn, "%s is NULL", (q == NULL) ? "queue" : what);
    }
    dev = end ? q->dst_device : q->src_device;
    if (dev != RINGK_P2PQ_HOST) {
        ringk_log_msg(NULL, RINGK_LOG_ERROR, "%s: the %s is %s %d: its code calls "
                      "ringk_p2pq_dev_%s() on ringk_p2pq_dev_view()", fn,
                      end ? "receiver" : "sender", (dev == RINGK_P2PQ_EMULATED) ?
                      "the emulated device" : "GPU", dev, end ? "receive" : "send");
        return -EPERM;
    }
    return 0;
}

int ringk_p2pq_send(ringk_p2pq_t *q, const void *elem)
{
    int ret = p2pq_host_end(__func__, q, elem, "elem", 0);

    return (ret != 0) ? ret : ringk_p2pq_dev_send(q->dev, elem);
}

int ringk_p2pq_send_batch(ringk_p2pq_t *q, const void *elems, unsigned n, unsigned *sent_p)
{
    const uint8_t *p = elems;
    unsigned i;
    int ret = p2pq_host_end(__func__, q, (n > 0) ? elems : (const void*)q, "elems", 0);

    if (ret != 0) {
        return ret;
    }
    for (i = 0; i < n; i++) {
        if (ringk_p2pq_dev_send(q->dev, p + (size_t)i * q->elem_size) != 0) {
            break;
        }
    }
    if (sent_p != NULL) {
        *sent_p = i;
    }
    return ((i == 0) && (n > 0)) ? -EAGAIN : 0;
}

int ringk_p2pq_receive(ringk_p2pq_t *q, void *elem)
{
    int ret = p2pq_host_end(__func__, q, elem, "elem", 1);

    return (ret != 0) ? ret : ringk_p2pq_dev_receive(q->dev, elem);
}

int ringk_p2pq_receive_batch(ringk_p2pq_t *q, void *elems, unsigned max, unsigned *got_p)
{
    uint8_t *p = elems;
    unsigned i;
    int ret = p2pq_host_end(__func__, q, (max > 0) ? elems : (const void*)q, "elems", 1);

    if (ret != 0) {
        return ret;
    }
    for (i = 0; i < max; i++) {
        if (ringk_p2pq_dev_receive(q->dev, p + (size_t)i * q->elem_size) != 0) {
            break;
        }
    }
    if (got_p != NULL) {
        *got_p = i;
    }
    return ((i == 0) && (max > 0)) ? -EAGAIN : 0;
}

int ringk_p2pq_try_peek(ringk_p2pq_t *q, void *elem)
{
    int ret = p2pq_host_end(__func__, q, elem, "elem", 1);

    return (ret != 0) ? ret : ringk_p2pq_dev_peek(q->dev, elem);
}

int ringk_p2pq_clear(ringk_p2pq_t *q, unsigned *cleared_p)
{
    int ret = p2pq_host_end(__func__, q, q, "queue", 1);
    unsigned n;

    if (ret != 0) {
        return ret;
    }
    n = ringk_p2pq_dev_clear(q->dev);
    if (cleared_p != NULL) {
        *cleared_p = n;
    }
    return 0;
}

int ringk_p2pq_stats_query(const ringk_p2pq_t *q, ringk_p2pq_stats_t *s)
{
    const ringk_p2pq_dev_t *d;
    ringk_p2pq_dev_t snap;
    uint64_t cons;

    if ((q == NULL) || (s == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "stats_p");
    }
    d = q->dev;
    if (q->mode == RINGK_P2PQ_MODE_DEVICE_MEMORY) {
        if (p2pq_snapshot(q, &snap, &cons) != 0) {
            return -EIO;
        }
        d = &snap;
    }
    s->sent         = __atomic_load_n(&d->tx.sent, __ATOMIC_RELAXED);
    s->refused_full = __atomic_load_n(&d->tx.refused_full, __ATOMIC_RELAXED);
    s->received     = __atomic_load_n(&d->rx.received, __ATOMIC_RELAXED);
    s->empty_polls  = __atomic_load_n(&d->rx.empty_polls, __ATOMIC_RELAXED);
    s->cleared      = __atomic_load_n(&d->rx.cleared, __ATOMIC_RELAXED);
    s->mode         = q->mode;
    return 0;
}

int ringk_p2pq_info_query(const ringk_p2pq_t *q, ringk_p2pq_info_t *info)
{
    const uint64_t known = RINGK_P2PQ_INFO_FIELD_MODE | RINGK_P2PQ_INFO_FIELD_DEVICES |
                           RINGK_P2PQ_INFO_FIELD_DIRECT_P2P | RINGK_P2PQ_INFO_FIELD_REASON;

    if ((q == NULL) || (info == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "info_p");
    }
    if (info->field_mask & ~known) {
        return ringk_log_bad_arg(NULL, __func__, "field_mask 0x%llx has unknown bits (known: "
                                 "0x%llx)", (unsigned long long)info->field_mask,
                                 (unsigned long long)known);
    }
    if (info->field_mask & RINGK_P2PQ_INFO_FIELD_MODE) {
        info->mode = q->mode;
    }
    if (info->field_mask & RINGK_P2PQ_INFO_FIELD_DEVICES) {
        info->src_device = q->src_device;
        info->dst_device = q->dst_device;
    }
    if (info->field_mask & RINGK_P2PQ_INFO_FIELD_DIRECT_P2P) {
        info->direct_p2p = q->direct_p2p;
    }
    if (info->field_mask & RINGK_P2PQ_INFO_FIELD_REASON) {
        snprintf(info->reason, sizeof(info->reason), "%s", q->reason);
    }
    return 0;
}

int ringk_p2pq_dev_view(ringk_p2pq_t *q, struct ringk_p2pq_dev **view_p)
{
    if ((q == NULL) || (view_p == NULL)) {
        return ringk_log_bad_arg(NULL, __func__, "%s is NULL", (q == NULL) ? "queue" : "view_p");
    }
    *view_p = q->dev;
    return 0;
}
