#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh REPORTDIR (in a bundle written by contrib/bundle.sh): builds ringk on this machine from
# the bundle alone -- no network, nothing installed system-wide -- and runs its tests, then writes
# REPORTDIR/report.txt and REPORTDIR/report.json. Needs an x86-64 Linux with glibc >= 2.36, a C
# compiler and make; with a CUDA toolkit (nvcc on PATH, CUDA_HOME, or /usr/local/cuda) and an
# NVIDIA driver the GPU parts are built and tested too. Exits 1 when a step failed -- also when
# the driver shows a GPU (nvidia-smi -L, /proc/driver/nvidia/gpus) and the GPU tests did not run
# on it: the build has no CUDA, CUDA cannot use the GPU, or no GPU test case was executed.
#
# Made for a lent GPU machine whose commands are killed after a fixed time: the whole run keeps
# within a deadline (each step gets what is left of it), the report is rewritten after every
# step (a run killed from outside still leaves one), and the build stays in the work directory
# (outside REPORTDIR, so it does not travel back with the report) for a second call that runs
# the stages the first had no time for.
#   RINGK_BUNDLE_STAGES    what to run, in this order (default: build gpu bench sanitizer check)
#                          build: unpack, configure, make, and the test programs (skipped when
#                          the work directory has a build and 'build' is not named); gpu: the
#                          GPU tests (test_kernels, test_device_gpu, test_device_gpu's
#                          scenarios again without CUDA_DEVICE_MAX_CONNECTIONS,
#                          test_examples.sh with the nvcc-built examples, and
#                          test_job_gpu.sh), one at a time, and
#                          the count of GPU test cases executed; bench: bench/device_bench,
#                          bench/device_prims, bench/p2pq_bench, bench/gpu_rma, bench/peer_copy,
#                          bench/small_copy and bench/device_job.sh -g (also under
#                          MPS where it starts); sanitizer: compute-sanitizer on
#                          the GPU ping-pong;
#                          check: the other tests of 'make check' (last: they need no GPU)
#   RINGK_BUNDLE_DEADLINE  seconds this run may take in all (default 570)
#   RINGK_BUNDLE_SANITIZERS  compute-sanitizer tools (default: memcheck initcheck synccheck)
#   RINGK_BUNDLE_TESTS     the tests of the check stage (default: all but the GPU tests)
#   RINGK_BUNDLE_WORK      where to unpack and build (default: ${TMPDIR:-/tmp}/ringk-bundle-work)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: run.sh REPORTDIR" >&2; exit 2; }
mkdir -p "$1" || exit 2
report=$(cd "$1" && pwd)
work=${RINGK_BUNDLE_WORK:-${TMPDIR:-/tmp}/ringk-bundle-work}
stages=" ${RINGK_BUNDLE_STAGES:-build gpu bench sanitizer check} "
deadline=${RINGK_BUNDLE_DEADLINE:-570}
prefix=$work/prefix
log=$report/run.log
: >"$log"
steps=()     # "name<TAB>status<TAB>seconds<TAB>detail<TAB>stage"
tests=()     # "STATUS<TAB>name"
failed=0
cur_stage=build # the stage the steps recorded now belong to
# Resident kernels share the GPU's hardware queues with every other stream (docs/gpu.md): set
# before any CUDA context exists, which libringk itself cannot ensure.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}

say() { echo "run.sh: $*" | tee -a "$log"; }
stage() { [[ $stages == *" $1 "* ]]; }

# step NAME LIMIT_S CMD...: runs CMD with a time limit (LIMIT_S, or what is left before the
# deadline), output to the log; records the result and rewrites the report.
step() {
    local name=$1 limit=$2 t0=$SECONDS rc st left=$((deadline - SECONDS - 10))
    shift 2
    if [ "$left" -lt 20 ]; then
        skipped "$name" "no time left: RINGK_BUNDLE_DEADLINE=$deadline"
        return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    say "== $name"
    timeout -k 5 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    case $rc in
        0) st=pass ;;
        77) st=skip ;;
        124|137) st=fail; rc="timeout after $limit s" ;;
        *) st=fail ;;
    esac
    [ "$st" = fail ] && failed=$((failed + 1))
    steps+=("$name"$'\t'"$st"$'\t'"$((SECONDS - t0))"$'\t'"exit $rc"$'\t'"$cur_stage")
    say "   $st ($((SECONDS - t0)) s)"
    write_report
    [ "$st" != fail ]
}

# skipped NAME REASON: records a step that was not run.
skipped() {
    record "$1" skip "$2"
}

# record NAME STATUS DETAIL: records a step that is a verdict on what ran before it (no command).
record() {
    [ "$2" = fail ] && failed=$((failed + 1))
    steps+=("$1"$'\t'"$2"$'\t'0$'\t'"$3"$'\t'"$cur_stage")
    say "== $1: $2 ($3)"
    write_report
}

# The GPUs the NVIDIA driver shows, asked without CUDA: the lines of 'nvidia-smi -L' that name
# one, or else the entries of /proc/driver/nvidia/gpus (one per GPU the driver holds).
gpus_listed() {
    local l d
    l=$(timeout 20 nvidia-smi -L 2>/dev/null | grep '^GPU ')
    if [ -z "$l" ]; then
        for d in /proc/driver/nvidia/gpus/*; do
            [ -e "$d" ] && l+="${l:+$'\n'}$d"
        done
    fi
    printf '%s' "$l"
}

# The gpu stage's last step, a verdict on the GPU test cases of its logs: where the driver shows
# a GPU, at least one executed, all passed and no GPU test skipped -- a run that finds no usable
# GPU must not pass by running nothing; where it shows none, a skip unless some ran.
gpu_verdict() {
    local executed passed skips name="GPU test cases executed"
    read -r executed passed <<<"$(gpu_cases)"
    skips=$(cat "$build"/test/check/test_kernels.log \
                "$build"/test/check/test_device_gpu*.log \
                "$build"/test/check/test_job_gpu.sh.log 2>/dev/null | grep '^SKIP: ' |
            tr '\n' ' ')
    if [ "$passed" -lt "$executed" ]; then
        record "$name" fail "$executed executed, $passed passed"
    elif [ -z "$listed" ]; then
        if [ "$executed" -gt 0 ]; then
            record "$name" pass "$executed executed, $passed passed"
        else
            record "$name" skip \
                "none: the driver shows no GPU (nvidia-smi -L, /proc/driver/nvidia/gpus)"
        fi
    elif [ "$executed" -eq 0 ]; then
        record "$name" fail \
            "none executed, but the driver shows $(head -n1 <<<"$listed")${skips:+; $skips}"
    elif [ -n "$skips" ]; then
        record "$name" fail "$executed executed, $passed passed, but skipped with a GPU: $skips"
    else
        record "$name" pass "$executed executed, $passed passed on $(head -n1 <<<"$listed")"
    fi
}

# The GPU test cases the test logs name, as "EXECUTED PASSED": every case of test_kernels and
# of test_job_gpu.sh (they run only on a GPU) and test_device_gpu's cases of TCase "gpu" (both
# of its runs; those of
# test_device_block.c among them); a binary
# skipped as a whole or one that crashed is no case.
gpu_cases() {
    local logs=()
    [ -n "${build:-}" ] && logs=("$build"/test/check/test_kernels.log \
                                 "$build"/test/check/test_device_gpu*.log \
                                 "$build"/test/check/test_job_gpu.sh.log)
    cat "${logs[@]}" /dev/null 2>/dev/null |
        awk '/^(PASS|FAIL|XFAIL|XPASS): test\/check\/test_kernels [0-9]+ / ||
             /^(PASS|FAIL|XFAIL|XPASS): test\/check\/test_job_gpu\.sh [0-9]+ / ||
             /^(PASS|FAIL|XFAIL|XPASS): .*:gpu:test_device_(gpu|block)_/ { n++; if ($1 == "PASS:") p++ }
             END { printf "%d %d\n", n, p }'
}

# Unpacks a .deb into the prefix: dpkg-deb where there is one, else ar and tar.
unpack_deb() {
    local deb=$1 tmp
    if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$deb" "$prefix"
        return
    fi
    tmp=$(mktemp -d) || return 1
    (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$prefix") || { rm -rf "$tmp"; return 1; }
    rm -rf "$tmp"
}

unpack() {
    local d pc
    rm -rf "$work"
    mkdir -p "$prefix" || return 1
    for d in "$here"/debs/*.deb; do
        unpack_deb "$d" || { echo "cannot unpack $d"; return 1; }
    done
    # The packages' pkg-config files name /usr: point them at the prefix ('prefix=/usr',
    # 'prefix = /usr', 'libdir=/usr/lib/...').
    for pc in "$prefix"/usr/lib/*/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
        [ -f "$pc" ] || continue
        sed -E -i "s#^([A-Za-z_]+ *= *)/usr(/| |\$)#\1$prefix/usr\2#" "$pc"
    done
    tar -C "$work" -xzf "$here"/ringk-*.tar.gz &&
    tar -C "$work" -xJf "$here/ucx-src.tar.xz"
}

# The built programs must run on the bundle's UCX and hwloc, not on any the system has.
uses_prefix() {
    local libs bad
    libs=$(ldd "$1" | grep -E 'lib(ucp|uct|ucs|ucm|hwloc)\.so')
    echo "$libs"
    [ -n "$libs" ] || { echo "$1 links no UCX"; return 1; }
    bad=$(grep -v "=> $prefix/" <<<"$libs" || true)
    [ -z "$bad" ] || { echo "not from the bundle: $bad"; return 1; }
}

# The CUDA toolkit, if any: the first of nvcc on PATH, CUDA_HOME, /usr/local/cuda whose nvcc
# runs and which has cuda_runtime.h.
find_cuda() {
    local nvcc d
    nvcc=$(command -v nvcc 2>/dev/null)
    for d in ${nvcc:+"$(dirname "$(dirname "$(readlink -f "$nvcc")")")"} ${CUDA_HOME:+"$CUDA_HOME"} \
             /usr/local/cuda; do
        if [ -f "$d/include/cuda_runtime.h" ] && "$d/bin/nvcc" --version >/dev/null 2>&1; then
            echo "$d"
            return
        fi
    done
}

# The report, plain text and JSON, from what has run so far: every test case the test drivers'
# logs name (PASS/FAIL/SKIP per case), the steps, the benchmarks' figures.
write_report() {
    local s n st t d g i gcases stage_st bench title stage_sts=()
    tests=()
    gcases=$(gpu_cases)
    # a stage's status: fail if a step of it failed, else pass if one passed, else skip
    for g in build gpu bench sanitizer check; do
        stage_st=""
        for s in "${steps[@]}"; do
            [ "${s##*$'\t'}" = "$g" ] || continue
            IFS=$'\t' read -r _ st _ <<<"$s"
            case $st in
                fail) stage_st=fail ;;
                pass) [ "$stage_st" = fail ] || stage_st=pass ;;
                *) [ -n "$stage_st" ] || stage_st=skip ;;
            esac
        done
        [ -n "$stage_st" ] && stage_sts+=("$g"$'\t'"$stage_st")
    done
    if [ -n "${build:-}" ] && [ -d "$build/test/check" ]; then
        while IFS= read -r line; do
            tests+=("$line")
        done < <(cat "$build"/test/check/*.log 2>/dev/null |
                 sed -n 's/^\(PASS\|FAIL\|SKIP\|ERROR\|XFAIL\|XPASS\): *\(.*\)$/\1\t\2/p')
    fi
    # a JSON string, in the shell (a program per string would take seconds per report)
    json_str() {
        local v=$1
        v=${v//\\/\\\\}; v=${v//\"/\\\"}; v=${v//$'\t'/\\t}; v=${v//$'\n'/\\n}; v=${v//$'\r'/\\r}
        # nvidia-smi underlines with terminal escapes; any other control character goes
        v=${v//$'\e'/\\u001b}; v=${v//[[:cntrl:]]/}
        printf '"%s"' "$v"
    }
    {
        echo "ringk bundle run on $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        cat "$report/machine.txt" 2>/dev/null
        echo
        echo "steps:"
        for s in "${steps[@]}"; do
            IFS=$'\t' read -r n st t d g <<<"$s"
            printf '  %-5s %5ss  %-9s %s (%s)\n' "$st" "$t" "$g" "$n" "$d"
        done
        echo
        echo "GPU test cases (test_kernels, test_job_gpu.sh, test_device_gpu's TCase gpu): ${gcases% *} executed," \
             "${gcases#* } passed"
        echo "tests: $(printf '%s\n' "${tests[@]}" | grep -c '^PASS') passed," \
             "$(printf '%s\n' "${tests[@]}" | grep -c '^\(FAIL\|ERROR\|XPASS\)') failed," \
             "$(printf '%s\n' "${tests[@]}" | grep -c '^SKIP') skipped"
        printf '%s\n' "${tests[@]}" | grep -v '^PASS' | sed 's/^/  /'
        # each benchmark's lines but its RESULT ones, under its title
        while IFS='|' read -r bench title; do
            if [ -s "$report/$bench.txt" ]; then
                echo
                echo "$title:"
                grep -v '^RESULT' "$report/$bench.txt" | sed 's/^/  /'
            fi
        done <<'BENCHES'
device_bench|device-kernel benchmark (bench/device_bench)
device_prims|the device loop's primitives (bench/device_prims; ns each)
device_bench_peer|cross-GPU K2K (bench/device_bench -p 1)
p2pq_bench|P2P queue (bench/p2pq_bench)
gpu_rma|GPU benchmark (bench/gpu_rma; x d2d, x staged: time ratios, above 1 is slower)
peer_copy|peer-copy benchmark (bench/peer_copy; x d2d, x staged_raw: time ratios)
small_copy|small copies (bench/small_copy; x copy: SM stores' time over the copy engine's)
device_job|device kernels of two processes on the GPU (bench/device_job.sh -g)
device_job_mps|the same under MPS (bench/device_job.sh -g)
device_job_peer|device kernels of two processes on two GPUs (bench/device_job.sh -g -p 1)
BENCHES
    } > "$report/report.txt"
    {
        echo "{"
        echo "  \"machine\": $(json_str "$(cat "$report/machine.txt" 2>/dev/null)"),"
        echo "  \"steps\": ["
        i=0
        for s in "${steps[@]}"; do
            IFS=$'\t' read -r n st t d g <<<"$s"
            i=$((i + 1))
            printf '    {"name": %s, "stage": "%s", "status": "%s", "seconds": %s, "detail": %s}%s\n' \
                "$(json_str "$n")" "$g" "$st" "$t" "$(json_str "$d")" \
                "$([ $i -lt ${#steps[@]} ] && echo ,)"
        done
        echo "  ],"
        printf '  "stages": {'
        i=0
        for s in "${stage_sts[@]}"; do
            i=$((i + 1))
            printf '"%s": "%s"%s' "${s%%$'\t'*}" "${s#*$'\t'}" \
                "$([ $i -lt ${#stage_sts[@]} ] && echo ', ')"
        done
        echo "},"
        echo "  \"gpu_cases\": {\"executed\": ${gcases% *}, \"passed\": ${gcases#* }},"
        echo "  \"tests\": ["
        i=0
        for t in "${tests[@]}"; do
            i=$((i + 1))
            printf '    {"status": "%s", "name": %s}%s\n' "${t%%$'\t'*}" \
                "$(json_str "${t#*$'\t'}")" \
                "$([ $i -lt ${#tests[@]} ] && echo ,)"
        done
        echo "  ],"
        echo "  \"benchmarks\": ["
        {
            [ -s "$report/gpu_rma.txt" ] && grep '^RESULT ' "$report/gpu_rma.txt" |
                awk '{printf "    {\"bench\": \"gpu_rma\", \"method\": \"%s\", \"bytes\": %s, " \
                             "\"usec\": %s, \"GBps\": %s, \"x_d2d\": %s, \"x_staged\": %s}\n", \
                             $2, $3, $4, $5, $6, $7}'
            [ -s "$report/peer_copy.txt" ] && grep '^RESULT peer_copy ' "$report/peer_copy.txt" |
                awk '{printf "    {\"bench\": \"peer_copy\", \"method\": \"%s\", \"bytes\": %s, " \
                             "\"usec\": %s, \"GBps\": %s, \"x_d2d\": %s, \"x_staged\": %s, " \
                             "\"path\": \"%s\"}\n", $3, $4, $5, $6, $7, $8, $9}'
            [ -s "$report/small_copy.txt" ] &&
                grep '^RESULT small_copy ' "$report/small_copy.txt" |
                awk '{printf "    {\"bench\": \"small_copy\", \"method\": \"%s\", " \
                             "\"bytes\": %s, \"usec\": %s, \"x_copy\": %s}\n", $3, $4, $5, $6}'
            [ -s "$report/device_bench.txt" ] &&
                grep '^RESULT device_bench ' "$report/device_bench.txt" |
                awk '{printf "    {\"bench\": \"device_bench\", \"method\": \"%s\", " \
                             "\"value\": %s, \"unit\": \"%s\"}\n", $3, $4, $5}'
            [ -s "$report/device_prims.txt" ] &&
                grep '^RESULT device_prims ' "$report/device_prims.txt" |
                awk '{printf "    {\"bench\": \"device_prims\", \"method\": \"%s\", " \
                             "\"value\": %s, \"unit\": \"%s\"}\n", $3, $4, $5}'
            [ -s "$report/device_bench_peer.txt" ] &&
                grep '^RESULT device_bench ' "$report/device_bench_peer.txt" |
                awk '{printf "    {\"bench\": \"device_bench -p 1\", \"method\": \"%s\", " \
                             "\"value\": %s, \"unit\": \"%s\"}\n", $3, $4, $5}'
            [ -s "$report/p2pq_bench.txt" ] &&
                grep '^RESULT p2pq_bench ' "$report/p2pq_bench.txt" |
                awk '{printf "    {\"bench\": \"p2pq_bench\", \"method\": \"%s\", " \
                             "\"value\": %s, \"unit\": \"%s\"}\n", $3, $4, $5}'
        } | sed '$!s/$/,/'
        echo "  ]"
        echo "}"
    } > "$report/report.json"
}

trap write_report EXIT
say "bundle $here, report in $report, stages:$stages, deadline $deadline s"
src=""
build=$work/build
if stage build || [ ! -f "$build/Makefile" ]; then
    export here work prefix
    export -f unpack unpack_deb uses_prefix
    step "unpack the bundle into $work" 300 bash -c unpack
else
    say "== using the build in $build (RINGK_BUNDLE_STAGES has no 'build')"
fi
first() { [ -e "$1" ] && echo "${1%/}"; }
libdir=$(first "$prefix"/usr/lib/*-linux-gnu)
libdir=${libdir:-$prefix/usr/lib}
export PATH="$prefix/usr/bin:$PATH"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_PATH="$libdir/pkgconfig:$prefix/usr/share/pkgconfig"
export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$libdir${LIBRARY_PATH:+:$LIBRARY_PATH}"

# What this machine is.
cuda=$(find_cuda)
{
    echo "host: $(uname -srm), $(nproc) cores, $(ldd --version 2>&1 | head -n1)"
    echo "compiler: $(${CC:-cc} --version 2>&1 | head -n1)"
    if [ -n "$cuda" ]; then
        echo "CUDA: $cuda ($("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
    else
        echo "CUDA: none (no nvcc on PATH, in CUDA_HOME or /usr/local/cuda): host-only build"
    fi
    if command -v nvidia-smi >/dev/null; then
        timeout 20 nvidia-smi \
            --query-gpu=index,name,driver_version,compute_cap,pci.bus_id,mig.mode.current \
            --format=csv,noheader 2>&1 | sed 's/^/GPU: /'
        timeout 20 nvidia-smi -L 2>&1 | sed 's/^/nvidia-smi -L: /'
        timeout 20 nvidia-smi topo -m 2>&1 | sed 's/^/topo: /'
    else
        echo "GPU: none (no nvidia-smi)"
    fi
    echo "UCX: $(pkg-config --modversion ucx 2>&1) from $libdir"
} > "$report/machine.txt"
sed 's/^/  /' "$report/machine.txt" | tee -a "$log"

src=$(first "$work"/ringk-*/)
ucx_src=$(first "$work"/ucx-*/)
# nvcc for this machine's GPU only (the default builds three targets: three times the time)
if [ -z "${NVCC_ARCH:-}" ] && command -v nvidia-smi >/dev/null; then
    cc=$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
         head -n1 | tr -d '. ')
    case $cc in
        [0-9][0-9]|[0-9][0-9][0-9]) export NVCC_ARCH="-gencode arch=compute_$cc,code=sm_$cc" ;;
    esac
fi
cfg=(--with-ucx-src="$ucx_src" --with-ucx-config="$here/ucx-config.h" --without-mpi)
if [ -n "$cuda" ]; then cfg+=(--with-cuda="$cuda"); else cfg+=(--without-cuda); fi
built=0
if [ -f "$build/Makefile" ] && ! stage build; then
    built=1
elif [ -n "$src" ]; then
    mkdir -p "$build"
    # shellcheck disable=SC2016 # the inner shell expands them
    step "configure ${cfg[*]}" 300 sh -c 'cd "$1" && shift && "$@"' _ "$build" \
        "$src/configure" "${cfg[@]}" &&
    step "make -j$(nproc)" 600 make -C "$build" -j"$(nproc)" && built=1
    # the test programs in parallel, so that the test stages only run them (the benchmarks
    # need none of them)
    [ $built = 1 ] && step "make -j$(nproc) the test programs" 600 \
        make -C "$build" -j"$(nproc)" check TESTS=
fi
# the tests that use the GPU: run alone, one at a time (two at once would share the GPU's time
# and stretch their bounded waits)
gpu_tests="test/check/test_kernels test/check/test_device_gpu test/check/test_job_gpu.sh"
examples_test=test/check/test_examples.sh

if [ $built = 1 ] && stage build; then
    info_bin=$build/src/tools/.libs/ringk_info
    [ -x "$info_bin" ] || info_bin=$build/src/tools/ringk_info
    # shellcheck disable=SC2016 # expanded by the inner shell
    step "ringk_info runs on the bundle's UCX and hwloc" 60 bash -c 'uses_prefix "$1"' _ "$info_bin"
    step "ringk_info" 60 "$build/src/tools/ringk_info"
    timeout -k 5 60 "$build/src/tools/ringk_info" > "$report/ringk_info.txt" 2>&1
    timeout -k 5 60 "$build/src/tools/ringk_info" --json > "$report/ringk_info.json" 2>&1
fi
if stage gpu; then
    cur_stage=gpu
    listed=$(gpus_listed)
fi
if [ $built = 1 ] && stage gpu; then
    # where the driver shows a GPU, the GPU tests must run on it: a build without CUDA fails
    # here, and CUDA that cannot use the GPU fails test_device_gpu (and the count below)
    if [ -n "$listed" ] &&
       ! grep -q '^#define HAVE_CUDA 1' "$build/ringk_config.h" 2>/dev/null; then
        record "a CUDA build for the GPU the driver shows" fail \
            "$(head -n1 <<<"$listed"); the build has no CUDA (toolkit: ${cuda:-none found})"
    fi
    # one step each, so that a test_kernels that runs out of time leaves test_device_gpu its own
    step "make check TESTS=test/check/test_kernels" 300 \
        make -C "$build" -j1 check TESTS=test/check/test_kernels TEST_SUITE_LOG=test-suite-gpu.log
    cp "$build/test-suite-gpu.log" "$report/" 2>/dev/null
    step "make check TESTS=test/check/test_device_gpu" 240 \
        make -C "$build" -j1 check TESTS=test/check/test_device_gpu \
        TEST_SUITE_LOG=test-suite-gpu-device.log
    cp "$build/test-suite-gpu-device.log" "$report/" 2>/dev/null
    # test_device_gpu's scenarios once more without the CUDA_DEVICE_MAX_CONNECTIONS exported
    # above, so that libringk's own setting of it (before the process's first CUDA context) is
    # what the GPU runs with; through the test driver, its log beside the first run's
    top_srcdir=$(sed -n 's/^top_srcdir = //p' "$build/Makefile")
    # shellcheck disable=SC2016 # expanded by the inner shell
    step "test_device_gpu scenarios without CUDA_DEVICE_MAX_CONNECTIONS" 120 bash -c \
        'env -u CUDA_DEVICE_MAX_CONNECTIONS RINGK_DEVICE_GPU_ONLY=scenarios AM_TAP_AWK=awk \
             bash "$1/build-aux/tap-driver.sh" --test-name "$2" --log-file "$3.log" \
             --trs-file "$3.trs" --color-tests no --enable-hard-errors yes \
             --expect-failure no -- "$4/contrib/ringk-run" "$4/test/check/test_device_gpu"
         grep -q "^:global-test-result: \(FAIL\|ERROR\)" "$3.trs" && exit 1
         grep -q "^:global-test-result: SKIP" "$3.trs" && exit 77
         exit 0' _ "$top_srcdir" \
        "test/check/test_device_gpu-own-connections" \
        "$build/test/check/test_device_gpu-own-connections" "$build"
    # with the nvcc-built GPU ping-pong and heat stencil (5 GPU kernels, halos device to device)
    step "make check TESTS=$examples_test" 180 \
        make -C "$build" -j1 check TESTS="$examples_test" TEST_SUITE_LOG=test-suite-examples.log
    cp "$build/test-suite-examples.log" "$report/" 2>/dev/null
    # device kernels of two processes on the GPU, one writing the other's inbox directly
    step "make check TESTS=test/check/test_job_gpu.sh" 150 \
        make -C "$build" -j1 check TESTS=test/check/test_job_gpu.sh \
        TEST_SUITE_LOG=test-suite-gpu-job.log
    cp "$build/test-suite-gpu-job.log" "$report/" 2>/dev/null
    gpu_verdict
fi
if [ $built = 0 ] && stage gpu; then
    if [ -n "$listed" ]; then
        record "GPU tests" fail "no build, and the driver shows $(head -n1 <<<"$listed")"
    else
        skipped "GPU tests" "no build"
    fi
fi
if [ $built = 1 ] && stage bench; then
    cur_stage=bench
    # device kernels: the ring kernels on the GPU against the raw references
    if [ -x "$build/bench/device_bench" ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "device-kernel benchmark (bench/device_bench)" 240 bash -c '"$1" "$2" > "$3"' _ \
            "$build/contrib/ringk-run" "$build/bench/device_bench" "$report/device_bench.txt"
    else
        skipped "device-kernel benchmark (bench/device_bench)" "built without CUDA"
    fi
    # what the device loop's primitives cost on this GPU, beside device_bench's references
    if [ -x "$build/bench/device_prims" ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "device primitives (bench/device_prims)" 60 bash -c '"$1" > "$2"' _ \
            "$build/bench/device_prims" "$report/device_prims.txt"
    else
        skipped "device primitives (bench/device_prims)" "built without CUDA"
    fi
    # the same K2K methods between kernels on GPU 0 and GPU 1 (peer access where the pair has it)
    if [ -x "$build/bench/device_bench" ] && [ "$(gpus_listed | grep -c .)" -ge 2 ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "cross-GPU K2K benchmark (bench/device_bench -p 1)" 240 bash -c \
            '"$1" "$2" -r 3 -p 1 > "$3"' _ "$build/contrib/ringk-run" \
            "$build/bench/device_bench" "$report/device_bench_peer.txt"
    else
        skipped "cross-GPU K2K benchmark (bench/device_bench -p 1)" "fewer than two GPUs"
    fi
    # the P2P queue with host and GPU ends against a bare ring
    if [ -x "$build/bench/p2pq_bench" ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "P2P queue benchmark (bench/p2pq_bench)" 180 bash -c '"$1" "$2" -r 3 > "$3"' _ \
            "$build/contrib/ringk-run" "$build/bench/p2pq_bench" "$report/p2pq_bench.txt"
    else
        skipped "P2P queue benchmark (bench/p2pq_bench)" "not built"
    fi
    # GPU memory through ringk between two processes against cudaMemcpy
    if [ -x "$build/bench/gpu_rma" ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "GPU benchmark (bench/gpu_rma)" 240 bash -c '"$1" "$2" > "$3"' _ \
            "$build/contrib/ringk-run" "$build/bench/gpu_rma" "$report/gpu_rma.txt"
    else
        skipped "GPU benchmark (bench/gpu_rma)" "built without CUDA"
    fi
    # GPU memory of one process through ringk_peer_copy against the CUDA copies
    if [ -x "$build/bench/peer_copy" ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "peer-copy benchmark (bench/peer_copy)" 120 bash -c '"$1" > "$2"' _ \
            "$build/bench/peer_copy" "$report/peer_copy.txt"
    else
        skipped "peer-copy benchmark (bench/peer_copy)" "built without CUDA"
    fi
    # small copies into GPU memory: the copy engine against SM stores
    if [ -x "$build/bench/small_copy" ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "small-copy benchmark (bench/small_copy)" 120 bash -c '"$1" > "$2"' _ \
            "$build/bench/small_copy" "$report/small_copy.txt"
    else
        skipped "small-copy benchmark (bench/small_copy)" "built without CUDA"
    fi
    # device kernels of two processes on the GPU, one writing the other's inbox, against one
    # process and against the hosts' path; without MPS the GPU gives each process time slices
    if [ -x "$build/bench/device_job_gpu" ] && [ -n "$src" ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "two-process K2K benchmark (bench/device_job.sh -g)" 150 bash -c \
            'ROUNDS=3 N=1000 M=20000 bash "$1/bench/device_job.sh" -g "$2" > "$3" 2>&1' _ \
            "$src" "$build" "$report/device_job.txt"
    else
        skipped "two-process K2K benchmark (bench/device_job.sh -g)" "built without CUDA"
    fi
    # the same with both processes' kernels resident together: an MPS control daemon of this
    # run's own (its pipe and log directories private to it), quit afterwards; a skip where it
    # does not start
    if [ -x "$build/bench/device_job_gpu" ] && [ -n "$src" ] &&
       command -v nvidia-cuda-mps-control >/dev/null; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "two-process K2K benchmark under MPS (bench/device_job.sh -g)" 150 bash -c \
            'd=$(mktemp -d) && mkdir -p "$d/pipe" "$d/log" || exit 1
             export CUDA_MPS_PIPE_DIRECTORY=$d/pipe CUDA_MPS_LOG_DIRECTORY=$d/log
             # the daemon goes whatever ends this shell (the step is killed after its limit;
             # -d detaches the daemon from it), and the step waits for it to be gone
             down() {
                 echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
                 for _ in $(seq 50); do [ -e "$d/pipe/control" ] || break; sleep 0.2; done
                 tail -n 20 "$d"/log/*.log 2>/dev/null
                 rm -rf "$d"
             }
             trap down EXIT
             trap "exit 1" TERM INT
             nvidia-cuda-mps-control -d || { echo "MPS did not start"; exit 77; }
             # a CUDA program that cannot run under it: a skip, not a benchmark failure
             timeout 30 "$2/contrib/ringk-run" "$2/bench/device_job_gpu" -n 200 -m 1000 \
                 >/dev/null 2>&1 ||
                 { echo "CUDA programs do not run under MPS here"; exit 77; }
             ROUNDS=3 N=1000 M=20000 timeout 120 bash "$1/bench/device_job.sh" -g "$2" \
                 > "$3" 2>&1' _ "$src" "$build" "$report/device_job_mps.txt"
    else
        skipped "two-process K2K benchmark under MPS (bench/device_job.sh -g)" \
            "no CUDA build or no nvidia-cuda-mps-control"
    fi
    # "a" on GPU 0, "b" and "sink" on GPU 1: one GPU's kernel into the other's inboxes, in one
    # process and between two (the two processes' kernels run side by side, no MPS needed)
    if [ -x "$build/bench/device_job_gpu" ] && [ -n "$src" ] &&
       [ "$(gpus_listed | grep -c .)" -ge 2 ]; then
        # shellcheck disable=SC2016 # expanded by the inner shell
        step "two-process K2K benchmark across two GPUs (bench/device_job.sh -g -p 1)" 150 \
            bash -c 'ROUNDS=3 N=1000 M=20000 bash "$1/bench/device_job.sh" -g -p 1 "$2" \
                         > "$3" 2>&1' _ "$src" "$build" "$report/device_job_peer.txt"
    else
        skipped "two-process K2K benchmark across two GPUs (bench/device_job.sh -g -p 1)" \
            "fewer than two GPUs, or built without CUDA"
    fi
fi
if [ $built = 1 ] && stage sanitizer; then
    cur_stage=sanitizer
    # compute-sanitizer on the device executor's CPU <-> GPU ping-pong (CK_FORK=no: one
    # process). The sanitizer serializes kernel launches, so only a test with one resident
    # kernel can run under it. Its tools by default: memcheck (out-of-bounds and misaligned
    # accesses, leaks), initcheck (reads of device memory never written) and synccheck (the one
    # block barrier: a launch's threads copy the kernel into device memory together, then
    # __syncthreads). Not racecheck: it checks shared memory, which the device code does not
    # use (no __shared__).
    sanitizer=""
    [ -n "$cuda" ] && [ -x "$cuda/bin/compute-sanitizer" ] && sanitizer=$cuda/bin/compute-sanitizer
    if [ -n "$sanitizer" ] && [ -x "$build/test/check/test_device_gpu" ] &&
       nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        for tool in ${RINGK_BUNDLE_SANITIZERS:-memcheck initcheck synccheck}; do
            # shellcheck disable=SC2016 # expanded by the inner shell
            step "compute-sanitizer --tool $tool test_device_gpu (pingpong)" 120 bash -c \
                'cd "$1" && CK_FORK=no CK_TIMEOUT_MULTIPLIER=2 RINGK_DEVICE_GPU_ONLY=pingpong \
                     ./libtool --mode=execute \
                     "$2" --tool "$3" --error-exitcode 9 test/check/test_device_gpu \
                     > "$4" 2>&1; rc=$?; tail -n 20 "$4"; exit $rc' \
                _ "$build" "$sanitizer" "$tool" "$report/sanitizer-$tool.txt"
        done
    else
        skipped "compute-sanitizer on test_device_gpu" "no compute-sanitizer, GPU or CUDA build"
    fi
fi

if [ $built = 1 ] && stage check; then
    cur_stage=check
    if [ -z "${RINGK_BUNDLE_TESTS:-}" ]; then
        # every test of 'make check' but the GPU tests
        # shellcheck disable=SC2016 # make expands $(TESTS)
        RINGK_BUNDLE_TESTS=$(printf 'print-tests:\n\t@echo $(TESTS)\n' |
                             make -s -C "$build" -f Makefile -f - print-tests |
                             tr ' ' '\n' |
                             grep -v -x -F -f <(tr ' ' '\n' <<<"$gpu_tests $examples_test") |
                             tr '\n' ' ')
    fi
    step "make check (host tests)" 900 \
        make -C "$build" -j"$(nproc)" check TESTS="$RINGK_BUNDLE_TESTS"
    cp "$build/test-suite.log" "$report/" 2>/dev/null
fi
trap - EXIT
write_report
# A lent GPU machine returns at most 8 files: the logs go back as one archive, with each
# failed test program's own log and the benchmarks' outputs (report.txt and report.json carry
# their figures)
pack_logs() {
    local loose fails
    loose=$(cd "$report" && ls test-suite*.log sanitizer-*.txt ringk_info.json \
                               device_bench*.txt device_prims.txt gpu_rma.txt peer_copy.txt \
                               p2pq_bench.txt small_copy.txt device_job*.txt \
                               2>/dev/null)
    fails=$(printf '%s\n' "${tests[@]}" | awk -F'\t' '$1 ~ /^(FAIL|ERROR|XPASS)$/ {
                split($2, w, " "); print w[1] ".log" }' | sort -u |
            while read -r f; do [ -f "$build/$f" ] && echo "$f"; done)
    [ -n "$loose$fails" ] || return 0
    # shellcheck disable=SC2086 # lists of words
    if [ -n "$fails" ]; then
        tar czf "$report/logs.tar.gz" -C "$report" $loose -C "$build" $fails
    else
        tar czf "$report/logs.tar.gz" -C "$report" $loose
    fi && (cd "$report" && rm -f $loose)
}
pack_logs
cat "$report/report.txt"
nfail=$(printf '%s\n' "${tests[@]}" | grep -c '^\(FAIL\|ERROR\|XPASS\)')
[ $failed -eq 0 ] && [ "$nfail" -eq 0 ]
