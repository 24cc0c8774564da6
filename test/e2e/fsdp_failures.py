"""Multi-rank failures end with a clear error, never a hang: a world size
that does not match the artifact's mesh (one process, or too few ranks),
ranks that loaded different artifacts, a rank that stalls mid-run (the
others give up after the communication timeout) and a rank killed mid-run
(the others exit non-zero within a bounded time)."""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

import e2e_util
import mpi_util

MODEL = ["--hidden", "32", "--heads", "4", "--kv-heads", "2", "--ffn", "48",
         "--seq", "8", "--vocab", "61", "--batch", "8", "--train"]


def expect_failure(what, result, message, elapsed=None, limit=None):
    output = result.stdout + result.stderr
    if result.returncode == 0:
        sys.exit(f"{what}: exited 0, expected a failure:\n{output}")
    if message not in output:
        sys.exit(f"{what}: the output does not say '{message}':\n{output}")
    if limit is not None and elapsed > limit:
        sys.exit(f"{what}: took {elapsed:.1f} s, more than {limit} s")
    took = f" after {elapsed:.1f} s" if elapsed is not None else ""
    print(f"{what}: exit {result.returncode}{took}, says '{message}'")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    tmp = options.tmp

    def compile_model(tag, extra):
        model = os.path.join(tmp, tag + ".mlir")
        artifact = os.path.join(tmp, tag + ".megc")
        e2e_util.run(["megc", "gen", "llama", *MODEL, *extra, "-o", model])
        e2e_util.run(["megc", model, "-o", artifact])
        return artifact

    four = compile_model("four", ["--layers", "2", "--mesh", "dp_shard=4",
                                  "--fsdp", "optim_grads_params"])
    two_a = compile_model("two_a", ["--layers", "1", "--mesh", "dp_shard=2"])
    two_b = compile_model("two_b", ["--layers", "2", "--mesh", "dp_shard=2"])
    rng = np.random.default_rng(3)
    inputs = []
    for name in ("input_ids", "labels"):
        path = os.path.join(tmp, name + ".npy")
        np.save(path, rng.integers(0, 61, (8, 8)).astype(np.int32))
        inputs += ["--input", f"{name}={path}"]
    step = ["--entry", "train_step", "--params", "init:1", *inputs]

    result = subprocess.run(["megc-run", four, *step, "--steps", "1"],
                            capture_output=True, text=True, timeout=120)
    expect_failure("4-rank artifact in one process", result,
                   "needs 4 ranks, but this run has 1")
    result = mpi_util.run_ranks(2, ["megc-run", four, *step, "--steps", "1"],
                                timeout=120)
    expect_failure("4-rank artifact on 2 ranks", result,
                   "needs 4 ranks, but this run has 2")
    # Rank r loads two_a or two_b.
    choose = (f'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then a={two_a}; '
              f'else a={two_b}; fi; exec megc-run "$a" "$@"')
    result = mpi_util.run_ranks(
        2, ["sh", "-c", choose, "sh", *step, "--steps", "1"], timeout=120)
    expect_failure("different artifacts on the ranks", result,
                   "the ranks loaded different artifacts")

    # Rank 1 runs for a while, then stops (SIGSTOP) or dies (SIGKILL) in
    # the middle of its steps; the others must not wait forever. A stopped
    # rank is found through the communication timeout (there mpirun ends
    # the job once the survivors have failed); a killed one at once, by the
    # survivors watching their peers' processes, long before the timeout.
    script = ('megc-run "$@" & p=$!; '
              'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 2; '
              'kill -$SIG $p; fi; wait $p')
    run = ["sh", "-c", script, "sh", four, *step, "--steps", "1000000"]
    message = ("did not complete within 3 s; a peer rank may have died "
               "or stalled")
    env = dict(os.environ, MEGRT_COMM_TIMEOUT="3", SIG="STOP")
    start = time.monotonic()
    result = mpi_util.run_ranks(4, run, timeout=300, env=env)
    expect_failure("rank 1 stalls mid-run", result, message,
                   time.monotonic() - start, 120)

    died = (r"rank (\d): megc-run: error: \S+ \([^)]*\) on a group of 4 "
            r"ranks \(color 0\): (?:rank \d \([^)]*\), )*rank 1 \(pid "
            r"\d+ on host [^)]*\)(?:, rank \d \([^)]*\))* ha(?:s|ve) exited "
            r"during this collective")
    # mpirun told not to end the job when a rank exits non-zero: each of
    # the three survivors finds the dead peer itself and says so.
    env = dict(os.environ, MEGRT_COMM_TIMEOUT="100", SIG="KILL",
               OMPI_MCA_orte_abort_on_non_zero_status="0")
    start = time.monotonic()
    result = mpi_util.run_ranks(4, run, timeout=300, env=env)
    elapsed = time.monotonic() - start
    output = result.stdout + result.stderr
    survivors = sorted(set(re.findall(died, output)))
    if survivors != ["0", "2", "3"] or elapsed > 60:
        sys.exit(f"rank 1 killed mid-run: expected ranks 0, 2 and 3 to say "
                 f"that rank 1 exited within 60 s; {survivors} did, after "
                 f"{elapsed:.1f} s:\n{output}")
    print(f"rank 1 killed mid-run: ranks {', '.join(survivors)} said that "
          f"rank 1 exited, after {elapsed:.1f} s")
    # By default mpirun ends the job about a second after a rank dies: the
    # survivors that find the dead peer first (within 0.1 s) say so before.
    env.pop("OMPI_MCA_orte_abort_on_non_zero_status")
    start = time.monotonic()
    result = mpi_util.run_ranks(4, run, timeout=300, env=env)
    elapsed = time.monotonic() - start
    output = result.stdout + result.stderr
    survivors = sorted(set(re.findall(died, output)))
    if result.returncode == 0 or not survivors or elapsed > 60:
        sys.exit(f"rank 1 killed, mpirun's default: expected a survivor to "
                 f"say that rank 1 exited within 60 s; exit "
                 f"{result.returncode} after {elapsed:.1f} s:\n{output}")
    print(f"rank 1 killed, mpirun's default: ranks {', '.join(survivors)} "
          f"said that rank 1 exited, after {elapsed:.1f} s")

if __name__ == "__main__":
    main()
