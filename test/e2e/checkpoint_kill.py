"""End to end: training survives kill -9 at any moment. A run saving its
training state every step (--keep 2, token data with a shuffle seed, a
learning-rate schedule, clipping) is killed with SIGKILL at random moments
50 times on one rank (startup, steps, saves and renames all get hit), and
20 times on 4 ranks under FSDP (one random rank killed; mpirun stops the
others). After every kill the run is started again with --resume: it must
resume from the newest complete checkpoint (found here independently:
a whole safetensors file, or a directory with its commit record), and the
run finally completed must end with bitwise the training state of a run
that was never interrupted. The kill moments come from a fixed seed; the
moments they land on depend on the machine's speed."""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import e2e_util
import mpi_util

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "hf-fixtures", "llama")
TOKENS = os.path.join(HERE, "training-reference", "tokens.bin")
MODEL = ["--seq", "8", "--batch", "4", "--train", "--lr", "0.01",
         "--lr-schedule", "cosine", "--warmup-steps", "2", "--decay-steps",
         "6", "--clip-grad", "1.8"]
DATA = ["--params", FIXTURE, "--data", TOKENS, "--data-seed", "5"]


def complete(path):
    """Whether a checkpoint is complete, by reading it with NumPy (a file)
    or finding its commit record (a directory)."""
    if os.path.isdir(path):
        return os.path.exists(os.path.join(path, "checkpoint.json"))
    try:
        e2e_util.read_safetensors(path)
        return True
    except Exception:  # a file cut short does not parse
        return False


def newest_complete(directory):
    if not os.path.isdir(directory):
        return None
    names = sorted(n for n in os.listdir(directory)
                   if n.startswith("step-"))
    for name in reversed(names):
        path = os.path.join(directory, name)
        if complete(path):
            return path
    return None


def children_of(pid):
    """The processes whose parent is `pid`, from /proc (no procps needed)."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # pid (comm) state ppid ...: comm may hold spaces.
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(entry)
    return children


def kill_tree(process, ranks, rng):
    """SIGKILL: the process itself (one rank), or one random rank's process
    under mpirun (a child of it)."""
    if ranks == 1:
        process.kill()
        return "megc-run"
    children = children_of(process.pid)
    if not children:
        process.kill()
        return "mpirun (no rank started yet)"
    victim = rng.choice(children)
    try:
        os.kill(int(victim), signal.SIGKILL)
    except ProcessLookupError:
        pass
    return f"rank process {victim}"


def survive(name, artifact, ranks, steps, kills, window, tmp, rng):
    """Kills runs of `artifact` `kills` times, then completes one; exits
    unless every run that completes ends bitwise as the uninterrupted run
    does."""
    def command(*extra):
        args = ["megc-run", artifact, "--entry", "train_step", *DATA,
                "--steps", str(steps), "--log-every", "1000", *extra]
        return (mpi_util.mpirun_command(ranks) + args) if ranks > 1 else args

    want = os.path.join(tmp, name + "_straight.safetensors")
    result = subprocess.run(command("--save-state", want),
                            capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        sys.exit(f"{name}: the uninterrupted run failed:\n"
                 f"{result.stdout}{result.stderr}")
    ck = os.path.join(tmp, name + "_ck")
    shutil.rmtree(ck, ignore_errors=True)
    got = os.path.join(tmp, name + "_resumed.safetensors")
    finished = []

    def check_finished(output, expected):
        """A run that got to the end: its state must be the uninterrupted
        run's, bitwise, and it must have resumed where expected."""
        if expected and "resuming from " + expected not in output:
            sys.exit(f"{name}: a run did not resume from {expected}:\n"
                     + output[-3000:])
        if open(got, "rb").read() != open(want, "rb").read():
            sys.exit(f"{name}: a run resumed from {expected} ends with "
                     "another state than the uninterrupted run's")
        finished.append(expected)

    killed = checked = 0
    while killed < kills:
        expected = newest_complete(ck)
        extra = ["--save-every", "1", "--save-dir", ck, "--keep", "2",
                 "--save-state", got]
        if expected:
            extra += ["--resume", ck]
        process = subprocess.Popen(command(*extra), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        time.sleep(rng.uniform(*window))
        if process.poll() is not None:
            # It got to the end first (a fast machine): checked like the
            # last run, then the kills go on from scratch.
            output = process.communicate()[0]
            if process.returncode != 0:
                sys.exit(f"{name}: a run failed:\n{output[-3000:]}")
            check_finished(output, expected)
            shutil.rmtree(ck)
            continue
        what = kill_tree(process, ranks, rng)
        try:
            output = process.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:
            process.kill()
            sys.exit(f"{name}: the other ranks did not stop after kill "
                     f"{killed + 1}")
        killed += 1
        line = next((l for l in output.splitlines()
                     if "resuming from" in l), None)
        if line is not None:
            checked += 1
            if not line.rstrip().endswith(expected):
                sys.exit(f"{name}: kill {killed} ({what}): resumed with "
                         f"'{line}', the newest complete checkpoint is "
                         f"{expected}")
        elif expected is not None and any(
                "megc-run: error" in l and
                "exited during this collective" not in l
                for l in output.splitlines()):
            # A kill before the restart said where it resumes stops the
            # other ranks with the killed peer's exit, which is no failure
            # of the restart; any other error megc-run reports is. Open
            # MPI's own notices of the kill (a shared-memory segment the
            # killed job left, "to see all help / error messages") are not
            # megc-run's: the final run, which must complete bitwise,
            # shows whether the restarts could go on.
            sys.exit(f"{name}: restart {killed} failed:\n{output[-3000:]}")
    expected = newest_complete(ck)
    result = subprocess.run(command("--resume", ck, "--save-state", got),
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        sys.exit(f"{name}: the final run failed:\n"
                 f"{result.stdout}{result.stderr}")
    check_finished(result.stdout, expected)
    print(f"{name}: {killed} kills ({checked} restarts seen resuming from "
          f"the newest complete checkpoint); {len(finished)} run(s) "
          f"completed, the last from {os.path.basename(expected)} of "
          f"{steps} steps: each bitwise the uninterrupted run")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--rank-kills", type=int, default=20)
    options = parser.parse_args()
    tmp = options.tmp
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    rng = random.Random(42)

    def compile_model(tag, extra):
        model = os.path.join(tmp, tag + ".mlir")
        artifact = os.path.join(tmp, tag + ".megc")
        e2e_util.run(["megc", "import", FIXTURE, *MODEL, *extra, "-o", model])
        e2e_util.run(["megc", model, "-o", artifact])
        return artifact

    survive("one rank", compile_model("single", []), 1, 6000,
                 options.kills, (0.02, 0.3), tmp, rng)
    mesh = compile_model("fsdp", ["--mesh", "dp_shard=4", "--fsdp",
                                  "optim_grads_params"])
    survive("4 ranks dp_shard=4", mesh, 4, 1000, options.rank_kills,
                  (0.3, 1.5), tmp, rng)


if __name__ == "__main__":
    main()
