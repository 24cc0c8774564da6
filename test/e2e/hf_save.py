"""Checkpoints in Hugging Face layout, saved and loaded by megc-run:
- a tied, sharded model trained for two steps and saved with
  `--save-params DIR/ --max-shard-size 30KB` gives shards, an index and the
  model's config.json, holding exactly the weights the same run saves to one
  .safetensors file, the tied weight once; the directory loads back;
- an f32 checkpoint loaded into a bf16 model is rounded to nearest even,
  and saved as bf16 with the config's dtype bfloat16;
- a DeepSeek-V3 checkpoint (experts one tensor each) loaded by 2 ranks of
  an expert-parallel, FSDP-sharded model (each rank holding pieces of its
  experts' stacked weights) and saved again gives back every tensor of the
  checkpoint, byte for byte, under its own name."""
import argparse
import json
import os
import sys

import numpy as np

import e2e_util
import mpi_util

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "hf-fixtures")


def compile_import(case, tmp, name, extra=()):
    model = os.path.join(tmp, name + ".mlir")
    artifact = os.path.join(tmp, name + ".megc")
    e2e_util.run(["megc", "import", os.path.join(FIXTURES, case), "--seq",
                  "8", "--batch", "2", *extra, "-o", model])
    e2e_util.run(["megc", model, "-o", artifact])
    return artifact


def read_directory(path):
    """name -> raw tensor bytes and dtype of every shard the index lists."""
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        index = json.load(f)
    tensors = {}
    for file in sorted(set(index["weight_map"].values())):
        tensors.update(read_raw(os.path.join(path, file)))
    return index, tensors


def read_raw(path):
    data = open(path, "rb").read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    return {name: (info["dtype"], body[info["data_offsets"][0]:
                                       info["data_offsets"][1]])
            for name, info in header.items() if name != "__metadata__"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    tmp = options.tmp
    os.makedirs(tmp, exist_ok=True)
    failures = []

    # Tied and sharded: train, save both ways, compare, load back.
    case = "llama-tied-sharded"
    source = os.path.join(FIXTURES, case)
    artifact = compile_import(case, tmp, "tied", ["--train", "--lr", "0.01"])
    reference = e2e_util.read_safetensors(
        os.path.join(source, "reference.safetensors"))
    np.save(os.path.join(tmp, "ids.npy"), reference["input_ids"].astype(np.int32))
    np.save(os.path.join(tmp, "labels.npy"), reference["labels"].astype(np.int32))
    inputs = ["--input", f"input_ids={tmp}/ids.npy",
              "--input", f"labels={tmp}/labels.npy"]
    saved = os.path.join(tmp, "saved") + "/"
    for target in (saved, os.path.join(tmp, "saved.safetensors")):
        e2e_util.run(["megc-run", artifact, "--entry", "train_step",
                      "--params", source, "--steps", "2", *inputs,
                      "--save-params", target, "--max-shard-size", "30KB"])
    index, sharded = read_directory(saved)
    single = read_raw(os.path.join(tmp, "saved.safetensors"))
    shards = sorted(set(index["weight_map"].values()))
    print(f"{case}: {len(sharded)} tensors in {len(shards)} shards")
    if len(shards) < 2:
        failures.append(f"expected several shards, got {shards}")
    if "lm_head.weight" in sharded or sorted(sharded) != sorted(single):
        failures.append(f"sharded tensors {sorted(sharded)} differ from the "
                        f"single file's {sorted(single)}")
    elif any(sharded[name] != single[name] for name in single):
        failures.append("a sharded tensor differs from the single file's")
    total = sum(len(data) for _, data in sharded.values())
    if index["metadata"]["total_size"] != total:
        failures.append(f"index total_size {index['metadata']['total_size']}, "
                        f"shards hold {total} bytes")
    with open(os.path.join(source, "config.json")) as f:
        want_config = json.load(f)
    with open(os.path.join(saved, "config.json")) as f:
        config = json.load(f)
    if config != want_config:
        failures.append(f"config.json {config} differs from {want_config}")
    trained = e2e_util.read_safetensors(os.path.join(tmp, "saved.safetensors"))
    start = e2e_util.read_safetensors(
        os.path.join(source, "model-00001-of-00004.safetensors"))
    if all(np.array_equal(trained[k], v) for k, v in start.items()):
        failures.append("the saved weights are the initial ones: no training")
    out = os.path.join(tmp, "out")
    for params, name in ((saved, "dir"), (os.path.join(tmp, "saved.safetensors"),
                                          "file")):
        e2e_util.run(["megc-run", artifact, "--entry", "forward", "--params",
                      params, "--input", f"input_ids={tmp}/ids.npy",
                      "--output-dir", os.path.join(out, name)])
    by_dir = np.load(os.path.join(out, "dir", "logits.npy"))
    by_file = np.load(os.path.join(out, "file", "logits.npy"))
    if not np.array_equal(by_dir, by_file):
        failures.append("logits from the loaded directory differ from those "
                        "of the single file")

    # f32 checkpoint into a bf16 model, saved back as bf16.
    case = "llama"
    source = os.path.join(FIXTURES, case)
    artifact = compile_import(case, tmp, "bf16", ["--dtype", "bf16"])
    bf16_dir = os.path.join(tmp, "bf16") + "/"
    e2e_util.run(["megc-run", artifact, "--entry", "forward", "--params",
                  source, "--input", f"input_ids={tmp}/ids.npy",
                  "--save-params", bf16_dir])
    written = read_raw(os.path.join(bf16_dir, "model.safetensors"))
    weights = e2e_util.read_safetensors(os.path.join(source,
                                                     "model.safetensors"))
    wrong = [name for name, value in weights.items()
             if written[name][0] != "BF16" or
             np.frombuffer(written[name][1], np.uint16).tolist() !=
             e2e_util.bf16_bits(value).ravel().tolist()]
    with open(os.path.join(bf16_dir, "config.json")) as f:
        dtype = json.load(f).get("dtype")
    print(f"{case} as bf16: {len(weights) - len(wrong)}/{len(weights)} "
          f"weights rounded to nearest even, config dtype {dtype}")
    if wrong or sorted(written) != sorted(weights):
        failures.append(f"bf16 weights not the rounded checkpoint: {wrong}")
    if dtype != "bfloat16":
        failures.append(f"config dtype {dtype}, expected bfloat16")

    # Stacked experts split over ep=2 and sharded over dp_shard=2, back to
    # one tensor per expert.
    case = "deepseek-v3"
    source = os.path.join(FIXTURES, case)
    artifact = compile_import(case, tmp, "experts",
                              ["--batch", "4", "--mesh", "dp_shard=2,ep=2",
                               "--fsdp", "optim_grads_params"])
    np.save(os.path.join(tmp, "ids4.npy"),
            np.arange(32, dtype=np.int32).reshape(4, 8) % 64)
    experts_dir = os.path.join(tmp, "experts") + "/"
    result = mpi_util.run_ranks(4, [
        "megc-run", artifact, "--entry", "forward", "--params",
        source, "--input", f"input_ids={tmp}/ids4.npy", "--save-params",
        experts_dir])
    if result.returncode != 0:
        failures.append(f"expert-parallel run failed:\n{result.stderr}")
    else:
        written = read_raw(os.path.join(experts_dir, "model.safetensors"))
        original = read_raw(os.path.join(source, "model.safetensors"))
        differ = sorted(name for name in original
                        if written.get(name) != original[name])
        print(f"{case} over dp_shard=2 x ep=2: "
              f"{len(original) - len(differ)}/{len(original)} tensors saved "
              f"as loaded, {len(written)} written")
        if differ or sorted(written) != sorted(original):
            failures.append(f"expert checkpoint not saved as loaded: {differ} "
                            f"(written {sorted(set(written) - set(original))})")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
