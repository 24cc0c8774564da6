"""End to end: tensor parallelism trains like one rank. Ten llama
train_steps on tp=2 and tp=4 meshes under mpirun, and on the layout of
tp=1 (collectives over groups of one rank) (q/k/v and gate/up
column-parallel, o and down row-parallel, grouped KV heads split with their
query heads, or fewer KV heads than ranks, each rank taking its group's), with global-norm clipping, with micro-batches, with the tp
groups replicated over dp_shard and dp_outer (2-D and 3-D meshes of up to 8
ranks) or sharded over them by every FSDP strategy (HSDP included), with
and without sequence parallelism, and for imported models
(q/k/v, o and MLP biases, with and without sequence parallelism; Qwen3's
per-head norms and tied embeddings), give
the losses and the final training state (weights, moments, step; saved
whole) of the single-rank artifact compiled from the same model, within
f32 tolerance. The forward entry's logits (the same on every rank) equal
one rank's too; a checkpoint saved from a tp run loads into one rank
unchanged, and one rank's loads into a tp run and into FSDP pieces of tp
blocks, which then compute the same logits. Layer graph regions holding
the collectives (--capture-collectives), and the program compiled for both targets (the
GPU's one-hot embedding gradient, run here on the CPU), give the same
results too, as does a hand-written model that exercises the layout's
generic rules (a whole operand cut into blocks, a reduction over split
features, a gather where a reshape cannot keep the split). bf16 weights with f32 master
weights follow one rank within bf16 tolerance for three steps, the norm
weights' gradients summed over tp in the policy's grad_reduce dtype (f32):
each tp rank rounds its partial products to bf16 before they are summed,
where one rank rounds the whole product once."""
import os
import sys

import numpy as np

import e2e_util
import fsdp_equivalence
import mpi_util

MODEL = ["--layers", "2", "--hidden", "32", "--heads", "8", "--kv-heads", "4",
         "--ffn", "48", "--seq", "8", "--vocab", "64", "--batch", "4",
         "--train", "--weight-decay", "0.1"]
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "hf-fixtures")
STEPS = 10
TOLERANCE = 1e-5

# (name, --mesh, extra gen flags); clipping is active on the first steps.
# Data-parallel axes replicate the tp groups (FSDP's no_shard): each group
# takes its rows of the global batch, gradients are averaged over the
# groups.
CONFIGS = [
    # One rank laid out as tensor-parallel: every collective over a group of
    # one (the layout the GPU check runs through NCCL on one GPU).
    ("tp=1", "tp=1", []),
    ("tp=1 sp", "tp=1", ["--sequence-parallel"]),
    ("tp=2", "tp=2", []),
    ("tp=4", "tp=4", []),
    ("tp=2 clip", "tp=2", ["--clip-grad", "0.5"]),
    ("tp=4 clip + 2 micro-batches", "tp=4",
     ["--clip-grad", "0.5", "--micro-batches", "2"]),
    ("dp_shard=2 x tp=2", "dp_shard=2,tp=2", []),
    ("dp_shard=2 x tp=2 clip", "dp_shard=2,tp=2", ["--clip-grad", "0.5"]),
    ("dp_outer=2 x dp_shard=2 x tp=2", "dp_outer=2,dp_shard=2,tp=2", []),
    # FSDP over tensor parallelism: each tp rank's blocks (and whole
    # parameters) split into flat pieces over dp_shard.
    ("dp_shard=2 x tp=2 optim", "dp_shard=2,tp=2", ["--fsdp", "optim"]),
    ("dp_shard=2 x tp=2 optim_grads clip", "dp_shard=2,tp=2",
     ["--fsdp", "optim_grads", "--clip-grad", "0.5"]),
    ("dp_shard=2 x tp=2 optim_grads_params", "dp_shard=2,tp=2",
     ["--fsdp", "optim_grads_params"]),
    ("hsdp 2x2 outer optim x tp=2 sp", "dp_outer=2,dp_shard=2,tp=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "optim",
      "--sequence-parallel"]),
    # Sequence parallelism: norms and residual adds on seq / tp tokens.
    ("tp=2 sp", "tp=2", ["--sequence-parallel"]),
    ("tp=4 sp clip + 2 micro-batches", "tp=4",
     ["--sequence-parallel", "--clip-grad", "0.5", "--micro-batches", "2"]),
    ("dp_shard=2 x tp=2 sp clip", "dp_shard=2,tp=2",
     ["--sequence-parallel", "--clip-grad", "0.5"]),
    ("dp_outer=2 x dp_shard=2 x tp=2 sp", "dp_outer=2,dp_shard=2,tp=2",
     ["--sequence-parallel"]),
    # Fewer query groups than ranks: every rank holds the whole k/v weights
    # and applies its group's head, which tp / kv-heads ranks share.
    ("tp=4 kv-heads 2", "tp=4", ["--kv-heads", "2"]),
    ("tp=4 kv-heads 2 sp clip", "tp=4",
     ["--kv-heads", "2", "--sequence-parallel", "--clip-grad", "0.5"]),
    ("dp_shard=2 x tp=2 kv-heads 1 optim_grads_params", "dp_shard=2,tp=2",
     ["--kv-heads", "1", "--fsdp", "optim_grads_params"]),
]
SP = "--sequence-parallel"
# Layer graph regions that hold the collectives (the CPU runtime records a
# region's commands on the first run and replays them, as CUDA captures
# NCCL's collectives with the region's kernels).
CAPTURE = ["--cuda-graphs=layer", "--capture-collectives"]
# The program for both targets, run on the CPU: its table gradient is the
# GPU's one-hot GEMM (onehot[t, v] = ids[t] == first + v on the rank's block
# of the vocab-parallel table).
BOTH_TARGETS = ["--target=cpu,cuda"]
BOTH_TARGET_CONFIGS = [
    ("tp=2 cpu,cuda program", "tp=2", []),
    ("tp=2 sp cpu,cuda program", "tp=2", [SP]),
]
# The loss over chunks of tokens: each chunk's LM head is vocab-parallel
# (with sequence parallelism the final norm's blocks are gathered before
# the tokens are cut into chunks).
LOSS_CHUNKS = ["--loss-chunks", "2"]
LOSS_CHUNK_CONFIGS = [
    ("tp=2 loss-chunks", "tp=2", []),
    ("tp=2 sp loss-chunks", "tp=2", [SP]),
]
GRAPH_CONFIGS = [
    ("tp=2 graphs capture-collectives", "tp=2", []),
    ("dp_shard=2 x tp=2 sp optim_grads_params graphs capture-collectives",
     "dp_shard=2,tp=2", [SP, "--fsdp", "optim_grads_params"]),
]
# Three steps, as fsdp_equivalence's bf16 runs: rounding differences grow
# with every update. Each tp rank rounds its partial sums to bf16 before
# they are summed (as Megatron's bf16 collectives do), so the moments of
# the squared gradients differ from one rank's by up to 3e-2 here. That is
# rounding: against an f32 run of the same model the tp run's logits are
# as close as one rank's (5.2e-3 both), and its first moments within 1.4x
# of one rank's distance.
BF16 = ["--dtype", "bf16", "--precision", "main_params=f32"]
BF16_STEPS = 3
BF16_TOLERANCE = 5e-2
BF16_CONFIGS = [
    ("bf16 tp=2 sp", "tp=2", [*BF16, SP]),
    ("bf16 dp_shard=2 x tp=2 optim_grads_params sp", "dp_shard=2,tp=2",
     [*BF16, "--fsdp", "optim_grads_params", SP]),
]
# Flags of the parallel layout, which the single-rank reference leaves out.
LAYOUT_FLAGS = {SP: 0, "--fsdp": 1, "--outer-fsdp": 1}


def model_flags(flags):
    """MODEL with the settings that `flags` give replaced by theirs."""
    return e2e_util.with_flags(MODEL, flags)


def reference_flags(flags):
    return e2e_util.without_flags(flags, LAYOUT_FLAGS)


# Some gradient elements of the imported models are rounding noise in
# exact arithmetic (a key bias: softmax ignores what it adds to a row's
# scores; single elements next to Qwen3's per-head norms, 1e-9 where the
# rest are 1e-4): AdamW with eps 1e-8 normalises them into updates of full
# size, so any two correct summation orders move them differently. An eps
# of 1e-5 keeps such updates negligible, and the others, whose moments are
# far above it, close to the default's.
IMPORTED_ADAM = ["--adam-eps", "1e-5"]


# A model written by hand whose layers record their splits, around which
# the splits follow the data by meg-tensor-parallel's generic rules: a
# trainable scale whole along the split features (cut into each rank's
# block), a sum over the split features (completed by an all-reduce), a
# reshape that merges them with the rows (gathered first), entry results
# split along the features (gathered). Five training steps on tp=2 equal
# one rank's, as do the forward's three outputs.
GENERIC_MODEL = """module attributes {{meg.optimizer = #meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>{layout}}} {{
{mesh}  meg.param @up : tensor<12x8xf32> init #meg.init<normal(0.5)>
  meg.param @scale : tensor<12xf32> init #meg.init<normal(1.0)>
  meg.param @down : tensor<8x12xf32> init #meg.init<normal(0.5)>
  func.func @forward(%x: tensor<4x8xf32> {{meg.name = "x"}}) -> (tensor<4x8xf32> {{meg.name = "y"}}, tensor<4x1xf32> {{meg.name = "s"}}, tensor<48xf32> {{meg.name = "flat"}}) {{
    %wu = meg.param_ref @up : tensor<12x8xf32>
    %u = meg.linear %x, %wu {{meg.tp_layer = #meg.tp_layer<column>}} : tensor<4x8xf32>, tensor<12x8xf32>
    %sc = meg.param_ref @scale : tensor<12xf32>
    %m = meg.mul %u, %sc : tensor<4x12xf32>, tensor<12xf32>
    %a = meg.silu %m : tensor<4x12xf32>
    %s = meg.reduce sum %a dims [1] keep_dims : tensor<4x12xf32>
    %flat = meg.reshape %a : tensor<4x12xf32> to tensor<48xf32>
    %wd = meg.param_ref @down : tensor<8x12xf32>
    %y = meg.linear %a, %wd {{meg.tp_layer = #meg.tp_layer<row>}} : tensor<4x12xf32>, tensor<8x12xf32>
    return %y, %s, %flat : tensor<4x8xf32>, tensor<4x1xf32>, tensor<48xf32>
  }}
  func.func @loss(%x: tensor<4x8xf32> {{meg.name = "x"}}, %t: tensor<4x8xf32> {{meg.name = "target"}}) -> (tensor<f32> {{meg.name = "loss"}}) {{
    %y, %s, %flat = call @forward(%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<48xf32>)
    %d = meg.sub %y, %t : tensor<4x8xf32>, tensor<4x8xf32>
    %d2 = meg.mul %d, %d : tensor<4x8xf32>, tensor<4x8xf32>
    %l1 = meg.reduce mean %d2 dims [0, 1] : tensor<4x8xf32>
    %s2 = meg.mul %s, %s : tensor<4x1xf32>, tensor<4x1xf32>
    %l2 = meg.reduce mean %s2 dims [0, 1] : tensor<4x1xf32>
    %f2 = meg.mul %flat, %flat : tensor<48xf32>, tensor<48xf32>
    %l3 = meg.reduce mean %f2 dims [0] : tensor<48xf32>
    %l12 = meg.add %l1, %l2 : tensor<f32>, tensor<f32>
    %l = meg.add %l12, %l3 : tensor<f32>, tensor<f32>
    return %l : tensor<f32>
  }}
}}
"""
GENERIC_LAYOUT = (
    ', meg.tensor_parallel = #meg.tensor_parallel<mesh = @world, '
    'axes = ["tp"]>',
    "  meg.mesh @world [tp = 2]\n  meg.submesh @world[tp]\n")


def generic_rules(tmp):
    """The hand-written model on tp=2 against one rank; True if equal."""
    rng = np.random.default_rng(11)
    inputs = []
    for name in ("x", "target"):
        path = os.path.join(tmp, f"generic_{name}.npy")
        np.save(path, rng.standard_normal((4, 8)).astype(np.float32))
        inputs += ["--input", f"{name}={path}"]
    artifacts = {}
    for ranks, (layout, mesh) in ((1, ("", "")), (2, GENERIC_LAYOUT)):
        model = os.path.join(tmp, f"generic_{ranks}.mlir")
        with open(model, "w") as f:
            f.write(GENERIC_MODEL.format(layout=layout, mesh=mesh))
        artifacts[ranks] = os.path.join(tmp, f"generic_{ranks}.megc")
        e2e_util.run(["megc", model, "-o", artifacts[ranks]])
    want_losses, want_state = fsdp_equivalence.train(
        artifacts[1], inputs, os.path.join(tmp, "generic_1.safetensors"), 1,
        5)
    losses, state = fsdp_equivalence.train(
        artifacts[2], inputs, os.path.join(tmp, "generic_2.safetensors"), 2,
        5)
    loss_error = float(np.max(np.abs(losses - want_losses) /
                              np.abs(want_losses)))
    worst, worst_name = e2e_util.worst_state_error(state, want_state,
                                                   "generic")
    forward = [fsdp_equivalence.entry_outputs(
        artifacts[ranks], "forward", inputs[:2],
        os.path.join(tmp, f"generic_fw{ranks}"), ranks) for ranks in (1, 2)]
    outputs = max(e2e_util.relative_error(forward[1][name], forward[0][name])
                  for name in forward[0])
    ok = max(loss_error, worst, outputs) < TOLERANCE
    print(f"{'generic rules tp=2':28s} 2 ranks: loss rel err "
          f"{loss_error:.2e}, state rel err {worst:.2e} ({worst_name}), "
          f"forward outputs rel err {outputs:.2e}"
          + ("" if ok else "  FAILED"))
    return ok


def run_ranks(ranks, args):
    result = mpi_util.run_ranks(ranks, args)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} on {ranks} ranks failed "
                 f"({result.returncode}):\n{result.stdout}{result.stderr}")


def main():
    options = e2e_util.parse_options()
    tmp = options.tmp
    rng = np.random.default_rng(5)
    inputs = []
    for name in ("input_ids", "labels"):
        path = os.path.join(tmp, name + ".npy")
        np.save(path, rng.integers(0, 64, (4, 8)).astype(np.int32))
        inputs += ["--input", f"{name}={path}"]

    def compile_model(tag, command, compile_flags=()):
        model = os.path.join(tmp, tag + ".mlir")
        artifact = os.path.join(tmp, tag + ".megc")
        e2e_util.run([*command, "-o", model])
        e2e_util.run(["megc", model, *compile_flags, "-o", artifact])
        return artifact

    references = {}

    def reference(flags, steps=STEPS):
        key = tuple(flags)
        if key not in references:
            tag = f"single{len(references)}"
            single = compile_model(tag, ["megc", "gen", "llama",
                                         *model_flags(flags)])
            losses, state = fsdp_equivalence.train(
                single, inputs, os.path.join(tmp, tag + ".safetensors"), 1,
                steps)
            if not losses[-1] < losses[0]:
                sys.exit(f"single-rank loss does not fall: {losses}")
            references[key] = (single, losses, state)
        return references[key]

    def compare(name, ranks, single, want_losses, want_state, artifact,
                flags=(), steps=STEPS, tolerance=TOLERANCE):
        # With micro-batches the forward entry takes one micro-batch.
        return fsdp_equivalence.compare_with_one_rank(
            name, ranks, artifact, single, want_losses, want_state, inputs,
            tmp, steps, tolerance, forward="--micro-batches" not in flags)

    failed = False
    for configs, steps, tolerance, compile_flags in (
            (CONFIGS, STEPS, TOLERANCE, []),
            (BF16_CONFIGS, BF16_STEPS, BF16_TOLERANCE, []),
            (GRAPH_CONFIGS, STEPS, TOLERANCE, CAPTURE),
            (LOSS_CHUNK_CONFIGS, STEPS, TOLERANCE, LOSS_CHUNKS),
            (BOTH_TARGET_CONFIGS, STEPS, TOLERANCE, BOTH_TARGETS)):
        for name, mesh, flags in configs:
            if options.only and options.only not in name:
                continue
            ranks = int(np.prod([int(a.split("=")[1])
                                 for a in mesh.split(",")]))
            single, want_losses, want_state = reference(
                reference_flags(flags), steps)
            tag = name.replace(" ", "_").replace("=", "").replace("+", "")
            artifact = compile_model(tag, ["megc", "gen", "llama",
                                           *model_flags(flags), "--mesh",
                                           mesh],
                                     compile_flags)
            failed |= not compare(name, ranks, single, want_losses,
                                  want_state, artifact, flags, steps,
                                  tolerance)

    # Imported models: llama-bias (column biases split with their weights,
    # row biases added once after the reduction; with sequence parallelism
    # added to each rank's sequence block, so their gradients are summed
    # over tp) and qwen3 (per-head q/k norms, whose weights every rank
    # applies to its own heads, and tied embeddings).
    for case, flags in (("llama-bias", []), ("llama-bias", [SP]),
                        ("qwen3", []), ("qwen3", [SP])):
        name = f"imported {case} tp=2" + (" sp" if flags else "")
        if options.only and options.only not in name:
            continue
        imported = ["megc", "import", os.path.join(FIXTURES, case), "--seq",
                    "8", "--batch", "4", "--train", *IMPORTED_ADAM]
        single = compile_model(f"{case}_single", imported)
        want_losses, want_state = fsdp_equivalence.train(
            single, inputs, os.path.join(tmp, f"{case}_single.safetensors"),
            1)
        artifact = compile_model(f"{case}_tp2{'_sp' if flags else ''}",
                                 [*imported, "--mesh", "tp=2", *flags])
        failed |= not compare(name, 2, single, want_losses, want_state,
                              artifact)

    if not options.only or "generic" in options.only:
        failed |= not generic_rules(tmp)

    if not options.only or "checkpoint" in options.only:
        # A tp run saves whole Hugging Face tensors; loading them into a tp
        # run takes each rank's block again.
        single = reference([])[0]
        artifact = compile_model("checkpoint_tp2", ["megc", "gen", "llama",
                                                    *MODEL, "--mesh", "tp=2"])
        saved = os.path.join(tmp, "tp_weights")
        run_ranks(2, ["megc-run", artifact, "--entry", "train_step",
                      "--params", "init:3", "--steps", "2", "--save-params", saved + "/",
                      *inputs])
        one = os.path.join(tmp, "one_weights")
        e2e_util.run(["megc-run", single, "--entry", "train_step", "--params",
                      "init:3", "--steps", "2", "--save-params", one + "/", *inputs])
        worst = 0.0
        for file in ("model.safetensors",):
            got = e2e_util.read_safetensors(os.path.join(saved, file))
            want = e2e_util.read_safetensors(os.path.join(one, file))
            worst = max(worst, e2e_util.worst_state_error(
                got, want, "checkpoint")[0])
        out1 = os.path.join(tmp, "ck_fw1")
        e2e_util.run(["megc-run", single, "--entry", "forward", "--params",
                      one, "--output-dir", out1, *inputs[:2]])
        want = e2e_util.read_output(os.path.join(out1, "logits.npy"))
        # Into tp blocks, and into FSDP pieces of tp blocks.
        pieces = compile_model("checkpoint_fsdp_tp2", [
            "megc", "gen", "llama", *MODEL, "--mesh", "dp_shard=2,tp=2",
            "--fsdp", "optim_grads_params"])
        logits = 0.0
        for ranks, model in ((2, artifact), (4, pieces)):
            outN = os.path.join(tmp, f"ck_fw{ranks}")
            run_ranks(ranks, ["megc-run", model, "--entry", "forward",
                              "--params", one, "--output-dir", outN,
                              *inputs[:2]])
            logits = max(logits, e2e_util.relative_error(
                e2e_util.read_output(os.path.join(outN, "logits.npy")), want))
        ok = max(worst, logits) < TOLERANCE
        print(f"{'checkpoint save and load':28s} 2, 4 ranks: saved weights "
              f"rel err {worst:.2e}, logits from one rank's checkpoint (tp=2; "
              f"dp_shard=2 x tp=2 optim_grads_params) rel err {logits:.2e}"
              + ("" if ok else "  FAILED"))
        failed |= not ok

    if failed:
        sys.exit("some configurations differ from one rank by more than "
                 f"{TOLERANCE} (f32) or {BF16_TOLERANCE} (bf16)")
    print(f"all tensor-parallel configurations equal one rank within "
          f"{TOLERANCE} (f32; {BF16_TOLERANCE} bf16 weights, f32 masters)")


if __name__ == "__main__":
    main()
