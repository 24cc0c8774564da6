"""End to end: context parallelism trains like one rank. Ten llama
train_steps with every sequence split over cp = 2 and cp = 4 ranks under
mpirun (causal load balancing: rank i holds chunks i and 2 cp - 1 - i of
2 cp; attention over the keys and values gathered over cp, each query
masked by its position), with grouped-query attention of fewer KV heads
than ranks, with clipping and a cosine learning-rate schedule, with
micro-batches, composed with data parallelism (dp_shard = 2 replicas, and
FSDP's optim_grads_params sharding over dp_shard x cp) and with tensor and
sequence parallelism (tp = 2), give the losses and the final training state
(weights, moments, step) of the single-rank artifact compiled from the same
model, within f32 tolerance. The forward entry's logits, gathered over cp,
equal one rank's in the original token order."""
import argparse
import os
import sys

import numpy as np

import e2e_util
import fsdp_equivalence

MODEL = ["--layers", "2", "--hidden", "32", "--heads", "8", "--kv-heads", "4",
         "--ffn", "48", "--seq", "16", "--vocab", "64", "--batch", "4",
         "--train", "--weight-decay", "0.1"]
STEPS = 10
TOLERANCE = 1e-5
SCHEDULE = ["--lr-schedule", "cosine", "--warmup-steps", "2",
            "--decay-steps", "10", "--min-lr", "1e-4"]

# (name, --mesh, extra gen flags)
CONFIGS = [
    # One rank laid out as context-parallel: every collective over a group
    # of one.
    ("cp=2", "cp=2", []),
    ("cp=4", "cp=4", []),
    ("cp=4 kv-heads 2", "cp=4", ["--kv-heads", "2"]),
    ("cp=2 clip cosine", "cp=2", ["--clip-grad", "0.5", *SCHEDULE]),
    ("cp=2 2 micro-batches", "cp=2", ["--micro-batches", "2"]),
    ("dp_shard=2 x cp=2", "dp_shard=2,cp=2", []),
    ("dp_shard=2 x cp=2 optim_grads_params", "dp_shard=2,cp=2",
     ["--fsdp", "optim_grads_params"]),
    ("cp=2 x tp=2 sp", "cp=2,tp=2", ["--sequence-parallel"]),
]
LAYOUT_FLAGS = {"--sequence-parallel": 0, "--fsdp": 1}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--only", help="run the configurations whose name "
                        "contains this")
    options = parser.parse_args()
    tmp = options.tmp
    os.makedirs(tmp, exist_ok=True)
    rng = np.random.default_rng(7)
    inputs = []
    for name in ("input_ids", "labels"):
        path = os.path.join(tmp, name + ".npy")
        tokens = rng.integers(0, 64, (4, 16)).astype(np.int32)
        if name == "labels":
            # Padding the loss ignores, unevenly over the chunks.
            tokens[0, 11:] = -100
            tokens[2, :3] = -100
        np.save(path, tokens)
        inputs += ["--input", f"{name}={path}"]

    def model_flags(flags):
        given = {flag for flag in flags if flag.startswith("--")}
        kept, skip = [], False
        for index, flag in enumerate(MODEL):
            if skip:
                skip = False
            elif flag in given:
                skip = index + 1 < len(MODEL) and not MODEL[
                    index + 1].startswith("--")
            else:
                kept.append(flag)
        return kept + list(flags)

    def reference_flags(flags):
        kept, skip = [], 0
        for flag in flags:
            if skip:
                skip -= 1
            elif flag in LAYOUT_FLAGS:
                skip = LAYOUT_FLAGS[flag]
            else:
                kept.append(flag)
        return kept

    def compile_model(tag, command):
        model = os.path.join(tmp, tag + ".mlir")
        artifact = os.path.join(tmp, tag + ".megc")
        e2e_util.run([*command, "-o", model])
        e2e_util.run(["megc", model, "-o", artifact])
        return artifact

    references = {}

    def reference(flags):
        key = tuple(flags)
        if key not in references:
            tag = f"single{len(references)}"
            single = compile_model(tag, ["megc", "gen", "llama",
                                         *model_flags(flags)])
            losses, state = fsdp_equivalence.train(
                single, inputs, os.path.join(tmp, tag + ".safetensors"), 1,
                STEPS)
            if not losses[-1] < losses[0]:
                sys.exit(f"single-rank loss does not fall: {losses}")
            references[key] = (single, losses, state)
        return references[key]

    failed = False
    for name, mesh, flags in CONFIGS:
        if options.only and options.only not in name:
            continue
        ranks = int(np.prod([int(a.split("=")[1]) for a in mesh.split(",")]))
        single, want_losses, want_state = reference(reference_flags(flags))
        tag = name.replace(" ", "_").replace("=", "")
        artifact = compile_model(tag, ["megc", "gen", "llama",
                                       *model_flags(flags), "--mesh", mesh])
        losses, state = fsdp_equivalence.train(
            artifact, inputs, os.path.join(tmp, tag + ".safetensors"), ranks,
            STEPS)
        loss_error = float(np.max(np.abs(losses - want_losses) /
                                  np.abs(want_losses)))
        worst, worst_name = e2e_util.worst_state_error(state, want_state, name)
        logits, shown = 0.0, ""
        if "--micro-batches" not in flags:
            want = fsdp_equivalence.entry_outputs(
                single, "forward", inputs[:2], os.path.join(tmp, tag + "_fw1"),
                1)
            got = fsdp_equivalence.entry_outputs(
                artifact, "forward", inputs[:2],
                os.path.join(tmp, tag + "_fwN"), ranks)
            logits = e2e_util.relative_error(got["logits"], want["logits"])
            shown = f", logits rel err {logits:.2e}"
        ok = max(loss_error, worst, logits) < TOLERANCE
        print(f"{name:36s} {ranks} ranks: loss rel err {loss_error:.2e}, "
              f"state rel err {worst:.2e} ({worst_name}){shown}"
              + ("" if ok else "  FAILED"))
        failed |= not ok
    if failed:
        sys.exit(f"some configurations differ from one rank by more than "
                 f"{TOLERANCE}")
    print(f"all context-parallel configurations equal one rank within "
          f"{TOLERANCE} (f32)")


if __name__ == "__main__":
    main()
