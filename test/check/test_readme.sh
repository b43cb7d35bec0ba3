#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The commands of README.md run as written, as TAP: every line of its ```sh blocks (a line
# ending in '\' joined with the next) is run with its build tree's '_build/' taken to be this
# build tree, './app' an MPI one-sided program of the examples and, as root, mpirun given
# --allow-run-as-root as the README says; a line ending in '&' starts a server that the next
# line's client talks to. Each must exit 0 within 30 s (a README command that seems to hang is
# a defect), and what the README's comment promises is checked (the expectations below). Its
# ```c block (examples/hello.c) builds with -Wall -Wextra -Werror and runs; docs/runtime.md's
# device file builds as C with the same flags.
# The first block's two commands are the suite itself (contrib/test.sh) and the demonstration
# that contrib/test.sh runs as a stage of its own (contrib/demo.sh): they are counted, not run.
set -u
top=${RINGK_TOP_BUILDDIR:?}
src=${RINGK_TOP_SRCDIR:?}
readme=$src/README.md
ex=$top/examples/mpi
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' <<<"$2" | tail -n 25; fails=$((fails + 1)); }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
# as in a user's shell: nothing of the wrapper this suite runs under (the commands that want it
# call it)
LD_PRELOAD=$(tr ':' '\n' <<<"${LD_PRELOAD:-}" | grep -v 'libuct_ringk' | paste -sd: -)
unset UCX_PLUGIN_PATH OMPI_MCA_osc OMPI_MCA_opal_common_ucx_tls OMPI_MCA_opal_common_ucx_devices
work=$(mktemp -d "${TMPDIR:-/tmp}/ringk-readme.XXXXXX")
trap 'rm -rf "$work"' EXIT

# the commands of the sh blocks, one a line, comments and continuations folded
commands() {
    awk '/^```sh$/ {inb = 1; next} /^```/ {inb = 0; next}
         inb {
             line = $0
             if (cont != "") { sub(/^[ \t]+/, "", line); line = cont " " line; cont = "" }
             if (line ~ /\\$/) { sub(/[ \t]*\\$/, "", line); cont = line; next }
             sub(/[ \t]+#.*$/, "", line)
             if (line != "") print line
         }' "$readme"
}
# expect CMD OUT: what the README says of CMD, checked on its output OUT; prints what fails
expect() {
    case $1 in
        *"ringk-run ucx_info -d"*)
            grep -q "Transport: ringk" <<<"$2" && grep -q "Device: ring" <<<"$2" &&
                grep -q "Device: mapped" <<<"$2" || echo "no 'Transport: ringk' with ring and mapped" ;;
        *"ringk-run ucx_info -c"*)
            grep -q "^UCX_RINGK_" <<<"$2" || echo "no UCX_RINGK_ variables" ;;
        "ucx_info -d")
            grep -q ringk <<<"$2" && echo "ringk listed without the wrapper" ;;
        *ucx_perftest\ localhost*)
            grep -q "Final:" <<<"$2" || echo "no 'Final:' line" ;;
        *mpirun*)
            grep -q "0 errors" <<<"$2" || echo "no '0 errors'"
            grep -q "rma(ringk/" <<<"$2" || echo "one-sided not over ringk: no 'rma(ringk/' lane" ;;
    esac
    return 0
}

cmds=$(commands)
[ -x "$ex/mpi_osc" ] || mpi_missing=1
echo "1..$(($(wc -l <<<"$cmds") + 2))"
server=""
while IFS= read -r cmd; do
    case $cmd in
        "bash contrib/demo.sh"|"bash contrib/test.sh")
            skip "$cmd: run by contrib/test.sh (the suite, and its demonstration stage)"
            continue ;;
    esac
    run=${cmd//_build\//$top/}
    run=${run//.\/app/$ex/mpi_osc}
    if [[ $run == *mpirun* ]]; then
        if [ -n "${mpi_missing:-}" ]; then
            skip "$cmd: built without MPI"
            continue
        fi
        [ "$(id -u)" = 0 ] && run=${run/mpirun /mpirun --allow-run-as-root }
    fi
    if [[ $run =~ ^[A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*$ ]]; then
        eval "export $run" # a variable the next lines use
        ok "$cmd"
        continue
    fi
    if [[ $run == *"&" ]]; then
        # a server: started, the next line is its client
        (cd "$work" && timeout 40 bash -c "${run%&}" >"$work/server.log" 2>&1) &
        server=$!
        sleep 0.5
        ok "$cmd (started)"
        continue
    fi
    log=""
    [[ $run == *mpirun* ]] && log=info # its ranks' lanes, in UCX's log
    out=$(cd "$work" && UCX_LOG_LEVEL=${log:-${UCX_LOG_LEVEL:-warn}} timeout 30 bash -c "$run" 2>&1)
    rc=$?
    if [ -n "$server" ]; then
        wait "$server"
        src_rc=$?
        server=""
        [ $src_rc -eq 0 ] || { out+=$'\n'"(the server exited $src_rc)"; rc=1; }
    fi
    why=$(expect "$cmd" "$out")
    if [ $rc -eq 0 ] && [ -z "$why" ]; then
        ok "$cmd"
    else
        nok "$cmd (exit $rc)" "$out"$'\n'"$why"
    fi
done <<<"$cmds"

# README's C: the block is examples/hello.c, which must build warning-free and run
flags="-I$src/src -L$top/src/ringk/.libs -lringk -Wl,-rpath,$top/src/ringk/.libs"
awk '/^```c$/ {inb = 1; next} /^```/ {inb = 0} inb' "$readme" >"$work/readme.c"
# shellcheck disable=SC2086 # the flags are words
if out=$(${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -o "$work/readme" "$work/readme.c" $flags 2>&1) &&
   out=$(timeout 60 "$work/readme" 2>&1) && [ "$(grep -c '^greeter got "' <<<"$out")" = 3 ] &&
   diff -q "$work/readme.c" <(sed -n '/^#include/,$p' "$src/examples/hello.c") >/dev/null; then
    ok "README's C block is examples/hello.c, builds with -Wall -Wextra -Werror and runs"
else
    nok "README's C block builds with -Wall -Wextra -Werror, runs, and is examples/hello.c" \
        "$out$(diff "$work/readme.c" <(sed -n '/^#include/,$p' "$src/examples/hello.c"))"
fi
# docs/runtime.md's device snippet: a device file, compiled as C for the emulated device
awk '/^```c$/ {inb = 1; next} /^```/ {inb = 0} inb && /ringk_device.h/ {p = 1} p && inb' \
    "$src/docs/runtime.md" >"$work/snippet.c"
if [ ! -s "$work/snippet.c" ]; then
    nok "docs/runtime.md's device snippet" "not found"
elif out=$(${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -I"$src/src" -I"$top" -x c -c \
           -o "$work/snippet.o" "$work/snippet.c" 2>&1); then
    ok "docs/runtime.md's device snippet builds as C with -Wall -Wextra -Werror"
else
    nok "docs/runtime.md's device snippet builds as C with -Wall -Wextra -Werror" "$out"
fi
[ $fails -eq 0 ]
