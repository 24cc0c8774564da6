"""End to end: FSDP and HSDP train like one rank. For every sharding
strategy (and HSDP meshes 2x2 with outer no_shard and optim, and 2x4),
ten llama train_steps under mpirun give the losses and the final training
state (weights, moments, step) of the single-rank artifact compiled from
the same model, within f32 tolerance. Every rank reads the same global
batch and takes its rows. The forward entry (logits gathered over the
ranks) and the grad entry (loss and gradients averaged) give the
single-rank outputs too. bf16 weights with f32 master weights (sharded
masters initialised from replicated or sharded weights) follow one rank
within bf16 tolerance: each rank's gradients are rounded to bf16 before
they are averaged, where one rank rounds the whole-batch gradient once."""
import os
import sys

import numpy as np

import e2e_util
import mpi_util

MODEL = ["--layers", "2", "--hidden", "32", "--heads", "4", "--kv-heads", "2",
         "--ffn", "48", "--seq", "8", "--vocab", "61", "--batch", "8",
         "--train", "--weight-decay", "0.1"]
STEPS = 10
TOLERANCE = 1e-5

CONFIGS = [
    ("no_shard", "dp_shard=4", ["--fsdp", "no_shard"]),
    ("optim", "dp_shard=4", ["--fsdp", "optim"]),
    ("optim_grads", "dp_shard=4", ["--fsdp", "optim_grads"]),
    ("optim_grads_params", "dp_shard=4", ["--fsdp", "optim_grads_params"]),
    ("hsdp 2x2 outer no_shard", "dp_outer=2,dp_shard=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "no_shard"]),
    ("hsdp 2x2 outer optim", "dp_outer=2,dp_shard=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "optim"]),
    ("hsdp 2x4", "dp_outer=2,dp_shard=4",
     ["--fsdp", "optim_grads", "--bucket-mb", "1"]),
]


# Micro-batches accumulate their gradients before the one reduction; the
# entries other than train_step take one micro-batch, so only training is
# compared.
MICRO_CONFIGS = [
    ("micro 2 optim_grads_params", "dp_shard=4",
     ["--fsdp", "optim_grads_params", "--micro-batches", "2"]),
    ("micro 2 hsdp 2x2 optim", "dp_outer=2,dp_shard=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "optim",
      "--micro-batches", "2"]),
    ("micro 4 no_shard", "dp_shard=2",
     ["--fsdp", "no_shard", "--micro-batches", "4"]),
]

# Global-norm clipping (active on the first steps) with 2 micro-batches a
# step under every strategy: the norm is taken from the reduced gradients,
# the partial sums of squares of sharded pieces added over the ranks
# holding them; against one rank that clips and accumulates too. (The other
# entries take one micro-batch, so only training is compared.)
CLIP = ["--clip-grad", "1.0", "--micro-batches", "2"]
CLIP_CONFIGS = [
    ("clip+micro no_shard", "dp_shard=4", ["--fsdp", "no_shard"]),
    ("clip+micro optim", "dp_shard=4", ["--fsdp", "optim"]),
    ("clip+micro optim_grads", "dp_shard=4", ["--fsdp", "optim_grads"]),
    ("clip+micro optim_grads_params", "dp_shard=4",
     ["--fsdp", "optim_grads_params"]),
    ("clip+micro hsdp 2x2 outer no_shard", "dp_outer=2,dp_shard=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "no_shard"]),
    ("clip+micro hsdp 2x2 outer optim", "dp_outer=2,dp_shard=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "optim"]),
]

BF16 = ["--dtype", "bf16", "--precision", "main_params=f32"]
BF16_STEPS = 3
BF16_TOLERANCE = 2e-2
BF16_CONFIGS = [
    ("bf16 optim", "dp_shard=4", ["--fsdp", "optim"]),
    ("bf16 optim_grads_params", "dp_shard=4", ["--fsdp", "optim_grads_params"]),
]


def train(artifact, inputs, state, ranks, steps=STEPS):
    args = ["megc-run", artifact, "--entry", "train_step", "--params",
            "init:7", "--steps", str(steps), "--save-state", state, *inputs]
    if ranks == 1:
        log = e2e_util.run(args)
    else:
        result = mpi_util.run_ranks(ranks, args)
        if result.returncode != 0:
            sys.exit(f"{' '.join(args)} on {ranks} ranks failed "
                     f"({result.returncode}):\n{result.stdout}{result.stderr}")
        log = result.stdout
    losses = [float(line.split(" loss ")[1].split()[0])
              for line in log.splitlines() if " loss " in line]
    if len(losses) != steps:
        sys.exit(f"expected {steps} loss lines (rank 0 only), got "
                 f"{len(losses)}:\n{log}")
    return np.array(losses), e2e_util.read_safetensors(state)


def single_rank_reference(compile_model, inputs, tmp):
    """The single-rank artifact, its losses and its final training state;
    exits unless the loss falls."""
    single = compile_model("single", [])
    losses, state = train(single, inputs,
                          os.path.join(tmp, "single.safetensors"), 1)
    if not losses[-1] < losses[0]:
        sys.exit(f"single-rank loss does not fall: {losses}")
    return single, losses, state


def entry_outputs(artifact, entry, inputs, out, ranks):
    """Outputs of one run of `entry` with the seed-7 parameters."""
    args = ["megc-run", artifact, "--entry", entry, "--params", "init:7",
            "--output-dir", out, *inputs]
    if ranks == 1:
        e2e_util.run(args)
    else:
        result = mpi_util.run_ranks(ranks, args)
        if result.returncode != 0:
            sys.exit(f"{' '.join(args)} on {ranks} ranks failed:\n"
                     f"{result.stdout}{result.stderr}")
    return {name[:-4]: e2e_util.read_output(os.path.join(out, name))
            for name in sorted(os.listdir(out))}


def compare_entries(name, artifact, single, inputs, tmp, ranks):
    """Worst relative error of forward's and grad's outputs."""
    worst = 0.0
    for entry, entry_inputs in (("forward", inputs[:2]), ("grad", inputs)):
        want = entry_outputs(single, entry, entry_inputs,
                             os.path.join(tmp, f"single_{entry}"), 1)
        got = entry_outputs(artifact, entry, entry_inputs,
                            os.path.join(tmp, f"{name}_{entry}"), ranks)
        if sorted(got) != sorted(want):
            sys.exit(f"{name}: {entry} outputs {sorted(got)} differ from "
                     f"{sorted(want)}")
        for key in want:
            if got[key].shape != want[key].shape:
                sys.exit(f"{name}: {entry} output {key} has shape "
                         f"{got[key].shape}, single rank {want[key].shape}")
            worst = max(worst, e2e_util.relative_error(got[key], want[key]))
    return worst


def compare_with_one_rank(name, ranks, artifact, single, want_losses,
                          want_state, inputs, tmp, steps, tolerance,
                          forward=True):
    """Trains `artifact` on `ranks` ranks for `steps` steps; prints its
    losses', final state's and (with `forward`) forward logits' relative
    errors against one rank's (`single`, `want_losses`, `want_state`) and
    returns whether all are below `tolerance`."""
    tag = name.replace(" ", "_").replace("=", "").replace("+", "")
    losses, state = train(artifact, inputs,
                          os.path.join(tmp, tag + ".safetensors"), ranks, steps)
    loss_error = float(np.max(np.abs(losses - want_losses) /
                              np.abs(want_losses)))
    worst, worst_name = e2e_util.worst_state_error(state, want_state, name)
    logits, shown = 0.0, ""
    if forward:
        want = entry_outputs(single, "forward", inputs[:2],
                             os.path.join(tmp, tag + "_fw1"), 1)
        got = entry_outputs(artifact, "forward", inputs[:2],
                            os.path.join(tmp, tag + "_fwN"), ranks)
        logits = e2e_util.relative_error(got["logits"], want["logits"])
        shown = f", logits rel err {logits:.2e}"
    ok = max(loss_error, worst, logits) < tolerance
    print(f"{name:36s} {ranks} ranks: loss rel err {loss_error:.2e}, "
          f"state rel err {worst:.2e} ({worst_name}){shown}"
          + ("" if ok else "  FAILED"))
    return ok


def main():
    options = e2e_util.parse_options()
    rng = np.random.default_rng(11)
    ids = rng.integers(0, 61, (8, 8)).astype(np.int32)
    labels = rng.integers(0, 61, (8, 8)).astype(np.int32)
    inputs = []
    for name, value in (("input_ids", ids), ("labels", labels)):
        path = os.path.join(options.tmp, name + ".npy")
        np.save(path, value)
        inputs += ["--input", f"{name}={path}"]

    def compile_model(tag, extra):
        model = os.path.join(options.tmp, tag + ".mlir")
        artifact = os.path.join(options.tmp, tag + ".megc")
        e2e_util.run(["megc", "gen", "llama", *MODEL, *extra, "-o", model])
        e2e_util.run(["megc", model, "-o", artifact])
        return artifact

    single, want_losses, want_state = single_rank_reference(
        compile_model, inputs, options.tmp)
    def compare(name, mesh, flags, reference, steps, tolerance, entries):
        """Trains `name` on its mesh and compares with `reference`."""
        want_losses, want_state, single = reference
        ranks = int(np.prod([int(a.split("=")[1]) for a in mesh.split(",")]))
        tag = name.replace(" ", "_")
        artifact = compile_model(tag, ["--mesh", mesh, *flags])
        losses, state = train(artifact, inputs,
                              os.path.join(options.tmp, tag + ".safetensors"),
                              ranks, steps)
        loss_error = float(np.max(np.abs(losses - want_losses) /
                                  np.abs(want_losses)))
        worst, worst_name = e2e_util.worst_state_error(state, want_state,
                                                       name)
        outputs = (compare_entries(tag, artifact, single, inputs,
                                   options.tmp, ranks) if entries else 0.0)
        ok = max(loss_error, worst, outputs) < tolerance
        print(f"{name:26s} {ranks} ranks: loss rel err {loss_error:.2e}, "
              f"state rel err {worst:.2e} ({worst_name})"
              + (f", forward and grad outputs rel err {outputs:.2e}"
                 if entries else "") + ("" if ok else "  FAILED"))
        return ok

    failed = False
    reference = (want_losses, want_state, single)
    for name, mesh, flags in CONFIGS:
        if not options.only or options.only in name:
            failed |= not compare(name, mesh, flags, reference, STEPS,
                                  TOLERANCE, entries=True)
    for name, mesh, flags in MICRO_CONFIGS:
        if not options.only or options.only in name:
            failed |= not compare(name, mesh, flags, reference, STEPS,
                                  TOLERANCE, entries=False)
    if not options.only or "clip" in options.only:
        clip_single = compile_model("clip_single", CLIP)
        clip_reference = (*train(clip_single, inputs,
                                 os.path.join(options.tmp, "clip.safetensors"),
                                 1), clip_single)
        for name, mesh, flags in CLIP_CONFIGS:
            if not options.only or options.only in name:
                failed |= not compare(name, mesh, [*CLIP, *flags],
                                      clip_reference, STEPS, TOLERANCE,
                                      entries=False)
    bf16_single = compile_model("bf16_single", BF16)
    bf16_reference = (*train(bf16_single, inputs,
                             os.path.join(options.tmp, "bf16.safetensors"),
                             1, BF16_STEPS), bf16_single)
    for name, mesh, flags in BF16_CONFIGS:
        if not options.only or options.only in name:
            failed |= not compare(name, mesh, [*BF16, *flags],
                                  bf16_reference, BF16_STEPS, BF16_TOLERANCE,
                                  entries=False)
    if failed:
        sys.exit("some configurations differ from one rank by more than "
                 "their tolerance")
    print(f"all configurations equal one rank within {TOLERANCE} (f32; "
          f"losses {want_losses[0]:.4f} -> {want_losses[-1]:.4f}) and "
          f"{BF16_TOLERANCE} (bf16 weights, f32 masters)")


if __name__ == "__main__":
    main()
