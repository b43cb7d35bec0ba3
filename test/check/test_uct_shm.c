/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the ringk_shm md and the "mapped" device through the public UCT API: allocation of
 * peer-mappable memory, remote keys (good ones mapped once and shared, forged or stale ones
 * refused), rkey_ptr, put/get and every atomic between two processes, bounds and alignment
 * errors, concurrent atomics, and a peer that dies. */
#define _GNU_SOURCE
#include "test_util.h"
#include "test_uct.h"

#include <uct/ringk/base/ringk_rkey.h>
#include <uct/ringk/shm/ringk_shm.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <uct/api/uct.h>
#include <unistd.h>

typedef struct {
    ucs_async_context_t *async;
    uct_worker_h         worker;
    uct_md_h             md;
    uct_iface_h          iface;
    uct_iface_attr_t     attr;
    uint8_t              addr[64];
    uint8_t              dev_addr[64];
    int                  nerr;
} shm_node_t;

static ucs_status_t shm_err_cb(void *arg, uct_ep_h ep, ucs_status_t status)
{
    ((shm_node_t*)arg)->nerr++;
    return UCS_OK;
}

static uct_md_h shm_md_open(void)
{
    uct_md_config_t *config;
    uct_md_h md;

    ck_assert_int_eq(uct_md_config_read(test_ringk_component(), NULL, NULL, &config), UCS_OK);
    ck_assert_int_eq(uct_md_open(test_ringk_component(), UCT_RINGK_SHM_MD_NAME, config, &md),
                     UCS_OK);
    uct_config_release(config);
    return md;
}

static void shm_node_open(shm_node_t *n)
{
    uct_iface_config_t *config;
    uct_iface_params_t params = {
        .field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS,
        .open_mode            = UCT_IFACE_OPEN_MODE_DEVICE,
        .mode.device.tl_name  = "ringk",
        .mode.device.dev_name = UCT_RINGK_SHM_DEV_NAME,
        .err_handler          = shm_err_cb,
        .err_handler_arg      = n,
        .err_handler_flags    = 0
    };

    memset(n, 0, sizeof(*n));
    n->md = shm_md_open();
    ck_assert_int_eq(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &n->async), UCS_OK);
    ck_assert_int_eq(uct_worker_create(n->async, UCS_THREAD_MODE_SINGLE, &n->worker), UCS_OK);
    ck_assert_int_eq(uct_md_iface_config_read(n->md, "ringk", NULL, NULL, &config), UCS_OK);
    ck_assert_int_eq(uct_iface_open(n->md, n->worker, &params, config, &n->iface), UCS_OK);
    uct_config_release(config);
    ck_assert_int_eq(uct_iface_query(n->iface, &n->attr), UCS_OK);
    ck_assert_int_eq(uct_iface_get_address(n->iface, (uct_iface_addr_t*)n->addr), UCS_OK);
    ck_assert_int_eq(uct_iface_get_device_address(n->iface, (uct_device_addr_t*)n->dev_addr),
                     UCS_OK);
}

static void shm_node_close(shm_node_t *n)
{
    uct_iface_close(n->iface);
    uct_worker_destroy(n->worker);
    ucs_async_context_destroy(n->async);
    uct_md_close(n->md);
}

/* uct_mem_alloc of @a length bytes from the md alone. */
static ucs_status_t shm_try_alloc(uct_md_h md, size_t length, uct_allocated_memory_t *mem)
{
    uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    uct_mem_alloc_params_t params = {
        .field_mask = UCT_MEM_ALLOC_PARAM_FIELD_FLAGS | UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE |
                      UCT_MEM_ALLOC_PARAM_FIELD_MDS | UCT_MEM_ALLOC_PARAM_FIELD_NAME,
        .flags      = UCT_MD_MEM_ACCESS_ALL,
        .mem_type   = UCS_MEMORY_TYPE_HOST,
        .mds        = {.mds = &md, .count = 1},
        .name       = "test_uct_shm"
    };

    return uct_mem_alloc(length, &method, 1, &params, mem);
}

static void shm_alloc(uct_md_h md, size_t length, uct_allocated_memory_t *mem)
{
    ck_assert_int_eq(shm_try_alloc(md, length, mem), UCS_OK);
    ck_assert_int_eq(mem->method, UCT_ALLOC_METHOD_MD);
    ck_assert_uint_ge(mem->length, length);
}

/* The process's count of mapped peer allocations, from the plugin (dlsym: tests link UCX, the
 * plugin is preloaded). */
static unsigned maps_count(void)
{
    unsigned (*fn)(void) = (unsigned (*)(void))test_plugin_sym("uct_ringk_shm_maps_count");

    ck_assert_msg(fn != NULL, "uct_ringk_shm_maps_count not found in the plugin");
    return fn();
}

/* ---- md: resources, allocation, keys -------------------------------------------------------- */

/* The component has two mds; ringk_shm allocates (no registration), hands out rkey pointers,
 * and has the "mapped" device of tl ringk with RMA and CPU atomics and no active messages. */
START_TEST(test_uct_shm_md_and_device)
{
    uct_md_resource_desc_t *mds;
    uct_tl_resource_desc_t *res;
    uct_component_attr_t cattr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
    uct_md_attr_t attr;
    shm_node_t n;
    unsigned num;

    ck_assert_int_eq(uct_component_query(test_ringk_component(), &cattr), UCS_OK);
    ck_assert_uint_eq(cattr.md_resource_count, 2);
    mds = calloc(2, sizeof(*mds));
    cattr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    cattr.md_resources = mds;
    ck_assert_int_eq(uct_component_query(test_ringk_component(), &cattr), UCS_OK);
    ck_assert_str_eq(mds[0].md_name, "ringk");
    ck_assert_str_eq(mds[1].md_name, UCT_RINGK_SHM_MD_NAME);
    free(mds);

    shm_node_open(&n);
    ck_assert_int_eq(uct_md_query(n.md, &attr), UCS_OK);
    ck_assert_uint_eq(attr.cap.flags & (UCT_MD_FLAG_ALLOC | UCT_MD_FLAG_RKEY_PTR |
                                        UCT_MD_FLAG_NEED_RKEY | UCT_MD_FLAG_REG),
                      UCT_MD_FLAG_ALLOC | UCT_MD_FLAG_RKEY_PTR | UCT_MD_FLAG_NEED_RKEY);
    ck_assert_uint_eq(attr.cap.alloc_mem_types, UCS_BIT(UCS_MEMORY_TYPE_HOST));
    ck_assert_uint_eq(attr.rkey_packed_size, sizeof(uct_ringk_shm_packed_rkey_t));
    ck_assert_int_eq(uct_md_query_tl_resources(n.md, &res, &num), UCS_OK);
    ck_assert_uint_eq(num, 1);
    ck_assert_str_eq(res[0].tl_name, "ringk");
    ck_assert_str_eq(res[0].dev_name, UCT_RINGK_SHM_DEV_NAME);
    uct_release_tl_resource_list(res);

    ck_assert(n.attr.cap.flags & UCT_IFACE_FLAG_ATOMIC_CPU);
    ck_assert(!(n.attr.cap.flags & UCT_IFACE_FLAG_ATOMIC_DEVICE));
    ck_assert(n.attr.cap.flags & UCT_IFACE_FLAG_PUT_SHORT);
    ck_assert(n.attr.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY);
    ck_assert(!(n.attr.cap.flags & (UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY)));
    ck_assert_uint_eq(n.attr.cap.atomic64.fop_flags & UCS_BIT(UCT_ATOMIC_OP_CSWAP),
                      UCS_BIT(UCT_ATOMIC_OP_CSWAP));
    ck_assert_uint_eq(n.attr.cap.atomic32.op_flags,
                      UCS_BIT(UCT_ATOMIC_OP_ADD) | UCS_BIT(UCT_ATOMIC_OP_AND) |
                      UCS_BIT(UCT_ATOMIC_OP_OR) | UCS_BIT(UCT_ATOMIC_OP_XOR));
    shm_node_close(&n);
}
END_TEST

/* An allocation is a private sealed memfd of the rounded length; its key maps it (once, however
 * many keys), rkey_ptr points into the mapping and only inside it, and the last release
 * unmaps it. */
START_TEST(test_uct_shm_alloc_key_rkey_ptr)
{
    uct_ringk_shm_packed_rkey_t packed;
    uct_allocated_memory_t mem;
    uct_rkey_bundle_t k1, k2;
    char path[64], link[128];
    struct stat st;
    uint64_t base;
    void *p;
    uct_md_h md = shm_md_open();
    unsigned before = maps_count();
    int fd;

    shm_alloc(md, 10000, &mem);
    ck_assert_uint_eq(mem.length % getpagesize(), 0);
    ck_assert_int_eq(uct_md_mkey_pack(md, mem.memh, &packed), UCS_OK);
    ck_assert_uint_eq(packed.hdr.magic, UCT_RINGK_SHM_RKEY_MAGIC);
    ck_assert_uint_eq(packed.hdr.pid, (uint32_t)getpid());
    ck_assert_uint_eq(packed.hdr.address, (uintptr_t)mem.address);
    ck_assert_uint_eq(packed.hdr.length, mem.length);

    /* the memfd: ours, 0600, sealed at its size, close-on-exec */
    snprintf(path, sizeof(path), "/proc/self/fd/%d", packed.fd);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);
    ck_assert_uint_eq(st.st_uid, geteuid());
    ck_assert_int_eq(st.st_size, (off_t)mem.length);
    ck_assert_int_gt(readlink(path, link, sizeof(link)), 0);
    ck_assert_msg(strstr(link, "memfd:ringk-shm-") != NULL, "fd is '%s'", link);
    fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW),
                     F_SEAL_SHRINK | F_SEAL_GROW);
    ck_assert_int_ne(ftruncate(fd, 4096), 0);                 /* cannot shrink */
    close(fd);
    ck_assert_int_ne(fcntl(packed.fd, F_GETFD) & FD_CLOEXEC, 0);

    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &k1), UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &k2), UCS_OK);
    ck_assert_uint_eq(maps_count(), before + 1);             /* one mapping, two keys */
    base = packed.hdr.address;
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &k1, base + 100, &p), UCS_OK);
    memset(mem.address, 0, mem.length);
    *(volatile uint32_t*)p = 0xfeedbeef;                       /* through the peer mapping */
    ck_assert_uint_eq(*(volatile uint32_t*)((char*)mem.address + 100), 0xfeedbeef);
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &k1, base + mem.length - 1, &p),
                     UCS_OK);
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &k1, base + mem.length, &p),
                     UCS_ERR_INVALID_ADDR);
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &k1, base - 1, &p),
                     UCS_ERR_INVALID_ADDR);
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &k1), UCS_OK);
    ck_assert_uint_eq(maps_count(), before + 1);
    /* freed while a key holds the mapping: the key still works (test_md does this) */
    uct_mem_free(&mem);
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &k2, base, &p), UCS_OK);
    *(volatile char*)p = 1;
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &k2), UCS_OK);
    ck_assert_uint_eq(maps_count(), before);
    uct_md_close(md);
}
END_TEST

/* A registered-memory key of the ringk md has no pointer: rkey_ptr refuses it. */
START_TEST(test_uct_shm_rkey_ptr_registered_unsupported)
{
    uct_md_h md = test_ringk_md_open();
    static char buf[4096];
    uint8_t packed[512];
    uct_md_attr_t attr;
    uct_rkey_bundle_t k;
    uct_mem_h memh;
    void *p;

    ck_assert_int_eq(uct_md_query(md, &attr), UCS_OK);
    ck_assert(!(attr.cap.flags & UCT_MD_FLAG_RKEY_PTR));
    ck_assert_uint_le(attr.rkey_packed_size, sizeof(packed));
    ck_assert_int_eq(uct_md_mem_reg(md, buf, sizeof(buf), UCT_MD_MEM_ACCESS_ALL, &memh), UCS_OK);
    ck_assert_int_eq(uct_md_mkey_pack(md, memh, packed), UCS_OK);
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), packed, &k), UCS_OK);
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &k, (uintptr_t)buf, &p),
                     UCS_ERR_UNSUPPORTED);
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &k), UCS_OK);
    ck_assert_int_eq(uct_md_mem_dereg(md, memh), UCS_OK);
    uct_md_close(md);
}
END_TEST

/* Forged keys, each refused with a log line that names what is wrong, nothing mapped. */
typedef struct {
    const char *name;
    int         field;   /* what to change */
    const char *logged;
    ucs_status_t status;
} bad_key_t;

enum { BAD_MAGIC, BAD_LENGTH_SMALL, BAD_WRAP, BAD_SEG_ID, BAD_FD_OTHER, BAD_LENGTH_BIG,
       BAD_PID_DEAD, BAD_UNSEALED, BAD_MODE, BAD_COUNT };

static const bad_key_t bad_keys[BAD_COUNT] = {
    {"magic",        BAD_MAGIC,        "invalid remote key",          UCS_ERR_INVALID_PARAM},
    {"length < 8",   BAD_LENGTH_SMALL, "ringk_shm: invalid remote key", UCS_ERR_INVALID_PARAM},
    {"wraps",        BAD_WRAP,         "ringk_shm: invalid remote key", UCS_ERR_INVALID_PARAM},
    {"other id",     BAD_SEG_ID,       "not the allocation the key names", UCS_ERR_UNREACHABLE},
    {"other file",   BAD_FD_OTHER,     "not the allocation the key names", UCS_ERR_UNREACHABLE},
    {"too long",     BAD_LENGTH_BIG,   "the key says",                UCS_ERR_UNREACHABLE},
    {"dead pid",     BAD_PID_DEAD,     "cannot open the peer allocation", UCS_ERR_UNREACHABLE},
    {"not sealed",   BAD_UNSEALED,     "may shrink",                  UCS_ERR_UNREACHABLE},
    {"mode 0644",    BAD_MODE,         "only our own 0600 memory",    UCS_ERR_UNREACHABLE},
};

START_TEST(test_uct_shm_bad_keys)
{
    const bad_key_t *bad = &bad_keys[_i];
    uct_ringk_shm_packed_rkey_t packed;
    uint8_t buf[512] = {0}; /* as long as any key the component unpacks */
    uct_allocated_memory_t mem;
    uct_rkey_bundle_t k;
    ucs_status_t status;
    char name[64];
    uct_md_h md = shm_md_open();
    unsigned before = maps_count();
    int fd = -1, status_w;
    pid_t pid;

    shm_alloc(md, 8192, &mem);
    ck_assert_int_eq(uct_md_mkey_pack(md, mem.memh, &packed), UCS_OK);
    switch (bad->field) {
    case BAD_MAGIC:        packed.hdr.magic ^= 1; break;
    case BAD_LENGTH_SMALL: packed.hdr.length = 4; break;
    case BAD_WRAP:         packed.hdr.address = UINT64_MAX - 4095; break;
    case BAD_SEG_ID:       packed.seg_id ^= 1; break;
    case BAD_FD_OTHER:
        fd = open("/dev/null", O_RDWR);
        packed.fd = fd;
        break;
    case BAD_LENGTH_BIG:   packed.hdr.length += 4096; break;
    case BAD_PID_DEAD:
        pid = fork();
        if (pid == 0) {
            _exit(0);
        }
        waitpid(pid, &status_w, 0);
        packed.hdr.pid = pid;
        break;
    case BAD_UNSEALED:
    case BAD_MODE:
        /* a memfd with the right name, made by hand: unsealed, or readable by others */
        snprintf(name, sizeof(name), UCT_RINGK_SHM_NAME_FMT, (unsigned long long)packed.seg_id);
        fd = memfd_create(name, MFD_ALLOW_SEALING);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, packed.hdr.length), 0);
        if (bad->field == BAD_MODE) {
            ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
            ck_assert_int_eq(fchmod(fd, 0644), 0);
        } else {
            ck_assert_int_eq(fchmod(fd, 0600), 0);
        }
        packed.fd = fd;
        break;
    }
    memcpy(buf, &packed, sizeof(packed));
    test_capture_errors_begin();
    status = uct_rkey_unpack(test_ringk_component(), buf, &k);
    test_capture_errors_end();
    ck_assert_msg(status == bad->status, "%s: status %s", bad->name, ucs_status_string(status));
    ck_assert_msg(strstr(test_captured, bad->logged) != NULL, "%s: logged '%s'", bad->name,
                  test_captured);
    ck_assert_uint_eq(maps_count(), before);
    if (fd >= 0) {
        close(fd);
    }
    uct_mem_free(&mem);
    uct_md_close(md);
}
END_TEST

/* ---- data path between two processes ---------------------------------------------------- */

#define SHM_LEN (64 * 1024)

typedef struct {
    uint8_t                     addr[64], dev_addr[64];
    uct_ringk_shm_packed_rkey_t key;
} shm_offer_t;

/* The child allocates, offers its key and iface address, and exits when told (or is killed). */
static void shm_child(int wfd, int rfd)
{
    uct_allocated_memory_t mem;
    shm_offer_t offer;
    shm_node_t n;
    char c;

    shm_node_open(&n);
    shm_alloc(n.md, SHM_LEN, &mem);
    memset(mem.address, 0x5a, mem.length);
    memcpy(offer.addr, n.addr, sizeof(offer.addr));
    memcpy(offer.dev_addr, n.dev_addr, sizeof(offer.dev_addr));
    ck_assert_int_eq(uct_md_mkey_pack(n.md, mem.memh, &offer.key), UCS_OK);
    ck_assert_int_eq(write(wfd, &offer, sizeof(offer)), (ssize_t)sizeof(offer));
    if (read(rfd, &c, 1) != 1) {
        _exit(1);
    }
    _exit(0);
}

static pid_t shm_child_start(shm_offer_t *offer, int *tell_fd)
{
    int up[2], down[2];
    pid_t pid;

    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        shm_child(up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    ck_assert_int_eq(read(up[0], offer, sizeof(*offer)), (ssize_t)sizeof(*offer));
    close(up[0]);
    *tell_fd = down[1];
    return pid;
}

/* This process's shm iface connected to a child's, with a key to the child's allocation. */
typedef struct {
    shm_offer_t       offer;
    shm_node_t        n;
    uct_ep_h          ep;
    uct_rkey_bundle_t k;
    pid_t             pid;
    int               tell;   /* writing a byte here tells the child to exit */
} shm_pair_t;

static void shm_pair_open(shm_pair_t *p)
{
    p->pid = shm_child_start(&p->offer, &p->tell);
    shm_node_open(&p->n);
    p->ep = test_uct_connect(p->n.iface, p->offer.addr, p->offer.dev_addr);
    ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &p->offer.key, &p->k), UCS_OK);
}

/* Releases the key and the endpoint, lets the child exit; @return its wait status. */
static int shm_pair_close(shm_pair_t *p)
{
    int status;

    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &p->k), UCS_OK);
    uct_ep_destroy(p->ep);
    ck_assert_int_eq(write(p->tell, "x", 1), 1);
    close(p->tell);
    waitpid(p->pid, &status, 0);
    shm_node_close(&p->n);
    return status;
}

static size_t shm_pack(void *dest, void *arg)
{
    memset(dest, 0x77, 300);
    return 300;
}

/* Packs max_bcopy bytes (the iface's, passed in arg) of 0x66. */
static size_t shm_pack_max(void *dest, void *arg)
{
    size_t length = *(size_t*)arg;

    memset(dest, 0x66, length);
    return length;
}

static void shm_unpack(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

/* Every operation into the child's allocation, read back through get and rkey_ptr; ranges
 * outside it and misaligned atomics refused; the mapping is shared between keys. */
START_TEST(test_uct_shm_two_process_rma_atomics)
{
    uint8_t src[1024], dst[1024];
    uint64_t r64, base, end;
    uint32_t r32;
    uct_iov_t iov;
    shm_pair_t pair;
    uct_rkey_t rkey;
    uct_ep_h ep;
    void *p;
    int status_w;

    shm_pair_open(&pair);
    ep   = pair.ep;
    rkey = pair.k.rkey;
    base = pair.offer.key.hdr.address;
    end  = base + pair.offer.key.hdr.length;   /* SHM_LEN rounded up to a page or a huge page */

    /* the child's initial bytes, by get_bcopy and get_zcopy */
    ck_assert_int_eq(uct_ep_get_bcopy(ep, shm_unpack, dst, 64, base, rkey, NULL), UCS_OK);
    ck_assert_uint_eq(dst[0], 0x5a);
    ck_assert_uint_eq(dst[63], 0x5a);
    for (size_t i = 0; i < sizeof(src); i++) {
        src[i] = (uint8_t)(i * 7);
    }
    /* put_short of every small length (the inline copy's cases), read back by get_zcopy */
    for (unsigned len = 1; len <= 40; len++) {
        ck_assert_int_eq(uct_ep_put_short(ep, src, len, base + 1000, rkey), UCS_OK);
        memset(dst, 0, sizeof(dst));
        iov = (uct_iov_t){.buffer = dst, .length = len + 1, .count = 1};
        ck_assert_int_eq(uct_ep_get_zcopy(ep, &iov, 1, base + 1000, rkey, NULL), UCS_OK);
        ck_assert_int_eq(memcmp(dst, src, len), 0);
        ck_assert_uint_eq(dst[len], 0x5a);   /* no put so far reached past byte len - 1 */
    }
    /* put_zcopy, two iovecs, at the very end of the allocation */
    {
        uct_iov_t two[2] = {{.buffer = src, .length = 100, .count = 1},
                            {.buffer = src + 500, .length = 28, .count = 1}};
        ck_assert_int_eq(uct_ep_put_zcopy(ep, two, 2, end - 128, rkey, NULL), UCS_OK);
        ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &pair.k, end - 128, &p),
                         UCS_OK);
        ck_assert_int_eq(memcmp(p, src, 100), 0);
        ck_assert_int_eq(memcmp((char*)p + 100, src + 500, 28), 0);
    }
    /* put_bcopy packs in place anywhere in the allocation, up to its last byte */
    ck_assert_int_eq(uct_ep_put_bcopy(ep, shm_pack, NULL, base + 2048, rkey), 300);
    ck_assert_int_eq(uct_ep_put_bcopy(ep, shm_pack, NULL, end - 300, rkey), 300);
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &pair.k, end - 300, &p),
                     UCS_OK);
    ck_assert_uint_eq(((uint8_t*)p)[0], 0x77);
    ck_assert_uint_eq(((uint8_t*)p)[299], 0x77);
    /* Past the end: what the callback packs beyond the allocation goes to the scratch after
     * the mapping, and the put is refused. A whole max_bcopy from the last bytes, or from the
     * end itself, fits there; a put that starts past the end, or with no key, packs into the
     * iface's sink and is refused, unless it is empty (UCX's gtest puts 0 bytes with no key). */
    test_capture_errors_begin();
    ck_assert_int_lt(uct_ep_put_bcopy(ep, shm_pack, NULL, end - 200, rkey), 0);
    test_capture_errors_end();
    ck_assert_msg(strstr(test_captured, "put_bcopy of 300 bytes") != NULL, "logged '%s'",
                  test_captured);
    {
        size_t max = pair.n.attr.cap.put.max_bcopy;

        ck_assert_uint_ge(max, 16 * 1024);
        test_capture_errors_begin();
        ck_assert_int_lt(uct_ep_put_bcopy(ep, shm_pack_max, &max, end - 8, rkey), 0);
        ck_assert_int_lt(uct_ep_put_bcopy(ep, shm_pack_max, &max, end, rkey), 0);
        ck_assert_int_lt(uct_ep_put_bcopy(ep, shm_pack_max, &max, end + 64, rkey), 0);
        ck_assert_int_lt(uct_ep_put_bcopy(ep, shm_pack_max, &max, 0, UCT_INVALID_RKEY), 0);
        test_capture_errors_end();
        ck_assert_msg(strstr(test_captured, "is outside the remote key (no key") != NULL,
                      "logged '%s'", test_captured);
        max = 0;
        ck_assert_int_eq(uct_ep_put_bcopy(ep, shm_pack_max, &max, 0, UCT_INVALID_RKEY), 0);
        ck_assert_int_eq(uct_ep_put_bcopy(ep, shm_pack_max, &max, end + 64, rkey), 0);
        ck_assert_uint_eq(*(volatile uint8_t*)((char*)p + 292), 0x66); /* end - 8 on */
        ck_assert_uint_eq(*(volatile uint8_t*)((char*)p + 291), 0x77);
    }

    /* atomics, 64 and 32 bit */
    ck_assert_int_eq(uct_ep_put_short(ep, &(uint64_t){10}, 8, base + 4096, rkey), UCS_OK);
    ck_assert_int_eq(uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_ADD, 5, base + 4096, rkey), UCS_OK);
    ck_assert_int_eq(uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 1, &r64, base + 4096, rkey,
                                           NULL), UCS_OK);
    ck_assert_uint_eq(r64, 15);
    ck_assert_int_eq(uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_AND, 0xc, &r64, base + 4096, rkey,
                                           NULL), UCS_OK);
    ck_assert_uint_eq(r64, 16);                               /* now 16 & 0xc = 0 */
    ck_assert_int_eq(uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_OR, 0x30, base + 4096, rkey), UCS_OK);
    ck_assert_int_eq(uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_XOR, 0x11, base + 4096, rkey),
                     UCS_OK);
    ck_assert_int_eq(uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_SWAP, 99, &r64, base + 4096, rkey,
                                           NULL), UCS_OK);
    ck_assert_uint_eq(r64, 0x21);
    ck_assert_int_eq(uct_ep_atomic_cswap64(ep, 98, 7, base + 4096, rkey, &r64, NULL), UCS_OK);
    ck_assert_uint_eq(r64, 99);                               /* no swap */
    ck_assert_int_eq(uct_ep_atomic_cswap64(ep, 99, 7, base + 4096, rkey, &r64, NULL), UCS_OK);
    ck_assert_uint_eq(r64, 99);
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &pair.k, base + 4096, &p), UCS_OK);
    ck_assert_uint_eq(*(volatile uint64_t*)p, 7);
    ck_assert_int_eq(uct_ep_put_short(ep, &(uint32_t){0}, 4, base + 4104, rkey), UCS_OK);
    ck_assert_int_eq(uct_ep_atomic32_post(ep, UCT_ATOMIC_OP_ADD, 3, base + 4104, rkey), UCS_OK);
    ck_assert_int_eq(uct_ep_atomic32_fetch(ep, UCT_ATOMIC_OP_XOR, 1, &r32, base + 4104, rkey,
                                           NULL), UCS_OK);
    ck_assert_uint_eq(r32, 3);
    ck_assert_int_eq(uct_ep_atomic_cswap32(ep, 2, 40, base + 4104, rkey, &r32, NULL), UCS_OK);
    ck_assert_uint_eq(r32, 2);
    ck_assert_int_eq(uct_ep_atomic32_fetch(ep, UCT_ATOMIC_OP_OR, 1, &r32, base + 4104, rkey,
                                           NULL), UCS_OK);
    ck_assert_uint_eq(r32, 40);
    ck_assert_int_eq(uct_ep_atomic32_fetch(ep, UCT_ATOMIC_OP_AND, 0xf, &r32, base + 4104, rkey,
                                           NULL), UCS_OK);
    ck_assert_uint_eq(r32, 41);
    ck_assert_int_eq(uct_ep_atomic32_fetch(ep, UCT_ATOMIC_OP_SWAP, 5, &r32, base + 4104, rkey,
                                           NULL), UCS_OK);
    ck_assert_uint_eq(r32, 9);
    ck_assert_uint_eq(*(volatile uint64_t*)p, 7);             /* the 64-bit word untouched */

    /* refused: outside the allocation, misaligned atomics, swap as a post */
    test_capture_errors_begin();
    ck_assert_int_eq(uct_ep_put_short(ep, src, 16, end - 8, rkey),
                     UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(uct_ep_put_short(ep, src, 8, base - 8, rkey), UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(uct_ep_get_bcopy(ep, shm_unpack, dst, 16, UINT64_MAX - 7, rkey, NULL),
                     UCS_ERR_INVALID_PARAM);
    iov = (uct_iov_t){.buffer = dst, .length = 16, .count = 1};
    ck_assert_int_eq(uct_ep_get_zcopy(ep, &iov, 1, end, rkey, NULL),
                     UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_ADD, 1, base + 4, rkey),
                     UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(uct_ep_atomic32_fetch(ep, UCT_ATOMIC_OP_ADD, 1, &r32, base + 2, rkey, NULL),
                     UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 1, &r64, end, rkey,
                                           NULL), UCS_ERR_INVALID_PARAM);
    ck_assert_int_eq(uct_ep_put_short(ep, src, 8, base, UCT_INVALID_RKEY),
                     UCS_ERR_INVALID_PARAM);
    test_capture_errors_end();
    ck_assert_msg(strstr(test_captured, "is outside the remote key") != NULL, "logged '%s'",
                  test_captured);
    ck_assert_msg(strstr(test_captured, "is not 8-byte aligned") != NULL, "logged '%s'",
                  test_captured);
    ck_assert_int_eq(uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_SWAP, 1, base + 4096, rkey),
                     UCS_ERR_UNSUPPORTED);
    ck_assert_int_eq(uct_ep_flush(ep, 0, NULL), UCS_OK);
    ck_assert_int_eq(uct_ep_fence(ep, 0), UCS_OK);
    ck_assert_int_eq(uct_ep_pending_add(ep, NULL, 0), UCS_ERR_BUSY);

    status_w = shm_pair_close(&pair);
    ck_assert(WIFEXITED(status_w) && (WEXITSTATUS(status_w) == 0));
}
END_TEST

/* The owner is killed: its memory stays mapped (puts and atomics still land, no fault), ep_check
 * reports the peer gone once, and a new key to that process cannot be opened. */
START_TEST(test_uct_shm_peer_killed)
{
    shm_pair_t pair;
    uct_rkey_bundle_t k2;
    uint64_t r64;
    ucs_status_t status;
    int status_w;

    shm_pair_open(&pair);
    kill(pair.pid, SIGKILL);
    waitpid(pair.pid, &status_w, 0);
    close(pair.tell);

    ck_assert_int_eq(uct_ep_put_short(pair.ep, &(uint64_t){1}, 8, pair.offer.key.hdr.address,
                                      pair.k.rkey), UCS_OK);
    ck_assert_int_eq(uct_ep_atomic64_fetch(pair.ep, UCT_ATOMIC_OP_ADD, 1, &r64,
                                           pair.offer.key.hdr.address, pair.k.rkey, NULL), UCS_OK);
    ck_assert_uint_eq(r64, 1);
    ck_assert_int_eq(uct_ep_check(pair.ep, 0, NULL), UCS_OK);
    ck_assert_int_eq(uct_ep_check(pair.ep, 0, NULL), UCS_OK);
    for (int i = 0; (i < 100) && (pair.n.nerr == 0); i++) {
        uct_worker_progress(pair.n.worker);
    }
    ck_assert_int_eq(pair.n.nerr, 1);
    test_capture_errors_begin();
    status = uct_rkey_unpack(test_ringk_component(), &pair.offer.key, &k2);
    test_capture_errors_end();
    /* the mapping this process holds is shared, so a key it already has still opens */
    ck_assert_int_eq(status, UCS_OK);
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &k2), UCS_OK);
    ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &pair.k), UCS_OK);
    test_capture_errors_begin();
    status = uct_rkey_unpack(test_ringk_component(), &pair.offer.key, &k2);
    test_capture_errors_end();
    ck_assert_int_eq(status, UCS_ERR_UNREACHABLE);            /* nothing left to open */
    uct_ep_destroy(pair.ep);
    shm_node_close(&pair.n);
}
END_TEST

/* Four threads add to one word and fetch-add to another through one key: every add counted. */
#define ADD_THREADS 4
#define ADD_ITERS   100000

typedef struct {
    uct_ep_h   ep;
    uct_rkey_t rkey;
    uint64_t   addr;
    uint64_t   seen_max;
} add_arg_t;

static void *add_thread(void *arg)
{
    add_arg_t *a = arg;
    uint64_t r;

    for (int i = 0; i < ADD_ITERS; i++) {
        ck_assert_int_eq(uct_ep_atomic64_post(a->ep, UCT_ATOMIC_OP_ADD, 1, a->addr, a->rkey),
                         UCS_OK);
        ck_assert_int_eq(uct_ep_atomic32_fetch(a->ep, UCT_ATOMIC_OP_ADD, 2, (uint32_t*)&r,
                                               a->addr + 8, a->rkey, NULL), UCS_OK);
    }
    return NULL;
}

START_TEST(test_uct_shm_concurrent_atomics)
{
    pthread_t th[ADD_THREADS];
    add_arg_t args[ADD_THREADS];
    shm_pair_t pair;
    void *p;

    shm_pair_open(&pair);
    ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &pair.k, pair.offer.key.hdr.address, &p),
                     UCS_OK);
    memset(p, 0, 16);
    for (int i = 0; i < ADD_THREADS; i++) {
        args[i] = (add_arg_t){.ep = pair.ep, .rkey = pair.k.rkey,
                              .addr = pair.offer.key.hdr.address};
        ck_assert_int_eq(pthread_create(&th[i], NULL, add_thread, &args[i]), 0);
    }
    for (int i = 0; i < ADD_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    ck_assert_uint_eq(*(volatile uint64_t*)p, (uint64_t)ADD_THREADS * ADD_ITERS);
    ck_assert_uint_eq(*(volatile uint32_t*)((char*)p + 8), 2u * ADD_THREADS * ADD_ITERS);
    shm_pair_close(&pair);
}
END_TEST

/* "HugePages_Total" or "Hugepagesize" (kB) of /proc/meminfo; -1 when absent. */
static long meminfo_value(const char *key)
{
    char line[256];
    long value = -1;
    FILE *f    = fopen("/proc/meminfo", "r");

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        if ((strncmp(line, key, strlen(key)) == 0) && (line[strlen(key)] == ':')) {
            value = strtol(line + strlen(key) + 1, NULL, 10);
        }
    }
    fclose(f);
    return value;
}

/* Allocates 10000 bytes with UCX_RINGK_HUGETLB_MODE=mode; @return the status, and *huge
 * whether the memfd is on hugetlbfs. The memory is written and read back through a key. */
static ucs_status_t shm_alloc_mode(const char *mode, size_t *length, int *huge)
{
    uct_ringk_shm_packed_rkey_t packed;
    uct_allocated_memory_t mem;
    uct_rkey_bundle_t k;
    struct statfs sfs;
    ucs_status_t status;
    uct_md_h md;
    void *p;

    setenv("UCX_RINGK_HUGETLB_MODE", mode, 1);
    md = shm_md_open();
    unsetenv("UCX_RINGK_HUGETLB_MODE");
    status = shm_try_alloc(md, 10000, &mem);
    if (status == UCS_OK) {
        ck_assert_int_eq(uct_md_mkey_pack(md, mem.memh, &packed), UCS_OK);
        ck_assert_int_eq(fstatfs(packed.fd, &sfs), 0);
        *huge   = (sfs.f_type == HUGETLBFS_MAGIC);
        *length = mem.length;
        ck_assert_uint_eq(packed.hdr.length, mem.length);
        ck_assert_int_eq(uct_rkey_unpack(test_ringk_component(), &packed, &k), UCS_OK);
        ck_assert_int_eq(uct_rkey_ptr(test_ringk_component(), &k, packed.hdr.address +
                                      mem.length - 8, &p), UCS_OK);
        *(volatile uint64_t*)p = 0x1234;
        ck_assert_uint_eq(*(volatile uint64_t*)((char*)mem.address + mem.length - 8), 0x1234);
        ck_assert_int_eq(uct_rkey_release(test_ringk_component(), &k), UCS_OK);
        uct_mem_free(&mem);
    }
    uct_md_close(md);
    return status;
}

/* UCX_RINGK_HUGETLB_MODE: n never takes huge pages; try takes one when the system has a free
 * huge page and else falls back to pages; y takes one or fails with an error naming the mode.
 * On a machine without huge pages (vm.nr_hugepages=0) the outcome of try and y is fixed. With
 * huge pages, other processes may take or free them between any reading of /proc/meminfo and
 * the allocation, so there each outcome is checked for what it says of itself: a huge
 * allocation is one huge page long, a fallback is page-rounded, a refusal names the mode. */
START_TEST(test_uct_shm_hugetlb_modes)
{
    long total_huge = meminfo_value("HugePages_Total");
    long huge_kb    = meminfo_value("Hugepagesize");
    size_t page     = (size_t)getpagesize(), length = 0;
    size_t in_pages = (10000 + page - 1) / page * page;
    int huge        = -1;
    ucs_status_t status;

    fprintf(stderr, "# test_uct_shm_hugetlb_modes: %ld huge pages of %ld kB\n", total_huge,
            huge_kb);
    ck_assert_int_eq(shm_alloc_mode("n", &length, &huge), UCS_OK);
    ck_assert_int_eq(huge, 0);
    ck_assert_uint_eq(length, in_pages);

    ck_assert_int_eq(shm_alloc_mode("try", &length, &huge), UCS_OK);
    ck_assert(!huge || (total_huge > 0));
    ck_assert_uint_eq(length, huge ? (size_t)huge_kb * 1024 : in_pages);

    test_capture_errors_begin();
    status = shm_alloc_mode("y", &length, &huge);
    test_capture_errors_end();
    if (status == UCS_OK) {
        ck_assert_int_gt(total_huge, 0);
        ck_assert_int_eq(huge, 1);
        ck_assert_uint_eq(length, (size_t)huge_kb * 1024);
    } else {
        ck_assert_msg(strstr(test_captured, "UCX_RINGK_HUGETLB_MODE=y") != NULL, "logged '%s'",
                      test_captured);
    }
}
END_TEST

void test_uct_shm_tcases(Suite *s)
{
    TCase *tc = tcase_create("shm");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_uct_shm_md_and_device);
    tcase_add_test(tc, test_uct_shm_alloc_key_rkey_ptr);
    tcase_add_test(tc, test_uct_shm_rkey_ptr_registered_unsupported);
    tcase_add_loop_test(tc, test_uct_shm_bad_keys, 0, BAD_COUNT);
    tcase_add_test(tc, test_uct_shm_two_process_rma_atomics);
    tcase_add_test(tc, test_uct_shm_peer_killed);
    tcase_add_test(tc, test_uct_shm_concurrent_atomics);
    tcase_add_test(tc, test_uct_shm_hugetlb_modes);
    suite_add_tcase(s, tc);
}
