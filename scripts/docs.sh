#!/usr/bin/env bash
# Regenerates the dialect and pass reference in docs/reference/ from the
# .td files (run after changing ops, attributes or passes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" --target megc-doc
mkdir -p "$root/docs/reference"
cp "$build/docs/Meg/MegDialect.md" "$build/docs/Meg/MegPasses.md" \
  "$build/docs/Meg/MegConversionPasses.md" "$root/docs/reference/"
echo "updated docs/reference/: MegDialect.md MegPasses.md MegConversionPasses.md"
