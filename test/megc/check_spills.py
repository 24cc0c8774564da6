"""Assembles a PTX module with `ptxas -v` for an architecture and fails,
naming them, if any kernel spills registers to local memory (spill stores
or loads above 0 bytes) or if ptxas reports no kernel at all.

Usage: check_spills.py PTXAS ARCH FILE.ptx"""
import re
import subprocess
import sys

ptxas, arch, ptx = sys.argv[1:4]
result = subprocess.run([ptxas, "-v", f"-arch={arch}", ptx, "-o", "/dev/null"],
                        capture_output=True, text=True)
if result.returncode != 0:
    sys.exit(f"ptxas failed ({result.returncode}):\n{result.stderr}")
kernels = re.findall(
    r"Function properties for (\S+)\n\s*\d+ bytes stack frame, "
    r"(\d+) bytes spill stores, (\d+) bytes spill loads", result.stderr)
if not kernels:
    sys.exit(f"ptxas reported no kernel:\n{result.stderr}")
spilling = [f"{name} ({stores} bytes spill stores, {loads} loads)"
            for name, stores, loads in kernels if int(stores) or int(loads)]
if spilling:
    sys.exit(f"{arch}: {len(spilling)} of {len(kernels)} kernels spill: " +
             ", ".join(spilling))
print(f"{arch}: {len(kernels)} kernels, no spills")
