#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ringk_info as a user runs it, as TAP: this machine (the GPUs its driver lists, if any, and the
# host path between processes), every topology fixture (expected matrix rows), --json
# validity, and clear errors for bad files and bad overrides.
set -u
top=${RINGK_TOP_BUILDDIR:?}
src=${RINGK_TOP_SRCDIR:?}
info=$top/src/tools/ringk_info
fx=$src/test/check/topo
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' <<<"$2" | tail -n 20; fails=$((fails + 1)); }
# expect NAME PATTERN... -- CMD...: CMD succeeds and prints every PATTERN (grep -E)
expect() {
    local name=$1 out pats=()
    shift
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    out=$("$@" 2>&1) || { nok "$name (exit $?)" "$out"; return; }
    for p in "${pats[@]}"; do
        grep -Eq -- "$p" <<<"$out" || { nok "$name (missing: $p)" "$out"; return; }
    done
    ok "$name"
}
# refuse NAME PATTERN CMD...: CMD fails and says PATTERN
refuse() {
    local name=$1 pat=$2 out
    shift 2
    if out=$("$@" 2>&1); then nok "$name (succeeded)" "$out"; return; fi
    grep -Eq -- "$pat" <<<"$out" && ok "$name" || nok "$name (no '$pat')" "$out"
}
json() { # json NAME CMD...: CMD prints valid JSON
    local name=$1 out
    shift
    out=$("$@" 2>&1) && python3 -m json.tool <<<"$out" >/dev/null && ok "$name" ||
        nok "$name" "$out"
}
echo "1..15"
# the GPUs the driver lists, if any: ringk_info must find as many, each with its matrix row
gpus=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L | grep -c '^GPU ')
elif [ -d /proc/driver/nvidia/gpus ]; then
    gpus=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 | wc -l)
fi
if [ "$gpus" -eq 0 ]; then
    expect "this machine: host-only topology and the host path" \
        "topology: this machine: [0-9]+ package" " 0 GPU" \
        "process-process  -> HOST_STAGED .*shared-memory rings.*same boot id, PID, IPC and network namespaces" \
        -- "$info"
else
    expect "this machine: the driver's $gpus GPU(s) and the host path" \
        "topology: this machine: [0-9]+ package.* $gpus GPU\\(s\\)" "^GPU0 +X" "^GPU$((gpus - 1)) " \
        "process-process  -> HOST_STAGED .*shared-memory rings.*same boot id, PID, IPC and network namespaces" \
        -- "$info"
fi
json "this machine: --json is valid JSON" "$info" --json
expect "nvswitch-8gpu: NV18 everywhere, P2P_NVLINK" "^GPU0 +X +NV18 +NV18 +NV18 +NV18 +NV18 +NV18 +NV18" \
    "GPU3-GPU4 +NVLINK +-> P2P_NVLINK +450.0 GB/s" "GPU0-NUMA1 +CROSS_SOCKET" \
    -- "$info" --topo "$fx/nvswitch-8gpu.xml"
expect "pcie-4gpu: PIX within a switch, PHB across" "^GPU0 +X +PIX +PHB +PHB" "^GPU2 +PHB +PHB +X +PIX" \
    "GPU0-GPU1 +PCIE_SWITCH +-> P2P_PCIE" "GPU0-GPU2 +HOST_BRIDGE +-> HOST_STAGED" \
    -- "$info" --topo "$fx/pcie-4gpu.xml"
expect "dual-socket: PHB, NV2, SYS" "^GPU0 +X +PHB +NV2" "^GPU1 +PHB +X +SYS" \
    "GPU1-GPU2 +CROSS_SOCKET +-> HOST_STAGED" -- "$info" --topo "$fx/dual-socket.xml"
expect "vm-flat: PHB everywhere" "^GPU3 +PHB +PHB +PHB +X" -- "$info" --topo "$fx/vm-flat.xml"
expect "no-gpu: host only" "0 GPU\\(s\\)" "HOST_STAGED" -- "$info" --topo "$fx/no-gpu.xml"
json "fixtures: --json is valid JSON" bash -c "for f in $fx/*.xml; do $info --json --topo \$f | python3 -m json.tool >/dev/null || exit 1; done; echo {}"
expect "RINGK_P2P_LEVEL=PHB lets PHB pairs use P2P" "GPU0-GPU2 +HOST_BRIDGE +-> P2P_PCIE" \
    -- env RINGK_P2P_LEVEL=PHB "$info" --topo "$fx/pcie-4gpu.xml"
expect "RINGK_PATH=HOST_STAGED forces staging" "GPU0-GPU1 +PCIE_SWITCH +-> HOST_STAGED .*forced by RINGK_PATH" \
    -- env RINGK_PATH=HOST_STAGED "$info" --topo "$fx/pcie-4gpu.xml"
expect "RINGK_TOPO_FILE is read" "topology: .*dual-socket.xml" -- env RINGK_TOPO_FILE="$fx/dual-socket.xml" "$info"
refuse "missing file" "cannot read topology file '/nonexistent.xml'" "$info" --topo /nonexistent.xml
refuse "garbage file" "is not a valid hwloc XML topology|cannot be used by hwloc" "$info" --topo "$src/README.md"
refuse "bad RINGK_P2P_LEVEL" "RINGK_P2P_LEVEL 'fastest' is not one of" env RINGK_P2P_LEVEL=fastest "$info"
refuse "bad RINGK_PATH" "RINGK_PATH 'gpu' is not one of" env RINGK_PATH=gpu "$info"
[ $fails -eq 0 ]
