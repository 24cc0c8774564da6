"""Benchmark: fused RoPE on the CPU.

One function applies RoPE, written unfused as a framework exports it
(slices, negation, concat, two multiplies and an add on [1, S, 1, R]
tables, cast to the activation dtype), to x [B, S, H, D]. It is compiled
twice: with meg-fuse-rope (one meg.rope kernel) and with --no-fuse-rope
(one kernel per op). Both run through megc-run on the same inputs; the
baseline in the same run is NumPy evaluating the same unfused formula in
float32 (bf16 has no NumPy type, so bf16 compares fused with unfused megc
only). Reports median step times and ratios.

Usage: /usr/bin/python3 bench/rope_cpu.py [--build build] [--steps 5]
       [--seq 2048] [--heads 16] [--head-dim 128] [--percent 1.0]
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def unfused_module(b, s, h, d, r, dtype, interleaved):
    """meg IR of x * cos + rotate_half(x) * sin on the first r channels."""
    t = lambda *shape: "tensor<" + "x".join(map(str, shape)) + f"x{dtype}>"
    x, xr, half = t(b, s, h, d), t(b, s, h, r), t(b, s, h, r // 2)
    table = f"tensor<{s}x{r}xf32>"
    lines = [f"func.func @rope(%x: {x} {{meg.name = \"x\"}}, "
             f"%cos: {table} {{meg.name = \"cos\"}}, "
             f"%sin: {table} {{meg.name = \"sin\"}}) -> {x} {{"]
    add = lines.append
    for name in ("cos", "sin"):
        add(f"  %{name}c = meg.cast %{name} : tensor<{s}x{r}xf32> to "
            f"tensor<{s}x{r}x{dtype}>")
        add(f"  %{name}4 = meg.reshape %{name}c : tensor<{s}x{r}x{dtype}> "
            f"to {t(1, s, 1, r)}")
    rot = "%x"
    if r < d:
        add(f"  %xr = meg.slice %x [0, 0, 0, 0] [{b}, {s}, {h}, {r}] "
            f"[1, 1, 1, 1] : {x}")
        rot = "%xr"
    if interleaved:
        add(f"  %x1 = meg.slice {rot} [0, 0, 0, 0] [{b}, {s}, {h}, {r // 2}] "
            f"[1, 1, 1, 2] : {xr}")
        add(f"  %x2 = meg.slice {rot} [0, 0, 0, 1] [{b}, {s}, {h}, {r // 2}] "
            f"[1, 1, 1, 2] : {xr}")
        add(f"  %n = meg.neg %x2 : {half}")
        pair = t(b, s, h, r // 2, 1)
        add(f"  %p0 = meg.reshape %n : {half} to {pair}")
        add(f"  %p1 = meg.reshape %x1 : {half} to {pair}")
        add(f"  %st = meg.concat %p0, %p1 axis 4 : {pair}, {pair}")
        add(f"  %rh = meg.reshape %st : {t(b, s, h, r // 2, 2)} to {xr}")
    else:
        add(f"  %x1 = meg.slice {rot} [0, 0, 0, 0] [{b}, {s}, {h}, {r // 2}] "
            f"[1, 1, 1, 1] : {xr}")
        add(f"  %x2 = meg.slice {rot} [0, 0, 0, {r // 2}] "
            f"[{b}, {s}, {h}, {r // 2}] [1, 1, 1, 1] : {xr}")
        add(f"  %n = meg.neg %x2 : {half}")
        add(f"  %rh = meg.concat %n, %x1 axis 3 : {half}, {half}")
    add(f"  %a = meg.mul {rot}, %cos4 : {xr}, {t(1, s, 1, r)}")
    add(f"  %m = meg.mul %rh, %sin4 : {xr}, {t(1, s, 1, r)}")
    add(f"  %y = meg.add %a, %m : {xr}, {xr}")
    result = "%y"
    if r < d:
        add(f"  %tail = meg.slice %x [0, 0, 0, {r}] [{b}, {s}, {h}, {d - r}] "
            f"[1, 1, 1, 1] : {x}")
        add(f"  %out = meg.concat %y, %tail axis 3 : {xr}, "
            f"{t(b, s, h, d - r)}")
        result = "%out"
    add(f"  return {result} : {x}")
    add("}")
    return "\n".join(lines) + "\n"


def numpy_unfused(x, cos, sin, r, interleaved):
    xr = x[..., :r]
    if interleaved:
        rh = np.stack([-xr[..., 1::2], xr[..., 0::2]], axis=-1).reshape(
            xr.shape)
    else:
        rh = np.concatenate([-xr[..., r // 2:], xr[..., :r // 2]], axis=-1)
    y = xr * cos[None, :, None, :] + rh * sin[None, :, None, :]
    return np.concatenate([y, x[..., r:]], axis=-1) if r < x.shape[-1] else y


def step_ms(output):
    return statistics.median(
        float(v) for v in re.findall(r" ([0-9.]+) ms", output)[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--percent", type=float, default=1.0)
    options = parser.parse_args()
    bin_dir = os.path.join(options.build, "bin")
    b, s, h, d = options.batch, options.seq, options.heads, options.head_dim
    r = int(d * options.percent)
    rng = np.random.default_rng(0)
    freqs = np.arange(s)[:, None] / 10000.0 ** (np.arange(0, r, 2) / r)
    print(f"RoPE x[{b}, {s}, {h}, {d}], rotary dim {r}, "
          f"median of {options.steps - 1} steps after one warm-up")
    print(f"{'dtype':5} {'form':11} {'fused ms':>9} {'unfused ms':>10} "
          f"{'numpy ms':>9} {'unfused/fused':>13} {'numpy/fused':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("f32", "bf16"):
            for interleaved in (False, True):
                emb = (np.repeat(freqs, 2, axis=1) if interleaved
                       else np.concatenate([freqs, freqs], axis=1))
                cos, sin = np.cos(emb).astype(np.float32), np.sin(emb).astype(
                    np.float32)
                x = rng.standard_normal((b, s, h, d)).astype(np.float32)
                np.save(f"{tmp}/cos.npy", cos)
                np.save(f"{tmp}/sin.npy", sin)
                if dtype == "bf16":
                    bits = x.view(np.uint32)
                    np.save(f"{tmp}/x.npy", ((bits + 0x7FFF + ((bits >> 16) & 1))
                                             >> 16).astype(np.uint16))
                else:
                    np.save(f"{tmp}/x.npy", x)
                with open(f"{tmp}/rope.mlir", "w") as f:
                    f.write(unfused_module(b, s, h, d, r, dtype, interleaved))
                times = {}
                for variant, flags in (("fused", []),
                                       ("unfused", ["--no-fuse-rope"])):
                    subprocess.run([f"{bin_dir}/megc", f"{tmp}/rope.mlir",
                                    *flags, "-o", f"{tmp}/{variant}.megc"],
                                   check=True)
                    out = subprocess.run(
                        [f"{bin_dir}/megc-run", f"{tmp}/{variant}.megc",
                         "--entry", "rope", "--steps", str(options.steps),
                         "--input", f"x={tmp}/x.npy",
                         "--input", f"cos={tmp}/cos.npy",
                         "--input", f"sin={tmp}/sin.npy"],
                        check=True, capture_output=True, text=True).stdout
                    times[variant] = step_ms(out)
                numpy_ms = ""
                ratio = ""
                if dtype == "f32":
                    samples = []
                    for _ in range(options.steps):
                        start = time.perf_counter()
                        numpy_unfused(x, cos, sin, r, interleaved)
                        samples.append((time.perf_counter() - start) * 1e3)
                    numpy_ms = f"{statistics.median(samples[1:]):.2f}"
                    ratio = f"{float(numpy_ms) / times['fused']:.2f}x"
                form = "interleaved" if interleaved else "half-split"
                print(f"{dtype:5} {form:11} {times['fused']:9.2f} "
                      f"{times['unfused']:10.2f} {numpy_ms:>9} "
                      f"{times['unfused'] / times['fused']:12.2f}x "
                      f"{ratio:>11}", flush=True)


if __name__ == "__main__":
    main()
