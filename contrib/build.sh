#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# build.sh BUILDDIR [CONFIGURE ARGS...]: fetches the UCX source of the installed UCX version if
# needed, generates configure, and builds ringk out of tree in BUILDDIR (relative to the top).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=$1
shift
ucx_src=$("$top/contrib/fetch-ucx-src.sh")
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    echo "build: ./autogen.sh"
    ./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; exit 1; }
fi
mkdir -p "$builddir"
cd "$builddir"
args=(--with-ucx-src="$ucx_src" "$@")
if [ ! -f Makefile ] || [ "$(cat .ringk-configure-args 2>/dev/null)" != "${args[*]}" ]; then
    echo "build: configure ${args[*]} (in $builddir)"
    "$top/configure" "${args[@]}" >configure.out 2>&1 || { cat configure.out; exit 1; }
    sed -n '/configuration summary/,$p' configure.out
    echo "${args[*]}" > .ringk-configure-args
fi
echo "build: make (in $builddir)"
make -j"$(nproc)" >make.out 2>&1 || { tail -n 60 make.out; exit 1; }
