"""Checks megc's MMDiT and Flux gradients against PyTorch autograd.

The models are written here in PyTorch (float64, functional), from the
diffusers semantics (SD3 JointTransformerBlock; FluxSingleTransformerBlock;
AdaLayerNormContinuous and proj_out), independently of the compiler. For
each preset: `megc gen --train`'s `grad` entry, compiled by megc and run by
megc-run on the CPU, returns the MSE loss and every grad.<parameter>; torch
computes the same loss and backpropagates; the relative error of every
gradient must be below --tolerance. Needs torch (and numpy); run where
PyTorch is installed:

  python3 bench/torch_diffusion.py [--build build]
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import e2e_util  # noqa: E402
from diffusion_forward import parameter_shapes  # noqa: E402

F = torch.nn.functional


def linear(x, w, name):
    return F.linear(x, w[name + ".weight"], w[name + ".bias"])


def modulated(x, shift, scale, eps):
    normed = F.layer_norm(x, x.shape[-1:], eps=eps)
    return normed * (1 + scale[:, None, :]) + shift[:, None, :]


def chunks(w, name, cond, count):
    return linear(F.silu(cond), w, name).chunk(count, dim=-1)


def attention(q, k, v):
    """q/k/v [B, S, H, D] -> [B, S, H*D], unmasked."""
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    b, h, s, d = out.shape
    return out.transpose(1, 2).reshape(b, s, h * d)


def heads(x, count):
    b, s, h = x.shape
    return x.reshape(b, s, count, h // count)


def gelu(x):
    return F.gelu(x, approximate="tanh")


def rope(x, cfg):
    """Flux RoPE over token positions on each head, interleaved pairs or
    half-split, angles computed in float32 as the frameworks do."""
    seq, dim = x.shape[1], x.shape[-1]
    rot = int(round(dim * cfg["percent"]))
    half = rot // 2
    inv = 1.0 / (torch.tensor(cfg["theta"], dtype=torch.float32) ** (
        torch.arange(half, dtype=torch.float32) * 2 / rot))
    angle = (torch.arange(seq, dtype=torch.float32)[:, None] * inv[None, :])
    cos = torch.cos(angle.double())[None, :, None, :]
    sin = torch.sin(angle.double())[None, :, None, :]
    part, tail = x[..., :rot], x[..., rot:]
    if cfg["interleaved"]:
        a, b = part[..., 0::2], part[..., 1::2]
        out = torch.stack([a * cos - b * sin, a * sin + b * cos], -1)
        out = out.reshape(part.shape)
    else:
        a, b = part[..., :half], part[..., half:]
        out = torch.cat([a * cos - b * sin, a * sin + b * cos], -1)
    return torch.cat([out, tail], -1)


def output_head(w, x, cond, eps):
    scale, shift = chunks(w, "norm_out.linear", cond, 2)
    return linear(modulated(x, shift, scale, eps), w, "proj_out")


def mmdit(w, latents, context, cond, cfg):
    eps, count = cfg["eps"], cfg["heads"]
    x = linear(latents, w, "x_embedder")
    c = linear(context, w, "context_embedder")
    for i in range(cfg["layers"]):
        p = f"transformer_blocks.{i}."
        sm, cm, gm, sf, cf, gf = chunks(w, p + "norm1.linear", cond, 6)
        csm, ccm, cgm, csf, ccf, cgf = chunks(w, p + "norm1_context.linear",
                                             cond, 6)
        nx, nc = modulated(x, sm, cm, eps), modulated(c, csm, ccm, eps)

        def joint(image, text):
            return torch.cat([heads(linear(nx, w, p + "attn." + image), count),
                              heads(linear(nc, w, p + "attn." + text), count)],
                             1)

        out = attention(joint("to_q", "add_q_proj"),
                        joint("to_k", "add_k_proj"),
                        joint("to_v", "add_v_proj"))
        seq = x.shape[1]
        x = x + gm[:, None] * linear(out[:, :seq], w, p + "attn.to_out.0")
        x = x + gf[:, None] * linear(gelu(linear(modulated(x, sf, cf, eps), w,
                                                 p + "ff.net.0.proj")),
                                     w, p + "ff.net.2")
        c = c + cgm[:, None] * linear(out[:, seq:], w, p + "attn.to_add_out")
        c = c + cgf[:, None] * linear(
            gelu(linear(modulated(c, csf, ccf, eps), w,
                        p + "ff_context.net.0.proj")), w, p + "ff_context.net.2")
    return output_head(w, x, cond, eps)


def flux(w, latents, context, cond, cfg):
    eps, count = cfg["eps"], cfg["heads"]
    x = linear(latents, w, "x_embedder")
    c = linear(context, w, "context_embedder")
    text = c.shape[1]
    h = torch.cat([c, x], 1)
    for i in range(cfg["layers"]):
        p = f"single_transformer_blocks.{i}."
        shift, scale, gate = chunks(w, p + "norm.linear", cond, 3)
        n = modulated(h, shift, scale, eps)
        mlp = gelu(linear(n, w, p + "proj_mlp"))

        def norm(t, name):
            return F.rms_norm(t, t.shape[-1:], w[name], eps=eps)

        q = norm(heads(linear(n, w, p + "attn.to_q"), count),
                 p + "attn.norm_q.weight")
        k = norm(heads(linear(n, w, p + "attn.to_k"), count),
                 p + "attn.norm_k.weight")
        v = heads(linear(n, w, p + "attn.to_v"), count)
        out = attention(rope(q, cfg), rope(k, cfg), v)
        h = h + gate[:, None] * linear(torch.cat([out, mlp], -1), w,
                                       p + "proj_out")
    return output_head(w, h[:, text:], cond, eps)


def error(got, want):
    """Relative L2 error; absolute where the reference is exactly zero (a
    key bias's gradient is: softmax ignores a shift of all scores)."""
    scale = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / (scale if scale else 1.0))


def check(preset, bin_dir, tmp, tolerance):
    cfg = dict(layers=2, hidden=16, heads=2, seq=4, text_seq=3, batch=2,
               in_channels=4, context_dim=6, eps=1e-6, theta=10000.0,
               percent=1.0, interleaved=preset == "flux")
    gen = [f"{bin_dir}/megc", "gen", preset, "--train"]
    for flag in ("layers", "hidden", "heads", "seq", "text_seq", "batch",
                 "in_channels", "context_dim"):
        gen += ["--" + flag.replace("_", "-"), str(cfg[flag])]
    gen += ["--norm-eps", str(cfg["eps"]), "-o", f"{tmp}/m.mlir"]
    if cfg["interleaved"]:
        gen.append("--rotary-interleaved")
    subprocess.run(gen, check=True)
    subprocess.run([f"{bin_dir}/megc", f"{tmp}/m.mlir", "-o", f"{tmp}/m.megc"],
                   check=True)
    rng = np.random.default_rng(11)
    weights = {}
    for name, shape in parameter_shapes(preset, cfg).items():
        base = 1.0 if name.endswith(("norm_q.weight", "norm_k.weight")) else 0
        weights[name] = (base + 0.3 * rng.standard_normal(shape)).astype(
            np.float32)
    e2e_util.write_safetensors(f"{tmp}/w.safetensors", weights)
    b, s, t = cfg["batch"], cfg["seq"], cfg["text_seq"]
    arrays = {"latents": (b, s, cfg["in_channels"]),
              "context": (b, t, cfg["context_dim"]),
              "conditioning": (b, cfg["hidden"]),
              "target": (b, s, cfg["in_channels"])}
    run = [f"{bin_dir}/megc-run", f"{tmp}/m.megc", "--entry", "grad",
           "--params", f"{tmp}/w.safetensors", "--output-dir", f"{tmp}/out"]
    for name, shape in arrays.items():
        arrays[name] = rng.standard_normal(shape).astype(np.float32)
        np.save(f"{tmp}/{name}.npy", arrays[name])
        run += ["--input", f"{name}={tmp}/{name}.npy"]
    subprocess.run(run, check=True, capture_output=True)

    w = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in weights.items()}
    inputs = {k: torch.tensor(v, dtype=torch.float64) for k, v in arrays.items()}
    forward = mmdit if preset == "mmdit" else flux
    prediction = forward(w, inputs["latents"], inputs["context"],
                         inputs["conditioning"], cfg)
    loss = ((prediction - inputs["target"]) ** 2).mean()
    loss.backward()
    errors = {"loss": error(e2e_util.read_output(f"{tmp}/out/loss.npy"),
                            loss.detach().numpy())}
    for name, value in w.items():
        got = e2e_util.read_output(f"{tmp}/out/grad.{name}.npy")
        if value.grad is None:
            # Not on the loss's path (the last MMDiT block's text stream):
            # the gradient is zero.
            errors[name] = float(np.abs(got).max())
            continue
        errors[name] = error(got, value.grad.numpy())
    worst = max(errors, key=errors.get)
    ok = errors[worst] <= tolerance
    print(f"{preset}: {'PASS' if ok else 'FAIL'} loss and {len(w)} gradients "
          f"vs torch autograd, worst {worst} {errors[worst]:.2e}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--tolerance", type=float, default=1e-4)
    options = parser.parse_args()
    ok = True
    for preset in ("mmdit", "flux"):
        with tempfile.TemporaryDirectory() as tmp:
            ok &= check(preset, os.path.join(options.build, "bin"), tmp,
                        options.tolerance)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
