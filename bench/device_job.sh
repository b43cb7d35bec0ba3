#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Device kernel to device kernel between two processes of a job, against the same kernels in
# one process, on the emulated device (host threads standing in for GPU blocks: the cost of
# the protocol and of the host path, not of a GPU), or with -g on GPU 0 (both processes' kernels
# on the one GPU: without MPS the GPU gives each process time slices), or with -g -p DEV with
# "b" and "sink" on GPU DEV and "a" on GPU 0 (sends from one GPU into the other's memory, in one
# process or between two), side by side in one run.
# Each round runs the three ways back to back (interleaved); after ROUNDS rounds it prints
# medians and ratios.
#
#   bench/device_job.sh [-g [-p DEV]] [BUILDDIR]   (default _build; ROUNDS=5, N=20000, M=200000)
#
#   same     "a", "b", "sink" in one process: device inbox to device inbox
#   direct   "a" in rank 0, "b" and "sink" in rank 1: a and b write each other's device
#            inboxes in the other process (docs/gpu.md, "Device kernels of several processes")
#   host     the same job with RINGK_DEVICE_REMOTE=0: outbox, proxy, UCP over ringk, the
#            other process's host ingress ring
# lat: one-way latency of a ball bounced N times a -> b -> a, us; tput: M messages of 16 bytes
# a -> sink, millions per second. Every run must show the path it was meant to take (a's
# direct sends: all, all, none) and no message out of order. Exits 77 (-g) where CUDA finds no
# GPU.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
where="emulated device"
kind=emu
pdev=()
if [ "${1:-}" = -g ]; then
    where="GPU 0"
    kind=gpu
    shift
    if [ "${1:-}" = -p ] && [ -n "${2:-}" ]; then
        where="GPU 0 to GPU $2"
        pdev=(-p "$2")
        shift 2
    fi
fi
build=${1:-$top/_build}
rounds=${ROUNDS:-5}
n=${N:-20000}
m=${M:-200000}
prog=$build/bench/device_job_$kind
run=$build/contrib/ringk-run
[ -x "$prog" ] && [ -x "$run" ] || { echo "bench: build first (bash contrib/build.sh _build; -g: with CUDA)" >&2; exit 1; }
port=$((20000 + ($$ % 10000)))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# one WAY ROUND: appends "lat tput" of the way's run to $out/WAY, or fails
one() {
    local way=$1 line want rc=0
    case $way in
        same) line=$("$run" "$prog" -n "$n" -m "$m" ${pdev[@]+"${pdev[@]}"} 2>"$out/err") || rc=$?
              want=$((n + m + 100)) ;;
        direct|host)
            port=$((port + 1))
            local env0=()
            [ "$way" = host ] && env0=(RINGK_DEVICE_REMOTE=0)
            env ${env0[@]+"${env0[@]}"} RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=1 \
                "$run" "$prog" -n "$n" -m "$m" ${pdev[@]+"${pdev[@]}"} >/dev/null 2>"$out/err1" &
            line=$(env ${env0[@]+"${env0[@]}"} RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=0 \
                   "$run" "$prog" -n "$n" -m "$m" ${pdev[@]+"${pdev[@]}"} 2>"$out/err") || rc=$?
            wait $! || rc=$?
            want=$([ "$way" = direct ] && echo $((n + m + 100)) || echo 0) ;;
    esac
    line=$(grep "^RESULT device_job " <<<"$line")
    if [ $rc -eq 77 ]; then
        cat "$out"/err* >&2
        exit 77 # no usable GPU: nothing to measure
    fi
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        echo "bench: $way failed (exit $rc)" >&2
        cat "$out"/err* >&2
        return 1
    fi
    # the path measured: a's sends straight into a device inbox (the ball's n and the burst's m)
    # or none of them; nothing out of order
    local direct errors
    direct=$(sed -n 's/.* direct=\([0-9]*\).*/\1/p' <<<"$line")
    errors=$(sed -n 's/.* errors=\([0-9]*\).*/\1/p' <<<"$line")
    if [ "$direct" != "$want" ] || [ "$errors" != 0 ]; then
        echo "bench: $way took another path or lost order: $line (expected direct=$want)" >&2
        return 1
    fi
    sed -n 's/.* lat_us=\([0-9.]*\) tput_mmsg=\([0-9.]*\).*/\1 \2/p' <<<"$line" >>"$out/$way"
    echo "  round $2 $way: $line"
}

for r in $(seq 1 "$rounds"); do
    for way in same direct host; do
        one "$way" "$r" || exit 1
    done
done

# median FILE COLUMN
median() {
    cut -d' ' -f"$2" "$1" | sort -g |
        awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
for way in same direct host; do
    eval "lat_$way=$(median "$out/$way" 1) tput_$way=$(median "$out/$way" 2)"
done
echo "device kernel to device kernel, $where, medians of $rounds interleaved rounds"
printf '  %-8s one-way latency %8.3f us   throughput %7.3f Mmsg/s\n' \
    same "$lat_same" "$tput_same" direct "$lat_direct" "$tput_direct" host "$lat_host" "$tput_host"
awk -v ls="$lat_same" -v ld="$lat_direct" -v lh="$lat_host" \
    -v ts="$tput_same" -v td="$tput_direct" -v th="$tput_host" 'BEGIN {
    printf "  latency:    direct / same %.2fx, host / direct %.2fx\n", ld / ls, lh / ld
    printf "  throughput: direct / same %.2fx, direct / host %.2fx\n", td / ts, td / th
}'
