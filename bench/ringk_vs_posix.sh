#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ringk against UCX's posix transport, side by side in one run: each round runs every case over
# both transports back to back (interleaved, so machine noise hits both alike); after ROUNDS
# rounds it prints the median of each, and the median of the per-round ratios ringk/posix with
# the case's target.
#
#   bench/ringk_vs_posix.sh [BUILDDIR]      (default _build; ROUNDS=5 by default;
#                                            CASES=REGEX runs only the cases it matches)
#
# Cases (client and server are two processes on this host). UCT RMA and atomics run on ringk's
# mapped device (memory the ringk_shm md allocated) against posix; UCP ones let UCP choose among
# ringk,self against posix,cma,self; MPI ones run bench/mpi_rma over pml+osc ucx.
#   active messages and tag matching
#     UCT am_lat 8 B, am_bw 8 B, am_bw 8 KiB bcopy; UCP tag_lat and tag_bw 8 B, 64 KiB, 1 MiB;
#     MPI ping-pong
#   RMA and atomics
#     UCT put_lat 8 B; put_bw and get_bw 64 KiB and 4 MiB (posix bcopy: it has no zcopy; ringk
#     zcopy, but bcopy for get 64 KiB: its get zcopy starts at 1 MiB); add_lat, fadd, cswap
#     latency; add_mr and fadd rate
#     UCP ucp_put_lat 8 B, ucp_put_bw 64 KiB and 1 MiB, ucp_get 8 B (latency), 64 KiB and 1 MiB
#     MPI passive target: MPI_Put / MPI_Get / MPI_Accumulate / MPI_Fetch_and_op latency (8 B,
#     each flushed), MPI_Put / MPI_Get bandwidth 64 KiB, MPI_Put 1 MiB
#     the same on a window of registered memory (MPI_Win_create, "cw"): put/get 8 B latency and
#     1 MiB bandwidth, no target (ringk reaches it by cross-memory attach, posix,cma by UCP's
#     emulation over active messages)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/_build}
rounds=${ROUNDS:-5}
run="$build/contrib/ringk-run"
perftest=$(command -v ucx_perftest)
pingpong="$build/examples/mpi/mpi_pingpong"
mpirma="$build/bench/mpi_rma"
[ -x "$run" ] || { echo "bench: build first (bash contrib/build.sh _build)" >&2; exit 1; }
port=$((30000 + ($$ % 10000)))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# perf TLS LEVEL TEST SIZE ITERS FIELD [LAYOUT]: one client/server run, prints the chosen figure
# (FIELD 4 = average latency usec, 6 = average MB/s, 8 = average msg/s of the Final line). At
# the UCT level TLS is TL[/DEVICE] (by default device "ring" of ringk, "memory" of posix).
perf() {
    local tls=$1 level=$2 t=$3 s=$4 iters=$5 field=$6 layout=${7:-} args env line dev
    port=$((port + 1))
    if [ "$level" = uct ]; then
        dev=memory
        [ "$tls" = ringk ] && dev=ring
        case $tls in */*) dev=${tls#*/}; tls=${tls%%/*} ;; esac
        args=(-t "$t" -s "$s" -n "$iters" -x "$tls" -d "$dev" ${layout:+-D $layout})
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

# mpi_rma TLS CASE: one figure of bench/mpi_rma; the program runs once per round and
# transport, and its other figures are kept for the next cases of that round.
mpi_rma() {
    local tls=$1 key=$2 f="$out/mpi_rma.$round.${1//,/_}"
    if [ ! -f "$f" ]; then
        timeout 300 "$run" mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx \
            --mca osc ucx --mca opal_common_ucx_tls any --mca opal_common_ucx_devices any \
            -x UCX_TLS="$tls" -x LD_PRELOAD "$mpirma" 20000 >"$f" 2>/dev/null
        grep -q "mpi_rma errors 0" "$f" || echo "bench: mpi_rma over $tls failed" >&2
    fi
    awk -v k="$key" '$2 == k {print $3}' "$f"
}

cases=(
    "uct_am_lat_8B|usec|lower|perf ringk uct am_lat 8 200000 4|perf posix uct am_lat 8 200000 4"
    "uct_am_bw_8B|msg/s|higher|perf ringk uct am_bw 8 2000000 8|perf posix uct am_bw 8 2000000 8"
    "uct_am_bw_8KiB|MB/s|none|perf ringk uct am_bw 8192 200000 6 bcopy|perf posix uct am_bw 8192 200000 6 bcopy"
    "ucp_tag_lat_8B|usec|lower|perf ringk,self ucp tag_lat 8 200000 4|perf posix,cma,self ucp tag_lat 8 200000 4"
    "ucp_tag_lat_64KiB|usec|lower|perf ringk,self ucp tag_lat 65536 20000 4|perf posix,cma,self ucp tag_lat 65536 20000 4"
    "ucp_tag_lat_1MiB|usec|lower|perf ringk,self ucp tag_lat 1048576 2000 4|perf posix,cma,self ucp tag_lat 1048576 2000 4"
    "ucp_tag_bw_8B|MB/s|higher|perf ringk,self ucp tag_bw 8 2000000 6|perf posix,cma,self ucp tag_bw 8 2000000 6"
    "ucp_tag_bw_64KiB|MB/s|higher|perf ringk,self ucp tag_bw 65536 20000 6|perf posix,cma,self ucp tag_bw 65536 20000 6"
    "ucp_tag_bw_1MiB|MB/s|higher|perf ringk,self ucp tag_bw 1048576 2000 6|perf posix,cma,self ucp tag_bw 1048576 2000 6"
    "mpi_pingpong_8B|usec|lower|mpi_lat ringk,self|mpi_lat posix,self"
    "uct_put_lat_8B|usec|lower|perf ringk/mapped uct put_lat 8 300000 4|perf posix uct put_lat 8 300000 4"
    "uct_put_bw_64KiB|MB/s|higher|perf ringk/mapped uct put_bw 65536 50000 6 zcopy|perf posix uct put_bw 65536 50000 6 bcopy"
    "uct_put_bw_4MiB|MB/s|higher|perf ringk/mapped uct put_bw 4194304 1000 6 zcopy|perf posix uct put_bw 4194304 1000 6 bcopy"
    "uct_get_bw_64KiB|MB/s|higher|perf ringk/mapped uct get 65536 50000 6 bcopy|perf posix uct get 65536 50000 6 bcopy"
    "uct_get_bw_4MiB|MB/s|higher|perf ringk/mapped uct get 4194304 1000 6 zcopy|perf posix uct get 4194304 1000 6 bcopy"
    "uct_add_lat_8B|usec|lower|perf ringk/mapped uct add_lat 8 300000 4|perf posix uct add_lat 8 300000 4"
    "uct_fadd_lat_8B|usec|lower|perf ringk/mapped uct fadd 8 1000000 4|perf posix uct fadd 8 1000000 4"
    "uct_cswap_lat_8B|usec|lower|perf ringk/mapped uct cswap 8 1000000 4|perf posix uct cswap 8 1000000 4"
    "uct_add_mr_8B|msg/s|higher|perf ringk/mapped uct add_mr 8 2000000 8|perf posix uct add_mr 8 2000000 8"
    "uct_fadd_mr_8B|msg/s|higher|perf ringk/mapped uct fadd 8 1000000 8|perf posix uct fadd 8 1000000 8"
    "ucp_put_lat_8B|usec|lower|perf ringk,self ucp ucp_put_lat 8 200000 4|perf posix,cma,self ucp ucp_put_lat 8 200000 4"
    "ucp_put_bw_64KiB|MB/s|higher|perf ringk,self ucp ucp_put_bw 65536 20000 6|perf posix,cma,self ucp ucp_put_bw 65536 20000 6"
    "ucp_put_bw_1MiB|MB/s|higher|perf ringk,self ucp ucp_put_bw 1048576 2000 6|perf posix,cma,self ucp ucp_put_bw 1048576 2000 6"
    "ucp_get_lat_8B|usec|lower|perf ringk,self ucp ucp_get 8 200000 4|perf posix,cma,self ucp ucp_get 8 200000 4"
    "ucp_get_bw_64KiB|MB/s|higher|perf ringk,self ucp ucp_get 65536 20000 6|perf posix,cma,self ucp ucp_get 65536 20000 6"
    "ucp_get_bw_1MiB|MB/s|higher|perf ringk,self ucp ucp_get 1048576 2000 6|perf posix,cma,self ucp ucp_get 1048576 2000 6"
    "mpi_put_lat_8B|usec|lower|mpi_rma ringk,self put_8|mpi_rma posix,cma,self put_8"
    "mpi_get_lat_8B|usec|lower|mpi_rma ringk,self get_8|mpi_rma posix,cma,self get_8"
    "mpi_acc_lat_8B|usec|lower|mpi_rma ringk,self acc_8|mpi_rma posix,cma,self acc_8"
    "mpi_fop_lat_8B|usec|lower|mpi_rma ringk,self fop_8|mpi_rma posix,cma,self fop_8"
    "mpi_put_bw_64KiB|MB/s|higher|mpi_rma ringk,self put_65536|mpi_rma posix,cma,self put_65536"
    "mpi_get_bw_64KiB|MB/s|higher|mpi_rma ringk,self get_65536|mpi_rma posix,cma,self get_65536"
    "mpi_put_bw_1MiB|MB/s|higher|mpi_rma ringk,self put_1048576|mpi_rma posix,cma,self put_1048576"
    "mpi_cw_put_lat_8B|usec|none|mpi_rma ringk,self cw_put_8|mpi_rma posix,cma,self cw_put_8"
    "mpi_cw_get_lat_8B|usec|none|mpi_rma ringk,self cw_get_8|mpi_rma posix,cma,self cw_get_8"
    "mpi_cw_put_bw_1MiB|MB/s|none|mpi_rma ringk,self cw_put_1048576|mpi_rma posix,cma,self cw_put_1048576"
    "mpi_cw_get_bw_1MiB|MB/s|none|mpi_rma ringk,self cw_get_1048576|mpi_rma posix,cma,self cw_get_1048576"
)
selected=()
for c in "${cases[@]}"; do
    case ${c%%|*} in
        mpi_pingpong*) [ -x "$pingpong" ] || continue ;;
        mpi_*) [ -x "$mpirma" ] || continue ;;
    esac
    [[ ${c%%|*} =~ ${CASES:-.} ]] && selected+=("$c")
done
cases=("${selected[@]}")

echo "bench: ringk vs posix, $rounds interleaved rounds, $(nproc) cores, UCX $(ucx_info -v | sed -n 's/# Version //p')"
for round in $(seq 1 "$rounds"); do
    for c in "${cases[@]}"; do
        IFS='|' read -r name unit better a b <<<"$c"
        va=$($a)
        vb=$($b)
        echo "$va" >>"$out/$name.ringk"
        echo "$vb" >>"$out/$name.posix"
        awk -v a="$va" -v b="$vb" 'BEGIN {if (a != "" && b > 0) printf "%.4f\n", a / b}' \
            >>"$out/$name.ratio"
        printf '  round %d %-18s ringk %-12s posix %s\n' "$round" "$name" "$va" "$vb"
    done
done

median() { sort -g "$1" | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
echo
printf '%-18s %-6s %14s %14s %12s  %s\n' case unit "ringk(median)" "posix(median)" \
    "ringk/posix" "(median of per-round ratios; target)"
for c in "${cases[@]}"; do
    IFS='|' read -r name unit better a b <<<"$c"
    ma=$(median "$out/$name.ringk")
    mb=$(median "$out/$name.posix")
    ratio=$(median "$out/$name.ratio")
    case $better in lower) target="<= 1.0" ;; higher) target=">= 1.0" ;; *) target="(no target)" ;; esac
    verdict=$(awk -v r="$ratio" -v b="$better" 'BEGIN {
        if (r == "nan") print "no data"; else if (b == "none") print "";
        else if ((b == "lower") == (r <= 1.0)) print "meets"; else print "misses" }')
    printf '%-18s %-6s %14s %14s %12s  %s %s\n' "$name" "$unit" "$ma" "$mb" "$ratio" "$target" \
        "$verdict"
done
