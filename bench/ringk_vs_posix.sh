#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ringk against UCX's posix transport, side by side in one run: each round runs every case over
# both transports back to back (interleaved, so machine noise hits both alike); after ROUNDS
# rounds it prints the median of each and the ratio ringk/posix.
#
#   bench/ringk_vs_posix.sh [BUILDDIR]      (default _build; ROUNDS=5 by default)
#
# Cases (client and server are two processes on this host):
#   UCT am_lat 8 B            one-way latency, usec        ratio target <= 1.0
#   UCT am_bw 8 B             message rate, msg/s          ratio target >= 1.0
#   UCT am_bw 8 KiB bcopy     bandwidth, MB/s              (no target; sets iface_query's figure)
#   UCP tag_lat 8 B           vs posix,cma, usec           ratio target <= 1.0
#   UCP tag_bw 1 MiB          vs posix,cma, MB/s           ratio target >= 0.9
#   MPI ping-pong 8 B         pml ucx vs posix, usec       ratio target <= 1.0
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/_build}
rounds=${ROUNDS:-5}
run="$build/contrib/ringk-run"
perftest=$(command -v ucx_perftest)
pingpong="$build/examples/mpi/mpi_pingpong"
[ -x "$run" ] || { echo "bench: build first (bash contrib/build.sh _build)" >&2; exit 1; }
port=$((30000 + ($$ % 10000)))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# perf NAME TLS LEVEL TEST SIZE ITERS FIELD: one client/server run, prints the chosen figure
# (FIELD 4 = average latency usec, 6 = average MB/s, 8 = average msg/s of the Final line).
perf() {
    local tls=$1 level=$2 t=$3 s=$4 iters=$5 field=$6 layout=${7:-} args env line
    port=$((port + 1))
    if [ "$level" = uct ]; then
        args=(-t "$t" -s "$s" -n "$iters" -x "$tls" -d memory ${layout:+-D $layout})
        env=()
    else
        args=(-t "$t" -s "$s" -n "$iters")
        env=(UCX_TLS="$tls")
    fi
    env "${env[@]}" timeout 120 "$run" "$perftest" -p $port "${args[@]}" >/dev/null 2>&1 &
    sleep 0.3
    line=$(env "${env[@]}" timeout 120 "$run" "$perftest" localhost -p $port "${args[@]}" 2>/dev/null |
           grep Final:)
    wait
    awk -v f="$field" '{print $f}' <<<"$line"
}

mpi_lat() {
    local tls=$1
    timeout 120 "$run" mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx \
        --mca opal_common_ucx_tls any --mca opal_common_ucx_devices any \
        -x UCX_TLS="$tls" -x LD_PRELOAD "$pingpong" 50000 2>/dev/null |
        sed -n 's/.*one-way latency \([0-9.]*\) us/\1/p'
}

cases=(
    "uct_am_lat_8B|usec|lower|perf ringk uct am_lat 8 200000 4|perf posix uct am_lat 8 200000 4"
    "uct_am_bw_8B|msg/s|higher|perf ringk uct am_bw 8 2000000 8|perf posix uct am_bw 8 2000000 8"
    "uct_am_bw_8KiB|MB/s|higher|perf ringk uct am_bw 8192 200000 6 bcopy|perf posix uct am_bw 8192 200000 6 bcopy"
    "ucp_tag_lat_8B|usec|lower|perf ringk,self ucp tag_lat 8 200000 4|perf posix,cma,self ucp tag_lat 8 200000 4"
    "ucp_tag_bw_1MiB|MB/s|higher|perf ringk,self ucp tag_bw 1048576 2000 6|perf posix,cma,self ucp tag_bw 1048576 2000 6"
    "mpi_pingpong_8B|usec|lower|mpi_lat ringk,self|mpi_lat posix,self"
)
[ -x "$pingpong" ] || cases=("${cases[@]:0:5}")

echo "bench: ringk vs posix, $rounds interleaved rounds, $(nproc) cores, UCX $(ucx_info -v | sed -n 's/# Version //p')"
for r in $(seq 1 "$rounds"); do
    for c in "${cases[@]}"; do
        IFS='|' read -r name unit better a b <<<"$c"
        va=$($a)
        vb=$($b)
        echo "$va" >>"$out/$name.ringk"
        echo "$vb" >>"$out/$name.posix"
        printf '  round %d %-16s ringk %-12s posix %s\n' "$r" "$name" "$va" "$vb"
    done
done

median() { sort -g "$1" | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
echo
printf '%-16s %-6s %14s %14s %12s\n' case unit "ringk(median)" "posix(median)" "ringk/posix"
for c in "${cases[@]}"; do
    IFS='|' read -r name unit better a b <<<"$c"
    ma=$(median "$out/$name.ringk")
    mb=$(median "$out/$name.posix")
    ratio=$(awk -v a="$ma" -v b="$mb" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "nan"}')
    printf '%-16s %-6s %14s %14s %10s  %s is better\n' "$name" "$unit" "$ma" "$mb" "$ratio" "$better"
done
