"""Checks the dispatch tables of `megc --emit=megrt`: every kernel has code
for each target named on the command line, with a strategy and at least one
dispatch; each argument names one of the kernel's arguments or a place
inside its scratch area; CPU grids are one-dimensional and CUDA blocks fit a
thread block.

Usage: check_dispatches.py PROGRAM.txt TARGET[,TARGET]"""
import re
import sys

targets = sys.argv[2].split(",")
kernels = []
for line in open(sys.argv[1]):
    kernel = re.match(r"kernel \d+ (\S+) args (\d+)$", line)
    if kernel:
        kernels.append({"name": kernel.group(1),
                        "args": int(kernel.group(2)), "codes": {}})
        continue
    code = re.match(r"  (cpu|cuda) strategy (#meg\.kernel_strategy<.*>) "
                    r"scratch (\d+)$", line)
    if code:
        kernels[-1]["codes"][code.group(1)] = {
            "scratch": int(code.group(3)), "dispatches": []}
        continue
    dispatch = re.match(r"  (cpu|cuda) (\S+) grid (\S+)(?: block (\S+))? "
                        r"\((.*)\)$", line)
    if dispatch:
        kernels[-1]["codes"][dispatch.group(1)]["dispatches"].append(dispatch)

assert kernels, "no kernels"
count = 0
for kernel in kernels:
    name = kernel["name"]
    for target in targets:
        code = kernel["codes"].get(target)
        assert code, f"{name}: no {target} code"
        assert code["dispatches"], f"{name}: no {target} dispatches"
        for dispatch in code["dispatches"]:
            count += 1
            grid = [int(d) for d in dispatch.group(3).split("x")]
            if target == "cpu":
                assert len(grid) == 1 and grid[0] >= 1, f"{name}: grid {grid}"
                assert dispatch.group(4) is None, f"{name}: a CPU block"
            else:
                block = [int(d) for d in dispatch.group(4).split("x")]
                assert block[0] * block[1] * block[2] <= 1024, \
                    f"{name}: block {block}"
            args = dispatch.group(5)
            for arg in args.split(", ") if args else []:
                if arg.startswith("scratch+"):
                    assert int(arg[8:]) < code["scratch"], \
                        f"{name}: {arg} >= {code['scratch']}"
                else:
                    assert re.fullmatch(r"%a\d+", arg), f"{name}: bad arg {arg}"
                    assert int(arg[2:]) < kernel["args"], \
                        f"{name}: {arg} of {kernel['args']}"
print(f"{len(kernels)} kernels, {count} dispatches checked")
