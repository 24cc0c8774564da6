#!/usr/bin/env bash
# Builds megc and runs the whole test suite: lit (FileCheck), ctest
# (GoogleTest), pytest (the Python package against the build, and one
# `pip install ./python-bindings` into a fresh virtual environment), and
# the runtime under AddressSanitizer + UndefinedBehaviorSanitizer with its
# libFuzzer targets (scripts/sanitize.sh); prints every summary and fails
# if any fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}

"$root/scripts/build.sh" || exit 1

status=0
echo "== lit =="
/usr/lib/llvm-22/bin/lit -sv "$build/test" || status=1
echo "== ctest =="
ctest --test-dir "$build" --output-on-failure || status=1
echo "== pytest =="
# The pip install builds in a sibling of the build directory, where the
# relative ccache keys (see build.sh) match the main build's.
(cd "$build" &&
  CCACHE_BASEDIR=$root PYTHONPATH="$build/python" MEGC_BUILD_DIR="$build" \
  MEGC_PIP_INSTALL_TEST=1 MEGC_WHEEL_BUILD_DIR="$build-wheel" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider \
  "$root/python-bindings/tests") || status=1
echo "== sanitizers and fuzzers =="
MEGC_BUILD_DIR=$build "$root/scripts/sanitize.sh" || status=1
exit $status
