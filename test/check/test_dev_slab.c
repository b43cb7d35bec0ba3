/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the regions device kernels hold in their device's slabs
 * (src/ringk/dev/ringk_dev_slab.c): first fit between the regions held, alignment, both slabs
 * at once, holds, and a full slab; of the device executor's lock order (dev/dev.h), which
 * aborts a thread that breaks it; of its rule for device kernels sending into another GPU's
 * inboxes (ringk_dev_peer_usable()); of the checks of another process's directory entry
 * for a device inbox (ringk_dev_export_check()) and of the access a sender's GPU is given to
 * that memory (ringk_dev_rmap_grant()); and of the service that hands a CUDA device memory's
 * descriptor to other processes (ringk_dev_fdsvc.c), a memfd standing in for the cuMem
 * descriptor. */
#define _GNU_SOURCE
#include "test_util.h"

#include <ringk/dev/dev.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define A RINGK_DEV_SLAB_ALIGN

/* the executor's own is in ringk_exec_dev.c, which this program does not link */
__thread unsigned ringk_dev_locks_held;

static ringk_dev_device_t device_of(size_t mapped, size_t mem)
{
    ringk_dev_device_t s;

    memset(&s, 0, sizeof(s));
    s.mapped.size = mapped;
    s.mem.size    = mem;
    return s;
}

static ringk_dev_region_t *take(ringk_dev_device_t *s, size_t mapped, size_t mem)
{
    ringk_dev_region_t *r = NULL;

    ck_assert_int_eq(ringk_dev_region_take(s, mapped, mem, &r, NULL, 0), 0);
    ck_assert_uint_eq(r->at[0] % A, 0);
    ck_assert_uint_eq(r->at[1] % A, 0);
    ck_assert_uint_le(r->at[0] + mapped, s->mapped.size);
    ck_assert_uint_le(r->at[1] + mem, s->mem.size);
    return r;
}

START_TEST(test_dev_slab_first_fit)
{
    ringk_dev_device_t s = device_of(8 * A, 4 * A);
    ringk_dev_region_t *r1, *r2, *r3, *r4, *r5, *no = NULL;
    char why[160];

    r1 = take(&s, A + 1, 1); /* two aligned units of the mapped slab */
    r2 = take(&s, 2 * A, A);
    r3 = take(&s, A, 1);
    ck_assert_uint_eq(r1->at[0], 0);
    ck_assert_uint_eq(r2->at[0], 2 * A);
    ck_assert_uint_eq(r3->at[0], 4 * A);
    ck_assert_uint_eq(r2->at[1], A);
    ck_assert_uint_eq(r3->at[1], 2 * A);
    /* r2 given back: a smaller region takes its place in both slabs, a bigger one goes past */
    ringk_dev_region_put(&s, r2);
    r4 = take(&s, A, 1);
    ck_assert_uint_eq(r4->at[0], 2 * A);
    ck_assert_uint_eq(r4->at[1], A);
    r5 = take(&s, 3 * A, 1);
    ck_assert_uint_eq(r5->at[0], 5 * A);
    ck_assert_uint_eq(r5->at[1], 3 * A);
    /* full: the mapped slab has one unit left at 3 A, the device memory slab none */
    ck_assert_int_eq(ringk_dev_region_take(&s, 2 * A, 0, &no, why, sizeof(why)), -ENOMEM);
    ck_assert_msg(strstr(why, " of mapped memory (RINGK_DEVICE_MAPPED_MB)") != NULL, "%s", why);
    ck_assert_int_eq(ringk_dev_region_take(&s, A, 1, &no, why, sizeof(why)), -ENOMEM);
    ck_assert_msg(strstr(why, "no room for 1 bytes in the 0 MiB of device memory "
                              "(RINGK_DEVICE_MEM_MB)") != NULL, "%s", why);
    ck_assert_int_eq(ringk_dev_region_take(&s, 9 * A, 0, &no, NULL, 0), -ENOMEM);
    ck_assert_int_eq(ringk_dev_region_take(&s, (size_t)-1, 0, &no, NULL, 0), -ENOMEM);
    ck_assert_ptr_null(no);
    ringk_dev_region_put(&s, r1);
    ringk_dev_region_put(&s, r3);
    ringk_dev_region_put(&s, r4);
    ringk_dev_region_put(&s, r5);
    ck_assert_ptr_null(s.regions);
    /* all given back: the whole slabs again */
    r1 = take(&s, 8 * A, 4 * A);
    ck_assert_uint_eq(r1->at[0], 0);
    ringk_dev_regions_clear(&s);
    ck_assert_ptr_null(s.regions);
}
END_TEST

/* The regions are not kept in address order (the newest first): one that the search passed
 * before it was pushed on by a lower one still counts. */
START_TEST(test_dev_slab_unordered)
{
    ringk_dev_device_t s = device_of(8 * A, 8 * A);
    ringk_dev_region_t *lo, *mid, *hi, *r;

    lo  = take(&s, A, A); /* [0, A) */
    mid = take(&s, A, A); /* [A, 2A) */
    hi  = take(&s, A, A); /* [2A, 3A), listed before lo */
    ck_assert_uint_eq(hi->at[0], 2 * A);
    ringk_dev_region_put(&s, mid);
    /* from 0: hi is passed, lo pushes the search to A, where hi is in the way: 3A */
    r = take(&s, 2 * A, 2 * A);
    ck_assert_uint_eq(r->at[0], 3 * A);
    ck_assert_uint_eq(r->at[1], 3 * A);
    ck_assert_uint_eq(lo->at[0], 0);
    ringk_dev_regions_clear(&s);
}
END_TEST

/* A region another kernel holds (a direct route into it) stays until the last hold goes. */
START_TEST(test_dev_slab_holds)
{
    ringk_dev_device_t s = device_of(2 * A, 2 * A);
    ringk_dev_region_t *r1, *r2, *no = NULL;

    r1 = take(&s, A, A);
    __atomic_add_fetch(&r1->holds, 1, __ATOMIC_RELAXED);
    ringk_dev_region_put(&s, r1); /* its kernel freed; the sender still holds it */
    r2 = take(&s, A, A);
    ck_assert_uint_eq(r2->at[0], A);
    ck_assert_int_eq(ringk_dev_region_take(&s, A, A, &no, NULL, 0), -ENOMEM);
    ringk_dev_region_put(&s, r1); /* the sender freed */
    ck_assert_int_eq(ringk_dev_region_take(&s, A, A, &no, NULL, 0), 0);
    ck_assert_uint_eq(no->at[0], 0);
    ringk_dev_regions_clear(&s);
}
END_TEST

/* A region whose kernel's inbox was offered to other processes is never taken again: a sender
 * there may write it after its kernel is gone. Its last hold given back leaves it taken, but
 * not held. */
START_TEST(test_dev_slab_exported)
{
    ringk_dev_device_t s = device_of(2 * A, 2 * A);
    ringk_dev_region_t *r1, *r2, *no = NULL;

    r1 = take(&s, A, A);
    r1->exported = 1;
    ringk_dev_region_put(&s, r1);
    ck_assert_uint_eq(r1->holds, 0);
    r2 = take(&s, A, A);
    ck_assert_uint_eq(r2->at[0], A);
    ck_assert_uint_eq(r2->at[1], A);
    ck_assert_int_eq(ringk_dev_region_take(&s, A, A, &no, NULL, 0), -ENOMEM);
    ringk_dev_region_put(&s, r2); /* not exported: free again */
    ck_assert_int_eq(ringk_dev_region_take(&s, A, A, &no, NULL, 0), 0);
    ck_assert_uint_eq(no->at[0], A);
    ringk_dev_regions_clear(&s);
}
END_TEST

/* What another process's directory says of a device inbox is checked before anything is
 * mapped or written: the geometry one of ringk's rings has, the inbox and the control block
 * aligned, past the file's header page and inside the file, with no sum that wraps. */
START_TEST(test_dev_export_check)
{
    const uint64_t file = RINGK_DEV_SLAB_FILE_HDR + (1u << 20);
    const uint64_t ring = ringk_ring_bytes(64, RINGK_CELL);
    ringk_dev_export_t ok = {
        .kind = RINGK_DEV_EXPORT_EMU, .pid = 1, .fd = 3, .receiver = 1, .token = 7,
        .inbox_off = RINGK_DEV_SLAB_FILE_HDR, .ctl_off = RINGK_DEV_SLAB_FILE_HDR + 65536,
        .log2_ncells = 6, .cell_size = RINGK_CELL, .max_in = 256
    }, e;
    char why[256];

    ck_assert_int_eq(ringk_dev_export_check(&ok, file, why, sizeof(why)), 0);
    ck_assert_int_eq(ringk_dev_export_check(&ok, ~(uint64_t)0, why, sizeof(why)), 0);
    e = ok;
    e.inbox_off = file - ring; /* the ring ends where the file does */
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), 0);
#define BAD(field, value, what)                                                              \
    do {                                                                                     \
        e       = ok;                                                                        \
        e.field = (value);                                                                   \
        ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), -EINVAL);       \
        ck_assert_msg(strstr(why, what) != NULL, "%s = %llu: %s", #field,                    \
                      (unsigned long long)(value), why);                                     \
    } while (0)
    BAD(log2_ncells, 0, "geometry");
    BAD(log2_ncells, RINGK_RING_LOG2_MAX + 1, "geometry");
    BAD(cell_size, 96, "geometry");
    BAD(cell_size, 32, "geometry");
    BAD(cell_size, RINGK_RING_CELL_MAX * 2, "geometry");
    BAD(max_in, RINGK_MAX_PAYLOAD + 1, "geometry");
    BAD(max_in, 64 * RINGK_CELL, "geometry"); /* a message the ring could never hold */
    /* two of the largest: 32 cells each with the cell header, 33 with the message's */
    BAD(max_in, 32 * RINGK_CELL - RINGK_CELL_HDR_BYTES - sizeof(ringk_msg_t) + 1, "geometry");
    e = ok;
    e.max_in = 32 * RINGK_CELL - RINGK_CELL_HDR_BYTES - sizeof(ringk_msg_t);
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), 0);
    BAD(inbox_off, 0, "not inside");          /* the header page */
    BAD(inbox_off, RINGK_DEV_SLAB_FILE_HDR + 8, "not inside"); /* unaligned */
    BAD(inbox_off, file - ring + RINGK_RING_LINE, "not inside");
    BAD(inbox_off, ~(uint64_t)0 - 63, "not inside");          /* would wrap */
    BAD(ctl_off, 64, "not inside");
    BAD(ctl_off, RINGK_DEV_SLAB_FILE_HDR + 4, "not inside");
    BAD(ctl_off, file, "not inside");
    BAD(ctl_off, ~(uint64_t)0 - 63, "not inside");
#undef BAD
}
END_TEST

/* The order of ringk_dev_lock_t: a kernel's lock, then the process's, then the entries'. */
START_TEST(test_dev_lock_order)
{
    pthread_mutex_t k = PTHREAD_MUTEX_INITIALIZER, p = PTHREAD_MUTEX_INITIALIZER,
                    e = PTHREAD_MUTEX_INITIALIZER;

    ringk_dev_lock(&k, RINGK_DEV_LOCK_KERNEL);
    ringk_dev_lock(&p, RINGK_DEV_LOCK_PROC);
    ringk_dev_lock(&e, RINGK_DEV_LOCK_ENTRIES);
    ck_assert_uint_eq(ringk_dev_locks_held, 7);
    ringk_dev_unlock(&e, RINGK_DEV_LOCK_ENTRIES);
    ringk_dev_unlock(&p, RINGK_DEV_LOCK_PROC);
    ringk_dev_lock(&e, RINGK_DEV_LOCK_ENTRIES); /* skipping one is in order */
    ringk_dev_unlock(&e, RINGK_DEV_LOCK_ENTRIES);
    ringk_dev_unlock(&k, RINGK_DEV_LOCK_KERNEL);
    ck_assert_uint_eq(ringk_dev_locks_held, 0);
}
END_TEST

/* Taking a kernel's lock while holding the process's is out of order: the assertion aborts. */
START_TEST(test_dev_lock_order_broken)
{
    pthread_mutex_t k = PTHREAD_MUTEX_INITIALIZER, p = PTHREAD_MUTEX_INITIALIZER;

    ringk_dev_lock(&p, RINGK_DEV_LOCK_PROC);
    ringk_dev_lock(&k, RINGK_DEV_LOCK_KERNEL);
}
END_TEST

/* A pair of GPUs as ringk_peer_can_access() would describe it. */
static ringk_peer_info_t pair_of(ringk_peer_path_t path, int native_atomics)
{
    ringk_peer_info_t info;

    memset(&info, 0, sizeof(info));
    info.path           = path;
    info.can_access     = (path == RINGK_PEER_PATH_P2P_NVLINK) ||
                          (path == RINGK_PEER_PATH_P2P_PCIE);
    info.native_atomics = native_atomics;
    snprintf(info.link, sizeof(info.link), "%s", info.can_access ? "NV4" : "SYS");
    snprintf(info.reason, sizeof(info.reason), "the policy's reason");
    return info;
}

/* Device kernels of one GPU write another's inboxes only over peer access with native atomics
 * (their claims are compare-and-swaps beside the target GPU's own); each refusal says why. */
START_TEST(test_dev_peer_rule)
{
    const struct {
        ringk_peer_path_t path;
        int               ret, atomics, usable;
        const char       *why;
    } cases[] = {
        {RINGK_PEER_PATH_P2P_NVLINK, 0, 1, 1, "P2P_NVLINK, link NV4, native atomics"},
        {RINGK_PEER_PATH_P2P_PCIE, 0, 1, 1, "P2P_PCIE, link NV4, native atomics"},
        {RINGK_PEER_PATH_P2P_PCIE, 0, 0, 0, "CUDA reports no native atomics across the pair"},
        {RINGK_PEER_PATH_P2P_NVLINK, 0, -1, 0, "could not say whether it has native atomics"},
        {RINGK_PEER_PATH_HOST_STAGED, 0, 1, 0, "its path is HOST_STAGED, not peer access"},
        {RINGK_PEER_PATH_CUDA_IPC, 0, 1, 0, "its path is CUDA_IPC, not peer access"},
        {RINGK_PEER_PATH_P2P_NVLINK, -ENODEV, 1, 0, "the pair's path is not known (-19"},
    };
    char why[RINGK_PEER_REASON_LEN + 160];
    ringk_peer_info_t info;
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        info = pair_of(cases[i].path, cases[i].atomics);
        why[0] = '\0';
        ck_assert_int_eq(ringk_dev_peer_usable(cases[i].ret, &info, why, sizeof(why)),
                         cases[i].usable);
        ck_assert_msg(strstr(why, cases[i].why) != NULL, "case %zu: '%s' lacks '%s'", i, why,
                      cases[i].why);
        if (!cases[i].usable && (cases[i].atomics == 1)) {
            ck_assert_msg(strstr(why, "the policy's reason") != NULL, "case %zu: '%s'", i, why);
        }
    }
}
END_TEST

/* RINGK_DEVICE_PEER: which GPUs a device's setup pairs with. By default only those the
 * process uses (a CUDA context, or ringk device kernels set up there), so that a process on one
 * GPU gives the others no context and its inboxes keep device-scope atomics; 1: every GPU; 0:
 * none. Anything else is the default, said as such. */
START_TEST(test_dev_peer_candidates)
{
    const struct {
        const char *env;
        int         mode, bad;
    } modes[] = {
        {NULL, RINGK_DEV_PEER_USED, 0}, {"", RINGK_DEV_PEER_USED, 0},
        {"auto", RINGK_DEV_PEER_USED, 0}, {"0", RINGK_DEV_PEER_OFF, 0},
        {"1", RINGK_DEV_PEER_ALL, 0}, {"yes", RINGK_DEV_PEER_USED, 1},
        {"01", RINGK_DEV_PEER_USED, 1},
    };
    size_t i;
    int bad, active, set_up;

    for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        ck_assert_int_eq(ringk_dev_peer_mode(modes[i].env, &bad), modes[i].mode);
        ck_assert_int_eq(bad, modes[i].bad);
    }
    for (active = 0; active < 2; active++) {
        for (set_up = 0; set_up < 2; set_up++) {
            ck_assert_int_eq(ringk_dev_peer_candidate(RINGK_DEV_PEER_OFF, active, set_up), 0);
            ck_assert_int_eq(ringk_dev_peer_candidate(RINGK_DEV_PEER_ALL, active, set_up), 1);
            ck_assert_int_eq(ringk_dev_peer_candidate(RINGK_DEV_PEER_USED, active, set_up),
                             active || set_up);
        }
    }
}
END_TEST

/* Peer access from a GPU is turned on only while none of its ringk device kernels has a
 * launch (a call on its context could wait behind a resident one), or where it is on already;
 * a refusal names the GPU, its kernels and what to do. */
START_TEST(test_dev_peer_enable_rule)
{
    char why[256];

    why[0] = '\0';
    ck_assert_int_eq(ringk_dev_peer_enable_ok(0, 0, 0, 1, why, sizeof(why)), 1);
    ck_assert_int_eq(ringk_dev_peer_enable_ok(1, 3, 1, 1, why, sizeof(why)), 1);
    ck_assert_str_eq(why, "");
    ck_assert_int_eq(ringk_dev_peer_enable_ok(0, 2, 0, 3, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "CUDA device 3 has 2 device kernel launches") != NULL, "%s", why);
    ck_assert_msg(strstr(why, "RINGK_DEVICE_PEER=1") != NULL, "%s", why);
    ck_assert_int_eq(ringk_dev_peer_enable_ok(0, 0, 1, 0, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "CUDA device 0 has 1 device kernel launches") != NULL, "%s",
                  why);
}
END_TEST

/* libringk's count of launched CUDA device kernels, which ringk_dev_share.c (compiled in here
 * without the executor) asks: what the test sets. */
static int test_launched;

int ringk_dev_cuda_launched(void)
{
    return test_launched;
}

/* A sender's GPU is given access to another process's device memory once per GPU: the
 * emulated device's map has none to give, an ordinal outside 0..31 is refused before CUDA is
 * asked, a GPU that has access is not asked again, none is given while a device kernel of the
 * process is launched (-EBUSY: cuMemSetAccess could wait for it), and a grant that fails (no
 * CUDA here; with CUDA, no device 31) leaves the map's access as it was. */
START_TEST(test_dev_rmap_grant)
{
    struct ringk_dev_rmap emu, cuda;
    uint8_t mem[64];
    char why[256];

    memset(&emu, 0, sizeof(emu));
    memset(&cuda, 0, sizeof(cuda));
    emu.kind = RINGK_DEV_EXPORT_EMU;
    ck_assert_int_eq(ringk_dev_rmap_grant(&emu, 0, why, sizeof(why)), 0);
    ck_assert_uint_eq(emu.access, 0);
    cuda.kind      = RINGK_DEV_EXPORT_CUDA;
    cuda.mem_dev   = mem;
    cuda.mem_bytes = sizeof(mem);
    ck_assert_int_eq(ringk_dev_rmap_grant(&cuda, -1, why, sizeof(why)), -EINVAL);
    ck_assert_msg(strstr(why, "CUDA device -1") != NULL, "%s", why);
    ck_assert_int_eq(ringk_dev_rmap_grant(&cuda, 32, why, sizeof(why)), -EINVAL);
    cuda.access = 1u << 2;
    ck_assert_int_eq(ringk_dev_rmap_grant(&cuda, 2, why, sizeof(why)), 0);
    test_launched = 1;
    ck_assert_int_eq(ringk_dev_rmap_grant(&cuda, 2, why, sizeof(why)), 0); /* has it already */
    ck_assert_int_eq(ringk_dev_rmap_grant(&cuda, 31, why, sizeof(why)), -EBUSY);
    ck_assert_msg(strstr(why, "device kernels of this process run") != NULL, "%s", why);
    ck_assert_uint_eq(cuda.access, 1u << 2);
    test_launched = 0;
    why[0] = '\0';
    ck_assert_int_ne(ringk_dev_rmap_grant(&cuda, 31, why, sizeof(why)), 0);
    ck_assert_msg(why[0] != '\0', "a refused grant says why");
    ck_assert_uint_eq(cuda.access, 1u << 2);
}
END_TEST

/* A CUDA export names its inbox in the device memory (offsets from 0, inside mem_bytes) and
 * its control block in the file past the header; the size it claims is bounded, and its bus
 * id must end inside the field. */
START_TEST(test_dev_export_check_cuda)
{
    const uint64_t file = RINGK_DEV_SLAB_FILE_HDR + (1u << 20);
    const uint64_t ring = ringk_ring_bytes(64, RINGK_CELL);
    ringk_dev_export_t ok = {
        .kind = RINGK_DEV_EXPORT_CUDA, .pid = 1, .fd = 3, .receiver = 1, .token = 7,
        .inbox_off = 0, .ctl_off = RINGK_DEV_SLAB_FILE_HDR + 65536,
        .log2_ncells = 6, .cell_size = RINGK_CELL, .max_in = 256, .mem_bytes = 2u << 20,
        .busid = "0000:07:00.0"
    }, e;
    char why[256];

    ck_assert_int_eq(ringk_dev_export_check(&ok, file, why, sizeof(why)), 0);
    e = ok;
    e.inbox_off = e.mem_bytes - ring; /* ends where the device memory does */
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), 0);
    e.inbox_off += RINGK_RING_LINE;
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), -EINVAL);
    ck_assert_msg(strstr(why, "device memory") != NULL, "%s", why);
    e = ok;
    e.inbox_off = file; /* inside the file, not inside the device memory it names */
    e.mem_bytes = file;
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), -EINVAL);
    e = ok;
    e.mem_bytes = RINGK_DEV_EXPORT_MEM_MAX + 1;
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), -EINVAL);
    ck_assert_msg(strstr(why, "bus id") != NULL, "%s", why);
    e = ok;
    memset(e.busid, 'f', sizeof(e.busid)); /* no NUL */
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), -EINVAL);
    e.busid[0] = '\0';
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), -EINVAL);
    e = ok;
    e.ctl_off = 64; /* the control block is still past the file's header */
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), -EINVAL);
    e = ok;
    e.inbox_off = 8; /* unaligned */
    ck_assert_int_eq(ringk_dev_export_check(&e, file, why, sizeof(why)), -EINVAL);
}
END_TEST

/* A memfd of 4096 bytes with @a text at its start, standing in for a cuMem descriptor. */
static int memfd_with(const char *text)
{
    int fd = memfd_create("fdsvc-test", MFD_CLOEXEC);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 4096), 0);
    ck_assert_int_eq(pwrite(fd, text, strlen(text) + 1, 0), (ssize_t)strlen(text) + 1);
    return fd;
}

/* The descriptor a service hands out is the same memory: what a process that fetched it
 * writes, the owner reads. A child process fetches it (SCM_RIGHTS between processes), then
 * this one does too; a wrong token or pid finds no service, nor does anyone after the stop. */
START_TEST(test_dev_fdsvc_fetch)
{
    const uint64_t token = 0x1234abcd5678ef01ull;
    ringk_dev_fdsvc_t *svc = NULL;
    uint64_t bytes = 0;
    char why[256], buf[32];
    int fd = memfd_with("owner"), got = -1, status;
    pid_t child;

    ck_assert_int_eq(ringk_dev_fdsvc_start(&svc, fd, token, 4096, why, sizeof(why)), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        uint8_t *p;

        if ((ringk_dev_fdsvc_fetch((uint32_t)getppid(), token, 5000, &got, &bytes, why,
                                   sizeof(why)) != 0) || (bytes != 4096)) {
            _exit(2);
        }
        p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, got, 0);
        if ((p == MAP_FAILED) || (strcmp((char*)p, "owner") != 0)) {
            _exit(3);
        }
        strcpy((char*)p, "written by the child");
        _exit(0);
    }
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0), "child: status 0x%x",
                  status);
    ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
    ck_assert_str_eq(buf, "written by the child");
    ck_assert_int_eq(ringk_dev_fdsvc_fetch((uint32_t)getpid(), token, 5000, &got, &bytes, why,
                                           sizeof(why)), 0);
    ck_assert_int_ne(got, fd);
    ck_assert_int_eq(fcntl(got, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    ck_assert_int_eq(pread(got, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
    ck_assert_str_eq(buf, "written by the child");
    close(got);
    ck_assert_int_eq(ringk_dev_fdsvc_fetch((uint32_t)getpid(), token ^ 1, 1000, &got, &bytes,
                                           why, sizeof(why)), -ESRCH);
    ck_assert_int_eq(ringk_dev_fdsvc_fetch((uint32_t)getpid() + 1, token, 1000, &got, &bytes,
                                           why, sizeof(why)), -ESRCH);
    ck_assert_uint_eq(ringk_dev_fdsvc_stop(svc), 2);
    ck_assert_int_eq(ringk_dev_fdsvc_fetch((uint32_t)getpid(), token, 1000, &got, &bytes, why,
                                           sizeof(why)), -ESRCH);
    ck_assert_msg(strstr(why, "no descriptor service") != NULL, "%s", why);
    close(fd);
}
END_TEST

/* A process that listens under another's name is not taken for it: the asker checks whose the
 * socket is. */
START_TEST(test_dev_fdsvc_impostor)
{
    const uint64_t token = 0x42ull;
    const uint32_t other = 1; /* init: never this test */
    struct sockaddr_un sa;
    uint64_t bytes;
    char why[256];
    int s, got = -1, n;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "ringk-devmem-%u-%016llx", other,
                 (unsigned long long)token);
    s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(bind(s, (struct sockaddr*)&sa,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)), 0);
    ck_assert_int_eq(listen(s, 4), 0);
    ck_assert_int_eq(ringk_dev_fdsvc_fetch(other, token, 1000, &got, &bytes, why, sizeof(why)),
                     -EPERM);
    ck_assert_msg(strstr(why, "not process 1 of this user") != NULL, "%s", why);
    ck_assert_int_eq(got, -1);
    close(s);
}
END_TEST

/* A process of another user gets nothing: it refuses the answer of a service not of its user,
 * and the service refuses it (run as root only: the child becomes nobody). */
START_TEST(test_dev_fdsvc_other_user)
{
    const uint64_t token = 0x77ull;
    ringk_dev_fdsvc_t *svc = NULL;
    char why[256];
    int fd = memfd_with("secret"), status;
    pid_t child;

    if (geteuid() != 0) {
        close(fd);
        return; /* needs root to become another user */
    }
    ck_assert_int_eq(ringk_dev_fdsvc_start(&svc, fd, token, 4096, why, sizeof(why)), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        uint64_t bytes;
        int got = -1;

        if ((setgid(65534) != 0) || (setuid(65534) != 0)) {
            _exit(2);
        }
        _exit((ringk_dev_fdsvc_fetch((uint32_t)getppid(), token, 2000, &got, &bytes, why,
                                     sizeof(why)) == -EPERM) && (got == -1) ? 0 : 3);
    }
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0), "child: status 0x%x",
                  status);
    ck_assert_uint_eq(ringk_dev_fdsvc_stop(svc), 0);
    close(fd);
}
END_TEST

/* The loop of a device kernel gives up a claim in its device inbox only where it waits, only
 * one marked by a sender of a process the host said ended (ctl->dead), only with a size inside
 * the claim's bounds and the mark of this lap; it counts what it gave up, and the message
 * claimed after it arrives. */
START_TEST(test_dev_give_up_dead)
{
    static ringk_dev_ctl_t ctl;
    static ringk_dev_kernel_t k;
    const uint64_t bytes = ringk_ring_bytes(16, 64);
    const uint32_t owner = (7u << RINGK_DEV_RANK_SHIFT) | 5u;
    uint64_t cons = 0, pos, head_cache = 0;
    void *mem = aligned_alloc(RINGK_RING_LINE, bytes);
    const ringk_cell_hdr_t *h;

    ck_assert_ptr_nonnull(mem);
    memset(mem, 0, bytes);
    ck_assert_int_eq(ringk_ring_init(&k.inbox, mem, bytes, 16, 64), 0);
    k.ctl      = &ctl;
    k.dev_head = 0;
    ck_assert_int_eq(ringk_ring_mp_claim_open(&k.inbox, 3, &head_cache, NULL, &pos), 1);
    ringk_ring_mark_claimed(&k.inbox, pos, 3, owner);
    ck_assert_int_eq(ringk_ring_mp_claim_open(&k.inbox, 1, &head_cache, NULL, &pos), 1);
    ringk_ring_publish(&k.inbox, pos, 8, 1, 4, 0);
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 0); /* no process ended */
    ctl.dead[0] = 3;
    ctl.ndead   = 1;
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 0); /* another one did */
    ctl.dead[1] = 7;
    ctl.ndead   = 2;
    ringk_ring_cell(&k.inbox, 0)->ncells = 5; /* past the tail (4) */
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 0);
    ringk_ring_cell(&k.inbox, 0)->ncells = 0;
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 0);
    ringk_ring_cell(&k.inbox, 0)->ncells = 3;
    k.dev_head = 16; /* the same cell a lap later: the mark is not that lap's */
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 0);
    k.dev_head = 0;
    ck_assert_uint_eq(ctl.given_up, 0);
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 1);
    ck_assert_uint_eq(ctl.given_up, 3);
    ck_assert_uint_eq(ctl.given_up_owner, owner);
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 0); /* a cancel cell now */
    h = ringk_ring_peek(&k.inbox, &cons);
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(cons, 3);
    ck_assert_uint_eq(h->id, 4);
    /* a size that would cross the ring's end is not believed either */
    memset(mem, 0, bytes);
    ck_assert_int_eq(ringk_ring_init(&k.inbox, mem, bytes, 16, 64), 0);
    k.inbox.prod->pos = 17;
    k.dev_head        = 14;
    ringk_ring_mark_claimed(&k.inbox, 14, 3, owner);
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 0);
    ringk_ring_cell(&k.inbox, 14)->ncells = 2;
    ck_assert_int_eq(ringk_dev_give_up_dead(&k), 1);
    ck_assert_uint_eq(ctl.given_up, 5);
    free(mem);
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("dev_slab");
    TCase *tc = tcase_create("dev_slab");

    tcase_add_test(tc, test_dev_slab_first_fit);
    tcase_add_test(tc, test_dev_slab_holds);
    tcase_add_test(tc, test_dev_slab_unordered);
    tcase_add_test(tc, test_dev_slab_exported);
    suite_add_tcase(s, tc);
    tc = tcase_create("export");
    tcase_add_test(tc, test_dev_export_check);
    tcase_add_test(tc, test_dev_export_check_cuda);
    tcase_add_test(tc, test_dev_rmap_grant);
    tcase_add_test(tc, test_dev_give_up_dead);
    tcase_add_test(tc, test_dev_fdsvc_fetch);
    tcase_add_test(tc, test_dev_fdsvc_impostor);
    tcase_add_test(tc, test_dev_fdsvc_other_user);
    suite_add_tcase(s, tc);
    tc = tcase_create("peer");
    tcase_add_test(tc, test_dev_peer_rule);
    tcase_add_test(tc, test_dev_peer_candidates);
    tcase_add_test(tc, test_dev_peer_enable_rule);
    suite_add_tcase(s, tc);
    tc = tcase_create("lock_order");
    tcase_add_test(tc, test_dev_lock_order);
#ifndef NDEBUG
    /* the abort must happen in a child: not run in one process (CK_FORK=no, ThreadSanitizer) */
    if ((getenv("CK_FORK") == NULL) || strcmp(getenv("CK_FORK"), "no")) {
        tcase_add_test_raise_signal(tc, test_dev_lock_order_broken, SIGABRT);
    }
#endif
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
