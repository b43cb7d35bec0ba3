#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Regenerates the Autotools build files (configure, Makefile.in).
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
autoreconf -fi
# the TAP test driver is not installed by autoreconf
cp -f "$(automake --print-libdir)/tap-driver.sh" build-aux/
