"""Benchmark: one llama training step on the CPU, megc against PyTorch CPU
eager, in one run on one machine.

megc: `megc-run --device cpu --entry train_step` on the artifact that
bench/gpu_prepare.py compiled (.gpucheck/bench/llama_train_cpu), the step
being forward, backward and AdamW. PyTorch: transformers' LlamaForCausalLM
with the same configuration, the same loss (mean token cross-entropy, labels
not shifted) and torch.optim.AdamW, f32. Each runs in its own process;
reports the median step time after warm-up steps and the process's peak
resident memory (ru_maxrss), and the ratios. Both use their default thread
count, every core: PyTorch its intra-op threads, megc its session's thread
pool, which runs the kernels' workgroups and the GEMMs' blocks (OpenBLAS
single-threaded inside each block); the counts are printed next to the
times.

Usage: python3 bench/cpu_train_bench.py --megc-run PATH [--steps 5]
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, ".gpucheck", "bench", "llama_train_cpu")

TORCH_STEP = r"""
import json, resource, statistics, sys, time
import numpy as np, torch
from transformers import LlamaForCausalLM
sys.path.insert(0, sys.argv[6])
from torch_llama import llama_config, token_loss
cfg, ids, labels, steps, warmup = json.loads(sys.argv[1]), np.load(sys.argv[2]), np.load(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
model = LlamaForCausalLM(llama_config(cfg)).float()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids, labels = torch.tensor(ids, dtype=torch.int64), torch.tensor(labels, dtype=torch.int64)
samples = []
for step in range(warmup + steps):
    start = time.perf_counter()
    optimizer.zero_grad()
    loss = token_loss(model(input_ids=ids).logits, labels)
    loss.backward()
    optimizer.step()
    if step >= warmup:
        samples.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"ms": statistics.median(samples), "threads": torch.get_num_threads(),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child_peak_mb():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megc-run", required=True)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    options = parser.parse_args()
    cfg = json.load(open(os.path.join(FOLDER, "spec.json")))["config"]
    rng = np.random.default_rng(3)
    ids = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
    labels = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
    np.save(f"{FOLDER}/input_ids.npy", ids.astype(np.int32))
    np.save(f"{FOLDER}/labels.npy", labels.astype(np.int32))

    megc_run = subprocess.run(
        [options.megc_run, f"{FOLDER}/model.megc", "--entry", "train_step",
         "--device", "cpu", "--params", "init:1",
         "--warmup", str(options.warmup), "--steps", str(options.steps),
         "--input", f"input_ids={FOLDER}/input_ids.npy",
         "--input", f"labels={FOLDER}/labels.npy"],
        capture_output=True, text=True, timeout=900)
    if megc_run.returncode != 0:
        sys.exit("megc-run failed:\n" + megc_run.stderr[-2000:])
    megc_peak = child_peak_mb()
    steps = [float(t) for t in re.findall(r" ([0-9.]+) ms", megc_run.stdout)]
    megc_ms = statistics.median(steps[:options.steps])
    # PyTorch second: RUSAGE_CHILDREN keeps the largest peak of any child,
    # so megc's is read before; PyTorch reports its own.
    torch_run = subprocess.run(
        [sys.executable, "-c", TORCH_STEP, json.dumps(cfg),
         f"{FOLDER}/input_ids.npy", f"{FOLDER}/labels.npy",
         str(options.steps), str(options.warmup),
         os.path.dirname(os.path.abspath(__file__))],
        capture_output=True, text=True, timeout=600)
    if torch_run.returncode != 0:
        sys.exit("PyTorch step failed:\n" + torch_run.stderr[-2000:])
    torch_result = json.loads(torch_run.stdout.strip().splitlines()[-1])

    shape = (f"llama {cfg['layers']}x{cfg['hidden']} seq {cfg['seq']} batch "
             f"{cfg['batch']} f32, {os.cpu_count()} cores")
    print(f"CPU train step, {shape}")
    print(f"  megc:    {megc_ms:9.1f} ms, peak {megc_peak:7.0f} MB "
          f"({os.cpu_count()} threads)")
    print(f"  PyTorch: {torch_result['ms']:9.1f} ms, peak "
          f"{torch_result['peak_mb']:7.0f} MB ({torch_result['threads']} "
          f"threads)")
    print(f"  PyTorch/megc time {torch_result['ms'] / megc_ms:.2f}x, "
          f"peak memory {torch_result['peak_mb'] / megc_peak:.2f}x")


if __name__ == "__main__":
    main()
