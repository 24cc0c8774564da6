"""The CUDA backend's host side, run without a GPU: `megc-run --device cuda`
on the stand-in CUDA libraries (runtime/emulator/standin: the driver,
cuBLASLt, and NCCL over MPI, every call checked, kernels on the GPU
emulator), against the CPU backend's run of the same artifact.

Cases: a llama training step (3 steps), the same with the layers as CUDA
graphs (captured once, replayed), a 2-rank FSDP step through NCCL, and
2-rank context parallelism through NCCL by each algorithm (the ring's key
and value blocks passed by NCCL's point-to-point exchange, attention with
query positions on megc's flash kernels), and a 2-rank pipeline by 1F1B,
ZB-H1 and the interleaved schedule (activations and their gradients sent
by ncclSend/ncclRecv, the transfers between two passes in one NCCL group,
each rank holding its own stages' parameters), and 1F1B with each layer's
part of a pass as a CUDA graph.
Each compares every parameter and optimizer state tensor after the steps
with the relative L2 bound of the GPU check (bench/gpu_compare.py, 1e-4
for f32: the GEMMs and reductions add in other orders, and AdamW's
normalised update turns a tiny difference in a gradient near zero into a
step of the learning rate's size),
and reads the stand-in's log: no error, the entry's arena allocated with
exactly its memory plan's bytes, every kernel launched on the emulator,
captures replayed.

Usage: standin_run.py --tmp DIR --standin LIBDIR
                      --case train|graphs|nccl|cp-ring|cp-allgather|
                             pp-1f1b|pp-zb-h1|pp-interleaved|pp-graphs
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "e2e"))
import e2e_util  # noqa: E402
import mpi_util  # noqa: E402

STEPS = 3


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(args)}\n"
                 f"{result.stdout}{result.stderr}")
    return result.stdout + result.stderr


def losses(log):
    return re.findall(r"loss (\S+)", log)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--standin", required=True)
    parser.add_argument("--case", required=True,
                        choices=["train", "graphs", "nccl", "cp-ring",
                                 "cp-allgather", "pp-1f1b", "pp-zb-h1",
                                 "pp-interleaved", "pp-graphs"])
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    tmp = options.tmp
    ranks = 1 if options.case in ("train", "graphs") else 2
    gen = ["llama", "--train"]
    flags = ["--target=cpu,cuda"]
    if options.case == "nccl":
        gen += ["--mesh", "dp_shard=2", "--fsdp", "optim_grads_params"]
    if options.case.startswith("cp-"):
        gen += ["--mesh", "cp=2", "--cp-attention",
                options.case[len("cp-"):]]
    if options.case.startswith("pp-"):
        schedule = options.case[len("pp-"):]
        gen += ["--mesh", "pp=2", "--micro-batches", "2", "--pp-schedule",
                "1f1b" if schedule == "graphs" else schedule]
        # Two stages a rank: four layers.
        if options.case == "pp-interleaved":
            gen += ["--layers", "4", "--pp-virtual", "2"]
    if options.case in ("graphs", "pp-graphs"):
        flags += ["--cuda-graphs=layer"]
    model = os.path.join(tmp, "model.mlir")
    artifact = os.path.join(tmp, "model.megc")
    library = os.path.join(tmp, "kernels.so")
    run(["megc", "gen", *gen, "-o", model])
    run(["megc", model, *flags, "-o", artifact])
    run(["megc", model, *flags, "--emit=cuda-emulation", "-o", library])
    program = run(["megc", model, *flags, "--emit=megrt", "-o", "-"])
    # A pipeline has one train_step program per rank, each with its arena.
    arenas = [int(size) for size in re.findall(
        r"^entry train_step arena (\d+)", program, re.M)]

    rng = np.random.default_rng(5)
    # The preset's batch of 2 sequences (global: one per rank under FSDP;
    # both on each rank under cp, which splits every sequence).
    for name in ("input_ids", "labels"):
        np.save(os.path.join(tmp, name + ".npy"),
                rng.integers(0, 256, (2, 16)).astype(np.int32))
    common = [artifact, "--entry", "train_step", "--steps", str(STEPS),
              "--params", "init:1",
              "--input", f"input_ids={tmp}/input_ids.npy",
              "--input", f"labels={tmp}/labels.npy"]
    log_path = os.path.join(tmp, "standin.log")
    if os.path.exists(log_path):
        os.remove(log_path)
    env = dict(os.environ, MEGEMU_KERNELS=library, MEGEMU_LOG=log_path,
               LD_LIBRARY_PATH=options.standin + ":" +
               os.environ.get("LD_LIBRARY_PATH", ""))

    def megc_run(device, state, environment):
        args = ["megc-run", *common, "--device", device,
                "--save-state", state]
        if ranks == 1:
            return run(args, env=environment)
        result = mpi_util.run_ranks(ranks, args, env=environment)
        if result.returncode != 0:
            sys.exit(f"{ranks} ranks on {device} failed:\n{result.stdout}"
                     f"{result.stderr}")
        return result.stdout + result.stderr

    cpu_log = megc_run("cpu", os.path.join(tmp, "cpu.safetensors"), None)
    cuda_log = megc_run("cuda", os.path.join(tmp, "cuda.safetensors"), env)
    print(f"losses cpu {' '.join(losses(cpu_log))}")
    print(f"losses cuda {' '.join(losses(cuda_log))}")

    cpu = e2e_util.read_safetensors(os.path.join(tmp, "cpu.safetensors"))
    cuda = e2e_util.read_safetensors(os.path.join(tmp, "cuda.safetensors"))
    worst, worst_name = 0.0, ""
    for name, expected in cpu.items():
        got = cuda[name]
        error = np.linalg.norm(got - expected) / max(
            np.linalg.norm(expected), 1e-30)
        if error > worst:
            worst, worst_name = error, name
    if worst > 1e-4:
        sys.exit(f"the CUDA run's {worst_name} differs from the CPU run's by "
                 f"{worst:.3e} (relative L2)")
    print(f"state: {len(cpu)} tensors within 1e-4 of the CPU run")

    log = open(log_path).read().splitlines()
    errors = [line for line in log if line.startswith("error")]
    if errors:
        sys.exit("the stand-in reported:\n" + "\n".join(errors))
    allocations = [int(line.split()[1]) for line in log
                   if line.startswith("cuMemAlloc ")]
    for arena in set(arenas):
        wanted = ranks if len(arenas) == 1 else arenas.count(arena)
        if allocations.count(arena) < wanted:
            sys.exit(f"no allocation of the train_step arena's {arena} bytes "
                     f"per rank (allocations: {sorted(set(allocations))})")
    print(f"arena: {' and '.join(map(str, arenas))} bytes allocated as "
          "planned")
    launches = [line.split()[1] for line in log if line.startswith("launch ")]
    generated = sum(1 for name in launches if name.startswith("megk"))
    runtime = len(launches) - generated
    print(f"launches: {generated} of megc's kernels and {runtime} of the "
          f"runtime's ran on the emulator")
    captures = sum(1 for line in log if line.startswith("capture end"))
    replays = sum(1 for line in log if line.startswith("graph launch"))
    print(f"graphs: {captures} captured, {replays} launched")
    inits = sum(1 for line in log if line.startswith("nccl init"))
    print(f"nccl: {inits} communicators over {ranks} ranks")


if __name__ == "__main__":
    main()
