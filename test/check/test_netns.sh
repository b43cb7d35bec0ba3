#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Multi-host test, as TAP: two network namespaces made (and removed) here, joined by a veth pair
# with private test addresses, stand for two hosts. Ranks 0 and 1 run in the first, rank 2 in
# the second. Kernels in different namespaces must exchange messages over UCX tcp and kernels in
# the same namespace over ringk (UCX's own log says which lanes each endpoint uses), with every
# message delivered in order (topics: per-subscriber order and counts; pipeline: the sum).
set -u
top=${RINGK_TOP_BUILDDIR:?}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "1..0 # SKIP needs root and iproute2 to make network namespaces"
    exit 0
fi
id=$$
a=ringkA$id b=ringkB$id net=10.231.$((id % 250)).
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
if ! { ip netns add "$a" && ip netns add "$b" &&
       ip link add va$id type veth peer name vb$id &&
       ip link set va$id netns "$a" && ip link set vb$id netns "$b" &&
       ip -n "$a" addr add ${net}1/24 dev va$id && ip -n "$b" addr add ${net}2/24 dev vb$id &&
       ip -n "$a" link set va$id up && ip -n "$b" link set vb$id up &&
       ip -n "$a" link set lo up && ip -n "$b" link set lo up; } 2>/dev/null; then
    echo "1..0 # SKIP cannot create network namespaces here"
    exit 0
fi
wrapper=$top/contrib/ringk-run
port=$((26000 + id % 20000))
n=0
fails=0
echo "1..3"

# run3 NAME PROGRAM ARGS...: ranks 0 and 1 in namespace a, rank 2 in namespace b
run3() {
    local name=$1 r rc=0 ns logs=()
    shift
    port=$((port + 1))
    for r in 2 1 0; do
        logs[$r]=$(mktemp)
        ns=$a; [ $r = 2 ] && ns=$b
        ip netns exec "$ns" "$wrapper" env RINGK_ROOT=${net}1:$port RINGK_SIZE=3 RINGK_RANK=$r \
            UCX_TLS=ringk,tcp,self UCX_LOG_LEVEL=info timeout 120 "$@" >"${logs[$r]}" 2>&1 &
        pids[$r]=$!
    done
    for r in 0 1 2; do
        wait ${pids[$r]} || rc=$?
    done
    n=$((n + 1))
    if [ $rc -eq 0 ] &&
       grep -q "am(ringk/ring)" "${logs[0]}" && grep -q "am(tcp/" "${logs[0]}" &&
       grep -q "am(ringk/ring)" "${logs[1]}" && grep -q "am(tcp/" "${logs[1]}" &&
       grep -q "am(tcp/" "${logs[2]}" && ! grep -q "ringk/ring" "${logs[2]}" &&
       ! grep -qE "FAIL|MISMATCH" "${logs[@]}"; then
        echo "ok $n - $name"
        grep -hE "ep_cfg|: OK|done" "${logs[@]}" | sed -e 's/^.*INFO  */  /' -e 's/^/# /'
    else
        echo "not ok $n - $name (exit $rc)"
        cat "${logs[@]}" | tail -n 40 | sed 's/^/# /'
        fails=$((fails + 1))
    fi
    rm -f "${logs[@]}"
}
run3 "topics over ringk within a namespace and tcp across, 3 ranks" \
    "$top/test/check/job_topics" 1000
run3 "pipeline with workers on both hosts" "$top/examples/pipeline" 30000 3
run3 "rank 0 leaves right after sending to both hosts: nothing lost, not counted lost" \
    "$top/test/check/job_leave" 20000
[ $fails -eq 0 ]
