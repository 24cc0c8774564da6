"""Benchmark: FSDP strategies at 4 ranks on the CPU, relative to no_shard,
in one run on one machine.

For each strategy (no_shard, optim, optim_grads, optim_grads_params over
dp_shard = 4, plus HSDP dp_outer = 2 x dp_shard = 2 with outer optim), one
llama model (4 layers x 256, seq 128, global batch 8, f32) is compiled with
`megc gen --mesh --fsdp` and trained under `mpirun -n 4 --oversubscribe`.
Reported per strategy: the median train_step time (rank 0's `median step
ms` line, after warm-up), the bytes each rank sends per step (ring
algorithms, from `megc inspect`), each rank's parameter and optimizer
state bytes (`megc inspect`), the train_step arena (intermediates,
gathered weights and whole gradients included), and the measured peak
resident memory of the ranks (ru_maxrss of each megc-run, through a small
wrapper; the median over the ranks, as the touched pages of Open MPI's
shared-memory transport make single ranks noisy); then each as a ratio
to no_shard. Four ranks share this
machine's cores, so step times include that contention.

Usage: python3 bench/fsdp_cpu.py --build build [--steps 6] [--layers 4]
"""
import argparse
import os
import shutil
import tempfile

from mpi_bench import Bench

STRATEGIES = [
    ("no_shard", "dp_shard=4", ["--fsdp", "no_shard"]),
    ("optim", "dp_shard=4", ["--fsdp", "optim"]),
    ("optim_grads", "dp_shard=4", ["--fsdp", "optim_grads"]),
    ("optim_grads_params", "dp_shard=4", ["--fsdp", "optim_grads_params"]),
    # Smaller buckets: each reduce-scatter starts when its layers'
    # gradients exist, and the whole gradients die after it.
    ("optim_grads_params 1 MB", "dp_shard=4",
     ["--fsdp", "optim_grads_params", "--bucket-mb", "1"]),
    ("hsdp 2x2 outer optim", "dp_outer=2,dp_shard=2",
     ["--fsdp", "optim_grads_params", "--outer-fsdp", "optim"]),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="fsdp-bench-")
    bench = Bench(options.build, tmp, ranks=4, vocab=512, batch=8, seq=128)
    model_flags = ["--layers", str(options.layers), "--hidden",
                   str(options.hidden), "--heads", "4", "--ffn",
                   str(options.hidden * 3), "--seq", "128", "--vocab", "512",
                   "--batch", "8", "--train"]

    rows = []
    for name, mesh, flags in STRATEGIES:
        artifact, figures = bench.compile(name.replace(" ", "_"),
                                          [*model_flags, "--mesh", mesh,
                                           *flags])
        median, peak = bench.train(artifact, options.steps)
        rows.append((name, median, figures["sent"], figures["weights"],
                     figures["state"], figures["arena"], peak))
    base = rows[0]
    print(f"llama {options.layers} x {options.hidden}, seq 128, global batch "
          f"8, f32, 4 ranks on {os.cpu_count()} cores; ratios to no_shard; "
          "rest = peak RSS - weights - state - arena (code, libraries, MPI)")
    print(f"{'strategy':24s} {'step ms':>9s} {'x':>6s} {'sent MB':>8s} "
          f"{'x':>6s} {'weights MB':>10s} {'state MB':>9s} {'x':>6s} "
          f"{'arena MB':>9s} {'median peak RSS MB':>18s} {'x':>6s} "
          f"{'rest MB':>8s}")
    for name, median, sent, weights, state, arena, peak in rows:
        print(f"{name:24s} {median:9.1f} {median / base[1]:6.2f} "
              f"{sent:8.2f} {sent / base[2] if base[2] else 0:6.2f} "
              f"{weights:10.2f} {state:9.2f} "
              f"{(weights + state) / (base[3] + base[4]):6.2f} "
              f"{arena:9.2f} {peak:18.1f} {peak / base[6]:6.2f} "
              f"{peak - weights - state - arena:8.1f}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
