"""End to end: megc gen llama -> megc -> megc-run on the CPU, with weights
from a safetensors file under Hugging Face names, against the NumPy
reference: logits (relative error) and loss."""
import argparse
import os
import sys

import numpy as np

import e2e_util
import llama_reference


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="f32")
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--interleaved", action="store_true")
    parser.add_argument("--percent", type=float, default=1.0)
    parser.add_argument("--tolerance", type=float, default=1e-5)
    options = parser.parse_args()

    cfg = dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=128,
               seq=8, batch=2, eps=1e-5, theta=10000.0,
               percent=options.percent, interleaved=options.interleaved)
    os.makedirs(options.tmp, exist_ok=True)
    model = os.path.join(options.tmp, "llama.mlir")
    artifact = os.path.join(options.tmp, "llama.megc")
    gen = ["megc", "gen", "llama", "--layers", str(cfg["layers"]),
           "--hidden", str(cfg["hidden"]), "--heads", str(cfg["heads"]),
           "--kv-heads", str(cfg["kv_heads"]), "--ffn", str(cfg["ffn"]),
           "--vocab", str(cfg["vocab"]), "--seq", str(cfg["seq"]),
           "--batch", str(cfg["batch"]), "--dtype", options.dtype,
           "--rotary-percent", str(cfg["percent"]), "-o", model]
    if cfg["interleaved"]:
        gen.append("--rotary-interleaved")
    e2e_util.run(gen)
    e2e_util.run(["megc", model, "-o", artifact])

    rng = np.random.default_rng(0)
    vocab = cfg["vocab"]
    shapes = llama_reference.parameter_shapes(cfg)
    weights = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            value = 0.08 * rng.standard_normal(shape)
        value = value.astype(np.float32)
        if options.dtype == "bf16":
            value = e2e_util.bf16_to_f32(e2e_util.bf16_bits(value))
        weights[name] = value
    params = os.path.join(options.tmp, "weights.safetensors")
    e2e_util.write_safetensors(params, weights,
                               "BF16" if options.dtype == "bf16" else "F32")
    ids = rng.integers(0, vocab, (cfg["batch"], cfg["seq"])).astype(np.int32)
    labels = rng.integers(0, vocab, (cfg["batch"], cfg["seq"])).astype(np.int32)
    np.save(os.path.join(options.tmp, "ids.npy"), ids)
    np.save(os.path.join(options.tmp, "labels.npy"), labels)

    out = os.path.join(options.tmp, "out")
    common = ["megc-run", artifact, "--params", params, "--output-dir", out,
              "--input", f"input_ids={options.tmp}/ids.npy"]
    e2e_util.run(common + ["--entry", "forward"])
    logits = e2e_util.read_output(os.path.join(out, "logits.npy"))
    e2e_util.run(common + ["--entry", "loss",
                           "--input", f"labels={options.tmp}/labels.npy"])
    loss = e2e_util.read_output(os.path.join(out, "loss.npy"))

    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    want = llama_reference.forward(w64, ids, cfg)
    error = e2e_util.relative_error(logits, want)
    want_loss = llama_reference.loss(want, labels)
    loss_error = abs(float(loss) - want_loss) / abs(want_loss)
    print(f"logits relative error {error:.3g}, loss {float(loss):.6f} vs "
          f"{want_loss:.6f} (relative error {loss_error:.3g})")
    if error > options.tolerance or loss_error > options.tolerance:
        print(f"FAIL: above the tolerance {options.tolerance}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
