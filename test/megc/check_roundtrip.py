"""Checks that `megc <args>` prints IR that megc-opt reprints identically.

Runs the generator, then megc-opt in custom and generic form, and compares
texts: gen == opt(gen) == opt(generic(gen)) and generic is a fixed point.
"""
import subprocess
import sys


def run(cmd, text=None):
    result = subprocess.run(cmd, input=text, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def first_difference(a, b):
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if x != y:
            return f"line {number}:\n  {x}\n  {y}"
    return "lengths differ"


def expect_same(what, a, b):
    if a != b:
        sys.exit(f"{what} differ at {first_difference(a, b)}")


def main():
    generated = run(["megc"] + sys.argv[1:])
    custom = run(["megc-opt"], generated)
    expect_same("generated IR and megc-opt's reprint", generated, custom)
    expect_same("two reprints", custom, run(["megc-opt"], custom))
    generic = run(["megc-opt", "--mlir-print-op-generic"], custom)
    expect_same("custom form and the reprint of the generic form", custom,
                run(["megc-opt"], generic))
    expect_same("generic form reprints", generic,
                run(["megc-opt", "--mlir-print-op-generic"], generic))


if __name__ == "__main__":
    main()
