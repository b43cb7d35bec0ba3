#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bundle.sh DIR: writes a self-contained bundle for a GPU node with no network and none of
# ringk's build dependencies. Run it on a Debian 12 machine with network (contrib/setup.sh's
# packages). DIR gets:
#   ringk-VERSION.tar.gz   'make dist' tarball (configure generated: no Autotools needed there)
#   ucx-src.tar.xz         UCX's source of exactly the installed release: configure.ac and src/,
#                          the internal headers the plugin compiles against
#   ucx-config.h           the installed UCX's build configuration (ucx_info -b)
#   debs/                  the Debian packages the build and the tests need (UCX libraries,
#                          headers and tools, hwloc, Check, subunit, pkgconf and what they link
#                          beyond glibc), unpacked on the target into a private prefix
#   run.sh                 the runner: run.sh REPORTDIR builds and tests there (contrib/bundle-run.sh)
#   MANIFEST               versions, package list and sizes
# Nothing in it holds an absolute path of this machine. Prints the bundle's size and what
# takes the room.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: bundle.sh DIR" >&2; exit 2; }
out=$1
case "$out" in /*) ;; *) out=$PWD/$out ;; esac

# The packages, and those they link that a glibc >= 2.36 system may lack. Base libraries every
# such system has (libc6, libgcc-s1, libstdc++6, libgomp1, libudev1) are not carried.
PKGS=(libucx0 libucx-dev ucx-utils libnuma1 libnuma-dev libibverbs1 librdmacm1 ibverbs-providers
      libhwloc15 libhwloc-dev libltdl7 libltdl-dev check libsubunit0 libsubunit-dev
      pkgconf pkgconf-bin libpkgconf3)

mkdir -p "$out/debs"
rm -f "$out"/debs/*.deb "$out"/ringk-*.tar.gz

echo "bundle: building the dist tarball" >&2
bash "$top/contrib/build.sh" _build >&2
rm -f "$top"/_build/ringk-*.tar.gz # one tarball: an older version's would be copied too
make -s -C "$top/_build" dist-gzip >&2
cp "$top"/_build/ringk-*.tar.gz "$out/"

echo "bundle: UCX source and build configuration" >&2
ucx_src=$("$top/contrib/fetch-ucx-src.sh")
tar -C "$(dirname "$ucx_src")" -cJf "$out/ucx-src.tar.xz" \
    --exclude='*.o' --exclude='*.lo' --exclude='.deps' --exclude='.libs' --exclude='Makefile' \
    --exclude='Makefile.in' \
    "$(basename "$ucx_src")/configure.ac" "$(basename "$ucx_src")/src"
ucx_info -b > "$out/ucx-config.h"

echo "bundle: apt-get download ${PKGS[*]}" >&2
(cd "$out/debs" && apt-get download -q "${PKGS[@]}" >/dev/null)

cp "$top/contrib/bundle-run.sh" "$out/run.sh"
chmod +x "$out/run.sh"

{
    echo "ringk bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "ringk: $(basename "$out"/ringk-*.tar.gz)"
    echo "UCX: $(pkg-config --modversion ucx) (source: $(basename "$ucx_src"))"
    echo "packages:"
    for d in "$out"/debs/*.deb; do
        echo "  $(basename "$d") $(stat -c %s "$d")"
    done
} > "$out/MANIFEST"

echo "bundle: $out: $(du -sh "$out" | cut -f1) in all" >&2
du -k "$out"/* "$out"/debs/* 2>/dev/null | sort -rn | head -n 8 | \
    awk '{printf "bundle:   %6d KiB %s\n", $1, $2}' >&2
echo "$out"
