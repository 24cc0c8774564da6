"""End to end: `megc import` of a Hugging Face model directory, compiled and
run by megc-run on the CPU with the directory's checkpoint, against the
outputs transformers computed for it (test/e2e/hf-fixtures, made by
make_hf_fixtures.py): logits and loss (relative error), and every
parameter's gradient of the loss (relative error of each gradient)."""
import argparse
import os
import re
import sys

import numpy as np

import e2e_util

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "hf-fixtures")


def relative(got, want):
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", help="a directory of hf-fixtures")
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--dtype", help="megc import --dtype")
    parser.add_argument("--tolerance", type=float, default=1e-5,
                        help="for logits and loss")
    parser.add_argument("--grad-tolerance", type=float, default=1e-4)
    options = parser.parse_args()

    source = os.path.join(FIXTURES, options.case)
    reference = e2e_util.read_safetensors(
        os.path.join(source, "reference.safetensors"))
    ids = reference["input_ids"].astype(np.int32)
    labels = reference["labels"].astype(np.int32)
    batch, seq = ids.shape

    os.makedirs(options.tmp, exist_ok=True)
    model = os.path.join(options.tmp, "model.mlir")
    artifact = os.path.join(options.tmp, "model.megc")
    command = ["megc", "import", source, "--seq", str(seq), "--batch",
               str(batch), "--train", "-o", model]
    if options.dtype:
        command += ["--dtype", options.dtype]
    e2e_util.run(command)
    e2e_util.run(["megc", model, "-o", artifact])
    np.save(os.path.join(options.tmp, "ids.npy"), ids)
    np.save(os.path.join(options.tmp, "labels.npy"), labels)

    out = os.path.join(options.tmp, "out")
    common = ["megc-run", artifact, "--params", source, "--output-dir", out,
              "--input", f"input_ids={options.tmp}/ids.npy"]
    e2e_util.run(common + ["--entry", "forward"])
    logits = e2e_util.read_output(os.path.join(out, "logits.npy"))
    with_labels = common + ["--input", f"labels={options.tmp}/labels.npy"]
    e2e_util.run(with_labels + ["--entry", "loss"])
    loss = float(e2e_util.read_output(os.path.join(out, "loss.npy")))
    e2e_util.run(with_labels + ["--entry", "grad"])

    failures = []
    logits_error = relative(logits, reference["logits"])
    want_loss = float(reference["loss"])
    loss_error = abs(loss - want_loss) / abs(want_loss)
    print(f"{options.case}: logits relative error {logits_error:.3g}, loss "
          f"{loss:.6f} vs {want_loss:.6f} (relative error {loss_error:.3g})")
    if logits_error > options.tolerance or loss_error > options.tolerance:
        failures.append(f"logits or loss above the tolerance "
                        f"{options.tolerance}")

    # megc stacks an MoE layer's experts into one parameter per projection
    # (mlp.experts.gate_proj.weight [E, out, in]), which checkpoints and
    # the reference hold per expert (mlp.experts.{e}.gate_proj.weight).
    per_expert = re.compile(r"^grad\.(.*\.experts)\.(\d+)\.(\w+\.weight)$")
    stacks = {}
    for key in list(reference):
        match = per_expert.match(key)
        if match:
            prefix, expert, proj = match.groups()
            stacks.setdefault(f"grad.{prefix}.{proj}", {})[int(expert)] = \
                reference.pop(key)
    for key, parts in stacks.items():
        reference[key] = np.stack([parts[e] for e in range(len(parts))])
    names = sorted(k[len("grad."):] for k in reference if k.startswith("grad."))
    written = sorted(f[len("grad."):-len(".npy")] for f in os.listdir(out)
                     if f.startswith("grad."))
    if names != written:
        failures.append(f"gradients of {written}, expected {names}")
    worst, worst_name = 0.0, None
    for name in names:
        path = os.path.join(out, f"grad.{name}.npy")
        if not os.path.exists(path):
            continue
        error = relative(e2e_util.read_output(path), reference["grad." + name])
        if error > worst:
            worst, worst_name = error, name
    print(f"{len(names)} gradients: worst relative error {worst:.3g} "
          f"({worst_name})")
    if worst > options.grad_tolerance:
        failures.append(f"gradient of {worst_name} above the tolerance "
                        f"{options.grad_tolerance}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
