#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ringk against UCX's posix transport across message sizes, 8 B to 4 MiB: UCP active messages
# (ucp_am_lat / ucp_am_bw), tag matching (tag_lat / tag_bw), put (ucp_put_lat / ucp_put_bw) and
# get (ucp_get), each over UCX_TLS=ringk,self and posix,cma,self, interleaved size by size.
# Writes the figures (median of ROUNDS runs) to OUT/sweep.dat and draws, with gnuplot, latency
# and bandwidth against size into OUT/sweep_latency.png and OUT/sweep_bandwidth.png.
#
#   bench/size_sweep.sh [BUILDDIR [OUT]]   (default _build and bench/results; ROUNDS=1,
#                                          SIZES="8 64 ... 4194304" to change the sizes,
#                                          PLOT_ONLY=1 redraws OUT/sweep.dat without measuring)
#
# gnuplot comes from Debian's gnuplot-nox (contrib/setup.sh installs it); without it the data
# file is still written.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/_build}
dest=${2:-$top/bench/results}
rounds=${ROUNDS:-1}
sizes=${SIZES:-"8 64 512 4096 32768 262144 1048576 4194304"}
run="$build/contrib/ringk-run"
perftest=$(command -v ucx_perftest)
[ -x "$run" ] || { echo "sweep: build first (bash contrib/build.sh _build)" >&2; exit 1; }
mkdir -p "$dest"
port=$((40000 + ($$ % 10000)))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one TLS TEST SIZE FIELD: one client/server run; FIELD 4 = usec, 6 = MB/s of the Final line
one() {
    local tls=$1 t=$2 s=$3 field=$4 iters line
    iters=$((s >= 1048576 ? 500 : s >= 32768 ? 5000 : 50000))
    port=$((port + 1))
    UCX_TLS=$tls timeout 120 "$run" "$perftest" -p $port -t "$t" -s "$s" -n $iters \
        >/dev/null 2>&1 &
    sleep 0.3
    line=$(UCX_TLS=$tls timeout 120 "$run" "$perftest" localhost -p $port -t "$t" -s "$s" \
           -n $iters 2>/dev/null | grep Final:)
    wait
    awk -v f="$field" '{print $f}' <<<"$line"
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# series: name test field (latency series first, then bandwidth)
series=("am_lat ucp_am_lat 4" "tag_lat tag_lat 4" "put_lat ucp_put_lat 4" "get_lat ucp_get 4"
        "am_bw ucp_am_bw 6" "tag_bw tag_bw 6" "put_bw ucp_put_bw 6" "get_bw ucp_get 6")
dat="$dest/sweep.dat"
[ "${PLOT_ONLY:-0}" = 1 ] && [ -f "$dat" ] && sizes=""
[ -n "$sizes" ] && echo "bench: size sweep, ringk,self vs posix,cma,self, $rounds round(s) per point, $(nproc) cores"
[ -n "$sizes" ] && {
    printf '# size'
    for s in "${series[@]}"; do
        set -- $s
        printf ' %s_ringk %s_posix' "$1" "$1"
    done
    printf '\n'
} >"$dat"
for size in $sizes; do
    row="$size"
    for s in "${series[@]}"; do
        set -- $s
        for r in $(seq 1 "$rounds"); do
            one ringk,self "$2" "$size" "$3" >>"$tmp/$1.$size.ringk"
            one posix,cma,self "$2" "$size" "$3" >>"$tmp/$1.$size.posix"
        done
        a=$(median <"$tmp/$1.$size.ringk")
        b=$(median <"$tmp/$1.$size.posix")
        row="$row $a $b"
        printf '  %8s B %-8s ringk %-12s posix %s\n' "$size" "$1" "$a" "$b"
    done
    echo "$row" >>"$dat"
done
echo "sweep: figures in $dat"

if ! command -v gnuplot >/dev/null; then
    echo "sweep: gnuplot not found (apt-get install gnuplot-nox, or bash contrib/setup.sh): no plots"
    exit 0
fi
# columns: 1 size, then per series ringk and posix (series i: 2i and 2i+1)
plot() {
    local out=$1 ylabel=$2 first=$3 title=$4 i col names cmd=""
    names=(am tag put get)
    for i in 0 1 2 3; do
        col=$((2 * (first + i) + 2))
        cmd+="'$dat' using 1:$col with linespoints lw 2 title '${names[$i]} ringk', "
        cmd+="'$dat' using 1:$((col + 1)) with linespoints dt 2 title '${names[$i]} posix', "
    done
    gnuplot <<EOF
set terminal pngcairo size 900,600
set output '$out'
set title '$title'
set logscale x 2
set format x "%.0b%B"
set logscale y
set xlabel 'message size (bytes)'
set ylabel '$ylabel'
set key outside right
set grid
plot ${cmd%, }
EOF
}
plot "$dest/sweep_latency.png" "latency (usec)" 0 \
    "UCP latency, ringk,self (solid) vs posix,cma,self (dashed)"
plot "$dest/sweep_bandwidth.png" "bandwidth (MB/s)" 4 \
    "UCP bandwidth, ringk,self (solid) vs posix,cma,self (dashed)"
echo "sweep: plots $dest/sweep_latency.png $dest/sweep_bandwidth.png"
