#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what ringk needs to build, test and run on Debian 12 and enables deb-src so the
# build can fetch the UCX source of the installed version. Idempotent; needs root (or sudo).
set -euo pipefail

SUDO=
if [ "$(id -u)" != 0 ]; then
    SUDO=sudo
fi

PKGS=(build-essential autoconf automake libtool pkg-config dpkg-dev
      libucx-dev ucx-utils libhwloc-dev hwloc-nox check libsubunit-dev
      libopenmpi-dev openmpi-bin python3 valgrind gnuplot-nox man-db)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# deb-src lines for the same suites as the binary sources, so 'apt-get source ucx' works.
src_list=/etc/apt/sources.list.d/ringk-deb-src.sources
need_update=0
if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
            $SUDO tee "$src_list" >/dev/null
    else
        printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
            $SUDO tee "$src_list" >/dev/null
    fi
    echo "setup: enabled deb-src in $src_list"
    need_update=1
fi

if [ ${#missing[@]} -gt 0 ] || [ $need_update = 1 ]; then
    echo "setup: apt-get update"
    $SUDO apt-get update -q >/dev/null
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null
fi
echo "setup: dependencies present"
