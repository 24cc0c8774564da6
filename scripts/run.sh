#!/usr/bin/env bash
# The main job: generate a small Llama preset, run it through megc-opt's
# pipeline (canonicalize, CSE) and print a summary of the model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}

"$root/scripts/build.sh" >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$build/bin/megc" gen llama --layers 2 --hidden 128 --heads 8 --kv-heads 2 \
  --ffn 352 --vocab 512 --seq 64 --batch 2 -o "$out/llama.mlir"
echo "generated $out/llama.mlir ($(wc -l < "$out/llama.mlir") lines)"
"$build/bin/megc-opt" "$out/llama.mlir" --canonicalize --cse \
  --meg-summarize -o "$out/llama.opt.mlir"
