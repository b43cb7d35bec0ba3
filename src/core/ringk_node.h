/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk node identity: what makes two processes "on the same node" for shared memory. */
#ifndef RINGK_CORE_NODE_H
#define RINGK_CORE_NODE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/**
 * The identity of this process's node as seen for shared memory: the kernel boot id, the PID
 * namespace (peers open our segments through /proc/<pid>), and the IPC and network namespaces
 * together with the identity of /dev/shm (two containers on one host differ in these). Three 64-bit words so
 * it fits a UCT device address.
 */
typedef struct ringk_node_id {
    uint64_t boot;     /**< hash of /proc/sys/kernel/random/boot_id */
    uint64_t pid_ns;   /**< inode of /proc/self/ns/pid */
    uint64_t ipc_shm;  /**< hash of the IPC and network namespace inodes and /dev/shm's device
                            and inode (the wakeup socket is scoped to the network namespace) */
} ringk_node_id_t;

/** Fills @a id for this process; missing sources hash as 0. */
void ringk_node_id_get(ringk_node_id_t *id);

/**
 * Tells whether two identities are the same node for shared memory; the reason names what
 * differs, or what matched.
 */
int ringk_node_id_same(const ringk_node_id_t *a, const ringk_node_id_t *b, char *reason,
                       size_t reason_len);

/**
 * Lets peers of this user reach this process the way ringk needs (opening its segment through
 * /proc/<pid>/fd, cross-memory attach), as UCX's cma transport does: under Yama's ptrace_scope
 * 1 (read from @a scope_file, normally /proc/sys/kernel/yama/ptrace_scope) only a descendant
 * may, unless the process names its ptracer, so it calls prctl(PR_SET_PTRACER,
 * PR_SET_PTRACER_ANY); the kernel's same-user check still applies. Scope 0 or no Yama needs
 * nothing; 2 needs CAP_SYS_PTRACE; 3 forbids it.
 * @return 1 when peers can reach this process, else 0; @a why says which case it was.
 */
int ringk_node_ptrace_allow(const char *scope_file, char *why, size_t why_len);

/**
 * Reads /proc/<pid>/stat of process @a pid into @a buf (@a len bytes, terminated) and returns
 * the last ')' in it: the process's name (field 2) may hold spaces and ')', so the fields after
 * it follow that one (" S ppid ..."). NULL when @a pid is not positive, the process is not there,
 * or the file cannot be read.
 */
const char *ringk_node_proc_stat(int pid, char *buf, size_t len);

/** Which check of ringk_node_open_peer() failed. */
typedef enum {
    RINGK_PEER_OK = 0,
    RINGK_PEER_OPEN,   /**< open() of /proc/<pid>/fd/<fd> failed (errno says why) */
    RINGK_PEER_NAME,   /**< not the memfd of the expected name (the name found is in @a link) */
    RINGK_PEER_STAT,   /**< fstat() failed (errno says why) */
    RINGK_PEER_OWNER   /**< not a regular file of this user with mode 0600 or stricter */
} ringk_peer_err_t;

/**
 * Opens descriptor @a fd of process @a pid through /proc/<pid>/fd (O_CLOEXEC | @a flags), as a
 * peer opens a segment or allocation another process of its user shares, and checks what it
 * got: when @a name is not NULL, the memfd of that name ("/memfd:<name> (deleted)", read back
 * through the new descriptor, so a number the owner closed and reused is caught); a regular
 * file owned by this user with no group or other permission bits. The size is the caller's to
 * check, in @a st. @a link receives the name found (for messages).
 * @return the descriptor, or -1 with @a err_p saying which check failed.
 */
int ringk_node_open_peer(uint32_t pid, int fd, int flags, const char *name, struct stat *st,
                         char *link, size_t link_len, ringk_peer_err_t *err_p);

/**
 * Receives one message of at most @a len bytes into @a buf from Unix socket @a s without
 * waiting (MSG_DONTWAIT; EINTR retried), with the descriptors it carries (SCM_RIGHTS,
 * close-on-exec): the first in *@a fd_p (-1 if none), any others closed; how many came in
 * *@a nfd_p, the message's flags (MSG_TRUNC, MSG_CTRUNC) in *@a flags_p.
 * @return the message's length, or -errno (-EAGAIN: nothing there).
 */
ssize_t ringk_node_recv_fd(int s, void *buf, size_t len, int *fd_p, int *nfd_p, int *flags_p);

#endif
