#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fetches the source of exactly the installed UCX version from Debian's package registry into
# .cache/ (ignored by git): a UCT plugin needs UCX's internal headers. Needs deb-src enabled
# (contrib/setup.sh does it). Prints the source directory.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${RINGK_CACHE_DIR:-$top/.cache}
ver=$(pkg-config --modversion ucx)
dir="$cache/ucx-$ver"
if [ -f "$dir/src/uct/base/uct_iface.h" ]; then
    echo "$dir"
    exit 0
fi
deb_ver=$(dpkg-query -W -f='${source:Version}' libucx0 2>/dev/null || true)
if [ -z "$deb_ver" ]; then
    echo "fetch-ucx-src: libucx0 is not installed from a Debian package; give configure --with-ucx-src=DIR" >&2
    exit 1
fi
mkdir -p "$cache"
cd "$cache"
echo "fetch-ucx-src: apt-get source ucx=$deb_ver into $cache" >&2
if ! apt-get source -q "ucx=$deb_ver" >"$cache/apt-source.log" 2>&1; then
    cat "$cache/apt-source.log" >&2
    echo "fetch-ucx-src: 'apt-get source ucx=$deb_ver' failed; is deb-src enabled (contrib/setup.sh)?" >&2
    exit 1
fi
# apt-get source unpacks into ucx-<upstream version of the package>, which may differ from what
# pkg-config says: a repacked source (1.18.1+ds) or a release candidate (1.23.0~rc1 for 1.23.0)
up=${deb_ver#*:}
up=${up%-*}
if [ "$up" != "$ver" ] && [ -d "$cache/ucx-$up" ] && [ ! -e "$dir" ]; then
    mv "$cache/ucx-$up" "$dir"
fi
if [ ! -f "$dir/src/uct/base/uct_iface.h" ]; then
    echo "fetch-ucx-src: expected $dir (or $cache/ucx-$up) after apt-get source" >&2
    exit 1
fi
echo "$dir"
