"""End to end: DeepSeek-V3's load balancing without an auxiliary loss.
megc imports the deepseek-v3 fixture with --train --moe-bias-update-rate R
and a learning rate of 1e-30 (the weights stay, in f32, and only the routing
biases move), megc-run runs three train_steps from the fixture's checkpoint,
and each MoE layer's e_score_correction_bias must equal NumPy's: per step,
the experts the NumPy forward (moe_capacity.py, itself checked against
transformers) routes each token to with the current biases, counted per
expert (L), and `bias += R sign(mean(L) - L)` in f32. A forward run leaves
the biases as loaded."""
import argparse
import json
import os
import sys

import numpy as np

import e2e_util
from moe_capacity import FIXTURE, forward

RATE = 0.01
STEPS = 3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    tmp = options.tmp
    os.makedirs(tmp, exist_ok=True)
    config = json.load(open(os.path.join(FIXTURE, "config.json")))
    weights = e2e_util.read_safetensors(
        os.path.join(FIXTURE, "model.safetensors"))
    reference = e2e_util.read_safetensors(
        os.path.join(FIXTURE, "reference.safetensors"))
    ids = reference["input_ids"].astype(np.int32)
    batch, seq = ids.shape
    experts = config["n_routed_experts"]
    np.save(os.path.join(tmp, "ids.npy"), ids)
    np.save(os.path.join(tmp, "labels.npy"),
            reference["labels"].astype(np.int32))

    # NumPy: the biases after each step.
    params = {k: v.astype(np.float64) for k, v in weights.items()}
    biases = {k: v.astype(np.float32) for k, v in weights.items()
              if k.endswith("e_score_correction_bias")}
    uneven = 0
    for step in range(STEPS):
        routed = []
        forward(params, config, ids, batch * seq, "probs", routed)
        for prefix, _, index in routed:
            name = prefix + "gate.e_score_correction_bias"
            load = np.bincount(index.ravel(), minlength=experts)
            sign = np.sign(load.mean() - load).astype(np.float32)
            uneven += int(np.any(sign != 0))
            biases[name] = biases[name] + np.float32(RATE) * sign
            params[name] = biases[name].astype(np.float64)
    failures = []
    if not uneven:
        failures.append("every load is even: the update is not tested")

    model = os.path.join(tmp, "model.mlir")
    artifact = os.path.join(tmp, "model.megc")
    e2e_util.run(["megc", "import", FIXTURE, "--seq", str(seq), "--batch",
                  str(batch), "--train", "--lr", "1e-30", "--weight-decay", "0",
                  "--moe-bias-update-rate", str(RATE), "-o", model])
    e2e_util.run(["megc", model, "-o", artifact])
    inputs = ["--input", f"input_ids={tmp}/ids.npy",
              "--input", f"labels={tmp}/labels.npy"]
    trained = os.path.join(tmp, "trained.safetensors")
    e2e_util.run(["megc-run", artifact, "--entry", "train_step", "--steps",
                  str(STEPS), "--params", FIXTURE, *inputs, "--save-params",
                  trained])
    saved = e2e_util.read_safetensors(trained)
    for name, want in biases.items():
        got = saved[name]
        moved = float(np.abs(want - weights[name]).max())
        error = float(np.abs(got - want).max())
        print(f"{name}: after {STEPS} steps max |bias - NumPy| {error:.3g} "
              f"(moved by up to {moved:.3g} from the checkpoint)")
        if error > 1e-7:
            failures.append(f"{name} differs from NumPy's")
    for name, value in weights.items():
        if name not in biases and not np.array_equal(saved[name], value):
            failures.append(f"{name} changed with a learning rate of 1e-30")

    # Other entries leave the biases alone.
    loaded = os.path.join(tmp, "forward.safetensors")
    e2e_util.run(["megc-run", artifact, "--entry", "forward", "--params",
                  FIXTURE, "--input", f"input_ids={tmp}/ids.npy",
                  "--save-params", loaded])
    after_forward = e2e_util.read_safetensors(loaded)
    for name in biases:
        if not np.array_equal(after_forward[name], weights[name]):
            failures.append(f"the forward entry changed {name}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
