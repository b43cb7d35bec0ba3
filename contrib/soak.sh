#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# soak.sh [BUILDDIR] [SECONDS] [NPROCS]: a bounded soak of libringk (defaults _build, 120, 4).
# Builds test/soak/ringk_soak.c against BUILDDIR's libringk (BUILDDIR relative to the top, as in
# contrib/build.sh), runs it as a job of NPROCS processes on this host over ringk, streams their
# progress, and ends with a summary and `soak: OK` (exit 0) or `soak: FAIL` (exit 1): every
# message delivered exactly once, in order and intact, RSS flat after the warm-up, every process
# exits 0 within SECONDS + 60 s, and nothing new is left in /dev/shm.
# A rank still running 10 s before its limit has its threads' stacks written to
# logs/rankR.stack (gdb, where installed) and summarized.
# Environment: SOAK_PAYLOAD_MAX (bytes, default 1024), SOAK_TOPIC_EVERY (16; 0: no topic),
# SOAK_RSS_MAX_KIB (8192), CC (gcc).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-_build}
secs=${2:-120}
np=${3:-4}
pmax=${SOAK_PAYLOAD_MAX:-1024}
case $builddir in /*) ;; *) builddir=$top/$builddir ;; esac

if ! [[ $secs =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ] || ! [[ $np =~ ^[0-9]+$ ]] ||
   [ "$np" -lt 2 ] || [ "$np" -gt 64 ]; then
    echo "usage: soak.sh [BUILDDIR] [SECONDS >= 1] [NPROCS 2..64]" >&2
    exit 2
fi
libdir=$builddir/src/ringk/.libs
run=$builddir/contrib/ringk-run
if [ ! -f "$libdir/libringk.so" ] || [ ! -x "$run" ]; then
    echo "soak: no libringk or ringk-run in $builddir: build first (bash contrib/build.sh" \
         "${1:-_build})" >&2
    exit 1
fi

out=$builddir/soak
bin=$out/ringk_soak
logs=$out/logs
mkdir -p "$out"
rm -rf "$logs"
mkdir -p "$logs"
# the examples' include path (AM_CPPFLAGS); the runpath finds this libringk without installing
if ! ${CC:-gcc} -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -pthread \
        -I"$top/src" -I"$builddir" -o "$bin" "$top/test/soak/ringk_soak.c" \
        -L"$libdir" -lringk -Wl,-rpath,"$libdir"; then
    echo "soak: building $bin failed" >&2
    exit 1
fi

# below the ephemeral range (32768+), where UCX and others bind ports
port=$((16000 + RANDOM % 10000))
limit=$((secs + 60))
shm_before=$(ls -A /dev/shm 2>/dev/null | sort)
echo "soak: $np processes for $secs s, payloads up to $pmax bytes, port $port, logs in $logs"

# One rank: its output goes to its log and, prefixed when the program did not name the rank
# itself (UCX's messages), to ours; its exit status to rc.R (124: it ran past the limit).
launch() {
    local r=$1
    { env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=$np RINGK_RANK=$r UCX_TLS=ringk,self \
          timeout -k 10 $limit "$run" "$bin" "$secs" "$pmax" 2>&1
      echo $? >"$logs/rc.$r"; } |
        tee "$logs/rank$r.log" | sed -u "/^soak \[rank /!s/^/[rank $r] /" &
}
# rank 0 listens for the others: start it last, as test_job.sh does
pids=()
for r in $(seq $((np - 1)) -1 0); do
    launch "$r"
    pids+=($!)
done
# A rank still running 10 s before the limit hangs: where its threads are goes to
# rank R.stack (with gdb, where there is one), before timeout kills it and the clue with it.
stacks() {
    local pid r
    sleep $((limit - 10))
    command -v gdb >/dev/null || return 0
    for pid in $(pgrep -f "^$bin $secs "); do
        r=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^RINGK_RANK=//p')
        [ -n "$r" ] || continue
        timeout 30 gdb -batch -p "$pid" -ex 'thread apply all bt 12' >"$logs/rank$r.stack" 2>&1
    done
}
stacks &
watchdog=$!
wait "${pids[@]}"
pkill -P "$watchdog" 2>/dev/null
kill "$watchdog" 2>/dev/null
wait "$watchdog" 2>/dev/null

fail=0
tsent=0 tdeliv=0 tbad=0
re='^soak \[rank ([0-9]+) of [0-9]+\]: sent ([0-9]+), delivered ([0-9]+) \(expected ([0-9]+)\), '
re+='bad ([0-9]+), topic msgs ([0-9]+), RSS first (-?[0-9]+) KiB last (-?[0-9]+) KiB growth '
re+='(-?[0-9]+) KiB \(max ([0-9]+)\): (OK|FAIL)$'
echo "soak: summary ($np processes, $secs s, payloads up to $pmax bytes)"
for r in $(seq 0 $((np - 1))); do
    rc=$(cat "$logs/rc.$r" 2>/dev/null || echo "?")
    line=$(grep -E "$re" "$logs/rank$r.log" | tail -n 1)
    if [[ $line =~ $re ]]; then
        m=("${BASH_REMATCH[@]}")
        tsent=$((tsent + m[2]))
        tdeliv=$((tdeliv + m[3]))
        tbad=$((tbad + m[5]))
        [ "${m[3]}" = "${m[4]}" ] || fail=1
        [ "${m[11]}" = OK ] || fail=1
        printf 'soak:   rank %d: sent %s, delivered %s of %s, bad %s, topic msgs %s, ' \
               "$r" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}" "${m[6]}"
        printf 'RSS %s -> %s KiB ' "${m[7]}" "${m[8]}"
        printf '(growth %s KiB, max %s), exit %s: %s\n' "${m[9]}" "${m[10]}" "$rc" "${m[11]}"
    else
        case $rc in
            124|137) why="killed after $limit s (hung?)" ;;
            134) why="aborted" ;;
            139) why="crashed (SIGSEGV)" ;;
            *) why="no final line" ;;
        esac
        # its last progress line, what else it said last (how far the end got), and where its
        # threads were when it hung: each thread's innermost frames outside libc's internals,
        # one line per thread
        echo "soak:   rank $r: $why, exit $rc: FAIL (all of it in $logs/rank$r.log)"
        { grep -E "^soak \[rank $r of $np\] +[0-9.]+ s: " "$logs/rank$r.log" | tail -n 1
          grep -vE "^soak \[rank $r of $np\] +[0-9.]+ s: " "$logs/rank$r.log" | tail -n 6
        } | sed "s/^/soak:     /"
        if [ -s "$logs/rank$r.stack" ]; then
            awk '/^Thread /{if (t != "") print t; t = "thread " $2 ":"; n = 0; next}
                 /^#[0-9]+ / && n < 4 {f = ($3 == "in") ? $4 : $2
                                        if (f !~ /^(_|\?\?|clone|start_thread)/) {t = t " " f; n++}}
                 END {if (t != "") print t}' "$logs/rank$r.stack" |
                head -n 8 | sed "s/^/soak:     stack: /"
        fi
        fail=1
    fi
    [ "$rc" = 0 ] || fail=1
done
[ "$tsent" -eq "$tdeliv" ] && [ "$tbad" -eq 0 ] || fail=1
echo "soak: total sent $tsent ($((tsent / secs)) msg/s), delivered $tdeliv, bad $tbad"

# the ringk transport keeps its segments in unlinked memfds: nothing may appear in /dev/shm
shm_new=$(comm -13 <(echo "$shm_before") <(ls -A /dev/shm 2>/dev/null | sort) | grep -v '^$')
if [ -n "$shm_new" ]; then
    echo "soak: new in /dev/shm after the run: $(echo $shm_new)"
    fail=1
else
    echo "soak: /dev/shm: nothing new left"
fi

if [ $fail -eq 0 ]; then
    echo "soak: OK"
    exit 0
fi
echo "soak: FAIL"
exit 1
