#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# configure's choice of UCX, as TAP: --with-ucx=PREFIX takes the pkg-config file of that prefix
# (a multiarch lib/*/pkgconfig too), and the errors a user meets name the bad value: a prefix
# with no UCX, --without-ucx, and a prefix whose UCX is another release than the source tree
# given with --with-ucx-src. Each run stops at the UCX checks, so none builds anything.
set -u
top=${RINGK_TOP_BUILDDIR:?}
src=${RINGK_TOP_SRCDIR:?}
ucx_src=$(sed -n 's/^UCX_SRC_DIR = //p' "$top/Makefile")
ver=$(sed -n 's/^UCX_VERSION = //p' "$top/Makefile")
work=$(mktemp -d "${TMPDIR:-/tmp}/ringk-configure.XXXXXX")
trap 'rm -rf "$work"' EXIT
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' <<<"$2" | tail -n 15; fails=$((fails + 1)); }

# conf NAME ARGS...: runs configure in a directory of its own; its output in $out, status in $rc
conf() {
    local d=$work/$1
    shift
    mkdir -p "$d"
    out=$(cd "$d" && env -u PKG_CONFIG_PATH "$src/configure" --without-cuda --without-mpi \
          "$@" 2>&1)
    rc=$?
}

# expect NAME PATTERN...: configure failed, and its output has every PATTERN (fixed strings)
expect() {
    local name=$1 p
    shift
    if [ "$rc" -eq 0 ]; then
        nok "$name" "configure succeeded where it must fail: $out"
        return
    fi
    for p in "$@"; do
        if ! grep -qF -- "$p" <<<"$out"; then
            nok "$name" "no '$p' in configure's output: $out"
            return
        fi
    done
    ok "$name"
}

echo "1..3"
conf none --with-ucx="$work/nowhere" --with-ucx-src="$ucx_src"
expect "--with-ucx=DIR without a UCX names DIR and where it looked" \
    "--with-ucx=$work/nowhere: no UCX there" "lib/pkgconfig"

conf without --without-ucx --with-ucx-src="$ucx_src"
expect "--without-ucx is refused" "cannot be built --without-ucx"

# A prefix that holds a UCX of another release (its pkg-config file, in a multiarch directory):
# configure must take it, and then refuse the source tree of this UCX, naming both releases.
mkdir -p "$work/other/lib/x86_64-linux-gnu/pkgconfig"
cat >"$work/other/lib/x86_64-linux-gnu/pkgconfig/ucx.pc" <<EOF
prefix=$work/other
libdir=\${prefix}/lib/x86_64-linux-gnu
includedir=\${prefix}/include
Name: ucx
Description: a UCX of another release
Version: 1.99.0
Cflags: -I\${includedir}
Libs: -L\${libdir} -lucp
EOF
conf other --with-ucx="$work/other" --with-ucx-src="$ucx_src"
expect "--with-ucx takes that prefix's UCX; a source tree of another release is refused" \
    "is version $ver but the installed UCX is 1.99.0"

[ "$fails" -eq 0 ]
