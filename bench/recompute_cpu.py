"""Benchmark: activation recomputation on the CPU, megc against PyTorch with
torch.utils.checkpoint on the same layers, in one run on one machine.

The llama of bench/cpu_train_bench.py (4 layers x 512, 8 heads / 4 KV
heads, ffn 1408, vocab 8192, seq 256, batch 2, f32) trains for --steps
steps after --warmup, in four modes:

- none: everything kept;
- selective: megc --recompute=selective (each layer's normalizations,
  RoPE, attention and activations recomputed, matrix products kept);
  PyTorch: every decoder layer under torch.utils.checkpoint with a
  selective-checkpoint policy that saves the matrix products (aten.mm,
  aten.addmm, aten.bmm) and recomputes the rest;
- full: megc --recompute=full; PyTorch: transformers' gradient
  checkpointing (every decoder layer recomputed from its input);
- budget: megc --memory-budget set to the parameters and state plus 60% of
  the none plan's arena; PyTorch: full (it has no budget).

Reported per mode: the median step time, the process's peak resident
memory (ru_maxrss of each process, run alone), megc's planned peak and the
peak of its buffers while running (megc-run's host memory line), and the
ratios PyTorch/megc. Resident memory includes each process's libraries
(PyTorch's are about 1 GB), so the RSS ratio overstates the difference in
what the training itself takes; the megc columns show that part. Without a PyTorch environment (bench/torch_venv.py)
the PyTorch columns are skipped with a message.

Usage: python3 bench/recompute_cpu.py [--build build] [--steps 5]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_venv import torch_python  # noqa: E402

CONFIG = dict(layers=4, hidden=512, heads=8, kv_heads=4, ffn=1408,
              vocab=8192, seq=256, batch=2)

# Runs `command` and prints its peak resident memory (MB) as the last line.
PEAK = r"""
import resource, subprocess, sys
result = subprocess.run(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6)
sys.exit(result.returncode)
"""

TORCH_STEP = r"""
import functools, json, statistics, sys, time
import numpy as np, torch
from transformers import LlamaForCausalLM
sys.path.insert(0, sys.argv[6])
from torch_llama import llama_config, token_loss
cfg, ids, labels, steps, warmup, mode = (json.loads(sys.argv[1]), np.load(sys.argv[2]),
    np.load(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[7])
torch.manual_seed(0)
model = LlamaForCausalLM(llama_config(cfg)).float()
if mode == "full":
    model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False})
elif mode == "selective":
    from torch.utils.checkpoint import (CheckpointPolicy,
                                        create_selective_checkpoint_contexts)
    products = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                torch.ops.aten.bmm.default}
    def policy(ctx, op, *args, **kwargs):
        return (CheckpointPolicy.MUST_SAVE if op in products
                else CheckpointPolicy.PREFER_RECOMPUTE)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={
        "use_reentrant": False,
        "context_fn": functools.partial(create_selective_checkpoint_contexts,
                                        policy)})
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.tensor(ids, dtype=torch.int64)
labels = torch.tensor(labels, dtype=torch.int64)
samples = []
for step in range(warmup + steps):
    start = time.perf_counter()
    optimizer.zero_grad()
    loss = token_loss(model(input_ids=ids, use_cache=False).logits, labels)
    loss.backward()
    optimizer.step()
    if step >= warmup:
        samples.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"ms": statistics.median(samples)}))
"""


def run_peak(command, timeout):
    """Runs `command`; returns (stdout without the last line, peak MB)."""
    result = subprocess.run([sys.executable, "-c", PEAK, *command],
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        sys.exit(f"{command[0]} failed:\n{result.stdout[-1500:]}"
                 f"{result.stderr[-1500:]}")
    lines = result.stdout.strip().splitlines()
    return "\n".join(lines[:-1]), float(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.environ.get(
        "MEGC_BUILD_DIR", os.path.join(ROOT, "build")))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    options = parser.parse_args()
    megc = os.path.join(options.build, "bin", "megc")
    megc_run = os.path.join(options.build, "bin", "megc-run")
    work = tempfile.mkdtemp(prefix="megc-recompute-")

    rng = np.random.default_rng(3)
    shape = (CONFIG["batch"], CONFIG["seq"])
    np.save(f"{work}/input_ids.npy",
            rng.integers(0, CONFIG["vocab"], shape).astype(np.int32))
    np.save(f"{work}/labels.npy",
            rng.integers(0, CONFIG["vocab"], shape).astype(np.int32))
    flags = [f"--{key.replace('_', '-')}={value}"
             for key, value in CONFIG.items()]
    subprocess.run([megc, "gen", "llama", *flags, "--train",
                    "-o", f"{work}/model.mlir"], check=True)

    def compile_and_run(mode, extra):
        artifact = f"{work}/{mode}.megc"
        subprocess.run([megc, f"{work}/model.mlir", *extra, "-o", artifact],
                       check=True)
        out, rss = run_peak(
            [megc_run, artifact, "--entry", "train_step", "--params",
             "init:1", "--warmup", str(options.warmup), "--steps",
             str(options.steps), "--input",
             f"input_ids={work}/input_ids.npy", "--input",
             f"labels={work}/labels.npy"], timeout=900)
        ms = float(re.search(r"median step ms: ([0-9.]+)", out).group(1))
        memory = re.search(r"host memory: peak ([0-9.]+) MB while running; "
                           r"plan ([0-9.]+) MB \(arena ([0-9.]+) MB \+ "
                           r"parameters and state ([0-9.]+) MB\)", out)
        peak, plan, arena, state = map(float, memory.groups())
        return dict(ms=ms, rss=rss, peak=peak, plan=plan, arena=arena,
                    state=state)

    results = {"none": compile_and_run("none", [])}
    for mode in ("selective", "full"):
        results[mode] = compile_and_run(mode, [f"--recompute={mode}"])
    none = results["none"]
    budget = int((none["state"] + 0.6 * none["arena"]) * 1e6)
    results["budget"] = compile_and_run("budget", [f"--memory-budget={budget}"])

    python = torch_python()
    torch_results = {}
    if python is None:
        print("recompute_cpu: no PyTorch environment; PyTorch columns skipped",
              file=sys.stderr)
    else:
        for mode, torch_mode in (("none", "none"), ("selective", "selective"),
                                 ("full", "full"), ("budget", "full")):
            if torch_mode in {r["mode"] for r in torch_results.values()
                              if "mode" in r}:
                torch_results[mode] = next(
                    r for r in torch_results.values()
                    if r.get("mode") == torch_mode)
                continue
            out, rss = run_peak(
                [python, "-c", TORCH_STEP, json.dumps(CONFIG),
                 f"{work}/input_ids.npy", f"{work}/labels.npy",
                 str(options.steps), str(options.warmup),
                 os.path.dirname(os.path.abspath(__file__)), torch_mode],
                timeout=900)
            torch_results[mode] = dict(json.loads(out.splitlines()[-1]),
                                       rss=rss, mode=torch_mode)

    print(f"CPU train step with recomputation, llama {CONFIG['layers']}x"
          f"{CONFIG['hidden']} seq {CONFIG['seq']} batch {CONFIG['batch']} "
          f"f32, {os.cpu_count()} cores, median of {options.steps} steps")
    print(f"  budget: {budget / 1e6:.1f} MB (parameters and state + 60% of "
          f"the none plan's arena)")
    header = (f"  {'mode':10} {'megc ms':>9} {'plan MB':>9} {'run MB':>9} "
              f"{'RSS MB':>9}")
    if torch_results:
        header += (f" | {'torch':>9} {'ms':>9} {'RSS MB':>9} | "
                   f"{'time x':>7} {'RSS x':>7}")
    print(header)
    for mode, r in results.items():
        line = (f"  {mode:10} {r['ms']:9.1f} {r['plan']:9.1f} "
                f"{r['peak']:9.1f} {r['rss']:9.1f}")
        if mode in torch_results:
            t = torch_results[mode]
            line += (f" | {t['mode']:>9} {t['ms']:9.1f} {t['rss']:9.1f} | "
                     f"{t['ms'] / r['ms']:7.2f} {t['rss'] / r['rss']:7.2f}")
        print(line)
    print("  time x, RSS x: PyTorch / megc (above 1: megc faster, smaller)")


if __name__ == "__main__":
    main()
