/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Forced include (-include) for UCX's own gtest suite built by contrib/ucx-gtest.sh: UCX's
 * transport-generic cases are instantiated for ringk, and for UCX's posix transport under its
 * own prefix, so that a case that fails for ringk can be rerun on posix for comparison.
 *
 * The UCX test headers are included here first; their include guards make the later #include
 * in each test source a no-op, so the macros redefined below are the ones the sources expand.
 * Only the transport lists and the UCP instantiation macros change; UCX's sources are compiled
 * unmodified from the UCX source tree.
 *
 * Instance prefixes (the part before '/' in a gtest name):
 *   UCT  ringk/       tl ringk           posix/       tl posix
 *   MD   ringk/       component ringk    posix/       component posix  (test_md, test_md_fork)
 *   UCP  ringk/       UCX_TLS=ringk      posix/       UCX_TLS=posix
 *        ringk_self/  UCX_TLS=ringk,self posix_self/  UCX_TLS=posix,self
 * Cases that a UCX source instantiates for a named transport of its own (all, shm, self, rc_x,
 * ...) keep those instances; contrib/ucx-gtest.sh runs only the prefixes it is asked for.
 */
#ifndef RINGK_GTEST_H_
#define RINGK_GTEST_H_

#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include <uct/uct_test.h>
#include <uct/test_md.h>
#include <ucp/ucp_test.h>

/* --- UCT: every transport list the generic instantiation macros expand ------------------- */
#undef UCT_TEST_NO_SELF_TLS
#define UCT_TEST_NO_SELF_TLS \
    ringk,                   \
    posix

#undef UCT_TEST_NO_GPU_MEM_TYPE_TLS
#define UCT_TEST_NO_GPU_MEM_TYPE_TLS \
    UCT_TEST_NO_SELF_TLS

#undef UCT_TEST_TLS
#define UCT_TEST_TLS \
    UCT_TEST_NO_SELF_TLS

/* --- UCT memory domains: test_md.cc names its components in a list of its own (a local macro
 * that cannot be redefined from here); the per-component macro it expands comes from
 * test_md.h, so it adds the ringk component next to posix and keeps every other one as is.
 * Each name of that list needs its RINGK_GTEST_MD_ALSO_<name>; a new name is a compile error
 * here, not a silently missing instance. */
#undef _UCT_MD_INSTANTIATE_TEST_CASE
#define _UCT_MD_INSTANTIATE_TEST_CASE(_test_case, _cmpt_name) \
    RINGK_GTEST_MD_INSTANTIATE(_test_case, _cmpt_name) \
    RINGK_GTEST_MD_ALSO_##_cmpt_name(_test_case)
#define RINGK_GTEST_MD_INSTANTIATE(_test_case, _cmpt_name) \
    INSTANTIATE_TEST_SUITE_P(_cmpt_name, _test_case, \
                             testing::ValuesIn(_test_case::enum_mds(#_cmpt_name)));
#define RINGK_GTEST_MD_ALSO_posix(_test_case) RINGK_GTEST_MD_INSTANTIATE(_test_case, ringk)
#define RINGK_GTEST_MD_ALSO_knem(_test_case)
#define RINGK_GTEST_MD_ALSO_cma(_test_case)
#define RINGK_GTEST_MD_ALSO_sysv(_test_case)
#define RINGK_GTEST_MD_ALSO_xpmem(_test_case)
#define RINGK_GTEST_MD_ALSO_cuda_cpy(_test_case)
#define RINGK_GTEST_MD_ALSO_cuda_ipc(_test_case)
#define RINGK_GTEST_MD_ALSO_rocm_cpy(_test_case)
#define RINGK_GTEST_MD_ALSO_rocm_ipc(_test_case)
#define RINGK_GTEST_MD_ALSO_ib(_test_case)
#define RINGK_GTEST_MD_ALSO_ugni(_test_case)
#define RINGK_GTEST_MD_ALSO_gdr_copy(_test_case)
#define RINGK_GTEST_MD_ALSO_sockcm(_test_case)
#define RINGK_GTEST_MD_ALSO_rdmacm(_test_case)

/* --- UCP: the generic and the GPU-aware instantiation ------------------------------------ */
#undef UCP_INSTANTIATE_TEST_CASE
#define UCP_INSTANTIATE_TEST_CASE(_test_case) \
    UCP_INSTANTIATE_TEST_CASE_TLS(_test_case, ringk,      "ringk") \
    UCP_INSTANTIATE_TEST_CASE_TLS(_test_case, ringk_self, "ringk,self") \
    UCP_INSTANTIATE_TEST_CASE_TLS(_test_case, posix,      "posix") \
    UCP_INSTANTIATE_TEST_CASE_TLS(_test_case, posix_self, "posix,self")

#undef UCP_INSTANTIATE_TEST_CASE_GPU_AWARE
#define UCP_INSTANTIATE_TEST_CASE_GPU_AWARE(_test_case) \
    UCP_INSTANTIATE_TEST_CASE_TLS_GPU_AWARE(_test_case, ringk,      "ringk") \
    UCP_INSTANTIATE_TEST_CASE_TLS_GPU_AWARE(_test_case, ringk_self, "ringk,self") \
    UCP_INSTANTIATE_TEST_CASE_TLS_GPU_AWARE(_test_case, posix,      "posix") \
    UCP_INSTANTIATE_TEST_CASE_TLS_GPU_AWARE(_test_case, posix_self, "posix,self")

#endif
