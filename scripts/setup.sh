#!/usr/bin/env bash
# Installs every package megc needs on a fresh Debian 12 machine; idempotent.
set -euo pipefail

apt_packages=(
  build-essential cmake ninja-build lld ccache git python3
  llvm-22-dev libmlir-22-dev mlir-22-tools
  libgtest-dev libgmock-dev libbenchmark-dev
  libflatbuffers-dev flatbuffers-compiler
  libopenblas-dev libopenmpi-dev openmpi-bin
  python3-numpy
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

echo "setup: done"
