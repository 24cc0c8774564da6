"""Checks that an entry's arena shrinks strictly along the files given, from
the `entry NAME arena BYTES` lines of `megc --emit=megrt`:
compare_arenas.py ENTRY FILE1 FILE2 ..."""
import re
import sys

entry, files = sys.argv[1], sys.argv[2:]
arenas = []
for name in files:
    found = re.search(rf"^entry {entry} arena (\d+)", open(name).read(), re.M)
    if not found:
        sys.exit(f"{name}: no entry {entry}")
    arenas.append(int(found.group(1)))
print(" > ".join(f"{a}" for a in arenas))
for (a, b), name in zip(zip(arenas, arenas[1:]), files[1:]):
    if not b < a:
        sys.exit(f"{name}: arena {b} is not below {a}")
