"""Numeric fuzz: one literal of a valid model replaced by an edge value.

Each mutant of a model's meg IR replaces one numeric literal (a float such
as an epsilon, a scale, a learning rate, an init scale or a constant
table's entry, or an i64 attribute) with a value at an edge of its type:
0, -0, the smallest subnormal and normal f32, the f32 maximum and its
negation, 65504, 1e30, -1, and values that overflow f32 (1e40, 1e300);
integers get 0, -1, 2^31 - 1, 2^63 - 1 and -2^63. megc compiles it; an
accepted mutant runs forward and two training steps under megc-run (with
mpirun for a model with a mesh) from init:1 parameters and fixed tokens.

Outcomes: rejected by megc (a clean error), stopped by megc-run (a clean
error: a non-finite loss, ...), accepted with finite outputs, accepted with
non-finite outputs (reported with the literal's op and attribute, for the
note to explain), and failures: a crash (a signal, "LLVM ERROR", an
assertion, a stack dump) or a hang (no exit within --timeout). Exit status
1 on any failure.

  numeric_fuzz.py --model tp|ep|imported --count N [--seed S] [--jobs J]
                  [--tmp DIR] [--report FILE.json]
"""
import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "test", "fuzz"))
import mpi_util  # noqa: E402
import mutate_ir  # noqa: E402

# The compiler's crash signs (mutate_ir.py's) and a running program's.
CRASH_MARKERS = mutate_ir.CRASH_MARKERS + ("Aborted", "core dumped",
                                           "Sanitizer")
FLOAT_EDGES = ["0.000000e+00", "-0.000000e+00", "1.401298e-45",
               "1.175494e-38", "3.402823e+38", "-3.402823e+38",
               "6.550400e+04", "1.000000e+30", "-1.000000e+00",
               "1.000000e+40", "1.000000e+300"]
INT_EDGES = ["0", "-1", str(2**31 - 1), str(2**63 - 1), str(-2**63)]
FLOAT = re.compile(r"(?<![\w.#%@$-])-?\d+\.\d+(?:[eE][-+]?\d+)?(?![\w.])")
# i64 attributes other than meg.layer (a block's index, not a value).
INT_ATTR = re.compile(r"(?<!meg\.layer = )(?<== )-?\d+(?= : i64)")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')

SMALL = ["--hidden", "32", "--heads", "4", "--seq", "8", "--vocab", "64",
         "--batch", "4", "--train"]
MODELS = {
    "tp": (["gen", "llama", "--layers", "2", "--kv-heads", "2", "--ffn",
            "48", *SMALL, "--mesh", "tp=2"], 2),
    "ep": (["gen", "deepseek", "--layers", "2", "--dense-layers", "1",
            "--experts", "4", "--moe-ffn", "16", "--ffn", "48", *SMALL,
            "--mesh", "ep=2"], 2),
    "imported": (["import", os.path.join(ROOT, "test", "e2e", "hf-fixtures",
                                         "qwen3"),
                  "--seq", "8", "--batch", "2", "--train"], 1),
}


def literals(text):
    """(start, end, kind) of every numeric literal outside strings."""
    strings = [m.span() for m in STRING.finditer(text)]

    def quoted(position):
        return any(a <= position < b for a, b in strings)
    found = [(m.start(), m.end(), "float") for m in FLOAT.finditer(text)
             if not quoted(m.start())]
    found += [(m.start(), m.end(), "int") for m in INT_ATTR.finditer(text)
              if not quoted(m.start())]
    return sorted(found)


def context(text, start):
    """'op attribute' of the literal at `start`: the last op or attribute
    before it on its line, and the word before the literal."""
    line_start = text.rfind("\n", 0, start) + 1
    head = text[line_start:start]
    # The op or attribute the literal belongs to: the last one before it.
    ops = re.findall(r"(#?meg\.\w+|arith\.\w+)(?![\w.])", head)
    ops = [op for op in ops if op not in ("meg.name", "meg.layer")]
    before = re.findall(r"([A-Za-z_]\w*)\W*$", head)
    return f"{ops[-1] if ops else '?'} {before[-1] if before else '?'}"


def crashed(result):
    text = result.stdout + result.stderr
    return result.returncode < 0 or result.returncode > 128 or any(
        marker in text for marker in CRASH_MARKERS)


def run(command, timeout, env=None):
    try:
        return subprocess.run(command, capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None


def finite_outputs(directory):
    """Whether every .npy output of a run is finite, and which are not."""
    bad = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".npy"):
            array = np.load(os.path.join(directory, name))
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                bad.append(name[:-4])
    return bad


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--tmp")
    parser.add_argument("--report")
    args = parser.parse_args()
    tmp = args.tmp or tempfile.mkdtemp(prefix="numeric-fuzz-")
    os.makedirs(tmp, exist_ok=True)
    for tool in ("megc", "megc-run"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not on PATH")

    generate, ranks = MODELS[args.model]
    base = os.path.join(tmp, "base.mlir")
    made = subprocess.run(["megc", *generate, "-o", base],
                          capture_output=True, text=True)
    if made.returncode != 0:
        sys.exit(f"megc {' '.join(generate)} failed:\n{made.stderr}")
    text = open(base).read()
    vocab = int(re.search(r"vocab_size\\22:(\d+)", text).group(1))
    shape = [int(d) for d in re.search(
        r'tensor<(\d+)x(\d+)xi32> \{meg.name = "input_ids"', text).groups()]
    batch = shape[0] * ranks if args.model == "ep" else shape[0]
    rng = np.random.default_rng(7)
    inputs = []
    for name in ("input_ids", "labels"):
        path = os.path.join(tmp, name + ".npy")
        np.save(path, rng.integers(0, vocab, (batch, shape[1]))
                .astype(np.int32))
        inputs.append(f"{name}={path}")
    launch = mpi_util.mpirun_command(ranks) if ranks > 1 else []
    spots = literals(text)
    print(f"{args.model}: {len(spots)} literals in {base}; {args.count} "
          f"mutants, seed {args.seed}", flush=True)

    def outcome(index):
        chooser = random.Random(args.seed * 1_000_003 + index)
        start, end, kind = chooser.choice(spots)
        value = chooser.choice(FLOAT_EDGES if kind == "float" else INT_EDGES)
        where = context(text, start)
        record = {"index": index, "literal": text[start:end],
                  "value": value, "context": where}
        work = os.path.join(tmp, f"m{index}")
        os.makedirs(work, exist_ok=True)
        model = os.path.join(work, "m.mlir")
        with open(model, "w") as f:
            f.write(text[:start] + value + text[end:])
        artifact = os.path.join(work, "m.megc")
        result = run(["megc", model, "-o", artifact], args.timeout)
        if result is None:
            return dict(record, outcome="hang", stage="megc")
        if crashed(result):
            return dict(record, outcome="crash", stage="megc",
                        output=(result.stdout + result.stderr)[-2000:])
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines()
                      if "error:" in line]
            return dict(record, outcome="rejected",
                        message=(errors or ["?"])[0][:300])
        for entry, extra in (("forward", [f"--input", inputs[0]]),
                             ("train_step", ["--input", inputs[0],
                                             "--input", inputs[1],
                                             "--steps", "2"])):
            out = os.path.join(work, entry)
            result = run([*launch, "megc-run", artifact, "--entry", entry,
                          "--params", "init:1", *extra, "--output-dir", out],
                         args.timeout)
            if result is None:
                return dict(record, outcome="hang", stage=entry)
            if crashed(result):
                return dict(record, outcome="crash", stage=entry,
                            output=(result.stdout + result.stderr)[-2000:])
            if result.returncode != 0:
                errors = [line for line in result.stderr.splitlines()
                          if "error:" in line]
                return dict(record, outcome="stopped", stage=entry,
                            message=(errors or ["?"])[0][:300])
            bad = finite_outputs(out)
            if bad:
                return dict(record, outcome="nonfinite", stage=entry,
                            outputs=bad)
        shutil.rmtree(work, ignore_errors=True)
        return dict(record, outcome="finite")

    records = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for done, record in enumerate(pool.map(outcome, range(args.count)),
                                      1):
            records.append(record)
            if record["outcome"] in ("crash", "hang"):
                print(f"FAIL mutant {record['index']}: {record['outcome']} "
                      f"in {record['stage']}: {record['context']} "
                      f"{record['literal']} -> {record['value']}\n"
                      f"{record.get('output', '')}", flush=True)
            if done % 50 == 0 or done == args.count:
                print(f"  {done}/{args.count} mutants", flush=True)

    counts = collections.Counter(r["outcome"] for r in records)
    print(f"{args.model}: " + ", ".join(
        f"{counts[k]} {k}" for k in ("rejected", "stopped", "finite",
                                     "nonfinite", "crash", "hang")))
    groups = collections.Counter(
        (r["outcome"], r["context"], r["value"], r.get("stage", ""))
        for r in records if r["outcome"] in ("nonfinite", "stopped"))
    for (kind, where, value, stage), n in sorted(groups.items()):
        print(f"  {kind:9} {n:3}x {where} -> {value} ({stage})")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(records, f, indent=1)
    return 1 if counts["crash"] or counts["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
