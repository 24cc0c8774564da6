"""The resources of every CUDA kernel megc runs, bounded statically.

For the generated kernels of five training models (llama f32 and bf16,
DeepSeek-V3, MMDiT, Flux; the models test/gpu-emulation checks) and every
hand-written kernel of the runtime (runtime/src/cuda/**/*.cu), assembles
for an architecture (default sm_90a) with `ptxas -v` and reports per
kernel: registers, shared memory, stack frame (local memory) and spills,
the occupancy that follows on an H100/H200 multiprocessor, and from the
SASS (nvdisasm, from the nvidia-cuda-nvdisasm wheel that scripts/setup.sh
installs into the build's venv) whether the 128-bit loads and stores and
the shuffles the PTX asks for are there.

With --check it fails, naming the kernels, on any spill or local memory, on
an occupancy under the floor of the kernel's kind (FLOORS below), on a
vector access that did not become a 128-bit SASS instruction, and on a
shuffle that did not become SHFL. With --report FILE it writes the tables
(bench/kernel-resources.md is this script's output).

Usage: /usr/bin/python3 bench/kernel_resources.py [--build build]
       [--arch sm_90a] [--report FILE] [--check]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The models of test/gpu-emulation/models.test.
MODELS = [
    ("llama f32", ["llama", "--train"]),
    ("llama bf16", ["llama", "--train", "--dtype", "bf16"]),
    ("DeepSeek-V3", ["deepseek", "--train"]),
    ("MMDiT", ["mmdit", "--train"]),
    ("Flux", ["flux", "--train"]),
]

# An H100's or H200's multiprocessor (compute capability 9.0).
SM = dict(threads=2048, warps=64, blocks=32, registers=65536,
          register_unit=256, shared=233472, shared_per_block=232448,
          shared_unit=128, shared_reserved=1024)

# The occupancy each kind of kernel must reach, and why.
# - Generated kernels are memory-bound: to cover the ~0.5 us of DRAM
#   latency at ~4.8 TB/s an SM needs 15-22 KB of loads in flight
#   (KERNELS.md). One 128-bit load per thread gives 16 KB at 1024 resident
#   threads: half occupancy is the floor for every strategy that moves
#   data in parallel.
# - A serial kernel (one thread of one block does the work: a loss's
#   final division, a counter) is latency-bound whatever its occupancy;
#   its floor only rules out a kernel that could not run two blocks.
# - A hand-written kernel declares its own: at least the blocks per SM of
#   its __launch_bounds__ minimum (.minnctapersm), else half occupancy.
FLOORS = {"pointwise": 0.5, "row_reduction": 0.5, "column_reduction": 0.5,
          "full_reduction": 0.5, "serial": 2 * 256 / 2048}


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(args)}\n{result.stdout}{result.stderr}")
    return result


def find_nvdisasm(build):
    candidates = glob.glob(os.path.join(
        build, "venv", "lib", "python3*", "site-packages", "nvidia", "*",
        "bin", "nvdisasm"))
    found = candidates[0] if candidates else shutil.which("nvdisasm")
    if found and not os.access(found, os.X_OK):
        os.chmod(found, 0o755)
    return found


def ptxas_properties(stderr):
    """{function: {registers, shared, stack, spill_stores, spill_loads}}."""
    functions = {}
    for name, body in re.findall(
            r"Compiling entry function '(\w+)'.*?\n(.*?)(?=ptxas info\s+: "
            r"Compiling entry|\Z)", stderr, re.S):
        stack = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill "
                          r"stores, (\d+) bytes spill loads", body)
        used = re.search(r"Used (\d+) registers", body)
        smem = re.search(r"(\d+) bytes smem", body)
        functions[name] = dict(
            registers=int(used.group(1)) if used else 0,
            shared=int(smem.group(1)) if smem else 0,
            stack=int(stack.group(1)) if stack else 0,
            spill_stores=int(stack.group(2)) if stack else 0,
            spill_loads=int(stack.group(3)) if stack else 0)
    return functions


def ptx_facts(ptx):
    """{entry: {threads, min_blocks, vectors, shuffles}} from the PTX."""
    facts = {}
    for name, head, body in re.findall(
            r"\.entry (\w+)\((.*?)\)(.*?)\n}", ptx, re.S):
        threads = re.search(r"\.maxntid (\d+), (\d+), (\d+)", body)
        blocks = re.search(r"\.minnctapersm (\d+)", body)
        facts[name] = dict(
            threads=(int(threads.group(1)) * int(threads.group(2)) *
                     int(threads.group(3))) if threads else None,
            min_blocks=int(blocks.group(1)) if blocks else None,
            vectors=len(re.findall(r"\b(ld|st)\.(global|shared)[.\w]*\.v4\.(f32|b32|u32|s32)|\b(ld|st)\.(global|shared)[.\w]*\.v(2|4)\.(b64|f64|u64)|\b(ld|st)\.(global|shared)[.\w]*\.v8\.(b16|f16|bf16)", body)),
            shuffles=len(re.findall(r"\bshfl\.sync", body)))
    return facts


def sass_facts(nvdisasm, cubin):
    """{function: {vectors, shuffles}} from the SASS."""
    text = run([nvdisasm, "-c", cubin]).stdout
    facts = {}
    for name, body in re.findall(
            r"\n\.text\.(\w+):\n(.*?)(?=\n\s*\.section|\Z)", text, re.S):
        facts[name] = dict(
            vectors=len(re.findall(r"\b(LDG|STG|LDS|STS)(\.E)?(\.\w+)*\.128\b",
                                   body)),
            shuffles=len(re.findall(r"\bSHFL\.", body)))
    return facts


def occupancy(threads, registers, shared):
    """Resident blocks and the fraction of the SM's warps they fill."""
    warps = -(-threads // 32)
    by_warps = SM["warps"] // warps
    per_warp = -(-max(registers, 1) * 32 // SM["register_unit"]) * \
        SM["register_unit"]
    by_registers = (SM["registers"] // per_warp) // warps
    if shared:
        per_block = -(-shared // SM["shared_unit"]) * SM["shared_unit"] + \
            SM["shared_reserved"]
        by_shared = SM["shared"] // per_block
    else:
        by_shared = SM["blocks"]
    blocks = min(SM["blocks"], by_warps, by_registers, by_shared)
    return blocks, blocks * warps / SM["warps"]


# The dynamic shared memory the runtime launches its attention kernels
# with, printed by a host build of the header that both the kernels and the
# runtime size it from.
ATTENTION_SHARED_PROBE = r"""
#include "cuda/attention/FlashAttentionParams.h"
#include <cstdio>
int main() {
  using namespace megrt::attention;
  for (int tier : kTiers)
    std::printf("%d %u %u\n", tier, forwardSharedBytes(tier),
                backwardSharedBytes(tier));
}
"""


def dynamic_shared(work):
    """{attention kernel: dynamic shared bytes per block}."""
    source = os.path.join(work, "attention_shared.cpp")
    with open(source, "w") as f:
        f.write(ATTENTION_SHARED_PROBE)
    probe = os.path.join(work, "attention_shared")
    run(["c++", "-std=c++17", "-I", os.path.join(ROOT, "runtime", "src"),
         source, "-o", probe])
    shared = {}
    for line in run([probe]).stdout.splitlines():
        tier, forward, backward = line.split()
        for dtype in ("f32", "bf16", "f16"):
            shared[f"megrt_attention_fwd_{dtype}_d{tier}"] = int(forward)
            shared[f"megrt_attention_bwd_stats_{dtype}_d{tier}"] = int(forward)
            shared[f"megrt_attention_bwd_kv_{dtype}_d{tier}"] = int(backward)
    return shared


def program_strategies(megrt):
    """{cuda entry: (kernel name, strategy kind)} from `megc --emit=megrt`."""
    entries, kernel, kind = {}, None, None
    for line in megrt.splitlines():
        if m := re.match(r"kernel \d+ (\w+) ", line):
            kernel = m.group(1)
        elif m := re.match(r"\s+cuda strategy #meg\.kernel_strategy<(\w+)",
                           line):
            kind = m.group(1)
        elif m := re.match(r"\s+cuda (\w+) grid ", line):
            entries[m.group(1)] = (kernel, kind)
    return entries


def assemble(ptxas, arch, ptx_path, cubin_path):
    return ptxas_properties(
        run([ptxas, "-v", f"-arch={arch}", ptx_path, "-o", cubin_path]).stderr)


def rows_for(ptxas, nvdisasm, arch, ptx_path, kinds, dynamic):
    """One row per kernel function of a PTX module; `dynamic` gives the
    dynamic shared memory a function is launched with."""
    cubin = ptx_path + ".cubin"
    properties = assemble(ptxas, arch, ptx_path, cubin)
    with open(ptx_path) as f:
        facts = ptx_facts(f.read())
    sass = sass_facts(nvdisasm, cubin) if nvdisasm else {}
    rows = []
    for name, props in properties.items():
        fact = facts.get(name, {})
        kernel, kind = kinds(name, fact)
        threads = fact.get("threads") or 256
        props["shared"] += dynamic.get(name, 0)
        blocks, fraction = occupancy(threads, props["registers"],
                                     props["shared"])
        min_blocks = fact.get("min_blocks")
        floor = FLOORS.get(kind, 0.5)
        if min_blocks:
            floor = min_blocks * threads / SM["threads"]
        rows.append(dict(function=name, kernel=kernel, kind=kind,
                         threads=threads, blocks=blocks,
                         occupancy=fraction, floor=floor,
                         ptx_vectors=fact.get("vectors", 0),
                         ptx_shuffles=fact.get("shuffles", 0),
                         sass=sass.get(name), **props))
    return rows


def problems(row):
    found = []
    if row["stack"] or row["spill_stores"] or row["spill_loads"]:
        found.append(f"local memory ({row['stack']} bytes stack, "
                     f"{row['spill_stores']} spill stores, "
                     f"{row['spill_loads']} spill loads)")
    if row["shared"] > SM["shared_per_block"]:
        found.append(f"{row['shared']} bytes of shared memory, above the "
                     f"{SM['shared_per_block']} a block may have")
    if row["occupancy"] < row["floor"] - 1e-9:
        found.append(f"occupancy {row['occupancy']:.0%} under its floor "
                     f"{row['floor']:.0%}")
    sass = row["sass"]
    if sass is not None:
        if row["ptx_vectors"] and not sass["vectors"]:
            found.append(f"{row['ptx_vectors']} vector accesses in the PTX, "
                         "no 128-bit load or store in the SASS")
        if row["ptx_shuffles"] and not sass["shuffles"]:
            found.append(f"{row['ptx_shuffles']} shuffles in the PTX, no "
                         "SHFL in the SASS")
    return found


def table(rows):
    lines = ["| kernel | function | strategy | threads | registers | shared "
             "B (static + dynamic) | stack B | spills B | blocks/SM | occupancy (floor) | "
             "PTX v4 / SASS 128-bit | PTX / SASS shuffles |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sass = r["sass"] or {"vectors": "-", "shuffles": "-"}
        lines.append(
            f"| {r['kernel']} | {r['function']} | {r['kind']} | "
            f"{r['threads']} | {r['registers']} | {r['shared']} | "
            f"{r['stack']} | {r['spill_stores'] + r['spill_loads']} | "
            f"{r['blocks']} | {r['occupancy']:.0%} ({r['floor']:.0%}) | "
            f"{r['ptx_vectors']} / {sass['vectors']} | "
            f"{r['ptx_shuffles']} / {sass['shuffles']} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--report")
    parser.add_argument("--check", action="store_true")
    options = parser.parse_args()
    toolkit = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    ptxas = os.path.join(toolkit, "bin", "ptxas")
    nvcc = os.path.join(toolkit, "bin", "nvcc")
    if not os.access(ptxas, os.X_OK) or not os.access(nvcc, os.X_OK):
        sys.exit(f"no ptxas or nvcc in {toolkit}/bin (set CUDA_HOME)")
    nvdisasm = find_nvdisasm(options.build)
    if not nvdisasm:
        sys.exit("no nvdisasm: run scripts/setup.sh (it installs the "
                 "nvidia-cuda-nvdisasm wheel into the build's venv)")
    megc = os.path.join(options.build, "bin", "megc")

    sections, failures, total = [], [], 0
    with tempfile.TemporaryDirectory() as work:
        for title, gen in MODELS:
            stem = os.path.join(work, re.sub(r"\W+", "_", title))
            run([megc, "gen", *gen, "-o", stem + ".mlir"])
            run([megc, stem + ".mlir", "--target=cpu,cuda", "--emit=ptx",
                 "-o", stem + ".ptx"])
            strategies = program_strategies(run(
                [megc, stem + ".mlir", "--target=cpu,cuda", "--emit=megrt",
                 "-o", "-"]).stdout)
            rows = rows_for(ptxas, nvdisasm, options.arch, stem + ".ptx",
                            lambda name, fact: strategies.get(
                                name, (name, "serial")), {})
            sections.append((f"{title} (`megc gen {' '.join(gen)}`)", rows))
        shared = dynamic_shared(work)
        for source in sorted(glob.glob(os.path.join(
                ROOT, "runtime", "src", "cuda", "**", "*.cu"),
                recursive=True)):
            stem = os.path.join(work, os.path.basename(source))
            run([nvcc, "-ptx", f"-arch={options.arch}", "-std=c++17", "-O3",
                 "-I", os.path.join(ROOT, "runtime", "src"), source,
                 "-o", stem + ".ptx"])
            rows = rows_for(ptxas, nvdisasm, options.arch, stem + ".ptx",
                            lambda name, fact: (
                                os.path.relpath(source, ROOT),
                                "hand-written"), shared)
            sections.append((f"`{os.path.relpath(source, ROOT)}` "
                             "(hand-written)", rows))

    report = [f"# CUDA kernel resources ({options.arch})", "",
              "Made by `/usr/bin/python3 bench/kernel_resources.py "
              f"--arch {options.arch} --report bench/kernel-resources.md` "
              "(ptxas -v of the CUDA toolkit, nvdisasm for the SASS); "
              "`test/megc/kernel-resources.test` runs it with --check. "
              "Occupancy is resident blocks x warps over the 64 warps of an "
              "H100/H200 multiprocessor, from registers, shared memory "
              "(static, and the dynamic shared memory the runtime launches "
              "its attention kernels with) and threads; the floors are in "
              "the script.", ""]
    for title, rows in sections:
        total += len(rows)
        for row in rows:
            for problem in problems(row):
                failures.append(f"{row['function']} ({row['kernel']}, "
                                f"{title.split(' (')[0]}): {problem}")
        worst = min((r["occupancy"] for r in rows), default=0)
        report += [f"## {title}", "",
                   f"{len(rows)} functions, lowest occupancy {worst:.0%}.",
                   "", table(rows), ""]
    if options.report:
        with open(options.report, "w") as f:
            f.write("\n".join(report))
    if failures:
        print(f"{len(failures)} problems in {total} kernel functions:")
        for failure in failures:
            print("  " + failure)
        if options.check:
            sys.exit(1)
    else:
        print(f"{total} kernel functions ({options.arch}): no spills or "
              "local memory, every occupancy at its floor or above, every "
              "vector access 128-bit and every shuffle SHFL in the SASS")


if __name__ == "__main__":
    main()
