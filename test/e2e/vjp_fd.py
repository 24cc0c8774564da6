"""End to end: each differentiable op's vector-Jacobian product, in
isolation on small shapes, against central finite differences of the
compiled forward. For every case a module computes loss = sum(op(params) *
dy) (or the op's scalar), megc compiles it with meg-autodiff (the `grad`
entry), and for each parameter p and a random direction d:
(loss(p + h d) - loss(p - h d)) / 2h must equal <grad_p, d>. The forward
kernels themselves are checked against NumPy in
test/Conversion/MegToLinalg/exec_ops.py."""
import argparse
import os
import sys

import numpy as np

import e2e_util

S = "2x3x4"
T = f"tensor<{S}xf32>"

# name -> (params {name: shape}, extra inputs {name: (shape, kind)}, body
# lines defining %y from %<param>s and inputs, the type of %y). Params
# named pos* are kept positive (log, sqrt, rsqrt, division).
CASES = {
    "neg": ({"a": [2, 3, 4]}, {}, f"%y = meg.neg %a : {T}", T),
    "exp": ({"a": [2, 3, 4]}, {}, f"%y = meg.exp %a : {T}", T),
    "log": ({"posa": [2, 3, 4]}, {}, f"%y = meg.log %posa : {T}", T),
    "cos": ({"a": [2, 3, 4]}, {}, f"%y = meg.cos %a : {T}", T),
    "sin": ({"a": [2, 3, 4]}, {}, f"%y = meg.sin %a : {T}", T),
    "sqrt": ({"posa": [2, 3, 4]}, {}, f"%y = meg.sqrt %posa : {T}", T),
    "rsqrt": ({"posa": [2, 3, 4]}, {}, f"%y = meg.rsqrt %posa : {T}", T),
    "tanh": ({"a": [2, 3, 4]}, {}, f"%y = meg.tanh %a : {T}", T),
    "sigmoid": ({"a": [2, 3, 4]}, {}, f"%y = meg.sigmoid %a : {T}", T),
    "gelu_tanh": ({"a": [2, 3, 4]}, {},
                  f"%y = meg.gelu %a approximate tanh : {T}", T),
    "gelu_erf": ({"a": [2, 3, 4]}, {},
                 f"%y = meg.gelu %a approximate none : {T}", T),
    "silu": ({"a": [2, 3, 4]}, {}, f"%y = meg.silu %a : {T}", T),
    "softmax": ({"a": [2, 3, 4]}, {}, f"%y = meg.softmax %a axis 2 : {T}", T),
    "swiglu": ({"a": [2, 3, 4], "b": [2, 3, 4]}, {},
               f"%y = meg.swiglu %a, %b : {T}", T),
    "add": ({"a": [2, 3, 4], "b": [3, 4]}, {},
            f"%y = meg.add %a, %b : {T}, tensor<3x4xf32>", T),
    "sub": ({"a": [2, 3, 4], "b": [3, 4]}, {},
            f"%y = meg.sub %b, %a : tensor<3x4xf32>, {T}", T),
    "mul": ({"a": [2, 3, 4], "b": [3, 1]}, {},
            f"%y = meg.mul %a, %b : {T}, tensor<3x1xf32>", T),
    "div": ({"a": [2, 3, 4], "posb": [4]}, {},
            f"%y = meg.div %a, %posb : {T}, tensor<4xf32>", T),
    "reshape": ({"a": [2, 3, 4]}, {},
                f"%y = meg.reshape %a : {T} to tensor<6x4xf32>",
                "tensor<6x4xf32>"),
    "transpose": ({"a": [2, 3, 4]}, {},
                  f"%y = meg.transpose %a [1, 2, 0] : {T}",
                  "tensor<3x4x2xf32>"),
    "slice": ({"a": [2, 3, 4]}, {},
              f"%y = meg.slice %a [0, 1, 1] [2, 2, 2] [1, 1, 2] : {T}",
              "tensor<2x2x2xf32>"),
    "concat": ({"a": [2, 3, 4], "b": [2, 3, 2]}, {},
               f"%y = meg.concat %a, %b axis 2 : {T}, tensor<2x3x2xf32>",
               "tensor<2x3x6xf32>"),
    "split": ({"a": [2, 3, 4]}, {},
              f"%s:2 = meg.split %a axis 2 sizes [1, 3] : {T}\n"
              "    %y = meg.mul %s#1, %s#1 : tensor<2x3x3xf32>, "
              "tensor<2x3x3xf32>", "tensor<2x3x3xf32>"),
    "broadcast": ({"a": [3, 1]}, {},
                  f"%y = meg.broadcast %a : tensor<3x1xf32> to {T}", T),
    "reduce_sum": ({"a": [2, 3, 4]}, {},
                   f"%y = meg.reduce sum %a dims [1] : {T}", "tensor<2x4xf32>"),
    "reduce_mean": ({"a": [2, 3, 4]}, {},
                    f"%y = meg.reduce mean %a dims [2] keep_dims : {T}",
                    "tensor<2x3x1xf32>"),
    "matmul": ({"a": [2, 3, 4], "m": [4, 5]}, {},
               f"%y = meg.matmul %a, %m : {T}, tensor<4x5xf32>",
               "tensor<2x3x5xf32>"),
    "matmul_transposed": (
        {"a": [2, 3, 4], "m": [2, 5, 4]}, {},
        f"%y = meg.matmul %a, %m transpose_rhs : {T}, tensor<2x5x4xf32>",
        "tensor<2x3x5xf32>"),
    "linear": ({"a": [2, 3, 4], "w": [5, 4], "bias": [5]}, {},
               f"%y = meg.linear %a, %w bias %bias : {T}, tensor<5x4xf32>, "
               "tensor<5xf32>", "tensor<2x3x5xf32>"),
    "embedding": ({"table": [7, 4]}, {"ids": ([2, 3], "ids")},
                  "%y = meg.embedding %table, %ids : tensor<7x4xf32>, "
                  "tensor<2x3xi32>", T),
    "rms_norm": ({"a": [2, 3, 4], "posw": [4]}, {},
                 f"%y = meg.rms_norm %a, %posw eps 1.0e-05 : {T}, "
                 "tensor<4xf32>", T),
    "layer_norm": ({"a": [2, 3, 4], "w": [4], "b": [4]}, {},
                   f"%y = meg.layer_norm %a affine %w, %b eps 1.0e-05 : {T}, "
                   "tensor<4xf32>, tensor<4xf32>", T),
    "modulate": ({"a": [2, 3, 4], "shift": [2, 4], "scale": [2, 4]}, {},
                 f"%y = meg.modulate %a, %shift, %scale : {T}, "
                 "tensor<2x4xf32>, tensor<2x4xf32>", T),
    "rope": ({"q": [1, 3, 2, 4]}, {"cos": ([5, 4], "cos"),
                                   "sin": ([5, 4], "sin")},
             "%y = meg.rope %q, %cos, %sin layout bshd : "
             "tensor<1x3x2x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>",
             "tensor<1x3x2x4xf32>"),
    "rope_interleaved_partial": (
        {"q": [3, 1, 2, 6]}, {"cos": ([3, 4], "cos"), "sin": ([3, 4], "sin")},
        "%y = meg.rope %q, %cos, %sin layout sbhd interleaved : "
        "tensor<3x1x2x6xf32>, tensor<3x4xf32>, tensor<3x4xf32>",
        "tensor<3x1x2x6xf32>"),
    "attention": ({"q": [1, 3, 2, 4], "k": [1, 3, 1, 4], "v": [1, 3, 1, 4]},
                  {}, "%y = meg.attention %q, %k, %v causal scale 0.5 : "
                  "tensor<1x3x2x4xf32>, tensor<1x3x1x4xf32>, "
                  "tensor<1x3x1x4xf32>", "tensor<1x3x2x4xf32>"),
    "cross_entropy": ({"logits": [2, 3, 5]}, {"labels": ([2, 3], "labels")},
                      "%y = meg.cross_entropy %logits, %labels mean : "
                      "tensor<2x3x5xf32>, tensor<2x3xi32>", "tensor<f32>"),
}


def dims(type_text):
    return [int(d) for d in type_text[len("tensor<"):-1].split("x")[:-1]]


def module(case):
    params, extra, body, out_type = CASES[case]
    lines = ["module attributes {meg.optimizer = #meg.adamw<lr = 0.001, "
             "beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, "
             "weight_decay = 0.0>} {"]
    for name, shape in params.items():
        lines.append(f"  meg.param @{name} : tensor<{'x'.join(map(str, shape))}"
                     "xf32> init #meg.init<zeros>")
    args, uses = [], []
    scalar = out_type == "tensor<f32>"
    if not scalar:
        args.append(f'%dy: {out_type} {{meg.name = "dy"}}')
    for name, (shape, kind) in extra.items():
        element = "i32" if kind in ("ids", "labels") else "f32"
        args.append(f"%{name}: tensor<{'x'.join(map(str, shape))}x{element}> "
                    f'{{meg.name = "{name}"}}')
    lines.append(f"  func.func @loss({', '.join(args)}) -> (tensor<f32> "
                 '{meg.name = "loss"}) {')
    for name, shape in params.items():
        lines.append(f"    %{name} = meg.param_ref @{name} : "
                     f"tensor<{'x'.join(map(str, shape))}xf32>")
    lines.append("    " + body)
    if scalar:
        lines.append("    return %y : tensor<f32>")
    else:
        rank = len(dims(out_type))
        lines.append(f"    %p = meg.mul %y, %dy : {out_type}, {out_type}")
        lines.append(f"    %l = meg.reduce sum %p dims "
                     f"[{', '.join(map(str, range(rank)))}] : {out_type}")
        lines.append("    return %l : tensor<f32>")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--step", type=float, default=4e-3)
    parser.add_argument("--tolerance", type=float, default=2e-3)
    options = parser.parse_args()
    rng = np.random.default_rng(4)
    worst = (0.0, "")
    for case, (params, extra, _, out_type) in CASES.items():
        tmp = os.path.join(options.tmp, case)
        os.makedirs(tmp, exist_ok=True)
        with open(f"{tmp}/m.mlir", "w") as f:
            f.write(module(case))
        e2e_util.run(["megc", f"{tmp}/m.mlir", "-o", f"{tmp}/m.megc"])
        inputs = []
        if out_type != "tensor<f32>":
            np.save(f"{tmp}/dy.npy",
                    rng.standard_normal(dims(out_type)).astype(np.float32))
            inputs += ["--input", f"dy={tmp}/dy.npy"]
        for name, (shape, kind) in extra.items():
            if kind in ("ids", "labels"):
                value = rng.integers(0, 5, shape).astype(np.int32)
            else:
                angle = rng.uniform(0, 3, shape)
                value = (np.cos(angle) if kind == "cos" else np.sin(angle))
                value = value.astype(np.float32)
            np.save(f"{tmp}/{name}.npy", value)
            inputs += ["--input", f"{name}={tmp}/{name}.npy"]
        values = {}
        for name, shape in params.items():
            value = rng.standard_normal(shape)
            if name.startswith("pos"):
                value = 0.5 + np.abs(value)
            values[name] = value.astype(np.float32).astype(np.float64)

        def loss(point):
            e2e_util.write_safetensors(f"{tmp}/p.safetensors", point)
            e2e_util.run(["megc-run", f"{tmp}/m.megc", "--entry", "loss",
                          "--params", f"{tmp}/p.safetensors",
                          "--allow-extra-params", "--output-dir",
                          f"{tmp}/loss", *inputs])
            return float(e2e_util.read_output(f"{tmp}/loss/loss.npy"))

        e2e_util.write_safetensors(f"{tmp}/p.safetensors", values)
        e2e_util.run(["megc-run", f"{tmp}/m.megc", "--entry", "grad",
                      "--params", f"{tmp}/p.safetensors", "--output-dir",
                      f"{tmp}/grad", *inputs])
        for name in params:
            grad = e2e_util.read_output(f"{tmp}/grad/grad.{name}.npy")
            direction = rng.standard_normal(values[name].shape)
            plus = dict(values, **{name: values[name] +
                                   options.step * direction})
            minus = dict(values, **{name: values[name] -
                                    options.step * direction})
            numeric = (loss(plus) - loss(minus)) / (2 * options.step)
            analytic = float(np.sum(grad * direction))
            scale = max(abs(analytic), abs(numeric),
                        np.linalg.norm(grad) * np.linalg.norm(direction) *
                        1e-2, 1e-6)
            error = abs(numeric - analytic) / scale
            worst = max(worst, (error, f"{case} d/d{name}"))
            if not error <= options.tolerance:
                sys.exit(f"FAIL {case}: d/d{name} along a random direction: "
                         f"finite differences {numeric:.6g}, VJP "
                         f"{analytic:.6g} (relative error {error:.3g})")
    print(f"{len(CASES)} ops: every VJP matches finite differences "
          f"(worst {worst[0]:.2g}, {worst[1]})")


if __name__ == "__main__":
    main()
