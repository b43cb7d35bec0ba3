/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk node identity: boot id, pid and IPC namespaces, /dev/shm. */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_node.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* FNV-1a, 64 bits: a stable hash of a few bytes. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    while (len-- > 0) {
        h ^= *p++;
        h *= 0x100000001b3ull;
    }
    return h;
}

void ringk_node_id_get(ringk_node_id_t *id)
{
    const uint64_t seed = 0xcbf29ce484222325ull;
    char boot[64] = "";
    struct stat st;
    uint64_t h;
    FILE *f;

    memset(id, 0, sizeof(*id));
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, sizeof(boot), f) != NULL) {
            id->boot = fnv1a(seed, boot, strlen(boot));
        }
        fclose(f);
    }
    if (stat("/proc/self/ns/pid", &st) == 0) {
        id->pid_ns = st.st_ino;
    }
    h = seed;
    if (stat("/proc/self/ns/ipc", &st) == 0) {
        h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
    }
    /* The wakeup socket is an abstract unix socket, which lives in the network namespace: a
     * process in another network namespace is another host for ringk. */
    if (stat("/proc/self/ns/net", &st) == 0) {
        h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
    }
    if (stat("/dev/shm", &st) == 0) {
        h = fnv1a(h, &st.st_dev, sizeof(st.st_dev));
        h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
    }
    id->ipc_shm = h;
}

int ringk_node_id_same(const ringk_node_id_t *a, const ringk_node_id_t *b, char *reason,
                       size_t reason_len)
{
    if (a->boot != b->boot) {
        snprintf(reason, reason_len, "different kernel boot ids: another node");
        return 0;
    }
    if (a->pid_ns != b->pid_ns) {
        snprintf(reason, reason_len, "same kernel but different PID namespaces: the peer's "
                 "/proc/<pid>/fd cannot be reached");
        return 0;
    }
    if (a->ipc_shm != b->ipc_shm) {
        snprintf(reason, reason_len, "same kernel but different IPC or network namespace or "
                 "/dev/shm: another container");
        return 0;
    }
    snprintf(reason, reason_len, "same node: same boot id, PID, IPC and network namespaces and "
             "/dev/shm");
    return 1;
}
