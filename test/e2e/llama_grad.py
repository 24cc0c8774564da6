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

    worst = 0.0
    step = 1e-5
    for name, value in w64.items():
        got = e2e_util.read_output(os.path.join(out, f"grad.{name}.npy"))
        picks = [tuple(rng.integers(0, n) for n in value.shape) for _ in range(4)]
        fd, mine = [], []
        for index in picks:
            saved = value[index]
            value[index] = saved + step
            plus = loss(w64)
            value[index] = saved - step
            minus = loss(w64)
            value[index] = saved
            fd.append((plus - minus) / (2 * step))
            mine.append(got[index])
        scale = max(np.abs(got).max(), 1e-12)
        error = np.max(np.abs(np.array(mine) - np.array(fd))) / scale
        worst = max(worst, error)
        if error > options.tolerance:
            print(f"FAIL {name}: sampled gradient error {error:.3g} "
                  f"(megc {mine} vs finite differences {fd})")
            return 1

    # One random direction through all parameters at once.
    direction = {k: rng.standard_normal(v.shape) for k, v in w64.items()}
    predicted = sum(np.sum(e2e_util.read_output(os.path.join(out, f"grad.{k}.npy"))
                           * d) for k, d in direction.items())
    eps = 1e-5
    plus = loss({k: w64[k] + eps * direction[k] for k in w64})
    minus = loss({k: w64[k] - eps * direction[k] for k in w64})
    along = (plus - minus) / (2 * eps)
    directional = abs(predicted - along) / abs(along)
    got_loss = float(e2e_util.read_output(os.path.join(out, "loss.npy")))
    print(f"{len(w64)} parameters: worst sampled gradient error {worst:.3g} "
          f"(relative to each gradient's max); directional derivative "
          f"{predicted:.6g} vs {along:.6g} (relative error {directional:.3g}); "
          f"loss {got_loss:.6f} vs {loss(w64):.6f}")
    if directional > options.tolerance:
        print("FAIL: directional derivative")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
