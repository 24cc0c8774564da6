"""End to end: the llama preset compiled with fusion (meg-fuse-rope and
meg-fuse, the default) and without (--no-fuse-rope --no-fuse) gives the
same logits and gradients within the dtype's tolerance, and after
meg-fuse-rope its forward holds exactly two meg.rope per layer (q and k)."""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

import e2e_util


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--dtype", default="f32")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    layers, batch, seq, vocab = 2, 2, 8, 64
    model = os.path.join(options.tmp, "llama.mlir")
    e2e_util.run(["megc", "gen", "llama", "--layers", str(layers),
                  "--hidden", "64", "--heads", "4", "--kv-heads", "2",
                  "--ffn", "96", "--vocab", str(vocab), "--seq", str(seq),
                  "--batch", str(batch), "--dtype", options.dtype,
                  "--rotary-interleaved", "--rotary-percent", "0.5",
                  "--train", "-o", model])

    ir = subprocess.run(["megc", model, "--emit=mlir", "-o", "-"],
                        capture_output=True, text=True, check=True).stdout
    forward = re.search(r"func.func @forward\(.*?\n  \}", ir, re.S).group(0)
    ropes = forward.count("meg.rope ")
    if ropes != 2 * layers:
        sys.exit(f"forward has {ropes} meg.rope after fusion, expected "
                 f"{2 * layers}")
    unfused_ir = subprocess.run(
        ["megc", model, "--emit=mlir", "--no-fuse-rope", "--no-fuse",
         "-o", "-"], capture_output=True, text=True, check=True).stdout
    if "meg.rope " in unfused_ir or "meg.fusion" in unfused_ir:
        sys.exit("--no-fuse-rope --no-fuse still fused")

    rng = np.random.default_rng(5)
    inputs = {}
    for name in ("input_ids", "labels"):
        path = os.path.join(options.tmp, name + ".npy")
        np.save(path, rng.integers(0, vocab, (batch, seq)).astype(np.int32))
        inputs[name] = path
    outputs = {}
    for variant, flags in (("fused", []),
                           ("unfused", ["--no-fuse-rope", "--no-fuse"])):
        artifact = os.path.join(options.tmp, variant + ".megc")
        e2e_util.run(["megc", model, *flags, "-o", artifact])
        for entry, names in (("forward", ["input_ids"]),
                             ("grad", ["input_ids", "labels"])):
            out_dir = os.path.join(options.tmp, f"{variant}_{entry}")
            e2e_util.run(["megc-run", artifact, "--entry", entry,
                          "--params", "init:3", "--output-dir", out_dir,
                          *sum((["--input", f"{n}={inputs[n]}"]
                                for n in names), [])])
            for file in sorted(os.listdir(out_dir)):
                outputs[(variant, entry, file)] = e2e_util.read_output(
                    os.path.join(out_dir, file))

    worst = 0.0
    compared = 0
    for (variant, entry, file), fused in outputs.items():
        if variant != "fused":
            continue
        unfused = outputs[("unfused", entry, file)]
        error = e2e_util.relative_error(fused, unfused)
        compared += 1
        worst = max(worst, error)
        if not error <= options.tolerance:
            sys.exit(f"{entry} {file}: fused and unfused differ by {error:.3g} "
                     f"(tolerance {options.tolerance})")
    print(f"{compared} outputs agree, worst relative error {worst:.3g}; "
          f"{ropes} meg.rope in forward")


if __name__ == "__main__":
    main()
