#!/usr/bin/env bash
# Configures (once) and builds megc into ${MEGC_BUILD_DIR:-build}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}

"$root/scripts/setup.sh"

# Cache keys relative to the repository: the Python package's pip install
# (scripts/test.sh) builds the same objects in a sibling directory, and
# ccache serves them from this build.
export CCACHE_BASEDIR=$root

if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DPython3_EXECUTABLE=/usr/bin/python3
fi
cmake --build "$build" "$@"
