"""A loss that ignores padding against PyTorch: the `llama` fixture imported
(its loss ignores label -100 by default), on the batch whose labels hold
-100 in different numbers per row, against the reference that
make_ignore_index_reference.py computed with
torch.nn.functional.cross_entropy(..., ignore_index=-100) and one
torch.optim.AdamW step (test/e2e/ignore-index-reference). The grad entry
gives PyTorch's loss and gradients; one train_step gives its loss and
updated parameters on one rank, with 2 micro-batches, on 2 data-parallel
ranks and on 2 ranks with 2 micro-batches each, whose parts of the batch
count different numbers of labels: the step divides by the global count,
as PyTorch's loss over the whole batch does; and on tensor-parallel ranks,
whose vocab-parallel cross-entropy masks the ignored labels in place."""
import argparse
import json
import os
import sys

import numpy as np

import e2e_util
import mpi_util

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "ignore-index-reference")
FIXTURE = os.path.join(HERE, "hf-fixtures", "llama")

# name, ranks, megc import flags
CONFIGS = [
    ("one rank", 1, []),
    ("2 micro-batches", 1, ["--micro-batches", "2"]),
    ("dp_shard=2", 2, ["--mesh", "dp_shard=2", "--fsdp", "optim_grads_params"]),
    ("dp_shard=2, 2 micro-batches", 2,
     ["--mesh", "dp_shard=2", "--fsdp", "optim", "--micro-batches", "2"]),
    # The vocab-parallel cross-entropy masks ignored labels in place.
    ("tp=2", 2, ["--mesh", "tp=2"]),
    ("dp_shard=2 x tp=2, sequence-parallel", 4,
     ["--mesh", "dp_shard=2,tp=2", "--sequence-parallel"]),
]


def compile_model(tmp, name, flags, s):
    model = os.path.join(tmp, name + ".mlir")
    artifact = os.path.join(tmp, name + ".megc")
    e2e_util.run([
        "megc", "import", FIXTURE, "--seq", str(s["seq"]), "--batch",
        str(s["batch"]), "--train", "--lr", str(s["lr"]), "--betas",
        ",".join(map(str, s["betas"])), "--adam-eps", str(s["eps"]),
        "--weight-decay", str(s["weight_decay"]), *flags, "-o", model])
    e2e_util.run(["megc", model, "-o", artifact])
    return artifact


def run(args, ranks):
    if ranks == 1:
        return e2e_util.run(args)
    result = mpi_util.run_ranks(ranks, args)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} on {ranks} ranks failed "
                 f"({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


def worst_error(got, want):
    """The largest difference over every tensor, relative to each
    tensor's largest magnitude."""
    return max(e2e_util.max_relative_error(got[name], reference)
               for name, reference in want.items())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    with open(os.path.join(REFERENCE, "settings.json")) as f:
        s = json.load(f)["settings"]
    batch = e2e_util.read_safetensors(os.path.join(REFERENCE, "batch.safetensors"))
    grads = e2e_util.read_safetensors(os.path.join(REFERENCE, "grads.safetensors"))
    stepped = e2e_util.read_safetensors(
        os.path.join(REFERENCE, "stepped.safetensors"))
    want_loss = float(batch["loss"])
    inputs = []
    for name in ("input_ids", "labels"):
        path = os.path.join(options.tmp, name + ".npy")
        np.save(path, batch[name].astype(np.int32))
        inputs += ["--input", f"{name}={path}"]
    if not (batch["labels"] == -100).any():
        sys.exit("the reference batch holds no ignored label")

    failures = []
    artifact = compile_model(options.tmp, "one", [], s)
    out = os.path.join(options.tmp, "grad")
    e2e_util.run(["megc-run", artifact, "--entry", "grad", "--params", FIXTURE,
                  *inputs, "--output-dir", out])
    got_loss = float(e2e_util.read_output(os.path.join(out, "loss.npy")))
    got = {name: e2e_util.read_output(os.path.join(out, f"grad.{name}.npy"))
           for name in grads}
    loss_error = abs(got_loss - want_loss) / abs(want_loss)
    grad_error = worst_error(got, grads)
    print(f"grad entry: loss {got_loss:.6f} vs {want_loss:.6f} (relative "
          f"{loss_error:.2g}), gradients within {grad_error:.2g}")
    if loss_error > 1e-5 or grad_error > 1e-4:
        failures.append("grad entry")

    for name, ranks, flags in CONFIGS:
        tag = name.replace(" ", "").replace(",", "_").replace("=", "")
        artifact = compile_model(options.tmp, tag, flags, s)
        final = os.path.join(options.tmp, tag + ".safetensors")
        log = run(["megc-run", artifact, "--entry", "train_step", "--params",
                   FIXTURE, *inputs, "--steps", "1", "--save-params", final],
                  ranks)
        losses = [float(line.split(" loss ")[1].split()[0])
                  for line in log.splitlines() if " loss " in line]
        if len(losses) != 1:
            sys.exit(f"{name}: expected one loss line, got:\n{log}")
        loss_error = abs(losses[0] - want_loss) / abs(want_loss)
        param_error = worst_error(e2e_util.read_safetensors(final), stepped)
        print(f"{name}: loss {losses[0]:.6f} (relative {loss_error:.2g}), "
              f"parameters after the step within {param_error:.2g}")
        if loss_error > 1e-5 or param_error > 1e-4:
            failures.append(name)
    if failures:
        print("FAIL: " + ", ".join(failures) + " differ from PyTorch")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
