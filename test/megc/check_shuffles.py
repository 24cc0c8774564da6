"""Checks that every row-reduction kernel of a CUDA program reduces its rows
with warp shuffles: for each kernel whose strategy (in `megc --emit=megrt`
output) is row_reduction, at least one of its launches' PTX entries holds a
`shfl.sync.bfly`. Fails naming the kernels that do not, or when the program
has no row reduction at all.

With --vectors, counts instead the pointwise kernels whose launches use
128-bit global loads or stores (`ld.global.v4` / `st.global.v4` of 32-bit
elements, or of 16-bit ones beside wider), failing when none does.

Usage: check_shuffles.py PROGRAM.megrt FILE.ptx [--vectors]"""
import re
import sys

program, ptx = (open(path).read() for path in sys.argv[1:3])

entries = {}
for name, body in re.findall(r"\.entry (\w+)\((.*?)\n}", ptx, re.S):
    entries[name] = body

kernels = []  # (name, kind, [launch entries])
for line in program.splitlines():
    if m := re.match(r"kernel \d+ (\w+) ", line):
        kernels.append((m.group(1), None, []))
    elif m := re.match(r"\s+cuda strategy #meg\.kernel_strategy<(\w+)", line):
        kernels[-1] = (kernels[-1][0], m.group(1), kernels[-1][2])
    elif m := re.match(r"\s+cuda (\w+) grid ", line):
        kernels[-1][2].append(m.group(1))

if "--vectors" in sys.argv[3:]:
    pointwise = [(name, launches) for name, kind, launches in kernels
                 if kind == "pointwise"]
    vectorized = [name for name, launches in pointwise
                  if any(re.search(r"(ld|st)\.global\.v4\.", entries.get(e, ""))
                         for e in launches)]
    if not vectorized:
        sys.exit(f"none of {len(pointwise)} pointwise kernels uses 128-bit "
                 "loads or stores")
    print(f"{len(vectorized)} of {len(pointwise)} pointwise kernels with "
          "128-bit loads and stores")
    sys.exit(0)

rows = [(name, launches) for name, kind, launches in kernels
        if kind == "row_reduction"]
if not rows:
    sys.exit("no row_reduction kernel in the program")
missing = [name for name, launches in rows
           if not any("shfl.sync.bfly" in entries.get(entry, "")
                      for entry in launches)]
if missing:
    sys.exit(f"{len(missing)} of {len(rows)} row-reduction kernels have no "
             "warp shuffle: " + ", ".join(missing))
print(f"{len(rows)} row-reduction kernels, all with warp shuffles")
