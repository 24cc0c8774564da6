"""exit_code.py CODE COMMAND...: runs COMMAND and fails unless it exits with
CODE (a crash, reported as a negative code, always fails)."""
import subprocess
import sys

want = int(sys.argv[1])
result = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
if result.returncode != want:
    sys.exit(f"{' '.join(sys.argv[2:])}: exit code {result.returncode}, "
             f"expected {want}")
