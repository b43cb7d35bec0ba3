/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk topology: a typed description of the node's GPUs, their PCI paths, NUMA nodes, packages
 * and NVLinks; the pure classification of every pair into an ordered path class; and the policy
 * that turns a class plus overrides into the path ringk uses. */
#ifndef RINGK_CORE_TOPO_H
#define RINGK_CORE_TOPO_H

#include <stddef.h>
#include <stdint.h>

#define RINGK_TOPO_MAX_GPUS     64
#define RINGK_TOPO_MAX_DEPTH    16   /**< PCI levels between a host bridge and a device */
#define RINGK_TOPO_MAX_NVLINK   32   /**< NVLink peers listed per GPU */
#define RINGK_TOPO_REASON_LEN   192

/** Path classes, ordered from best to worst (in the spirit of NCCL's ladder). */
typedef enum ringk_path_class {
    RINGK_CLASS_SAME_DEVICE = 0,
    RINGK_CLASS_NVLINK,
    RINGK_CLASS_PCIE_SWITCH,   /**< behind one (PIX) or several (PXB) PCIe switches */
    RINGK_CLASS_HOST_BRIDGE,   /**< through a PCIe host bridge of one package (PHB) */
    RINGK_CLASS_CROSS_SOCKET,  /**< through the inter-socket interconnect (SYS) */
    RINGK_CLASS_NONE,          /**< no usable relation known */
    RINGK_CLASS_COUNT
} ringk_path_class_t;

/** Paths a pair of endpoints can use. */
typedef enum ringk_path {
    RINGK_PATH_P2P_NVLINK = 0,
    RINGK_PATH_P2P_PCIE,
    RINGK_PATH_CUDA_IPC,
    RINGK_PATH_HOST_STAGED,
    RINGK_PATH_COUNT
} ringk_path_t;

/** One GPU as the topology describes it. */
typedef struct ringk_topo_gpu {
    char     busid[16];                       /**< "0000:07:00.0" */
    uint16_t vendor, device;                  /**< PCI ids */
    int      package;                         /**< package index, -1 if unknown */
    int      numa;                            /**< NUMA node os index, -1 if unknown */
    uint64_t host_bridge;                     /**< id of its host bridge, 0 if none */
    uint64_t path[RINGK_TOPO_MAX_DEPTH];      /**< ids of the PCI bridges from the host bridge */
    unsigned path_len;
    unsigned switch_levels;                   /**< bridges that are PCIe switch ports */
    float    link_gbps;                       /**< narrowest PCIe link on its path, GB/s */
    unsigned nvlink_version;                  /**< 0: no NVLink */
    unsigned nvswitch_links;                  /**< links to an NVSwitch fabric */
    unsigned nnvlinks;                        /**< direct NVLink peers */
    struct {
        char     busid[16];
        unsigned links;
    } nvlinks[RINGK_TOPO_MAX_NVLINK];
} ringk_topo_gpu_t;

/** The node. */
typedef struct ringk_topo {
    char             source[256];   /**< "this machine" or the file it came from */
    unsigned         npackages;
    unsigned         nnuma;
    unsigned         ncores;
    unsigned         ngpus;
    int              numa_package[64]; /**< package of NUMA node i (by os index), -1 unknown */
    ringk_topo_gpu_t gpus[RINGK_TOPO_MAX_GPUS];
} ringk_topo_t;

/** The relation of two GPUs (or a GPU and a NUMA node), with its reason and estimates. */
typedef struct ringk_topo_pair {
    ringk_path_class_t cls;
    unsigned           nvlinks;      /**< NVLinks between them (for NVLINK) */
    unsigned           switches;     /**< PCIe switch levels crossed (for PCIE_SWITCH) */
    double             bw_gbps;      /**< estimated bandwidth, GB/s */
    double             lat_us;       /**< estimated latency, microseconds */
    char               reason[RINGK_TOPO_REASON_LEN];
} ringk_topo_pair_t;

/** User overrides of the path choice. */
typedef struct ringk_policy {
    ringk_path_class_t p2p_level;    /**< P2P is used for classes up to this one */
    int                forced;       /**< 1: @a path is forced */
    ringk_path_t       path;
    const char        *path_name;    /**< the setting that forced it, for reasons given */
    const char        *level_name;   /**< the setting that gave @a p2p_level, NULL: default */
} ringk_policy_t;

/**
 * Loads the topology of this machine (@a xml_path NULL) or of an hwloc XML file. NVLinks come
 * from NVML on this machine, or from the info attributes RingkNVLinkVersion,
 * RingkNVSwitchLinks and RingkNVLinks ("BUSID:LINKS,...") of the GPUs' PCI objects in a file.
 * @return 0, or a negative errno with the problem, naming the file, in @a err.
 */
int ringk_topo_load(ringk_topo_t *topo, const char *xml_path, char *err, size_t err_len);

/** Classifies GPUs @a a and @a b of @a topo. Pure: depends on @a topo only. */
void ringk_topo_classify(const ringk_topo_t *topo, unsigned a, unsigned b,
                         ringk_topo_pair_t *pair_p);

/** Classifies GPU @a gpu against NUMA node @a numa (by os index). */
void ringk_topo_classify_numa(const ringk_topo_t *topo, unsigned gpu, int numa,
                              ringk_topo_pair_t *pair_p);

/**
 * Reads the overrides RINGK_P2P_LEVEL and RINGK_PATH from the given strings (NULL or empty:
 * unset); an error names the setting as @a level_name / @a path_name.
 * @return 0, or -EINVAL with the bad value and the accepted ones in @a err.
 */
int ringk_policy_parse_named(const char *p2p_level, const char *level_name, const char *path,
                             const char *path_name, ringk_policy_t *policy_p, char *err,
                             size_t err_len);

/** ringk_policy_parse_named() with the names RINGK_P2P_LEVEL and RINGK_PATH. */
int ringk_policy_parse(const char *p2p_level, const char *path, ringk_policy_t *policy_p,
                       char *err, size_t err_len);

/** The policy from the environment (RINGK_P2P_LEVEL, RINGK_PATH). */
int ringk_policy_from_env(ringk_policy_t *policy_p, char *err, size_t err_len);

/**
 * The path for a pair of that class under @a policy, with the reason in @a reason.
 * @return the path, or -EINVAL when a forced path cannot serve the pair (reason says why).
 */
int ringk_policy_apply(const ringk_policy_t *policy, const ringk_topo_pair_t *pair,
                       char *reason, size_t reason_len);

/**
 * Confirms a P2P path before it is trusted: on this machine (a topology loaded with no file),
 * P2P_NVLINK and P2P_PCIE are checked with a real write/read canary between the two GPUs, once
 * per pair in the process (later calls take the first one's outcome, and say so), and fall back
 * to HOST_STAGED when it fails; the reason is extended with the outcome. Paths from a topology
 * file are left as they are ("not verified"). *@a verified_p (may be NULL) is 1 when a P2P path
 * passed its canary, else 0.
 * @return the path to use.
 */
int ringk_topo_verify_path(const ringk_topo_t *topo, unsigned a, unsigned b, int path,
                           char *reason, size_t reason_len, int *verified_p);

/**
 * Packs a PCI bus id, "DDDD:BB:DD.F" or "BB:DD.F" in hex of either case, into a nonzero word
 * (as device locations travel in addresses). @return 0 when @a busid is not a bus id.
 */
uint64_t ringk_busid_pack(const char *busid);

/** Writes the canonical "dddd:bb:dd.f" of a packed bus id. */
void ringk_busid_unpack(uint64_t packed, char *buf, size_t len);

/** Index of the GPU with bus id @a busid in @a topo, or -1. */
int ringk_topo_find_gpu(const ringk_topo_t *topo, const char *busid);

const char *ringk_path_class_name(ringk_path_class_t cls);
const char *ringk_path_name(ringk_path_t path);

/** nvidia-smi style short label: X, NV#, PIX, PXB, PHB, SYS, NONE. */
void ringk_path_class_label(const ringk_topo_pair_t *pair, char *buf, size_t len);

#endif
