#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The libraries' exported symbols, as TAP: libringk.so exports exactly the functions that the
# public headers ringk/api/ringk*.h declare (the version script keeps the internal
# ringk_remote_*, ringk_wire_* and others local; inline helpers are not exported), and the UCT
# plugin (its loader and its transport) does not re-export the core's ringk_ functions it links
# in (its uct_ringk_* functions are exported as UCX's own transports' are); every exported
# function has a row in test_api_args.c, the test of bad arguments; and the loader refers to no
# UCX symbol another release may lack.
set -u
top=${RINGK_TOP_BUILDDIR:?} src=${RINGK_TOP_SRCDIR:?}
echo "1..4"
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
# the loader (libuct_ringk.so) exports nothing of its own; the transport (ringk_uct.so) no
# ringk_ core function
loader=$top/src/uct/ringk/.libs/libuct_ringk.so plugin=$top/src/uct/ringk/.libs/ringk_uct.so
extra=$( { nm -D --defined-only "$loader" | awk '$2 == "T" {print "libuct_ringk.so: " $3}'
           nm -D --defined-only "$plugin" | awk '$2 == "T" {print "ringk_uct.so: " $3}' |
               grep -E ': ringk_'; } || true)
if [ -z "$extra" ] && [ -s "$loader" ] && [ -s "$plugin" ]; then
    echo "ok 2 - the plugin's loader exports no function and its transport no ringk_ core function"
else
    echo "not ok 2 - the plugin exports functions it should not (or a file is missing):"
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
# The loader must load into any UCX release: of UCX it may refer only to the public
# uct_component_register (present in every release), so that the dynamic loader never stops a
# process on a symbol another release lacks.
ucx_refs=$(nm -D --undefined-only "$loader" | awk '{print $2}' | sed 's/@.*//' |
           grep -E '^(ucs|uct|ucp|ucm)_' | sort -u)
if [ "$ucx_refs" = "uct_component_register" ]; then
    echo "ok 4 - the plugin's loader refers to no UCX symbol but uct_component_register"
else
    echo "not ok 4 - the plugin's loader refers to UCX symbols:"
    sed 's/^/# /' <<<"$ucx_refs"
fi
