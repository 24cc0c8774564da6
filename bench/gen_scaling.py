"""Benchmark: `megc gen llama` at 7B shape plus `megc-opt` parse and verify.

Times generation and verification for 8 to 256 layers (hidden 4096, 32
heads, ffn 11008, vocab 32000, seq 4096). Each command pays a fixed process
start-up cost, so the report fits `time = fixed + per_layer * layers` by
least squares and shows, for each size, the work beyond the 8-layer baseline
measured in the same run: with linear scaling its ratio equals the ratio of
added layers, and the fit's largest residual stays small.

Usage: python3 bench/gen_scaling.py [--build build] [--repeat 3]
"""
import argparse
import os
import subprocess
import tempfile
import time

SHAPE = ["--hidden", "4096", "--heads", "32", "--kv-heads", "32", "--ffn",
         "11008", "--vocab", "32000", "--seq", "4096", "--batch", "1"]


def best_of(repeat, command):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layers", default="8,16,32,64,128,256")
    options = parser.parse_args()
    megc = os.path.join(options.build, "bin", "megc")
    megc_opt = os.path.join(options.build, "bin", "megc-opt")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in [int(n) for n in options.layers.split(",")]:
            path = os.path.join(tmp, f"llama{layers}.mlir")
            gen = best_of(options.repeat, [megc, "gen", "llama", "--layers",
                                           str(layers), *SHAPE, "-o", path])
            verify = best_of(options.repeat,
                             [megc_opt, path, "-o", os.devnull])
            rows.append((layers, gen, verify, os.path.getsize(path)))

    base_layers, base_gen, base_verify, _ = rows[0]
    print(f"megc gen llama (7B shape) + megc-opt parse/verify/print; "
          f"baseline = {base_layers} layers, best of {options.repeat}")
    print(f"{'layers':>6} {'IR MB':>7} {'gen s':>7} {'verify s':>9} "
          f"{'added layers':>12} {'gen added':>10} {'verify added':>12}")
    for layers, gen, verify, size in rows:
        print(f"{layers:>6} {size / 1e6:>7.2f} {gen:>7.3f} {verify:>9.3f} "
              f"{layers - base_layers:>12} {gen - base_gen:>10.3f} "
              f"{verify - base_verify:>12.3f}")
    for name, column in (("gen", 1), ("verify", 2)):
        xs = [row[0] for row in rows]
        ys = [row[column] for row in rows]
        n = len(xs)
        mean_x, mean_y = sum(xs) / n, sum(ys) / n
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / \
            sum((x - mean_x) ** 2 for x in xs)
        fixed = mean_y - slope * mean_x
        worst = max(abs(y - (fixed + slope * x)) / y for x, y in zip(xs, ys))
        print(f"{name}: fixed {fixed * 1e3:.1f} ms + {slope * 1e3:.3f} ms/layer; "
              f"largest deviation from the linear fit {worst * 100:.1f}%")

if __name__ == "__main__":
    main()
