/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: the CUDA entries of the process, loaded on a device and the device's stack limit
 * sized for them before the first device kernel of the process starts there. */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"

#include "core/ringk_cuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The CUDA entries of the process (ringk_device_entry_register), and per CUDA device which of
 * them are loaded there, what stack they need, and how many device kernels of the process
 * (every context) it has. Loading a kernel and raising the stack limit wait for every kernel
 * that runs on the device (docs/gpu.md, "Loading kernels and their stack"), so both happen while
 * the device has no kernel of the process: for every entry known then. */
static struct {
    pthread_mutex_t             mu;
    const ringk_device_entry_t *entry[RINGK_DEVICE_ENTRIES_MAX];
    unsigned                    n;
    uint8_t                     loaded[RINGK_DEV_DEVICES][RINGK_DEVICE_ENTRIES_MAX];
    size_t                      need[RINGK_DEV_DEVICES][RINGK_DEVICE_ENTRIES_MAX];
    size_t                      limit[RINGK_DEV_DEVICES]; /* the stack limit, once read */
    unsigned                    kernels[RINGK_DEV_DEVICES];
    int                         asked;  /* ringk_dev_queues_ask() ran */
    int                         set;    /* it set CUDA_DEVICE_MAX_CONNECTIONS */
    int                         init_before; /* 1: the CUDA driver was initialized (or it
                                           could not be told) when it was set */
} cuda_entries = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Under cuda_entries.mu: the index of @a e, added when new (in a place an unregistered entry
 * left, or at the end); -1 when the table is full. */
static int cuda_entry_index(const ringk_device_entry_t *e)
{
    unsigned i, d, hole = RINGK_DEVICE_ENTRIES_MAX;

    for (i = 0; i < cuda_entries.n; i++) {
        if (cuda_entries.entry[i] == e) {
            return (int)i;
        }
        if ((cuda_entries.entry[i] == NULL) && (hole == RINGK_DEVICE_ENTRIES_MAX)) {
            hole = i;
        }
    }
    if (hole == RINGK_DEVICE_ENTRIES_MAX) {
        if (cuda_entries.n == RINGK_DEVICE_ENTRIES_MAX) {
            return -1;
        }
        hole = cuda_entries.n++;
    }
    for (d = 0; d < RINGK_DEV_DEVICES; d++) {
        cuda_entries.loaded[d][hole] = 0;
    }
    cuda_entries.entry[hole] = e;
    return (int)hole;
}

int ringk_device_entry_register(const ringk_device_entry_t *entry)
{
    int idx;

    if (entry == NULL) {
        return ringk_log_bad_arg(NULL, __func__, "entry is NULL");
    }
    if ((entry->magic != RINGK_DEVICE_ENTRY_MAGIC) || (entry->kind != RINGK_DEVICE_ENTRY_CUDA)) {
        return 0;
    }
    /* called from the entry's constructor, before main as a rule: before the program's first
     * CUDA call, the one moment the queue count can still be set */
    ringk_dev_queues_ask();
    ringk_dev_lock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    idx = cuda_entry_index(entry);
    ringk_dev_unlock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    return (idx < 0) ? -ENOSPC : 0;
}

/* Called from the entry's library's destructor, inside dlclose() (under the loader's lock):
 * takes no lock but this table's, under which nothing loads a library. */
void ringk_device_entry_unregister(const ringk_device_entry_t *entry)
{
    unsigned i;

    if (entry == NULL) {
        ringk_log_bad_arg(NULL, __func__, "entry is NULL");
        return;
    }
    ringk_dev_lock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    for (i = 0; i < cuda_entries.n; i++) {
        if (cuda_entries.entry[i] == entry) {
            cuda_entries.entry[i] = NULL;
        }
    }
    ringk_dev_unlock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
}

const ringk_device_cuda_ops_t *ringk_dev_ops_live(const ringk_device_cuda_ops_t *ops)
{
    const ringk_device_cuda_ops_t *other = NULL;
    const ringk_device_entry_t *e;
    unsigned i;

    ringk_dev_lock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    for (i = 0; i < cuda_entries.n; i++) {
        e = cuda_entries.entry[i];
        if ((e == NULL) || (e->abi != RINGK_DEV_ABI) || (e->cuda == NULL)) {
            continue;
        }
        if (e->cuda == ops) {
            other = ops;
            break;
        }
        other = (other == NULL) ? e->cuda : other;
    }
    ringk_dev_unlock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    return other;
}

void ringk_dev_queues_ask(void)
{
    int before = 0, set = 0;

    if (__atomic_load_n(&cuda_entries.asked, __ATOMIC_ACQUIRE)) {
        return;
    }
    /* CUDA reads the variable when the driver is initialized (the program's first CUDA call,
     * or the transport's): after that, every context has the queues of that time. Asked without
     * a lock (a driver query may load nothing, but dlopen takes the loader's lock, which a
     * library's destructor holds when it unregisters its entry). */
    if (getenv("CUDA_DEVICE_MAX_CONNECTIONS") == NULL) {
        before = (ringk_cuda_driver_initialized() != 0);
        set    = 1;
    }
    ringk_dev_lock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    if (!cuda_entries.asked) {
        if (set && (getenv("CUDA_DEVICE_MAX_CONNECTIONS") == NULL)) {
            setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
            cuda_entries.init_before = before;
            cuda_entries.set         = 1;
        }
        __atomic_store_n(&cuda_entries.asked, 1, __ATOMIC_RELEASE);
    }
    ringk_dev_unlock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
}

unsigned ringk_dev_queues(int dev, int *before, const char **bad)
{
    const char *conn;
    char *end;
    long queues = 8;

    ringk_dev_lock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    *before = cuda_entries.set && cuda_entries.init_before;
    conn    = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    *bad    = NULL;
    if ((conn != NULL) && !*before) {
        queues = strtol(conn, &end, 10);
        if ((end == conn) || (*end != '\0') || (queues < 1) || (queues > 32)) {
            *bad   = conn; /* CUDA keeps its default then */
            queues = 8;
        }
    }
    ringk_dev_unlock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    return (unsigned)queues;
}

/* Under cuda_entries.mu: loads entry @a e (index @a idx, -1 outside the table) on CUDA device
 * @a dev; 0 with its stack need, or the error (logged). */
static int cuda_entry_load(ringk_ctx_t *ctx, const ringk_device_entry_t *e, int idx, int dev,
                           size_t *need)
{
    char why[160] = "";
    int ret;

    if ((idx >= 0) && cuda_entries.loaded[1 + dev][idx]) {
        *need = cuda_entries.need[1 + dev][idx];
        return 0;
    }
    if ((e->abi != RINGK_DEV_ABI) || (e->cuda->load == NULL)) {
        *need = 0; /* refused when a kernel is made of it (entry_check) */
        return 0;
    }
    ret = e->cuda->load(dev, need, why, sizeof(why));
    if (ret != 0) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "device_entry '%s' on CUDA device %d: %s", e->name,
                      dev, why);
        return ret;
    }
    if (idx >= 0) {
        cuda_entries.loaded[1 + dev][idx] = 1;
        cuda_entries.need[1 + dev][idx]   = *need;
    }
    return 0;
}

/* Readies device kernel @a k of entry @a e on CUDA device @a dev before its first launch, and
 * counts it among the device's kernels (uncounted by ringk_dev_entry_gone). With no kernel of the
 * process on the device: loads every known entry there and raises the stack limit to their
 * largest need. Else its entry must be loaded already (or CUDA loads eagerly) and fit the
 * limit: 0, -EDEADLK, -E2BIG or a CUDA error (logged). */
int ringk_dev_entry_ready(ringk_ctx_t *ctx, const ringk_kernel_t *k, const ringk_device_entry_t *e,
                          const ringk_device_cuda_ops_t *ops, int dev)
{
    const char *loading = getenv("CUDA_MODULE_LOADING");
    size_t need = 0, most = 0, *limit = &cuda_entries.limit[1 + dev];
    char why[160] = "";
    int idx, ret = 0;
    unsigned i;

    ringk_dev_lock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    idx = cuda_entry_index(e);
    if (cuda_entries.kernels[1 + dev] == 0) {
        /* one that fails to load (logged; built for another GPU, say) is left out, unless it
         * is this kernel's: it is tried again when the device is next without kernels */
        for (i = 0; (i < cuda_entries.n) && (ret == 0); i++) {
            if ((cuda_entries.entry[i] != NULL) &&
                ((ret = cuda_entry_load(ctx, cuda_entries.entry[i], (int)i, dev, &need)) == 0)) {
                most = (need > most) ? need : most;
            }
            ret = ((int)i == idx) ? ret : 0;
        }
        if ((ret == 0) && (idx < 0)) {
            ret  = cuda_entry_load(ctx, e, idx, dev, &need);
            most = (need > most) ? need : most;
        }
        if ((ret == 0) && ((ret = ops->stack_raise(dev, most, limit, why, sizeof(why))) != 0)) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "CUDA device %d: %s", dev, why);
        }
    } else if (((idx < 0) || !cuda_entries.loaded[1 + dev][idx]) &&
               ((loading == NULL) || (strcmp(loading, "EAGER") != 0))) {
        ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': device_entry '%s' was not loaded on "
                      "CUDA device %d before device kernels started there, and CUDA loads "
                      "kernels lazily: loading it now could wait for the resident kernels for "
                      "ever (define it with RINGK_DEVICE_ENTRY in a file linked into the "
                      "program, or set CUDA_MODULE_LOADING=EAGER)", k->name, e->name, dev);
        ret = -EDEADLK;
    } else if ((ret = cuda_entry_load(ctx, e, idx, dev, &need)) == 0) {
        if (need > *limit) {
            ringk_log_msg(ctx, RINGK_LOG_ERROR, "kernel '%s': device_entry '%s' needs %zu "
                          "bytes of stack per thread, more than CUDA device %d's limit of %zu, "
                          "which cannot be raised while device kernels run there (it waits for "
                          "them): make the entry known before the first device kernel starts",
                          k->name, e->name, need, dev, *limit);
            ret = -E2BIG;
        }
    }
    if (ret == 0) {
        cuda_entries.kernels[1 + dev]++;
    }
    ringk_dev_unlock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    return ret;
}

int ringk_device_kernels(int device)
{
    int n = 0;

    if (device < 0) {
        return ringk_log_bad_arg(NULL, __func__, "device %d is negative", device);
    }
    if (device < RINGK_DEV_DEVICES - 1) {
        ringk_dev_lock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
        n = (int)cuda_entries.kernels[1 + device];
        ringk_dev_unlock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    }
    return n;
}

/* A device kernel counted by ringk_dev_entry_ready() whose launches all returned. */
void ringk_dev_entry_gone(int dev)
{
    ringk_dev_lock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
    cuda_entries.kernels[1 + dev]--;
    ringk_dev_unlock(&cuda_entries.mu, RINGK_DEV_LOCK_ENTRIES);
}
