"""Checks the CUDA launch tables of `megc --target=cuda --emit=megrt`: every
kernel has launches, each argument names one of the kernel's arguments or a
place inside its scratch area, and block sizes fit a thread block."""
import re
import sys

kernels = []
for line in open(sys.argv[1]):
    kernel = re.match(r"kernel \d+ (\S+) args (\d+) cuda scratch (\d+)$", line)
    if kernel:
        kernels.append((kernel.group(1), int(kernel.group(2)),
                        int(kernel.group(3)), []))
        continue
    if line.startswith("kernel "):
        sys.exit(f"kernel without a CUDA launch table: {line.strip()}")
    launch = re.match(r"  cuda (\S+) grid (\d+)x(\d+)x(\d+) "
                      r"block (\d+)x(\d+)x(\d+) \((.*)\)$", line)
    if launch:
        kernels[-1][3].append(launch)

assert kernels, "no kernels"
for name, num_args, scratch, launches in kernels:
    assert launches, f"{name}: no launches"
    for launch in launches:
        block = [int(launch.group(i)) for i in (5, 6, 7)]
        assert block[0] * block[1] * block[2] <= 1024, f"{name}: block {block}"
        for arg in launch.group(8).split(", "):
            if arg.startswith("scratch+"):
                assert int(arg[8:]) < scratch, f"{name}: {arg} >= {scratch}"
            else:
                assert re.fullmatch(r"%a\d+", arg), f"{name}: bad arg {arg}"
                assert int(arg[2:]) < num_args, f"{name}: {arg} of {num_args}"
print(f"{len(kernels)} kernels, "
      f"{sum(len(k[3]) for k in kernels)} launches checked")
