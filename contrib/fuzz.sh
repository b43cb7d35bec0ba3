#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fuzz.sh [SECONDS]: builds the libFuzzer targets in test/fuzz/ with clang (ASan + UBSan) and
# runs each for SECONDS (default 30) from its seed corpus (test/fuzz/corpus/<target>, copied:
# the repository's corpus is not modified), as many at once as there are cores (each fuzzer is
# one thread; RINGK_FUZZ_JOBS overrides). Prints TAP; a crash keeps its input in _fuzz/ and
# fails. Installs clang and libclang-rt-14-dev when missing.
#   fuzz_ring     ring cells and tail written by a hostile producer; ring headers on attach
#   fuzz_topo     topology files (hwloc XML + NVLink attributes)
#   fuzz_strings  RINGK_P2P_LEVEL / RINGK_PATH values, UCX version strings
#   fuzz_wire     libringk's messages between processes (K2K, topics, barriers, goodbyes,
#                 credits) and the tables of the start exchange
#   fuzz_ipc      what the peer of an IPC channel writes: a shared-memory mailbox (counts, flag,
#                 slots) and socket messages with descriptors; accepted handles are imported
#   fuzz_uct      the transport's packed remote keys (registered and ringk_shm), receive-segment
#                 headers checked against iface addresses, device addresses; needs a configured
#                 build directory (RINGK_BUILDDIR, default _build) for UCX's build config.h
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-30}
out=$top/_fuzz
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
for p in clang libclang-rt-14-dev libhwloc-dev; do
    dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "install ok installed" || need="${need:-} $p"
done
if [ -n "${need:-}" ]; then
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need \
        >/dev/null
fi
mkdir -p "$out"
core="$top/src/core/ringk_topo.c $top/src/core/ringk_policy.c $top/src/core/ringk_ucxver.c \
      $top/src/core/ringk_cuda.c $top/src/core/ringk_cuda_ipc.c $top/src/core/ringk_cuda_vmm.c \
      $top/src/core/ringk_node.c"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$top/src"
build=${RINGK_BUILDDIR:-$top/_build}
ucx_src=$(sed -n 's/^UCX_SRC_DIR = //p' "$build/Makefile" 2>/dev/null)
targets="fuzz_ring fuzz_topo fuzz_strings fuzz_wire fuzz_ipc fuzz_uct"
# the core as the host-only (no CUDA) objects fuzz_uct links with the plugin's sources: every
# file of src/core, as the plugin links all of libringk_core
core_objs() {
    local f
    mkdir -p "$out/core"
    for f in "$top"/src/core/*.c; do
        f=${f##*/}
        clang ${flags/fuzzer,/fuzzer-no-link,} $(pkg-config --cflags hwloc) -c \
            "$top/src/core/$f" -o "$out/core/${f%.c}.o" || return 1
    done
}
# run_target T: runs fuzzer T; its status goes to _fuzz/T.rc (written last)
run_target() {
    local t=$1 leaks=1 rc
    rm -rf "$out/$t.corpus" "$out/$t.rc"
    cp -r "$top/test/fuzz/corpus/${t#fuzz_}" "$out/$t.corpus"
    # hwloc's XML plugins, loaded and unloaded by hwloc itself, leak on malformed files with no
    # symbol left to suppress: leak checking is off for the topology target only (ringk's own
    # paths are leak-checked by contrib/sanitize.sh asan)
    [ "$t" = fuzz_topo ] && leaks=0
    (cd "$out" && ASAN_OPTIONS=detect_leaks=$leaks \
        LSAN_OPTIONS="suppressions=$top/contrib/lsan.supp" \
        timeout $((secs + 60)) "./$t" -max_total_time="$secs" -max_len=16384 -print_final_stats=1 \
        -detect_leaks=$leaks \
        -artifact_prefix="$out/$t-" "$out/$t.corpus" >"$out/$t.log" 2>&1)
    rc=$?
    echo $rc >"$out/$t.rc"
}
jobs=${RINGK_FUZZ_JOBS:-$(nproc)}
n=0
fails=0
declare -A result=()
echo "1..$(wc -w <<<"$targets")"
# built one after another (clang uses the cores), then run $jobs at once
for t in $targets; do
    n=$((n + 1))
    extra=""
    case $t in
        fuzz_ring) ;;
        fuzz_wire) extra="$top/src/ringk/net/ringk_wire.c $(pkg-config --cflags hwloc ucx)" ;;
        fuzz_ipc)
            # libringk's IPC files without the rest of libringk (the target stubs its log), and
            # an empty configuration header: no CUDA, so device handles are refused
            mkdir -p "$out/ipc-config" && : >"$out/ipc-config/ringk_config.h"
            extra="-I$out/ipc-config -I$top/src/ringk/ipc
                   $(ls "$top"/src/ringk/ipc/*.c | grep -v '/ipc_shm\.c$') $core
                   $(pkg-config --cflags --libs hwloc ucx) -ldl" ;;
        fuzz_uct)
            if [ -z "$ucx_src" ] || [ ! -f "$build/ucx-build/config.h" ]; then
                result[$t]="not ok $n - $t: $build is not a configured build directory"
                continue
            fi
            core_objs 2>"$out/$t.build.log"
            # every source of the plugin but ring/ringk_ep.c, which the target includes
            extra="-I$build -I$build/ucx-build -I$ucx_src/src -I$top/src/uct/ringk/ring
                   -DHAVE_CONFIG_H
                   $(ls "$top"/src/uct/ringk/*/*.c | grep -v '/ring/ringk_ep\.c$')
                   $out/core/*.o
                   $(pkg-config --cflags --libs hwloc ucx) -luct -lucs -ldl" ;;
        *) extra="$core $(pkg-config --cflags --libs hwloc ucx) -ldl" ;;
    esac
    if ! clang $flags -o "$out/$t" "$top/test/fuzz/$t.c" $extra 2>"$out/$t.build.log"; then
        # the errors first (a link error comes after pages of warnings), else the tail
        result[$t]="not ok $n - $t: build failed
$({ grep -E 'error|undefined reference' "$out/$t.build.log" || tail -n 20 "$out/$t.build.log"; } |
  head -n 20 | sed 's/^/# /')"
        continue
    fi
done
for t in $targets; do
    [ -n "${result[$t]+x}" ] && continue
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n
    done
    run_target "$t" &
done
wait
n=0
for t in $targets; do
    n=$((n + 1))
    if [ -n "${result[$t]+x}" ]; then
        echo "${result[$t]}"
        fails=$((fails + 1))
        continue
    fi
    rc=$(cat "$out/$t.rc" 2>/dev/null || echo "?")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -n1)
    if [ "$rc" = 0 ]; then
        echo "ok $n - $t: ${execs:-?} executions in ${secs}s, no crash"
    else
        echo "not ok $n - $t: exit $rc after ${execs:-?} executions (inputs in $out)"
        grep -E "ERROR|SUMMARY|runtime error" "$out/$t.log" | head -n 10 | sed 's/^/# /'
        fails=$((fails + 1))
    fi
done
[ $fails -eq 0 ]
