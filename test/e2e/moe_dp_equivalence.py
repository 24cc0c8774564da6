"""End to end: DeepSeek-V3 (the deepseek-v3 fixture's config: MLA, a dense
layer, an MoE layer of 8 experts) trains under data and expert parallelism
like one rank. Each rank routes its own tokens, with room for all of them
in every expert, so no token is dropped and the experts see the same tokens
as on one rank; the router's correction bias is replicated and moves
after each step by the per-expert loads summed over the data-parallel
ranks. Under expert
parallelism (ep) each rank holds 8 / ep experts and the all-to-alls carry
the tokens to them and back; the expert weights are data-parallel over the
rest of the data-parallel group. Ten train_steps on 2 ranks (no_shard,
optim_grads_params, ep=2, ep=2 with full recomputation), 4 (HSDP 2x2,
ep=4, dp_shard=2 x ep=2) and 8 (HSDP 2x2 x ep=2) give the losses and
final training state of one rank within f32 tolerance, and the forward entry's logits and dropped-token
count equal one rank's."""
import argparse
import os
import sys

import numpy as np

import e2e_util
from fsdp_equivalence import entry_outputs, single_rank_reference, train

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "hf-fixtures", "deepseek-v3")
# Adam's epsilon keeps the update of a weight an expert barely used (its
# gradient summed in another order over the ranks) from amplifying rounding.
BATCH = 8
# The routing biases move after each step by the loads of the global batch,
# which every layout must count alike.
MODEL = ["--seq", "8", "--batch", str(BATCH), "--train", "--weight-decay", "0.1",
         "--lr", "1e-3", "--adam-eps", "1e-5", "--moe-bias-update-rate", "1e-2"]
TOLERANCE = 1e-5
CONFIGS = [
    ("no_shard", "dp_shard=2", ["--fsdp", "no_shard"]),
    ("optim_grads_params", "dp_shard=2", ["--fsdp", "optim_grads_params"]),
    ("hsdp 2x2 outer optim", "dp_outer=2,dp_shard=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "optim"]),
    ("ep 2", "ep=2", ["--fsdp", "optim_grads_params"]),
    ("ep 4", "ep=4", ["--fsdp", "no_shard"]),
    ("dp_shard 2 x ep 2", "dp_shard=2,ep=2", ["--fsdp", "optim_grads"]),
    ("hsdp 2x2 x ep 2", "dp_outer=2,dp_shard=2,ep=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "optim"]),
    # Recomputation repeats the MoE layer's exchanges in the backward (the
    # fourth item: flags of megc, the compiler).
    ("ep 2, recompute full", "ep=2", ["--fsdp", "no_shard"],
     ["--recompute=full"]),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    rng = np.random.default_rng(5)
    inputs = []
    for name in ("input_ids", "labels"):
        path = os.path.join(options.tmp, name + ".npy")
        np.save(path, rng.integers(0, 96, (BATCH, 8)).astype(np.int32))
        inputs += ["--input", f"{name}={path}"]

    def compile_model(tag, extra, compile_flags=()):
        model = os.path.join(options.tmp, tag + ".mlir")
        artifact = os.path.join(options.tmp, tag + ".megc")
        e2e_util.run(["megc", "import", FIXTURE, *MODEL, *extra, "-o", model])
        e2e_util.run(["megc", model, *compile_flags, "-o", artifact])
        return artifact

    single, want_losses, want_state = single_rank_reference(
        compile_model, inputs, options.tmp)
    want_forward = entry_outputs(single, "forward", inputs[:2],
                                 os.path.join(options.tmp, "single_fwd"), 1)
    failed = False
    for name, mesh, flags, *compile_flags in CONFIGS:
        ranks = int(np.prod([int(a.split("=")[1]) for a in mesh.split(",")]))
        tag = name.replace(" ", "_").replace(",", "")
        artifact = compile_model(tag, ["--mesh", mesh, *flags],
                                 *compile_flags)
        losses, state = train(artifact, inputs,
                              os.path.join(options.tmp, tag + ".safetensors"),
                              ranks)
        loss_error = float(np.max(np.abs(losses - want_losses) /
                                  np.abs(want_losses)))
        worst, worst_name = e2e_util.worst_state_error(state, want_state,
                                                       name)
        forward = entry_outputs(artifact, "forward", inputs[:2],
                                os.path.join(options.tmp, tag + "_fwd"), ranks)
        logits_error = e2e_util.relative_error(forward["logits"],
                                               want_forward["logits"])
        dropped = float(forward["dropped_tokens"])
        ok = (max(loss_error, worst, logits_error) < TOLERANCE
              and dropped == float(want_forward["dropped_tokens"]) == 0.0)
        print(f"{name:24s} {ranks} ranks: loss rel err {loss_error:.2e}, "
              f"state rel err {worst:.2e} ({worst_name}), logits rel err "
              f"{logits_error:.2e}, dropped {dropped:g}"
              + ("" if ok else "  FAILED"))
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
