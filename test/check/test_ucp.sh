#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# UCP programs over ringk alone (UCX_TLS=ringk,self), as TAP: ucx_perftest tag, stream, put and
# get tests at 8 B, 4 KiB, 1 MiB and 16 MiB between two processes, the four atomic tests, plus
# the UCT-level tests.
# Each test asserts from UCX's log that the endpoint's lanes are ringk's.
set -u
perftest=${UCX_PERFTEST:-$(command -v ucx_perftest)}
if [ -z "$perftest" ]; then
    echo "1..0 # SKIP ucx_perftest not found"
    exit 0
fi
# below the ephemeral range (32768+), where UCX and others bind ports; apart from test_job.sh
# and from ucx_perftest's default 13337, which test_readme.sh's README commands use
port=$((10000 + ($$ % 3000)))
n=0
fails=0
tests=()
for t in tag_lat tag_bw stream_lat stream_bw ucp_put_lat ucp_put_bw ucp_get; do
    for s in 8 4096 1048576 16777216; do
        tests+=("ucp $t $s")
    done
done
# UCP atomics on memory UCP allocates go to ringk's mapped device (CPU atomics on the mapped
# allocation); ucp_add, which has no reply, ends with a worker flush.
for t in ucp_add ucp_fadd ucp_swap ucp_cswap; do
    tests+=("ucp $t 8")
done
for t in am_lat am_bw put_lat put_bw; do
    tests+=("uct $t 8" "uct $t 4096")
done
tests+=("uct am_bw 4096 zcopy")
# the mapped device: RMA and atomics by loads and stores on ringk_shm memory
tests+=("uct put_lat 8 - mapped" "uct put_bw 65536 zcopy mapped" "uct put_bw 16384 bcopy mapped"
        "uct put_bw 4096 bcopy mapped"
        "uct get 1048576 zcopy mapped" "uct get 65536 bcopy mapped" "uct add_lat 8 - mapped"
        "uct fadd 8 - mapped" "uct swap 8 - mapped" "uct cswap 8 - mapped" "uct add_mr 8 - mapped")
tests+=("pick tag_lat 8")
echo "1..${#tests[@]}"
for spec in "${tests[@]}"; do
    read -r level t s layout dev <<<"$spec"
    [ "$layout" = - ] && layout=
    [ "$level" = uct ] && dev=${dev:-ring}
    n=$((n + 1))
    port=$((port + 1))
    iters=2000
    [ "$s" -ge 1048576 ] && iters=20
    if [ "$level" = ucp ]; then
        env=(UCX_TLS=ringk,self UCX_LOG_LEVEL=info)
        args=(-t "$t" -s "$s" -n "$iters")
        # the lanes UCP configured: RMA includes the mapped device (the lane for memory UCP
        # allocates), atomics use only it, the rest goes over the rings
        case $t in
            ucp_put*|ucp_get) want="rma(.*ringk/mapped" ;;
            ucp_add|ucp_fadd|ucp_swap|ucp_cswap) want="amo(ringk/mapped)" ;;
            *) want="ringk/ring" ;;
        esac
    elif [ "$level" = pick ]; then
        # both allowed: UCP must choose ringk for the tag lane (its measured latency is lower)
        env=(UCX_TLS=ringk,posix,self UCX_LOG_LEVEL=info)
        args=(-t "$t" -s "$s" -n "$iters")
        # (UCX up to 1.13 logs "ep_cfg[0]: tag(...)", later ones "... cfg#0 tag(...)")
        want="\(ep_cfg\[0\]:\|cfg#0\) tag(ringk/ring)"
    else
        env=()
        args=(-t "$t" -s "$s" -n "$iters" -x ringk -d "$dev")
        # the default layout is 'short'; 4 KiB active messages go by bcopy and zcopy
        case "$t:$s" in
            am_*:4096) args+=(-D "${layout:-bcopy}") ;;
            *) [ -n "$layout" ] && args+=(-D "$layout") ;;
        esac
        want="Final:"
    fi
    # A port another program holds (or one in TIME_WAIT) makes the server's bind fail: try the
    # next port, up to 3 times.
    for attempt in 1 2 3; do
        env "${env[@]}" timeout 60 "$perftest" -p $port "${args[@]}" >"srv.$$.log" 2>&1 &
        srv=$!
        sleep 0.3
        out=$(env "${env[@]}" timeout 60 "$perftest" localhost -p $port "${args[@]}" 2>&1)
        rc=$?
        wait $srv
        src=$?
        if grep -q "Address already in use" "srv.$$.log"; then
            port=$((port + 97))
            continue
        fi
        break
    done
    if [ $rc -eq 0 ] && [ $src -eq 0 ] && grep -q "Final:" <<<"$out" &&
       grep -q "$want" <<<"$out"; then
        echo "ok $n - $level $t $s B ${layout:+$layout }over ringk${env[0]:+ (${env[0]})}${dev:+ device $dev}"
        grep "Final:" <<<"$out" | sed 's/^/# /'
    else
        echo "not ok $n - $level $t $s B over ringk (client $rc, server $src)"
        tail -n 20 <<<"$out" | sed 's/^/# /'
        tail -n 10 "srv.$$.log" | sed 's/^/# server: /'
        fails=$((fails + 1))
    fi
    rm -f "srv.$$.log"
done
[ $fails -eq 0 ]
