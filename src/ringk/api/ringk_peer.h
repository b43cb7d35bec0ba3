/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: memory of one GPU reached from another GPU of the process: what the topology and
 * the path policy say of a pair, peer access on and off, and copies between the devices that
 * take the path the policy picks and say which; usable without a context. */
#ifndef RINGK_API_RINGK_PEER_H
#define RINGK_API_RINGK_PEER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** How two GPUs are connected, best first (the transport's path classes). */
typedef enum ringk_peer_class {
    RINGK_PEER_CLASS_SAME_DEVICE  = 0, /**< one GPU */
    RINGK_PEER_CLASS_NVLINK       = 1, /**< NVLink, direct or through NVSwitch */
    RINGK_PEER_CLASS_PCIE_SWITCH  = 2, /**< behind PCIe switches (PIX, PXB) */
    RINGK_PEER_CLASS_HOST_BRIDGE  = 3, /**< through a host bridge of one package (PHB) */
    RINGK_PEER_CLASS_CROSS_SOCKET = 4, /**< through the inter-socket interconnect (SYS) */
    RINGK_PEER_CLASS_NONE         = 5  /**< no relation known (a GPU the topology lacks) */
} ringk_peer_class_t;

/** How data moves between the two. */
typedef enum ringk_peer_path {
    RINGK_PEER_PATH_P2P_NVLINK  = 0, /**< the copy engine over NVLink, with peer access */
    RINGK_PEER_PATH_P2P_PCIE    = 1, /**< the copy engine over PCIe, with peer access */
    RINGK_PEER_PATH_CUDA_IPC    = 2, /**< (between processes) an IPC mapping */
    RINGK_PEER_PATH_HOST_STAGED = 3, /**< through pinned host memory, in chunks whose copy
                                          out of one GPU overlaps the copy into the other */
    RINGK_PEER_PATH_SAME_DEVICE = 4  /**< one GPU's own copy */
} ringk_peer_path_t;

/** ringk_peer_query()'s flags. */
enum ringk_peer_query_flag {
    RINGK_PEER_QUERY_MEASURE = 1u << 0 /**< time copies of the path (CUDA devices only) */
};

#define RINGK_PEER_REASON_LEN 512

/** What ringk knows of a pair of GPUs. */
typedef struct ringk_peer_info {
    char               busid[16];      /**< PCI bus id of the first ("0000:07:00.0") */
    char               peer_busid[16]; /**< and of the second */
    ringk_peer_class_t cls;
    char               link[8];        /**< nvidia-smi's label: X, NV<n>, PIX, PXB, PHB, SYS,
                                            NONE */
    unsigned           nvlinks;        /**< NVLinks between them */
    ringk_peer_path_t  path;           /**< the path copies between them take */
    int                can_access;     /**< 1: path is P2P (each may be given the other's
                                            memory), else 0 */
    int                verified;       /**< 1: a P2P path passed its write / read canary on
                                            this machine; 0: not run (another path, topology
                                            from RINGK_TOPO_FILE, device kernels resident) */
    int                native_atomics; /**< 1 / 0: atomics from one on the other's memory
                                            work natively (CUDA says); -1 unknown */
    double             est_gbps;       /**< the topology's bandwidth estimate, GB/s */
    double             est_lat_us;     /**< and latency estimate, microseconds */
    double             gbps;           /**< measured (RINGK_PEER_QUERY_MEASURE): 64 MiB copies
                                            of the path, GB/s; 0 when not measured */
    double             lat_us;         /**< measured: a 4-byte copy, microseconds; 0 */
    char               reason[RINGK_PEER_REASON_LEN]; /**< why this path */
} ringk_peer_info_t;

/**
 * What ringk knows of the GPUs at PCI bus ids @a busid and @a peer_busid ("DDDD:BB:DD.F"),
 * from this machine's topology or the hwloc XML file in RINGK_TOPO_FILE, and the path policy
 * (RINGK_P2P_LEVEL, RINGK_PATH); on this machine a P2P path is confirmed by its canary once per
 * process (else HOST_STAGED, and the reason says why). CUDA is asked only on this machine.
 * @return 0; -EINVAL (NULL, a malformed bus id, unknown flags); -ENOENT (a bus id the topology
 *         lacks: info_p->reason names it); -EINVAL with the reason when a forced RINGK_PATH
 *         cannot serve the pair; -ENODEV (no topology).
 */
int ringk_peer_query(const char *busid, const char *peer_busid, unsigned flags,
                     ringk_peer_info_t *info_p);

/**
 * ringk_peer_query() for CUDA devices @a dev and @a peer (ordinals, as cudaSetDevice's).
 * @return as ringk_peer_query(); -ENODEV (no usable CUDA, no such device: info_p->reason).
 */
int ringk_peer_can_access(int dev, int peer, ringk_peer_info_t *info_p);

/**
 * The capability of the pair: ringk_peer_can_access() with native_atomics from CUDA and the
 * path's bandwidth and latency measured now (copies of 64 MiB and 4 bytes, the median of 5,
 * each timed by the host's clock around the copy and its wait). Allocates device memory: not
 * while device kernels are resident (-EBUSY).
 */
int ringk_peer_capability(int dev, int peer, ringk_peer_info_t *info_p);

/**
 * Lets kernels and copies of device @a dev reach memory of device @a peer (cudaDevice
 * EnablePeerAccess from @a dev); already enabled is 0 (ringk remembers the pairs it turned on,
 * so a program turns them off with ringk_peer_disable(), not with CUDA; a pair it remembers is
 * 0 at once, with no CUDA call). Else not while ringk device kernels run on @a dev: the call on
 * its context may wait for them. @return 0; -EINVAL (@a dev
 * == @a peer, negative); -ENODEV; -EPERM (CUDA says the pair cannot); -EBUSY (device kernels
 * on @a dev); each named in the log.
 */
int ringk_peer_enable(int dev, int peer);

/** Takes back what ringk_peer_enable() gave; not enabled is 0. @return 0, -EINVAL, -ENODEV,
 *  -EBUSY (device kernels on @a dev), -EIO. */
int ringk_peer_disable(int dev, int peer);

/**
 * Copies @a len bytes from device memory @a src to device memory @a dst (of the same or
 * another GPU of this process) by the path ringk_peer_query() gives their pair (P2P paths
 * enable peer access), and returns once the data has landed; *@a path_p (may be NULL) gets the
 * path taken. @return 0; -EINVAL (NULL, not device memory: the log names which); -ENODEV;
 * -EIO (a CUDA error, logged).
 */
int ringk_peer_copy(void *dst, const void *src, size_t len, ringk_peer_path_t *path_p);

/**
 * ringk_peer_copy() ordered on the application's CUDA stream @a stream (a cudaStream_t; NULL
 * is the legacy default stream): returns once the copy is queued; it has landed when the
 * stream's later work starts. A HOST_STAGED copy holds staging buffers until its chunks have
 * gone through: it waits for a free one at most 30 s (then -EIO, the chunks queued so far left
 * to the stream), and is refused on a stream being captured into a graph. @return as
 * ringk_peer_copy().
 */
int ringk_peer_copy_async(void *dst, const void *src, size_t len, void *stream,
                          ringk_peer_path_t *path_p);

/** "P2P_NVLINK", ..., "SAME_DEVICE"; "?" for another value. */
const char *ringk_peer_path_name(ringk_peer_path_t path);

#ifdef __cplusplus
}
#endif

#endif
