"""Checks megc-run's `host memory: peak P MB while running; plan Q MB`
line: the measured peak is at least the plan and at most MARGIN MB more.
check_peak.py LOG MARGIN_MB"""
import re
import sys

text = open(sys.argv[1]).read()
margin = float(sys.argv[2])
found = re.search(r"host memory: peak ([0-9.]+) MB while running; plan "
                  r"([0-9.]+) MB", text)
if not found:
    sys.exit(f"{sys.argv[1]}: no host memory line")
peak, plan = float(found.group(1)), float(found.group(2))
print(f"peak {peak} MB, plan {plan} MB, difference {peak - plan:.3f} MB")
if not plan <= peak <= plan + margin:
    sys.exit(f"the measured peak {peak} MB is not within [{plan}, "
             f"{plan + margin}] MB")
