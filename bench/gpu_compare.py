"""Runs every case of .gpucheck/cases with `megc-run --device cuda` and
compares it with the CPU runtime's outputs recorded by bench/gpu_prepare.py:
relative L2 error per output (and per training-state tensor after
train_step), the losses step by step, and the median step time on the GPU
against the CPU's from the same artifact. Prints one table; writes logs to
--out. Exit status 1 if any case fails.

Usage (on the GPU machine, from bench/gpu_check.sh):
  python3 bench/gpu_compare.py --megc-run BUILD/megc-run --out DIR
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import e2e_util  # noqa: E402

# Relative L2 error allowed between the GPU and the CPU runtime. Both
# compute in f32 (bf16 storage rounds after each op); GPU transcendental
# functions and GEMM summation order differ from the CPU's.
TOLERANCE = {"f32": 1e-4, "bf16": 2e-2}


def relative_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    if not np.all(np.isfinite(got)):
        return float("nan")
    scale = max(np.linalg.norm(want), 1e-30)
    return float(np.linalg.norm(got - want) / scale)


def step_times(log):
    return [float(t) for t in re.findall(r" ([0-9.]+) ms", log)]


def losses(log):
    return [float(v) for v in re.findall(r" loss ([-0-9.eE+na]+)", log)]


def check_case(name, case, megc_run, out):
    spec = json.load(open(os.path.join(case, "case.json")))
    tolerance = TOLERANCE[spec["dtype"]]
    args = [megc_run, "model.megc", *spec["args"], "--device", "cuda",
            "--output-dir", "gpu"]
    if spec["entry"] == "train_step":
        args += ["--save-state", "gpu_state.safetensors"]
    result = subprocess.run(args, cwd=case, capture_output=True, text=True,
                            timeout=300)
    with open(os.path.join(out, f"{name}.log"), "w") as f:
        f.write(" ".join(args) + "\n" + result.stdout + result.stderr)
    row = {"case": name, "entry": spec["entry"], "ok": False,
           "error": "", "worst": "", "gpu_ms": "", "cpu_ms": ""}
    if result.returncode != 0:
        row["error"] = (result.stderr.strip().splitlines() or ["?"])[-1]
        return row
    errors = {}
    for file in sorted(os.listdir(os.path.join(case, "ref"))):
        errors[file] = relative_error(
            e2e_util.read_output(os.path.join(case, "gpu", file)),
            e2e_util.read_output(os.path.join(case, "ref", file)))
    if spec["entry"] == "train_step":
        want = e2e_util.read_safetensors(
            os.path.join(case, "ref_state.safetensors"))
        got = e2e_util.read_safetensors(
            os.path.join(case, "gpu_state.safetensors"))
        for tensor in want:
            errors["state:" + tensor] = relative_error(got.get(tensor),
                                                       want[tensor])
        ref_log = open(os.path.join(case, "ref_log.txt")).read()
        errors["losses"] = relative_error(losses(result.stdout),
                                          losses(ref_log))
    worst = max(errors, key=lambda k: (np.nan_to_num(errors[k], nan=np.inf)))
    row["worst"] = f"{worst} {errors[worst]:.2e}"
    row["ok"] = all(e <= tolerance for e in errors.values())
    gpu = step_times(result.stdout)
    cpu = step_times(open(os.path.join(case, "ref_log.txt")).read())
    # The first step loads modules and plans; only later steps are steady,
    # so one-step cases report no time.
    if len(gpu) > 1 and len(cpu) > 1:
        row["gpu_ms"] = f"{statistics.median(gpu[1:]):.3f}"
        row["cpu_ms"] = f"{statistics.median(cpu[1:]):.3f}"
    with open(os.path.join(out, f"{name}.errors.json"), "w") as f:
        json.dump(errors, f, indent=1)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megc-run", required=True)
    parser.add_argument("--cases", default=os.path.join(ROOT, ".gpucheck",
                                                        "cases"))
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    rows = []
    for name in sorted(os.listdir(options.cases)):
        try:
            rows.append(check_case(name, os.path.join(options.cases, name),
                                   os.path.abspath(options.megc_run),
                                   options.out))
        except Exception as error:  # keep going: one table for all cases
            rows.append({"case": name, "entry": "", "ok": False,
                         "error": f"{type(error).__name__}: {error}",
                         "worst": "", "gpu_ms": "", "cpu_ms": ""})
        print(f"{rows[-1]['case']}: {'PASS' if rows[-1]['ok'] else 'FAIL'} "
              f"{rows[-1]['worst']} {rows[-1]['error']}", flush=True)
    print()
    # cpu ms is the preparing machine's (bench/gpu_prepare.py), not this one's.
    print(f"{'case':22} {'entry':11} {'result':6} {'gpu ms':>9} "
          f"{'prep cpu':>9}  worst relative error / error")
    for row in rows:
        print(f"{row['case']:22} {row['entry']:11} "
              f"{'PASS' if row['ok'] else 'FAIL':6} {row['gpu_ms']:>9} "
              f"{row['cpu_ms']:>9}  {row['worst'] or row['error'][:120]}")
    json.dump(rows, open(os.path.join(options.out, "results.json"), "w"),
              indent=1)
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
