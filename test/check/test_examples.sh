#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The actor examples, as TAP: each must exit 0 and end with a RESULT line (result.sh) whose
# values show its result verified against a sequential computation (or every value checked).
# Then some of them again on a machine without the CUDA runtime: in a mount namespace of their
# own, every directory that holds libcudart (the loader's cache, the toolkit configure found)
# is covered by an empty tmpfs; libringk loads CUDA only when a device asks for it.
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
echo "1..19"
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
    "device=-2 strips=4 differ=0 errors=0 direct=180 threads=64" \
    "$top/examples/gpu/gpu_heat_emu" 96 64 30 4
check "device heat stencil: 3 strips of two blocks each on the emulated device" \
    "device=-2 strips=3 differ=0 errors=0 direct=80 threads=128" \
    "$top/examples/gpu/gpu_heat_emu" 256 256 20 3
# on a device (not the CPU fallback) every halo row goes device to device: two per step across
# each of the 3 (4) boundaries between strips
check "device matrix-vector products: 128 threads of one block on the emulated device" \
    "ok=1 device=-2 n=128 msgs=300 replies=300 wrong=0 threads=128" \
    "$top/examples/gpu/gpu_matvec_emu" 128 300 128
check "device matrix-vector products on device $gpu (nvcc build)" \
    "ok=1 device=$gpu n=256 msgs=2000 replies=2000 wrong=0 threads=$([ "$gpu" -ne -1 ] &&
    echo 256 || echo 1)" "$top/examples/gpu/gpu_matvec" 256 2000 256
halo_path=""
[ "$gpu" -ne -1 ] && halo_path=" direct=400 threads=64"
check "device heat stencil: 5 strips on device $gpu (nvcc build)" \
    "device=$gpu strips=5 differ=0 errors=0$halo_path" "$top/examples/gpu/gpu_heat" 128 128 50 5

n=$((n + 1))
if ! ldd "$top/src/ringk/.libs/libringk.so" "$top/src/uct/ringk/.libs/libuct_ringk.so" |
     grep -q cudart; then
    echo "ok $n - libringk and the plugin do not link the CUDA runtime"
else
    echo "not ok $n - libringk or the plugin links the CUDA runtime"
    ldd "$top/src/ringk/.libs/libringk.so" "$top/src/uct/ringk/.libs/libuct_ringk.so" | sed 's/^/# /'
    fails=$((fails + 1))
fi
# the directories to hide, in the environment (check() takes the program from the first word
# with a '/'); the command that runs the rest of its words with them hidden
RINGK_TEST_CUDART_DIRS=$( { ldconfig -p | sed -n 's|.*libcudart\.so.* => \(.*\)/libcudart.*|\1|p'
                          sed -n 's/^#define RINGK_CUDART_DIR "\(.*\)"/\1/p' "$top/ringk_config.h"; } |
                        xargs -r -n 1 realpath -e 2>/dev/null | sort -u | tr '\n' ' ')
export RINGK_TEST_CUDART_DIRS
no_cuda=(unshare -m bash -c 'for d in $RINGK_TEST_CUDART_DIRS; do mount -t tmpfs none "$d" || exit 97; done
                             exec "$@"' _)
cudart_dirs=$RINGK_TEST_CUDART_DIRS
if ! unshare -m true 2>/dev/null; then
    for name in hello pingpong pipeline gpu_pingpong_emu; do
        n=$((n + 1))
        echo "ok $n # SKIP $name without the CUDA runtime: no mount namespace here (needs root)"
    done
else
    n=$((n + 1))
    out=$("${no_cuda[@]}" timeout 60 "$top/examples/hello" 2>&1)
    if [ $? -eq 0 ] && [ "$(grep -c '^greeter got "' <<<"$out")" = 3 ]; then
        echo "ok $n - hello without the CUDA runtime (hidden: ${cudart_dirs:-none found})"
    else
        echo "not ok $n - hello without the CUDA runtime (hidden: $cudart_dirs)"
        sed 's/^/# /' <<<"$out"
        fails=$((fails + 1))
    fi
    check "pingpong without the CUDA runtime" "rounds=20000 errors=0" \
        "${no_cuda[@]}" "$top/examples/pingpong" 20000
    check "pipeline without the CUDA runtime" "items=20000 workers=2 sum=sequential match=1" \
        "${no_cuda[@]}" "$top/examples/pipeline" 20000 2
    check "device pingpong on the emulated device without the CUDA runtime" \
        "device=-2 rounds=2000 seen=2000 errors=0" "${no_cuda[@]}" \
        "$top/examples/gpu/gpu_pingpong_emu" 2000
fi
[ $fails -eq 0 ]
