#!/usr/bin/env python3
"""Writes token data in Megatron-LM's indexed dataset format, written here
from the format's description (not megrt's reader), and the same tokens as a
raw file, for the tests that both train alike.

  make_indexed_dataset.py OUT_PREFIX [--raw RAW] [--dtype uint16|int32]
                          [--vocab V] [--documents D] [--seed S]
                          [--corrupt KIND]

OUT_PREFIX.bin holds the token ids of D documents (random lengths, each
ending in the end-of-document token V - 1, as preprocess_data.py appends
it), one sequence per document; OUT_PREFIX.idx is the index: the 9-byte
header b"MMIDIDX\\x00\\x00", version (<Q, 1), the dtype code (<B: 8 uint16,
4 int32), the sequence count (<Q), the document-index count (<Q: documents
+ 1), then the sequence lengths (<i4 each), the sequence byte offsets in
the .bin (<i8 each) and the document indices (<i8 each: 0, 1, ..., D).
RAW gets the same ids, concatenated, as uint16 (or int32) little-endian.

--corrupt writes a damaged index for the error tests: `magic` (a wrong
header), `version` (version 2), `dtype` (code 7, float32), `truncated`
(the document indices cut short), `pointer` (the second sequence's offset
wrong), `count` (the .bin one token longer than the index says), `order`
(document indices out of order).
"""
import argparse
import struct

import numpy as np

CODES = {"uint16": 8, "int32": 4}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("prefix")
    parser.add_argument("--raw")
    parser.add_argument("--dtype", choices=sorted(CODES), default="uint16")
    parser.add_argument("--vocab", type=int, default=96)
    parser.add_argument("--documents", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corrupt", choices=[
        "magic", "version", "dtype", "truncated", "pointer", "count",
        "order"])
    args = parser.parse_args()

    random = np.random.default_rng(args.seed)
    dtype = np.dtype("<u2" if args.dtype == "uint16" else "<i4")
    documents = []
    for _ in range(args.documents):
        length = int(random.integers(3, 24))
        body = random.integers(0, args.vocab - 1, size=length)
        documents.append(np.append(body, args.vocab - 1).astype(dtype))
    tokens = np.concatenate(documents)

    lengths = np.array([len(d) for d in documents], dtype="<i4")
    offsets = np.concatenate([[0], np.cumsum(lengths[:-1])]).astype("<i8")
    offsets *= dtype.itemsize
    doc_index = np.arange(len(documents) + 1, dtype="<i8")
    magic, version, code = b"MMIDIDX\x00\x00", 1, CODES[args.dtype]
    if args.corrupt == "magic":
        magic = b"MMIDIDY\x00\x00"
    elif args.corrupt == "version":
        version = 2
    elif args.corrupt == "dtype":
        code = 7
    elif args.corrupt == "pointer":
        offsets[1] += dtype.itemsize
    elif args.corrupt == "order":
        doc_index[2], doc_index[3] = doc_index[3], doc_index[2]

    index = bytearray()
    index += magic
    index += struct.pack("<Q", version)
    index += struct.pack("<B", code)
    index += struct.pack("<Q", len(documents))
    index += struct.pack("<Q", len(doc_index))
    index += lengths.tobytes() + offsets.tobytes() + doc_index.tobytes()
    if args.corrupt == "truncated":
        index = index[:-4]
    with open(args.prefix + ".idx", "wb") as f:
        f.write(index)
    data = tokens.tobytes()
    if args.corrupt == "count":
        data += tokens[:1].tobytes()
    with open(args.prefix + ".bin", "wb") as f:
        f.write(data)
    if args.raw:
        tokens.tofile(args.raw)


if __name__ == "__main__":
    main()
