#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The actor examples, as TAP: each must print its verified result with 0 errors.
set -u
top=${RINGK_TOP_BUILDDIR:?}
echo "1..1"
out=$(timeout 120 "$top/examples/pingpong" 100000 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "100000 round trips between two ring kernels, 0 errors" <<<"$out"; then
    echo "ok 1 - pingpong (one process)"
    echo "# $out"
else
    echo "not ok 1 - pingpong (one process), exit $rc"
    sed 's/^/# /' <<<"$out"
    exit 1
fi
