#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bundle-check.sh BUNDLE WORKDIR [TESTS]: runs a bundle (contrib/bundle.sh) the way an offline
# GPU node would, on this machine: copied into WORKDIR, in a network namespace with no network
# (unshare -n), and in a mount namespace where the tree that made it (this checkout's build
# trees and .cache) is gone, and so are the system's headers and pkg-config files of UCX, hwloc
# and Check, pkg-config, ucx_info and the CUDA toolkit: the bundle's private prefix is all the
# build can find. TESTS (a 'make check' TESTS list) shortens the run. Needs root (namespaces).
# Exits with run.sh's status.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bundle-check.sh BUNDLE WORKDIR [TESTS]" >&2; exit 2; }
bundle=$(cd "$1" && pwd)
rm -rf "$2"
mkdir -p "$2"
work=$(cd "$2" && pwd)
cp -r "$bundle" "$work/bundle"
export RINGK_BUNDLE_TESTS=${3:-}
export RINGK_BUNDLE_WORK=$work/work
export RINGK_BUNDLE_DEADLINE=${RINGK_BUNDLE_DEADLINE:-3600} # 2 cores: slower than a GPU node

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC2016 # expanded by the inner shell
exec unshare -m -n bash -c '
    set -e
    mount --make-rprivate /
    ma=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    hide_dir() { [ -d "$1" ] && mount -t tmpfs none "$1"; true; }
    hide_file() { [ -e "$1" ] && mount --bind /dev/null "$1"; true; }
    for d in /usr/include/ucp /usr/include/uct /usr/include/ucs /usr/include/ucm \
             /usr/include/hwloc /usr/lib/$ma/pkgconfig /usr/share/pkgconfig /usr/lib/$ma/ucx \
             /usr/local/cuda /usr/local/cuda-* "$2"/_build* "$2"/.cache; do
        hide_dir "$d"
    done
    for f in /usr/include/{hwloc.h,check.h,check_stdint.h} /usr/bin/ucx_info \
             /usr/bin/ucx_perftest /usr/bin/pkg-config /usr/bin/pkgconf /usr/bin/nvcc \
             /usr/local/bin/nvcc; do
        hide_file "$f"
    done
    ip link set lo up 2>/dev/null || true
    cd "$1"
    bash bundle/run.sh "$1/report"
' _ "$work" "$top"
