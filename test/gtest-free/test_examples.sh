#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The actor examples, as TAP: each must exit 0 and end with a RESULT line (result.sh) whose
# values show its result verified against a sequential computation (or every value checked).
set -u
top=${RINGK_TOP_BUILDDIR:?}
. "$(dirname "$0")/result.sh"
n=0
fails=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
check() { # check NAME CONDS CMD...: CMD as one process; CONDS as results' SPEC for rank 0
    local name=$1 conds=$2 rc why
    shift 2
    n=$((n + 1))
    timeout 120 "$@" >"$log" 2>&1
    rc=$?
    if why=$(results "$log" 1 "0: $conds" -- "$@") && [ $rc -eq 0 ]; then
        echo "ok $n - $name"
        grep -v "^RESULT " "$log" | sed 's/^/# /'
    else
        echo "not ok $n - $name (exit $rc)"
        sed 's/^/# /' "$log" <(echo "$why")
        fails=$((fails + 1))
    fi
}
# the device-kernel examples: built by nvcc they run on the GPU when there is one (device 0),
# else on the CPU (-1); the *_emu builds run the same device code on the emulated device (-2)
# (built without CUDA, the nvcc build is the emulated one)
gpu=-1
if ! grep -q '^#define HAVE_CUDA 1' "$top/ringk_config.h"; then
    gpu=-2
elif command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU 0'; then
    gpu=0
fi
echo "1..11"
check "pingpong (one process)" "rounds=100000 errors=0" "$top/examples/pingpong" 100000
check "pipeline producer -> 4 workers -> aggregator" \
    "items=200000 workers=4 sum=sequential match=1" "$top/examples/pipeline" 200000 4
check "pipeline with one worker" "items=5000 workers=1 sum=sequential match=1" \
    "$top/examples/pipeline" 5000 1
check "heat stencil, 4 strips, halo exchange" "strips=4 steps=100 cells=65536 differ=0 match=1" \
    "$top/examples/heat" 256 256 100 4
check "heat stencil, 7 uneven strips" "strips=7 steps=50 cells=6400 differ=0 match=1" \
    "$top/examples/heat" 100 64 50 7
check "pagerank, 4 partition kernels" "vertices=20000 supersteps=20 partitions=4 match=1" \
    "$top/examples/pagerank" 20000 20 4
check "pagerank, 8 partition kernels" "vertices=50000 supersteps=10 partitions=8 match=1" \
    "$top/examples/pagerank" 50000 10 8
check "device pingpong: CPU kernel <-> pong on the emulated device" \
    "device=-2 rounds=5000 seen=5000 errors=0 launches>=1" "$top/examples/gpu/gpu_pingpong_emu" 5000
check "device pingpong: pong on device $gpu (nvcc build)" \
    "device=$gpu rounds=20000 seen=20000 errors=0" "$top/examples/gpu/gpu_pingpong" 20000
check "device heat stencil: 4 strips on the emulated device, halos device to device" \
    "device=-2 strips=4 differ=0 errors=0 direct=180" "$top/examples/gpu/gpu_heat_emu" 96 64 30 4
# on a device (not the CPU fallback) every halo row goes device to device: two per step across
# each of the 3 (4) boundaries between strips
halo_path=""
[ "$gpu" -ne -1 ] && halo_path=" direct=400"
check "device heat stencil: 5 strips on device $gpu (nvcc build)" \
    "device=$gpu strips=5 differ=0 errors=0$halo_path" "$top/examples/gpu/gpu_heat" 128 128 50 5
[ $fails -eq 0 ]
