"""Runs meg functions through convert-meg-to-linalg and the upstream CPU
pipeline with mlir-runner, and compares their results with NumPy.

A case is a meg function `@f`, its inputs (generated here with a fixed
seed) and a NumPy reference written independently of the compiler. Inputs
are embedded as constants; bf16 inputs are rounded the way the IR parser
rounds them so that both sides see the same values.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

import numpy as np

LLVM = "/usr/lib/llvm-22"
LOWER = ("--pass-pipeline=builtin.module("
         "one-shot-bufferize{bufferize-function-boundaries "
         "function-boundary-type-conversion=identity-layout-map},"
         "func.func(convert-linalg-to-loops),expand-strided-metadata,"
         "lower-affine,convert-scf-to-cf,func.func(arith-expand{include-bf16=true}),"
         "convert-math-to-llvm,convert-math-to-libm,finalize-memref-to-llvm,"
         "convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,"
         "convert-index-to-llvm,reconcile-unrealized-casts)")


def bf16_round(x):
    """Rounds float32 values to bfloat16 (nearest even), kept as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


class Input:
    def __init__(self, shape, dtype="f32", low=-1.0, high=1.0, ints=None):
        self.shape, self.dtype, self.low, self.high, self.ints = (
            tuple(shape), dtype, low, high, ints)

    def make(self, rng):
        if self.ints is not None:
            return rng.integers(0, self.ints, self.shape).astype(np.int32)
        value = rng.uniform(self.low, self.high, self.shape).astype(np.float32)
        return bf16_round(value) if self.dtype == "bf16" else value

    def type(self):
        dims = "x".join(str(d) for d in self.shape)
        element = "i32" if self.ints is not None else self.dtype
        return f"tensor<{dims}x{element}>" if dims else f"tensor<{element}>"


def literal(array):
    if array.dtype == np.int32:
        return np.array2string(array, separator=", ", threshold=1 << 30)
    return np.array2string(array, separator=", ", threshold=1 << 30,
                           floatmode="unique", max_line_width=1 << 30)


def result_types(signature):
    results = signature.split("->", 1)[1]
    return re.findall(r"tensor<[^>]*>", results)


def module_text(case, arrays):
    lines = [case.function.strip(), "func.func @main() {"]
    names = []
    for index, (spec, array) in enumerate(zip(case.inputs, arrays)):
        text = literal(array).replace("\n", " ")
        lines.append(f"  %in{index} = arith.constant dense<{text}> : {spec.type()}")
        names.append(f"%in{index}")
    signature = case.function.split("{", 1)[0]
    types = result_types(signature)
    arg_types = ", ".join(spec.type() for spec in case.inputs)
    lines.append(f"  %r:{len(types)} = func.call @f({', '.join(names)}) : "
                 f"({arg_types}) -> ({', '.join(types)})")
    for index, type in enumerate(types):
        # Results of every element type print as f32 (i32 exactly).
        f32 = re.sub(r"x(bf16|f16|f32|i32)>|<(bf16|f16|f32|i32)>",
                     lambda m: "xf32>" if m.group(1) else "<f32>", type)
        value = f"%r#{index}"
        if f32 != type:
            lines.append(f"  %c{index} = meg.cast {value} : {type} to {f32}")
            value = f"%c{index}"
        lines.append(f"  %m{index} = bufferization.to_buffer {value} : {f32} "
                     f"to {f32.replace('tensor', 'memref')}")
        lines.append(f"  %u{index} = memref.cast %m{index} : "
                     f"{f32.replace('tensor', 'memref')} to memref<*xf32>")
        lines.append(f"  func.call @printMemrefF32(%u{index}) : "
                     f"(memref<*xf32>) -> ()")
    lines += ["  return", "}", "func.func private @printMemrefF32(memref<*xf32>)"]
    return "\n".join(lines) + "\n"


def run_pipeline(text, megc_opt):
    stage = subprocess.run([megc_opt, "--convert-meg-to-linalg"], input=text,
                           capture_output=True, text=True)
    if stage.returncode:
        return None, "megc-opt: " + stage.stderr
    stage = subprocess.run([f"{LLVM}/bin/mlir-opt", LOWER], input=stage.stdout,
                           capture_output=True, text=True)
    if stage.returncode:
        return None, "mlir-opt: " + stage.stderr
    libs = f"{LLVM}/lib/libmlir_runner_utils.so,{LLVM}/lib/libmlir_c_runner_utils.so"
    stage = subprocess.run([f"{LLVM}/bin/mlir-runner", "-e", "main",
                            "-entry-point-result=void", f"-shared-libs={libs}"],
                           input=stage.stdout, capture_output=True, text=True)
    if stage.returncode:
        return None, "mlir-runner: " + stage.stderr
    outputs = []
    for block in stage.stdout.split("Unranked Memref")[1:]:
        data = block.split("data =", 1)[1]
        numbers = re.findall(r"-?(?:inf|nan|\d+(?:\.\d*)?(?:e[-+]?\d+)?)", data)
        outputs.append(np.array([float(n) for n in numbers], np.float64))
    return outputs, None


class Case:
    def __init__(self, name, function, inputs, reference, rtol=2e-5,
                 atol=2e-5):
        self.name, self.function, self.inputs = name, function, inputs
        self.reference, self.rtol, self.atol = reference, rtol, atol


def check(case, megc_opt, seed):
    rng = np.random.default_rng(seed)
    arrays = [spec.make(rng) for spec in case.inputs]
    outputs, error = run_pipeline(module_text(case, arrays), megc_opt)
    if error:
        return f"{case.name}: {error}"
    expected = case.reference(*arrays)
    if not isinstance(expected, tuple):
        expected = (expected,)
    if len(outputs) != len(expected):
        return f"{case.name}: {len(outputs)} outputs, expected {len(expected)}"
    for index, (got, want) in enumerate(zip(outputs, expected)):
        want = np.asarray(want, np.float64).ravel()
        if got.shape != want.shape:
            return (f"{case.name}: output {index} has {got.size} values, "
                    f"expected {want.size}")
        if not np.allclose(got, want, rtol=case.rtol, atol=case.atol):
            worst = np.argmax(np.abs(got - want) - case.rtol * np.abs(want))
            return (f"{case.name}: output {index} differs at {worst}: "
                    f"{got[worst]} vs reference {want[worst]}")
    return None


def run_cases(cases, megc_opt="megc-opt"):
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        failures = [f for f in pool.map(lambda item: check(item[1], megc_opt,
                                                           item[0]),
                                         enumerate(cases)) if f]
    for failure in failures:
        print("FAIL", failure, file=sys.stderr)
    print(f"{len(cases) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0
