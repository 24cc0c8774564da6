"""Fixtures of the megc package tests: the command-line tools of the build
(for the equivalence tests), a small Llama preset, its artifact and a
batch."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import megc

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MEGC_BUILD_DIR", ROOT / "build"))

# The preset every test shares: small enough to compile in a second or two.
LLAMA = dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=176, vocab=256,
             seq=16, batch=2)


class Tools:
    """Runs megc and megc-run from the build directory."""

    def __init__(self, bin_dir):
        self.bin_dir = bin_dir

    def run(self, tool, *args):
        path = self.bin_dir / tool
        if not path.exists():
            pytest.fail(f"{path} is missing: build the project first")
        result = subprocess.run([str(path), *map(str, args)],
                                capture_output=True)
        if result.returncode != 0:
            pytest.fail(f"{tool} {' '.join(map(str, args))} failed:\n"
                        f"{result.stderr.decode()}")
        return result.stdout


@pytest.fixture(scope="session")
def tools():
    return Tools(BUILD / "bin")


@pytest.fixture(scope="session")
def llama_ir():
    return megc.gen.llama(**LLAMA, train=True, lr=3e-3)


@pytest.fixture(scope="session")
def llama_artifact(llama_ir):
    return megc.compile(llama_ir)


@pytest.fixture(scope="session")
def batch():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, LLAMA["vocab"], (LLAMA["batch"], LLAMA["seq"]))
    ids = ids.astype(np.int32)
    return {"input_ids": ids, "labels": np.roll(ids, -1, axis=1)}
