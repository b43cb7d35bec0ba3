#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The layout of src/ as TAP (contrib/layout.py): file and function sizes, an include graph
# without cycles in which the runtime reaches the network layer through net/ringk_net.h only,
# and the calls between the two held to the same rule, none up from the network layer leading
# back into it.
set -u
exec python3 "${RINGK_TOP_SRCDIR:?}/contrib/layout.py" "$RINGK_TOP_SRCDIR"
