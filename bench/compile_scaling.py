"""Benchmark: compile time of a 7B-shaped llama (hidden 4096, 32 heads,
ffn 11008, vocab 32000, seq 4096) for 8, 16 and 32 layers, each against the
8-layer compile measured in the same run.

Usage: /usr/bin/python3 bench/compile_scaling.py [--build build] [--repeat 3]
"""
import argparse
import os
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = ["--hidden", "4096", "--heads", "32", "--kv-heads", "32", "--ffn",
         "11008", "--vocab", "32000", "--seq", "4096", "--batch", "1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    megc = os.path.join(options.build, "bin", "megc")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in (8, 16, 32):
            model = f"{tmp}/llama{layers}.mlir"
            subprocess.run([megc, "gen", "llama", "--layers", str(layers),
                            *SHAPE, "-o", model], check=True)
            best = float("inf")
            for _ in range(options.repeat):
                start = time.perf_counter()
                subprocess.run([megc, model, "-o", f"{tmp}/m.megc"], check=True)
                best = min(best, time.perf_counter() - start)
            rows.append((layers, best))
    base_layers, base = rows[0]
    print(f"megc compile, 7B-shaped llama, CPU target, best of {options.repeat}")
    print(f"{'layers':>6} {'seconds':>8} {'vs 8 layers':>12} {'layer ratio':>12}")
    for layers, seconds in rows:
        print(f"{layers:>6} {seconds:>8.3f} {seconds / base:>12.2f} "
              f"{layers / base_layers:>12.1f}")


if __name__ == "__main__":
    main()
