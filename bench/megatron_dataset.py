"""Check: Megatron-LM's own indexed datasets train in megc as the raw file
of the same tokens, and Megatron reads what test/megc-run's writer makes.

Needs megatron-core from PyPI, which imports torch: installed on demand
into the benchmarks' PyTorch environment (bench/torch_venv.py); the check
skips with a message where that is not possible. In that environment it
  1. writes a dataset with megatron.core's IndexedDatasetBuilder (uint16,
     documents of one and of two sequences, as preprocess_data.py writes
     sentence-split documents), and the same tokens as a raw file;
  2. reads test/megc-run/make_indexed_dataset.py's dataset back with
     megatron.core's IndexedDataset: the same sequences and documents;
then trains the llama fixture for --steps shuffled steps on each of
Megatron's dataset and the raw file with megc-run and compares the losses
bit for bit.

Usage: python3 bench/megatron_dataset.py [--build build] [--steps 20]
Exit status 0 when every comparison holds (or it skipped), 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from torch_venv import torch_python  # noqa: E402

WRITE = r"""
import sys, numpy as np, torch
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
prefix, raw = sys.argv[1], sys.argv[2]
random = np.random.default_rng(1)
builder = IndexedDatasetBuilder(prefix + ".bin", dtype=np.uint16)
stream = []
for document in range(16):
    pieces = 1 + document % 2
    for _ in range(pieces):
        body = random.integers(0, 95, int(random.integers(3, 20)))
        stream.append(body)
        builder.add_item(torch.from_numpy(body.astype(np.int64)))
    stream.append(np.array([95]))
    builder.add_item(torch.tensor([95]))
    builder.end_document()
builder.finalize(prefix + ".idx")
np.concatenate(stream).astype("<u2").tofile(raw)
"""

READ = r"""
import sys, numpy as np
from megatron.core.datasets.indexed_dataset import IndexedDataset
prefix, raw = sys.argv[1], sys.argv[2]
dataset = IndexedDataset(prefix)
tokens = np.concatenate([dataset[i] for i in range(len(dataset))])
expected = np.fromfile(raw, "<u2")
assert tokens.dtype == np.uint16, tokens.dtype
assert np.array_equal(tokens, expected), "sequences differ"
assert list(dataset.document_indices) == list(range(len(dataset) + 1))
print(f"megatron reads {len(dataset)} sequences, {len(tokens)} tokens")
"""


def environment():
    python = torch_python()
    if python is None:
        return None
    probe = [python, "-c", "import megatron.core.datasets.indexed_dataset"]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        print("megatron_dataset: installing megatron-core", file=sys.stderr)
        install = subprocess.run([python, "-m", "pip", "install", "-q",
                                  "megatron-core"], capture_output=True)
        if install.returncode != 0 or subprocess.run(
                probe, capture_output=True).returncode != 0:
            print("megatron_dataset: skipped, megatron-core is not "
                  "installable: " + install.stderr.decode()[-400:])
            return None
    return python


def run(*command, cwd=None):
    result = subprocess.run([str(c) for c in command], capture_output=True,
                            text=True, cwd=cwd)
    if result.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))} failed:\n{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.environ.get(
        "MEGC_BUILD_DIR", os.path.join(ROOT, "build")))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    python = environment()
    if python is None:
        return 0
    binary = os.path.join(args.build, "bin")
    quiet = dict(os.environ, PYTHONWARNINGS="ignore")
    with tempfile.TemporaryDirectory() as t:
        subprocess.run([python, "-c", WRITE, f"{t}/megatron", f"{t}/m.raw"],
                       check=True, capture_output=True, env=quiet)
        run(sys.executable, os.path.join(ROOT, "test", "megc-run",
                                         "make_indexed_dataset.py"),
            f"{t}/ours", "--raw", f"{t}/ours.raw")
        read = subprocess.run([python, "-c", READ, f"{t}/ours",
                               f"{t}/ours.raw"], capture_output=True,
                              text=True, env=quiet)
        if read.returncode != 0:
            print("FAIL: megatron cannot read make_indexed_dataset.py's "
                  "dataset:\n" + read.stderr[-1000:])
            return 1
        print(read.stdout.strip())
        run(os.path.join(binary, "megc"), "import",
            os.path.join(ROOT, "test", "e2e", "hf-fixtures", "llama"),
            "--seq", 8, "--batch", 2, "--train", "-o", f"{t}/model.mlir")
        run(os.path.join(binary, "megc"), f"{t}/model.mlir", "-o",
            f"{t}/model.megc")
        losses = {}
        for name, data, extra in (("megatron", f"{t}/megatron", []),
                                  ("raw", f"{t}/m.raw",
                                   ["--data-dtype", "uint16"])):
            out = run(os.path.join(binary, "megc-run"), f"{t}/model.megc",
                      "--entry", "train_step", "--data", data, *extra,
                      "--data-seed", 11, "--steps", args.steps,
                      "--metrics", f"{t}/{name}.jsonl")
            if name == "megatron":
                print(out.splitlines()[0])
            with open(f"{t}/{name}.jsonl") as f:
                losses[name] = [json.loads(line)["loss"] for line in f]
        same = losses["megatron"] == losses["raw"]
        print(f"{args.steps} steps on Megatron's dataset and on the raw "
              f"file: losses {'identical' if same else 'DIFFER'} "
              f"(first {losses['raw'][0]:.6f}, last {losses['raw'][-1]:.6f})")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
