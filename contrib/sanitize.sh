#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# sanitize.sh asan|tsan: builds ringk with AddressSanitizer + UndefinedBehaviorSanitizer, or with
# ThreadSanitizer, in its own build directory (host-only) and runs the tests that exercise the
# ring protocol, the runtime's executors, the topology parser and the examples under it. The
# results land in BUILDDIR/test-suite.log like any 'make check'.
#   asan: test_ring, test_runtime, test_kernel_api, test_device(_streams), test_topo,
#         test_examples.sh, test_uct (the transport plugin, built with the sanitizers and
#         preloaded), test_ucp, test_job.sh (jobs of 2-4 processes), test_info.sh, test_netns.sh, test_abi.sh. Leaks
#         checked; one leak inside hwloc's dlclose'd PCI plugin during a live topology load is
#         suppressed: contrib/lsan.supp.
#         Then test_ucp.sh and test_mpi.sh, whose programs (ucx_perftest, mpirun's) are not
#         instrumented, with the ASan runtime preloaded and leak checks off (results in
#         test-suite-preload.log). So every test of the suite runs under ASan+UBSan but the GPU
#         self-test. RINGK_ASAN_TESTS replaces the first list (and skips the second run).
#   tsan: test_ring, test_runtime, test_kernel_api, test_device(_streams) (CK_FORK=no: TSan
#         cannot follow fork; UCX_MEM_EVENTS=no: UCX's libucm memory hooks crash under TSan at
#         thread exit).
#         RINGK_TSAN_TESTS replaces the list, e.g. RINGK_TSAN_TESTS=test/check/test_job.sh
#         for the multi-process jobs (minutes on 2 cores, so not in CI).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: sanitize.sh asan|tsan}
case $mode in
    asan)
        flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
        tests="${RINGK_ASAN_TESTS:-test/check/test_ring test/check/test_runtime test/check/test_kernel_api test/check/test_device test/check/test_device_streams test/check/test_dev_slab test/check/test_topo test/check/test_examples.sh test/check/test_uct test/check/test_ucp test/check/test_job.sh test/check/test_info.sh test/check/test_netns.sh test/check/test_abi.sh test/check/test_ipc test/check/test_peer test/check/test_wire}"
        export ASAN_OPTIONS="detect_leaks=1:verify_asan_link_order=0:fast_unwind_on_malloc=0"
        export LSAN_OPTIONS="suppressions=$top/contrib/lsan.supp:print_suppressions=0"
        export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" ;;
    tsan)
        flags="-fsanitize=thread"
        tests="${RINGK_TSAN_TESTS:-test/check/test_ring test/check/test_runtime test/check/test_kernel_api test/check/test_device test/check/test_device_streams test/check/test_ipc test/check/test_peer}"
        export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
        export CK_FORK=no UCX_MEM_EVENTS=no ;;
    *)
        echo "sanitize.sh: mode '$mode' is not asan or tsan" >&2
        exit 2 ;;
esac
dir=_build-$mode
bash "$top/contrib/build.sh" "$dir" --without-cuda --enable-debug \
    CFLAGS="$flags -O1 -g" LDFLAGS="$flags" >/dev/null
cd "$top/$dir"
rm -f test-suite.log test-suite-preload.log
make -j"$(nproc)" check TESTS="$tests" 2>&1 | grep -E '^(PASS|FAIL|ERROR|SKIP|XPASS|XFAIL):|^# ' || true
ok=1
[ -f test-suite.log ] && ! grep -q '^# \(FAIL\|ERROR\|XPASS\): *[1-9]' test-suite.log || ok=0
if [ "$mode" = asan ] && [ -z "${RINGK_ASAN_TESTS:-}" ]; then
    # ucx_perftest and mpirun's programs are not instrumented: the ASan runtime is preloaded
    # for them (and so for every program these two scripts start: leaks are not checked here,
    # the shell and the tools would report their own), so the instrumented plugin loads
    make -j"$(nproc)" check TESTS="test/check/test_ucp.sh test/check/test_mpi.sh" \
        TEST_SUITE_LOG=test-suite-preload.log \
        LD_PRELOAD="$(gcc -print-file-name=libasan.so)" \
        ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0" 2>&1 |
        grep -E '^(PASS|FAIL|ERROR|SKIP|XPASS|XFAIL):|^# ' || true
    [ -f test-suite-preload.log ] &&
        ! grep -q '^# \(FAIL\|ERROR\|XPASS\): *[1-9]' test-suite-preload.log || ok=0
fi
[ $ok = 1 ]
