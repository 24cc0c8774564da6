"""End to end: artifacts with CUDA graph regions (--cuda-graphs=step, and
layer with --share-io-buffers) train bitwise like the artifact without
them: three train_steps give the same losses and the same training state.
On the CPU, graph regions are recorded on the first run and replayed."""
import argparse
import os
import subprocess
import sys

import numpy as np

import e2e_util


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--preset", default="llama")
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    model = os.path.join(options.tmp, "model.mlir")
    e2e_util.run(["megc", "gen", options.preset, "--layers", "3", "--train",
                  "-o", model])
    inspect_args = None
    results = {}
    for variant, flags in (("none", []), ("step", ["--cuda-graphs=step"]),
                           ("layer", ["--cuda-graphs=layer",
                                      "--share-io-buffers"])):
        artifact = os.path.join(options.tmp, variant + ".megc")
        e2e_util.run(["megc", model, *flags, "-o", artifact])
        if inspect_args is None:
            inspect_args = make_inputs(artifact, options.tmp)
        state = os.path.join(options.tmp, variant + "_state.safetensors")
        log = e2e_util.run(["megc-run", artifact, "--entry", "train_step",
                            "--params", "init:4", "--steps", "3",
                            "--save-state", state, *inspect_args])
        losses = [line.split(" loss ")[1] for line in log.splitlines()
                  if " loss " in line]
        results[variant] = (losses, open(state, "rb").read())
        if variant == "layer":
            listing = e2e_util.run(["megc", "inspect", artifact])
            if "graph regions" not in listing:
                sys.exit("megc inspect lists no graph regions:\n" + listing)
    for variant in ("step", "layer"):
        if results[variant][0] != results["none"][0]:
            sys.exit(f"{variant}: losses {results[variant][0]} differ from "
                     f"{results['none'][0]}")
        if results[variant][1] != results["none"][1]:
            sys.exit(f"{variant}: training state differs")
    print(f"{options.preset}: losses {' '.join(results['none'][0])} and "
          f"state identical with and without graph regions")


def make_inputs(artifact, tmp):
    """Random inputs for train_step, from `megc inspect`'s signature."""
    listing = e2e_util.run(["megc", "inspect", artifact])
    line = next(l for l in listing.splitlines()
                if l.startswith("entry train_step("))
    rng = np.random.default_rng(2)
    args = []
    for part in line[len("entry train_step("):line.index(") ->")].split(", "):
        name, type_text = part.split(": ")
        # "tensor<2x16xi32> in [0,256)": an index input and its bound.
        type_text = type_text.split(" in [")[0]
        dims = type_text[len("tensor<"):-1].split("x")
        shape, dtype = [int(d) for d in dims[:-1]], dims[-1]
        value = (rng.integers(0, 32, shape).astype(np.int32) if dtype == "i32"
                 else rng.standard_normal(shape).astype(np.float32))
        path = os.path.join(tmp, name + ".npy")
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    return args


if __name__ == "__main__":
    main()
