"""End to end: meg-autodiff's gradient function of the MMDiT and Flux MSE
losses, compiled and run, against central finite differences of the NumPy
references (float64) on sampled elements of every parameter and along one
random direction through all of them."""
import argparse
import os
import sys

import numpy as np

import diffusion_reference
import e2e_util
from diffusion_forward import parameter_shapes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", choices=["mmdit", "flux"], required=True)
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    options = parser.parse_args()
    cfg = dict(layers=1, hidden=16, heads=2, seq=4, text_seq=3, batch=2,
               in_channels=4, context_dim=6, eps=1e-6, theta=10000.0,
               percent=1.0, interleaved=options.preset == "flux")
    tmp = options.tmp
    os.makedirs(tmp, exist_ok=True)
    gen = ["megc", "gen", options.preset, "--layers", str(cfg["layers"]),
           "--hidden", str(cfg["hidden"]), "--heads", str(cfg["heads"]),
           "--seq", str(cfg["seq"]), "--text-seq", str(cfg["text_seq"]),
           "--batch", str(cfg["batch"]), "--in-channels",
           str(cfg["in_channels"]), "--context-dim", str(cfg["context_dim"]),
           "--norm-eps", str(cfg["eps"]), "-o", f"{tmp}/m.mlir"]
    if cfg["interleaved"]:
        gen.append("--rotary-interleaved")
    e2e_util.run(gen)
    e2e_util.run(["megc-opt", f"{tmp}/m.mlir", "--inline", "--meg-autodiff",
                  "--canonicalize", "--cse", "-o", f"{tmp}/g.mlir"])
    e2e_util.run(["megc", f"{tmp}/g.mlir", "-o", f"{tmp}/g.megc"])

    rng = np.random.default_rng(3)
    weights = {}
    for name, shape in parameter_shapes(options.preset, cfg).items():
        base = 1.0 if name.endswith("norm_q.weight") or \
            name.endswith("norm_k.weight") else 0.0
        weights[name] = (base + 0.3 * rng.standard_normal(shape)).astype(np.float32)
    e2e_util.write_safetensors(f"{tmp}/w.safetensors", weights)
    b, s, t = cfg["batch"], cfg["seq"], cfg["text_seq"]
    arrays = {"latents": rng.standard_normal((b, s, cfg["in_channels"])),
              "context": rng.standard_normal((b, t, cfg["context_dim"])),
              "conditioning": rng.standard_normal((b, cfg["hidden"])),
              "target": rng.standard_normal((b, s, cfg["in_channels"]))}
    run = ["megc-run", f"{tmp}/g.megc", "--entry", "grad", "--params",
           f"{tmp}/w.safetensors", "--output-dir", f"{tmp}/out"]
    for name, array in arrays.items():
        array = array.astype(np.float32)
        arrays[name] = array.astype(np.float64)
        np.save(f"{tmp}/{name}.npy", array)
        run += ["--input", f"{name}={tmp}/{name}.npy"]
    e2e_util.run(run)

    forward = (diffusion_reference.mmdit_forward if options.preset == "mmdit"
               else diffusion_reference.flux_forward)

    def loss(w):
        prediction = forward(w, arrays["latents"], arrays["context"],
                             arrays["conditioning"], cfg)
        return diffusion_reference.mse(prediction, arrays["target"])

    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    grads = {k: e2e_util.read_output(f"{tmp}/out/grad.{k}.npy") for k in w64}
    ok, worst, _, message = e2e_util.check_gradients(
        loss, w64, grads, rng, samples=3, tolerance=options.tolerance)
    print(f"{options.preset}: {len(w64)} parameters, worst sampled gradient "
          f"error {worst:.3g}; {message}")
    if not ok:
        print("FAIL: gradients differ from finite differences")
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
