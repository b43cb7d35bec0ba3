#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# faults.sh [BUILDDIR] [ROUNDS]: the fault suite, as TAP (defaults _build, 2). Each case runs the
# soak (test/soak/ringk_soak.c, built by contrib/soak.sh's rules) as a job of 3 processes over
# the ringk transport and injects one fault at a random moment of the traffic (0.5 to 3.5 s):
#   kill -9 of rank 0 (the job's root), of a middle rank, of the last rank (each one is both a
#   sender and a receiver in the ring of the soak), and a rank that leaves with _exit(0) without
#   any cleanup.
# Expected of the survivors: they notice (the job lost a process), report it and exit 1 within
# 20 s of the fault, none hangs; what they delivered has no corrupt, duplicated or out-of-order
# message (bad 0); sends to the lost process were refused, not dropped silently (a sender says
# so); nothing is left in /dev/shm. Prints a summary line: faults injected and survived.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-_build}
rounds=${2:-2}
case $builddir in /*) ;; *) builddir=$top/$builddir ;; esac
libdir=$builddir/src/ringk/.libs
run=$builddir/contrib/ringk-run
bin=$builddir/soak/ringk_soak
mkdir -p "$builddir/soak"
if ! ${CC:-gcc} -std=gnu11 -O2 -g -Wall -pthread -I"$top/src" -I"$builddir" -o "$bin" \
        "$top/test/soak/ringk_soak.c" -L"$libdir" -lringk -Wl,-rpath,"$libdir"; then
    echo "1..0 # SKIP cannot build the soak program (build $builddir first)"
    exit 1
fi
np=3
cases="kill0 kill1 kill2 exit1"
total=$(($(wc -w <<<"$cases") * rounds))
echo "1..$total"
n=0 fails=0 survived=0
shm_before=$(ls -A /dev/shm 2>/dev/null | sort)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# one_case KIND VICTIM DELAY_MS
one_case() {
    local kind=$1 victim=$2 delay=$3 port=$((16000 + RANDOM % 10000)) r rc pids=() extra=()
    local t_fault t_end ok=1 why=""
    [ "$kind" = exit ] && extra=(SOAK_EXIT_RANK=$victim
                                 SOAK_EXIT_AFTER_S=$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000))))
    for r in $(seq $((np - 1)) -1 0); do
        env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=$np RINGK_RANK=$r UCX_TLS=ringk,self \
            "${extra[@]}" timeout -k 5 60 "$run" "$bin" 30 >"$logs/rank$r.log" 2>&1 &
        pids[$r]=$!
    done
    if [ "$kind" = kill ]; then
        # the soak's traffic starts once all have joined: wait for the victim's "joined"
        # (at most 10 s), then the random delay
        for r in $(seq 100); do
            grep -q "joined; streaming" "$logs/rank$victim.log" 2>/dev/null && break
            sleep 0.1
        done
        sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
        pkill -KILL -P "${pids[$victim]}" # the soak, child of timeout
    fi
    t_fault=$(date +%s)
    for r in $(seq 0 $((np - 1))); do
        wait "${pids[$r]}" 2>/dev/null # the shell would report the killed one
        rc[$r]=$?
    done
    t_end=$(date +%s)
    for r in $(seq 0 $((np - 1))); do
        [ "$r" = "$victim" ] && continue
        if [ "${rc[$r]}" = 124 ] || [ "${rc[$r]}" = 137 ]; then
            ok=0; why+=" rank $r hung (killed by timeout)"
        elif [ "${rc[$r]}" != 1 ]; then
            ok=0; why+=" rank $r exit ${rc[$r]}, expected 1"
        fi
        if ! grep -q "lost 1 process" "$logs/rank$r.log"; then
            ok=0; why+=" rank $r did not report the lost process"
        fi
        if grep -qE "bad [1-9]|corrupt|bad DATA|bad publish" "$logs/rank$r.log"; then
            ok=0; why+=" rank $r delivered a bad message"
        fi
    done
    if [ "$kind" = kill ] && [ $((t_end - t_fault)) -gt 20 ]; then
        ok=0; why+=" survivors took $((t_end - t_fault)) s"
    fi
    n=$((n + 1))
    if [ $ok -eq 1 ]; then
        survived=$((survived + 1))
        echo "ok $n - $kind of rank $victim after ${delay} ms of traffic: survivors reported it" \
             "and exited 1 in $((t_end - t_fault)) s, nothing corrupt"
        grep -h "giving up\|refused\|undeliverable" "$logs"/rank*.log | sort -u | head -n 4 |
            sed 's/^/# /'
    else
        fails=$((fails + 1))
        echo "not ok $n - $kind of rank $victim after ${delay} ms:$why"
        tail -n 8 "$logs"/rank*.log | sed 's/^/# /'
    fi
}

for round in $(seq "$rounds"); do
    for c in $cases; do
        delay=$((500 + RANDOM % 3000))
        case $c in
            kill*) one_case kill "${c#kill}" $delay ;;
            exit*) one_case exit "${c#exit}" $delay ;;
        esac
    done
done
left=$(comm -13 <(echo "$shm_before") <(ls -A /dev/shm 2>/dev/null | sort) | grep -v '^$')
if [ -n "$left" ]; then
    echo "# left in /dev/shm: $left"
    fails=$((fails + 1))
fi
echo "# faults: $n injected, $survived survived (survivors reported them, none hung or" \
     "delivered a bad message); /dev/shm: ${left:-nothing left}"
[ $fails -eq 0 ]
