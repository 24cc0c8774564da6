"""Checks the memory plans in `megc --emit=megrt` output: the arena is no
smaller than the peak of live intermediates and, for a multi-layer model,
much smaller than the sum of all intermediates (memory is reused)."""
import re
import sys

plans = re.findall(r"^entry (\S+) arena (\d+) peak (\d+) unplanned (\d+)$",
                   open(sys.argv[1]).read(), re.M)
if not plans:
    sys.exit("no memory plan found")
for name, arena, peak, unplanned in plans:
    arena, peak, unplanned = int(arena), int(peak), int(unplanned)
    print(f"{name}: arena {arena}, peak {peak}, without reuse {unplanned}")
    if arena < peak:
        sys.exit(f"{name}: arena {arena} is below the live peak {peak}")
    if arena * 2 > unplanned:
        sys.exit(f"{name}: arena {arena} reuses too little of {unplanned}")
