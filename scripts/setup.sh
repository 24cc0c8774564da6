#!/usr/bin/env bash
# Installs every package megc needs on a fresh Debian 12 machine, and the
# Python build tools into a virtual environment in the build directory
# (never the system's pip); idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEGC_BUILD_DIR:-$root/build}

apt_packages=(
  build-essential cmake ninja-build lld ccache git python3
  llvm-22-dev libmlir-22-dev mlir-22-tools
  clang-22 libclang-rt-22-dev  # scripts/sanitize.sh: ASan, UBSan, libFuzzer
  libgtest-dev libgmock-dev libbenchmark-dev
  libflatbuffers-dev flatbuffers-compiler nlohmann-json3-dev
  libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin
  python3-numpy python3-dev python3-venv python3-pytest
  graphviz  # scripts/docs.sh renders docs/pipeline.svg
)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all Debian packages present"
fi

# nanobind for the Python bindings, at the version python-bindings/
# pyproject.toml asks for, so that both builds of the extension agree.
nanobind=$(/usr/bin/python3 - "$root/python-bindings/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    requires = tomllib.load(f)["build-system"]["requires"]
print(next(r for r in requires if r.startswith("nanobind")))
PY
)
venv=$build/venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q "$nanobind"
# The header-only cuDNN frontend for the CUDA backend's cuDNN attention (its
# Python module is not used, so none of its dependencies are installed).
"$venv/bin/pip" install -q --no-deps nvidia-cudnn-frontend==1.32.0
# nvdisasm, which the toolkit here lacks, for the SASS checks of
# bench/kernel_resources.py (test/megc/kernel-resources.test).
"$venv/bin/pip" install -q --no-deps nvidia-cuda-nvdisasm==13.5.37

echo "setup: done"
