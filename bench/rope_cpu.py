"""Benchmark: fused RoPE on the CPU.

One function applies RoPE, written unfused as a framework exports it
(slices, negation, concat, two multiplies and an add on [1, S, 1, R]
tables, cast to the activation dtype), to x [B, S, H, D]. It is compiled
twice: with meg-fuse-rope (one meg.rope kernel) and with --no-fuse-rope
(one kernel per op). Both run through megc-run on the same inputs, timed by
the trace (kernel time, without megc-run's copies); the baselines in the
same run are PyTorch CPU eager (when torch is importable) and NumPy (f32
only) evaluating the same unfused formula. Reports medians and ratios.

Usage: python3 bench/rope_cpu.py [--build build] [--steps 20] [--cpu native]
(a Python with numpy, and torch for the PyTorch baseline)
       [--seq 2048] [--heads 16] [--head-dim 128] [--percent 1.0]
"""
import argparse
import json
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


def kernel_ms(trace, steps):
    """Median time of the RoPE kernels per run, from megc-run's trace."""
    events = json.load(open(trace))["traceEvents"]
    runs, per_run = 0, []
    for event in events:
        if event["cat"] == "entry":
            runs += 1
            per_run.append(0.0)
        elif event["cat"] == "kernel" and per_run:
            per_run[-1] += event["dur"] / 1e3
    return statistics.median(per_run[-steps:])


def torch_unfused_ms(x, cos, sin, r, interleaved, dtype, steps):
    """PyTorch CPU eager on the unfused formula, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    tx = torch.tensor(x).to(tdtype)
    tc = torch.tensor(cos).to(tdtype)[None, :, None, :]
    ts = torch.tensor(sin).to(tdtype)[None, :, None, :]

    def unfused():
        xr = tx[..., :r]
        if interleaved:
            rh = torch.stack([-xr[..., 1::2], xr[..., 0::2]], -1).reshape(
                xr.shape)
        else:
            rh = torch.cat([-xr[..., r // 2:], xr[..., :r // 2]], -1)
        y = xr * tc + rh * ts
        return torch.cat([y, tx[..., r:]], -1) if r < tx.shape[-1] else y

    samples = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        unfused()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--cpu", default="native",
                        help="megc --cpu: native (this host's extensions, "
                        "as PyTorch dispatches to them at run time) or "
                        "x86-64")
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
    print(f"RoPE x[{b}, {s}, {h}, {d}], rotary dim {r}: megc kernel time "
          f"from the trace (--cpu={options.cpu}, one thread), baselines "
          f"timed in this process; median of {options.steps} runs after one "
          f"warm-up")
    print(f"{'dtype':5} {'form':11} {'fused ms':>9} {'unfused ms':>10} "
          f"{'numpy ms':>9} {'torch ms':>9} {'unfused/fused':>13} "
          f"{'numpy/fused':>11} {'torch/fused':>11}")
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
                                    f"--cpu={options.cpu}", *flags, "-o",
                                    f"{tmp}/{variant}.megc"],
                                   check=True)
                    subprocess.run(
                        [f"{bin_dir}/megc-run", f"{tmp}/{variant}.megc",
                         "--entry", "rope", "--warmup", "1", "--steps",
                         str(options.steps), "--trace", f"{tmp}/trace.json",
                         "--input", f"x={tmp}/x.npy",
                         "--input", f"cos={tmp}/cos.npy",
                         "--input", f"sin={tmp}/sin.npy"],
                        check=True, capture_output=True, text=True)
                    times[variant] = kernel_ms(f"{tmp}/trace.json",
                                               options.steps)
                fused = times["fused"]
                numpy_ms, numpy_ratio = "", ""
                if dtype == "f32":
                    samples = []
                    for _ in range(options.steps + 1):
                        start = time.perf_counter()
                        numpy_unfused(x, cos, sin, r, interleaved)
                        samples.append((time.perf_counter() - start) * 1e3)
                    numpy_value = statistics.median(samples[1:])
                    numpy_ms = f"{numpy_value:.2f}"
                    numpy_ratio = f"{numpy_value / fused:.2f}x"
                torch_value = torch_unfused_ms(x, cos, sin, r, interleaved,
                                               dtype, options.steps)
                torch_ms = "" if torch_value is None else f"{torch_value:.2f}"
                torch_ratio = ("" if torch_value is None
                               else f"{torch_value / fused:.2f}x")
                form = "interleaved" if interleaved else "half-split"
                print(f"{dtype:5} {form:11} {fused:9.2f} "
                      f"{times['unfused']:10.2f} {numpy_ms:>9} {torch_ms:>9} "
                      f"{times['unfused'] / fused:12.2f}x "
                      f"{numpy_ratio:>11} {torch_ratio:>11}", flush=True)


if __name__ == "__main__":
    main()
