"""End to end: saving streams. A model of 8 layers (4.9 M parameters,
a 58 MB training state) sharded over 2 ranks by FSDP is saved whole
(--save-params to a file and to a Hugging Face directory, --save-state to
a file) and as a distributed checkpoint: the peak resident memory of the
largest rank (getrusage in a wrapper around each) grows by less than a
quarter of what it saves,
where gathering the model before writing it would add all of it. The
files hold the gathered state (checked against the distributed one)."""
import argparse
import os
import subprocess
import sys

import numpy as np

import distributed_checkpoint
import e2e_util
import mpi_util

MODEL = ["--layers", "8", "--hidden", "256", "--heads", "8", "--kv-heads",
         "4", "--ffn", "512", "--seq", "8", "--vocab", "256", "--batch", "8",
         "--train", "--mesh", "dp_shard=2", "--fsdp", "optim_grads_params"]


def peak_kb(ranks, args, tmp):
    """The largest peak resident memory (KiB) of the ranks running `args`:
    each rank runs it under a wrapper that reports getrusage of its child."""
    wrapper = os.path.join(tmp, "rank_peak.py")
    with open(wrapper, "w") as f:
        f.write("import os, resource, subprocess, sys\n"
                "code = subprocess.call(sys.argv[2:])\n"
                "rank = os.environ.get('OMPI_COMM_WORLD_RANK', '0')\n"
                "with open(sys.argv[1] + '.' + rank, 'w') as out:\n"
                "    out.write(str(resource.getrusage("
                "resource.RUSAGE_CHILDREN).ru_maxrss))\n"
                "sys.exit(code)\n")
    prefix = os.path.join(tmp, "peak")
    result = subprocess.run(mpi_util.mpirun_command(ranks) + [
        sys.executable, wrapper, prefix, *args], capture_output=True,
        text=True, timeout=600)
    if result.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return max(int(open(f"{prefix}.{rank}").read()) for rank in range(ranks))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    tmp = options.tmp
    os.makedirs(tmp, exist_ok=True)
    rng = np.random.default_rng(3)
    inputs = []
    for name in ("input_ids", "labels"):
        path = os.path.join(tmp, name + ".npy")
        np.save(path, rng.integers(0, 256, (8, 8)).astype(np.int32))
        inputs += ["--input", f"{name}={path}"]
    model = os.path.join(tmp, "model.mlir")
    artifact = os.path.join(tmp, "model.megc")
    e2e_util.run(["megc", "gen", "llama", *MODEL, "-o", model])
    e2e_util.run(["megc", model, "-o", artifact])
    run = [
        "megc-run", artifact, "--entry", "train_step", "--params", "init:1",
        "--steps", "1", *inputs]
    base = min(peak_kb(2, run, tmp) for _ in range(2))
    print(f"peak rank without a save: {base / 1024:.1f} MB")
    failed = False
    saves = [("--save-params FILE", ["--save-params",
                                     os.path.join(tmp, "p.safetensors")],
              os.path.join(tmp, "p.safetensors")),
             ("--save-params DIR/", ["--save-params",
                                     os.path.join(tmp, "hf") + "/"],
              os.path.join(tmp, "hf", "model.safetensors")),
             ("--save-state FILE", ["--save-state",
                                    os.path.join(tmp, "s.safetensors")],
              os.path.join(tmp, "s.safetensors")),
             ("--save-state DIR/ (distributed)",
              ["--save-state", os.path.join(tmp, "dist") + "/"], None)]
    for name, extra, written in saves:
        grown = peak_kb(2, run + extra, tmp) - base
        if written:
            size = os.path.getsize(written)
        else:
            size = sum(os.path.getsize(os.path.join(tmp, "dist", f))
                       for f in os.listdir(os.path.join(tmp, "dist"))
                       if f.startswith("rank-"))
        ok = grown * 1024 < size / 4
        failed |= not ok
        print(f"{name:32s} writes {size / 1e6:6.1f} MB; the peak process "
              f"grew by {grown / 1024:5.1f} MB" + ("" if ok else "  FAILED"))
    state, _, _ = distributed_checkpoint.read_distributed(
        os.path.join(tmp, "dist"))
    whole = e2e_util.read_safetensors(os.path.join(tmp, "s.safetensors"))
    if sorted(state) != sorted(whole) or any(
            not np.array_equal(state[k], whole[k]) for k in whole):
        sys.exit("the streamed state file differs from the distributed one")
    params = e2e_util.read_safetensors(os.path.join(tmp, "p.safetensors"))
    hf = e2e_util.read_safetensors(os.path.join(tmp, "hf",
                                                "model.safetensors"))
    if any(not np.array_equal(params[k], state[k]) or
           not np.array_equal(hf[k], state[k]) for k in params) or \
            sorted(params) != sorted(hf):
        sys.exit("the streamed weights differ from the state's")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
