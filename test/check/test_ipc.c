/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory shared between processes by handle (ringk_ipc.h), without a GPU: handles of shared host
 * memory (memfds, which stand in for cuMem POSIX descriptors), the import cache (reuse, its
 * bound, revocation, a dead exporter), the three channels between two processes (a socket that
 * carries descriptors, a shared-memory mailbox, a named pipe), the peer's credentials, and
 * malformed messages from a hand-written peer. */
#define _GNU_SOURCE
#include "test_log.h"
#include "test_util.h"

#include <ringk/api/ringk.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char logbuf[16384];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_hook(void *arg, int level, const char *message)
{
    (void)arg;
    (void)level;
    test_log_append(logbuf, sizeof(logbuf), &log_mu, message);
}

static char dir[64];

static void setup(void)
{
    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_log_hook_set(log_hook, NULL), 0);
    snprintf(dir, sizeof(dir), "/tmp/ringk-test-ipc.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[96];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* A memfd of @a len bytes of this user, mode 0600, sealed against shrinking, filled with
 * @a fill. */
static int memfd_new(size_t len, int fill)
{
    int fd = memfd_create("ringk-test-ipc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    void *p;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fchmod(fd, 0600), 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    memset(p, fill, len);
    munmap(p, len);
    return fd;
}

static ringk_ipc_channel_params_t chan_params(ringk_ipc_channel_kind_t kind,
                                              ringk_ipc_channel_role_t role, const char *path)
{
    ringk_ipc_channel_params_t p = {
        .field_mask = RINGK_IPC_CHANNEL_PARAM_FIELD_KIND | RINGK_IPC_CHANNEL_PARAM_FIELD_ROLE |
                      RINGK_IPC_CHANNEL_PARAM_FIELD_PATH | RINGK_IPC_CHANNEL_PARAM_FIELD_TIMEOUT,
        .kind = kind, .role = role, .path = path, .timeout_ms = 10000
    };

    return p;
}

/* The channel's path in the test's directory (a socket, a FIFO), or its /dev/shm name. */
static const char *chan_path(ringk_ipc_channel_kind_t kind, char *buf, size_t len)
{
    if (kind == RINGK_IPC_CHANNEL_SHM) {
        snprintf(buf, len, "ringk-test-ipc-%d", (int)getpid());
    } else {
        snprintf(buf, len, "%s/chan", dir);
    }
    return buf;
}

static int child_exit(pid_t pid)
{
    int st;

    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- handles and the cache, in one process -------------------------------------------------- */

/* A handle of a memfd: a duplicate descriptor, its fields; refused for memory others may open,
 * for what is not a regular file, and for a size beyond the file. */
START_TEST(test_ipc_handle_from_fd)
{
    ringk_ipc_handle_t h;
    int fd = memfd_new(4096, 1), pfd[2];

    ck_assert_int_eq(ringk_ipc_handle_from_fd(fd, 4096, 100, &h), 0);
    ck_assert_int_eq(h.type, RINGK_IPC_TYPE_POSIX_FD);
    ck_assert_int_ne(h.fd, fd);
    ck_assert_int_ge(h.fd, 0);
    ck_assert_uint_eq(h.size, 4096);
    ck_assert_uint_eq(h.offset, 100);
    ck_assert_int_eq(h.pid, getpid());
    ck_assert_uint_ne(h.id, 0);
    ck_assert_str_eq(h.device, "");
    {
        /* the same file again: the same allocation, the same id; another file, another */
        ringk_ipc_handle_t again, other;
        int fd2 = memfd_new(4096, 1);

        ck_assert_int_eq(ringk_ipc_handle_from_fd(fd, 4096, 0, &again), 0);
        ck_assert_int_eq(ringk_ipc_handle_from_fd(fd2, 4096, 0, &other), 0);
        ck_assert_uint_eq(again.id, h.id);
        ck_assert_uint_ne(other.id, h.id);
        ringk_ipc_handle_release(&again);
        ringk_ipc_handle_release(&other);
        close(fd2);
    }
    ck_assert_int_eq(ringk_ipc_handle_release(&h), 0);
    ck_assert_int_eq(h.fd, -1);
    ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC); /* the caller's own is left open */
    ck_assert_int_eq(ringk_ipc_handle_from_fd(fd, 8192, 0, &h), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "holds 4096 bytes, fewer than the size 8192"));
    ck_assert_int_eq(fchmod(fd, 0644), 0);
    ck_assert_int_eq(ringk_ipc_handle_from_fd(fd, 4096, 0, &h), -EPERM);
    ck_assert_ptr_nonnull(strstr(logbuf, "with mode 0644"));
    ck_assert_int_eq(fchmod(fd, 0600), 0);
    {
        /* a memfd its owner could still shrink under the importer's mapping */
        int open_fd = memfd_create("ringk-test-ipc", MFD_CLOEXEC);

        ck_assert_int_eq(fchmod(open_fd, 0600), 0);
        ck_assert_int_eq(ftruncate(open_fd, 4096), 0);
        ck_assert_int_eq(ringk_ipc_handle_from_fd(open_fd, 4096, 0, &h), -EPERM);
        ck_assert_ptr_nonnull(strstr(logbuf, "is not sealed against shrinking"));
        close(open_fd);
    }
    ck_assert_int_eq(pipe(pfd), 0);
    ck_assert_int_eq(ringk_ipc_handle_from_fd(pfd[0], 4096, 0, &h), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "not a regular file"));
    close(pfd[0]);
    close(pfd[1]);
    close(fd);
}
END_TEST

/* No GPU here (or no CUDA in the build): exporting is refused as such (on a GPU machine, host
 * memory is not device memory). */
START_TEST(test_ipc_export_host)
{
    ringk_ipc_handle_t h;
    char buf[64] = "";
    int ret = ringk_ipc_export(buf, RINGK_IPC_TYPES_ANY, &h);

    ck_assert_msg((ret == -ENODEV) || (ret == -EINVAL), "ringk_ipc_export: %d", ret);
    /* -ENODEV: "built without CUDA" or "CUDA is not usable in this process" */
    ck_assert_ptr_nonnull(strstr(logbuf, (ret == -ENODEV) ? "CUDA" : "not device memory"));
}
END_TEST

/* A second import of one allocation reuses the mapping (one mapping, two references); writes
 * through it land in the file; a revoked allocation is unmapped at its last close and refused
 * afterwards. */
START_TEST(test_ipc_import_cache)
{
    ringk_ipc_cache_stats_t s0, s;
    ringk_ipc_handle_t h;
    int fd = memfd_new(8192, 7);
    uint8_t *a, *b, *check;

    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s0), 0);
    ck_assert_int_eq(ringk_ipc_handle_from_fd(fd, 8192, 16, &h), 0);
    ck_assert_int_eq(ringk_ipc_import(&h, (void**)&a), 0);
    ck_assert_int_eq(ringk_ipc_import(&h, (void**)&b), 0);
    ck_assert_ptr_eq(a, b);
    ck_assert_uint_eq(a[0], 7);
    a[0] = 42;
    check = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(check, MAP_FAILED);
    ck_assert_uint_eq(check[16], 42); /* the exported address is the handle's offset */
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.misses - s0.misses, 1);
    ck_assert_uint_eq(s.hits - s0.hits, 1);
    ck_assert_uint_eq(s.entries, s0.entries + 1);
    ck_assert_uint_eq(s.in_use, s0.in_use + 1);
    ck_assert_uint_eq(s.limit, 256);
    /* revoked while in use: still usable by those who hold it, refused to new imports */
    ck_assert_int_eq(ringk_ipc_invalidate(getpid(), h.id), 1);
    ck_assert_int_eq(ringk_ipc_import(&h, (void**)&b), -ESTALE);
    ck_assert_ptr_nonnull(strstr(logbuf, "revoked allocation"));
    a[1] = 43;
    ck_assert_int_eq(ringk_ipc_close(a), 0);
    ck_assert_int_eq(ringk_ipc_close(a + 100), 0); /* any address inside it */
    ck_assert_int_eq(ringk_ipc_close(a), -ENOENT); /* unmapped at the last close */
    ck_assert_uint_eq(check[17], 43);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.invalidations - s0.invalidations, 1);
    ck_assert_uint_eq(s.entries, s0.entries);
    munmap(check, 8192);
    ringk_ipc_handle_release(&h);
    close(fd);
}
END_TEST

/* The cache holds at most its limit of mappings: beyond it an unused one is unmapped (least
 * recently used first); when all are in use an import is refused with the limit named. */
START_TEST(test_ipc_cache_bound)
{
    ringk_ipc_cache_stats_t s0, s;
    ringk_ipc_handle_t h[3];
    void *p[3], *q;
    int fd[3], i;

    ck_assert_int_eq(ringk_ipc_cache_limit_set(2), 0);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s0), 0);
    for (i = 0; i < 3; i++) {
        fd[i] = memfd_new(4096, i);
        ck_assert_int_eq(ringk_ipc_handle_from_fd(fd[i], 4096, 0, &h[i]), 0);
    }
    ck_assert_int_eq(ringk_ipc_import(&h[0], &p[0]), 0);
    ck_assert_int_eq(ringk_ipc_import(&h[1], &p[1]), 0);
    ck_assert_int_eq(ringk_ipc_import(&h[2], &p[2]), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(logbuf, "holds its limit of 2 entries, all in use"));
    ck_assert_int_eq(ringk_ipc_close(p[0]), 0); /* cached, unused */
    ck_assert_int_eq(ringk_ipc_import(&h[2], &p[2]), 0); /* evicts it */
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.evictions - s0.evictions, 1);
    ck_assert_uint_eq(s.entries, 2);
    ck_assert_uint_eq(*(uint8_t*)p[2], 2);
    /* h[0] maps again (a miss): h[1], the least recently used unused one, goes */
    ck_assert_int_eq(ringk_ipc_close(p[1]), 0);
    ck_assert_int_eq(ringk_ipc_close(p[2]), 0);
    ck_assert_int_eq(ringk_ipc_import(&h[2], &q), 0); /* a hit: h[2] is now the most recent */
    ck_assert_int_eq(ringk_ipc_close(q), 0);
    ck_assert_int_eq(ringk_ipc_import(&h[0], &p[0]), 0);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.evictions - s0.evictions, 2);
    ck_assert_uint_eq(s.misses - s0.misses, 4);
    ck_assert_uint_eq(s.hits - s0.hits, 1);
    ck_assert_int_eq(ringk_ipc_import(&h[2], &q), 0); /* still cached */
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.hits - s0.hits, 2);
    ck_assert_int_eq(ringk_ipc_close(q), 0);
    ck_assert_int_eq(ringk_ipc_close(p[0]), 0);
    ck_assert_int_eq(ringk_ipc_cache_limit_set(1), 0); /* shrinking unmaps unused ones now */
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.entries, 1);
    ck_assert_int_eq(ringk_ipc_cache_limit_set(65537), -EINVAL);
    ck_assert_int_eq(ringk_ipc_cache_limit_set(256), 0); /* for the tests after (CK_FORK=no) */
    for (i = 0; i < 3; i++) {
        ringk_ipc_handle_release(&h[i]);
        close(fd[i]);
    }
}
END_TEST

/* Threads importing and closing one allocation at once share one mapping: it is mapped once,
 * every other import is a hit, and every reference is given back. */
static ringk_ipc_handle_t race_h;
static void *race_base;

static void *race_thread(void *arg)
{
    void *p;
    int i;

    (void)arg;
    for (i = 0; i < 2000; i++) {
        if ((ringk_ipc_import(&race_h, &p) != 0) || (p != race_base) || (ringk_ipc_close(p) != 0)) {
            return (void*)1;
        }
    }
    return NULL;
}

START_TEST(test_ipc_cache_threads)
{
    ringk_ipc_cache_stats_t s0, s;
    pthread_t t[4];
    void *held, *ret;
    int fd = memfd_new(4096, 3), i;

    ck_assert_int_eq(ringk_ipc_handle_from_fd(fd, 4096, 0, &race_h), 0);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s0), 0);
    ck_assert_int_eq(ringk_ipc_import(&race_h, &held), 0); /* kept mapped throughout */
    race_base = held;
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_create(&t[i], NULL, race_thread, NULL), 0);
    }
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(t[i], &ret), 0);
        ck_assert_ptr_null(ret);
    }
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.misses - s0.misses, 1);
    ck_assert_uint_eq(s.hits - s0.hits, 4 * 2000);
    ck_assert_uint_eq(s.in_use, s0.in_use + 1);
    ck_assert_int_eq(ringk_ipc_close(held), 0);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.in_use, s0.in_use);
    ringk_ipc_invalidate(getpid(), race_h.id); /* unmapped: nothing holds it */
    ringk_ipc_handle_release(&race_h);
    close(fd);
}
END_TEST

/* Every field of a handle from elsewhere is checked before it is used. */
START_TEST(test_ipc_import_malformed)
{
    static const struct {
        ringk_ipc_handle_t h;
        const char        *why;
    } bad[] = {
        {{.type = 9, .fd = -1, .size = 8, .id = 1, .pid = 1}, "type 9 is not"},
        {{.type = RINGK_IPC_TYPE_LEGACY, .fd = -1, .size = 0, .id = 1, .pid = 1}, "size 0 is not"},
        {{.type = RINGK_IPC_TYPE_LEGACY, .fd = -1, .size = 1ull << 47, .id = 1, .pid = 1,
          .device = "0:1.0"}, "size 140737488355328 is not in 1..70368744177664"},
        {{.type = RINGK_IPC_TYPE_LEGACY, .fd = -1, .size = 8, .offset = 9, .id = 1, .pid = 1},
         "offset 9 is not below size 8"},
        {{.type = RINGK_IPC_TYPE_LEGACY, .fd = -1, .size = 8, .id = 0, .pid = 1}, "id is 0"},
        {{.type = RINGK_IPC_TYPE_LEGACY, .fd = -1, .size = 8, .id = 1, .pid = -4},
         "pid -4 is not"},
        {{.type = RINGK_IPC_TYPE_LEGACY, .fd = 3, .size = 8, .id = 1, .pid = 1},
         "fd 3 with type 1"},
        {{.type = RINGK_IPC_TYPE_POSIX_FD, .fd = -1, .size = 8, .id = 1, .pid = 1},
         "fd -1 with type 3"},
        {{.type = RINGK_IPC_TYPE_FABRIC, .fd = -1, .size = 8, .id = 1, .pid = 1,
          .device = "0000:07:00.0;rm"}, "device has byte 0x3b at 12"},
        {{.type = RINGK_IPC_TYPE_FABRIC, .fd = -1, .size = 8, .id = 1, .pid = 1},
         "a FABRIC handle names no device"},
    };
    ringk_ipc_handle_t h;
    void *p;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        logbuf[0] = '\0';
        ck_assert_int_eq(ringk_ipc_import(&bad[i].h, &p), -EINVAL);
        ck_assert_msg(strstr(logbuf, bad[i].why) != NULL, "case %zu: %s", i, logbuf);
    }
    h = bad[0].h; /* a device name that fills its 16 bytes: not terminated */
    h.type = RINGK_IPC_TYPE_LEGACY;
    memset(h.device, '0', sizeof(h.device));
    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_ipc_import(&h, &p), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logbuf, "device is not NUL-terminated within 16 bytes"));
}
END_TEST

/* ---- two processes -------------------------------------------------------------------------- */

/* Over a socket, a memfd's handle goes to another process with its descriptor: both see the
 * same memory. The peer's credentials are the kernel's; a revocation reaches the importer's
 * cache; the exporter's end makes the importer forget its imports. */
START_TEST(test_ipc_channel_socket)
{
    char path[96];
    ringk_ipc_channel_params_t cp = chan_params(RINGK_IPC_CHANNEL_SOCKET,
                                                RINGK_IPC_CHANNEL_LISTEN,
                                                chan_path(RINGK_IPC_CHANNEL_SOCKET, path,
                                                          sizeof(path)));
    int go[2], fd = memfd_new(4096, 0);
    ringk_ipc_channel_t *ch;
    ringk_ipc_handle_t h;
    ringk_ipc_cache_stats_t s;
    volatile uint8_t *mem;
    uint32_t uid;
    int32_t pid;
    pid_t child;
    char c;

    ck_assert_int_eq(pipe(go), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) { /* the exporter */
        volatile uint8_t *own = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

        cp.role = RINGK_IPC_CHANNEL_CONNECT;
        if ((own == MAP_FAILED) || (ringk_ipc_channel_open(&cp, &ch) != 0) ||
            (ringk_ipc_handle_from_fd(fd, 4096, 64, &h) != 0)) {
            _exit(1);
        }
        own[64] = 'A';
        if (ringk_ipc_channel_send(ch, &h) != 0) {
            _exit(2);
        }
        for (int i = 0; (i < 10000) && (own[65] != 'B'); i++) { /* the importer's answer */
            usleep(1000);
        }
        if ((own[65] != 'B') || (ringk_ipc_channel_revoke(ch, h.id) != 0) ||
            (read(go[0], &c, 1) != 1)) {
            _exit(3);
        }
        { /* exported again after the revocation: a new id, which the importer may map */
            ringk_ipc_handle_t again;

            if ((ringk_ipc_handle_from_fd(fd, 4096, 64, &again) != 0) || (again.id == h.id)) {
                _exit(4);
            }
        }
        ringk_ipc_channel_close(ch);
        _exit(0);
    }
    close(fd); /* the importer gets its own descriptor through the socket */
    ck_assert_int_eq(ringk_ipc_channel_open(&cp, &ch), 0);
    ck_assert_int_eq(access(path, F_OK), -1); /* the listener removed its path */
    ck_assert_int_eq(ringk_ipc_channel_peer(ch, &pid, &uid), 0);
    ck_assert_int_eq(pid, child);
    ck_assert_uint_eq(uid, geteuid());
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 10000), 0);
    ck_assert_int_eq(h.type, RINGK_IPC_TYPE_POSIX_FD);
    ck_assert_int_eq(h.pid, child);
    ck_assert_uint_eq(h.offset, 64);
    ck_assert_int_ge(h.fd, 0);
    ck_assert_int_eq(ringk_ipc_import(&h, (void**)&mem), 0);
    ck_assert_uint_eq(mem[0], 'A');
    mem[1] = 'B';
    /* the revocation comes next: applied by the receive, which then finds nothing */
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 200), -EAGAIN);
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_int_eq(ringk_ipc_import(&h, (void**)&mem), -ESTALE);
    ck_assert_int_eq(ringk_ipc_close((void*)mem), 0);
    ck_assert_int_eq(write(go[1], "x", 1), 1);
    ck_assert_int_eq(child_exit(child), 0);
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 10000), -EPIPE);
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 0), -EPIPE); /* and so it stays */
    ringk_ipc_handle_release(&h);
    ck_assert_int_eq(ringk_ipc_channel_close(ch), 0);
}
END_TEST

/* An import whose exporter has died is refused, and a cached one is forgotten when it is found
 * dead. */
START_TEST(test_ipc_exporter_dead)
{
    char path[96];
    ringk_ipc_channel_params_t cp = chan_params(RINGK_IPC_CHANNEL_SOCKET,
                                                RINGK_IPC_CHANNEL_LISTEN,
                                                chan_path(RINGK_IPC_CHANNEL_SOCKET, path,
                                                          sizeof(path)));
    int go[2], fd = memfd_new(4096, 5);
    ringk_ipc_cache_stats_t s0, s;
    ringk_ipc_channel_t *ch;
    ringk_ipc_handle_t h;
    void *p;
    pid_t child;
    char c;

    ck_assert_int_eq(pipe(go), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        cp.role = RINGK_IPC_CHANNEL_CONNECT;
        if ((ringk_ipc_channel_open(&cp, &ch) != 0) ||
            (ringk_ipc_handle_from_fd(fd, 4096, 0, &h) != 0) ||
            (ringk_ipc_channel_send(ch, &h) != 0) || (read(go[0], &c, 1) != 1)) {
            _exit(1);
        }
        _exit(0); /* no close: as if killed */
    }
    close(fd);
    ck_assert_int_eq(ringk_ipc_channel_open(&cp, &ch), 0);
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 10000), 0);
    ck_assert_int_eq(ringk_ipc_import(&h, &p), 0);
    ck_assert_int_eq(ringk_ipc_close(p), 0); /* cached, unused */
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s0), 0);
    ck_assert_int_eq(write(go[1], "x", 1), 1);
    ck_assert_int_eq(child_exit(child), 0);
    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_ipc_import(&h, &p), -ESRCH);
    ck_assert_ptr_nonnull(strstr(logbuf, "is gone"));
    ck_assert_int_eq(ringk_ipc_cache_stats_query(&s), 0);
    ck_assert_uint_eq(s.invalidations - s0.invalidations, 1);
    ck_assert_uint_eq(s.entries, s0.entries - 1);
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 10000), -EPIPE);
    ringk_ipc_handle_release(&h);
    ringk_ipc_channel_close(ch);
}
END_TEST

/* A channel that carries no descriptors (shared memory, named pipe): a device handle's every
 * field arrives; a POSIX_FD handle is refused with the reason; nothing is left in /dev/shm or
 * at the path; a pipe is one way. */
START_TEST(test_ipc_channel_nofd)
{
    const ringk_ipc_channel_kind_t kind = _i ? RINGK_IPC_CHANNEL_PIPE : RINGK_IPC_CHANNEL_SHM;
    char path[96], shm[128];
    ringk_ipc_channel_params_t cp = chan_params(kind, RINGK_IPC_CHANNEL_LISTEN,
                                                chan_path(kind, path, sizeof(path)));
    ringk_ipc_handle_t h, got;
    ringk_ipc_channel_t *ch;
    uint32_t uid;
    int32_t pid;
    pid_t child;
    int i, fd;

    memset(&h, 0, sizeof(h));
    h.type = RINGK_IPC_TYPE_LEGACY;
    h.fd   = -1;
    h.size = 1u << 20;
    h.id   = 0x7f0000001000ull;
    snprintf(h.device, sizeof(h.device), "0000:07:00.0");
    for (i = 0; i < RINGK_IPC_HANDLE_BYTES; i++) {
        h.bytes[i] = (uint8_t)(i * 3 + 1);
    }
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        cp.role = RINGK_IPC_CHANNEL_CONNECT;
        if (ringk_ipc_channel_open(&cp, &ch) != 0) {
            _exit(1);
        }
        h.pid = getpid();
        for (i = 0; i < 40; i++) { /* more than a mailbox holds: the sender waits for room */
            h.offset = (uint64_t)i * 4096;
            if (ringk_ipc_channel_send(ch, &h) != 0) {
                _exit(2);
            }
        }
        fd = memfd_new(4096, 0);
        if ((ringk_ipc_handle_from_fd(fd, 4096, 0, &got) != 0) ||
            (ringk_ipc_channel_send(ch, &got) != -EOPNOTSUPP) ||
            (ringk_ipc_channel_revoke(ch, h.id) != 0)) {
            _exit(3);
        }
        if ((kind == RINGK_IPC_CHANNEL_PIPE) && (ringk_ipc_channel_recv(ch, &got, 0) != -ENOTSUP)) {
            _exit(4);
        }
        ringk_ipc_channel_close(ch);
        _exit(0);
    }
    h.pid = getpid();
    ck_assert_int_eq(ringk_ipc_channel_open(&cp, &ch), 0);
    snprintf(shm, sizeof(shm), "/dev/shm/%s", path);
    ck_assert_int_eq(access((kind == RINGK_IPC_CHANNEL_SHM) ? shm : path, F_OK), -1);
    ck_assert_int_eq(ringk_ipc_channel_peer(ch, &pid, &uid), 0);
    ck_assert_int_eq(pid, child);
    for (i = 0; i < 40; i++) {
        ck_assert_int_eq(ringk_ipc_channel_recv(ch, &got, 10000), 0);
        ck_assert_int_eq(got.type, RINGK_IPC_TYPE_LEGACY);
        ck_assert_int_eq(got.fd, -1);
        ck_assert_int_eq(got.pid, child);
        ck_assert_uint_eq(got.size, h.size);
        ck_assert_uint_eq(got.offset, (uint64_t)i * 4096);
        ck_assert_uint_eq(got.id, h.id);
        ck_assert_str_eq(got.device, h.device);
        ck_assert_int_eq(memcmp(got.bytes, h.bytes, sizeof(h.bytes)), 0);
    }
    if (kind == RINGK_IPC_CHANNEL_PIPE) {
        ck_assert_int_eq(ringk_ipc_channel_send(ch, &h), -ENOTSUP);
    }
    ck_assert_int_eq(child_exit(child), 0);
    /* the revocation is applied, then the end */
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &got, 10000), -EPIPE);
    ck_assert_int_eq(ringk_ipc_channel_close(ch), 0);
}
END_TEST

/* The listening end of @a cp in a child, made another peer first by @a become (its failure:
 * exit 9); the child exits 0 when its open fails with @a want, 1 when it timed out, 2
 * otherwise. */
static pid_t listener_as(ringk_ipc_channel_params_t cp, int (*become)(void), int want,
                         int timeout_ms)
{
    ringk_ipc_channel_t *ch;
    pid_t child = fork();
    int ret;

    ck_assert_int_ge(child, 0);
    if (child == 0) {
        cp.timeout_ms = timeout_ms;
        if (become() != 0) {
            _exit(9);
        }
        ret = ringk_ipc_channel_open(&cp, &ch);
        _exit((ret == want) ? 0 : (ret == -ETIMEDOUT) ? 1 : 2);
    }
    return child;
}

/* The mailbox file a test's SHM channel may leave: the listener removes it, unless it never
 * got that far. */
static void chan_unlink(ringk_ipc_channel_kind_t kind, const char *path)
{
    char name[128];

    if (kind == RINGK_IPC_CHANNEL_SHM) {
        snprintf(name, sizeof(name), "/%s", path);
        shm_unlink(name);
    }
}

static int become_nobody(void)
{
    return ((setgid(65534) != 0) || (setuid(65534) != 0)) ? -1 : 0;
}

static int become_other_net(void)
{
    return unshare(CLONE_NEWNET);
}

/* A peer of another user is refused on each channel, with both users named (root only: the
 * child becomes user 65534). */
START_TEST(test_ipc_channel_other_user)
{
    const ringk_ipc_channel_kind_t kind = (ringk_ipc_channel_kind_t)_i;
    char path[96];
    ringk_ipc_channel_params_t cp = chan_params(kind, RINGK_IPC_CHANNEL_LISTEN,
                                                chan_path(kind, path, sizeof(path)));
    ringk_ipc_channel_t *ch;
    pid_t child;

    if (geteuid() != 0) {
        return; /* nobody else to be */
    }
    ck_assert_int_eq(chmod(dir, 0777), 0);
    child = listener_as(cp, become_nobody, -EPERM, 2000); /* it creates the path */
    cp.role       = RINGK_IPC_CHANNEL_CONNECT;
    cp.timeout_ms = 5000;
    ck_assert_int_eq(ringk_ipc_channel_open(&cp, &ch), -EPERM);
    if (kind == RINGK_IPC_CHANNEL_SOCKET) {
        ck_assert_msg(strstr(logbuf, "the peer is user 65534, this process is user 0") != NULL,
                      "%s", logbuf);
        ck_assert_int_eq(child_exit(child), 0); /* it refused this one too */
    } else {
        /* the file is the other user's: refused before a word is sent */
        ck_assert_msg(strstr(logbuf, "of user 0 with mode 0600 (owner 65534") != NULL, "%s",
                      logbuf);
        child_exit(child);
    }
    chan_unlink(kind, path);
}
END_TEST

/* A peer in another network namespace is another node for ringk (its abstract sockets and
 * its view of the network differ): refused with -EXDEV on each channel, by both ends of a
 * socket or shared memory mailbox, by the listener of a pipe, with the difference named (only
 * where unshare(CLONE_NEWNET) works: root with CAP_SYS_ADMIN). */
START_TEST(test_ipc_channel_other_node)
{
    const ringk_ipc_channel_kind_t kind = (ringk_ipc_channel_kind_t)_i;
    char path[96];
    ringk_ipc_channel_params_t cp = chan_params(kind, RINGK_IPC_CHANNEL_LISTEN,
                                                chan_path(kind, path, sizeof(path)));
    ringk_ipc_channel_t *ch;
    pid_t child = fork();
    int ret;

    ck_assert_int_ge(child, 0);
    if (child == 0) { /* whether a network namespace can be made here (CAP_SYS_ADMIN) */
        _exit((become_other_net() == 0) ? 0 : 1);
    }
    if (child_exit(child) != 0) {
        printf("# test_ipc_channel_other_node: no network namespace can be made here "
               "(unshare: needs CAP_SYS_ADMIN): not run\n");
        return;
    }
    child         = listener_as(cp, become_other_net, -EXDEV, 5000);
    cp.role       = RINGK_IPC_CHANNEL_CONNECT;
    cp.timeout_ms = 5000;
    ret = ringk_ipc_channel_open(&cp, &ch);
    if (kind == RINGK_IPC_CHANNEL_PIPE) {
        /* one way: the connecting end hears nothing from the listener, which refuses it; its
         * first send finds the pipe closed */
        ck_assert_int_eq(ret, 0);
        ck_assert_int_eq(child_exit(child), 0);
        ringk_ipc_channel_close(ch);
    } else {
        ck_assert_int_eq(ret, -EXDEV);
        ck_assert_msg(strstr(logbuf, "is on another node or container") != NULL, "%s", logbuf);
        ck_assert_int_eq(child_exit(child), 0); /* it refused this one too */
    }
    chan_unlink(kind, path);
}
END_TEST

/* ---- a hand-written peer -------------------------------------------------------------------- */

/* The message the channels exchange, as docs/ipc.md describes it. */
typedef struct {
    uint32_t magic;
    uint16_t version, kind;
    int32_t  pid;
    uint32_t uid;
    uint64_t start, node[3];
    uint32_t type, has_fd;
    uint64_t size, offset, id;
    int32_t  owner;
    uint32_t reserved;
    char     device[16];
    uint8_t  bytes[64];
} wire_t;

/* Sends @a w over socket @a s with @a nfd descriptors of @a fds. */
static int raw_send(int s, const wire_t *w, const int *fds, int nfd)
{
    char cbuf[CMSG_SPACE(4 * sizeof(int))];
    struct iovec iov = {(void*)w, sizeof(*w)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;

    if (nfd > 0) {
        memset(cbuf, 0, sizeof(cbuf));
        mh.msg_control    = cbuf;
        mh.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
        cm                = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level    = SOL_SOCKET;
        cm->cmsg_type     = SCM_RIGHTS;
        cm->cmsg_len      = CMSG_LEN(nfd * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, nfd * sizeof(int));
    }
    return (sendmsg(s, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(*w)) ? 0 : -1;
}

/* The malformed messages, one per case: what the receiver must say. */
static const struct {
    const char *why;
    int         nfd;
} raw_case[] = {
    {"magic 0x00000000", 0},
    {"kind 9", 0},
    {"sender 1", 0},
    {"the handle is process 1's, the peer is process", 0},
    {"the message says a descriptor and none came", 0},
    {"with 2 descriptors", 2},
    {"a descriptor came with a revocation", 1},
    {"offset 64 is not below size 64", 0},
};

/* A peer that says hello properly (its hello is the one it received, made its own) and then
 * sends malformed message @a c: the receiver refuses it with -EPROTO, logs why, closes what
 * descriptors came, and refuses every later call. */
START_TEST(test_ipc_channel_malformed)
{
    char path[96];
    ringk_ipc_channel_params_t cp = chan_params(RINGK_IPC_CHANNEL_SOCKET,
                                                RINGK_IPC_CHANNEL_CONNECT,
                                                chan_path(RINGK_IPC_CHANNEL_SOCKET, path,
                                                          sizeof(path)));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ringk_ipc_channel_t *ch;
    ringk_ipc_handle_t h;
    int s, c, fds[2], nfd_before, nfd_after;
    wire_t w;
    pid_t child;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) { /* the raw peer, which listens (the kernel's credentials are its) */
        s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if ((s < 0) || (bind(s, (struct sockaddr*)&sa, sizeof(sa)) != 0) || (listen(s, 1) != 0)) {
            _exit(4);
        }
        c = accept(s, NULL, NULL);
        if ((c < 0) || (recv(c, &w, sizeof(w), 0) != sizeof(w))) {
            _exit(1);
        }
        w.pid = getpid(); /* the receiver's hello, as this process's */
        if (raw_send(c, &w, NULL, 0) != 0) {
            _exit(2);
        }
        w.kind   = 2; /* a handle */
        w.type   = RINGK_IPC_TYPE_LEGACY;
        w.size   = 4096;
        w.id     = 1;
        w.owner  = getpid();
        snprintf(w.device, sizeof(w.device), "0000:01:00.0");
        fds[0] = open("/dev/null", O_RDONLY);
        fds[1] = open("/dev/null", O_RDONLY);
        switch (_i) {
        case 0: w.magic = 0; break;
        case 1: w.kind = 9; break;
        case 2: w.pid = 1; break;
        case 3: w.owner = 1; break;
        case 4: w.has_fd = 1; break;
        case 5: w.has_fd = 1; w.type = RINGK_IPC_TYPE_POSIX_FD; break;
        case 6: w.kind = 3; break;
        case 7: w.size = 64; w.offset = 64; break;
        }
        if (raw_send(c, &w, fds, raw_case[_i].nfd) != 0) {
            _exit(3);
        }
        (void)read(c, &w, 1); /* until the receiver closes */
        _exit(0);
    }
    nfd_before = 0;
    for (c = 0; c < 1024; c++) {
        nfd_before += (fcntl(c, F_GETFD) >= 0);
    }
    ck_assert_int_eq(ringk_ipc_channel_open(&cp, &ch), 0);
    logbuf[0] = '\0';
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 10000), -EPROTO);
    ck_assert_msg(strstr(logbuf, raw_case[_i].why) != NULL, "case %d: %s", _i, logbuf);
    ck_assert_int_eq(ringk_ipc_channel_recv(ch, &h, 0), -EPROTO);
    ck_assert_int_eq(ringk_ipc_channel_close(ch), 0);
    nfd_after = 0;
    for (c = 0; c < 1024; c++) {
        nfd_after += (fcntl(c, F_GETFD) >= 0);
    }
    ck_assert_int_eq(nfd_after, nfd_before); /* what came was closed, the socket too */
    ck_assert_int_eq(child_exit(child), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ipc");
    TCase *tc = tcase_create("handle");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_ipc_handle_from_fd);
    tcase_add_test(tc, test_ipc_export_host);
    tcase_add_test(tc, test_ipc_import_cache);
    tcase_add_test(tc, test_ipc_cache_bound);
    tcase_add_test(tc, test_ipc_cache_threads);
    tcase_add_test(tc, test_ipc_import_malformed);
    suite_add_tcase(s, tc);
    tc = tcase_create("channel");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ipc_channel_socket);
    tcase_add_test(tc, test_ipc_exporter_dead);
    tcase_add_loop_test(tc, test_ipc_channel_nofd, 0, 2);
    tcase_add_loop_test(tc, test_ipc_channel_other_user, 0, 3);
    tcase_add_loop_test(tc, test_ipc_channel_other_node, 0, 3);
    tcase_add_loop_test(tc, test_ipc_channel_malformed, 0,
                        (int)(sizeof(raw_case) / sizeof(raw_case[0])));
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
