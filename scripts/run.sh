#!/usr/bin/env bash
# The main job: import a small Llama from a Hugging Face model directory
# (its config.json) with an AdamW configuration, compile it for the CPU (and
# sm_90 PTX/cubin when the CUDA toolkit is installed), summarise the
# artifact, run `forward`, then train on one batch it can memorise for a few
# dozen steps, printing the falling loss, and save the trained weights in
# Hugging Face layout (config.json, model.safetensors).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}
bin=$build/bin

"$root/scripts/build.sh" >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

mkdir -p "$out/hf-llama"
cat > "$out/hf-llama/config.json" <<'JSON'
{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "vocab_size": 512, "hidden_size": 128, "intermediate_size": 352,
  "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
  "hidden_act": "silu", "max_position_embeddings": 2048,
  "rms_norm_eps": 1e-05, "rope_parameters": {"rope_theta": 10000.0},
  "tie_word_embeddings": false, "dtype": "float32"
}
JSON
"$bin/megc" import "$out/hf-llama" --seq 64 --batch 2 --train --lr 3e-3 \
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
  --steps 40 --save-params "$out/trained/"
ls "$out/trained"
