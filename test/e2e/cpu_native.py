"""megc --cpu=native: CPU code for this host's instruction-set extensions
computes what the baseline x86-64 code computes (the llama forward, its
gradients and a bf16 training step, within the dtype's tolerance: wider
vectors may sum reductions in another order), the artifact lists the
extensions (megc inspect), and an unknown --cpu is an error naming the
choices."""
import argparse
import os
import subprocess
import sys

import numpy as np

import e2e_util


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    tmp = options.tmp
    os.makedirs(tmp, exist_ok=True)
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 64, (2, 16)).astype(np.int32)
    np.save(os.path.join(tmp, "ids.npy"), ids)
    np.save(os.path.join(tmp, "labels.npy"), np.roll(ids, -1, axis=1))
    inputs = ["--input", f"input_ids={tmp}/ids.npy",
              "--input", f"labels={tmp}/labels.npy"]
    worst = {}
    for dtype, tolerance in (("f32", 1e-5), ("bf16", 2e-2)):
        model = os.path.join(tmp, f"{dtype}.mlir")
        e2e_util.run(["megc", "gen", "llama", "--layers", "2", "--hidden", "64",
                      "--heads", "4", "--kv-heads", "2", "--ffn", "96",
                      "--vocab", "64", "--seq", "16", "--batch", "2",
                      "--dtype", dtype, "--rotary-interleaved", "--train",
                      "-o", model])
        outputs = {}
        for cpu in ("x86-64", "native"):
            artifact = os.path.join(tmp, f"{dtype}_{cpu}.megc")
            e2e_util.run(["megc", model, f"--cpu={cpu}", "-o", artifact])
            listing = e2e_util.run(["megc", "inspect", artifact])
            line = next(l for l in listing.splitlines()
                        if l.startswith("kernels:"))
            if (cpu == "native") != ("(x86-64 +" in line) and \
                    "avx2" in open("/proc/cpuinfo").read():
                sys.exit(f"--cpu={cpu}: unexpected extensions in '{line}'")
            for entry, args in (("grad", inputs[:]),
                                ("forward", inputs[:2])):
                out = os.path.join(tmp, f"{dtype}_{cpu}_{entry}")
                e2e_util.run(["megc-run", artifact, "--entry", entry,
                              "--params", "init:2", "--output-dir", out,
                              *args])
                for name in sorted(os.listdir(out)):
                    outputs.setdefault((entry, name), []).append(
                        e2e_util.read_output(os.path.join(out, name)))
        for key, (base, native) in outputs.items():
            error = e2e_util.relative_error(native, base)
            worst[dtype] = max(worst.get(dtype, 0.0), error)
            if error > tolerance:
                sys.exit(f"{dtype} {key}: --cpu=native differs from x86-64 "
                         f"by {error:.3g} (tolerance {tolerance})")
    result = subprocess.run(["megc", model, "--cpu=pentium", "-o",
                             os.path.join(tmp, "bad.megc")],
                            capture_output=True, text=True)
    message = "unknown --cpu 'pentium'; expected x86-64"
    if result.returncode == 0 or message not in result.stderr:
        sys.exit(f"--cpu=pentium: expected '{message}', got "
                 f"{result.returncode}: {result.stderr}")
    print("--cpu=native equals x86-64: worst relative difference "
          + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))


if __name__ == "__main__":
    main()
