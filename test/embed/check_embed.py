"""Installs the build into a fresh prefix, builds examples/embed and the C
API test (copies, so that nothing but the prefix can be reached) against
it, compiles a training preset with the installed megc, checks that the
C++ and C examples train exactly as the installed megc-run does, and runs
the C API test."""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np


def run(args, **kwargs):
    result = subprocess.run([str(a) for a in args], capture_output=True,
                            text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed ({result.returncode}):\n"
                 f"{result.stdout}{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", type=pathlib.Path, required=True)
    parser.add_argument("--src", type=pathlib.Path, required=True)
    parser.add_argument("--tmp", type=pathlib.Path, required=True)
    args = parser.parse_args()
    tmp = args.tmp
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    prefix = tmp / "prefix"
    run(["cmake", "--install", args.build, "--prefix", prefix])
    for tool in ("megc", "megc-opt", "megc-run"):
        assert (prefix / "bin" / tool).exists(), f"{tool} is not installed"
    package = prefix / "lib" / "cmake" / "megrt"
    for file in package.iterdir():
        text = file.read_text()
        for tree in (args.build, args.src):
            assert str(tree) not in text, f"{file} refers to {tree}"
    assert not (prefix / "include" / "megrt" / "ArtifactSeal.h").exists()
    # LibraryKernels.h reads the list beside it.
    assert (prefix / "include" / "megrt" / "LibraryKernels.def").exists()

    def build_against_prefix(project, name):
        source = tmp / f"{name}-src"
        shutil.copytree(project, source)
        binary = tmp / f"{name}-build"
        run(["cmake", "-G", "Ninja", "-S", source, "-B", binary,
             f"-DCMAKE_PREFIX_PATH={prefix}"])
        run(["cmake", "--build", binary])
        return binary

    build = build_against_prefix(args.src / "examples" / "embed", "embed")
    capi = build_against_prefix(pathlib.Path(__file__).parent / "capi", "capi")

    bin_dir = prefix / "bin"
    run([bin_dir / "megc", "gen", "llama", "--layers", "1", "--hidden", "32",
         "--heads", "4", "--train", "-o", tmp / "llama.mlir"])
    run([bin_dir / "megc", tmp / "llama.mlir", "-o", tmp / "llama.megc"])
    model = tmp / "llama.megc"

    # The inputs embed_c makes: element i is i % 7.
    shape = (2, 16)
    ids = (np.arange(np.prod(shape)) % 7).astype(np.int32).reshape(shape)
    np.save(tmp / "ids.npy", ids)
    reference = tmp / "reference"
    run([bin_dir / "megc-run", model, "--entry", "train_step", "--steps", "3",
         "--input", f"input_ids={tmp / 'ids.npy'}",
         "--input", f"labels={tmp / 'ids.npy'}",
         "--output-dir", reference,
         "--save-params", reference / "params.safetensors"])
    want_loss = np.load(reference / "loss.npy")
    want_params = (reference / "params.safetensors").read_bytes()

    cpp = tmp / "cpp"
    cpp.mkdir()
    out = run([build / "embed", model, "train_step", "3", cpp,
               f"input_ids={tmp / 'ids.npy'}", f"labels={tmp / 'ids.npy'}"])
    assert out.count("step ") == 3, out
    assert np.load(cpp / "loss.npy").tobytes() == want_loss.tobytes()
    assert (cpp / "params.safetensors").read_bytes() == want_params

    out = run([build / "embed_c", model, "train_step", "3",
               tmp / "c_params.safetensors"])
    # train_step returns its loss and the count of non-finite values.
    assert "entry train_step: 2 inputs, 2 outputs" in out, out
    assert re.findall(r"step \d+ loss \S+ nonfinite 0\n", out), out
    losses = re.findall(r"step \d+ loss (\S+)", out)
    assert len(losses) == 3, out
    assert np.float32(losses[-1]).tobytes() == want_loss.tobytes(), out
    assert (tmp / "c_params.safetensors").read_bytes() == want_params
    assert ("error: unknown entry 'no_such_entry'; the program has entries: "
            "forward, loss, grad, train_step") in out, out

    result = subprocess.run([build / "embed_c", tmp / "missing.megc",
                             "forward", "1", tmp / "p"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "loading the artifact failed (status 2)" in result.stderr
    assert "missing.megc" in result.stderr, result.stderr
    print(run([capi / "capi_test", model, tmp]), end="")
    print("embed: C++ and C examples match megc-run")


if __name__ == "__main__":
    main()
