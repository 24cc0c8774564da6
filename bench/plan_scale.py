"""Benchmark: `megc plan --gpus N` on the layouts the planning issue names,
each search timed on this machine (one process; the issue allows 10
minutes a plan), with the best plan compiled and its per-rank peak within
the budget.

- Llama-3-8B on 8 H100s (1M tokens a step), Llama-3-70B on 256 (4M),
  Llama-3-405B on 8,192 and on 16,384 (16M), seq 8192, bf16, 80 GB;
- DeepSeek-V3 671B on 2,048 H800s (16M tokens, seq 4096), with the
  expert capacity factor its report bounds the load with (1.25).

For each: the wall time, the layouts evaluated, the best plan's layout,
simulated step, MFU and compiled peak, and the estimate's error on it; a
search that finds nothing prints the error (the smallest need), one that
runs past --timeout says so.

Usage: python3 bench/plan_scale.py --build build [--only NAME-PART]
       [--timeout SECONDS]
"""
import argparse
import json
import os
import subprocess
import sys
import time

LLAMA3 = {
    "8B": ["--layers", "32", "--hidden", "4096", "--ffn", "14336",
           "--heads", "32", "--kv-heads", "8", "--vocab", "128256"],
    "70B": ["--layers", "80", "--hidden", "8192", "--ffn", "28672",
            "--heads", "64", "--kv-heads", "8", "--vocab", "128256"],
    "405B": ["--layers", "126", "--hidden", "16384", "--ffn", "53248",
             "--heads", "128", "--kv-heads", "8", "--vocab", "128256"],
}
DEEPSEEK_V3 = ["--layers", "61", "--dense-layers", "3", "--hidden", "7168",
               "--ffn", "18432", "--moe-ffn", "2048", "--heads", "128",
               "--experts", "256", "--top-k", "8", "--expert-groups", "8",
               "--top-groups", "4", "--shared-experts", "1",
               "--vocab", "129280", "--q-lora-rank", "1536",
               "--kv-lora-rank", "512", "--qk-nope-dim", "128",
               "--qk-rope-dim", "64", "--v-head-dim", "128",
               "--moe-capacity-factor", "1.25"]
COMMON = ["--dtype", "bf16", "--train"]

# (name, preset, model flags, seq, global batch in sequences, devices,
#  cluster)
PLANS = [
    ("Llama-3-8B, 8 H100", "llama", LLAMA3["8B"], 8192, 128, 8, "h100-sxm"),
    ("Llama-3-70B, 256 H100", "llama", LLAMA3["70B"], 8192, 512, 256,
     "h100-sxm"),
    ("Llama-3-405B, 8192 H100", "llama", LLAMA3["405B"], 8192, 2048, 8192,
     "h100-sxm"),
    ("Llama-3-405B, 16384 H100", "llama", LLAMA3["405B"], 8192, 2048,
     16384, "h100-sxm"),
    ("DeepSeek-V3, 2048 H800", "deepseek", DEEPSEEK_V3, 4096, 4096, 2048,
     "h800"),
]


def plan(megc, preset, flags, seq, batch, devices, cluster, timeout):
    command = [megc, "plan", "--preset", preset, *flags, *COMMON,
               "--seq", str(seq), "--batch", str(batch), "--gpus",
               str(devices), "--cluster", cluster, "--json"]
    started = time.monotonic()
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started, "timed out"
    seconds = time.monotonic() - started
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines()
                  if "error:" in line]
        return None, seconds, errors[-1] if errors else result.stderr[-400:]
    return json.loads(result.stdout), seconds, ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--only")
    parser.add_argument("--timeout", type=int, default=1200)
    options = parser.parse_args()
    megc = os.path.join(options.build, "bin", "megc")
    if not os.path.exists(megc):
        sys.exit(f"{megc} not found: build first")
    print("| model, devices | layouts | wall s | best (compiled) | step s | "
          "MFU | peak GB | estimate step / peak | without CUDA graphs s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, preset, flags, seq, batch, devices, cluster in PLANS:
        if options.only and options.only not in name:
            continue
        result, seconds, error = plan(megc, preset, flags, seq, batch,
                                      devices, cluster, options.timeout)
        if result is None or not result["plans"]:
            print(f"| {name} | | {seconds:.0f} | none: {error} | | | | | |",
                  flush=True)
            continue
        best = result["plans"][0]
        # The best compiled again without CUDA graphs (a cluster whose
        # device replays them more cheaply than it launches commands).
        plain = result.get("best_without_cuda_graphs_step_s")
        without = "" if plain is None else f"{plain:.2f}"
        print(f"| {name} | {result['evaluated']} | {seconds:.0f} | "
              f"{best['layout']} | {best['step_s']:.2f} | "
              f"{best['mfu'] * 100:.1f}% | "
              f"{best['peak_bytes_per_rank'] / 1e9:.1f} | "
              f"{best['estimate_step_ratio']:.2f} / "
              f"{best['estimate_peak_ratio']:.2f} | {without} |", flush=True)


if __name__ == "__main__":
    main()
