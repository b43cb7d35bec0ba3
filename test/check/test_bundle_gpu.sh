#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The offline bundle's gpu stage (contrib/bundle-run.sh) on a machine whose NVIDIA driver shows a
# GPU that the GPU tests cannot use, as TAP. A fake nvidia-smi that lists one GPU comes first in
# PATH, and run.sh's gpu stage runs against a simulated build: a Makefile whose 'check' runs
# stand-ins of the GPU tests through the test driver, printing what they print in a build
# without CUDA, or in one whose CUDA finds no device (the host cases pass, no GPU case runs):
# the stage's own count must catch both, whatever the tests say. The stage must fail, not skip,
# with no GPU test case executed; where GPU cases ran it passes and counts them; with no GPU
# listed it does not fail. Then this build's own test_device_gpu, with the fake nvidia-smi and
# no usable CUDA, must fail and say why. Nothing runs in this build's tree but that binary.
set -u
top=${RINGK_TOP_BUILDDIR:?}
src=${RINGK_TOP_SRCDIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() {
    n=$((n + 1))
    echo "not ok $n - $1"
    tail -n 30 <<<"$2" | sed 's/^/# /'
    fails=$((fails + 1))
}
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

# fake_smi DIR GPUS: an nvidia-smi in DIR that lists GPUS GPUs (0 or 1) and knows nothing else
fake_smi() {
    mkdir -p "$1"
    if [ "$2" -gt 0 ]; then
        cat > "$1/nvidia-smi" <<'EOF'
#!/bin/sh
[ "$1" = -L ] && echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
[ "$1" = topo ] && printf '\t\033[4mGPU0\tCPU Affinity\033[0m\nGPU0\t X \t0-15\n'
exit 0
EOF
    else
        printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' > "$1/nvidia-smi"
    fi
    chmod +x "$1/nvidia-smi"
}

# tap_prog FILE LINE...: a stand-in test program printing the TAP lines LINE...
tap_prog() {
    local f=$1
    shift
    mkdir -p "$(dirname "$f")"
    { echo '#!/bin/sh'; printf "echo '%s'\n" "$@"; } > "$f"
    chmod +x "$f"
}

# fake_build DIR KIND: a build tree in DIR/build as run.sh's gpu stage uses it, its GPU tests
# printing what they would in a build of KIND: nocuda (configure found no CUDA), unusable (a
# CUDA build where CUDA finds no device, with a test_device_gpu that does not ask the driver:
# its host cases pass and nothing else runs) or gpu (GPU cases ran and passed)
fake_build() {
    local b=$1/build t=test/check f=x.c
    local insufficient="CUDA driver version is insufficient for CUDA runtime version"
    mkdir -p "$b/contrib" "$b/$t"
    tap_prog "$b/contrib/ringk-run"
    echo 'exec "$@"' >> "$b/contrib/ringk-run"
    # what automake's check does for these tests: each through the TAP driver, failing if one did
    {
        echo "top_srcdir = $src"
        echo "SHELL = /bin/bash"
        echo "check:"
        # shellcheck disable=SC2016 # make's variables
        printf '\t@%s; \\\n\t%s\n' \
            'for t in $(TESTS); do AM_TAP_AWK=awk $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh \
                --test-name $$t --log-file $$t.log --trs-file $$t.trs --color-tests no \
                --enable-hard-errors yes --expect-failure no -- ./$$t || exit 1; done' \
            '! grep -q "^:global-test-result: \(FAIL\|ERROR\)" $(TESTS:=.trs)'
    } > "$b/Makefile"
    tap_prog "$b/$t/test_examples.sh" "1..1" "ok 1 - pingpong (one process)"
    case $2 in
        nocuda)
            echo "/* no HAVE_CUDA */" > "$b/ringk_config.h"
            tap_prog "$b/$t/test_kernels" \
                "1..0 # SKIP built without CUDA (configure --without-cuda or no CUDA Toolkit)"
            tap_prog "$b/$t/test_device_gpu" \
                "1..0 # SKIP built without CUDA (configure --without-cuda or no CUDA Toolkit)"
            tap_prog "$b/$t/test_job_gpu.sh" "1..0 # SKIP built without CUDA" ;;
        unusable)
            echo "#define HAVE_CUDA 1" > "$b/ringk_config.h"
            tap_prog "$b/$t/test_kernels" "1..0 # SKIP cudaGetDeviceCount: $insufficient"
            tap_prog "$b/$t/test_job_gpu.sh" "1..0 # SKIP no usable CUDA device: $insufficient"
            tap_prog "$b/$t/test_device_gpu" "# no CUDA device: the GPU scenarios are not run"
            cat >> "$b/$t/test_device_gpu" <<EOF
[ -n "\${RINGK_DEVICE_GPU_ONLY:-}" ] && { echo "1..0"; exit 0; }
echo "ok 1 - $f:device_gpu:test_device_gpu_nodev: Passed"
echo "ok 2 - $f:device_gpu:test_device_gpu_arg_rules: Passed"
echo "1..2"
EOF
            ;;
        gpu)
            echo "#define HAVE_CUDA 1" > "$b/ringk_config.h"
            tap_prog "$b/$t/test_kernels" "ok 1 - $f:ring:test_kernels_ring_selftest: Passed" "1..1"
            tap_prog "$b/$t/test_job_gpu.sh" "ok 1 - GPU device kernel to GPU device kernel" "1..1"
            tap_prog "$b/$t/test_device_gpu"
            cat >> "$b/$t/test_device_gpu" <<EOF
if [ -n "\${RINGK_DEVICE_GPU_ONLY:-}" ]; then
    echo "ok 1 - $f:gpu:test_device_gpu_scenarios: Passed"
    echo "1..1"
    exit 0
fi
echo "ok 1 - $f:host:test_device_gpu_nodev: Passed"
echo "ok 2 - $f:gpu:test_device_gpu_scenarios: Passed"
echo "ok 3 - $f:gpu:test_device_gpu_pingpong: Passed"
echo "1..3"
EOF
            ;;
    esac
}

# bundle NAME KIND GPUS RC STAGE EXECUTED PASSED: run.sh's gpu stage on a build of KIND with a
# fake nvidia-smi listing GPUS GPUs must exit with status RC (0, or 1 for any failure), and
# report.json must give the gpu stage STAGE (STAGE! for anything but it) and the GPU test cases
# EXECUTED and PASSED
bundle() {
    local name=$1 kind=$2 gpus=$3 want_rc=$4 want_stage=$5 want_exec=$6 want_pass=$7 d rc got
    d=$tmp/$kind-$gpus
    fake_build "$d/work" "$kind"
    fake_smi "$d/bin" "$gpus"
    PATH="$d/bin:$PATH" RINGK_BUNDLE_WORK=$d/work RINGK_BUNDLE_STAGES=gpu \
        RINGK_BUNDLE_DEADLINE=300 timeout 240 bash "$src/contrib/bundle-run.sh" "$d/report" \
        >"$d/out" 2>&1
    rc=$?
    # report.json's "stages" and "gpu_cases" lines, read with sed (the GPU node may have no
    # python)
    got="$(sed -n 's/^ *"stages": {.*"gpu": "\([a-z]*\)".*/\1/p' "$d/report/report.json" 2>&1 |
           grep . || echo none)"
    got+=" $(sed -n 's/^ *"gpu_cases": {"executed": \([0-9]*\), "passed": \([0-9]*\)}.*/\1 \2/p' \
             "$d/report/report.json" 2>/dev/null)"
    # and all of it JSON, where there is a python to say so (nvidia-smi's topology has
    # terminal escapes)
    if command -v python3 >/dev/null &&
       ! python3 -m json.tool "$d/report/report.json" >/dev/null 2>"$d/json.err"; then
        got+=" invalid JSON: $(cat "$d/json.err")"
    fi
    # shellcheck disable=SC2086 # three words
    set -- $got
    if { [ "$want_rc" = 0 ] && [ $rc -ne 0 ]; } || { [ "$want_rc" != 0 ] && [ $rc -eq 0 ]; } ||
       [ $# -ne 3 ] || [ "$2" != "$want_exec" ] || [ "$3" != "$want_pass" ] ||
       { [ "${want_stage%!}" = "$want_stage" ] && [ "$1" != "$want_stage" ]; } ||
       { [ "${want_stage%!}" != "$want_stage" ] && [ "$1" = "${want_stage%!}" ]; }; then
        nok "$name (exit $rc; gpu stage, executed, passed: $got)" "$(cat "$d/out")"
    else
        ok "$name (exit $rc; gpu stage $1, $2 GPU cases executed, $3 passed)"
    fi
}

# whether this machine has an NVIDIA driver that shows a GPU: then the cases without one, and
# CUDA's failure to find it, cannot be simulated here
driver_gpu=0
if ls /proc/driver/nvidia/gpus/* >/dev/null 2>&1 ||
   { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }; then
    driver_gpu=1
fi

echo "1..5"
bundle "a GPU listed, a build without CUDA: the gpu stage fails, no GPU case ran" \
    nocuda 1 1 fail 0 0
bundle "a GPU listed, CUDA that finds no device (host cases pass): the gpu stage fails" \
    unusable 1 1 fail 0 0
bundle "a GPU listed, GPU cases ran: the gpu stage passes and counts them (both runs)" \
    gpu 1 0 pass 5 5
if [ $driver_gpu = 0 ]; then
    bundle "no GPU listed, a build without CUDA: the gpu stage does not fail" \
        nocuda 0 0 'fail!' 0 0
else
    skip "no GPU listed, a build without CUDA" "this machine's driver shows a GPU"
fi

# this build's test_device_gpu where the driver shows a GPU and CUDA cannot use it (or there is
# no CUDA in the build): a failure that says why, not a pass or a skip
name="test_device_gpu with a GPU listed and no usable CUDA: fails and says why"
if [ $driver_gpu = 1 ]; then
    skip "$name" "this machine's driver shows a GPU"
else
    fake_smi "$tmp/smi1" 1
    why_cuda='the NVIDIA driver shows 1 GPU\(s\) \(nvidia-smi -L: GPU 0: .*\) but CUDA finds no '
    why_cuda+='device: .+'
    why_build='built without CUDA, but the NVIDIA driver shows 1 GPU\(s\)'
    out=$(PATH="$tmp/smi1:$PATH" timeout 120 "$top/test/check/test_device_gpu" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ $rc -ne 124 ] &&
       grep -Eq "^not ok .*($why_cuda|$why_build)" <<<"$out" &&
       ! grep -q '^1\.\.0' <<<"$out"; then
        ok "$name (exit $rc)"
        grep '^not ok' <<<"$out" | sed 's/^/# /'
    else
        nok "$name (exit $rc)" "$out"
    fi
fi
[ $fails -eq 0 ]
