/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk device API, the loop's looks across the bus (included by ringk_device.h): a poll of
 * the host (the kernel's state and the next message of its host ingress ring, an LL ring in
 * mapped memory, in one round trip), the pace of the polls, and the giving back of cells. */
#ifndef RINGK_API_RINGK_DEVICE_POLL_H
#define RINGK_API_RINGK_DEVICE_POLL_H

#ifndef RINGK_API_RINGK_DEVICE_H
#  error "include <ringk/api/ringk_device.h>, not this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the host ingress ring: an LL ring in mapped memory --------------------------------- */

/* Reads RINGK_DEV_POLL_WORDS words of the LL message at @a pos of the host ingress ring @a r,
 * from word @a from on, into @a w, the loads all in flight together: one round trip across the
 * bus (one host read in the tally), the state word's load @a state_p with them when not NULL.
 * Each word's flag says whether it is the message's (ringk_ring_ll_judge()). */
RINGK_DEV_FN void ringk_dev_ll_fetch(const ringk_ring_t *r, uint64_t pos, uint32_t from,
                                     uint64_t *w, const int32_t *state_p, int32_t *state)
{
    uint32_t j;

#if defined(__CUDA_ARCH__)
    if (state_p != NULL) {
        *state = RINGK_DEV_ATOMIC(int32_t, system, state_p).load(cuda::memory_order_relaxed);
    }
#pragma unroll
    for (j = 0; j < RINGK_DEV_POLL_WORDS; j++) {
        w[j] = RINGK_DEV_ATOMIC(uint64_t, system, ringk_ring_ll_word(r, pos, from + j))
                   .load(cuda::memory_order_relaxed);
    }
#else
    RINGK_DEV_TALLY(ringk_ring_ll_word(r, pos, from), RINGK_DEV_SYS_LD);
    if (state_p != NULL) {
        *state = __atomic_load_n(state_p, __ATOMIC_RELAXED);
    }
    /* the first word with acquire: a host CPU whose loads may pass each other then reads the
     * words its producer wrote before the publish (on a GPU the flags say it) */
    w[0] = __atomic_load_n(ringk_ring_ll_word(r, pos, from), __ATOMIC_ACQUIRE);
    for (j = 1; j < RINGK_DEV_POLL_WORDS; j++) {
        w[j] = __atomic_load_n(ringk_ring_ll_word(r, pos, from + j), __ATOMIC_RELAXED);
    }
#endif
}

/* What ringk_dev_host_poll() found. */
#define RINGK_DEV_POLL_NONE  0   /* no message (or the kernel is inactive) */
#define RINGK_DEV_POLL_MSG   1   /* a message, copied out and passed */
#define RINGK_DEV_POLL_AGAIN 2   /* cells passed over (a cancel, a malformed header): again */
#define RINGK_DEV_POLL_BIG   3   /* a message above the caller's room: its header copied, it
                                    stays */

/* How long a poll waits for the rest of a message whose header it found (its producer wrote
 * every word before it published: they are on their way) before it calls the cells bad. */
#define RINGK_DEV_REST_NS 10000000u

/* The message LL header @a h at @a pos of the host ingress ring @a r starts, whose first
 * RINGK_DEV_POLL_WORDS words @a w one read brought: the words on from there read in further
 * rounds (each one read: a reread in the tally), every word's flag checked, the bytes copied
 * to @a dst. 0, or -1 when words still lack the flag RINGK_DEV_REST_NS after the last round
 * that brought some (cells a producer published unwritten: bad). */
RINGK_DEV_CALL_FN int ringk_dev_ll_rest(const ringk_ring_t *r, uint64_t pos,
                                        const ringk_ring_ll_hdr_t *h, uint64_t *w, uint8_t *dst)
{
    uint32_t from = 0, n, lo, off, end;
    uint64_t t0 = 0;

    for (;;) {
        n  = (h->words - from < RINGK_DEV_POLL_WORDS) ? h->words - from : RINGK_DEV_POLL_WORDS;
        lo = (from == 0) ? RINGK_RING_LL_HDR_WORDS : 0; /* w's first word of the message */
        if (ringk_ring_ll_whole(pos, w + lo, n - lo)) {
            off = 4 * (from + lo - RINGK_RING_LL_HDR_WORDS);
            end = 4 * (from + n - RINGK_RING_LL_HDR_WORDS);
            ringk_ring_ll_decode(dst + off, w + lo, ((end < h->len) ? end : h->len) - off);
            from += n;
            if (from >= h->words) {
                return 0;
            }
            t0 = 0;
        } else if (t0 == 0) {
            t0 = ringk_dev_now_ns(); /* not all there yet: its stores are on their way */
        } else if (ringk_dev_elapsed_ns(t0, ringk_dev_now_ns()) > RINGK_DEV_REST_NS) {
            return -1;
        }
        RINGK_DEV_TALLY(NULL, RINGK_TALLY_REREAD);
        ringk_dev_ll_fetch(r, pos, from, w, NULL, NULL);
    }
}

/* Polls the host in one round trip: the kernel's state (into k->state) and the host ingress
 * ring's next words. A message found there is copied out whole (one of up to
 * RINGK_DEV_POLL_BYTES bytes, header included, with this one read; a longer one with a read
 * per RINGK_DEV_POLL_WORDS words more) to @a dst, which has room for @a room bytes (its
 * ringk_msg_t, then the payload), its words zeroed and its cells passed (k->in_head; they go
 * back to the host with the next ringk_dev_give_back()), its header in *@a h. A message above
 * @a room stays: its header copied, RINGK_DEV_POLL_BIG. An inactive kernel takes nothing. The
 * message is the host's writing: checked (the caller checks the ringk_msg_t). */
RINGK_DEV_CALL_FN int ringk_dev_host_poll(ringk_dev_kernel_t *k, uint8_t *dst, uint32_t room,
                                          ringk_ring_ll_hdr_t *h)
{
    const ringk_ring_t *r = &k->ingress;
    const uint64_t pos    = k->in_head;
    uint64_t w[RINGK_DEV_POLL_WORDS];
    unsigned prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_POLL);
    uint32_t max_cells = ringk_ring_ll_cells(sizeof(ringk_msg_t) + k->own.max_in,
                                             r->cell_size);
    int32_t state;
    int got, ret = RINGK_DEV_POLL_NONE;

    RINGK_DEV_TALLY(NULL, RINGK_TALLY_POLL);
    ringk_dev_ll_fetch(r, pos, 0, w, &k->ctl->state, &state);
    k->state = state;
    got = ringk_ring_ll_judge(r, pos, w, (max_cells < r->ncells) ? max_cells : r->ncells, h);
    if ((state == RINGK_KERNEL_INACTIVE) || (got == RINGK_RING_LL_NONE)) {
        (void)RINGK_DEV_IN(prev);
        return RINGK_DEV_POLL_NONE;
    }
    if ((got == RINGK_RING_LL_MSG) && (h->len > room) &&
        (room < sizeof(ringk_msg_t) + k->own.max_in) && (h->len >= sizeof(ringk_msg_t))) {
        /* a receive's buffer too small for it: it stays, its header said (the header's words
         * all there, else it is looked at again) */
        got = ringk_ring_ll_whole(pos, w + RINGK_RING_LL_HDR_WORDS, sizeof(ringk_msg_t) / 4);
        if (got) {
            ringk_ring_ll_decode(dst, w + RINGK_RING_LL_HDR_WORDS, sizeof(ringk_msg_t));
        }
        (void)RINGK_DEV_IN(prev);
        return got ? RINGK_DEV_POLL_BIG : RINGK_DEV_POLL_NONE;
    }
    if (got == RINGK_RING_LL_MSG) {
        if ((h->len <= room) && (ringk_dev_ll_rest(r, pos, h, w, dst) == 0)) {
            RINGK_DEV_TALLY(NULL, RINGK_TALLY_HIT);
            ringk_ring_ll_done(r, pos, h->words);
            k->in_head = pos + h->ncells;
            (void)RINGK_DEV_IN(prev);
            return RINGK_DEV_POLL_MSG;
        }
        /* above what the kernel takes, or published unwritten: its cells passed (their
         * writes before the zeroing: the fence orders what the header's read saw) */
        RINGK_DEV_COUNT(k, bad_cells, 1);
        ringk_dev_fence_sc_sys();
        ringk_ring_ll_done(r, pos, (uint64_t)h->ncells * r->cell_size / 8);
        k->in_head = pos + h->ncells;
        ret        = RINGK_DEV_POLL_AGAIN;
    } else if (got == RINGK_RING_LL_CANCEL) {
        /* words of the cells the header did not read may be the producer's too: zeroed after
         * them (the fence: the header's read before the stores) */
        ringk_dev_fence_sc_sys();
        ringk_ring_ll_done(r, pos, (uint64_t)h->ncells * r->cell_size / 8);
        k->in_head = pos + h->ncells;
        ret        = RINGK_DEV_POLL_AGAIN;
    } else {
        /* a header no producer writes: one cell passed, as a plain ring's consumer does */
        RINGK_DEV_COUNT(k, bad_cells, 1);
        ringk_ring_ll_done(r, pos, r->cell_size / 8);
        k->in_head = pos + 1;
        ret        = RINGK_DEV_POLL_AGAIN;
    }
    (void)RINGK_DEV_IN(prev);
    return ret;
}

/* The message a poll copied to @a m (the host's writing, @a len bytes with its header): the
 * message, or NULL when it is malformed (counted in bad_cells). */
RINGK_DEV_FN const ringk_msg_t *ringk_dev_host_msg(ringk_dev_kernel_t *k, const ringk_msg_t *m,
                                                  const ringk_ring_ll_hdr_t *h)
{
    if ((h->len < sizeof(ringk_msg_t)) || (h->id > RINGK_MSG_TERMINATE) ||
        (m->length != h->len - sizeof(ringk_msg_t)) || (m->length > k->own.max_in)) {
        RINGK_DEV_COUNT(k, bad_cells, 1);
        return NULL;
    }
    if (m->timestamp != 0) {
        ringk_dev_hlc_merge(k, m->timestamp);
    }
    return m;
}

/* ---- giving cells back, the pace of the polls -------------------------------------------- */

/* Gives the cells of ring @a r before @a head back to its producers (one release of the head)
 * once RINGK_DEV_RELEASE_CELLS were taken since *@a rel (a quarter of a smaller ring), or
 * whenever @a now: a consumer that gives them back a message at a time pays an ordered store
 * (across the bus, for the host ingress ring) per message, one that holds them while it waits
 * for more could keep a producer waiting for room. */
RINGK_DEV_FN void ringk_dev_give_back(const ringk_ring_t *r, uint64_t head, uint64_t *rel,
                                      int now)
{
    uint64_t batch = (r->ncells / 4 < RINGK_DEV_RELEASE_CELLS) ? r->ncells / 4
                                                               : RINGK_DEV_RELEASE_CELLS;

    if ((head != *rel) && (now || (head - *rel >= batch))) {
        /* R1: after the reads of the cells (and their zeroing); pairs with C2 in the
         * producers' claims */
        ringk_ring_release_to(r, head);
        *rel = head;
    }
}

/* ringk_dev_give_back() of the host ingress ring (the host messages' traffic across the bus:
 * the tally counts it with the polls). */
RINGK_DEV_FN void ringk_dev_give_back_host(ringk_dev_kernel_t *k, int now)
{
    unsigned prev;

    if (k->in_head == k->in_rel) {
        return;
    }
    prev = RINGK_DEV_IN(RINGK_DEV_BUCKET_POLL);
    ringk_dev_give_back(&k->ingress, k->in_head, &k->in_rel, now);
    (void)RINGK_DEV_IN(prev);
}

/* Whether the loop polls the host at @a now: at once after a poll that found a message (gap
 * 0), every turn while terminating (it drains), else once the gap passed. */
RINGK_DEV_FN int ringk_dev_host_due(const ringk_dev_kernel_t *k, uint64_t now)
{
    return (k->gap == 0) || (k->state == RINGK_KERNEL_TERMINATING) ||
           (ringk_dev_elapsed_ns(k->host_at, now) >= k->gap);
}

#ifdef __cplusplus
}
#endif

#endif
