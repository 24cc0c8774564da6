"""GPU benchmarks of megc artifacts against PyTorch, run on the GPU machine
by bench/gpu_check.sh on what bench/gpu_prepare.py compiled (.gpucheck/bench).
Device times come from megc-run's trace (--trace: CUDA event timings per
command, graph and entry) and from torch.cuda.Event on the PyTorch side;
every ratio is against a baseline measured in the same run. Three parts,
each run by gpu_check.sh in its own process, in this order:

- kernels: per kernel of megc's llama forward+backward (the grad entry,
  per-kernel launches), the bytes its launches move (kernel_traffic.py,
  from the program's launches and buffer sizes) over its device time
  against the device-to-device copy bandwidth, the fused attention's
  TFLOP/s forward and backward, and where the step's time goes;
- step: the llama forward+backward with CUDA graph replay, with per-kernel
  launches (--no-cuda-graphs, same artifact) and with cuDNN's attention
  turned off (MEGRT_CUDNN=0), against PyTorch eager and torch.compile of
  transformers' LlamaForCausalLM with the same shapes and dtype;
- library: fused RoPE (the meg.rope kernel's bandwidth against the copy,
  PyTorch eager running the unfused formula and torch.compile of it, f32
  and bf16) and a GEMM (cuBLASLt through a megc GEMM command against
  torch.matmul, bf16).

Prints the part's table; exit status 1 if any of its rows failed.

Usage: python3 bench/gpu_bench.py --megc-run BUILD/megc-run --out DIR
       --part kernels|step|library
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, ".gpucheck", "bench")


def bf16_bits(x):
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def save_input(path, array, dtype):
    np.save(path, bf16_bits(array) if dtype == "bf16"
            else np.asarray(array, np.float32 if dtype == "f32" else None))


def run_megc(megc_run, artifact, entry, inputs, out, label, extra=(),
             steps=10, warmup=3, env=None):
    """Median device time (ms) per event category/name from the trace;
    `env`: variables to set for megc-run."""
    trace = os.path.join(out, f"{label}.trace.json")
    args = [megc_run, artifact, "--entry", entry, "--device", "cuda",
            "--warmup", str(warmup), "--steps", str(steps), "--trace", trace,
            *extra]
    for name, path in inputs.items():
        args += ["--input", f"{name}={path}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300,
                            env={**os.environ, **(env or {})})
    with open(os.path.join(out, f"{label}.log"), "w") as f:
        f.write(" ".join(args) + "\n" + result.stdout + result.stderr)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip().splitlines()[-1])
    events = json.load(open(trace))["traceEvents"]
    times = {}
    for event in events:
        if event.get("ph") == "X":
            key = (event.get("cat"), event.get("name"))
            times.setdefault(key, []).append(event["dur"] / 1e3)
    # Warm-up runs are traced too: keep the last `steps` of each.
    return {key: statistics.median(values[-steps:])
            for key, values in times.items()}


def torch_ms(fn, steps=10, warmup=3):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(steps):
        start, stop = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples)


def copy_bandwidth():
    import torch
    x = torch.empty(2**30 // 4, device="cuda")
    y = torch.empty_like(x)
    ms = torch_ms(lambda: y.copy_(x), steps=20)
    return 2 * x.numel() * 4 / (ms / 1e3)


def rope_bench(megc_run, out, rows, copy_bw):
    import torch
    for spec_path in sorted(p for p in os.listdir(BENCH)
                            if p.startswith("rope_")):
        spec = json.load(open(os.path.join(BENCH, spec_path, "spec.json")))
        b, s, h, d, r = spec["shape"]
        dtype = spec["dtype"]
        rng = np.random.default_rng(0)
        x = rng.standard_normal((b, s, h, d)).astype(np.float32)
        freqs = np.arange(s)[:, None] / 10000.0 ** (np.arange(0, r, 2) / r)
        emb = np.concatenate([freqs, freqs], axis=1)
        cos, sin = np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)
        folder = os.path.join(BENCH, spec_path)
        inputs = {"x": f"{folder}/x.npy", "cos": f"{folder}/cos.npy",
                  "sin": f"{folder}/sin.npy"}
        save_input(inputs["x"], x, dtype)
        np.save(inputs["cos"], cos)
        np.save(inputs["sin"], sin)
        times = run_megc(megc_run, f"{folder}/model.megc", "rope", inputs,
                         out, spec_path)
        kernel = [ms for (cat, name), ms in times.items()
                  if cat == "kernel" and "rope" in name]
        element = 2 if dtype == "bf16" else 4
        moved = 2 * x.size * element + 2 * cos.size * 4
        megc_ms = kernel[0]
        tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        tx = torch.tensor(x, device="cuda").to(tdtype)
        tc = torch.tensor(cos, device="cuda").to(tdtype)[None, :, None, :]
        ts = torch.tensor(sin, device="cuda").to(tdtype)[None, :, None, :]

        def unfused(x=tx, c=tc, s_=ts):
            x1, x2 = x[..., :r // 2], x[..., r // 2:r]
            rotated = torch.cat([-x2, x1], dim=-1)
            return x[..., :r] * c + rotated * s_

        eager = torch_ms(unfused)
        compiled_fn = torch.compile(unfused)
        compiled = torch_ms(compiled_fn)
        rows.append((f"RoPE {dtype} {b}x{s}x{h}x{d}",
                     f"megc {megc_ms:.3f} ms = {moved / megc_ms / 1e6:.0f} GB/s "
                     f"({moved / megc_ms / 1e6 / (copy_bw / 1e9) * 100:.0f}% "
                     f"of copy)",
                     f"eager/megc {eager / megc_ms:.2f}x, "
                     f"compile/megc {compiled / megc_ms:.2f}x"))


def gemm_bench(megc_run, out, rows, copy_bw):
    import torch
    folder = os.path.join(BENCH, "gemm_bf16")
    spec = json.load(open(os.path.join(folder, "spec.json")))
    m, n, k = spec["mnk"]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    inputs = {"a": f"{folder}/a.npy", "b": f"{folder}/b.npy"}
    save_input(inputs["a"], a, "bf16")
    save_input(inputs["b"], b, "bf16")
    times = run_megc(megc_run, f"{folder}/model.megc", "matmul", inputs, out,
                     "gemm_bf16")
    gemm_ms = [ms for (cat, _), ms in times.items() if cat == "gemm"][0]
    ta = torch.tensor(a, device="cuda").bfloat16()
    tb = torch.tensor(b, device="cuda").bfloat16()
    torch_gemm = torch_ms(lambda: ta @ tb)
    flops = 2 * m * n * k
    rows.append((f"GEMM bf16 {m}x{n}x{k}",
                 f"megc cuBLASLt {flops / gemm_ms / 1e9:.0f} TFLOP/s",
                 f"torch.matmul {flops / torch_gemm / 1e9:.0f} TFLOP/s, "
                 f"torch/megc time {torch_gemm / gemm_ms:.2f}x"))


def kernel_report(folder, out, runs_label, copy_bw, rows):
    """Per kernel of the grad entry: bytes moved per step over device time
    per step, against the copy bandwidth; attention TFLOP/s."""
    from kernel_traffic import per_command
    moved, flops = per_command(os.path.join(folder, "model.megrt"), "grad")
    events = json.load(open(os.path.join(out, f"{runs_label}.trace.json")))
    seconds, runs, kernels = {}, 0, {}
    for event in events["traceEvents"]:
        if event.get("cat") == "entry":
            runs += 1
        elif event.get("cat") in ("kernel", "attention", "library"):
            name = event["name"]
            seconds[name] = seconds.get(name, 0.0) + event["dur"] / 1e6
            # Which kernels ran an attention: cuDNN's or megrt's (and why).
            if "kernel" in event.get("args", {}):
                kernels[name] = event["args"]["kernel"]
    runs = max(runs, 1)
    print(f"{'kernel':44} {'MB/step':>9} {'us/step':>9} {'TB/s':>6} "
          f"{'of copy':>8}")
    memory_s = memory_fast_s = 0.0
    for name, total in sorted(seconds.items(), key=lambda kv: -kv[1]):
        per_step = total / runs
        if name in flops:
            print(f"{name:44} {'':>9} {per_step * 1e6:9.1f} "
                  f"{flops[name] / per_step / 1e12:6.1f} TFLOP/s")
            rows.append((f"llama {name}",
                         f"{flops[name] / per_step / 1e12:.1f} TFLOP/s",
                         kernels.get(name, "")[:80]))
            continue
        if name not in moved:
            continue
        bw = moved[name] / per_step
        memory_s += per_step
        if bw >= 0.8 * copy_bw:
            memory_fast_s += per_step
        print(f"{name:44} {moved[name] / 1e6:9.2f} {per_step * 1e6:9.1f} "
              f"{bw / 1e12:6.2f} {bw / copy_bw:8.0%}")
    if memory_s:
        rows.append(("llama kernels at >= 80% of copy",
                     f"{memory_fast_s / memory_s:.0%} of their device time",
                     f"{memory_s * 1e3:.2f} ms per step in megc's kernels"))


def llama_inputs():
    folder = os.path.join(BENCH, "llama_grad")
    spec = json.load(open(os.path.join(folder, "spec.json")))
    cfg = spec["config"]
    rng = np.random.default_rng(2)
    ids = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
    labels = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
    inputs = {"input_ids": f"{folder}/input_ids.npy",
              "labels": f"{folder}/labels.npy"}
    np.save(inputs["input_ids"], ids.astype(np.int32))
    np.save(inputs["labels"], labels.astype(np.int32))
    return folder, cfg, ids, labels, inputs


def llama_kernels(megc_run, out, rows, copy_bw):
    """Per kernel of the step, from a per-command trace."""
    folder, _, _, _, inputs = llama_inputs()
    run_megc(megc_run, f"{folder}/model.megc", "grad", inputs, out,
             "llama_launches", ["--no-cuda-graphs"])
    events = json.load(open(os.path.join(out, "llama_launches.trace.json")))
    per_kind = {}
    runs = 0
    for event in events["traceEvents"]:
        if event.get("cat") == "entry":
            runs += 1
        elif event.get("cat") in ("kernel", "gemm", "copy", "attention",
                                  "library"):
            name = event["name"]
            kind = (name.split("_", 1)[1] if event["cat"] == "kernel"
                    else name)
            per_kind[kind] = per_kind.get(kind, 0.0) + event["dur"] / 1e3
    top = sorted(per_kind.items(), key=lambda item: -item[1])[:10]
    print("llama fwd+bwd device time by kind (ms per step): " + ", ".join(
        f"{kind} {ms / max(runs, 1):.2f}" for kind, ms in top), flush=True)
    kernel_report(folder, out, "llama_launches", copy_bw, rows)


def llama_step(megc_run, out, rows, copy_bw):
    import torch
    folder, cfg, ids, labels, inputs = llama_inputs()
    results = {}
    # The step with CUDA graph replay, with per-command launches, and with
    # cuDNN's attention turned off.
    for label, extra, env in (
            ("graphs", [], None), ("launches", ["--no-cuda-graphs"], None),
            ("own_attention", [], {"MEGRT_CUDNN": "0"})):
        times = run_megc(megc_run, f"{folder}/model.megc", "grad", inputs,
                         out, f"llama_{label}", extra, env=env)
        results[label] = [ms for (cat, _), ms in times.items()
                          if cat == "entry"][0]
    from transformers import LlamaForCausalLM
    from torch_llama import llama_config, token_loss
    config = llama_config(cfg)
    dtype = torch.bfloat16 if cfg["dtype"] == "bf16" else torch.float32
    model = LlamaForCausalLM(config).to("cuda", dtype)
    tids = torch.tensor(ids, device="cuda")
    tlabels = torch.tensor(labels, device="cuda")

    def step(m=model):
        loss = token_loss(m(input_ids=tids).logits, tlabels)
        loss.backward()

    eager = torch_ms(step)
    compiled = torch_ms(lambda: step(torch.compile(model)))
    shape = (f"{cfg['layers']}x{cfg['hidden']} seq {cfg['seq']} "
             f"batch {cfg['batch']} {cfg['dtype']}")
    rows.append((f"llama fwd+bwd {shape}",
                 f"megc graphs {results['graphs']:.2f} ms, launches "
                 f"{results['launches']:.2f} ms "
                 f"(replay {results['launches'] / results['graphs']:.2f}x),"
                 f" megrt attention {results['own_attention']:.2f} ms",
                 f"torch eager {eager:.2f} ms ({eager / results['graphs']:.2f}x"
                 f" megc), torch.compile {compiled:.2f} ms "
                 f"({compiled / results['graphs']:.2f}x megc)"))


PARTS = {"kernels": (llama_kernels,), "step": (llama_step,),
         "library": (rope_bench, gemm_bench)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megc-run", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--part", required=True, choices=sorted(PARTS))
    options = parser.parse_args()
    megc_run = os.path.abspath(options.megc_run)
    copy_bw = copy_bandwidth()
    rows = [("device copy", f"{copy_bw / 1e12:.2f} TB/s (read + write)", "")]
    failed = False
    for bench in PARTS[options.part]:
        try:
            bench(megc_run, options.out, rows, copy_bw)
        except Exception as error:  # one table for the part's benchmarks
            failed = True
            rows.append((bench.__name__, "FAILED",
                         f"{type(error).__name__}: {error}"[:200]))
        print(rows[-1], flush=True)
    print()
    for row in rows:
        print(f"{row[0]:34} {row[1]:52} {row[2]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
