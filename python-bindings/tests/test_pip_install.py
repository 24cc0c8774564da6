"""`pip install ./python-bindings` into a fresh virtual environment, then a
script using only the installed package generates a Llama preset, compiles
it, runs forward and three training steps; its numbers equal megc-run's.

It builds the extension, so it runs only when MEGC_PIP_INSTALL_TEST is set
(scripts/test.sh sets it). MEGC_WHEEL_BUILD_DIR names scikit-build-core's
build directory; scripts/test.sh keeps it next to the main build, and the
wheel is built with the main build's compilers, so that ccache serves the
compiler libraries the main build compiled."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import LLAMA, ROOT
from helpers import assert_bitwise

pytestmark = pytest.mark.skipif(
    not os.environ.get("MEGC_PIP_INSTALL_TEST"),
    reason="set MEGC_PIP_INSTALL_TEST=1 to build and install the package")

SCRIPT = """
import sys
import numpy as np
import megc

out = sys.argv[1]
settings = {settings!r}
artifact = megc.compile(megc.gen.llama(**settings, train=True, lr=3e-3))
with open(f"{{out}}/model.megc", "wb") as f:
    f.write(artifact)
batch = {{name: np.load(f"{{out}}/{{name}}.npy") for name in ("input_ids", "labels")}}
session = megc.Session(artifact, device="cpu", params="init:3")
logits = session.run("forward", {{"input_ids": batch["input_ids"]}})["logits"]
np.save(f"{{out}}/logits.npy", logits)
for step in range(3):
    loss = session.run("train_step", batch)["loss"]
np.save(f"{{out}}/loss.npy", loss)
session.save_params(f"{{out}}/params.safetensors")
print(megc.__file__)
"""


def main_build_compilers():
    """The C and C++ compilers of the main build (MEGC_BUILD_DIR), as
    CMake definitions: ccache keys the objects by the compiler's path, so
    the wheel's build takes the cached objects only with the same one."""
    cache = os.path.join(os.environ.get("MEGC_BUILD_DIR", ""),
                         "CMakeCache.txt")
    compilers = {}
    if not os.path.exists(cache):
        return compilers
    with open(cache) as f:
        for line in f:
            name, _, value = line.strip().partition("=")
            name = name.split(":")[0]
            if name in ("CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER") and value:
                compilers[name] = value
    return compilers


def run(args, **kwargs):
    result = subprocess.run(list(map(str, args)), capture_output=True,
                            text=True, **kwargs)
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def test_pip_install_in_a_fresh_venv(tmp_path, tools, batch):
    # The package under test is the installed one, not the build tree's.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], env=env)
    python = venv / "bin" / "python"
    pip = [python, "-m", "pip", "install", "-q"]
    run([*pip, "numpy"], env=env)
    build_dir = os.environ.get("MEGC_WHEEL_BUILD_DIR")
    settings = [f"--config-settings=build-dir={build_dir}"] if build_dir else []
    settings += [f"--config-settings=cmake.define.{name}={path}"
                 for name, path in main_build_compilers().items()]
    run([*pip, *settings, ROOT / "python-bindings"], env=env)

    out = tmp_path / "out"
    out.mkdir()
    for name, array in batch.items():
        np.save(out / f"{name}.npy", array)
    location = run([python, "-c", SCRIPT.format(settings=LLAMA), out],
                   env=env, cwd=tmp_path).strip()
    package = os.path.dirname(location)
    assert package.startswith(str(venv))
    for typed in ("py.typed", "_megc.pyi", "__init__.py", "gen.py"):
        assert os.path.exists(os.path.join(package, typed)), typed

    model = out / "model.megc"
    tools.run("megc-run", model, "--entry", "forward", "--params", "init:3",
              "--input", f"input_ids={out / 'input_ids.npy'}",
              "--output-dir", tmp_path / "forward")
    tools.run("megc-run", model, "--entry", "train_step", "--params",
              "init:3", "--steps", 3,
              "--input", f"input_ids={out / 'input_ids.npy'}",
              "--input", f"labels={out / 'labels.npy'}",
              "--output-dir", tmp_path / "train",
              "--save-params", tmp_path / "params.safetensors")
    assert_bitwise(np.load(out / "logits.npy"),
                   np.load(tmp_path / "forward" / "logits.npy"))
    assert_bitwise(np.load(out / "loss.npy"),
                   np.load(tmp_path / "train" / "loss.npy"))
    assert ((out / "params.safetensors").read_bytes() ==
            (tmp_path / "params.safetensors").read_bytes())
