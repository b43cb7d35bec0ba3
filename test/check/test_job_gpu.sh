#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Device kernels of two processes on one GPU, as TAP (job_device_gpu: job_device.c's kernels
# compiled by nvcc, on GPU 0 in both processes): fwd in rank 0 writes straight into the device
# inbox of sink in rank 1, which its process shares as cuMem memory handed over by descriptor;
# the path from fwd's sent_direct and sink's count of messages that came through the host
# (staged); and the senders that die. Skipped without a CUDA build or a usable GPU. The two
# processes' resident kernels share the GPU by time slices unless MPS runs: the counts are
# kept small.
set -u
top=${RINGK_TOP_BUILDDIR:?}
. "$(dirname "$0")/result.sh"
prog=$top/test/check/job_device_gpu
# apart from test_job.sh's, test_ucp.sh's and test_netns.sh's ports (make -j check)
port=$((7000 + ($$ % 2900)))
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' <<<"$2" | tail -n 30; fails=$((fails + 1)); }

if [ ! -x "$prog" ]; then
    echo "1..0 # SKIP built without CUDA"
    exit 0
fi
probe=$("$prog" 0 probe 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
    echo "1..0 # SKIP no usable CUDA device: ${probe:-}"
    exit 0
elif [ $rc -ne 0 ]; then
    echo "1..1"
    nok "job_device_gpu runs (its probe exited $rc)" "$probe"
    exit 1
fi
gpus=$(sed -n 's/^gpus=//p' <<<"$probe")
# the case of two GPUs only where there are two (the bundle counts a skipped case as a failure)
if [ "${gpus:-1}" -ge 2 ]; then
    echo "1..7"
else
    echo "1..6"
    echo "# ${gpus:-1} CUDA device(s): the case of two GPUs is not run"
fi
job "GPU device kernel to GPU device kernel of another process: straight into its inbox" 2 \
    "0: sent=2000 sent_direct=2000 send_failed=0 routes_direct=1 routes_host=0" \
    "1: got=2000 out_of_order=0 bad=0 staged=0" -- "$prog" 2000
job "... to an event-driven GPU kernel of another process: woken through its doorbell" 2 \
    "0: sent=1000 sent_direct=1000 routes_direct=1" \
    "1: got=1000 out_of_order=0 staged=0 launches>=2" -- "$prog" 1000 event
RINGK_DEVICE_REMOTE=0 job "... with RINGK_DEVICE_REMOTE=0: through the host" 2 \
    "0: sent=1000 sent_direct=0 routes_direct=0 routes_host=1" \
    "1: got=1000 out_of_order=0 staged=1000" -- "$prog" 1000
job "... whose process ends without leaving: the wait ends, the rest fail through the host" 2 \
    "0: sent=1000 sent_direct>=64 sent_direct<1000 send_failed>=1 routes_direct=1 routes_dropped=1" \
    "1: died=1" -- "$prog" 1000 die
# the sender's process ends right after claiming cells it never fills, or after publishing into
# a parked event-driven target without waking it: the target's loop gives the cells up, or its
# process wakes it
job "a GPU sender of another process dies between its claim and its publish: cells given up" 2 \
    "0: direct=1" "1: got=300 out_of_order=0 staged=0 repaired=1" -- "$prog" 300 abandon
job "a GPU sender of another process dies between its publish and the wake-up: target woken" 2 \
    "0: direct=1" "1: got=301 out_of_order=0 staged=0 relaunched=1" -- "$prog" 300 nowake
if [ "${gpus:-1}" -ge 2 ]; then
    # sink on GPU 1: fwd's GPU 0 is given access to its cuMem memory where the pair has peer
    # access with native atomics; otherwise the route goes through the host, and says why
    peer=$("$prog" 0 probe-peer 2>&1)
    rc=$?
    echo "# $peer"
    if [ $rc -eq 0 ]; then
        JOB_DEVICE_SINK_GPU=1 job "... on another GPU (peer access): straight into its inbox" 2 \
            "0: sent=1000 sent_direct=1000 routes_direct=1 routes_host=0" \
            "1: got=1000 out_of_order=0 staged=0" -- "$prog" 1000
    else
        JOB_DEVICE_SINK_GPU=1 job "... on another GPU without peer access: through the host" 2 \
            "0: sent=1000 sent_direct=0 routes_direct=0 routes_host=1" \
            "1: got=1000 out_of_order=0 staged=1000" -- "$prog" 1000
    fi
fi
[ $fails -eq 0 ]
