"""check_loss.py LOG LOSS.npy: the last 'loss X' that megc-run printed in LOG
is the value in LOSS.npy (as printed, %.6g), and is close to ln(vocab) for
the freshly initialised 64-token model."""
import math
import re
import sys

import numpy as np

log = open(sys.argv[1]).read()
printed = re.findall(r" loss (\S+)$", log, re.M)
if not printed:
    sys.exit(f"no 'loss VALUE' in:\n{log}")
saved = np.load(sys.argv[2])
if saved.shape != () or saved.dtype != np.float32:
    sys.exit(f"loss.npy is {saved.dtype}{list(saved.shape)}, expected f32[]")
if printed[-1] != "%.6g" % float(saved):
    sys.exit(f"printed loss {printed[-1]} but loss.npy holds {float(saved)!r}")
if abs(float(saved) - math.log(64)) > 0.5:
    sys.exit(f"loss {float(saved)} is far from ln(64) = {math.log(64):.4f}")
