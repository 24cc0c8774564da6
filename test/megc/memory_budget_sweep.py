"""Sweeps megc --memory-budget over a range for one model and checks that
success is monotonic: once a budget is met, every larger budget is met
(meg-remat climbs a ladder that does not depend on the budget). Prints the
smallest budget met and how many were tried.

Usage: memory_budget_sweep.py MODEL.mlir FROM_KB TO_KB STEP_KB TMPDIR"""
import subprocess
import sys

model, start, stop, step, tmp = sys.argv[1:6]
results = []
for kb in range(int(start), int(stop) + 1, int(step)):
    met = subprocess.run(
        ["megc", model, "--memory-budget", f"{kb}KB", "-o", f"{tmp}/m.megc"],
        capture_output=True, text=True).returncode == 0
    results.append((kb, met))
first = next((kb for kb, met in results if met), None)
if first is None:
    sys.exit(f"no budget from {start} to {stop} KB is met")
broken = [kb for kb, met in results if kb > first and not met]
if broken:
    sys.exit(f"met at {first} KB but not at the larger {broken}")
if results[0][1]:
    sys.exit(f"already met at {start} KB: the sweep does not reach the edge")
print(f"{len(results)} budgets from {start} to {stop} KB: met from {first} KB "
      "on, monotonically")
