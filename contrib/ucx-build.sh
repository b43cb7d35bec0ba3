#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ucx-build.sh DIR: builds the UCX source of the installed version (contrib/fetch-ucx-src.sh)
# out of tree in DIR (relative to the top), configured with the options Debian built it with
# (ucx_info -v), less the hardware modules this machine has no headers for: the libraries
# (libucm, libucs, libuct, libucp) and ucx_info. The result is a UCX build tree, libraries in
# DIR/src/*/.libs, that the plugin built against the installed UCX loads into (the same release
# and the same struct layouts: the layout switches of both configurations are compared).
# Incremental: a second run rebuilds nothing. Prints DIR's absolute path last.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1
case "$dir" in /*) ;; *) dir=$top/$dir ;; esac
src=$("$top/contrib/fetch-ucx-src.sh")

if [ ! -x "$src/configure" ]; then
    echo "ucx-build: ./autogen.sh in $src" >&2
    (cd "$src" && ./autogen.sh >autogen.out 2>&1) || { tail -n 30 "$src/autogen.out" >&2; exit 1; }
fi

# Debian's options, the feature switches only (paths, verbs and Java are this machine's).
opts=()
for o in $(ucx_info -v | sed -n 's/^# Configured with: //p'); do
    case "$o" in
        --enable-mt|--disable-backtrace-detail|--disable-logging|--enable-cma|--disable-numa|\
        --enable-debug|--enable-assertions|--disable-assertions|--enable-stats|\
        --disable-params-check|--enable-params-check|--enable-debug-data)
            opts+=("$o") ;;
    esac
done
opts+=(--disable-static --without-verbs --without-rdmacm --without-java --without-go
       --without-cuda --without-rocm --without-knem --without-xpmem --without-ugni
       --disable-doxygen-doc)

mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ] || [ "$(cat .ringk-configure-args 2>/dev/null)" != "${opts[*]}" ]; then
    echo "ucx-build: configure ${opts[*]} (in $dir)" >&2
    "$src/configure" "${opts[@]}" >configure.out 2>&1 || { tail -n 40 configure.out >&2; exit 1; }
    echo "${opts[*]}" > .ringk-configure-args
fi

# The switches that change UCX's struct layouts and inline code must be the installed build's:
# the plugin was compiled with those (ucx_info -b).
layout='^#define (ENABLE_|UCS_MAX_LOG_LEVEL|UCS_ENABLE_ASSERT|HAVE_HW_TIMER|UCS_DEBUG_DATA)'
switches() { grep -E "$layout" | sed 's/[[:space:]]\+/ /g; s/ $//' | sort; }
if ! diff <(ucx_info -b | switches) <(switches <config.h) >layout.diff; then
    echo "ucx-build: this build's layout switches differ from the installed UCX's:" >&2
    cat layout.diff >&2
    exit 1
fi

echo "ucx-build: make (in $dir)" >&2
for sub in src/ucm src/ucs src/uct src/ucp src/tools/info; do
    make -C "$sub" -j"$(nproc)" >>make.out 2>&1 || { tail -n 40 make.out >&2; exit 1; }
done
echo "$dir"
