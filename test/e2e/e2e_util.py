"""Helpers for the end-to-end tests: safetensors writing, bf16 rounding,
.npy reading of bf16 outputs, running the tools, the tests' command line and
editing `megc gen` flags."""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np


def bf16_bits(x):
    """float32 -> bfloat16 bits (round to nearest even)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors, dtype="F32"):
    """tensors: name -> float32 array, stored as F32 or BF16."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = (bf16_bits(array) if dtype == "BF16"
                else np.asarray(array, np.float32)).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    """name -> float64 array (F32, BF16, F16, I32, I64)."""
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    kinds = {"F32": np.float32, "F16": np.float16, "I32": np.int32,
             "I64": np.int64, "BF16": np.uint16}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(body[begin:end], kinds[info["dtype"]])
        if info["dtype"] == "BF16":
            array = bf16_to_f32(array)
        tensors[name] = array.reshape(info["shape"]).astype(np.float64)
    return tensors


def read_output(path):
    """An output .npy as float64; bf16 comes as raw '<u2' bits."""
    array = np.load(path)
    if array.dtype == np.uint16:
        array = bf16_to_f32(array)
    return array.astype(np.float64)


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({result.returncode}):\n"
                 f"{result.stdout}{result.stderr}")
    return result.stdout


def relative_error(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def worst_state_error(got_state, want_state, name):
    """(worst relative error, its tensor) of a saved training state against
    the reference's: relative to each tensor's norm, or the largest
    magnitude where the reference is all zeros. Exits when the tensors or
    their shapes differ."""
    if sorted(got_state) != sorted(want_state):
        sys.exit(f"{name}: saved state has tensors "
                 f"{sorted(set(got_state) ^ set(want_state))} that differ "
                 "from the single-rank state")
    worst, worst_name = 0.0, ""
    for key, want in want_state.items():
        got = got_state[key]
        if got.shape != want.shape:
            sys.exit(f"{name}: {key} has shape {got.shape}, single rank "
                     f"{want.shape}")
        scale = np.linalg.norm(want)
        error = (np.linalg.norm(got - want) / scale if scale > 0
                 else np.abs(got).max())
        if error > worst:
            worst, worst_name = float(error), key
    return worst, worst_name


def check_gradients(loss, params, grads, rng, samples, tolerance, step=1e-5):
    """Compares gradients with central finite differences of `loss`
    (float64) on `samples` random elements of every parameter (error
    relative to that gradient's largest entry) and along one random
    direction through all parameters. Returns (ok, worst sampled error,
    directional relative error, message)."""
    worst = 0.0
    for name, value in params.items():
        got = grads[name]
        fd, mine = [], []
        for _ in range(samples):
            index = tuple(rng.integers(0, n) for n in value.shape)
            saved = value[index]
            value[index] = saved + step
            plus = loss(params)
            value[index] = saved - step
            minus = loss(params)
            value[index] = saved
            fd.append((plus - minus) / (2 * step))
            mine.append(got[index])
        scale = max(np.abs(got).max(), 1e-12)
        error = np.max(np.abs(np.array(mine) - np.array(fd))) / scale
        worst = max(worst, error)
        if error > tolerance:
            return (False, worst, None,
                    f"{name}: sampled gradient error {error:.3g} (megc {mine} "
                    f"vs finite differences {fd})")
    direction = {k: rng.standard_normal(v.shape) for k, v in params.items()}
    predicted = sum(np.sum(grads[k] * d) for k, d in direction.items())
    along = (loss({k: params[k] + step * direction[k] for k in params}) -
             loss({k: params[k] - step * direction[k] for k in params})) / (2 * step)
    directional = abs(predicted - along) / abs(along)
    message = (f"directional derivative {predicted:.6g} vs {along:.6g} "
               f"(relative error {directional:.3g})")
    return directional <= tolerance, worst, directional, message


def max_relative_error(got, want):
    """The largest elementwise difference, relative to the largest magnitude
    of `want` (so that tiny elements do not dominate)."""
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-12))


def parse_options():
    """`--tmp DIR` (required) and `--only TEXT` (the configurations whose
    name contains it), the command line of the multi-configuration tests;
    DIR is created."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--only", help="run the configurations whose name "
                        "contains this")
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    return options


def with_flags(base, flags):
    """`base` gen flags with the settings that `flags` give replaced by
    theirs (a replaced setting drops its value too), then `flags`."""
    given = {flag for flag in flags if flag.startswith("--")}
    kept, skip = [], False
    for index, flag in enumerate(base):
        if skip:
            skip = False
        elif flag in given:
            skip = index + 1 < len(base) and not base[index + 1].startswith(
                "--")
        else:
            kept.append(flag)
    return kept + list(flags)


def without_flags(flags, dropped):
    """`flags` less those named in `dropped` (flag -> how many values it
    takes): a parallel layout's flags, which a one-rank reference leaves
    out."""
    kept, skip = [], 0
    for flag in flags:
        if skip:
            skip -= 1
        elif flag in dropped:
            skip = dropped[flag]
        else:
            kept.append(flag)
    return kept
