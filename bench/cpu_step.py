"""Benchmark: a llama training step and forward on the CPU, megc against
PyTorch CPU eager and torch.compile, in one run, with the same thread count.

The model: llama 4 layers x 512, 8 heads / 4 KV heads, ffn 1408, vocab
8192, seq 256, batch 2, f32, AdamW (PyTorch: transformers' LlamaForCausalLM
with SDPA attention, the same loss (mean token cross-entropy, labels not
shifted) and torch.optim.AdamW). megc compiles it with --cpu=native and runs
it with `megc-run --threads N`; PyTorch runs with torch.set_num_threads(N).
Every measurement is the median step time after warm-up steps, taken in
`--rounds` separate processes per system, alternating, of which the median
is reported (the machine's other load moves single runs).

Then, from megc's Chrome traces of the training step (--trace): the share of
the step of each command class (GEMMs, attention, attention backward, the
generated kernels by their strategy, copies), and for the commands that
touch at least 1 MB, the time on 1 thread over the time on N threads per
class.

PyTorch comes from PyPI in a virtual environment that bench/torch_venv.py
makes on demand (build/bench-venv, about 5 GB); where that fails the PyTorch
columns are skipped with a message.

Usage: /usr/bin/python3 bench/cpu_step.py [--build build] [--threads N]
       [--steps 8] [--warmup 3] [--rounds 3] [--no-compile]
"""
import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

import torch_venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = {"layers": 4, "hidden": 512, "heads": 8, "kv_heads": 4, "ffn": 1408,
         "vocab": 8192, "seq": 256, "batch": 2}

TORCH_STEP = r"""
import json, statistics, sys, time
import numpy as np, torch
from transformers import LlamaForCausalLM
sys.path.insert(0, sys.argv[8])
from torch_llama import llama_config, token_loss
cfg = json.loads(sys.argv[1])
ids, labels = np.load(sys.argv[2]), np.load(sys.argv[3])
steps, warmup, threads, mode = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
torch.set_num_threads(threads)
torch.manual_seed(0)
model = LlamaForCausalLM(llama_config(cfg)).float()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.tensor(ids, dtype=torch.int64)
labels = torch.tensor(labels, dtype=torch.int64)

def train():
    optimizer.zero_grad()
    loss = token_loss(model(input_ids=ids).logits, labels)
    loss.backward()
    optimizer.step()
    return loss

def forward():
    with torch.no_grad():
        return model(input_ids=ids).logits

result = {}
for name, fn in (("train", train), ("forward", forward)):
    if mode == "compile":
        fn = torch.compile(fn)
    samples = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        fn()
        if step >= warmup:
            samples.append((time.perf_counter() - start) * 1e3)
    result[name] = statistics.median(samples)
result["threads"] = torch.get_num_threads()
result["version"] = torch.__version__
print(json.dumps(result))
"""


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{result.stdout[-2000:]}"
                 f"{result.stderr[-2000:]}")
    return result.stdout


def megc_median(megc_run, folder, entry, threads, steps, warmup,
                trace=None):
    args = [megc_run, f"{folder}/model.megc", "--entry", entry, "--params",
            "init:1", "--threads", str(threads), "--steps", str(steps),
            "--warmup", str(warmup), "--input",
            f"input_ids={folder}/input_ids.npy"]
    if entry != "forward":
        args += ["--input", f"labels={folder}/labels.npy"]
    if trace:
        args += ["--trace", trace]
    out = run(args, timeout=1800)
    return float(re.search(r"median step ms: ([0-9.]+)", out).group(1))


def torch_medians(python, folder, threads, steps, warmup, mode):
    out = run([python, "-c", TORCH_STEP, json.dumps(SHAPE),
               f"{folder}/input_ids.npy", f"{folder}/labels.npy", str(steps),
               str(warmup), str(threads), mode,
               os.path.dirname(os.path.abspath(__file__))], timeout=3600)
    return json.loads(out.strip().splitlines()[-1])


def command_bytes(program_text, entry):
    """Bytes each command of `entry` touches, from megc --emit=megrt."""
    sizes, commands, current = {}, [], None
    element = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8}
    for line in program_text.splitlines():
        if line.startswith("entry "):
            current = line.split()[1]
            sizes = {}
            continue
        if current != entry:
            continue
        buffer = re.match(r"  %b(\d+) = .* : tensor<(.*)x(\w+)>", line)
        scalar = re.match(r"  %b(\d+) = .* : tensor<(\w+)>", line)
        if buffer:
            dims = [int(d) for d in buffer.group(2).split("x")]
            sizes[int(buffer.group(1))] = (int(np.prod(dims)) *
                                           element[buffer.group(3)])
        elif scalar:
            sizes[int(scalar.group(1))] = element[scalar.group(2)]
        elif line.startswith("  ") and not line.startswith("  %"):
            ids = {int(b) for b in re.findall(r"%b(\d+)", line)}
            commands.append(sum(sizes.get(b, 0) for b in ids))
    return commands


def kernel_classes(inspect_text):
    """Each kernel's CPU strategy kind, from megc inspect."""
    classes, name = {}, None
    for line in inspect_text.splitlines():
        kernel = re.match(r"  (megk\S+) \(", line)
        if kernel:
            name = kernel.group(1)
        cpu = re.match(r"    cpu: (\w+)", line)
        if cpu and name:
            classes[name] = cpu.group(1)
    return classes


def trace_classes(path, classes, sizes):
    """Per class: ms per entry run, and ms of commands of >= 1 MB."""
    events = json.load(open(path))["traceEvents"]
    runs = sum(1 for e in events if e["cat"] == "entry")
    total = sum(e["dur"] for e in events if e["cat"] == "entry") / runs / 1e3
    per = collections.defaultdict(float)
    big = collections.defaultdict(float)
    for e in events:
        if e["cat"] in ("entry", "graph"):
            continue
        cls = {"gemm": "GEMM", "copy": "copy", "collective": "collective"
               }.get(e["cat"])
        if e["cat"] == "library":
            cls = {"embedding_grad": "embedding gradient"}.get(e["name"],
                                                               e["name"])
        if cls is None and e["cat"] == "attention":
            cls = "attention backward" if e["name"].endswith("grad") else \
                "attention"
        if cls is None:
            cls = "kernel: " + classes.get(e["name"], "?")
        per[cls] += e["dur"] / runs / 1e3
        if sizes[e["args"]["command"]] >= 1 << 20:
            big[cls] += e["dur"] / runs / 1e3
    return total, per, big


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-compile", action="store_true",
                        help="skip torch.compile (it compiles for a minute)")
    options = parser.parse_args()
    megc = os.path.join(options.build, "bin", "megc")
    megc_run = os.path.join(options.build, "bin", "megc-run")
    threads = options.threads

    folder = tempfile.mkdtemp(prefix="megc-cpu-step-")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SHAPE.items()]
    run([megc, "gen", "llama", *flags, "--train", "-o", f"{folder}/model.mlir"])
    run([megc, f"{folder}/model.mlir", "--cpu=native", "-o",
         f"{folder}/model.megc"])
    rng = np.random.default_rng(3)
    shape = (SHAPE["batch"], SHAPE["seq"])
    np.save(f"{folder}/input_ids.npy",
            rng.integers(0, SHAPE["vocab"], shape).astype(np.int32))
    np.save(f"{folder}/labels.npy",
            rng.integers(0, SHAPE["vocab"], shape).astype(np.int32))

    python = torch_venv.torch_python()
    if python is None:
        print("PyTorch unavailable: the PyTorch columns are skipped")
    samples = collections.defaultdict(list)
    for round_ in range(options.rounds):
        for entry, key in (("train_step", "train"), ("forward", "forward")):
            samples[("megc", key)].append(megc_median(
                megc_run, folder, entry, threads, options.steps,
                options.warmup))
        if python:
            eager = torch_medians(python, folder, threads, options.steps,
                                  options.warmup, "eager")
            for key in ("train", "forward"):
                samples[("eager", key)].append(eager[key])
            if not options.no_compile and round_ < 2:
                compiled = torch_medians(python, folder, threads,
                                         options.steps, options.warmup,
                                         "compile")
                for key in ("train", "forward"):
                    samples[("compile", key)].append(compiled[key])
    median = {k: statistics.median(v) for k, v in samples.items()}

    print(f"llama {SHAPE['layers']}x{SHAPE['hidden']}, {SHAPE['heads']} heads / "
          f"{SHAPE['kv_heads']} KV heads, ffn {SHAPE['ffn']}, vocab "
          f"{SHAPE['vocab']}, seq {SHAPE['seq']}, batch {SHAPE['batch']}, f32; "
          f"{threads} threads each ({os.cpu_count()} cores); medians of "
          f"{options.rounds} runs of {options.steps} steps")
    print(f"{'':12s} {'megc ms':>9s} {'eager ms':>9s} {'compile ms':>11s} "
          f"{'eager/megc':>11s} {'compile/megc':>13s}")
    for key, label in (("forward", "forward"), ("train", "train step")):
        m = median[("megc", key)]
        e = median.get(("eager", key))
        c = median.get(("compile", key))
        cell = lambda v: f"{v:9.1f}" if v else f"{'-':>9s}"
        ratio = lambda v: f"{v / m:.2f}x" if v else "-"
        print(f"{label:12s} {m:9.1f} {cell(e)} {cell(c):>11s} "
              f"{ratio(e):>11s} {ratio(c):>13s}")

    # Where megc's training step goes, on N threads and on 1.
    program = run([megc, f"{folder}/model.mlir", "--cpu=native",
                   "--emit=megrt"])
    sizes = command_bytes(program, "train_step")
    classes = kernel_classes(run([megc, "inspect", f"{folder}/model.megc"]))
    profiles = {}
    for count in sorted({threads, 1}, reverse=True):
        trace = f"{folder}/trace{count}.json"
        megc_median(megc_run, folder, "train_step", count, options.steps,
                    options.warmup, trace=trace)
        profiles[count] = trace_classes(trace, classes, sizes)
    total, per, big = profiles[threads]
    print(f"\nmegc train step by command class ({threads} threads, trace: "
          f"{total:.1f} ms per step):")
    print(f"{'class':28s} {'ms':>8s} {'share':>7s}   {'>= 1 MB: 1 thread':>18s} "
          f"{f'{threads} threads':>11s} {'speedup':>8s}")
    one = profiles.get(1)
    for cls, ms in sorted(per.items(), key=lambda item: -item[1]):
        row = f"{cls:28s} {ms:8.2f} {100 * ms / total:6.1f}%"
        if one and threads > 1 and big.get(cls):
            single = one[2].get(cls, 0.0)
            row += (f"   {single:18.2f} {big[cls]:11.2f} "
                    f"{single / big[cls]:7.2f}x")
        print(row)
    print(f"GEMM share of the step: {100 * per.get('GEMM', 0) / total:.1f}%")


if __name__ == "__main__":
    main()
