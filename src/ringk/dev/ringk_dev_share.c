/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk: a CUDA device's memory shared with the device kernels of other processes of the
 * node. A process of a job of several keeps the mapped slab of a CUDA device (control blocks,
 * doorbells, outboxes) in a sealed memfd it registers with CUDA, which another process opens
 * through /proc/<pid>/fd and registers too, and the device memory slab (the inboxes) in a cuMem
 * allocation made exportable as a POSIX file descriptor. Such a descriptor names an
 * allocation of the driver, not a file: /proc/<pid>/fd cannot open it again, so the process
 * hands it out itself (ringk_dev_fdsvc.c). A sender's
 * mappings hold the pages after the exporter frees them or exits. docs/gpu.md, "Device kernels
 * of several processes". */
#include "ringk_config.h"

#define _GNU_SOURCE
#include "dev.h"
#include "core/ringk_cuda.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Gives back the slab file of @a device: unregistered (where it was @a registered) and
 * unmapped now, or once no device kernel is resident (ringk_cuda_host_release()), closed. */
static void slab_file_drop(ringk_dev_device_t *device, int registered)
{
    if (registered) {
        ringk_cuda_host_release(device->file + RINGK_DEV_SLAB_FILE_HDR, device->file,
                                device->file_bytes);
    } else {
        munmap(device->file, device->file_bytes);
    }
    close(device->file_fd);
    device->file       = NULL;
    device->file_fd    = -1;
    device->file_token = 0;
}

int ringk_dev_cuda_slabs_share(ringk_dev_device_t *device, char *why, size_t why_len)
{
    void *mapped_dev = NULL, *mem = NULL;
    uint64_t mem_bytes = 0;
    int ret, fd = -1;

    if (ringk_dev_cuda_launched() > 0) {
        snprintf(why, why_len, "device kernels of this process run (cudaHostRegister would "
                 "wait for them)");
        return -EBUSY;
    }
    if ((ret = ringk_dev_slab_file_make(device, RINGK_DEV_SLAB_FILE_HDR + device->mapped.size,
                                        why, why_len)) != 0) {
        return ret;
    }
    if ((ret = ringk_cuda_host_map(device->cuda_index, device->file + RINGK_DEV_SLAB_FILE_HDR,
                                   device->mapped.size, &mapped_dev, why, why_len)) != 0) {
        slab_file_drop(device, 0);
        return ret;
    }
    if ((ret = ringk_cuda_vmm_alloc(device->cuda_index, device->mem.size, &mem, &mem_bytes, &fd,
                                    why, why_len)) != 0) {
        slab_file_drop(device, 1);
        return ret;
    }
    if ((ret = ringk_dev_fdsvc_start(&device->svc, fd, device->file_token, mem_bytes, why,
                                     why_len)) != 0) {
        close(fd);
        ringk_cuda_vmm_free(mem, mem_bytes);
        slab_file_drop(device, 1);
        return ret;
    }
    device->mapped.host = device->file + RINGK_DEV_SLAB_FILE_HDR;
    device->mapped.dev  = mapped_dev;
    device->mem.host    = NULL; /* the host has no address for it */
    device->mem.dev     = mem;
    device->mem_fd      = fd;
    device->mem_bytes   = mem_bytes;
    device->cuda_shared = 1;
    return 0;
}

void ringk_dev_cuda_slabs_unshare(ringk_dev_device_t *device)
{
    if (!device->cuda_shared) {
        return;
    }
    ringk_dev_fdsvc_stop(device->svc);
    close(device->mem_fd);
    ringk_cuda_vmm_free(device->mem.dev, device->mem_bytes); /* later while kernels run */
    slab_file_drop(device, 1);
    device->svc         = NULL;
    device->mem_fd      = -1;
    device->mem_bytes   = 0;
    device->cuda_shared = 0;
}

/* ---- a sender's side ---------------------------------------------------------------------- */

int ringk_dev_rmap_cuda(int dev, const ringk_dev_export_t *e, struct ringk_dev_rmap *m,
                        char *why, size_t why_len)
{
    void *reg = NULL, *mem = NULL;
    uint64_t bytes = 0;
    int ret, fd = -1;

    if ((dev < 0) || (dev >= 32)) {
        snprintf(why, why_len, "CUDA device %d: not a device of this process", dev);
        return -EINVAL;
    }
    /* kernels made and not launched (a job's, before ringk_ctx_start) are no reason to wait */
    if (ringk_dev_cuda_launched() > 0) {
        snprintf(why, why_len, "device kernels of this process run (cudaHostRegister would "
                 "wait for them)");
        return -EBUSY;
    }
    if ((ret = ringk_cuda_host_map(dev, m->base, m->bytes, &reg, why, why_len)) != 0) {
        return ret;
    }
    m->dev_base = reg; /* registered: on failure below, stays so where CUDA keeps it */
    if ((ret = ringk_dev_fdsvc_fetch(e->pid, e->token, RINGK_DEV_FDSVC_WAIT_MS, &fd, &bytes,
                                     why, why_len)) != 0) {
        goto err;
    }
    if (bytes != e->mem_bytes) {
        snprintf(why, why_len, "its device memory is %" PRIu64 " bytes, its directory says %"
                 PRIu64, bytes, e->mem_bytes);
        ret = -EINVAL;
        close(fd);
        goto err;
    }
    /* mapped in the sender's GPU's context with access for that GPU alone (the caller found
     * the memory on it, or on a GPU it reaches by peer access): the memory's GPU gets no
     * context in this process */
    ret = ringk_cuda_vmm_import_to(dev, fd, bytes, &mem, why, why_len);
    close(fd);
    if (ret != 0) {
        goto err;
    }
    m->mem_dev   = mem;
    m->mem_bytes = bytes;
    m->access    = 1u << dev;
    return 0;

err:
    return ret; /* the file stays registered: the caller gives it back */
}

int ringk_dev_rmap_grant(struct ringk_dev_rmap *m, int dev, char *why, size_t why_len)
{
    int ret;

    if (m->mem_dev == NULL) { /* the emulated device's: no device memory */
        return 0;
    }
    if ((dev < 0) || (dev >= 32)) {
        snprintf(why, why_len, "CUDA device %d: not a device of this process", dev);
        return -EINVAL;
    }
    if (m->access & (1u << dev)) {
        return 0;
    }
    /* cuMemSetAccess may wait for the device's work, as mapping does (ringk_dev_rmap_cuda()
     * refuses then too) */
    if (ringk_dev_cuda_launched() > 0) {
        snprintf(why, why_len, "device kernels of this process run (cuMemSetAccess, which gives "
                 "CUDA device %d access to that memory, could wait for them)", dev);
        return -EBUSY;
    }
    /* the exporter's GPU, or a peer the caller found able to reach it (remote_peer_refused) */
    if ((ret = ringk_cuda_vmm_grant(m->mem_dev, m->mem_bytes, dev, why, why_len)) != 0) {
        return ret;
    }
    m->access |= 1u << dev;
    return 0;
}

void ringk_dev_rmap_unmap(struct ringk_dev_rmap *m)
{
    if (m->mem_dev != NULL) {
        ringk_cuda_vmm_close(RINGK_CUDA_IPC_POSIX_FD, m->mem_dev, m->mem_bytes);
        m->mem_dev = NULL;
    }
    if (m->dev_base != NULL) { /* now, or once no device kernel is resident */
        ringk_cuda_host_release(m->base, m->base, m->bytes);
    } else {
        munmap(m->base, m->bytes);
    }
    m->dev_base = NULL;
    m->base     = NULL;
}
