"""Benchmark: context parallelism on the CPU, in one run on one machine.

1. Bytes sent per rank per step (`megc inspect`, ring algorithms: an
   all-gather or a reduce-scatter of n bytes over g ranks sends (g - 1) / g
   * n, an all-reduce twice that, a shift all of its n) for both
   algorithms, each against its textbook volume computed here from the
   model's shapes: per layer, with kv the bytes of the whole sequence's keys
   and values, the all-gather algorithm sends 2 (cp - 1) / cp * kv (keys
   and values gathered over cp in the forward, their gradients
   reduce-scattered in the backward), the ring 3 (cp - 1) / cp * kv (the
   blocks passed on C - 1 times forward, again backward, and their
   gradients C - 1 times); plus, for both, the gradients all-reduced over
   the data-parallel group that cp joins (2 (cp - 1) / cp * 4 bytes per
   parameter).
2. Each rank's planned activation memory: the train_step arena of the
   static memory plan (`megc inspect`, before anything runs) for sequences
   of 4K, 8K and 16K tokens at cp = 1, 2, 4, for both algorithms, and how
   it compares to 1/cp of cp = 1's. What does not fall as 1/cp under the
   all-gather algorithm is the keys and values gathered whole for each
   layer's attention (kept for the backward), and for both the whole token
   inputs.
3. Step time of a model whose attention dominates (1 layer, hidden 128, 8
   heads of 16, seq 4096) trained on 2 ranks with cp = 2 (each algorithm),
   one thread each, against 1 rank with one thread (the same cores per
   rank: the scaling) and with two (the same machine: the two cores either
   way); rank 0's median train_step after warm-up.

Usage: python3 bench/cp_cpu.py --build build [--steps 4]
"""
import argparse
import os
import re
import shutil
import tempfile

from mpi_bench import Bench, run

MB = 1e6
# Part 1 and 2: a small llama with grouped-query attention.
LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, BATCH = 2, 256, 8, 2, 512, 512, 1
HEAD_DIM = HIDDEN // HEADS


def model(seq, layers=LAYERS, hidden=HIDDEN, heads=HEADS, kv_heads=KV_HEADS,
          ffn=FFN, vocab=VOCAB, batch=BATCH):
    return ["--layers", str(layers), "--hidden", str(hidden), "--heads",
            str(heads), "--kv-heads", str(kv_heads), "--ffn", str(ffn),
            "--seq", str(seq), "--vocab", str(vocab), "--batch", str(batch),
            "--train"]


def parameters():
    kv = KV_HEADS * HEAD_DIM
    layer = (2 * HIDDEN + HIDDEN * HIDDEN * 2 + 2 * kv * HIDDEN +
             3 * HIDDEN * FFN)
    return 2 * VOCAB * HIDDEN + HIDDEN + LAYERS * layer


def textbook_sent(seq, cp, algorithm):
    """Bytes one rank sends per step (f32)."""
    if cp == 1:
        return 0.0
    share = (cp - 1) / cp
    # Keys and values of the whole sequence.
    kv_bytes = 2 * BATCH * seq * KV_HEADS * HEAD_DIM * 4
    gradients = 2 * share * 4 * parameters()
    if algorithm == "allgather":
        attention = LAYERS * 2 * share * kv_bytes
    else:
        attention = LAYERS * 3 * share * kv_bytes
    return attention + gradients


ALGORITHMS = ("allgather", "ring")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=4)
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="cp-bench-")
    print(f"llama {LAYERS} x {HIDDEN}, {HEADS} heads ({KV_HEADS} KV heads of "
          f"{HEAD_DIM}), ffn {FFN}, vocab {VOCAB}, batch {BATCH}, f32")

    # 1 and 2: compiled only (no run needs the ranks).
    arenas = {}
    print(f"{'seq':>6s} {'cp':>3s} {'algorithm':>9s} {'sent MB':>8s} "
          f"{'textbook':>9s} {'arena MB':>9s} {'x cp=1':>7s} {'1/cp':>6s}")
    for seq in (4096, 8192, 16384):
        for cp in (1, 2, 4):
            for algorithm in ALGORITHMS if cp > 1 else ("-",):
                bench = Bench(options.build, tmp, ranks=cp, vocab=VOCAB,
                              batch=BATCH, seq=seq)
                flags = model(seq)
                if cp > 1:
                    flags += ["--mesh", f"cp={cp}", "--cp-attention",
                              algorithm]
                _, figures = bench.compile(f"s{seq}_cp{cp}_{algorithm}",
                                           flags)
                sent = figures["sent"] if cp > 1 else 0.0
                arenas[(seq, cp, algorithm)] = figures["arena"]
                print(f"{seq:6d} {cp:3d} {algorithm:>9s} {sent:8.3f} "
                      f"{textbook_sent(seq, cp, algorithm) / MB:9.3f} "
                      f"{figures['arena']:9.2f} "
                      f"{figures['arena'] / arenas[(seq, 1, '-')]:7.3f} "
                      f"{1 / cp:6.3f}")

    # 3: attention-dominated step time, 2 ranks (cp = 2) against 1.
    seq = 4096
    flags = model(seq, layers=1, hidden=128, heads=8, kv_heads=8, ffn=256,
                  vocab=256)
    one = Bench(options.build, tmp, ranks=1, vocab=256, batch=BATCH, seq=seq)
    single, _ = one.compile("time_cp1", flags)
    two = Bench(options.build, tmp, ranks=2, vocab=256, batch=BATCH, seq=seq)
    splits = {algorithm: two.compile(f"time_cp2_{algorithm}",
                                     flags + ["--mesh", "cp=2",
                                              "--cp-attention",
                                              algorithm])[0]
              for algorithm in ALGORITHMS}
    print(f"step time, 1 layer x 128, 8 heads of 16, seq {seq} (attention "
          f"dominates), {os.cpu_count()} cores, rank 0's median train_step:")
    # The two ranks share the cores: one thread each.
    two.extra = ["--threads", "1"]
    medians = {algorithm: two.train(split, options.steps)[0]
               for algorithm, split in splits.items()}
    for threads in (1, 2):
        result = run([one.megc_run, single, "--entry", "train_step",
                      "--params", "init:1", "--threads", str(threads),
                      "--warmup", "2", "--steps", str(options.steps),
                      *one.inputs], timeout=3600)
        base = float(re.search(r"median step ms: ([\d.]+)",
                               result.stdout).group(1))
        for algorithm, median in medians.items():
            print(f"  1 rank, {threads} thread(s): {base:8.1f} ms; cp=2 "
                  f"{algorithm} on 2 ranks of 1 thread: {median:8.1f} ms; "
                  f"1 rank / cp=2 {base / median:.2f}x")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
