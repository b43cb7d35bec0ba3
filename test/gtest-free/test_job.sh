#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libringk across processes, as TAP: a job of two processes bootstrapped by RINGK_ROOT /
# RINGK_RANK / RINGK_SIZE runs the ping-pong with ping in rank 0 and pong in rank 1; every value
# is checked on both sides and UCX's log must show the active messages going over ringk. Bad
# job variables give clear errors.
set -u
top=${RINGK_TOP_BUILDDIR:?}
pp=$top/examples/pingpong
# below the ephemeral range (32768+), where UCX and others bind ports; apart from test_ucp.sh
port=$((16000 + ($$ % 10000)))
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' <<<"$2" | tail -n 30; fails=$((fails + 1)); }
echo "1..29"

log0=$(mktemp) log1=$(mktemp)
env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=1 UCX_TLS=ringk,self UCX_LOG_LEVEL=info \
    timeout 120 "$pp" 20000 >"$log1" 2>&1 &
pid1=$!
env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=0 UCX_TLS=ringk,self UCX_LOG_LEVEL=info \
    timeout 120 "$pp" 20000 >"$log0" 2>&1
rc0=$?
wait $pid1
rc1=$?
out="$(cat "$log0" "$log1")"
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] &&
   grep -q "pingpong \[rank 0 of 2\]: 20000 round trips between two ring kernels, 0 errors" "$log0" &&
   grep -q "pingpong \[rank 1 of 2\]: 20000 round trips between two ring kernels, 0 errors" "$log1" &&
   grep -q "pingpong \[rank 1 of 2\]: pong handled 20001 messages, [1-9][0-9]* of them straight from the worker, [1-9][0-9]* in its receive callback" "$log1" &&
   grep -q "am(ringk/memory)" "$log0" && grep -q "am(ringk/memory)" "$log1"; then
    ok "two processes: ping in rank 0, pong in rank 1, over ringk"
    grep -h "^pingpong" "$log0" "$log1" | sed 's/^/# /'
else
    nok "two processes: ping in rank 0, pong in rank 1, over ringk (exit $rc0 $rc1)" "$out"
fi
rm -f "$log0" "$log1"

# job NAME NPROCS EXPECT-ON-RANK0 CMD...: runs CMD as NPROCS processes joined by RINGK_*
job() {
    local name=$1 np=$2 expect=$3 r rc=0 logs=() pids=()
    shift 3
    port=$((port + 1))
    for r in $(seq 1 $((np - 1))); do
        logs[$r]=$(mktemp)
        env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=$np RINGK_RANK=$r UCX_TLS=ringk,self \
            timeout 120 "$@" >"${logs[$r]}" 2>&1 &
        pids[$r]=$!
    done
    logs[0]=$(mktemp)
    env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=$np RINGK_RANK=0 UCX_TLS=ringk,self \
        timeout 120 "$@" >"${logs[0]}" 2>&1 || rc=$?
    for r in $(seq 1 $((np - 1))); do
        wait ${pids[$r]} || rc=$?
    done
    if [ $rc -eq 0 ] && grep -q -- "$expect" "${logs[0]}"; then
        ok "$name"
        grep -h "" "${logs[@]}" | grep -v "^\[" | sed 's/^/# /'
    else
        nok "$name (exit $rc)" "$(cat "${logs[@]}")"
    fi
    rm -f "${logs[@]}"
}
job "pipeline across 3 processes (RINGK_* bootstrap)" 3 "in 3 process(es), sum .*: OK" \
    "$top/examples/pipeline" 100000 4
job "pipeline across 4 processes (RINGK_* bootstrap)" 4 "in 4 process(es), sum .*: OK" \
    "$top/examples/pipeline" 50000 6

job "heat stencil across 3 processes, 5 strips" 3 "0 of 65536 cells differ.*: OK" \
    "$top/examples/heat" 256 256 100 5
job "pagerank across 2 processes, 4 partitions" 2 "in 2 process(es).*: OK" \
    "$top/examples/pagerank" 20000 20 4
job "pagerank across 4 processes, 6 partitions" 4 "in 4 process(es).*: OK" \
    "$top/examples/pagerank" 30000 15 6

# lost NAME VICTIM: a pagerank job of two processes that would run for minutes; once it runs,
# rank VICTIM is killed. The other must notice, say so and exit 1 within 30 s, not wait forever.
lost() {
    local name=$1 victim=$2 other=$((1 - $2)) r rc out logs=() pids=()
    port=$((port + 1))
    for r in 0 1; do
        logs[$r]=$(mktemp)
        env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=$r UCX_TLS=ringk,self \
            timeout 40 "$top/examples/pagerank" 400000 100000 4 >"${logs[$r]}" 2>&1 &
        pids[$r]=$!
    done
    sleep 4
    pkill -KILL -P "${pids[$victim]}"
    wait "${pids[$victim]}"
    wait "${pids[$other]}"
    rc=$?
    out=$(cat "${logs[$other]}")
    if [ $rc -eq 1 ] && grep -q "rank $other: the job lost 1 process(es); giving up" <<<"$out" &&
       grep -q "process $victim is unreachable" <<<"$out"; then
        ok "$name"
        sed 's/^/# /' <<<"$out"
    else
        nok "$name (exit $rc)" "$out"
    fi
    rm -f "${logs[@]}"
}
lost "rank 0 killed mid-job: rank 1 gives up with an error instead of waiting" 0
lost "rank 1 killed mid-job: rank 0 gives up with an error instead of waiting" 1

# every rank must print OK: check rank 0's line here, the others' exit codes in job()
job "topics across 2 processes: one AM per process, 4 subscribers" 2 "topics \[rank 0 of 2\].*: OK" \
    "$top/test/gtest-free/job_topics" 2000
job "topics across 3 processes: 6 subscribers" 3 "topics \[rank 0 of 3\].*: OK" \
    "$top/test/gtest-free/job_topics" 1000

# the receiving process enforces subscribes_to for senders in other processes
job "subscribes_to across 2 processes: b's messages refused and logged, a's delivered in order" 2 \
    "subscribe \[rank 0 of 2\].*: OK" "$top/test/gtest-free/job_subscribe" 20

# a handler run in the receive callback must not wait there: what would wait is deferred, in
# order (RINGK_RECV_INLINE)
job "receive-callback handler: sends that would wait are deferred and delivered in order" 2 \
    "defer \[rank 0 of 2\].*: OK" "$top/test/gtest-free/job_defer" 50
job "RINGK_RECV_INLINE=0: no handler runs in the receive callback, all delivered in order" 2 \
    "defer \[rank 0 of 2\].*: OK" env RINGK_RECV_INLINE=0 "$top/test/gtest-free/job_defer" 20

job "named barrier across 2 processes, 4 kernels x 10 rounds" 2 "barrier \[rank 0 of 2\].*0 passed early: OK" \
    "$top/test/gtest-free/job_barrier"
job "named barrier across 3 processes, 6 kernels x 10 rounds" 3 "barrier \[rank 0 of 3\].*0 passed early: OK" \
    "$top/test/gtest-free/job_barrier"
# a barrier that cannot complete because a process taking part went: EPIPE, not a hang
job "barrier across 2 processes, rank 1 leaves before arriving: rank 0's waits end with EPIPE" 2 \
    "barrier left \[rank 0 of 2\]: 2 of 2 kernels left the barrier with EPIPE (0 other).*: OK" \
    "$top/test/gtest-free/job_barrier" left
job "barrier across 2 processes, rank 1 dies before arriving: rank 0's waits end with EPIPE" 2 \
    "barrier lost \[rank 0 of 2\]: 2 of 2 kernels left the barrier with EPIPE (0 other).*: OK" \
    "$top/test/gtest-free/job_barrier" lost

# rank 0 sends and leaves at once: nothing in flight lost, and leaving is not dying
job "rank 0 leaves right after sending: 2 processes, nothing lost, not counted lost" 2 \
    "leave \[rank 0 of 2\].*: OK" "$top/test/gtest-free/job_leave" 20000
job "rank 0 leaves right after sending: 3 processes" 3 "leave \[rank 0 of 3\].*: OK" \
    "$top/test/gtest-free/job_leave" 10000
# rank 0 exits without leaving: the others count it lost and their peer_events kernels are told
job "rank 0 dies: 3 processes count it lost, each watch kernel gets one PEER_LOST event" 3 \
    "leave \[rank 0 of 3\].*exiting without leaving: OK" "$top/test/gtest-free/job_leave" 1000 die

# a remote inbox that does not drain pushes back on the sender (credits), nothing lost
job "remote backpressure: -EAGAIN after inbox + window, -ETIMEDOUT, then all 20000 in order" 2 \
    "backpressure \[rank 0 of 2\].*: OK" "$top/test/gtest-free/job_backpressure" 20000
job "remote publish backpressure: -EAGAIN after 256 publishes on their way, then all in order" 2 \
    "backpressure \[rank 0 of 2\]: publish.*: OK" "$top/test/gtest-free/job_backpressure" 5000 \
    publish

mpi=$top/examples/mpi
if [ -x "$mpi/pipeline_mpi" ] && command -v mpirun >/dev/null; then
    for spec in "pipeline_mpi 3 in 3 process(es), sum .*: OK 100000 4" \
                "heat_mpi 2 0 of 16384 cells differ.*: OK 128 128 60 4" \
                "pagerank_mpi 3 in 3 process(es).*: OK 20000 20 4" \
                "pingpong_mpi 2 \[rank 0 of 2\]: 5000 round trips between two ring kernels, 0 errors 5000"; do
        prog=${spec%% *}; rest=${spec#* }; np=${rest%% *}; rest=${rest#* }
        case $prog in pipeline_mpi) expect="${rest% 100000 4}"; args="100000 4" ;;
                      heat_mpi) expect="${rest% 128 128 60 4}"; args="128 128 60 4" ;;
                      pagerank_mpi) expect="${rest% 20000 20 4}"; args="20000 20 4" ;;
                      *) expect="${rest% 5000}"; args=5000 ;; esac
        out=$(timeout 120 mpirun --allow-run-as-root --oversubscribe -np $np -x LD_PRELOAD \
              -x UCX_TLS=ringk,self "$mpi/$prog" $args 2>&1)
        if [ $? -eq 0 ] && grep -q -- "$expect" <<<"$out"; then
            ok "$prog on $np ranks (MPI bootstrap)"
            grep -v "^\[" <<<"$out" | sed 's/^/# /'
        else
            nok "$prog on $np ranks (MPI bootstrap)" "$out"
        fi
    done
else
    for i in 1 2 3 4; do n=$((n + 1)); echo "ok $n # SKIP built without MPI"; done
fi

refuse() { # refuse NAME PATTERN ENV...
    local name=$1 pat=$2 out
    shift 2
    if out=$(env "$@" timeout 30 "$pp" 10 2>&1); then
        nok "$name (succeeded)" "$out"
    elif grep -q -- "$pat" <<<"$out"; then
        ok "$name"
    else
        nok "$name (no '$pat')" "$out"
    fi
}
refuse "bad RINGK_SIZE" "RINGK_SIZE 'abc' is not a number 1..4096" RINGK_SIZE=abc
refuse "RINGK_RANK out of range" "RINGK_RANK '5' is not a number 0..1" RINGK_SIZE=2 RINGK_RANK=5 RINGK_ROOT=127.0.0.1:1
refuse "RINGK_ROOT without a port" "RINGK_ROOT 'localhost' is not HOST:PORT" RINGK_SIZE=2 RINGK_RANK=1 RINGK_ROOT=localhost
[ $fails -eq 0 ]
