#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libringk's local K2K messaging against the named alternatives, side by side in one run:
# each round runs every case for every system back to back (interleaved); after ROUNDS rounds
# it prints medians and ratios.
#
#   bench/runtime_vs.sh [BUILDDIR]        (default _build; ROUNDS=5, N=1000000 messages)
#
#   throughput  one-way 8-byte messages between two threads/kernels on two cores, msg/s (10 N
#               messages, ZeroMQ N):
#               ringk K2K (source kernel -> sink kernel; ringk: ringk_send by name,
#               ringk_route: ringk_send_route by route number) vs Concurrency Kit's SPSC ring with
#               8-byte entries (ck8, the near-limit reference) and with 64-byte entries by value
#               (ck64: the bytes one ringk message moves), and ZeroMQ inproc PAIR
#   pingpong    round-trip time of a counter bounced between two kernels/actors/threads, us:
#               ringk vs CAF event-based actors, ck SPSC and ZeroMQ inproc (100x fewer trips:
#               it blocks in the kernel)
#   crossproc   round trip between two processes over the ringk transport, us: ringk's
#               examples/pingpong as a job of two vs a raw UCP active-message ping-pong with
#               single-threaded workers (ucp_am, the reference) and, for context, with
#               thread-safe workers (ucp_am_mt: what libringk's shared worker must be);
#               N/4 round trips each (with 50k, start-up weighed a few percent in the ratio)
# Targets (issue 5): ringk throughput >= 0.5x ck; ringk ping-pong <= 0.5x CAF; cross-process
# <= 1.3x raw UCP AM.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/_build}
rounds=${ROUNDS:-5}
n=${N:-1000000}
out=$top/bench/out
mkdir -p "$out"
lib=$build/src/ringk/.libs
[ -f "$lib/libringk.so" ] || { echo "bench: build first (bash contrib/build.sh _build)" >&2; exit 1; }
for p in libck-dev libcaf-dev libzmq3-dev; do
    dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "install ok installed" || missing="${missing:-} $p"
done
if [ -n "${missing:-}" ]; then
    echo "bench: installing$missing"
    ${SUDO:-$( [ "$(id -u)" = 0 ] || echo sudo )} env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
src=$top/bench/src
set -e
gcc -O2 -o "$out/k2k_ringk" "$src/k2k_ringk.c" -I"$top/src" -L"$lib" -lringk -Wl,-rpath,"$lib" -pthread
gcc -O2 -o "$out/k2k_ck" "$src/k2k_ck.c" -pthread
gcc -O2 -o "$out/k2k_zmq" "$src/k2k_zmq.c" -lzmq -pthread
g++ -O2 -std=c++17 -o "$out/pingpong_caf" "$src/pingpong_caf.cpp" -lcaf_core -pthread
gcc -O2 -o "$out/am_ucp" "$src/am_ucp.c" -lucp -lucs
set +e

run() {
    local count=$n port
    case "$1:$2" in
        k2k_zmq:pingpong) count=$((n / 100)) ;;
        k2k_zmq:throughput) ;;
        *:throughput*) count=$((n * 10)) ;; # ck's 1M take 5 ms: too short to time alone
        am_ucp:*) count=$((n / 4))
            "$build/contrib/ringk-run" env UCX_TLS=ringk,self "$out/am_ucp" "$2" $count \
                2>/dev/null | sed -n 's/^RESULT //p'
            return ;;
        ringk_job:*) count=$((n / 4)); port=$((20000 + RANDOM % 12000))
            env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=1 UCX_TLS=ringk,self \
                timeout 120 "$build/contrib/ringk-run" "$build/examples/pingpong" $count \
                >/dev/null 2>&1 &
            env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=0 UCX_TLS=ringk,self \
                timeout 120 "$build/contrib/ringk-run" "$build/examples/pingpong" $count 2>/dev/null |
                sed -n 's/.*errors, \([0-9.]*\) us per round trip/\1/p'
            wait
            return ;;
    esac
    "$out/$1" "$2" "$count" 2>/dev/null | sed -n 's/^RESULT //p'
}
declare -A cases=(
    [throughput:ringk]="k2k_ringk throughput" [throughput:ringk_route]="k2k_ringk throughput_route"
    [throughput:ck8]="k2k_ck throughput"
    [throughput:ck64]="k2k_ck throughput64" [throughput:zmq]="k2k_zmq throughput"
    [pingpong:ringk]="k2k_ringk pingpong" [pingpong:caf]="pingpong_caf pingpong"
    [pingpong:ck]="k2k_ck pingpong" [pingpong:zmq]="k2k_zmq pingpong"
    [crossproc:ringk]="ringk_job pingpong" [crossproc:ucp_am]="am_ucp pingpong"
    [crossproc:ucp_am_mt]="am_ucp pingpong_mt"
)
order="throughput:ringk throughput:ringk_route throughput:ck8 throughput:ck64 throughput:zmq
pingpong:ringk pingpong:caf pingpong:ck pingpong:zmq
crossproc:ringk crossproc:ucp_am crossproc:ucp_am_mt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "bench: libringk local K2K vs ck / CAF / ZeroMQ, $rounds rounds of $n messages, $(nproc) cores"
for r in $(seq 1 "$rounds"); do
    line="  round $r:"
    for c in $order; do
        v=$(run ${cases[$c]})
        echo "$v" >>"$tmp/$c"
        line="$line $c=$v"
    done
    echo "$line"
done
median() { sort -g "$1" | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
echo
printf '%-18s %16s\n' case median
for c in $order; do
    printf '%-18s %16s %s\n' "$c" "$(median "$tmp/$c")" "$([ "${c%%:*}" = throughput ] && echo msg/s || echo us/round-trip)"
done
ratio() { awk -v a="$(median "$tmp/$1")" -v b="$(median "$tmp/$2")" 'BEGIN {printf "%.3f", a / b}'; }
# the ratio within each round (both cases ran back to back): the machine's speed moves between
# rounds, so this spread says how far one round's ratio can be from the ratio of the medians
spread() {
    paste "$tmp/$1" "$tmp/$2" | awk '($1 > 0) && ($2 > 0) {print $1 / $2}' | sort -g |
        awk '{v[NR] = $1} END {if (NR) printf "per round %.2f to %.2f, median %.2f", v[1], v[NR],
             (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
echo
echo "ratios:"
echo "  throughput ringk/ck8   $(ratio throughput:ringk throughput:ck8)   (target >= 0.5;" \
    "$(spread throughput:ringk throughput:ck8))"
echo "  throughput ringk_route/ck8 $(ratio throughput:ringk_route throughput:ck8)"
echo "  throughput ringk/ck64  $(ratio throughput:ringk throughput:ck64)"
echo "  throughput ringk/zmq   $(ratio throughput:ringk throughput:zmq)"
echo "  ping-pong  ringk/caf   $(ratio pingpong:ringk pingpong:caf)   (target <= 0.5;" \
    "$(spread pingpong:ringk pingpong:caf))"
echo "  ping-pong  ringk/ck    $(ratio pingpong:ringk pingpong:ck)"
echo "  ping-pong  ringk/zmq   $(ratio pingpong:ringk pingpong:zmq)"
echo "  crossproc  ringk/ucp   $(ratio crossproc:ringk crossproc:ucp_am)   (target <= 1.3;" \
    "$(spread crossproc:ringk crossproc:ucp_am))"
echo "  crossproc  ucp_mt/ucp  $(ratio crossproc:ucp_am_mt crossproc:ucp_am)   (the thread-safe" \
    "worker alone)"
echo "  crossproc  ringk/ucp_mt $(ratio crossproc:ringk crossproc:ucp_am_mt)"
