"""Kernel launches and bytes they move per entry, from `megc --emit=megrt`
(and, for bench/gpu_bench.py, per kernel and per attention command).

Bytes moved by a launch is the size of every buffer it reads or writes
(each counted once): the traffic a kernel must at least cause. GEMMs and
copies are counted separately. Used to compare `megc` with and without
`--no-fuse`:

  /usr/bin/python3 bench/kernel_traffic.py fused.txt unfused.txt
"""
import re
import sys

SIZES = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8}


def entry_lines(path):
    """(entry name, line, its buffers' bytes so far) for each line of an
    entry in the program text, buffer lines taken into the dict (by %bN)
    rather than yielded; each entry's header comes as line None."""
    entry, buffers = None, {}
    for line in open(path):
        m = re.match(r"entry (\S+)", line)
        if m:
            entry, buffers = m.group(1), {}
            yield entry, None, buffers
            continue
        sized = buffer_bytes(line)
        if sized:
            buffers[sized[0]] = sized[1]
        elif entry is not None:
            yield entry, line, buffers


def launch_bytes(line, buffers):
    """(kernel, bytes its buffers hold, each counted once) of a launch
    line, or None."""
    m = re.match(r"  launch (\S+)\((.*)\)", line)
    if not m:
        return None
    return m.group(1), sum(buffers[b] for b in set(m.group(2).split(", ")))


def read(path):
    entries = {}
    for name, line, buffers in entry_lines(path):
        entry = entries.setdefault(name, {
            "launches": 0, "bytes": 0, "gemms": 0, "copies": 0})
        if line is None:
            continue
        launch = launch_bytes(line, buffers)
        if launch:
            entry["launches"] += 1
            entry["bytes"] += launch[1]
        elif line.startswith("  gemm"):
            entry["gemms"] += 1
        elif line.startswith("  copy"):
            entry["copies"] += 1
    return entries


def buffer_bytes(line):
    """(name, bytes) of a buffer line of an entry, or None."""
    m = re.match(r"  (%b\d+) = .* : tensor<((?:\d+x)*)(\w+)>", line)
    if not m:
        return None
    count = 1
    for d in m.group(2).split("x")[:-1]:
        count *= int(d)
    return m.group(1), count * SIZES[m.group(3)]


def per_command(path, entry_name):
    """Per kernel (by name), the bytes its launches in one run of the entry
    move (with "embedding_grad": the gradient and ids read and the table
    written once each), and per attention command ("attention",
    "attention_grad") the FLOPs of its matrix products (causal: half of
    them)."""
    kernels, flops = {}, {}
    for name, line, buffers in entry_lines(path):
        if name != entry_name or line is None:
            continue
        launch = launch_bytes(line, buffers)
        if launch:
            kernels[launch[0]] = kernels.get(launch[0], 0) + launch[1]
            continue
        m = re.match(r"  library embedding_grad\(grad (%b\d+), ids (%b\d+)"
                     r".* -> table (%b\d+)\)", line)
        if m:
            kernels["embedding_grad"] = kernels.get("embedding_grad", 0) + sum(
                buffers[b] for b in m.groups())
            continue
        m = re.match(r"  (attention(?:_grad)?) .* b (\d+) sq (\d+) skv (\d+) "
                     r"h (\d+) hkv \d+ d (\d+) dv (\d+)( causal)?", line)
        if m:
            b, sq, skv, h, d, dv = (int(g) for g in m.groups()[1:7])
            # Forward: Q K^T and P V; backward: those two again (P is
            # recomputed), dV, dP, dQ and dK.
            products = 2 if m.group(1) == "attention" else 5
            work = 2 * b * h * sq * skv * (d + dv) / 2 * products
            if m.group(8):
                work /= 2
            flops[m.group(1)] = flops.get(m.group(1), 0) + work
    return kernels, flops


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
