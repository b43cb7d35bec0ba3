#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# valgrind.sh [BUILDDIR]: the unit tests under valgrind memcheck, as TAP (default _build).
# test_ring, test_runtime, test_kernel_api, test_device, test_topo, test_ipc and test_peer run
# with full leak checking (definite leaks are errors; one leak inside hwloc's PCI plugin is
# suppressed in contrib/valgrind.supp);
# test_uct (the transport plugin, preloaded by ringk-run) runs with memory-error checking only:
# its two-process tests fork children that leave through _exit() with UCX objects still open, which
# valgrind would count as leaks (ASan's leak checker covers test_uct in contrib/sanitize.sh).
# CK_FORK=no so that valgrind follows the tests themselves; children a test forks are not
# checked (--child-silent-after-fork: test_topo's child crashes hwloc on purpose). The tests
# run as many at once as there are cores (RINGK_VALGRIND_JOBS): valgrind runs a process's
# threads one at a time, so each takes a core of its own; the TAP lines keep their order. Exits
# non-zero on any error.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-_build}
case $build in /*) ;; *) build=$top/$build ;; esac
command -v valgrind >/dev/null || {
    apt-get install -y -q --no-install-recommends valgrind >/dev/null 2>&1 ||
        { echo "1..0 # SKIP valgrind is not installed"; exit 0; }
}
export RINGK_TOP_BUILDDIR=$build RINGK_TOP_SRCDIR=$top CK_FORK=no
vg=(valgrind --error-exitcode=9 --quiet --suppressions="$top/contrib/valgrind.supp"
    --track-origins=no --child-silent-after-fork=yes)
tests="test_ring:full test_runtime:full test_kernel_api:full test_device:full test_topo:full test_uct:no test_ipc:full test_peer:full"
jobs=${RINGK_VALGRIND_JOBS:-$(nproc)}
echo "1..$(wc -w <<<"$tests")"
# run: every test in the background, at most $jobs at once; each leaves its exit status in
# $t.valgrind.rc beside its log
for spec in $tests; do
    t=${spec%%:*} leaks=${spec#*:}
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n
    done
    (cd "$build" && ./libtool --mode=execute contrib/ringk-run "${vg[@]}" \
        --leak-check=$leaks --errors-for-leak-kinds=definite "test/check/$t" \
        >"test/check/$t.valgrind.log" 2>&1; echo $? >"test/check/$t.valgrind.rc") &
done
wait
n=0 fails=0
for spec in $tests; do
    t=${spec%%:*} leaks=${spec#*:}
    n=$((n + 1))
    log=$build/test/check/$t.valgrind.log
    rc=$(cat "$build/test/check/$t.valgrind.rc" 2>/dev/null || echo 99)
    passed=$(grep -c '^ok ' "$log") failed_tests=$(grep -c '^not ok ' "$log")
    errors=$(grep -c '^==[0-9]*== [A-Z]' "$log")
    if [ $rc -eq 0 ] && [ "$failed_tests" = 0 ]; then
        echo "ok $n - $t under memcheck (leaks: $leaks): $passed checks passed, no errors"
    else
        echo "not ok $n - $t under memcheck: exit $rc, $failed_tests checks failed, $errors reports"
        grep -E '^(not ok|==[0-9]+== )' "$log" | head -n 30 | sed 's/^/# /'
        fails=$((fails + 1))
    fi
done
[ $fails -eq 0 ]
