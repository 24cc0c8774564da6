"""Token data for megc.train: Megatron indexed datasets and raw files give
the windows NumPy cuts from the same tokens, and the dtype comes from the
index. The datasets are written by test/megc-run/make_indexed_dataset.py
from the format's description."""

import subprocess
import sys

import numpy as np
import pytest

import megc
from conftest import ROOT

FIXTURES = ROOT / "test" / "e2e" / "hf-fixtures"
WRITER = ROOT / "test" / "megc-run" / "make_indexed_dataset.py"


@pytest.fixture(scope="module")
def program():
    ir = megc.import_hf(FIXTURES / "llama", seq=8, batch=2, train=True)
    return megc.Session(megc.compile(ir), device="cpu").program


def write(prefix, *args):
    subprocess.run([sys.executable, WRITER, prefix, *map(str, args)],
                   check=True)


@pytest.mark.parametrize("dtype", ["uint16", "int32"])
def test_indexed_windows_match_numpy(program, tmp_path, dtype):
    prefix = tmp_path / "docs"
    write(prefix, "--raw", tmp_path / "docs.raw", "--dtype", dtype,
          "--documents", 9)
    tokens = np.fromfile(tmp_path / "docs.raw",
                         "<u2" if dtype == "uint16" else "<i4")
    stream = megc._megc.TokenDataset(program, "train_step", str(prefix),
                                     None, None)
    assert (stream.dtype, stream.indexed) == (dtype, True)
    assert stream.num_tokens == len(tokens)
    windows = (len(tokens) - 1) // 8
    assert stream.num_windows == windows
    # In file order, across the end of the first epoch.
    for step in range(windows):
        batch = stream.next()
        for row in range(2):
            w = (2 * step + row) % windows
            np.testing.assert_array_equal(batch["input_ids"][row],
                                          tokens[8 * w:8 * w + 8])
            np.testing.assert_array_equal(batch["labels"][row],
                                          tokens[8 * w + 1:8 * w + 9])


def test_indexed_and_raw_shuffle_alike(program, tmp_path):
    write(tmp_path / "docs", "--raw", tmp_path / "docs.raw")
    indexed = megc._megc.TokenDataset(program, "train_step",
                                      str(tmp_path / "docs.idx"), None, 5)
    raw = megc._megc.TokenDataset(program, "train_step",
                                  str(tmp_path / "docs.raw"), "uint16", 5)
    assert raw.indexed is False
    for _ in range(3 * indexed.num_windows):
        a, b = indexed.next(), raw.next()
        np.testing.assert_array_equal(a["input_ids"], b["input_ids"])
        np.testing.assert_array_equal(a["labels"], b["labels"])


def test_bad_tokens_found_at_open(program, tmp_path):
    tokens = np.arange(200, dtype="<u2") % 96
    tokens[150] = 96
    tokens.tofile(tmp_path / "big.bin")
    with pytest.raises(megc.Error, match="token 96 at byte offset 300 "
                       r"\(token 150\) is not below the vocabulary size 96"):
        megc._megc.TokenDataset(program, "train_step",
                                str(tmp_path / "big.bin"), None, None)
    write(tmp_path / "docs")
    with pytest.raises(megc.Error, match="holds uint16 tokens, but int32 "
                       "was asked for"):
        megc._megc.TokenDataset(program, "train_step",
                                str(tmp_path / "docs"), "int32", None)
