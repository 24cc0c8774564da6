"""End to end training: megc gen llama --train, compiled, `train_step` run
by megc-run. Each step must equal the AdamW rule (written here in NumPy)
applied to the parameters, the saved moments and the gradient that the
`grad` entry returns (itself checked against finite differences in
llama_grad.py), and the loss on a fixed batch must fall. With --master,
the weights are bf16 and the policy keeps f32 master weights: AdamW runs on
the f32 copy, initialised from the loaded bf16 weights, and each weight is
the bf16 rounding of its master."""
import argparse
import os
import re
import sys

import numpy as np

import e2e_util
import llama_reference

LR, B1, B2, EPS, WD = 0.01, 0.9, 0.95, 1e-8, 0.1


def adamw(p, g, m, v, t):
    m = B1 * m + (1 - B1) * g
    v = B2 * v + (1 - B2) * g * g
    mhat, vhat = m / (1 - B1 ** t), v / (1 - B2 ** t)
    return p - LR * (mhat / (np.sqrt(vhat) + EPS) + WD * p), m, v


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--master", action="store_true")
    options = parser.parse_args()
    tmp = options.tmp
    os.makedirs(tmp, exist_ok=True)
    cfg = dict(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64,
               seq=8, batch=2)
    gen = ["megc", "gen", "llama", "--train", "--lr", str(LR), "--betas",
           f"{B1},{B2}", "--adam-eps", str(EPS), "--weight-decay", str(WD),
           "--frozen", r"model\.layers\.1\.mlp\.up_proj", "-o", f"{tmp}/m.mlir"]
    for flag, value in cfg.items():
        gen += ["--" + flag.replace("_", "-"), str(value)]
    if options.master:
        gen += ["--dtype", "bf16", "--precision",
                "main_params=f32,main_grads=f32,exp_avg=f32,exp_avg_sq=f32"]
    e2e_util.run(gen)
    e2e_util.run(["megc", f"{tmp}/m.mlir", "-o", f"{tmp}/m.megc"])

    rng = np.random.default_rng(2)
    full = dict(cfg, eps=1e-5, theta=1e4, percent=1.0, interleaved=False)
    weights = {}
    for name, shape in llama_reference.parameter_shapes(full).items():
        base = 1.0 if name.endswith("norm.weight") else 0.0
        weights[name] = (base + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        if options.master:
            weights[name] = e2e_util.bf16_to_f32(e2e_util.bf16_bits(weights[name]))
    e2e_util.write_safetensors(f"{tmp}/w0.safetensors", weights,
                               dtype="BF16" if options.master else "F32")
    ids = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"])).astype(np.int32)
    np.save(f"{tmp}/ids.npy", ids)
    np.save(f"{tmp}/labels.npy", np.roll(ids, -1, axis=1))
    inputs = ["--input", f"input_ids={tmp}/ids.npy",
              "--input", f"labels={tmp}/labels.npy"]
    run = ["megc-run", f"{tmp}/m.megc"] + inputs

    # Two steps, each checked against AdamW on the grad entry's gradient.
    params = {k: v.astype(np.float64) for k, v in weights.items()}
    moments = {}
    source = ["--params", f"{tmp}/w0.safetensors"]
    worst = 0.0
    for step in (1, 2):
        e2e_util.run(run + source + ["--entry", "grad", "--output-dir",
                                     f"{tmp}/g{step}"])
        e2e_util.run(run + source + ["--entry", "train_step",
                                     "--save-state", f"{tmp}/s{step}.safetensors"])
        state = e2e_util.read_safetensors(f"{tmp}/s{step}.safetensors")
        if state["optimizer.step"] != step:
            print(f"FAIL: optimizer.step is {state['optimizer.step']}, expected {step}")
            return 1
        frozen = "model.layers.1.mlp.up_proj.weight"
        if f"optimizer.exp_avg.{frozen}" in state or \
                not np.array_equal(state[frozen], params[frozen]):
            print("FAIL: the frozen parameter has optimizer state or changed")
            return 1
        for name in list(params):
            if name == frozen:
                continue
            grad = e2e_util.read_output(f"{tmp}/g{step}/grad.{name}.npy")
            m, v = moments.get(name, (0.0, 0.0))
            want, m, v = adamw(params[name], grad, m, v, step)
            checks = [(state[f"optimizer.exp_avg.{name}"], m, "exp_avg"),
                      (state[f"optimizer.exp_avg_sq.{name}"], v, "exp_avg_sq")]
            if options.master:
                master = state[f"optimizer.main_param.{name}"]
                checks.append((master, want, "main_param"))
                # The weight is the master's rounding (exactly).
                rounded = e2e_util.bf16_to_f32(e2e_util.bf16_bits(master))
                if not np.array_equal(state[name], rounded):
                    print(f"FAIL step {step}: {name} is not the bf16 rounding "
                          f"of its master weight")
                    return 1
            else:
                checks.append((state[name], want, name))
            for got, ref, what in checks:
                error = np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-12)
                worst = max(worst, error)
                if error > 1e-5:
                    print(f"FAIL step {step} {what} of {name}: relative error {error:.3g}")
                    return 1
            params[name] = (state[f"optimizer.main_param.{name}"]
                            if options.master else state[name])
            moments[name] = (m, v)
        source = ["--params", "init", "--load-state", f"{tmp}/s{step}.safetensors"]

    # The loss on the fixed batch falls.
    output = e2e_util.run(run + ["--params", f"{tmp}/w0.safetensors", "--entry",
                                 "train_step", "--steps", "30"])
    losses = [float(x) for x in re.findall(r"loss ([0-9.eE+-]+)$", output, re.M)]
    print(f"AdamW steps match the NumPy rule (worst relative error {worst:.3g}); "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} steps")
    if len(losses) != 30 or not losses[-1] < 0.5 * losses[0]:
        print("FAIL: the loss did not fall to half")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
