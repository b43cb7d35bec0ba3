#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Instructions per message of libringk's local one-way send, counted with callgrind: a
# regression check that does not depend on a quiet machine, as timings do.
#
#   bench/instructions.sh [BUILDDIR ...]   (default _build; N=1000000 messages)
#
# For each build, runs bench/src/k2k_ringk (throughput by name and by route) under callgrind
# and prints the instructions of the whole run divided by the messages sent (the source's
# sends, the sink's dispatch and handler, start-up spread over N), then each build's ratio to
# the first. Under valgrind libringk compares names byte by byte (see ringk_route.h), so by
# name costs more than it does natively; compare builds with each other, not with timings.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
n=${N:-1000000}
[ $# -gt 0 ] || set -- "$top/_build"
command -v valgrind >/dev/null || { echo "instructions: needs valgrind" >&2; exit 1; }
out=$(mktemp -d "${TMPDIR:-/tmp}/ringk-instr.XXXXXX")
trap 'rm -rf "$out"' EXIT
first=()
for b in "$@"; do
    b=$(cd "$b" && pwd)
    lib=$b/src/ringk/.libs
    src=$(sed -n 's/^abs_top_srcdir = //p' "$b/Makefile")
    gcc -O2 -o "$out/k2k" "$top/bench/src/k2k_ringk.c" -I"$src/src" -L"$lib" -lringk \
        -Wl,-rpath,"$lib" -pthread
    i=0
    for c in throughput throughput_route; do
        valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$out/k2k" $c "$n" \
            >/dev/null 2>"$out/log"
        ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/log")
        per=$(awk -v ir="$ir" -v n="$n" 'BEGIN {printf "%.1f", ir / n}')
        if [ ${#first[@]} -le $i ]; then first+=("$per"); fi
        ratio=$(awk -v a="$per" -v f="${first[$i]}" 'BEGIN {printf "%.3f", a / f}')
        echo "RESULT $c $per instructions/message ($b; ratio to the first build $ratio)"
        i=$((i + 1))
    done
done
