#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The actor examples, as TAP: each must exit 0 and end with a RESULT line (result.sh) whose
# values show its result verified against a sequential computation (or every value checked).
set -u
top=${RINGK_TOP_BUILDDIR:?}
. "$(dirname "$0")/result.sh"
n=0
fails=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
check() { # check NAME CONDS CMD...: CMD as one process; CONDS as results' SPEC for rank 0
    local name=$1 conds=$2 rc why
    shift 2
    n=$((n + 1))
    timeout 120 "$@" >"$log" 2>&1
    rc=$?
    if why=$(results "$log" 1 "0: $conds" -- "$@") && [ $rc -eq 0 ]; then
        echo "ok $n - $name"
        grep -v "^RESULT " "$log" | sed 's/^/# /'
    else
        echo "not ok $n - $name (exit $rc)"
        sed 's/^/# /' "$log" <(echo "$why")
        fails=$((fails + 1))
    fi
}
echo "1..7"
check "pingpong (one process)" "rounds=100000 errors=0" "$top/examples/pingpong" 100000
check "pipeline producer -> 4 workers -> aggregator" \
    "items=200000 workers=4 sum=sequential match=1" "$top/examples/pipeline" 200000 4
check "pipeline with one worker" "items=5000 workers=1 sum=sequential match=1" \
    "$top/examples/pipeline" 5000 1
check "heat stencil, 4 strips, halo exchange" "strips=4 steps=100 cells=65536 differ=0 match=1" \
    "$top/examples/heat" 256 256 100 4
check "heat stencil, 7 uneven strips" "strips=7 steps=50 cells=6400 differ=0 match=1" \
    "$top/examples/heat" 100 64 50 7
check "pagerank, 4 partition kernels" "vertices=20000 supersteps=20 partitions=4 match=1" \
    "$top/examples/pagerank" 20000 20 4
check "pagerank, 8 partition kernels" "vertices=50000 supersteps=10 partitions=8 match=1" \
    "$top/examples/pagerank" 50000 10 8
[ $fails -eq 0 ]
