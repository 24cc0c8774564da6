"""Benchmark: the token check when a dataset opens.

megrt scans every token of a memory-mapped token file against the
vocabulary when it opens (megc-run --data, megc.train). This writes a
uint16 file of --gb gigabytes (random ids below the vocabulary), opens it
through the Python binding (the scan is most of the constructor) and, as
the baseline in the same run, takes NumPy's max over np.memmap of the same
file (one vectorised pass, no location of the offender). Both run on a warm
page cache, best of --repeats. Reports GB/s and the ratio.

Usage: PYTHONPATH=build/python python3 bench/token_scan.py [--gb 1]
       [--repeats 3] [--dir DIR]
"""
import argparse
import os
import tempfile
import time

import numpy as np

import megc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best(repeats, work):
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()

    ir = megc.import_hf(os.path.join(ROOT, "test", "e2e", "hf-fixtures",
                                     "llama"), seq=8, batch=2, train=True)
    program = megc.Session(megc.compile(ir), device="cpu").program
    vocab = 96
    tokens = int(args.gb * 1e9) // 2
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        path = os.path.join(scratch, "tokens.bin")
        chunk = 1 << 24
        random = np.random.default_rng(0)
        with open(path, "wb") as f:
            for start in range(0, tokens, chunk):
                count = min(chunk, tokens - start)
                f.write(random.integers(0, vocab, count,
                                        dtype=np.uint16).tobytes())
        size = os.path.getsize(path)

        def megrt_open():
            megc._megc.TokenDataset(program, "train_step", path, "uint16",
                                    None)

        def numpy_max():
            assert int(np.memmap(path, np.uint16, "r").max()) < vocab

        numpy_max()  # warm the page cache
        ours = best(args.repeats, megrt_open)
        theirs = best(args.repeats, numpy_max)
    print(f"{'':22}{'seconds':>10}{'GB/s':>8}")
    print(f"{'megrt open + scan':22}{ours:10.3f}{size / ours / 1e9:8.2f}")
    print(f"{'numpy memmap max':22}{theirs:10.3f}{size / theirs / 1e9:8.2f}")
    print(f"megrt / numpy throughput: {theirs / ours:.2f}x "
          f"({size / 1e9:.2f} GB, best of {args.repeats})")


if __name__ == "__main__":
    main()
