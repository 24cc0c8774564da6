"""Compares the .npy outputs of two megc-run --output-dir directories:
compare_outputs.py DIR_A DIR_B RTOL ATOL. Every file of A is in B, of the
same shape, and close."""
import os
import sys

import numpy as np

a, b, rtol, atol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
names = sorted(os.listdir(a))
if not names:
    sys.exit(f"{a} holds no outputs")
worst = 0.0
for name in names:
    x, y = np.load(os.path.join(a, name)), np.load(os.path.join(b, name))
    if x.shape != y.shape:
        sys.exit(f"{name}: shapes {x.shape} and {y.shape}")
    if not np.allclose(x, y, rtol=rtol, atol=atol):
        diff = np.max(np.abs(x - y))
        sys.exit(f"{name}: differs by up to {diff}")
    worst = max(worst, float(np.max(np.abs(x - y))))
print(f"{len(names)} outputs close, largest difference {worst:.3g}")
