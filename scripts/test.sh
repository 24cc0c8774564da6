#!/usr/bin/env bash
# Builds megc and runs the whole test suite: lit (FileCheck) and ctest
# (GoogleTest); prints both summaries and fails if either fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}

"$root/scripts/build.sh" || exit 1

status=0
echo "== lit =="
/usr/lib/llvm-22/bin/lit -sv "$build/test" || status=1
echo "== ctest =="
ctest --test-dir "$build" --output-on-failure || status=1
exit $status
