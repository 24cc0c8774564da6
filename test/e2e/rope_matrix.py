"""End to end: the fused RoPE kernels (meg.rope forward, meg.rope_grad
backward) compiled by megc and run by megc-run on the CPU, over the
Transformer Engine test matrix of SEMANTICS.md section 1 — dtypes f32, bf16,
f16; sequence 2048 and 4096; head dim 128 and 256; rotary percent 0.5 and
1.0; a frequency table 10 rows longer than the sequence; layouts bshd and
sbhd; interleaved on and off — against a float64 NumPy reference of the
unfused formula (rotate_half by slices, written here independently of the
compiler), rounded to the dtype. Batch 1 and 2 heads keep it fast; the
tolerances are Transformer Engine's dtype defaults."""
import argparse
import itertools
import os
import subprocess
import sys

import numpy as np

import e2e_util

# (rtol, atol) per dtype, as torch.testing's defaults used by the reference.
TOLERANCES = {"f32": (1.3e-6, 1e-5), "bf16": (1.6e-2, 1e-5),
              "f16": (1e-3, 1e-5)}
MARGIN = 10  # extra rows of the frequency table


def module(dtype, seq, heads, dim, rotary, layout, interleaved):
    x = (f"tensor<1x{seq}x{heads}x{dim}x{dtype}>" if layout == "bshd"
         else f"tensor<{seq}x1x{heads}x{dim}x{dtype}>")
    table = f"tensor<{seq + MARGIN}x{rotary}xf32>"
    flag = " interleaved" if interleaved else ""
    rope = f"layout {layout}{flag} : {x}, {table}, {table}"
    return f"""
func.func @forward(%x: {x} {{meg.name = "x"}}, %cos: {table} {{meg.name = "cos"}},
                   %sin: {table} {{meg.name = "sin"}}) -> ({x} {{meg.name = "y"}}) {{
  %y = meg.rope %x, %cos, %sin {rope}
  return %y : {x}
}}
func.func @backward(%dy: {x} {{meg.name = "dy"}}, %cos: {table} {{meg.name = "cos"}},
                    %sin: {table} {{meg.name = "sin"}}) -> ({x} {{meg.name = "dx"}}) {{
  %dx = meg.rope_grad %dy, %cos, %sin {rope}
  return %dx : {x}
}}
"""


def rotate_half(x, interleaved):
    if interleaved:
        return np.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape(x.shape)
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], -1)


def reference(x, cos, sin, interleaved, layout, transpose):
    """out[..., :r] = x cos + rotate_half(x) sin (the forward), or its
    transpose dx = dy cos - rotate_half(dy sin) (the backward)."""
    seq, r = (x.shape[1] if layout == "bshd" else x.shape[0]), cos.shape[1]
    shape = (1, seq, 1, r) if layout == "bshd" else (seq, 1, 1, r)
    c, s = cos[:seq].reshape(shape), sin[:seq].reshape(shape)
    rot = x[..., :r]
    if transpose:
        y = rot * c - rotate_half(rot * s, interleaved)
    else:
        y = rot * c + rotate_half(rot, interleaved) * s
    return np.concatenate([y, x[..., r:]], -1)


def round_to(x, dtype):
    if dtype == "f32":
        return x.astype(np.float32).astype(np.float64)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float64)
    return e2e_util.bf16_to_f32(e2e_util.bf16_bits(x)).astype(np.float64)


def save(path, x, dtype):
    if dtype == "bf16":
        np.save(path, e2e_util.bf16_bits(x))
    else:
        np.save(path, x.astype(np.float32 if dtype == "f32" else np.float16))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--heads", type=int, default=2)
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    rng = np.random.default_rng(7)
    cases = 0
    for dtype, seq, dim, percent, layout, interleaved in itertools.product(
            ("f32", "bf16", "f16"), (2048, 4096), (128, 256), (0.5, 1.0),
            ("bshd", "sbhd"), (False, True)):
        rotary = int(dim * percent)
        name = (f"{dtype}_s{seq}_d{dim}_r{rotary}_{layout}"
                f"{'_inter' if interleaved else ''}")
        mlir = os.path.join(options.tmp, "rope.mlir")
        artifact = os.path.join(options.tmp, "rope.megc")
        with open(mlir, "w") as f:
            f.write(module(dtype, seq, options.heads, dim, rotary, layout,
                           interleaved))
        e2e_util.run(["megc", mlir, "-o", artifact])
        shape = ((1, seq, options.heads, dim) if layout == "bshd"
                 else (seq, 1, options.heads, dim))
        inv = 1.0 / 10000.0 ** (np.arange(0, rotary, 2) / rotary)
        freqs = np.outer(np.arange(seq + MARGIN), inv)
        emb = (np.repeat(freqs, 2, -1) if interleaved
               else np.concatenate([freqs, freqs], -1))
        cos = np.cos(emb).astype(np.float32)
        sin = np.sin(emb).astype(np.float32)
        np.save(os.path.join(options.tmp, "cos.npy"), cos)
        np.save(os.path.join(options.tmp, "sin.npy"), sin)
        rtol, atol = TOLERANCES[dtype]
        for entry, source, result, transpose in (
                ("forward", "x", "y", False), ("backward", "dy", "dx", True)):
            value = round_to(rng.standard_normal(shape), dtype)
            path = os.path.join(options.tmp, source + ".npy")
            save(path, value, dtype)
            out_dir = os.path.join(options.tmp, entry)
            e2e_util.run([
                "megc-run", artifact, "--entry", entry, "--output-dir",
                out_dir, "--input", f"{source}={path}",
                "--input", f"cos={options.tmp}/cos.npy",
                "--input", f"sin={options.tmp}/sin.npy"])
            got = e2e_util.read_output(os.path.join(out_dir, result + ".npy"))
            want = round_to(reference(value, cos.astype(np.float64),
                                      sin.astype(np.float64), interleaved,
                                      layout, transpose), dtype)
            bad = np.abs(got - want) > atol + rtol * np.abs(want)
            if bad.any():
                index = np.unravel_index(np.argmax(bad), bad.shape)
                sys.exit(f"{name} {entry}: {bad.sum()} elements out of "
                         f"tolerance, e.g. at {index}: got {got[index]}, "
                         f"want {want[index]}")
        cases += 1
    print(f"{cases} configurations, forward and backward within "
          f"tolerance")


if __name__ == "__main__":
    main()
