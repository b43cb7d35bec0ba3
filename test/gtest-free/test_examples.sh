#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The actor examples, as TAP: each must print its result verified against a sequential
# computation (or every value checked).
set -u
top=${RINGK_TOP_BUILDDIR:?}
n=0
fails=0
check() { # check NAME EXPECT CMD...
    local name=$1 expect=$2 out rc
    shift 2
    n=$((n + 1))
    out=$(timeout 120 "$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -q -- "$expect" <<<"$out"; then
        echo "ok $n - $name"
        echo "# $out"
    else
        echo "not ok $n - $name (exit $rc)"
        sed 's/^/# /' <<<"$out"
        fails=$((fails + 1))
    fi
}
echo "1..7"
check "pingpong (one process)" "100000 round trips between two ring kernels, 0 errors" \
    "$top/examples/pingpong" 100000
check "pipeline producer -> 4 workers -> aggregator" ": OK" "$top/examples/pipeline" 200000 4
check "pipeline with one worker" ": OK" "$top/examples/pipeline" 5000 1
check "heat stencil, 4 strips, halo exchange" "0 of 65536 cells differ.*: OK" \
    "$top/examples/heat" 256 256 100 4
check "heat stencil, 7 uneven strips" "0 of 6400 cells differ.*: OK" "$top/examples/heat" 100 64 50 7
check "pagerank, 4 partition kernels" "20000 vertices, 20 supersteps, 4 partition kernels.*: OK" \
    "$top/examples/pagerank" 20000 20 4
check "pagerank, 8 partition kernels" "50000 vertices, 10 supersteps, 8 partition kernels.*: OK" \
    "$top/examples/pagerank" 50000 10 8
[ $fails -eq 0 ]
