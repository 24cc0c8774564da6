"""megc's training loop against PyTorch: the `llama` fixture imported with
Megatron's warmup + cosine schedule, global-norm clipping and 4
micro-batches a step, trained 20 steps by megc-run on a token file, compared with the reference that
make_training_reference.py computed with torch.optim.AdamW and
torch.nn.utils.clip_grad_norm_ (test/e2e/training-reference): every step's
learning rate, grad norm (relative error below 1e-5) and loss, and the final
parameters (within 1e-4)."""
import argparse
import json
import os
import sys

import numpy as np

import e2e_util

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "training-reference")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    with open(os.path.join(REFERENCE, "steps.json")) as f:
        reference = json.load(f)
    s = reference["settings"]
    fixture = os.path.join(HERE, "hf-fixtures", "llama")
    model = os.path.join(options.tmp, "model.mlir")
    artifact = os.path.join(options.tmp, "model.megc")
    e2e_util.run([
        "megc", "import", fixture, "--seq", str(s["seq"]), "--batch",
        str(s["batch"]), "--train", "--lr", str(s["lr"]), "--betas",
        ",".join(map(str, s["betas"])), "--adam-eps", str(s["eps"]),
        "--weight-decay", str(s["weight_decay"]), "--lr-schedule", "cosine",
        "--warmup-steps", str(s["warmup"]), "--decay-steps", str(s["decay"]),
        "--min-lr", str(s["min_lr"]), "--clip-grad", str(s["clip_grad"]),
        "--micro-batches", str(s["micro_batches"]), "-o", model])
    e2e_util.run(["megc", model, "-o", artifact])
    metrics = os.path.join(options.tmp, "metrics.jsonl")
    final = os.path.join(options.tmp, "final.safetensors")
    e2e_util.run(["megc-run", artifact, "--entry", "train_step", "--params",
                  fixture, "--data", os.path.join(REFERENCE, "tokens.bin"),
                  "--steps", str(s["steps"]), "--metrics", metrics,
                  "--save-params", final])
    with open(metrics) as f:
        got = [json.loads(line) for line in f]

    failures = []
    if len(got) != len(reference["steps"]):
        failures.append(f"{len(got)} steps in the metrics, expected "
                        f"{len(reference['steps'])}")
    worst = {"lr": 0.0, "grad_norm": 0.0, "loss": 0.0}
    for step, (mine, want) in enumerate(zip(got, reference["steps"]), 1):
        for key in worst:
            error = abs(mine[key] - want[key]) / max(abs(want[key]), 1e-12)
            worst[key] = max(worst[key], error)
    print("worst relative errors over the steps: " +
          ", ".join(f"{k} {v:.3g}" for k, v in worst.items()))
    for key, tolerance in (("lr", 1e-6), ("grad_norm", 1e-5), ("loss", 1e-5)):
        if worst[key] > tolerance:
            failures.append(f"{key} differs from PyTorch's by {worst[key]:.3g}"
                            f" (tolerance {tolerance})")
    clipped = sum(step["grad_norm"] > s["clip_grad"] for step in got)
    print(f"clipping active on {clipped} of {len(got)} steps")

    params = e2e_util.read_safetensors(final)
    want = e2e_util.read_safetensors(os.path.join(REFERENCE,
                                                  "final.safetensors"))
    if sorted(params) != sorted(want):
        failures.append(f"parameters {sorted(params)} vs {sorted(want)}")
    else:
        difference = max(float(np.max(np.abs(params[k] - want[k])))
                         for k in want)
        print(f"final parameters: max abs difference {difference:.3g}")
        if difference > 1e-4:
            failures.append(f"final parameters differ by {difference:.3g}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
