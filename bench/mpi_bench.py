"""What the multi-rank CPU benchmarks share: compiling a `megc gen` model, reading its per-rank figures from `megc inspect`, and training it
under `mpirun --oversubscribe` with each rank's peak resident memory
measured (ru_maxrss of each megc-run, through a small wrapper)."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np

WRAPPER = r"""
import resource, subprocess, sys
code = subprocess.call(sys.argv[1:])
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
import os
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
print(f"rank {rank} peak rss kB {peak}", file=sys.stderr, flush=True)
sys.exit(code)
"""


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


class Bench:
    """The tools of a build, a scratch folder and a global batch of token
    ids and labels in it."""

    def __init__(self, build, tmp, ranks, vocab, batch, seq):
        tools = os.path.join(os.path.abspath(build), "bin")
        self.megc = os.path.join(tools, "megc")
        self.megc_run = os.path.join(tools, "megc-run")
        self.mpirun = [shutil.which("mpirun"), "-n", str(ranks),
                       "--oversubscribe"]
        if os.geteuid() == 0:
            self.mpirun.append("--allow-run-as-root")
        self.tmp = tmp
        # More megc-run flags of train().
        self.extra = []
        self.wrapper = os.path.join(tmp, "peak.py")
        with open(self.wrapper, "w") as f:
            f.write(WRAPPER)
        rng = np.random.default_rng(0)
        self.inputs = []
        for name in ("input_ids", "labels"):
            path = os.path.join(tmp, name + ".npy")
            np.save(path, rng.integers(0, vocab, (batch, seq)).astype(np.int32))
            self.inputs += ["--input", f"{name}={path}"]

    def compile(self, tag, gen_flags, preset="llama", compile_flags=()):
        """Compiles `megc gen PRESET GEN_FLAGS` (with `megc COMPILE_FLAGS`);
        returns the artifact and the train_step figures of `megc inspect`:
        weights and training state MB per rank, MB sent per rank per step,
        arena MB."""
        model = os.path.join(self.tmp, tag + ".mlir")
        artifact = os.path.join(self.tmp, tag + ".megc")
        run([self.megc, "gen", preset, *gen_flags, "-o", model])
        run([self.megc, model, *compile_flags, "-o", artifact])
        listing = run([self.megc, "inspect", artifact]).stdout
        per_rank = re.search(r"model weights ([\d.]+) MB, training state "
                             r"([\d.]+) MB\)", listing)
        step = listing[listing.index("entry train_step("):]
        # A program without collectives (one rank) sends nothing.
        sent = re.search(r"sent per rank ([\d.]+) MB", step)
        sent = float(sent.group(1)) if sent else 0.0
        arena = float(re.search(r"arena ([\d.]+) MB", step).group(1))
        return artifact, dict(weights=float(per_rank.group(1)),
                              state=float(per_rank.group(2)), sent=sent,
                              arena=arena)

    def train(self, artifact, steps):
        """(rank 0's median train_step ms after two warm-up steps, the median
        over the ranks of their peak RSS in MB)."""
        result = run(self.mpirun + [sys.executable, self.wrapper,
                                    self.megc_run, artifact, "--entry",
                                    "train_step", "--params", "init:1",
                                    "--warmup", "2", "--steps", str(steps),
                                    *self.extra, *self.inputs],
                     timeout=1800)
        median = float(re.search(r"median step ms: ([\d.]+)",
                                 result.stdout).group(1))
        peaks = [int(kb) for kb in
                 re.findall(r"peak rss kB (\d+)", result.stderr)]
        return median, float(np.median(peaks)) / 1024
