#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libringk across processes, as TAP: a job of two processes bootstrapped by RINGK_ROOT /
# RINGK_RANK / RINGK_SIZE runs the ping-pong with ping in rank 0 and pong in rank 1; every value
# is checked on both sides and UCX's log must show the active messages going over ringk. Bad
# job variables give clear errors.
set -u
top=${RINGK_TOP_BUILDDIR:?}
pp=$top/examples/pingpong
port=$((24000 + ($$ % 20000)))
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' <<<"$2" | tail -n 30; fails=$((fails + 1)); }
echo "1..4"

log0=$(mktemp) log1=$(mktemp)
env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=1 UCX_TLS=ringk,self UCX_LOG_LEVEL=info \
    timeout 120 "$pp" 20000 >"$log1" 2>&1 &
pid1=$!
env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=2 RINGK_RANK=0 UCX_TLS=ringk,self UCX_LOG_LEVEL=info \
    timeout 120 "$pp" 20000 >"$log0" 2>&1
rc0=$?
wait $pid1
rc1=$?
out="$(cat "$log0" "$log1")"
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] &&
   grep -q "pingpong \[rank 0 of 2\]: 20000 round trips between two ring kernels, 0 errors" "$log0" &&
   grep -q "pingpong \[rank 1 of 2\]: 20000 round trips between two ring kernels, 0 errors" "$log1" &&
   grep -q "am(ringk/memory)" "$log0" && grep -q "am(ringk/memory)" "$log1"; then
    ok "two processes: ping in rank 0, pong in rank 1, over ringk"
    grep -h "^pingpong" "$log0" "$log1" | sed 's/^/# /'
else
    nok "two processes: ping in rank 0, pong in rank 1, over ringk (exit $rc0 $rc1)" "$out"
fi
rm -f "$log0" "$log1"

refuse() { # refuse NAME PATTERN ENV...
    local name=$1 pat=$2 out
    shift 2
    if out=$(env "$@" timeout 30 "$pp" 10 2>&1); then
        nok "$name (succeeded)" "$out"
    elif grep -q -- "$pat" <<<"$out"; then
        ok "$name"
    else
        nok "$name (no '$pat')" "$out"
    fi
}
refuse "bad RINGK_SIZE" "RINGK_SIZE 'abc' is not a number 1..4096" RINGK_SIZE=abc
refuse "RINGK_RANK out of range" "RINGK_RANK '5' is not a number 0..1" RINGK_SIZE=2 RINGK_RANK=5 RINGK_ROOT=127.0.0.1:1
refuse "RINGK_ROOT without a port" "RINGK_ROOT 'localhost' is not HOST:PORT" RINGK_SIZE=2 RINGK_RANK=1 RINGK_ROOT=localhost
[ $fails -eq 0 ]
