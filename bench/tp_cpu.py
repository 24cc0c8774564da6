"""Benchmark: tensor-parallel layouts at 4 ranks on the CPU, against the
data-parallel baseline and against the textbook volumes, in one run on one
machine.

For each layout on 4 ranks (dp_shard = 4 with replicated parameters, the
baseline; tp = 4 and dp_shard = 2 x tp = 2, each with and without sequence
parallelism), one llama model (4 layers x 256,
4 heads, ffn 768, vocab 512, seq 128, global batch 8, f32) is compiled with
`megc gen --mesh` and trained under `mpirun -n 4 --oversubscribe`.
Reported per layout: the median train_step time (rank 0, after warm-up),
the bytes each rank sends per step as `megc inspect` counts them (ring
algorithms: an all-reduce of n bytes over g ranks sends 2 (g - 1) / g * n)
next to the textbook figure computed here from the model's shapes, each
rank's weights and optimizer state (`megc inspect`) next to theirs, the
train_step arena, and the measured peak resident memory (median over the
ranks of ru_maxrss). The textbook figures, per rank and step: the gradient
all-reduce over the data-parallel ranks of the parameters a rank holds,
plus, with tp, four all-reduces per layer and two more (the embedding's
rows forward, the LM head's input gradient backward) of one data-parallel
rank's activations [batch, seq, hidden] over the tp ranks, or with
sequence parallelism an all-gather and a reduce-scatter in place of each
(the same bytes), and the norm weights' gradients all-reduced, and the
vocab-parallel
cross-entropy's three all-reduces of [batch, seq] f32 values; the weights
a rank holds are the norms and 1/tp of everything else (embedding and LM
head vocab-parallel), and AdamW keeps two moments of each.
Four ranks share this machine's cores, so step times include that
contention.

Usage: python3 bench/tp_cpu.py --build build [--steps 6]
"""
import argparse
import os
import re
import shutil
import tempfile

from mpi_bench import Bench

LAYOUTS = [
    ("dp_shard=4 (replicated)", 4, 1, False),
    ("tp=4", 1, 4, False),
    ("tp=4 sp", 1, 4, True),
    ("dp_shard=2 x tp=2", 2, 2, False),
    ("dp_shard=2 x tp=2 sp", 2, 2, True),
]
LAYERS, HIDDEN, HEADS, FFN, VOCAB, SEQ, BATCH = 4, 256, 4, 768, 512, 128, 8
MB = 1e6


def textbook(dp, tp, sp):
    """(bytes sent per rank per step, weight bytes per rank) in f32."""
    norms = HIDDEN + LAYERS * 2 * HIDDEN
    split = 2 * VOCAB * HIDDEN + LAYERS * (4 * HIDDEN * HIDDEN +
                                           3 * HIDDEN * FFN)
    held = norms + split // tp
    share = (tp - 1) / tp
    sent = 2 * (dp - 1) / dp * 4 * held
    if tp == 1:
        return sent, 4 * held
    tokens = (BATCH // dp) * SEQ
    activations = tokens * HIDDEN * 4
    # Each all-reduce of activations (ring: 2 share n bytes) becomes an
    # all-gather and a reduce-scatter (share n each) with sequence
    # parallelism: the same bytes, and the norms' gradients on top.
    sent += 2 * share * activations * (4 * LAYERS + 2)
    if sp:
        sent += 2 * share * 4 * norms
    sent += 2 * share * 3 * tokens * 4
    return sent, 4 * held


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=6)
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="tp-bench-")
    bench = Bench(options.build, tmp, ranks=4, vocab=VOCAB, batch=BATCH,
                  seq=SEQ)
    model_flags = ["--layers", str(LAYERS), "--hidden", str(HIDDEN),
                   "--heads", str(HEADS), "--ffn", str(FFN), "--seq",
                   str(SEQ), "--vocab", str(VOCAB), "--batch", str(BATCH),
                   "--train"]

    rows = []
    for name, dp, tp, sp in LAYOUTS:
        tag = re.sub(r"[^a-z0-9]+", "_", name)
        mesh = ",".join(([f"dp_shard={dp}"] if dp > 1 else []) +
                        ([f"tp={tp}"] if tp > 1 else []))
        artifact, figures = bench.compile(
            tag, [*model_flags, "--mesh", mesh,
                  *(["--sequence-parallel"] if sp else [])])
        median, peak = bench.train(artifact, options.steps)
        want_sent, want_weights = textbook(dp, tp, sp)
        rows.append((name, median, figures["sent"], want_sent / MB,
                     figures["weights"], want_weights / MB, figures["state"],
                     figures["arena"], peak))
    base = rows[0]
    print(f"llama {LAYERS} x {HIDDEN}, {HEADS} heads, ffn {FFN}, vocab "
          f"{VOCAB}, seq {SEQ}, global batch {BATCH}, f32, 4 ranks on "
          f"{os.cpu_count()} cores; x: ratio to {base[0]}; textbook: see "
          "the docstring")
    print(f"{'layout':24s} {'step ms':>8s} {'x':>5s} {'sent MB':>8s} "
          f"{'textbook':>8s} {'weights MB':>10s} {'textbook':>8s} "
          f"{'state MB':>8s} {'arena MB':>8s} {'peak RSS MB':>11s} "
          f"{'x':>5s}")
    for (name, median, sent, want_sent, weights, want_weights, state, arena,
         peak) in rows:
        print(f"{name:24s} {median:8.1f} {median / base[1]:5.2f} "
              f"{sent:8.3f} {want_sent:8.3f} {weights:10.3f} "
              f"{want_weights:8.3f} {state:8.3f} {arena:8.2f} "
              f"{peak:11.1f} {peak / base[8]:5.2f}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
