"""End to end: distributed checkpoints. A llama trained on 4 ranks
(dp_shard=2 x tp=2, FSDP optim_grads_params) saves its training state at
step 5 as a distributed checkpoint: its record, read here with NumPy alone,
puts every element of every tensor in exactly one chunk, the chunks hold
bitwise the whole state the same run gathers into one file, and no rank
wrote more than its own pieces (the shards add up to the state's bytes);
--async-save writes the same files byte for byte. The checkpoint then resumes to step 10 on the same mesh (bitwise the
uninterrupted run), on one rank, on dp_shard=4, on tp=4 and on HSDP
dp_outer=2 x dp_shard=2 (each within 1e-6 of the uninterrupted run); a
DeepSeek-V3 checkpoint saved under ep=2 resumes on ep=2 (bitwise, router
biases included), on one rank (ep=1) and under dp_shard=2. A checkpoint
without its commit record is skipped by --resume with a warning, and a
save that fails on every rank for want of space names the rank and the
file, leaves the earlier checkpoint complete, and the next run that saves
there removes the uncommitted one."""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

import e2e_util
import mpi_util

LLAMA = ["--layers", "2", "--hidden", "32", "--heads", "8", "--kv-heads", "4",
         "--ffn", "48", "--seq", "8", "--vocab", "64", "--batch", "8",
         "--train", "--weight-decay", "0.1"]
DEEPSEEK = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "hf-fixtures", "deepseek-v3")
DEEPSEEK_MODEL = ["--seq", "8", "--batch", "8", "--train", "--weight-decay",
                  "0.1", "--lr", "1e-3", "--adam-eps", "1e-5",
                  "--moe-bias-update-rate", "1e-2"]
# A resharded run adds and reduces in another order than the uninterrupted
# one; 5 steps later the state agrees to f32 rounding.
TOLERANCE = 1e-6
DTYPES = {"f32": np.float32, "bf16": np.uint16, "f16": np.float16,
          "i32": np.int32, "i64": np.int64}


def ranks_of(mesh):
    return int(np.prod([int(a.split("=")[1]) for a in mesh.split(",")])) \
        if mesh else 1


def megc_run(ranks, args, expect_ok=True):
    if ranks == 1:
        result = subprocess.run(args, capture_output=True, text=True,
                                timeout=600)
    else:
        result = mpi_util.run_ranks(ranks, args)
    if expect_ok and result.returncode != 0:
        sys.exit(f"{' '.join(args)} on {ranks} ranks failed "
                 f"({result.returncode}):\n{result.stdout}{result.stderr}")
    return result


def read_distributed(directory):
    """name -> array of every tensor of a distributed checkpoint, assembled
    from its chunks with NumPy's own indexing, and the bytes of its chunks;
    exits unless every element is in exactly one chunk."""
    with open(os.path.join(directory, "checkpoint.json")) as f:
        record = json.load(f)
    if record["format"] != "megc distributed checkpoint":
        sys.exit(f"{directory}: unexpected format {record['format']}")
    tensors, seen = {}, {}
    for name, info in record["tensors"].items():
        tensors[name] = np.zeros(info["shape"], DTYPES[info["dtype"]])
        seen[name] = np.zeros(info["shape"], np.int64)
    chunk_bytes = 0
    for chunk in record["chunks"]:
        name = chunk["tensor"]
        whole = tensors[name]
        with open(os.path.join(directory, chunk["file"]), "rb") as f:
            f.seek(chunk["data_offsets"][0])
            data = f.read(chunk["data_offsets"][1] - chunk["data_offsets"][0])
        chunk_bytes += len(data)
        values = np.frombuffer(data, whole.dtype)
        # The chunk's elements: a block along dim (or the whole tensor),
        # flattened, then [first, first + count).
        index = np.arange(whole.size).reshape(whole.shape)
        if chunk["dim"] >= 0:
            index = np.split(index, chunk["blocks"],
                             axis=chunk["dim"])[chunk["block"]]
        index = index.reshape(-1)[chunk["first"]:
                                  chunk["first"] + chunk["count"]]
        if values.size != index.size:
            sys.exit(f"{name}: a chunk of {index.size} elements holds "
                     f"{values.size}")
        whole.reshape(-1)[index] = values
        seen[name].reshape(-1)[index] += 1
    for name, count in seen.items():
        if not (count == 1).all():
            sys.exit(f"{directory}: tensor {name}: elements held by "
                     f"{sorted(set(count.reshape(-1).tolist()))} chunks, "
                     "expected exactly one")
    result = {}
    for name, array in tensors.items():
        if array.dtype == np.uint16:
            array = e2e_util.bf16_to_f32(array)
        result[name] = array.astype(np.float64)
    return result, chunk_bytes, record


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    tmp = options.tmp
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    rng = np.random.default_rng(11)
    inputs = []
    for name, vocab in (("input_ids", 64), ("labels", 64)):
        path = os.path.join(tmp, name + ".npy")
        np.save(path, rng.integers(0, vocab, (8, 8)).astype(np.int32))
        inputs += ["--input", f"{name}={path}"]

    def compile_model(tag, gen):
        model = os.path.join(tmp, tag + ".mlir")
        artifact = os.path.join(tmp, tag + ".megc")
        e2e_util.run(["megc", *gen, "-o", model])
        e2e_util.run(["megc", model, "-o", artifact])
        return artifact

    def train(artifact, mesh, steps, *extra):
        args = ["megc-run", artifact, "--entry", "train_step", "--params",
                "init:7", "--steps", str(steps), *inputs, *extra]
        return megc_run(ranks_of(mesh), args)

    failed = False

    def report(name, error, tolerance):
        nonlocal failed
        ok = error <= tolerance
        failed |= not ok
        print(f"{name}: state rel err {error:.2e}" + ("" if ok else
                                                       "  FAILED"))

    # --- llama on dp_shard=2 x tp=2, resumed on other meshes.
    saved_mesh = "dp_shard=2,tp=2"
    llama = {}
    for mesh, flags in ((saved_mesh, ["--fsdp", "optim_grads_params"]),
                        ("", []), ("dp_shard=4", ["--fsdp", "optim"]),
                        ("tp=4", []),
                        ("dp_outer=2,dp_shard=2",
                         ["--fsdp", "optim_grads_params", "--outer-fsdp",
                          "optim"])):
        gen = ["gen", "llama", *LLAMA] + (["--mesh", mesh, *flags]
                                         if mesh else [])
        llama[mesh] = compile_model(mesh.replace("=", "").replace(",", "_")
                                    or "single", gen)
    ck = os.path.join(tmp, "ck")
    whole5 = os.path.join(tmp, "whole5.safetensors")
    train(llama[saved_mesh], saved_mesh, 5, "--save-every", "5",
          "--save-dir", ck, "--save-state", whole5)
    step5 = os.path.join(ck, "step-00000005")
    state5, chunk_bytes, record = read_distributed(step5)
    want5 = e2e_util.read_safetensors(whole5)
    if sorted(state5) != sorted(want5) or any(
            not np.array_equal(state5[k], want5[k]) for k in want5):
        sys.exit("the distributed checkpoint differs from the whole state "
                 "saved by the same run")
    whole_bytes = sum(a.size * 4 for a in want5.values())
    files = sorted(f for f in os.listdir(step5) if f.startswith("rank-"))
    print(f"llama {saved_mesh}: {len(record['chunks'])} chunks in "
          f"{len(files)} rank files, {chunk_bytes} bytes for a state of "
          f"{whole_bytes}, bitwise the gathered state")
    if chunk_bytes != whole_bytes or record["mesh"].find("tp=2") < 0:
        sys.exit(f"chunks hold {chunk_bytes} bytes, expected {whole_bytes} "
                 "(every element once); record mesh " + record["mesh"])

    # --async-save writes the same checkpoint, byte for byte.
    ck_async = os.path.join(tmp, "ck_async")
    train(llama[saved_mesh], saved_mesh, 5, "--save-every", "5",
          "--save-dir", ck_async, "--async-save")
    for name in sorted(os.listdir(step5)):
        with open(os.path.join(step5, name), "rb") as f, open(os.path.join(
                ck_async, "step-00000005", name), "rb") as g:
            if f.read() != g.read():
                sys.exit(f"--async-save wrote another {name}")
    print(f"--async-save on {saved_mesh}: the same files, byte for byte")

    final = {}
    for mesh in llama:
        out = os.path.join(tmp, f"resumed_{ranks_of(mesh)}_{mesh}.safetensors")
        log = train(llama[mesh], mesh, 10, "--resume", ck, "--save-state",
                    out).stdout
        if "resuming from " + step5 not in log:
            sys.exit(f"{mesh or 'one rank'}: did not resume from {step5}:\n"
                     + log)
        final[mesh] = e2e_util.read_safetensors(out)
    straight = os.path.join(tmp, "straight.safetensors")
    train(llama[saved_mesh], saved_mesh, 10, "--save-state", straight)
    want = e2e_util.read_safetensors(straight)
    same = all(np.array_equal(final[saved_mesh][k], want[k]) for k in want)
    print(f"resumed on {saved_mesh}: " + ("bitwise the uninterrupted run"
                                          if same else "DIFFERS  FAILED"))
    failed |= not same
    for mesh in ("", "dp_shard=4", "tp=4", "dp_outer=2,dp_shard=2"):
        error, _ = e2e_util.worst_state_error(final[mesh], want, mesh)
        report(f"resumed on {mesh or 'one rank'}", error, TOLERANCE)

    # --- An uncommitted checkpoint is skipped; a failed save names the
    # rank and file and leaves the earlier one complete.
    step6 = os.path.join(ck, "step-00000006")
    shutil.copytree(step5, step6)
    os.remove(os.path.join(step6, "checkpoint.json"))
    log = train(llama[""], "", 6, "--resume", ck)
    if "skips an incomplete checkpoint" not in log.stderr or \
            "resuming from " + step5 not in log.stdout:
        sys.exit("--resume did not skip the uncommitted checkpoint:\n"
                 + log.stdout + log.stderr)
    # One rank's disk fills during a save (a model whose pieces exceed the
    # limit while its code does not): every rank fails, naming that rank
    # and its file, and the checkpoint before stays complete.
    big_mesh = "dp_shard=2,tp=2"
    big = compile_model("big", ["gen", "llama", "--layers", "2", "--hidden",
                                "128", "--heads", "8", "--kv-heads", "4",
                                "--ffn", "256", "--seq", "8", "--vocab", "64",
                                "--batch", "8", "--train", "--mesh", big_mesh,
                                "--fsdp", "optim_grads_params"])
    big_ck = os.path.join(tmp, "big_ck")
    train(big, big_mesh, 1, "--save-every", "1", "--save-dir", big_ck)
    os.makedirs(os.path.join(big_ck, "step-00000006"))
    limit = [sys.executable, os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "..", "megc-run", "Inputs",
        "with_file_limit.py"), "--rank", "1", "400000"]
    result = megc_run(4, limit + ["megc-run", big, "--entry", "train_step",
                                  "--params", "init:7", "--steps", "2",
                                  *inputs, "--resume", big_ck,
                                  "--save-every", "1", "--save-dir", big_ck],
                      expect_ok=False)
    text = result.stdout + result.stderr
    if result.returncode == 0 or "step-00000002/' is incomplete: rank 1: " \
            "cannot write" not in text or "rank-00001.safetensors" not in text \
            or "File too large" not in text:
        sys.exit("a save on a full disk did not fail clearly:\n" + text)
    if os.path.exists(os.path.join(big_ck, "step-00000002",
                                   "checkpoint.json")):
        sys.exit("a failed save committed its record")
    if os.path.exists(os.path.join(big_ck, "step-00000006")):
        sys.exit("the next saving run did not remove the uncommitted "
                 "step-00000006")
    line = next(l for l in text.splitlines() if "is incomplete" in l)
    print("full disk on rank 1: " + line.strip()[:200])
    read_distributed(os.path.join(big_ck, "step-00000001"))

    # --- DeepSeek-V3 under ep=2, resumed on one rank and on dp_shard=2.
    deepseek = {}
    for mesh, flags in (("ep=2", ["--fsdp", "optim_grads_params"]),
                        ("", []),
                        ("dp_shard=2", ["--fsdp", "optim_grads_params"])):
        gen = ["import", DEEPSEEK, *DEEPSEEK_MODEL] + (
            ["--mesh", mesh, *flags] if mesh else [])
        deepseek[mesh] = compile_model(
            "deepseek_" + (mesh.replace("=", "") or "single"), gen)
    ds_ck = os.path.join(tmp, "ds_ck")
    train(deepseek["ep=2"], "ep=2", 5, "--save-every", "5", "--save-dir",
          ds_ck)
    read_distributed(os.path.join(ds_ck, "step-00000005"))
    straight = os.path.join(tmp, "ds_straight.safetensors")
    train(deepseek["ep=2"], "ep=2", 10, "--save-state", straight)
    want = e2e_util.read_safetensors(straight)
    for mesh in ("ep=2", "", "dp_shard=2"):
        out = os.path.join(tmp, f"ds_resumed_{mesh or 'single'}.safetensors")
        train(deepseek[mesh], mesh, 10, "--resume", ds_ck, "--save-state",
              out)
        if mesh == "ep=2":
            same = open(out, "rb").read() == open(straight, "rb").read()
            failed |= not same
            print("DeepSeek-V3 ep=2 resumed on ep=2: " + (
                "bitwise the uninterrupted run (router biases included)"
                if same else "DIFFERS  FAILED"))
            continue
        error, _ = e2e_util.worst_state_error(
            e2e_util.read_safetensors(out), want, mesh)
        report(f"DeepSeek-V3 ep=2 resumed on {mesh or 'one rank'}", error,
               TOLERANCE)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
