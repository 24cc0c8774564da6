#!/usr/bin/env bash
# The main job: generate a small Llama preset with an AdamW configuration,
# compile it for the CPU (and sm_90 PTX/cubin when the CUDA toolkit is
# installed), summarise the artifact, run `forward`, then train on one batch
# it can memorise for a few dozen steps, printing the falling loss.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}
bin=$build/bin

"$root/scripts/build.sh" >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$bin/megc" gen llama --layers 2 --hidden 128 --heads 8 --kv-heads 2 \
  --ffn 352 --vocab 512 --seq 64 --batch 2 --train --lr 3e-3 \
  -o "$out/llama.mlir"
targets=cpu
[ -x "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas" ] && targets=cpu,cuda
"$bin/megc" "$out/llama.mlir" --target=$targets -o "$out/llama.megc"
"$bin/megc" inspect "$out/llama.megc" | grep -v '^  megk' | cut -c1-200

# A batch of token ids and next-token labels.
/usr/bin/python3 - "$out" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(0)
ids = rng.integers(0, 512, (2, 64)).astype(np.int32)
np.save(f"{sys.argv[1]}/input_ids.npy", ids)
np.save(f"{sys.argv[1]}/labels.npy", np.roll(ids, -1, axis=1))
PY
"$bin/megc-run" "$out/llama.megc" --entry forward --params init:0 \
  --input input_ids="$out/input_ids.npy" --output-dir "$out/forward"
"$bin/megc-run" "$out/llama.megc" --entry train_step --params init:0 \
  --input input_ids="$out/input_ids.npy" --input labels="$out/labels.npy" \
  --steps 40 --save-params "$out/trained.safetensors"
