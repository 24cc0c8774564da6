"""Benchmark: llama forward on the CPU, megc artifact vs NumPy eager.

Compiles a llama preset where matrix products dominate (hidden 512, 4
layers, seq 256), runs `forward` with megc-run, and times the same forward
written in NumPy (float32, OpenBLAS matmuls, test/e2e/llama_reference.py)
on the same weights in the same invocation. Reports the median step time of
each and the ratio. (PyTorch is not installable on this machine's package
mirrors without its GPU wheels; NumPy eager is the named baseline.)

Usage: /usr/bin/python3 bench/llama_forward_cpu.py [--build build] [--steps 10]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import e2e_util  # noqa: E402
import llama_reference  # noqa: E402

CFG = dict(layers=4, hidden=512, heads=8, kv_heads=8, ffn=1376, vocab=4096,
           seq=256, batch=1, eps=1e-5, theta=10000.0, percent=1.0,
           interleaved=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=10)
    options = parser.parse_args()
    bin_dir = os.path.join(options.build, "bin")
    c = CFG
    with tempfile.TemporaryDirectory() as tmp:
        model, artifact = f"{tmp}/llama.mlir", f"{tmp}/llama.megc"
        e2e_util.run([f"{bin_dir}/megc", "gen", "llama", "--layers",
                      str(c["layers"]), "--hidden", str(c["hidden"]), "--heads",
                      str(c["heads"]), "--kv-heads", str(c["kv_heads"]), "--ffn",
                      str(c["ffn"]), "--vocab", str(c["vocab"]), "--seq",
                      str(c["seq"]), "--batch", str(c["batch"]), "-o", model])
        start = time.perf_counter()
        e2e_util.run([f"{bin_dir}/megc", model, "-o", artifact])
        compile_s = time.perf_counter() - start

        rng = np.random.default_rng(0)
        h, f, v = c["hidden"], c["ffn"], c["vocab"]
        shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,),
                  "lm_head.weight": (v, h)}
        for i in range(c["layers"]):
            p = f"model.layers.{i}."
            for name, shape in [("input_layernorm.weight", (h,)),
                                ("post_attention_layernorm.weight", (h,)),
                                ("self_attn.q_proj.weight", (h, h)),
                                ("self_attn.k_proj.weight", (h, h)),
                                ("self_attn.v_proj.weight", (h, h)),
                                ("self_attn.o_proj.weight", (h, h)),
                                ("mlp.gate_proj.weight", (f, h)),
                                ("mlp.up_proj.weight", (f, h)),
                                ("mlp.down_proj.weight", (h, f))]:
                shapes[p + name] = shape
        weights = {name: (0.02 * rng.standard_normal(shape)).astype(np.float32)
                   for name, shape in shapes.items()}
        e2e_util.write_safetensors(f"{tmp}/w.safetensors", weights)
        ids = rng.integers(0, v, (c["batch"], c["seq"])).astype(np.int32)
        np.save(f"{tmp}/ids.npy", ids)

        output = e2e_util.run([f"{bin_dir}/megc-run", artifact, "--entry",
                               "forward", "--params", f"{tmp}/w.safetensors",
                               "--input", f"input_ids={tmp}/ids.npy",
                               "--steps", str(options.steps + 1)])
        megc_ms = [float(m) for m in re.findall(r"forward ([0-9.]+) ms", output)]
        megc_ms = statistics.median(megc_ms[1:])  # the first run allocates

        numpy_ms = []
        for _ in range(options.steps):
            start = time.perf_counter()
            llama_reference.forward(weights, ids, c)
            numpy_ms.append((time.perf_counter() - start) * 1e3)
        numpy_ms = statistics.median(numpy_ms)

    print(f"llama forward, CPU, hidden {c['hidden']}, {c['layers']} layers, "
          f"seq {c['seq']}, batch {c['batch']} (median of {options.steps})")
    print(f"  megc artifact (megc-run): {megc_ms:8.2f} ms   "
          f"(compile {compile_s:.2f} s)")
    print(f"  NumPy eager baseline:     {numpy_ms:8.2f} ms")
    print(f"  ratio megc / NumPy:       {megc_ms / numpy_ms:8.2f}")


if __name__ == "__main__":
    main()
