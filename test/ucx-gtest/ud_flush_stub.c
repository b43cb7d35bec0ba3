/* SPDX-License-Identifier: BSD-3-Clause */
/* Stands in for UCX's IB module in the gtest binary of contrib/ucx-gtest.sh. */
#include <uct/api/uct.h>

/*
 * UCX's ucp_test.cc compares each UCP lane's iface_flush with this function, to tell UD lanes,
 * and so links UCX's IB module (libuct_ib). No UD lane exists in the instances built here
 * (UCX_TLS is ringk or posix), so the comparison needs only an address that no iface uses: the
 * binary then runs against any UCX build of the version, one without IB support too.
 */
ucs_status_t uct_ud_iface_flush(uct_iface_h tl_iface, unsigned flags, uct_completion_t *comp)
{
    return UCS_ERR_UNSUPPORTED;
}
