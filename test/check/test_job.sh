#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libringk across processes, as TAP: a job of two processes bootstrapped by RINGK_ROOT /
# RINGK_RANK / RINGK_SIZE runs the ping-pong with ping in rank 0 and pong in rank 1; every value
# is checked on both sides and UCX's log must show the active messages going over ringk. The
# examples and job programs run as jobs must exit 0 and end, in every process, with a RESULT line
# (result.sh) whose values show what they checked. Bad job variables give clear errors.
set -u
top=${RINGK_TOP_BUILDDIR:?}
. "$(dirname "$0")/result.sh"
pp=$top/examples/pingpong
# below the ephemeral range (32768+), where UCX and others bind ports; apart from test_ucp.sh
port=$((16000 + ($$ % 10000)))
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' <<<"$2" | tail -n 30; fails=$((fails + 1)); }
echo "1..45"

log0=$(mktemp) log1=$(mktemp) logs=$(mktemp)
env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=1 UCX_TLS=ringk,self UCX_LOG_LEVEL=info \
    timeout 120 "$pp" 20000 >"$log1" 2>&1 &
pid1=$!
env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=0 UCX_TLS=ringk,self UCX_LOG_LEVEL=info \
    timeout 120 "$pp" 20000 >"$log0" 2>&1
rc0=$?
wait $pid1
rc1=$?
cat "$log0" "$log1" >"$logs"
# pong's 20001: the 20000 balls and ping's TERMINATE; direct: taken straight from the worker,
# inline: of them handled in its receive callback
if why=$(results "$logs" 2 "all: rounds=20000 errors=0" \
             "1: handled=20001 direct>=1 inline>=1" -- "$pp") &&
   [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] &&
   grep -q "am(ringk/ring)" "$log0" && grep -q "am(ringk/ring)" "$log1"; then
    ok "two processes: ping in rank 0, pong in rank 1, over ringk"
    grep -h "^pingpong" "$log0" "$log1" | sed 's/^/# /'
else
    nok "two processes: ping in rank 0, pong in rank 1, over ringk (exit $rc0 $rc1)" \
        "$(cat "$logs"; echo "$why")"
fi
rm -f "$log0" "$log1" "$logs"

job "pipeline across 3 processes (RINGK_* bootstrap)" 3 \
    "0: items=100000 workers=4 sum=sequential match=1" -- "$top/examples/pipeline" 100000 4
job "pipeline across 4 processes (RINGK_* bootstrap)" 4 \
    "0: items=50000 workers=6 sum=sequential match=1" -- "$top/examples/pipeline" 50000 6

job "heat stencil across 3 processes, 5 strips" 3 "0: strips=5 cells=65536 differ=0 match=1" -- \
    "$top/examples/heat" 256 256 100 5
# a device kernel in one process, a CPU kernel in the other: pong on the emulated device of
# rank 1 (the same device code as on a GPU), and the nvcc build (a GPU when there is one)
job "device pingpong across 2 processes: CPU ping, pong on the emulated device" 2 \
    "all: rounds=5000 errors=0" "1: device=-2 seen=5000" -- "$top/examples/gpu/gpu_pingpong_emu" 5000
# (built without CUDA, the nvcc build is the emulated one)
gpu=-1
if ! grep -q '^#define HAVE_CUDA 1' "$top/ringk_config.h"; then
    gpu=-2
elif command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU 0'; then
    gpu=0
fi
job "device pingpong across 2 processes: pong on device $gpu (nvcc build)" 2 \
    "all: rounds=5000 errors=0" "1: device=$gpu seen=5000" -- "$top/examples/gpu/gpu_pingpong" 5000
job "pagerank across 2 processes, 4 partitions" 2 \
    "0: vertices=20000 supersteps=20 partitions=4 match=1" -- "$top/examples/pagerank" 20000 20 4
job "pagerank across 4 processes, 6 partitions" 4 \
    "0: vertices=30000 supersteps=15 partitions=6 match=1" -- "$top/examples/pagerank" 30000 15 6
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

# every subscriber in every rank gets all M in order; short: rank 0's publishes that reached fewer
# than all subscribers
job "topics across 2 processes: one AM per process, 4 subscribers" 2 \
    "all: subscribers=2 got0=2000 got1=2000 out_of_order=0 short=0" -- \
    "$top/test/check/job_topics" 2000
job "topics across 3 processes: 6 subscribers" 3 \
    "all: subscribers=2 got0=1000 got1=1000 out_of_order=0 short=0" -- \
    "$top/test/check/job_topics" 1000

# device kernels of two processes (emulated device): fwd in rank 0 writes straight into the
# device inbox of sink in rank 1 (64 messages: fwd meets it full) by mapping its memory; the path
# from fwd's sent_direct and sink's count of messages that came through the host (staged)
job "device kernel to device kernel of another process: straight into its inbox, in order" 2 \
    "0: sent=20000 sent_direct=20000 send_failed=0 routes_direct=1 routes_host=0" \
    "1: got=20000 out_of_order=0 bad=0 staged=0" -- "$top/test/check/job_device" 20000
job "... to an event-driven kernel of another process: woken through its doorbell" 2 \
    "0: sent=5000 sent_direct=5000 routes_direct=1" \
    "1: got=5000 out_of_order=0 staged=0 launches>=3" -- \
    "$top/test/check/job_device" 5000 event
job "... to a kernel that subscribes to some kernels only: through the host, which checks" 2 \
    "0: sent=2000 sent_direct=0 routes_direct=0 routes_host=1" \
    "1: got=2000 out_of_order=0 staged=2000" -- "$top/test/check/job_device" 2000 subscribe
RINGK_DEVICE_REMOTE=0 job "... with RINGK_DEVICE_REMOTE=0: through the host" 2 \
    "0: sent=2000 sent_direct=0 routes_direct=0 routes_host=1" \
    "1: got=2000 out_of_order=0 staged=2000" -- "$top/test/check/job_device" 2000
# rank 1 ends without leaving while fwd waits for room in its full inbox: the route is dropped,
# fwd's waiting send and the rest go through the host and fail there; none is left waiting
job "... whose process ends without leaving: the wait ends, the rest fail through the host" 2 \
    "0: sent=1000 sent_direct>=64 sent_direct<1000 send_failed>=1 routes_direct=1 routes_dropped=1" \
    "1: died=1" -- "$top/test/check/job_device" 1000 die
# the sender's process ends without leaving right after claiming cells in the target's inbox
# (never filled), or right after publishing into the inbox of a parked event-driven target
# (never woken): the target's process gives the cells up (the target can then terminate), or
# wakes the target (it gets the message)
job "a sender of another process dies between its claim and its publish: the cells are given up" 2 \
    "0: direct=1" "1: got=300 out_of_order=0 staged=0 repaired=1" -- \
    "$top/test/check/job_device" 300 abandon
job "a sender of another process dies between its publish and the wake-up: the target is woken" 2 \
    "0: direct=1" "1: got=301 out_of_order=0 staged=0 relaunched=1" -- \
    "$top/test/check/job_device" 300 nowake

# the receiving process enforces subscribes_to for senders in other processes
job "subscribes_to across 2 processes: b's messages refused and logged, a's delivered in order" 2 \
    "0: sent_a=20 sent_b=20 send_failures=0" \
    "1: from_a=20 out_of_order=0 from_b=0 refused=20" -- "$top/test/check/job_subscribe" 20

# a handler run in the receive callback must not wait there: what would wait is deferred, in
# order (RINGK_RECV_INLINE); tail's messages go back to its loop once a call in the callback
# was slow (stops: logged once, exactly when one of its slow calls ran there: slow_inline;
# job_defer then checks fewer than half of them were handled there)
job "receive-callback handler: sends that would wait are deferred and delivered in order" 2 \
    "all: recv_inline=1 expected=3200" \
    "0: sink_got=3200 sink_out_of_order=0 tail_got=3200 tail_out_of_order=0 tail_inline>=1
        slow_inline<=1 stops=slow_inline" \
    "1: near_got=3200 near_out_of_order=0 triggers=50 relay_inline>=1 deferred>=1
        deferred_failed=0 handler_errors=0" -- "$top/test/check/job_defer" 50
job "RINGK_RECV_INLINE=0: no handler runs in the receive callback, all delivered in order" 2 \
    "all: recv_inline=0 expected=1280" \
    "0: sink_got=1280 sink_out_of_order=0 tail_got=1280 tail_out_of_order=0 tail_inline=0
        slow_inline=0 stops=0" \
    "1: near_got=1280 near_out_of_order=0 triggers=20 relay_inline=0 deferred=0
        deferred_failed=0 handler_errors=0" -- \
    env RINGK_RECV_INLINE=0 "$top/test/check/job_defer" 20

job "named barrier across 2 processes, 4 kernels x 10 rounds" 2 \
    "all: kernels=2 rounds=10 early=0 handler_errors=0 wait_errors=0" -- \
    "$top/test/check/job_barrier"
job "named barrier across 3 processes, 6 kernels x 10 rounds" 3 \
    "all: kernels=2 rounds=10 early=0 handler_errors=0 wait_errors=0" -- \
    "$top/test/check/job_barrier"
# a barrier that cannot complete because a process taking part went: EPIPE, not a hang
job "barrier across 2 processes, rank 1 leaves before arriving: rank 0's waits end with EPIPE" 2 \
    "0: kernels=2 epipe=2 other=0" "1: left=1" -- "$top/test/check/job_barrier" left
job "barrier across 2 processes, rank 1 dies before arriving: rank 0's waits end with EPIPE" 2 \
    "0: kernels=2 epipe=2 other=0" "1: left=0" -- "$top/test/check/job_barrier" lost

# rank 0 sends and leaves at once: nothing in flight lost, and leaving is not dying (each sink's
# rank sees sends to rank 0 fail, never counts it lost and gets one LEFT event about it)
job "rank 0 leaves right after sending: 2 processes, nothing lost, not counted lost" 2 \
    "0: sent=20000 sinks=1 left=1" \
    "rest: got=20000 expected=20000 out_of_order=0 sends_epipe=1 peers_lost=0 events=1
        event_left=1 event_lost=0 event_rank=0" -- "$top/test/check/job_leave" 20000
job "rank 0 leaves right after sending: 3 processes" 3 \
    "0: sent=10000 sinks=2 left=1" \
    "rest: got=10000 expected=10000 out_of_order=0 sends_epipe=1 peers_lost=0 events=1
        event_left=1 event_lost=0 event_rank=0" -- "$top/test/check/job_leave" 10000
# rank 0 exits without leaving: the others count it lost and their peer_events kernels are told
job "rank 0 dies: 3 processes count it lost, each watch kernel gets one PEER_LOST event" 3 \
    "0: sent=1000 sinks=2 left=0" \
    "rest: peers_lost=1 events=1 event_lost=1 event_left=0 event_rank=0 sends_epipe=1" -- \
    "$top/test/check/job_leave" 1000 die

# a remote inbox that does not drain pushes back on the sender (credits), nothing lost: lo..hi
# accepted before -EAGAIN (inbox + window), a timed send ends with -ETIMEDOUT after 200 ms and
# warns that it waits, then all M in order
job "remote backpressure: -EAGAIN after inbox + window, -ETIMEDOUT, then all 20000 in order" 2 \
    "0: publish=0 inbox=16 lo=17 hi=32 accepted>=lo accepted<=hi timed_out=1 waited_ms>=199
        warned=1 total=20000 error=0" \
    "1: got=20000 expected=20000 out_of_order=0" -- "$top/test/check/job_backpressure" 20000
job "remote publish backpressure: -EAGAIN after 256 publishes on their way, then all in order" 2 \
    "0: publish=1 inbox=16 lo=256 hi=272 accepted>=lo accepted<=hi timed_out=1 waited_ms>=199
        warned=1 total=5000 error=0" \
    "1: got=5000 expected=5000 out_of_order=0" -- \
    "$top/test/check/job_backpressure" 5000 publish

# credits whose message UCP refuses stay owed and go later: rank 1 refuses 12 credit messages
# (each a quarter of the window), rank 0 still sends all 5000 without a timeout; rank 0's
# first send is held in progress for 1.6 s, which its log says (RINGK_WAIT_WARN_MS=500)
job "refused credit messages are sent again: all 5000 in order, no sender stalls" 2 \
    "0: sent=5000 expected=5000 error=0 logged=1" \
    "1: got=5000 expected=5000 out_of_order=0 refused=12 logged=1" -- \
    "$top/test/check/job_credit_fault" 5000

mpi=$top/examples/mpi
# mpi_job NPROCS SPEC... -- PROGRAM ARGS...: examples/mpi/PROGRAM under mpirun, checked as job()
mpi_job() {
    local np=$1 prog out why rc log specs=()
    shift
    while [ "$1" != -- ]; do
        specs+=("$1")
        shift
    done
    prog=$2
    shift 2
    log=$(mktemp)
    timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$np" -x LD_PRELOAD \
        -x UCX_TLS=ringk,self "$mpi/$prog" "$@" >"$log" 2>&1
    rc=$?
    if why=$(results "$log" "$np" "${specs[@]}" -- "$mpi/$prog") && [ $rc -eq 0 ]; then
        ok "$prog on $np ranks (MPI bootstrap)"
        grep -v -e "^\[" -e "^RESULT " "$log" | sed 's/^/# /'
    else
        nok "$prog on $np ranks (MPI bootstrap) (exit $rc)" "$(cat "$log"; echo "$why")"
    fi
    rm -f "$log"
}
if [ -x "$mpi/pipeline_mpi" ] && command -v mpirun >/dev/null; then
    mpi_job 3 "0: items=100000 workers=4 sum=sequential match=1" -- pipeline_mpi 100000 4
    mpi_job 2 "0: strips=4 cells=16384 differ=0 match=1" -- heat_mpi 128 128 60 4
    mpi_job 3 "0: vertices=20000 supersteps=20 partitions=4 match=1" -- pagerank_mpi 20000 20 4
    mpi_job 2 "all: rounds=5000 errors=0" -- pingpong_mpi 5000
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
refuse "RINGK_RANK without RINGK_SIZE" "RINGK_SIZE and RINGK_ROOT are not set" RINGK_RANK=1
refuse "RINGK_SIZE=2 without RINGK_ROOT" "RINGK_ROOT is not set" RINGK_SIZE=2 RINGK_RANK=1
refuse "bad RINGK_JOIN_TIMEOUT_MS" "RINGK_JOIN_TIMEOUT_MS 'soon' is not a number of milliseconds in 1..3600000" \
    RINGK_JOIN_TIMEOUT_MS=soon RINGK_SIZE=2 RINGK_RANK=1 RINGK_ROOT=127.0.0.1:1
# nobody listens there: the join gives up after RINGK_JOIN_TIMEOUT_MS, naming the address
port=$((port + 1))
refuse "a failed join names the address and the limit" \
    "could not connect to rank 0 at RINGK_ROOT 127.0.0.1:$port within RINGK_JOIN_TIMEOUT_MS 300 ms" \
    RINGK_JOIN_TIMEOUT_MS=300 RINGK_SIZE=2 RINGK_RANK=1 RINGK_ROOT=127.0.0.1:$port

# How the processes of a job are connected, said by each: through the loader wrapper (this
# script runs under it) every peer over ringk; without it (the plugin taken out of
# LD_PRELOAD, RINGK_PLUGIN naming the built one as an installed one would be found), over TCP
# loopback with a warning that says to use ringk-run.
job "a job says it reaches its peers over ringk (one INFO line per peer)" 3 \
    "all: reached=2 over_ringk=2 warned=0" -- "$top/test/check/job_report"
no_plugin=$(tr ':' '\n' <<<"${LD_PRELOAD:-}" | grep -v 'libuct_ringk' | paste -sd: -)
LD_PRELOAD=$no_plugin RINGK_PLUGIN=$top/src/uct/ringk/.libs/libuct_ringk.so \
    job "a job started without ringk-run warns that its peers on this node are reached over TCP" 2 \
    "all: reached=1 over_ringk=0 warned=1" -- env UCX_TLS=all "$top/test/check/job_report"
[ $fails -eq 0 ]
