/* SPDX-License-Identifier: BSD-3-Clause */
/* The device kernels of the device executor's tests (test/kernels/ringk_dev_test.cu), for the host
 * programs that start them. */
#ifndef RINGK_DEV_TEST_H
#define RINGK_DEV_TEST_H

#include <ringk/api/ringk_device.h>

#define RINGK_DEV_TEST_PRODUCERS 8
#define RINGK_DEV_TEST_BIG       512   /* above the max_out the tests give dev_bad */

/* What a test kernel saw; its argument points to one. */
typedef struct ringk_dev_test {
    uint64_t count;                       /* messages handled */
    uint64_t sum;                         /* of the producers' counters */
    uint64_t out_of_order, bad, stamped;
    uint32_t next[RINGK_DEV_TEST_PRODUCERS];
    int      last_error;
    int      codes[8];
    uint32_t ring_scopes;                 /* the kernel's rings' scopes: inbox | ingress << 8 |
                                             outbox << 16 (RINGK_RING_SCOPE_*) */
    uint64_t staged;                      /* messages handed over in the staging buffer */
    uint64_t tail_sum;                    /* of the payload bytes after the first 8 */
    uint64_t hlc;                         /* echo: its clock (ringk_dev_hlc_tick) at its last
                                             message */
} ringk_dev_test_t;

#ifdef __cplusplus
extern "C" {
#endif
extern const ringk_device_entry_t ringk_dev_test_count;
extern const ringk_device_entry_t ringk_dev_test_echo;
extern const ringk_device_entry_t ringk_dev_test_forward;
extern const ringk_device_entry_t ringk_dev_test_publish;
extern const ringk_device_entry_t ringk_dev_test_bad;
extern const ringk_device_entry_t ringk_dev_test_barrier;
extern const ringk_device_entry_t ringk_dev_test_recv;
/* nvcc only: the arg check's rules (ringk_device_cuda.h) on an account of a pointer built by
 * the test, and whether an address is in a mapping of the process */
int ringk_dev_test_judge(int device, const void *p, int type, int owner, const void *dev_ptr,
                         int pageable, int host_ptr, char *why, size_t why_len);
int ringk_dev_test_mapped_here(const void *p);
#ifdef __cplusplus
}
#endif

#endif
