"""Benchmark: `megc plan`'s predicted step time against the measured one on
this machine, in one run.

1. Calibration: a 1-rank llama is compiled and run with `megc-run --trace`
   (one thread), and `megc plan --calibrate` fits the shipped `cpu` cluster
   file's efficiencies to that trace.
2. For llama and DeepSeek-V3 models at 1, 2 and 4 ranks over data
   parallelism (replicated and FSDP-sharded), tensor, context, pipeline
   (1f1b and zb-h1 over 4 micro-batches) and expert parallelism: the step time `megc plan` predicts from the calibrated
   cluster against rank 0's measured median train_step under mpirun (one
   thread per rank), and the bytes each rank sends per step as the plan
   counts them against `megc inspect`'s count of the artifact (printed in
   MB to 3 decimals).

This machine has 2 cores: 4 ranks share them, two to a core, so their
prediction (one device per rank) is scaled by ranks / cores, as stated in
the table.

Usage: python3 bench/plan_cpu.py --build build [--steps 6] [--only NAME-PART]
"""
import argparse
import json
import os
import re
import shutil
import tempfile

from mpi_bench import Bench, run

LLAMA = ["--layers", "2", "--hidden", "256", "--heads", "8", "--kv-heads",
         "2", "--ffn", "512", "--vocab", "512", "--seq", "512", "--batch", "4",
         "--train"]
DEEPSEEK = ["--layers", "2", "--dense-layers", "1", "--hidden", "256",
            "--heads", "8", "--vocab", "512", "--seq", "256", "--batch", "4",
            "--experts", "8", "--top-k", "2", "--expert-groups", "1",
            "--top-groups", "1", "--moe-ffn", "256", "--ffn", "512", "--train"]
# (name, preset, gen flags, ranks)
LAYOUTS = [
    ("llama 1 rank", "llama", LLAMA, 1),
    ("llama dp_shard=2", "llama", LLAMA + ["--mesh", "dp_shard=2"], 2),
    ("llama dp_shard=2 optim_grads_params", "llama",
     LLAMA + ["--mesh", "dp_shard=2", "--fsdp", "optim_grads_params"], 2),
    ("llama tp=2", "llama", LLAMA + ["--mesh", "tp=2"], 2),
    ("llama cp=2", "llama", LLAMA + ["--mesh", "cp=2"], 2),
    ("llama dp_shard=2,tp=2", "llama",
     LLAMA + ["--mesh", "dp_shard=2,tp=2"], 4),
    ("llama pp=2 1f1b M=4", "llama",
     LLAMA + ["--mesh", "pp=2", "--micro-batches", "4"], 2),
    ("llama pp=2 zb-h1 M=4", "llama",
     LLAMA + ["--mesh", "pp=2", "--micro-batches", "4", "--pp-schedule",
              "zb-h1"], 2),
    ("deepseek 1 rank", "deepseek", DEEPSEEK, 1),
    ("deepseek ep=2", "deepseek", DEEPSEEK + ["--mesh", "ep=2"], 2),
    ("deepseek dp_shard=2,ep=2", "deepseek",
     DEEPSEEK + ["--mesh", "dp_shard=2,ep=2"], 4),
]
CORES = os.cpu_count() or 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--only", default="",
                        help="run only the layouts whose name contains this")
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="plan-bench-")
    megc = os.path.join(os.path.abspath(options.build), "bin", "megc")

    # 1. Calibration from one 1-rank trace.
    one = Bench(options.build, tmp, ranks=1, vocab=512, batch=4, seq=512)
    artifact, _ = one.compile("calibration", LLAMA)
    trace = os.path.join(tmp, "calibration-trace.json")
    run([one.megc_run, artifact, "--entry", "train_step", "--params",
         "init:1", "--threads", "1", "--warmup", "2", "--steps",
         str(options.steps), "--trace", trace, *one.inputs], timeout=1800)
    cluster = os.path.join(tmp, "cpu-calibrated.json")
    notes = run([megc, "plan", os.path.join(tmp, "calibration.mlir"),
                 "--cluster", "cpu", "--calibrate", trace, "-o",
                 cluster]).stdout
    print("calibration from a 1-rank llama trace:")
    for line in notes.splitlines():
        # The fit's notes come before the plan of the calibration model.
        if "on this machine" in line:
            break
        print("  " + line)

    # 2. Predicted against measured.
    print(f"{'layout':38s} {'ranks':>5s} {'measured ms':>11s} "
          f"{'predicted ms':>12s} {'pred/meas':>9s} {'sent MB':>8s} "
          f"{'plan sent MB':>12s}")
    for name, preset, flags, ranks in LAYOUTS:
        if options.only not in name:
            continue
        seq = int(flags[flags.index("--seq") + 1])
        vocab = int(flags[flags.index("--vocab") + 1])
        bench = Bench(options.build, tmp, ranks=ranks, vocab=vocab, batch=4,
                      seq=seq)
        bench.extra = ["--threads", "1"]
        tag = re.sub(r"[^a-z0-9]+", "_", name)
        artifact, figures = bench.compile(tag, flags, preset)
        measured, _ = bench.train(artifact, options.steps)
        plan = json.loads(run([megc, "plan", os.path.join(tmp, tag + ".mlir"),
                               "--cluster", cluster, "--json"]).stdout)
        shared = max(1.0, ranks / CORES)
        predicted = plan["step_s"] * 1e3 * shared
        print(f"{name:38s} {ranks:5d} {measured:11.2f} {predicted:12.2f} "
              f"{predicted / measured:9.3f} {figures['sent']:8.3f} "
              f"{plan['bytes_sent_per_rank'] / 1e6:12.6f}"
              + (f"  (x{shared:g}: {ranks} ranks on {CORES} cores)"
                 if shared > 1 else ""))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
