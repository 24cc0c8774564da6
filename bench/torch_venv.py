"""A virtual environment with PyTorch (PyPI's wheel, which runs on the CPU)
and transformers for the benchmarks' baselines, made on demand.

torch_python() returns the environment's interpreter, creating it with
/usr/bin/python3 -m venv and pip install the first time (about 5 GB), or
None with the reason printed when that is not possible (no network, no
space): benchmarks then skip their PyTorch columns.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ["torch", "transformers", "numpy"]


def default_location():
    build = os.environ.get("MEGC_BUILD_DIR", os.path.join(ROOT, "build"))
    return os.environ.get("MEGC_TORCH_VENV", os.path.join(build, "bench-venv"))


def torch_python(location=None, quiet=False):
    """The venv's python with torch and transformers importable, or None."""
    location = location or default_location()
    python = os.path.join(location, "bin", "python")
    probe = [python, "-c", "import torch, transformers, numpy"]
    if os.path.exists(python) and subprocess.run(
            probe, capture_output=True).returncode == 0:
        return python
    if not quiet:
        print(f"torch_venv: installing {' '.join(PACKAGES)} into {location} "
              "(about 5 GB, once)", file=sys.stderr)
    try:
        if not os.path.exists(python):
            subprocess.run(["/usr/bin/python3", "-m", "venv", location],
                           check=True, capture_output=True)
        subprocess.run([python, "-m", "pip", "install", "-q", *PACKAGES],
                       check=True, capture_output=True, timeout=3600)
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        print(f"torch_venv: cannot make a PyTorch environment at {location}: "
              f"{error} {detail.decode(errors='replace')[-500:]}",
              file=sys.stderr)
        return None
    if subprocess.run(probe, capture_output=True).returncode != 0:
        print(f"torch_venv: {location} has no importable torch", file=sys.stderr)
        return None
    return python


if __name__ == "__main__":
    found = torch_python()
    print(found or "unavailable")
    sys.exit(0 if found else 1)
