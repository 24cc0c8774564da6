"""A model trained and saved by megc loads in transformers and gives megc's
logits: for each family (Llama, Llama with tied embeddings saved in shards,
Qwen2, Qwen3), transformers makes a random model and save_pretrained's it;
`megc import` + megc compile it; megc-run trains 3 steps from that
directory and saves with `--save-params DIR/`; transformers'
from_pretrained(DIR) must report no missing or unexpected keys and give
the logits megc-run computes from DIR (f32, relative error printed).

  python3 bench/hf_roundtrip.py

Needs PyTorch and transformers (bench/torch_venv.py makes the virtual
environment; without it the script says so and exits 0). The transformers
part runs in that environment's interpreter, megc's tools from the build.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import torch_venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("MEGC_BUILD_DIR",
                                  os.path.join(ROOT, "build")), "bin")

CASES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-tied": ("LlamaConfig", "LlamaForCausalLM",
                   {"tie_word_embeddings": True}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              {"head_dim": 32, "tie_word_embeddings": True}),
}

# Runs in the torch environment: `make DIR CASE` saves a random model,
# `load DIR IDS OUT` writes from_pretrained's logits and loading info.
TRANSFORMERS = r'''
import json, sys
import numpy as np, torch, transformers
torch.manual_seed(0)
mode, path = sys.argv[1], sys.argv[2]
if mode == "make":
    config_class, model_class, extra = json.loads(sys.argv[3])
    config = getattr(transformers, config_class)(
        vocab_size=256, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        **extra)
    model = getattr(transformers, model_class)(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p) if "norm" in name
                    else 0.1 * torch.randn_like(p))
    model.save_pretrained(path, max_shard_size="100KB" if extra else "50GB")
else:
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        path, output_loading_info=True, attn_implementation="eager")
    ids = torch.from_numpy(np.load(sys.argv[3]).astype(np.int64))
    with torch.no_grad():
        np.save(sys.argv[4], model(ids).logits.float().numpy())
    print(json.dumps({k: sorted(v) for k, v in info.items()
                      if k in ("missing_keys", "unexpected_keys")}))
'''


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed:\n{result.stdout}"
                 f"{result.stderr}")
    return result.stdout


def main():
    python = torch_venv.torch_python()
    if python is None:
        print("hf_roundtrip: skipped: no PyTorch/transformers environment")
        return 0
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        ids = rng.integers(0, 256, (2, 16)).astype(np.int32)
        np.save(f"{tmp}/ids.npy", ids)
        np.save(f"{tmp}/labels.npy", np.roll(ids, -1, axis=1))
        print(f"{'case':<12} {'files':>5} {'missing':>8} {'unexpected':>10} "
              f"{'logits rel. error':>18}")
        for case, spec in CASES.items():
            work = f"{tmp}/{case}"
            run([python, "-c", TRANSFORMERS, "make", f"{work}/hf",
                 json.dumps(spec)])
            run([f"{BIN}/megc", "import", f"{work}/hf", "--seq", "16",
                 "--batch", "2", "--train", "--lr", "0.01", "-o",
                 f"{work}/model.mlir"])
            run([f"{BIN}/megc", f"{work}/model.mlir", "-o",
                 f"{work}/model.megc"])
            run([f"{BIN}/megc-run", f"{work}/model.megc", "--entry",
                 "train_step", "--params", f"{work}/hf", "--steps", "3",
                 "--input", f"input_ids={tmp}/ids.npy",
                 "--input", f"labels={tmp}/labels.npy",
                 "--save-params", f"{work}/trained/",
                 "--max-shard-size", "100KB"])
            run([f"{BIN}/megc-run", f"{work}/model.megc", "--entry",
                 "forward", "--params", f"{work}/trained", "--input",
                 f"input_ids={tmp}/ids.npy", "--output-dir", f"{work}/out"])
            info = json.loads(run([python, "-c", TRANSFORMERS, "load",
                                   f"{work}/trained", f"{tmp}/ids.npy",
                                   f"{work}/torch_logits.npy"]))
            ours = np.load(f"{work}/out/logits.npy").astype(np.float64)
            theirs = np.load(f"{work}/torch_logits.npy").astype(np.float64)
            error = float(np.linalg.norm(ours - theirs) /
                          np.linalg.norm(theirs))
            files = len(os.listdir(f"{work}/trained"))
            print(f"{case:<12} {files:>5} {len(info['missing_keys']):>8} "
                  f"{len(info['unexpected_keys']):>10} {error:>18.3g}")
            if info["missing_keys"] or info["unexpected_keys"] or error > 1e-5:
                print(f"  FAIL: {info}")
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
