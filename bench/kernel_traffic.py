"""Kernel launches and bytes they move per entry, from `megc --emit=megrt`.

Bytes moved by a launch is the size of every buffer it reads or writes
(each counted once): the traffic a kernel must at least cause. GEMMs and
copies are counted separately. Used to compare `megc` with and without
`--no-fuse`:

  /usr/bin/python3 bench/kernel_traffic.py fused.txt unfused.txt
"""
import re
import sys

SIZES = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8}


def read(path):
    entries, buffers, entry = {}, {}, None
    for line in open(path):
        m = re.match(r"entry (\S+)", line)
        if m:
            entry = entries.setdefault(m.group(1), {
                "launches": 0, "bytes": 0, "gemms": 0, "copies": 0})
            buffers = {}
            continue
        m = re.match(r"  (%b\d+) = .* : tensor<((?:\d+x)*)(\w+)>", line)
        if m:
            count = 1
            for d in m.group(2).split("x")[:-1]:
                count *= int(d)
            buffers[m.group(1)] = count * SIZES[m.group(3)]
            continue
        m = re.match(r"  launch \S+\((.*)\)", line)
        if m:
            entry["launches"] += 1
            entry["bytes"] += sum(buffers[b] for b in
                                  set(m.group(1).split(", ")))
        elif line.startswith("  gemm"):
            entry["gemms"] += 1
        elif line.startswith("  copy"):
            entry["copies"] += 1
    return entries


def main():
    runs = [(path, read(path)) for path in sys.argv[1:]]
    print(f"{'file':24} {'entry':12} {'launches':>8} {'MB moved':>9} "
          f"{'gemms':>6} {'copies':>6}")
    for path, entries in runs:
        for name, e in entries.items():
            print(f"{path[-24:]:24} {name:12} {e['launches']:8} "
                  f"{e['bytes'] / 1e6:9.3f} {e['gemms']:6} {e['copies']:6}")


if __name__ == "__main__":
    main()
