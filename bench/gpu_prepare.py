"""Prepares what bench/gpu_check.sh needs on a GPU machine, which has no
LLVM/MLIR: artifacts compiled here for cpu and cuda, their inputs, the CPU
runtime's outputs as references, and the FlatBuffers headers, flatc and the
nlohmann-json headers to build the runtime there. Everything goes to
.gpucheck/ (git-ignored), the folder to carry to the GPU machine.

Usage: /usr/bin/python3 bench/gpu_prepare.py [--build DIR]
(DIR: the build the project's scripts use, $MEGC_BUILD_DIR or build/).
Then, here: bash bench/gpu_check.sh --dry-run; on the GPU machine:
bash bench/gpu_check.sh. What is carried must stay under CARRY_LIMIT_MIB
(the device tool's limit on what travels): the script fails above it.
"""
import argparse
import json
import os
import glob
import re
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, megc gen arguments, entry, steps. The small presets check
# correctness of every kernel; "llama_large" gives step times worth reading.
# The llama configuration that bench/torch_reference.py rebuilds in PyTorch.
TORCH_LLAMA = dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=96,
                   vocab=256, seq=16, batch=2, eps=1e-5, theta=10000.0,
                   lr=0.01, betas=[0.9, 0.95], adam_eps=1e-8,
                   weight_decay=0.1)
TORCH_LLAMA_GEN = [
    "llama", "--train", "--layers", "2", "--hidden", "64", "--heads", "4",
    "--kv-heads", "2", "--ffn", "96", "--vocab", "256", "--seq", "16",
    "--batch", "2", "--norm-eps", "1e-5", "--rope-theta", "10000",
    "--lr", "0.01", "--betas", "0.9,0.95", "--adam-eps", "1e-8",
    "--weight-decay", "0.1"]

MASTER_LLAMA_GEN = [
    flag if flag != "0.01" else "0.001" for flag in TORCH_LLAMA_GEN] + [
    "--dtype", "bf16", "--precision",
    "main_params=f32,main_grads=f32,exp_avg=f32,exp_avg_sq=f32"]

# The pipeline cases' model: small, so that their state stays small in
# what is carried.
PP1_LLAMA_GEN = [
    "llama", "--train", "--layers", "2", "--hidden", "32", "--heads", "4",
    "--kv-heads", "2", "--ffn", "48", "--vocab", "64", "--seq", "16",
    "--batch", "4", "--mesh", "pp=1", "--micro-batches", "2"]

CASES = [
    ("llama_f32_forward", ["llama"], "forward", 1),
    ("llama_bf16_forward", ["llama", "--dtype", "bf16"], "forward", 1),
    ("llama_rope_variant", ["llama", "--rotary-interleaved",
                            "--rotary-percent", "0.5"], "forward", 1),
    ("llama_f32_grad", TORCH_LLAMA_GEN, "grad", 1),
    ("llama_f32_train", TORCH_LLAMA_GEN, "train_step", 10),
    # bf16 training amplifies rounding differences step by step (CPU and
    # GPU differ in summation order): three small steps keep the comparison
    # at bf16 tolerance.
    ("llama_bf16_master_train", MASTER_LLAMA_GEN, "train_step", 3),
    ("mmdit_f32_forward", ["mmdit", "--layers", "1"], "forward", 1),
    ("flux_f32_forward", ["flux", "--layers", "1"], "forward", 1),
    ("flux_f32_grad", ["flux", "--layers", "1", "--train"], "grad", 1),
    # A mesh of one rank under optim_grads_params: every weight read is an
    # all-gather and the gradients a reduce-scatter, through NCCL on the
    # GPU (groups of one rank) and copies on the CPU.
    ("llama_fsdp1_train", ["llama", "--train", "--mesh", "dp_shard=1",
                           "--fsdp", "optim_grads_params"], "train_step", 3),
    # The same with the collectives captured into the layers' CUDA graphs
    # (NCCL calls enqueued into the graph, replayed each step).
    ("llama_fsdp1_graphs_train", ["llama", "--train", "--mesh", "dp_shard=1",
                                  "--fsdp", "optim_grads_params"],
     "train_step", 3, ["--cuda-graphs=layer", "--capture-collectives"]),
    # Tensor and sequence parallelism laid out over one rank: the column
    # layers' gathers, the row layers' reduce-scatters, the vocab-parallel
    # embedding and cross-entropy's all-reduces, through NCCL on the GPU
    # (groups of one rank), plain and captured into the layers' graphs.
    ("llama_tp1_sp_train", ["llama", "--train", "--mesh", "tp=1",
                            "--sequence-parallel"], "train_step", 3),
    ("llama_tp1_graphs_train", ["llama", "--train", "--mesh", "tp=1",
                                "--sequence-parallel"], "train_step", 3,
     ["--cuda-graphs=layer", "--capture-collectives"]),
    # A pipeline over one rank (a schedule named over pp=1): the
    # schedule's per-micro-batch passes, ZB-H1's split of the backward into
    # input and weight gradients, and the pipeline group's loss all-reduce
    # through NCCL. The point-to-point send and receive between stages need
    # two GPUs; the nccl part runs them with the rank itself.
    ("llama_pp1_interleaved_train",
     [*PP1_LLAMA_GEN, "--pp-schedule", "interleaved", "--pp-virtual", "2"],
     "train_step", 3),
    ("llama_pp1_zbh1_train", [*PP1_LLAMA_GEN, "--pp-schedule", "zb-h1"],
     "train_step", 3),
    # DeepSeek-V3: MLA, routing with a capacity that drops tokens, the
    # gathers, and (training) the router's and the balance loss's gradients
    # and the routing-bias update.
    ("deepseek_f32_forward", ["deepseek", "--moe-capacity-factor", "1.25"],
     "forward", 1),
    ("deepseek_f32_train", ["deepseek", "--train", "--moe-aux-loss-coeff",
                            "0.01", "--moe-bias-update-rate", "0.001"],
     "train_step", 3),
    ("llama_large_forward", ["llama", "--layers", "4", "--hidden", "512",
                             "--heads", "8", "--kv-heads", "8", "--ffn",
                             "1376", "--vocab", "4096", "--seq", "256",
                             "--batch", "1"], "forward", 10),
]
SEED = 7

# What .gpucheck may hold, in MiB: the device tool carries 64 MiB in all.
CARRY_LIMIT_MIB = 60


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(args)}\n{result.stderr}")
    return result.stdout


def entry_inputs(inspect_text, entry):
    """[(name, dtype, shape)] of `entry` from `megc inspect`."""
    match = re.search(rf"^entry {entry}\((.*?)\) ->", inspect_text, re.M)
    if not match:
        sys.exit(f"entry {entry} not in the artifact")
    inputs = []
    for name, dims, dtype in re.findall(
            r"(\w+): tensor<((?:\d+x)*)(\w+)>", match.group(1)):
        shape = [int(d) for d in dims.split("x") if d]
        inputs.append((name, dtype, shape))
    return inputs


def make_input(rng, dtype, shape):
    if dtype in ("i32", "i64"):
        return rng.integers(0, 64, shape).astype(
            np.int32 if dtype == "i32" else np.int64)
    if dtype == "f32":
        return (0.5 * rng.standard_normal(shape)).astype(np.float32)
    sys.exit(f"no input generator for dtype {dtype}")


# The llama whose forward+backward bench/gpu_bench.py times against PyTorch.
BENCH_LLAMA = dict(layers=4, hidden=1024, heads=16, kv_heads=8, ffn=2816,
                   vocab=8192, seq=1024, batch=4, dtype="bf16")


# The llama whose CPU training step bench/cpu_train_bench.py times.
CPU_LLAMA = dict(layers=4, hidden=512, heads=8, kv_heads=8, ffn=1376,
                 vocab=4096, seq=256, batch=2)


def prepare_benchmarks(megc, out):
    """Artifacts only: bench/gpu_bench.py makes the (large) inputs there."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import rope_cpu
    shape = (2, 4096, 32, 128)
    for dtype in ("f32", "bf16"):
        folder = os.path.join(out, f"rope_{dtype}")
        os.makedirs(folder)
        with open(f"{folder}/model.mlir", "w") as f:
            f.write(rope_cpu.unfused_module(*shape, shape[3], dtype, False))
        run([megc, f"{folder}/model.mlir", "--target=cpu,cuda",
             "-o", f"{folder}/model.megc"])
        with open(f"{folder}/spec.json", "w") as f:
            json.dump({"shape": [*shape, shape[3]], "dtype": dtype}, f)

    folder = os.path.join(out, "gemm_bf16")
    os.makedirs(folder)
    m = n = k = 8192
    with open(f"{folder}/model.mlir", "w") as f:
        f.write(f"""func.func @matmul(%a: tensor<{m}x{k}xbf16> {{meg.name = "a"}},
    %b: tensor<{k}x{n}xbf16> {{meg.name = "b"}}) -> tensor<{m}x{n}xbf16> {{
  %c = meg.matmul %a, %b : tensor<{m}x{k}xbf16>, tensor<{k}x{n}xbf16>
  return %c : tensor<{m}x{n}xbf16>
}}
""")
    run([megc, f"{folder}/model.mlir", "--target=cpu,cuda",
         "-o", f"{folder}/model.megc"])
    with open(f"{folder}/spec.json", "w") as f:
        json.dump({"mnk": [m, n, k]}, f)

    # A CPU training step for bench/cpu_train_bench.py, and a megc-run
    # linked statically with OpenBLAS to run it: the GPU machine has no CPU
    # BLAS, and Debian ships oneDNN as a shared library only, so this
    # runtime is built here with MEGRT_CPU_BLAS=OPENBLAS (the main build's
    # oneDNN GEMMs are faster; the step's numbers there are OpenBLAS's).
    folder = os.path.join(out, "llama_train_cpu")
    os.makedirs(folder)
    c = CPU_LLAMA
    gen = ["llama", "--train"]
    for flag in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                 "seq", "batch"):
        gen += ["--" + flag.replace("_", "-"), str(c[flag])]
    run([megc, "gen", *gen, "-o", f"{folder}/model.mlir"])
    run([megc, f"{folder}/model.mlir", "-o", f"{folder}/model.megc"])
    with open(f"{folder}/spec.json", "w") as f:
        json.dump({"config": c}, f)
    build = os.path.dirname(os.path.dirname(megc))
    cpu_build = os.path.join(build, "gpucheck-cpu")
    run(["cmake", "-S", os.path.join(ROOT, "runtime"), "-B", cpu_build,
         "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         "-DMEGRT_CPU_BLAS=OPENBLAS", "-DMEGRT_CUDA=OFF",
         "-DMEGRT_BUILD_TESTS=OFF"])
    run(["cmake", "--build", cpu_build, "--target", "megrt"])
    static = os.path.join(out, "megc-run-cpu")
    run(["g++", "-O2", "-std=c++17",
         os.path.join(ROOT, "tools", "megc-run", "megc-run.cpp"),
         "-I", os.path.join(ROOT, "runtime", "include"), "-o", static,
         os.path.join(cpu_build, "libmegrt.a"),
         "/usr/lib/x86_64-linux-gnu/libopenblas.a", "-lpthread", "-ldl",
         "-static-libstdc++", "-static-libgcc"])
    run(["gzip", "-9", static])

    folder = os.path.join(out, "llama_grad")
    os.makedirs(folder)
    c = BENCH_LLAMA
    gen = ["llama", "--train"]
    for flag in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                 "seq", "batch", "dtype"):
        gen += ["--" + flag.replace("_", "-"), str(c[flag])]
    run([megc, "gen", *gen, "-o", f"{folder}/model.mlir"])
    run([megc, f"{folder}/model.mlir", "--target=cpu,cuda",
         "--cuda-graphs=layer", "--share-io-buffers",
         "-o", f"{folder}/model.megc"])
    # The program as text: gpu_bench.py reads each launch's buffers from it
    # (kernel_traffic.py) for the per-kernel bandwidth report.
    run([megc, f"{folder}/model.mlir", "--target=cpu,cuda",
         "--cuda-graphs=layer", "--share-io-buffers", "--emit=megrt",
         "-o", f"{folder}/model.megrt"])
    with open(f"{folder}/spec.json", "w") as f:
        json.dump({"config": c}, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.environ.get(
        "MEGC_BUILD_DIR", os.path.join(ROOT, "build")))
    options = parser.parse_args()
    # Cases run megc-run from their own folders: the build as an absolute
    # path, whatever the caller's working directory.
    options.build = os.path.abspath(options.build)
    megc = os.path.join(options.build, "bin", "megc")
    megc_run = os.path.join(options.build, "bin", "megc-run")
    out = os.path.join(ROOT, ".gpucheck")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "deps", "bin"))
    shutil.copytree("/usr/include/flatbuffers",
                    os.path.join(out, "deps", "include", "flatbuffers"))
    shutil.copytree("/usr/include/nlohmann",
                    os.path.join(out, "deps", "include", "nlohmann"))
    shutil.copy(shutil.which("flatc"), os.path.join(out, "deps", "bin"))
    # NCCL's header, for the runtime's CUDA groups, in case the GPU
    # machine's toolkit has none (the library comes with PyTorch there).
    nccl = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                        "include", "nccl.h")
    if os.path.exists(nccl):
        os.makedirs(os.path.join(out, "deps", "nccl"))
        shutil.copy(nccl, os.path.join(out, "deps", "nccl"))

    # The cuDNN frontend's headers (from the build's venv, where
    # scripts/setup.sh installs its PyPI package) and cuDNN's own, for the
    # runtime's cuDNN attention; libcudnn comes with PyTorch there.
    frontend = glob.glob(os.path.join(
        options.build, "venv", "lib", "python3*", "site-packages", "include"))
    if not frontend or not os.path.exists(
            os.path.join(frontend[0], "cudnn_frontend.h")):
        sys.exit("no cuDNN frontend headers in the build's venv: run "
                 "scripts/setup.sh")
    # Its headers include each other as "../include/...": the folder keeps
    # its name.
    shutil.copytree(frontend[0],
                    os.path.join(out, "deps", "cudnn_frontend", "include"))
    os.makedirs(os.path.join(out, "deps", "cudnn"))
    for header in glob.glob(os.path.join(
            os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include",
            "cudnn*.h")):
        shutil.copy(header, os.path.join(out, "deps", "cudnn"))

    # The runtime's CUDA tests, built here (GoogleTest is not on the GPU
    # machine) without BLAS so that they need no library beyond libc and
    # libstdc++; the runtime itself is built there.
    tests_build = os.path.join(options.build, "gpucheck-tests")
    run(["cmake", "-S", os.path.join(ROOT, "runtime"), "-B", tests_build,
         "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DMEGRT_CPU_BLAS=OFF",
         "-DMEGRT_CUDNN=ON",
         "-DMEGRT_CUDNN_FRONTEND_INCLUDE_DIR="
         + os.path.join(out, "deps", "cudnn_frontend", "include"),
         "-DMEGRT_CUDNN_INCLUDE_DIR=" + os.path.join(out, "deps", "cudnn")])
    run(["cmake", "--build", tests_build, "--target", "megrt-tests",
         "megrt-comm-tests"])
    for tests in ("megrt-tests", "megrt-comm-tests"):
        shutil.copy(os.path.join(tests_build, "test", tests),
                    os.path.join(out, "deps", "bin"))
        # Without symbols (GoogleTest names a failure's file and line
        # from the source): what is carried stays under the limit.
        run(["strip", os.path.join(out, "deps", "bin", tests)])
    # megc-run on that same runtime (CUDA, cuDNN, no BLAS), so that the GPU
    # machine's device time is not spent building it; gpu_check.sh builds
    # it there instead when GPU_CHECK_BUILD is set.
    run(["cmake", "--build", tests_build, "--target", "megrt"])
    run(["g++", "-O2", "-std=c++17",
         os.path.join(ROOT, "tools", "megc-run", "megc-run.cpp"),
         "-I", os.path.join(ROOT, "runtime", "include"),
         "-o", os.path.join(out, "deps", "bin", "megc-run"),
         os.path.join(tests_build, "libmegrt.a"), "-ldl", "-lpthread"])

    rng = np.random.default_rng(0)
    # A case's fifth field, where it has one: more compile flags.
    for name, gen, entry, steps, *compile_flags in CASES:
        case = os.path.join(out, "cases", name)
        os.makedirs(os.path.join(case, "inputs"))
        print(f"preparing {name}", flush=True)
        run([megc, "gen", *gen, "-o", f"{case}/model.mlir"])
        run([megc, f"{case}/model.mlir", "--target=cpu,cuda",
             *(compile_flags[0] if compile_flags else []),
             "-o", f"{case}/model.megc"])
        os.remove(f"{case}/model.mlir")
        inputs = []
        for input_name, dtype, shape in entry_inputs(
                run([megc, "inspect", f"{case}/model.megc"]), entry):
            path = f"{case}/inputs/{input_name}.npy"
            np.save(path, make_input(rng, dtype, shape))
            inputs += ["--input", f"{input_name}=inputs/{input_name}.npy"]
        args = ["--entry", entry, "--params", f"init:{SEED}",
                "--steps", str(steps), *inputs]
        log = run([megc_run, "model.megc", *args, "--output-dir", "ref",
                   *(["--save-state", "ref_state.safetensors"]
                     if entry == "train_step" else [])], cwd=case)
        with open(f"{case}/ref_log.txt", "w") as f:
            f.write(log)
        spec = {"entry": entry, "steps": steps, "args": args,
                "dtype": "bf16" if "bf16" in gen else "f32"}
        if gen in (TORCH_LLAMA_GEN, MASTER_LLAMA_GEN):
            # The weights before any step, for the PyTorch reference.
            run([megc_run, "model.megc", "--entry", "forward", "--params",
                 f"init:{SEED}", "--input", "input_ids=inputs/input_ids.npy",
                 "--save-params", "initial.safetensors"], cwd=case)
            spec["torch_llama"] = dict(
                TORCH_LLAMA, dtype=spec["dtype"],
                lr=0.001 if gen is MASTER_LLAMA_GEN else TORCH_LLAMA["lr"])
        with open(f"{case}/case.json", "w") as f:
            json.dump(spec, f)
    prepare_benchmarks(megc, os.path.join(out, "bench"))
    size = sum(os.path.getsize(os.path.join(d, f))
               for d, _, files in os.walk(out) for f in files)
    print(f"{out}: {size / 2**20:.1f} MiB carried (limit {CARRY_LIMIT_MIB} "
          "MiB)")
    if size >= CARRY_LIMIT_MIB * 2**20:
        biggest = sorted(((os.path.getsize(os.path.join(d, f)),
                           os.path.join(d, f))
                          for d, _, files in os.walk(out) for f in files),
                         reverse=True)[:5]
        sys.exit("too much to carry; the largest files: " + ", ".join(
            f"{os.path.relpath(p, out)} {b / 2**20:.1f} MiB"
            for b, p in biggest))


if __name__ == "__main__":
    main()
