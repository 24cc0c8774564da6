"""Trains MMDiT or Flux for five steps from the same parameters and inputs
without recomputation, with --recompute=selective and with --recompute=full,
and checks that recomputation changed the plan, not the training: the
losses of every step within 2e-5 relative of no recomputation's (f32; full
recomputation fuses the recomputed blocks differently, so float operations
may contract or group differently), selective recomputation bitwise the
same, and full recomputation's plan smaller (the blocks are layers,
meg.layer, which is what meg-remat recomputes).

Usage: recompute_diffusion.py WORK_DIR mmdit|flux
"""
import json
import re
import subprocess
import sys

import numpy as np

work, preset = sys.argv[1], sys.argv[2]
model = f"{work}/{preset}.mlir"
subprocess.run(["megc", "gen", preset, "--layers", "2", "--hidden", "64",
                "--heads", "4", "--seq", "16", "--batch", "2", "--train",
                "--lr", "0.01", "--text-seq", "8", "--in-channels", "4",
                "--context-dim", "16", "-o", model], check=True)
arenas, losses, states = {}, {}, {}
for mode in ("none", "selective", "full"):
    artifact = f"{work}/{preset}-{mode}.megc"
    subprocess.run(["megc", model, f"--recompute={mode}", "-o", artifact],
                   check=True)
    plan = subprocess.run(["megc", "--emit=megrt", model,
                           f"--recompute={mode}"], check=True,
                          capture_output=True, text=True).stdout
    arenas[mode] = int(re.search(r"^entry train_step arena (\d+)", plan,
                                 re.M).group(1))
    summary = subprocess.run(["megc", "inspect", artifact], check=True,
                             capture_output=True, text=True).stdout
    line = next(l for l in summary.splitlines()
                if l.startswith("entry train_step("))
    flags = []
    rng = np.random.default_rng(5)
    for name, shape in re.findall(r"(\w+): tensor<([0-9x]+)xf32>",
                                  line.split("->")[0]):
        path = f"{work}/{name}.npy"
        np.save(path, rng.standard_normal(
            [int(d) for d in shape.split("x")]).astype(np.float32))
        flags += ["--input", f"{name}={path}"]
    metrics = f"{work}/{preset}-{mode}.jsonl"
    state = f"{work}/{preset}-{mode}.safetensors"
    subprocess.run(["megc-run", artifact, "--entry", "train_step", "--params",
                    "init:1", "--steps", "5", *flags, "--metrics", metrics,
                    "--save-state", state], check=True,
                   stdout=subprocess.DEVNULL)
    losses[mode] = [json.loads(l)["loss"] for l in open(metrics)]
    states[mode] = open(state, "rb").read()

print(preset, "arena", arenas, "losses", losses)
assert len(losses["none"]) == 5, losses
assert losses["selective"] == losses["none"], losses
assert states["selective"] == states["none"], "selective changed the state"
for full, none in zip(losses["full"], losses["none"]):
    assert abs(full - none) <= 2e-5 * abs(none), (full, none)
assert arenas["full"] < 0.8 * arenas["none"], arenas
print(preset, "ok")
