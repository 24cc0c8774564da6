"""Records, or compares with a record, the exact CPU results of training
runs, so that a restructuring of the compiler or the runtime can show that
it changed no bit: the llama, DeepSeek-V3, MMDiT and Flux train steps (10
steps each), an FSDP run and a tp=2 run (2 ranks under mpirun).

  bitwise_outputs.py record FILE.json [--bin DIR]
  bitwise_outputs.py compare FILE.json [--bin DIR]

Each run starts from init:1 parameters; the language models train on a
fixed token file (shuffled with --data-seed 1), the diffusion models on
fixed random inputs. What is recorded for each run: the SHA-256 of the
training state after the last step (every tensor's bytes, by name, from
--save-state) and of each output of the last step. `record` writes them
with the host's CPU model and flags, and the commit of the tools; `compare`
recomputes them and lists every difference (exit 1), refusing a record
made on another CPU (oneDNN and the generated code choose kernels by
instruction set, so bits are only comparable on one kind of host).

Not a lit test: the record is made by hand on the commit a restructuring
starts from (test/e2e/bitwise-baseline.json) and compared on the same host
when it is done.
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
import mpi_util  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SMALL = ["--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "16",
         "--batch", "4", "--train", "--lr", "0.01"]
LLAMA = ["llama", *SMALL, "--kv-heads", "2", "--ffn", "96", "--vocab", "128",
         "--clip-grad", "1.0"]
DIFFUSION = [*SMALL, "--text-seq", "8", "--in-channels", "4",
             "--context-dim", "16"]
# name -> (megc gen arguments, ranks)
RUNS = {
    "llama": (LLAMA, 1),
    "deepseek": (["deepseek", *SMALL, "--vocab", "128", "--dense-layers", "1",
                  "--experts", "4", "--moe-ffn", "32", "--ffn", "96"], 1),
    "mmdit": (["mmdit", *DIFFUSION], 1),
    "flux": (["flux", *DIFFUSION], 1),
    "llama_fsdp": ([*LLAMA, "--mesh", "dp_shard=2", "--fsdp",
                    "optim_grads_params"], 2),
    "llama_tp2": ([*LLAMA, "--mesh", "tp=2", "--sequence-parallel"], 2),
}
STEPS = 10


def run(command):
    return e2e_util.run([str(c) for c in command])


def host():
    """The CPU model and its flags, as /proc/cpuinfo gives them."""
    text = open("/proc/cpuinfo").read()
    model = re.search(r"model name\s*:\s*(.*)", text)
    flags = re.search(r"flags\s*:\s*(.*)", text)
    return {"cpu": model.group(1) if model else "?",
            "flags": sorted(flags.group(1).split()) if flags else []}


def state_digests(path):
    """name -> SHA-256 of each tensor's bytes in a safetensors file."""
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    digests = {}
    for name, info in sorted(header.items()):
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        digests[name] = hashlib.sha256(
            data[8 + size + begin:8 + size + end]).hexdigest()
    return digests


def inputs_of(binary, artifact, work):
    """--input flags with fixed values for train_step's inputs, or --data
    for a language model."""
    summary = run([binary / "megc", "inspect", artifact])
    line = next(l for l in summary.splitlines()
                if l.startswith("entry train_step("))
    names = re.findall(r"(\w+): tensor<([0-9x]+)x(\w+)>", line.split("->")[0])
    if any(name == "input_ids" for name, _, _ in names):
        tokens = os.path.join(work, "tokens.bin")
        (np.arange(3000) * 7 % 128).astype("<u2").tofile(tokens)
        return ["--data", tokens, "--data-seed", "1"]
    rng = np.random.default_rng(5)
    flags = []
    for name, shape, dtype in names:
        path = os.path.join(work, name + ".npy")
        dims = [int(d) for d in shape.split("x")]
        np.save(path, rng.standard_normal(dims).astype(np.float32))
        flags += ["--input", f"{name}={path}"]
    return flags


def measure(binary):
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (generate, ranks) in RUNS.items():
            work = os.path.join(scratch, name)
            os.makedirs(work)
            model = os.path.join(work, "m.mlir")
            artifact = os.path.join(work, "m.megc")
            run([binary / "megc", "gen", *generate, "-o", model])
            run([binary / "megc", model, "-o", artifact])
            launch = mpi_util.mpirun_command(ranks) if ranks > 1 else []
            run([*launch, binary / "megc-run", artifact, "--entry",
                 "train_step", "--params", "init:1", "--steps", STEPS,
                 *inputs_of(binary, artifact, work), "--output-dir",
                 os.path.join(work, "out"), "--save-state",
                 os.path.join(work, "state.safetensors")])
            outputs = {}
            for file in sorted(os.listdir(os.path.join(work, "out"))):
                data = open(os.path.join(work, "out", file), "rb").read()
                outputs[file] = hashlib.sha256(data).hexdigest()
            results[name] = {
                "state": state_digests(os.path.join(work,
                                                    "state.safetensors")),
                "outputs": outputs}
            print(f"{name}: {len(results[name]['state'])} state tensors, "
                  f"{len(outputs)} outputs", flush=True)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["record", "compare"])
    parser.add_argument("file")
    parser.add_argument("--bin", default=os.path.join(
        os.environ.get("MEGC_BUILD_DIR", os.path.join(ROOT, "build")), "bin"))
    args = parser.parse_args()
    binary = pathlib.Path(args.bin)
    if args.mode == "compare":
        record = json.load(open(args.file))
        if record["host"] != host():
            sys.exit(f"{args.file} was recorded on another CPU "
                     f"({record['host']['cpu']}); record the baseline on "
                     f"this host from commit {record['commit']} first")
    results = measure(binary)
    if args.mode == "record":
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short",
                                 "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        with open(args.file, "w") as f:
            json.dump({"commit": commit, "host": host(), "steps": STEPS,
                       "runs": results}, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"recorded {len(results)} runs at {commit} in {args.file}")
        return 0
    differences = []
    for name, expected in record["runs"].items():
        got = results.get(name, {})
        for kind in ("state", "outputs"):
            for key, digest in expected[kind].items():
                if got.get(kind, {}).get(key) != digest:
                    differences.append(f"{name}: {kind} {key} differs")
            for key in set(got.get(kind, {})) - set(expected[kind]):
                differences.append(f"{name}: {kind} {key} is new")
    if differences:
        print("\n".join(differences))
        return 1
    print(f"all {len(results)} runs bitwise the same as {record['commit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
