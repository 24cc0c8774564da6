"""Benchmark: a llama forward+backward (the `grad` entry) on the CPU with and
without fusion, in one run: the default build (meg-fuse-rope and meg-fuse)
against `--no-fuse-rope --no-fuse` on the same artifact inputs. Reports the
median device time of the entry from megc-run's trace, the kernel launches
per step and the bytes the launches move (bench/kernel_traffic.py), and the
ratios.

Usage: /usr/bin/python3 bench/fusion_cpu.py [--build build] [--steps 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import kernel_traffic  # noqa: E402

GEN = ["llama", "--train", "--layers", "2", "--hidden", "512", "--heads", "8",
       "--kv-heads", "4", "--ffn", "1376", "--vocab", "4096", "--seq", "256",
       "--batch", "2", "--rotary-interleaved", "--rotary-percent", "0.5"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=5)
    options = parser.parse_args()
    bin_dir = os.path.join(options.build, "bin")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([f"{bin_dir}/megc", "gen", *GEN, "-o",
                        f"{tmp}/m.mlir"], check=True)
        ids = np.random.default_rng(0).integers(0, 4096, (2, 256))
        np.save(f"{tmp}/ids.npy", ids.astype(np.int32))
        for variant, flags in (("fused", []),
                               ("unfused", ["--no-fuse-rope", "--no-fuse"])):
            artifact = f"{tmp}/{variant}.megc"
            subprocess.run([f"{bin_dir}/megc", f"{tmp}/m.mlir", *flags, "-o",
                            artifact], check=True)
            subprocess.run([f"{bin_dir}/megc", f"{tmp}/m.mlir", *flags,
                            "--emit=megrt", "-o", f"{tmp}/{variant}.txt"],
                           check=True)
            traffic = kernel_traffic.read(f"{tmp}/{variant}.txt")["grad"]
            trace = f"{tmp}/{variant}.json"
            subprocess.run(
                [f"{bin_dir}/megc-run", artifact, "--entry", "grad",
                 "--warmup", "1", "--steps", str(options.steps), "--trace",
                 trace, "--input", f"input_ids={tmp}/ids.npy",
                 "--input", f"labels={tmp}/ids.npy"],
                check=True, capture_output=True)
            entries = [e["dur"] / 1e3 for e in
                       json.load(open(trace))["traceEvents"]
                       if e["cat"] == "entry"][-options.steps:]
            results[variant] = (statistics.median(entries), traffic)
    fused, unfused = results["fused"], results["unfused"]
    print(f"llama grad (forward+backward) on the CPU, {' '.join(GEN[1:])}")
    for name, (ms, traffic) in results.items():
        print(f"  {name:8} {ms:9.1f} ms, {traffic['launches']:4} kernel "
              f"launches, {traffic['bytes'] / 1e6:8.1f} MB moved by kernels")
    print(f"  unfused/fused: time {unfused[0] / fused[0]:.2f}x, launches "
          f"{unfused[1]['launches'] / fused[1]['launches']:.2f}x, bytes "
          f"{unfused[1]['bytes'] / fused[1]['bytes']:.2f}x")


if __name__ == "__main__":
    main()
