"""Launching megc-run on several ranks with Open MPI's mpirun."""
import os
import shutil
import subprocess
import sys


def mpirun_command(ranks):
    """mpirun with the flags a small CI machine needs: more ranks than
    cores (--oversubscribe) and, when running as root, --allow-run-as-root."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        sys.exit("mpirun not found (install openmpi-bin)")
    command = [mpirun, "-n", str(ranks), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def run_ranks(ranks, args, timeout=600, env=None):
    """Runs `args` on `ranks` ranks; returns the CompletedProcess."""
    return subprocess.run(mpirun_command(ranks) + args, capture_output=True,
                          text=True, timeout=timeout, env=env)
