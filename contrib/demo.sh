#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job on a fresh Debian 12 machine: installs what is needed, builds ringk, and shows the
# transport and the runtime at work.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash contrib/setup.sh
bash contrib/build.sh _build
run=_build/contrib/ringk-run

echo
echo "=== 1. UCX sees the ringk transport through the loader wrapper: $run ucx_info -d"
$run ucx_info -d | awk '/Component: ringk/{p=1} p&&/^#$/{n++} p{print} n==3{exit}'
echo
echo "=== 2. ...and a program run without the wrapper does not"
if ucx_info -d | grep -q ringk; then
    echo "unexpected: ringk visible without the wrapper" >&2
    exit 1
fi
echo "ucx_info -d without the wrapper: no ringk (as expected)"
echo
echo "=== 3. configuration variables: $run ucx_info -c | grep RINGK"
$run ucx_info -c | grep '^UCX_RINGK_'
echo
echo "=== 4. build and host topology: ringk_info"
_build/src/tools/ringk_info
echo
echo "demo: done"
