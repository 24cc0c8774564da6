"""Ranks of one run that were given different options stop before the
first step, every rank at once, with an error naming the option and the
ranks: different --params seeds, --data files (as different content under
one name), --steps, --entry, --data-seed; the same options run."""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

import e2e_util
import mpi_util

MODEL = ["--layers", "1", "--hidden", "32", "--heads", "4", "--kv-heads",
         "2", "--ffn", "48", "--seq", "8", "--vocab", "61", "--batch", "4",
         "--train", "--mesh", "dp_shard=2"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    tmp = parser.parse_args().tmp
    os.makedirs(tmp, exist_ok=True)
    model, artifact = os.path.join(tmp, "m.mlir"), os.path.join(tmp, "m.megc")
    e2e_util.run(["megc", "gen", "llama", *MODEL, "-o", model])
    e2e_util.run(["megc", model, "-o", artifact])
    tokens = np.arange(400) % 61
    for rank in (0, 1):
        directory = os.path.join(tmp, f"rank{rank}")
        os.makedirs(directory, exist_ok=True)
        # Rank 1's file differs in its last token only.
        if rank == 1:
            tokens = tokens.copy()
            tokens[-1] = 7
        tokens.astype("<u2").tofile(os.path.join(directory, "tokens.bin"))
    common = [artifact, "--entry", "train_step", "--steps", "2"]
    data = ["--data", "$d/tokens.bin"]
    cases = [
        ("--params", ["--params", "init:$r"] + data,
         "the ranks differ in --params (rank 0 'init:0'; rank 1 'init:1')"),
        ("--data", data,
         "the ranks differ in --data (rank 0 '800 bytes, hash ...'; rank 1 "
         "'800 bytes, hash "),
        ("--steps", ["--params", "init:1"] + data + ["--steps", "$((r+2))"],
         "the ranks differ in --steps (rank 0 '2'; rank 1 '3')"),
        ("--entry", ["--params", "init:1", "--entry", "$e"] + data,
         "the ranks differ in --entry (rank 0 'train_step'; rank 1 "
         "'forward')"),
        ("--data-seed", ["--data", f"{tmp}/rank0/tokens.bin",
                         "--data-seed", "$r"],
         "the ranks differ in --data-seed (rank 0 '0'; rank 1 '1')"),
    ]
    script = ('r=$OMPI_COMM_WORLD_RANK; d=' + tmp + '/rank$r; '
              'e=train_step; [ "$r" = 1 ] && e=forward; '
              'eval exec megc-run "$@" $EXTRA')
    env = dict(os.environ, MEGRT_COMM_TIMEOUT="100")
    for what, extra, message in cases:
        env["EXTRA"] = " ".join(extra)
        start = time.monotonic()
        result = mpi_util.run_ranks(2, ["sh", "-c", script, "sh", *common],
                                    timeout=300, env=env)
        elapsed = time.monotonic() - start
        output = result.stdout + result.stderr
        head = message.split("...")[0]
        tail = message.split("...")[-1]
        said = [line for line in output.splitlines()
                if head in line and tail in line]
        ranks = sorted(line.split(":")[0] for line in said)
        if result.returncode == 0 or ranks != ["rank 0", "rank 1"] \
                or "step 1/" in output or elapsed > 60:
            sys.exit(f"{what}: expected both ranks to stop before a step "
                     f"saying '{message}' within 60 s; exit "
                     f"{result.returncode} after {elapsed:.1f} s:\n{output}")
        print(f"{what}: both ranks stopped after {elapsed:.1f} s: "
              f"{said[0]}")

    # The same options on both ranks run (the data file by content: rank
    # 0's under another name on rank 1 would do too).
    env["EXTRA"] = f"--params init:1 --data {tmp}/rank0/tokens.bin"
    result = mpi_util.run_ranks(2, ["sh", "-c", script, "sh", *common],
                                timeout=300, env=env)
    if result.returncode != 0 or "step 2/2" not in result.stdout:
        sys.exit("the same options: expected a run of 2 steps:\n"
                 + result.stdout + result.stderr)
    print("the same options: 2 steps run")


if __name__ == "__main__":
    main()
