"""End to end: megc gen mmdit|flux -> megc -> megc-run on the CPU, with
weights from a safetensors file under diffusers names, against the NumPy
reference: prediction (relative error) and MSE loss."""
import argparse
import os
import re
import sys

import numpy as np

import diffusion_reference
import e2e_util


def parameter_shapes(preset, cfg):
    """name -> shape of every parameter the preset reads (diffusers names)."""
    hidden, ch, ctx = cfg["hidden"], cfg["in_channels"], cfg["context_dim"]
    head_dim = hidden // cfg["heads"]
    shapes = {}

    def linear(name, fan_in, fan_out):
        shapes[name + ".weight"] = (fan_out, fan_in)
        shapes[name + ".bias"] = (fan_out,)

    linear("x_embedder", ch, hidden)
    linear("context_embedder", ctx, hidden)
    for i in range(cfg["layers"]):
        if preset == "mmdit":
            p = f"transformer_blocks.{i}."
            linear(p + "norm1.linear", hidden, 6 * hidden)
            linear(p + "norm1_context.linear", hidden, 6 * hidden)
            for proj in ("to_q", "to_k", "to_v", "to_out.0", "add_q_proj",
                         "add_k_proj", "add_v_proj", "to_add_out"):
                linear(p + "attn." + proj, hidden, hidden)
            for ff in ("ff", "ff_context"):
                linear(p + ff + ".net.0.proj", hidden, 4 * hidden)
                linear(p + ff + ".net.2", 4 * hidden, hidden)
        else:
            p = f"single_transformer_blocks.{i}."
            linear(p + "norm.linear", hidden, 3 * hidden)
            linear(p + "proj_mlp", hidden, 4 * hidden)
            for proj in ("to_q", "to_k", "to_v"):
                linear(p + "attn." + proj, hidden, hidden)
            shapes[p + "attn.norm_q.weight"] = (head_dim,)
            shapes[p + "attn.norm_k.weight"] = (head_dim,)
            linear(p + "proj_out", 5 * hidden, hidden)
    linear("norm_out.linear", hidden, 2 * hidden)
    linear("proj_out", hidden, ch)
    return shapes


def declared_parameters(model):
    """name -> shape of the meg.param declarations in the generated IR."""
    found = {}
    with open(model) as f:
        for line in f:
            m = re.match(r"\s*meg\.param @(\S+) : tensor<([0-9x]+)x\w+>", line)
            if m:
                found[m.group(1)] = tuple(int(d) for d in m.group(2).split("x"))
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", choices=["mmdit", "flux"], required=True)
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--interleaved", action="store_true")
    parser.add_argument("--percent", type=float, default=1.0)
    parser.add_argument("--tolerance", type=float, default=1e-5)
    options = parser.parse_args()
    if options.preset == "mmdit" and (options.interleaved or
                                      options.percent != 1.0):
        parser.error("--interleaved/--percent apply to flux only")

    cfg = dict(layers=2, hidden=64, heads=4, seq=16, text_seq=8, batch=2,
               in_channels=16, context_dim=32, eps=1e-6, theta=10000.0,
               percent=options.percent, interleaved=options.interleaved)
    bf16 = options.dtype == "bf16"
    os.makedirs(options.tmp, exist_ok=True)
    model = os.path.join(options.tmp, options.preset + ".mlir")
    artifact = os.path.join(options.tmp, options.preset + ".megc")
    gen = ["megc", "gen", options.preset, "--layers", str(cfg["layers"]),
           "--hidden", str(cfg["hidden"]), "--heads", str(cfg["heads"]),
           "--seq", str(cfg["seq"]), "--text-seq", str(cfg["text_seq"]),
           "--batch", str(cfg["batch"]),
           "--in-channels", str(cfg["in_channels"]),
           "--context-dim", str(cfg["context_dim"]),
           "--norm-eps", str(cfg["eps"]), "--dtype", options.dtype,
           "-o", model]
    if options.preset == "flux":
        gen += ["--rotary-percent", str(cfg["percent"]),
                "--rope-theta", str(cfg["theta"])]
        if cfg["interleaved"]:
            gen.append("--rotary-interleaved")
    e2e_util.run(gen)
    e2e_util.run(["megc", model, "-o", artifact])

    shapes = parameter_shapes(options.preset, cfg)
    declared = declared_parameters(model)
    if declared != shapes:
        print("FAIL: the generated model's parameters differ from the "
              "expected diffusers names/shapes")
        for name in sorted(set(declared) | set(shapes)):
            if declared.get(name) != shapes.get(name):
                print(f"  {name}: model {declared.get(name)}, "
                      f"expected {shapes.get(name)}")
        return 1

    def rounded(value):
        value = np.asarray(value, np.float32)
        return e2e_util.bf16_to_f32(e2e_util.bf16_bits(value)) if bf16 else value

    rng = np.random.default_rng(0)
    weights = {}
    for name, shape in shapes.items():
        if name.endswith("norm_q.weight") or name.endswith("norm_k.weight"):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            value = 0.02 * rng.standard_normal(shape)
        elif re.search(r"\.(to_q|to_k|add_q_proj|add_k_proj)\.weight$", name):
            # Larger query/key projections so that the attention weights are
            # far from uniform and the attention path shows in the output.
            value = 0.15 * rng.standard_normal(shape)
        else:
            value = 0.05 * rng.standard_normal(shape)
        weights[name] = rounded(value)
    params = os.path.join(options.tmp, "weights.safetensors")
    e2e_util.write_safetensors(params, weights, "BF16" if bf16 else "F32")

    b, s, t = cfg["batch"], cfg["seq"], cfg["text_seq"]
    inputs = {
        "latents": rounded(rng.standard_normal((b, s, cfg["in_channels"]))),
        "context": rounded(rng.standard_normal((b, t, cfg["context_dim"]))),
        "conditioning": rounded(rng.standard_normal((b, cfg["hidden"]))),
        # On the prediction's scale, so that the loss depends on it.
        "target": rounded(0.5 * rng.standard_normal(
            (b, s, cfg["in_channels"]))),
    }
    args = {}
    for name, value in inputs.items():
        path = os.path.join(options.tmp, name + ".npy")
        # megc-run reads '<u2' as raw bf16 bits and '<f4' as f32.
        np.save(path, e2e_util.bf16_bits(value) if bf16 else value)
        args[name] = ["--input", f"{name}={path}"]

    out = os.path.join(options.tmp, "out")
    common = ["megc-run", artifact, "--params", params, "--output-dir", out]
    e2e_util.run(common + ["--entry", "forward"] + args["latents"] +
                 args["context"] + args["conditioning"])
    prediction = e2e_util.read_output(os.path.join(out, "prediction.npy"))
    e2e_util.run(common + ["--entry", "loss"] + args["latents"] +
                 args["context"] + args["conditioning"] + args["target"])
    loss = e2e_util.read_output(os.path.join(out, "loss.npy"))

    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    x64 = {k: v.astype(np.float64) for k, v in inputs.items()}
    forward = (diffusion_reference.mmdit_forward if options.preset == "mmdit"
               else diffusion_reference.flux_forward)
    want = forward(w64, x64["latents"], x64["context"], x64["conditioning"],
                   cfg)
    if prediction.shape != want.shape:
        print(f"FAIL: prediction shape {prediction.shape}, expected "
              f"{want.shape}")
        return 1
    error = e2e_util.relative_error(prediction, want)
    want_loss = diffusion_reference.mse(want, x64["target"])
    loss_error = abs(float(loss) - want_loss) / abs(want_loss)
    print(f"{options.preset} {options.dtype}: prediction relative error "
          f"{error:.3g}, loss {float(loss):.6f} vs {want_loss:.6f} "
          f"(relative error {loss_error:.3g})")
    if not (error <= options.tolerance and loss_error <= options.tolerance):
        print(f"FAIL: above the tolerance {options.tolerance}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
