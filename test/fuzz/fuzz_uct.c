/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: what the ringk transport reads from a peer before it touches the peer's
 * memory. The first byte picks: a packed remote key (through the public uct_rkey_unpack of the
 * ringk component, which this binary links in: registered-memory keys and ringk_shm keys), a
 * receive-segment header checked against the iface address it came with (ring/ringk_ep.c's
 * uct_ringk_ep_seg_check, included here to reach the static function), or two device addresses
 * (node identities and device kinds) compared. What is accepted must
 * describe memory inside what the address announced. */
#include "../../src/uct/ringk/ring/ringk_ep.c"

#include <uct/api/uct.h>

#include <stdlib.h>

static uct_component_h ringk_component;

static void check(int ok)
{
    if (!ok) {
        abort();
    }
}

static uct_component_h find_ringk(void)
{
    uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
    uct_component_h *components, found = NULL;
    unsigned n, i;

    if (uct_query_components(&components, &n) != UCS_OK) {
        abort();
    }
    for (i = 0; (i < n) && (found == NULL); i++) {
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, "ringk")) {
            found = components[i]; /* static: outlives the list */
        }
    }
    uct_release_component_list(components);
    if (found == NULL) {
        abort(); /* the component must be linked in */
    }
    return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t buf[256] = {0};
    uct_ringk_seg_shm_t hdr;
    uct_ringk_iface_addr_t addr;
    ringk_node_id_t a, b;
    uint64_t rings_offset, stride, bytes;
    uct_rkey_bundle_t bundle;
    uct_ringk_rkey_t *rkey;
    uct_ringk_shm_rkey_t *shm;
    uct_ringk_dev_addr_t local;
    void *ptr;
    char reason[128];

    if (size < 1) {
        return 0;
    }
    if (ringk_component == NULL) {
        ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_FATAL; /* refusals are expected */
        ringk_component = find_ringk();
    }
    memcpy(buf, data + 1, ((size - 1) < sizeof(buf)) ? size - 1 : sizeof(buf));
    switch (data[0] % 3) {
    case 0:
        if (uct_rkey_unpack(ringk_component, buf, &bundle) == UCS_OK) {
            rkey = (uct_ringk_rkey_t*)bundle.rkey;
            if (rkey->kind == UCT_RINGK_KEY_SHM) {
                /* a ringk_shm key is accepted only once mapped, whole, for what it says */
                shm = (uct_ringk_shm_rkey_t*)bundle.rkey;
                check((shm->pid != 0) && (shm->pid <= INT32_MAX) && (shm->length >= 8));
                check((shm->address + shm->length > shm->address) && (shm->mapped != NULL));
                check(uct_rkey_ptr(ringk_component, &bundle, shm->address, &ptr) == UCS_OK);
                check(uct_rkey_ptr(ringk_component, &bundle, shm->address + shm->length, &ptr) ==
                      UCS_ERR_INVALID_ADDR);
                uct_rkey_release(ringk_component, &bundle);
                break;
            }
            check(rkey->kind == UCT_RINGK_KEY_REG);
            check((rkey->pid != 0) && (rkey->pid <= INT32_MAX));
            check(rkey->address + rkey->length >= rkey->address); /* no wrap */
            /* a CUDA key lies inside its allocation; mapped here, or not (this process
             * cannot map it: puts and gets go through the staging area the owner serves) */
            check((rkey->mem_type == UCS_MEMORY_TYPE_HOST) ||
                  ((rkey->mem_type == UCS_MEMORY_TYPE_CUDA) &&
                   (rkey->address >= rkey->alloc_base) &&
                   ((rkey->mapped == NULL) || !rkey->own ||
                    (rkey->mapped == (void*)(uintptr_t)rkey->alloc_base))));
            uct_rkey_release(ringk_component, &bundle);
        }
        break;
    case 1:
        memcpy(&hdr, buf, sizeof(hdr));
        memcpy(&addr, buf + sizeof(hdr), sizeof(addr));
        if (uct_ringk_ep_seg_check(&hdr, &addr) == UCS_OK) {
            uct_ringk_seg_layout(hdr.nlanes, hdr.ring_size, hdr.cell_size, &rings_offset,
                                 &stride, &bytes);
            check((hdr.nlanes >= 1) && (hdr.nlanes <= UCT_RINGK_LANES_MAX));
            check(rings_offset + (uint64_t)hdr.nlanes * stride <= addr.seg_bytes);
            check((uint64_t)hdr.ring_size * hdr.cell_size <= stride);
            check(hdr.max_cells <= hdr.ring_size);
            check(hdr.max_len <= ringk_ring_capacity(hdr.max_cells, hdr.cell_size));
        }
        break;
    default:
        memcpy(&a, buf, sizeof(a));
        memcpy(&b, buf + sizeof(a), sizeof(b));
        if (ringk_node_id_same(&a, &b, reason, sizeof(reason))) {
            check(!memcmp(&a, &b, sizeof(a)) || (reason[0] != '\0'));
        }
        check(memchr(reason, '\0', sizeof(reason)) != NULL);
        /* a device address reaches only an iface of its own kind */
        memcpy(&local, buf, sizeof(local));
        if (uct_ringk_dev_addr_reachable(&local, buf + sizeof(local), UCT_RINGK_DEV_SHM, reason,
                                         sizeof(reason))) {
            check(buf[2 * sizeof(local) - 1] == UCT_RINGK_DEV_SHM);
        }
        break;
    }
    return 0;
}
