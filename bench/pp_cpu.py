"""Benchmark: pipeline parallelism on the CPU, in one run on one machine.

A llama whose stages cost the same (2 layers per stage, a vocabulary of 64
so that the embedding and the head add little to the first and last
stage; one sequence per micro-batch), trained on P ranks of one thread
each with pp = P under mpirun (P = 2: one rank per core; P = 4: waiting
ranks yield their core). Its layers are matrix products above all
(hidden 1024, ffn 4096, a sequence of 64), so that a layer's weight
gradients (W) cost about what its input gradients (B) and its forward (F)
do, as the zero-bubble schedules assume: ZB-H1's bubble over 1F1B's is
(F + B - W) / (F + B + W), a third with equal passes. With hidden 256 and
a sequence of 256 (this benchmark's shape until 2026-12-07) attention's
and the elementwise backward made B three times W on this CPU (8 against
2.6 ms a stage), which bounds that ratio near 0.72 whatever the order.

1. The bubble: each rank's idle fraction of its train_step, measured from
   the runtime's trace (the time in the waits for receives and for the
   pipeline group's all-reduces after the passes, over the step's time;
   median over the steps after two warm-up steps), against each schedule's
   formula: (P - 1) / (M + P - 1) of the step for 1F1B (the warm-up and
   cool-down with equal stages, the backward taking any multiple of the
   forward), and the measured ZB-H1 bubble as a share of 1F1B's (the paper's
   ZB-H1 bubble is (P - 1)(F + B - W) against (P - 1)(F + B + W), a third
   with equal F, B and W). 1F1B twice: as the textbook runs it, each
   backward sending after its weight gradients (`megc --no-early-sends`,
   "1f1b-late"), and as megc compiles it, each pass's sends started as
   soon as the values sent exist, before the pass's weight gradients and
   the last stage's updates ("1f1b"): that takes part of the zero-bubble
   gain, a bubble of about (P - 1)(F + B), so ZB-H1's share of it is about
   (F + B - W) / (F + B), a half with equal passes.
2. Bytes sent per rank per step, summed from the trace's send commands
   (the runtime's own counts), against the textbook volume: a stage sends
   its output of every micro-batch on (all but the last) and its input
   gradient back (all but the first), micro-batch x seq x hidden x 4 bytes
   each; plus the few all-reduced scalars (loss, non-finite count, step).
3. Stage 0's planned activation memory (`megc inspect`'s train_step arena
   of rank 0, before anything runs; a smaller model, hidden 256 and a
   sequence of 256, whose arena is its activations) at M and 2M
   micro-batches of the same size: 1F1B keeps P micro-batches in flight on stage 0, not M, so the
   arena stays put as M doubles.

Usage: python3 bench/pp_cpu.py --build build [--steps 6]
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import sys
import tempfile

from mpi_bench import Bench, run

HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, SEQ = 1024, 8, 8, 4096, 64, 64
# Part 3's model: its arena is mostly activations (with the timed model's
# weights, the optimizer step's gradients set the arena, not the passes).
MEMORY_SHAPE = dict(hidden=256, heads=4, kv_heads=2, ffn=512, seq=256)


def gen_flags(ranks, micro, schedule, shape=None):
    shape = shape or dict(hidden=HIDDEN, heads=HEADS, kv_heads=KV_HEADS,
                          ffn=FFN, seq=SEQ)
    return ["--layers", str(2 * ranks), "--hidden", str(shape["hidden"]),
            "--heads", str(shape["heads"]), "--kv-heads",
            str(shape["kv_heads"]), "--ffn", str(shape["ffn"]),
            "--vocab", str(VOCAB), "--seq", str(shape["seq"]), "--batch",
            str(micro),
            "--train", "--micro-batches", str(micro), "--mesh",
            f"pp={ranks}", "--pp-schedule", schedule]


def trace_figures(path, ranks):
    """Per rank: (median idle fraction of a train_step, median bytes sent
    per step, median idle ms of a step), from the trace files of one run
    (steps after the first two dropped)."""
    base, ext = os.path.splitext(path)
    figures = []
    for rank in range(ranks):
        name = path if rank == 0 else f"{base}.rank{rank}{ext}"
        with open(name) as f:
            data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
        steps = sorted((e for e in events if e.get("name") == "train_step"
                        and e.get("ph") == "X"), key=lambda e: e["ts"])[2:]
        idle, sent, idle_ms = [], [], []
        for step in steps:
            begin, end = step["ts"], step["ts"] + step["dur"]
            inside = [e for e in events if e.get("cat") == "collective"
                      and begin <= e["ts"] < end]
            waited = sum(e["dur"] for e in inside
                         if e["name"] in ("wait", "all_reduce"))
            idle.append(waited / step["dur"])
            idle_ms.append(waited / 1000)
            sent.append(sum(e["args"].get("bytes", 0) for e in inside
                            if e["name"] == "send"))
        figures.append((statistics.median(idle), statistics.median(sent),
                        statistics.median(idle_ms)))
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=8)
    options = parser.parse_args()
    if not shutil.which("mpirun"):
        sys.exit("pp_cpu.py needs mpirun (Open MPI)")
    tmp = tempfile.mkdtemp(prefix="pp_cpu.")
    print(f"llama, {HIDDEN} hidden, ffn {FFN}, seq {SEQ}, 2 layers per "
          f"stage, one sequence per micro-batch, one thread per rank")
    print("\n1. and 2. bubble (idle share of the step, worst rank) and "
          "bytes sent per step")
    print(f"{'P':>2} {'M':>3} {'schedule':>10} {'idle mean':>9} {'worst':>6} "
          f"{'idle ms':>7} {'1f1b formula':>12}"
          f" {'sent B/step (max rank)':>23} {'textbook':>9}")
    # 1f1b-late: 1F1B compiled with --no-early-sends, each pass sending
    # after all its work (the textbook 1F1B, whose backward sends after its
    # weight gradients); 1f1b: as megc compiles it, each pass's sends
    # started as soon as the values sent exist (before the pass's weight
    # gradients and, on the last stage, its updates).
    variants = (("1f1b-late", "1f1b", ["--no-early-sends"]),
                ("1f1b", "1f1b", []), ("zb-h1", "zb-h1", []))
    bubbles = {}
    for ranks, micro in ((2, 4), (2, 8), (4, 8)):
        for label, schedule, compile_flags in variants:
            bench = Bench(options.build, tmp, ranks=ranks, vocab=VOCAB,
                          batch=micro, seq=SEQ)
            artifact, _ = bench.compile(f"pp{ranks}_{micro}_{label}",
                                        gen_flags(ranks, micro, schedule),
                                        compile_flags=compile_flags)
            trace = os.path.join(tmp, f"trace_{ranks}_{micro}_{label}.json")
            for old in glob.glob(trace[:-5] + "*"):
                os.remove(old)
            run(bench.mpirun + [bench.megc_run, artifact, "--entry",
                                "train_step", "--params", "init:1",
                                "--threads", "1", "--steps",
                                str(options.steps), "--trace", trace,
                                *bench.inputs], timeout=1800)
            figures = trace_figures(trace, ranks)
            idle = max(figure[0] for figure in figures)
            mean = sum(figure[0] for figure in figures) / ranks
            mean_ms = sum(figure[2] for figure in figures) / ranks
            formula = (ranks - 1) / (micro + ranks - 1)
            activation = SEQ * HIDDEN * 4
            # The scalars all-reduced after the passes: a ring all-reduce
            # of 4 bytes sends 2 (P - 1) / P of them each (loss, non-finite
            # count, step count) -- counted by the runtime as collectives,
            # not sends, so not here.
            textbook = [activation * micro * ((rank < ranks - 1) +
                                              (rank > 0))
                        for rank in range(ranks)]
            measured = [int(figure[1]) for figure in figures]
            bubbles[(ranks, micro, label)] = mean
            print(f"{ranks:>2} {micro:>3} {label:>10} {mean:>9.3f} "
                  f"{idle:>6.3f} {mean_ms:>7.1f} "
                  f"{formula:>12.3f} {max(measured):>23} "
                  f"{max(textbook):>9}"
                  + ("" if measured == textbook else
                     f"  DIFFERS per rank {measured} vs {textbook}"))
    for ranks, micro in ((2, 4), (2, 8), (4, 8)):
        zb = bubbles[(ranks, micro, "zb-h1")]
        late = zb / max(bubbles[(ranks, micro, "1f1b-late")], 1e-9)
        early = zb / max(bubbles[(ranks, micro, "1f1b")], 1e-9)
        print(f"P={ranks} M={micro}: zb-h1 bubble / 1f1b bubble (mean idle "
              f"share of the ranks) = {late:.2f} against the textbook "
              f"1F1B (1f1b-late), {early:.2f} against megc's 1f1b")

    print("\n3. stage 0's planned activation memory (train_step arena, "
          "rank 0) as M doubles, micro-batches of one sequence, hidden "
          f"{MEMORY_SHAPE['hidden']}, seq {MEMORY_SHAPE['seq']}")
    for ranks, micro in ((2, 4), (4, 8)):
        arenas = []
        for m in (micro, 2 * micro):
            bench = Bench(options.build, tmp, ranks=ranks, vocab=VOCAB,
                          batch=m, seq=MEMORY_SHAPE["seq"])
            _, figures = bench.compile(f"mem{ranks}_{m}",
                                       gen_flags(ranks, m, "1f1b",
                                                 MEMORY_SHAPE))
            arenas.append(figures["arena"])
        print(f"P={ranks}: M={micro} {arenas[0]:.3f} MB, M={2 * micro} "
              f"{arenas[1]:.3f} MB (ratio {arenas[1] / arenas[0]:.3f}; "
              f"holding M micro-batches would double it)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
