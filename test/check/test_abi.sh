#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The libraries' exported symbols, as TAP: libringk.so exports exactly the functions that the
# public headers ringk/api/ringk*.h declare (the version script keeps the internal
# ringk_remote_*, ringk_wire_* and others local; inline helpers are not exported), and the UCT
# plugin does not re-export the core's ringk_ functions it links in (its uct_ringk_* functions
# are exported as UCX's own transports' are); and every exported function has a row in
# test_api_args.c, the test of bad arguments.
set -u
top=${RINGK_TOP_BUILDDIR:?} src=${RINGK_TOP_SRCDIR:?}
echo "1..3"
lib=$top/src/ringk/.libs/libringk.so
api=$(cat "$src"/src/ringk/api/ringk*.h | grep -v '^static' |
      sed -n 's/^[a-z].*\b\(ringk_[a-z0-9_]*\)(.*/\1/p' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
if [ "$api" = "$exported" ]; then
    echo "ok 1 - libringk.so exports the $(wc -l <<<"$api") functions of ringk*.h and nothing else"
else
    echo "not ok 1 - libringk.so exports differ from ringk*.h (< header only, > exported only)"
    diff <(echo "$api") <(echo "$exported") | grep '^[<>]' | sed 's/^/# /'
fi
plugin=$top/src/uct/ringk/.libs/libuct_ringk.so
extra=$(nm -D --defined-only "$plugin" | awk '$2 == "T" {print $3}' | grep -E '^ringk_' || true)
if [ -z "$extra" ]; then
    echo "ok 2 - libuct_ringk.so exports no ringk_ core functions"
else
    echo "not ok 2 - libuct_ringk.so exports core functions:"
    sed 's/^/# /' <<<"$extra"
fi
rows=$(sed -n 's/^ *{"\(ringk_[a-z0-9_]*\)",.*/\1/p' "$src"/test/check/test_api_args.c | sort -u)
missing=$(comm -23 <(echo "$exported") <(echo "$rows"))
if [ -n "$rows" ] && [ -z "$missing" ]; then
    echo "ok 3 - test_api_args.c has a bad-argument row for each of the $(wc -l <<<"$exported") exported functions"
else
    echo "not ok 3 - exported functions without a row in test_api_args.c:"
    sed 's/^/# /' <<<"$missing"
fi
