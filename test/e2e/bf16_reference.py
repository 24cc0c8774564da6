"""megc's bf16 gradients against an independent bf16 reference: the
`llama-bf16` fixture imported (a bf16 model) and its grad entry run on the
fixture's batch, against PyTorch's bf16 forward and backward
(make_bf16_reference.py, test/e2e/bf16-reference) and against the exact
gradients (the fixture's float32 reference, test/e2e/hf-fixtures). Per
tensor, relative to its largest magnitude: megc within 3e-2 of PyTorch's
bf16 gradients, and megc's distance from the exact gradients at most
twice PyTorch's bf16 distance plus 1e-2 (rounding at other points may
differ, a bf16 path that loses more than that does not pass); the logits
and the loss likewise."""
import argparse
import os
import sys

import numpy as np

import e2e_util

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "hf-fixtures", "llama-bf16")
REFERENCE = os.path.join(HERE, "bf16-reference", "reference.safetensors")
TOLERANCE = 3e-2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    tmp = options.tmp
    os.makedirs(tmp, exist_ok=True)
    torch_bf16 = e2e_util.read_safetensors(REFERENCE)
    exact = e2e_util.read_safetensors(os.path.join(FIXTURE,
                                                   "reference.safetensors"))
    model = os.path.join(tmp, "model.mlir")
    artifact = os.path.join(tmp, "model.megc")
    e2e_util.run(["megc", "import", FIXTURE, "--seq", "8", "--batch", "2",
                  "--train", "-o", model])
    e2e_util.run(["megc", model, "-o", artifact])
    inputs = []
    for name in ("input_ids", "labels"):
        path = os.path.join(tmp, name + ".npy")
        np.save(path, exact[name].astype(np.int32))
        inputs += ["--input", f"{name}={path}"]
    out = os.path.join(tmp, "out")
    e2e_util.run(["megc-run", artifact, "--entry", "grad", "--params",
                  FIXTURE, *inputs, "--output-dir", out])
    logits_out = os.path.join(tmp, "logits")
    e2e_util.run(["megc-run", artifact, "--entry", "forward", "--params",
                  FIXTURE, inputs[0], inputs[1], "--output-dir", logits_out])

    got = {"logits": e2e_util.read_output(os.path.join(logits_out,
                                                       "logits.npy")),
           "loss": e2e_util.read_output(os.path.join(out, "loss.npy"))}
    for name in torch_bf16:
        if name.startswith("grad."):
            got[name] = e2e_util.read_output(os.path.join(out, name + ".npy"))
    failures, worst = [], (0.0, "")
    for name, want in torch_bf16.items():
        versus_torch = e2e_util.max_relative_error(got[name], want)
        megc_error = e2e_util.max_relative_error(got[name], exact[name])
        torch_error = e2e_util.max_relative_error(want, exact[name])
        worst = max(worst, (versus_torch, name))
        if versus_torch > TOLERANCE or megc_error > 2 * torch_error + 1e-2:
            failures.append(f"{name}: {versus_torch:.3g} from PyTorch bf16; "
                            f"{megc_error:.3g} from exact (PyTorch bf16 "
                            f"{torch_error:.3g})")
    print(f"{len(torch_bf16)} tensors; worst distance from PyTorch bf16 "
          f"{worst[0]:.3g} ({worst[1]})")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
