"""End to end: recomputation under sharding changes where activations and
weights come from, not their values. For each layout (FSDP's
optim_grads_params with one and with two micro-batches, sequence
parallelism, a pipeline with FSDP), a llama trained five steps under
mpirun with --recompute=full ends with bitwise the same losses and
training state as the same layout without recomputation. Under FSDP the
recomputed forward gathers its weights in the backward (the backward's
own gathers where the weight has one) instead of keeping the forward's;
under sequence parallelism it gathers each layer's input again; and the
compiled plan shows the memory saved."""
import argparse
import os
import re
import sys

import numpy as np

import e2e_util
import mpi_util

# Long enough sequences that activations, not weights, make the peak.
MODEL = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
         "--ffn", "176", "--vocab", "256", "--seq", "128", "--train",
         "--lr", "0.01"]
STEPS = 5

# (name, ranks, gen flags)
LAYOUTS = [
    ("fsdp", 2, ["--batch", "4", "--mesh", "dp_shard=2",
                 "--fsdp", "optim_grads_params"]),
    ("fsdp micro-batches", 2, ["--batch", "8", "--mesh", "dp_shard=2",
                               "--fsdp", "optim_grads_params",
                               "--micro-batches", "2"]),
    ("sequence parallel", 2, ["--batch", "2", "--mesh", "tp=2",
                              "--sequence-parallel"]),
    ("pipeline fsdp", 4, ["--batch", "8", "--mesh", "pp=2,dp_shard=2",
                          "--fsdp", "optim_grads_params",
                          "--micro-batches", "2"]),
]


def arena(artifact):
    """The largest train_step arena over the ranks' programs, in bytes."""
    text = e2e_util.run(["megc", "inspect", artifact])
    most, entry = 0.0, None
    for line in text.splitlines():
        if line.startswith("entry "):
            entry = line.split()[1].split("(")[0]
        found = re.search(r"memory plan: arena ([0-9.]+) MB", line)
        if found and entry == "train_step":
            most = max(most, float(found.group(1)))
    return most


def write_tokens(path):
    """Random token ids (uint16, a raw token file) for every step's
    windows."""
    rng = np.random.default_rng(5)
    rng.integers(0, 256, size=STEPS * 8 * 129 + 1,
                 dtype=np.uint16).tofile(path)


def train(artifact, ranks, tmp, tag):
    state = os.path.join(tmp, f"{tag}.safetensors")
    args = ["megc-run", artifact, "--entry", "train_step", "--params",
            "init:3", "--data", os.path.join(tmp, "tokens.bin"), "--steps", str(STEPS),
            "--save-state", state]
    result = mpi_util.run_ranks(ranks, args)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} on {ranks} ranks failed "
                 f"({result.returncode}):\n{result.stdout}{result.stderr}")
    losses = [line.split(" loss ")[1].split()[0]
              for line in result.stdout.splitlines() if " loss " in line]
    if len(losses) != STEPS:
        sys.exit(f"{tag}: expected {STEPS} loss lines, got:\n{result.stdout}")
    with open(state, "rb") as f:
        return losses, f.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--only", help="run the layouts whose name has this")
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    write_tokens(os.path.join(options.tmp, "tokens.bin"))
    for name, ranks, flags in LAYOUTS:
        if options.only and options.only not in name:
            continue
        tag = name.replace(" ", "_")
        model = os.path.join(options.tmp, f"{tag}.mlir")
        e2e_util.run(["megc", "gen", "llama", *MODEL, *flags, "-o", model])
        results = {}
        arenas = {}
        for mode in ("none", "full"):
            artifact = os.path.join(options.tmp, f"{tag}_{mode}.megc")
            e2e_util.run(["megc", model, f"--recompute={mode}", "-o",
                          artifact])
            arenas[mode] = arena(artifact)
            results[mode] = train(artifact, ranks, options.tmp,
                                  f"{tag}_{mode}")
        if results["full"][0] != results["none"][0]:
            sys.exit(f"{name}: losses differ: {results['none'][0]} without "
                     f"recomputation, {results['full'][0]} with")
        if results["full"][1] != results["none"][1]:
            sys.exit(f"{name}: the training state differs with "
                     f"recomputation")
        if not arenas["full"] < arenas["none"]:
            sys.exit(f"{name}: recomputation does not shrink the arena "
                     f"({arenas['none']} MB -> {arenas['full']} MB)")
        print(f"{name}: {ranks} ranks, {STEPS} steps bitwise equal, "
              f"arena {arenas['none']:.3f} MB -> {arenas['full']:.3f} MB")


if __name__ == "__main__":
    main()
