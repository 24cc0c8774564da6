#!/usr/bin/env bash
# The main job: import a small byte-level Llama from a Hugging Face model
# directory (its config.json) with AdamW, a warmup + cosine learning-rate
# schedule and gradient clipping, compile it for the CPU (and sm_90
# PTX/cubin when the CUDA toolkit is installed), summarise the artifact, run
# `forward`, then train it on a real token file, the bytes of the project's
# own documentation (the last tenth held out for evaluation), printing the
# train and eval loss as they fall, and save the trained weights in Hugging
# Face layout (config.json, model.safetensors).
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
  "vocab_size": 256, "hidden_size": 128, "intermediate_size": 352,
  "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
  "hidden_act": "silu", "max_position_embeddings": 2048,
  "rms_norm_eps": 1e-05, "rope_parameters": {"rope_theta": 10000.0},
  "tie_word_embeddings": false, "dtype": "float32"
}
JSON
"$bin/megc" import "$out/hf-llama" --seq 64 --batch 8 --train --lr 3e-3 \
  --lr-schedule cosine --warmup-steps 10 --decay-steps 120 --min-lr 3e-4 \
  --clip-grad 1.0 -o "$out/llama.mlir"
targets=cpu
[ -x "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas" ] && targets=cpu,cuda
"$bin/megc" "$out/llama.mlir" --target=$targets -o "$out/llama.megc"
"$bin/megc" inspect "$out/llama.megc" | grep -v '^  megk' | cut -c1-200

# Byte-level tokens (uint16, as megc-run --data reads them) of the docs.
/usr/bin/python3 - "$root" "$out" <<'PY'
import pathlib, sys
import numpy as np
root, out = pathlib.Path(sys.argv[1]), sys.argv[2]
pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
data = np.frombuffer(b"".join(p.read_bytes() for p in pages), np.uint8)
split = len(data) * 9 // 10
data[:split].astype("<u2").tofile(f"{out}/train.bin")
data[split:].astype("<u2").tofile(f"{out}/eval.bin")
np.save(f"{out}/input_ids.npy", data[:8 * 64].reshape(8, 64).astype(np.int32))
PY
"$bin/megc-run" "$out/llama.megc" --entry forward --params init:0 \
  --input input_ids="$out/input_ids.npy" --output-dir "$out/forward"
"$bin/megc-run" "$out/llama.megc" --entry train_step --params init:0 \
  --data "$out/train.bin" --data-seed 0 --steps 120 --log-every 10 \
  --eval-data "$out/eval.bin" --eval-every 40 --eval-batches 4 \
  --metrics "$out/metrics.jsonl" --save-params "$out/trained/"
ls "$out/trained"
