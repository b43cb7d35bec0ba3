#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# coverage.sh: builds ringk host-only with gcov instrumentation in _build-cov, runs the whole
# 'make check' there, and prints lcov's line coverage of src/ (HTML report in _build-cov/cov).
# Installs lcov when missing.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
dpkg-query -W -f='${Status}' lcov 2>/dev/null | grep -q "install ok installed" ||
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends lcov \
        >/dev/null
bash "$top/contrib/build.sh" _build-cov --without-cuda --enable-debug \
    CFLAGS="--coverage -O0 -g" LDFLAGS="--coverage" >/dev/null
cd "$top/_build-cov"
find . -name '*.gcda' -delete
make -j"$(nproc)" check >/dev/null 2>&1 || echo "coverage: some tests failed (see test-suite.log)"
lcov -q --capture --directory . --output-file cov.info \
    >/dev/null 2>&1
lcov -q --extract cov.info "$top/src/*" --output-file cov-src.info >/dev/null 2>&1
lcov --list cov-src.info 2>/dev/null | tail -n 40
lcov --summary cov-src.info 2>&1 | grep -E "lines|functions"
genhtml -q cov-src.info --output-directory cov >/dev/null 2>&1 || true
