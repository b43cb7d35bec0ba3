#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole test suite on a fresh Debian 12 machine: installs what is needed, builds ringk with
# CUDA (when the toolkit is there) and runs 'make check', runs the README's demonstration
# (contrib/demo.sh) and 'make distcheck' (its tests aside), runs UCX's own gtest suite over
# ringk (contrib/ucx-gtest.sh) against the installed UCX and a UCX build tree
# (contrib/ucx-build.sh), makes the offline bundle and runs it without network (contrib/bundle.sh,
# contrib/bundle-check.sh): a build without CUDA from the dist tarball and its 'make check', run
# as root; elsewhere a host-only build of the tree instead), runs the test suite (GPU self-test
# aside) under ASan+UBSan and the ring and runtime tests under TSan (contrib/sanitize.sh), the
# unit tests under valgrind (contrib/valgrind.sh), fuzzes the parsers for 30 s each
# (contrib/fuzz.sh), runs the fault suite (contrib/faults.sh) and a 60 s soak of 4 processes
# (contrib/soak.sh), and ends with 'N passed, N failed, N skipped'. Exits non-zero on a
# failure.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

bash contrib/setup.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

passed=0 failed=0 skipped=0
# A stage's header, with the seconds the suite has run so far (progress on a long run).
stage() {
    printf '=== [%4d s] %s\n' "$SECONDS" "$*"
}
# Adds the counts of an automake test-suite.log to the totals.
tally() {
    local log=$1 p f e x s
    p=$(sed -n 's/^# PASS: *//p' "$log" | head -n1)
    f=$(sed -n 's/^# FAIL: *//p' "$log" | head -n1)
    e=$(sed -n 's/^# ERROR: *//p' "$log" | head -n1)
    x=$(sed -n 's/^# XPASS: *//p' "$log" | head -n1)
    s=$(sed -n 's/^# SKIP: *//p' "$log" | head -n1)
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0} + ${e:-0} + ${x:-0}))
    skipped=$((skipped + ${s:-0}))
}

# run_suite NAME BUILDDIR [CONFIGURE ARGS...]
run_suite() {
    local name=$1 dir=$2
    shift 2
    stage "$name: build"
    if ! bash contrib/build.sh "$dir" "$@"; then
        echo "=== $name: build FAILED"
        failed=$((failed + 1))
        return
    fi
    stage "$name: make check"
    rm -f "$dir/test-suite.log"
    (cd "$dir" && make -j"$(nproc)" check 2>&1 | grep -E '^(PASS|FAIL|ERROR|SKIP|XPASS|XFAIL):|^# ')
    if [ -f "$dir/test-suite.log" ]; then
        tally "$dir/test-suite.log"
        grep -q '^# \(FAIL\|ERROR\|XPASS\): *[1-9]' "$dir/test-suite.log" && cat "$dir/test-suite.log"
    else
        echo "=== $name: no test-suite.log"
        failed=$((failed + 1))
    fi
}

# Adds a TAP script's results (its "ok" / "not ok" lines) to the totals.
tally_tap() {
    passed=$((passed + $(grep -c '^ok ' <<<"$1")))
    failed=$((failed + $(grep -c '^not ok ' <<<"$1")))
}

shm_before=$(ls -A /dev/shm 2>/dev/null | sort)

run_suite "default configuration" _build
# The host-only configuration (--without-cuda) is built and tested by the offline-bundle stage
# below, from the dist tarball; without root (no namespaces for that stage) it is built here.
if [ "$(id -u)" != 0 ]; then
    run_suite "host-only configuration (--without-cuda)" _build-nocuda --without-cuda
fi

# the README's first command, as a user runs it (test_readme.sh runs the README's other
# commands); it builds nothing more: _build is made above
stage "the README's main command: bash contrib/demo.sh"
if out=$(timeout 600 bash contrib/demo.sh 2>&1); then
    echo "PASS: contrib/demo.sh"
    passed=$((passed + 1))
else
    tail -n 40 <<<"$out"
    echo "FAIL: contrib/demo.sh"
    failed=$((failed + 1))
fi

# distcheck builds the tarball's tree (CUDA included) read-only, its test programs, installs,
# uninstalls and cleans, but runs no test (TESTS=): the same tests run from the same tarball in
# the offline-bundle stage, and from this tree in 'make check' above.
stage "make distcheck (TESTS=)"
if (cd _build && make -j"$(nproc)" distcheck TESTS= >distcheck.out 2>&1); then
    echo "PASS: make distcheck"
    passed=$((passed + 1))
else
    tail -n 60 _build/distcheck.out
    echo "FAIL: make distcheck"
    failed=$((failed + 1))
fi

# UCX's own gtest conformance suite, instantiated for ringk (contrib/ucx-gtest.sh): every case
# against the installed UCX, then against a UCX build tree of the same release built from its
# source (contrib/ucx-build.sh), less its three slowest suites there (test_ucp_tag_xfer,
# test_ucp_tag_match_rndv, uct_p2p_rma_test: data paths of up to gigabytes that just ran against
# the installed UCX, two thirds of that run's time). Passing cases are counted, not printed;
# skipped ones are printed with UCX's reason, failures with their first lines.
tally_gtest() { # tally_gtest RC OUTPUT
    local rc=$1 out=$2 nf
    grep -v '^ok [0-9]* - [^#]*$' <<<"$out"
    passed=$((passed + $(grep -c '^ok [0-9]* - [^#]*$' <<<"$out")))
    skipped=$((skipped + $(grep -c '^ok [0-9]* - .*# SKIP' <<<"$out")))
    nf=$(grep '^not ok ' <<<"$out" | grep -vc '# TODO known')
    failed=$((failed + nf))
    if [ "$rc" -ne 0 ] && [ "$nf" -eq 0 ]; then
        failed=$((failed + 1)) # it failed before any case did (build, plugin not loaded)
    fi
}
# suites at once: one a core, at most 4 (each runs under wall-clock limits)
gt_par=$(nproc)
[ "$gt_par" -gt 4 ] && gt_par=4
stage "UCX $(pkg-config --modversion ucx) gtest over ringk, installed UCX (contrib/ucx-gtest.sh)"
gt_out=$(bash contrib/ucx-gtest.sh -b _build -J "$gt_par" run 2>&1)
tally_gtest $? "$gt_out"
stage "UCX gtest over ringk, UCX build tree (contrib/ucx-build.sh _build-ucx)"
if ucxb=$(bash contrib/ucx-build.sh _build-ucx); then
    L=$ucxb/src
    gt_out=$(UCX_GTEST_LIBDIR=$L/ucs/.libs:$L/uct/.libs:$L/ucm/.libs:$L/ucp/.libs \
             bash contrib/ucx-gtest.sh -b _build -J "$gt_par" -l ringk-ucx-build \
             -f '-*/test_ucp_tag_xfer.*:*/test_ucp_tag_match_rndv.*:*/uct_p2p_rma_test.*' \
             run 2>&1)
    tally_gtest $? "$gt_out"
else
    echo "FAIL: UCX build (contrib/ucx-build.sh)"
    failed=$((failed + 1))
fi

# The offline bundle for GPU nodes (contrib/bundle.sh), run as such a node would run it
# (contrib/bundle-check.sh): a fresh directory, no network, the tree that made it and the
# system's UCX/hwloc/Check headers, pkg-config and CUDA hidden. It must build host-only from
# the dist tarball, run every host test on the bundle's own libraries (the suite's host-only
# configuration: each of its tests is counted), report the GPU tests skipped, and exit 0.
stage "offline bundle (contrib/bundle.sh + contrib/bundle-check.sh)"
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: offline bundle check (needs root for its namespaces)"
    skipped=$((skipped + 1))
else
    bwork=$(mktemp -d "${TMPDIR:-/tmp}/ringk-bundle-check.XXXXXX")
    if bash contrib/bundle.sh _build/bundle >_build/bundle.out 2>&1 &&
       bash contrib/bundle-check.sh _build/bundle "$bwork" >_build/bundle-check.out 2>&1 &&
       grep -q 'SKIP.test/check/test_kernels' "$bwork/report/report.txt"; then
        grep '^bundle:' _build/bundle.out
        sed -n '/^steps:/,$p' "$bwork/report/report.txt"
        read -r bp bf bs < <(sed -n 's/^tests: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' \
                             "$bwork/report/report.txt")
        passed=$((passed + ${bp:-0})) failed=$((failed + ${bf:-0})) skipped=$((skipped + ${bs:-0}))
        if [ "${bp:-0}" -gt 0 ]; then
            echo "PASS: offline bundle builds and passes its host tests without network"
            passed=$((passed + 1))
        else
            echo "FAIL: offline bundle: no test of its host-only build passed"
            failed=$((failed + 1))
        fi
    else
        tail -n 30 _build/bundle.out _build/bundle-check.out
        [ -f "$bwork/report/report.txt" ] && cat "$bwork/report/report.txt"
        echo "FAIL: offline bundle"
        failed=$((failed + 1))
    fi
    rm -rf "$bwork"
fi

# Sanitizers: AddressSanitizer + UBSan over every test but the GPU self-test (programs that are
# not instrumented get the ASan runtime preloaded), ThreadSanitizer over the ring and runtime
# tests.
for mode in asan tsan; do
    stage "sanitizer: $mode"
    bash contrib/sanitize.sh $mode
    if [ -f "_build-$mode/test-suite.log" ]; then
        tally "_build-$mode/test-suite.log"
        [ -f "_build-$mode/test-suite-preload.log" ] && tally "_build-$mode/test-suite-preload.log"
    else
        echo "=== sanitizer $mode: build or run FAILED"
        failed=$((failed + 1))
    fi
done

# valgrind memcheck over the unit tests (leaks checked where the test allows it).
stage "valgrind memcheck (contrib/valgrind.sh)"
vg_out=$(bash contrib/valgrind.sh _build 2>&1)
echo "$vg_out"
tally_tap "$vg_out"

# Bounded fuzzing of what comes from outside: ring cells, topology files, option strings.
stage "fuzzing (contrib/fuzz.sh ${RINGK_FUZZ_SECONDS:-30}s per target)"
fuzz_out=$(bash contrib/fuzz.sh "${RINGK_FUZZ_SECONDS:-30}" 2>&1)
echo "$fuzz_out"
tally_tap "$fuzz_out"

# The fault suite: kill -9 of each rank of a 3-process job and an exit without cleanup, at
# random moments of the traffic (over the ringk transport), twice each.
stage "fault suite (contrib/faults.sh)"
faults_out=$(bash contrib/faults.sh _build 2 2>&1)
echo "$faults_out"
tally_tap "$faults_out"
grep -q '^1\.\.[1-9]' <<<"$faults_out" || failed=$((failed + 1))

# The soak: 4 processes for 60 s, every message counted and checksummed, RSS flat.
stage "soak (contrib/soak.sh, 4 processes, ${RINGK_SOAK_SECONDS:-60} s)"
if bash contrib/soak.sh _build "${RINGK_SOAK_SECONDS:-60}" 4 >_build/soak.out 2>&1; then
    grep '^soak: ' _build/soak.out
    echo "PASS: soak"
    passed=$((passed + 1))
else
    # what each rank said besides its progress lines, then soak.sh's summary last, where the
    # tail of this output (all that some CI views show) has it
    for log in _build/soak/logs/rank*.log; do
        [ -f "$log" ] || continue
        echo "--- ${log##*/}, without its progress lines:"
        grep -v '^soak \[rank [0-9]* of [0-9]*\] ' "$log" | head -n 20
    done
    sed -n '/^soak: summary/,$p' _build/soak.out
    echo "FAIL: soak"
    failed=$((failed + 1))
fi

# The transport never creates files in /dev/shm (its segments are unlinked memfds); nothing the
# suite ran, kill -9 included, may leave one behind.
stage "/dev/shm after the suite"
left=$(comm -13 <(echo "$shm_before") <(ls -A /dev/shm 2>/dev/null | sort))
if [ -z "$left" ]; then
    echo "PASS: nothing left in /dev/shm"
    passed=$((passed + 1))
else
    echo "FAIL: left in /dev/shm: $left"
    failed=$((failed + 1))
fi

stage "end"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
