"""End to end: the gradient function built by meg-autodiff for the llama
loss, compiled by megc and run by megc-run, against central finite
differences of the NumPy reference loss (float64) on sampled elements of
every parameter, and along one random direction over all parameters."""
import argparse
import os
import sys

import numpy as np

import e2e_util
import llama_reference


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--interleaved", action="store_true")
    parser.add_argument("--percent", type=float, default=1.0)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    options = parser.parse_args()
    cfg = dict(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64,
               seq=6, batch=2, eps=1e-5, theta=10000.0,
               percent=options.percent, interleaved=options.interleaved)
    os.makedirs(options.tmp, exist_ok=True)
    model = os.path.join(options.tmp, "llama.mlir")
    grad_model = os.path.join(options.tmp, "llama_grad.mlir")
    artifact = os.path.join(options.tmp, "llama.megc")
    gen = ["megc", "gen", "llama"]
    for flag in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                 "seq", "batch"):
        gen += ["--" + flag.replace("_", "-"), str(cfg[flag])]
    gen += ["--rotary-percent", str(cfg["percent"]), "-o", model]
    if cfg["interleaved"]:
        gen.append("--rotary-interleaved")
    e2e_util.run(gen)
    e2e_util.run(["megc-opt", model, "--inline", "--meg-autodiff",
                  "--canonicalize", "--cse", "-o", grad_model])
    e2e_util.run(["megc", grad_model, "-o", artifact])

    rng = np.random.default_rng(1)
    weights = {}
    for name, shape in llama_reference.parameter_shapes(cfg).items():
        scale = 0.1 if name.endswith("norm.weight") else 0.2
        base = 1.0 if name.endswith("norm.weight") else 0.0
        weights[name] = (base + scale * rng.standard_normal(shape)).astype(np.float32)
    params = os.path.join(options.tmp, "weights.safetensors")
    e2e_util.write_safetensors(params, weights)
    ids = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"])).astype(np.int32)
    labels = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"])).astype(np.int32)
    np.save(os.path.join(options.tmp, "ids.npy"), ids)
    np.save(os.path.join(options.tmp, "labels.npy"), labels)
    out = os.path.join(options.tmp, "out")
    e2e_util.run(["megc-run", artifact, "--entry", "grad", "--params", params,
                  "--input", f"input_ids={options.tmp}/ids.npy",
                  "--input", f"labels={options.tmp}/labels.npy",
                  "--output-dir", out])

    w64 = {k: v.astype(np.float64) for k, v in weights.items()}

    def loss(w):
        return llama_reference.loss(llama_reference.forward(w, ids, cfg), labels)

    grads = {k: e2e_util.read_output(os.path.join(out, f"grad.{k}.npy"))
             for k in w64}
    ok, worst, _, message = e2e_util.check_gradients(
        loss, w64, grads, rng, samples=4, tolerance=options.tolerance)
    got_loss = float(e2e_util.read_output(os.path.join(out, "loss.npy")))
    print(f"{len(w64)} parameters: worst sampled gradient error {worst:.3g} "
          f"(relative to each gradient's max); {message}; "
          f"loss {got_loss:.6f} vs {loss(w64):.6f}")
    if not ok:
        print("FAIL: gradients differ from finite differences")
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
