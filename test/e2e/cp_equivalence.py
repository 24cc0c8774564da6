"""End to end: context parallelism trains like one rank. Ten llama
train_steps with every sequence split over cp = 2 and cp = 4 ranks under
mpirun (causal load balancing: rank i holds chunks i and 2 cp - 1 - i of
2 cp; attention over the keys and values gathered over cp, each query
masked by its position), with grouped-query attention of fewer KV heads
than ranks, with clipping and a cosine learning-rate schedule, with
micro-batches, composed with data parallelism (dp_shard = 2 replicas, and
FSDP's optim_grads_params sharding over dp_shard x cp) and with tensor and
sequence parallelism (tp = 2), with selective or full recomputation, and
for imported models (llama-bias's q/k/v and o biases, qwen3's per-head
q/k norms and tied embeddings, DeepSeek-V3's MLA and MoE layer routing
each rank's tokens into its share of the experts' slots, with its
sequence-wise auxiliary loss, under expert parallelism and FSDP), and with the ring algorithm
(`--cp-attention ring`: the key and value blocks passed around the cp
ranks, partial results merged by their softmax statistics),
give the losses and the final training state (weights, moments, step) of
the single-rank artifact compiled from the same model, within f32
tolerance; bf16 weights with f32 master weights follow one rank within bf16
tolerance for three steps. The forward entry's logits, gathered over cp,
equal one rank's in the original token order."""
import os
import sys

import numpy as np

import e2e_util
import fsdp_equivalence

MODEL = ["--layers", "2", "--hidden", "32", "--heads", "8", "--kv-heads", "4",
         "--ffn", "48", "--seq", "16", "--vocab", "64", "--batch", "4",
         "--train", "--weight-decay", "0.1"]
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "hf-fixtures")
STEPS = 10
TOLERANCE = 1e-5
# As tp_equivalence's imported models: an AdamW eps that keeps the updates
# of gradient elements that are rounding noise in exact arithmetic small.
IMPORTED_ADAM = ["--adam-eps", "1e-5"]
SCHEDULE = ["--lr-schedule", "cosine", "--warmup-steps", "2",
            "--decay-steps", "10", "--min-lr", "1e-4"]

RING = ["--cp-attention", "ring"]
# (name, --mesh, extra gen flags[, compile flags])
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
    # Recomputation: the layers' attention recomputed in the backward from
    # the gathered keys and values (which are kept: collectives are not
    # recomputed).
    ("cp=2 recompute selective", "cp=2", [], ["--recompute=selective"]),
    ("cp=2 recompute full", "cp=2", [], ["--recompute=full"]),
    # Ring attention: the key and value blocks passed around the cp ranks,
    # the partial results merged by their softmax statistics.
    ("ring cp=2", "cp=2", RING),
    ("ring cp=4", "cp=4", RING),
    ("ring cp=4 kv-heads 2", "cp=4", [*RING, "--kv-heads", "2"]),
    ("ring cp=2 clip cosine 2 micro-batches", "cp=2",
     [*RING, "--clip-grad", "0.5", *SCHEDULE, "--micro-batches", "2"]),
    ("ring dp_shard=2 x cp=2 optim_grads_params", "dp_shard=2,cp=2",
     [*RING, "--fsdp", "optim_grads_params"]),
    ("ring cp=2 x tp=2 sp", "cp=2,tp=2", [*RING, "--sequence-parallel"]),
    ("ring cp=2 recompute selective", "cp=2", RING,
     ["--recompute=selective"]),
]
# bf16 weights with f32 master weights, three steps (rounding differences
# grow with every update; as tp_equivalence's bf16 runs): each cp rank
# rounds its partial gradients to bf16 before they are summed.
BF16 = ["--dtype", "bf16", "--precision", "main_params=f32"]
BF16_STEPS = 3
BF16_TOLERANCE = 5e-2
BF16_CONFIGS = [("bf16 cp=2", "cp=2", BF16),
                ("bf16 ring cp=2", "cp=2", [*BF16, *RING])]
MOE = ["--moe-bias-update-rate", "1e-2"]
# (fixture, --mesh, extra import flags)
IMPORTED = [
    ("llama-bias", "cp=2", []),
    ("qwen3", "cp=2", []),
    ("deepseek-v3", "cp=2", MOE),
    ("deepseek-v3", "cp=2", [*MOE, "--moe-aux-loss-coeff", "1.0"]),
    ("deepseek-v3", "cp=2", [*MOE, *RING]),
    ("deepseek-v3", "dp_shard=2,cp=2", [*MOE, "--fsdp", "optim_grads_params"]),
    ("deepseek-v3", "ep=2,cp=2", MOE),
]
LAYOUT_FLAGS = {"--sequence-parallel": 0, "--fsdp": 1, "--cp-attention": 1}


def main():
    options = e2e_util.parse_options()
    tmp = options.tmp
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
        return e2e_util.with_flags(MODEL, flags)

    def reference_flags(flags):
        return e2e_util.without_flags(flags, LAYOUT_FLAGS)

    def compile_model(tag, command, compile_flags=()):
        model = os.path.join(tmp, tag + ".mlir")
        artifact = os.path.join(tmp, tag + ".megc")
        e2e_util.run([*command, "-o", model])
        e2e_util.run(["megc", model, *compile_flags, "-o", artifact])
        return artifact

    references = {}

    def reference(flags, steps):
        key = (tuple(flags), steps)
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

    failed = False
    runs = [(config, STEPS, TOLERANCE) for config in CONFIGS] + \
        [(config, BF16_STEPS, BF16_TOLERANCE) for config in BF16_CONFIGS]
    for (name, mesh, flags, *compile_flags), steps, tolerance in runs:
        if options.only and options.only not in name:
            continue
        compile_flags = compile_flags[0] if compile_flags else []
        ranks = int(np.prod([int(a.split("=")[1]) for a in mesh.split(",")]))
        single, want_losses, want_state = reference(reference_flags(flags),
                                                    steps)
        tag = name.replace(" ", "_").replace("=", "")
        artifact = compile_model(tag, ["megc", "gen", "llama",
                                       *model_flags(flags), "--mesh", mesh],
                                 compile_flags)
        # With micro-batches the forward entry takes one micro-batch.
        ok = fsdp_equivalence.compare_with_one_rank(
            name, ranks, artifact, single, want_losses, want_state, inputs,
            tmp, steps, tolerance, forward="--micro-batches" not in flags)
        failed |= not ok
    # Imported models: llama-bias (q/k/v and o biases), qwen3 (per-head
    # q/k norms on this rank's tokens, tied embeddings) and DeepSeek-V3
    # (MLA; an MoE layer routing this rank's tokens into its share of each
    # expert's slots, the routing bias moved by the loads summed over dp x
    # cp; with the sequence-wise auxiliary loss, its per-sequence sums
    # added up over cp).
    for case, mesh, flags in IMPORTED:
        name = f"imported {case} {mesh}{' ' if flags else ''}" \
               f"{' '.join(flags)}"
        if options.only and options.only not in name:
            continue
        ranks = int(np.prod([int(a.split("=")[1]) for a in mesh.split(",")]))
        imported = ["megc", "import", os.path.join(FIXTURES, case), "--seq",
                    "16", "--batch", "4", "--train", *IMPORTED_ADAM]
        reference_tag = "_".join([case, "single", *flags]).replace(
            "-", "").replace(".", "")
        single = compile_model(reference_tag,
                               [*imported, *reference_flags(flags)])
        want_losses, want_state = fsdp_equivalence.train(
            single, inputs, os.path.join(tmp, reference_tag + ".safetensors"),
            1, STEPS)
        tag = name.replace(" ", "_").replace("=", "").replace(",", "_") \
            .replace("-", "").replace(".", "")
        artifact = compile_model(tag, [*imported, *flags, "--mesh", mesh])
        ok = fsdp_equivalence.compare_with_one_rank(
            name, ranks, artifact, single, want_losses, want_state, inputs,
            tmp, STEPS, TOLERANCE, forward=False)
        failed |= not ok
    if failed:
        sys.exit(f"some configurations differ from one rank by more than "
                 f"{TOLERANCE} (f32) or {BF16_TOLERANCE} (bf16)")
    print(f"all context-parallel configurations equal one rank within "
          f"{TOLERANCE} (f32; {BF16_TOLERANCE} bf16 weights, f32 masters)")


if __name__ == "__main__":
    main()
