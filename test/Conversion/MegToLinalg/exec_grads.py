"""Numerical tests of the backward ops and adamw lowered by
convert-meg-to-linalg: each gradient against central finite differences of
a NumPy forward (float64), written for this test; adamw against the update
rule; the embedding gradient against np.add.at."""
import math
import sys

import numpy as np

from exec_harness import Case, Input, run_cases
import exec_ops

erf = np.vectorize(math.erf)


def numeric_grad(forward, args, index, dy, step=1e-6):
    """d sum(forward(*args) * dy) / d args[index], by central differences."""
    args = [np.asarray(a, np.float64) for a in args]
    x = args[index]
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + step
        plus = np.sum(forward(*args) * dy)
        x[i] = saved - step
        minus = np.sum(forward(*args) * dy)
        x[i] = saved
        grad[i] = (plus - minus) / (2 * step)
    return grad


def fn(signature, body):
    return f"func.func @f({signature} {{\n{body}\n}}"


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


gelu_tanh = lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))  # noqa: E731
gelu_erf = lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))  # noqa: E731


def unary_grad(name, attrs, forward):
    t = "tensor<3x4xf32>"
    return Case(f"{name}_grad{attrs.replace(' ', '_')}",
                fn(f"%dy: {t}, %x: {t}) -> {t}",
                   f"  %0 = meg.{name}_grad %dy, %x{attrs} : {t}\n  return %0 : {t}"),
                [Input((3, 4)), Input((3, 4), low=-3, high=3)],
                lambda dy, x: numeric_grad(forward, [x], 0, dy), rtol=1e-5, atol=1e-6)


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def adamw(p, g, m, v, step, lr, b1, b2, eps, wd):
    m2 = b1 * m + (1 - b1) * g
    v2 = b2 * v + (1 - b2) * g * g
    mhat = m2 / (1 - b1 ** step)
    vhat = v2 / (1 - b2 ** step)
    return p - lr * (mhat / (np.sqrt(vhat) + eps) + wd * p), m2, v2


class StepInput(Input):
    def __init__(self, value):
        super().__init__(())
        self.value = value

    def make(self, rng):
        return np.array(self.value, np.int64)

    def type(self):
        return "tensor<i64>"


def rope_grad_case(name, layout, interleaved, head_dim, rotary, rows):
    shape = (2, 5, 3, head_dim) if layout == "bshd" else (5, 2, 3, head_dim)
    x = "x".join(map(str, shape))
    t = f"{rows}x{rotary}"
    flag = " interleaved" if interleaved else ""
    table = exec_ops.TableInput
    return Case(
        name,
        fn(f"%dy: tensor<{x}xf32>, %c: tensor<{t}xf32>, %s: tensor<{t}xf32>) -> tensor<{x}xf32>",
           f"  %0 = meg.rope_grad %dy, %c, %s layout {layout}{flag} : tensor<{x}xf32>, "
           f"tensor<{t}xf32>, tensor<{t}xf32>\n  return %0 : tensor<{x}xf32>"),
        [Input(shape), table(rows, rotary, interleaved, 0),
         table(rows, rotary, interleaved, 1)],
        lambda dy, c, s: numeric_grad(
            lambda x: exec_ops.rope(x, c, s, interleaved, layout),
            [np.zeros(shape)], 0, dy),
        rtol=1e-5, atol=1e-6)


def attention_grads(dout, q, k, v, causal, scale, positions=None):
    def fwd(qq, kk, vv):
        return exec_ops.attention(qq, kk, vv, causal, scale, positions)
    return tuple(numeric_grad(fwd, [q, k, v], i, dout) for i in range(3))


SOFTMAX = "tensor<3x5xf32>"
CASES = [
    unary_grad("silu", "", lambda x: x * sigmoid(x)),
    unary_grad("gelu", " approximate tanh", gelu_tanh),
    unary_grad("gelu", " approximate none", gelu_erf),
    Case("swiglu_grad",
         fn("%dy: tensor<3x4xf32>, %g: tensor<3x4xf32>, %u: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)",
            "  %0:2 = meg.swiglu_grad %dy, %g, %u : tensor<3x4xf32>\n"
            "  return %0#0, %0#1 : tensor<3x4xf32>, tensor<3x4xf32>"),
         [Input((3, 4)), Input((3, 4), low=-3, high=3), Input((3, 4))],
         lambda dy, g, u: tuple(numeric_grad(lambda a, b: a * sigmoid(a) * b,
                                             [g, u], i, dy) for i in range(2)),
         rtol=1e-5, atol=1e-6),
    Case("softmax_grad",
         fn(f"%dy: {SOFTMAX}, %x: {SOFTMAX}) -> {SOFTMAX}",
            f"  %y = meg.softmax %x axis 1 : {SOFTMAX}\n"
            f"  %0 = meg.softmax_grad %dy, %y axis 1 : {SOFTMAX}\n"
            f"  return %0 : {SOFTMAX}"),
         [Input((3, 5)), Input((3, 5), low=-2, high=2)],
         lambda dy, x: numeric_grad(lambda a: exec_ops.softmax(a, 1), [x], 0, dy),
         rtol=1e-5, atol=1e-6),
    Case("cross_entropy_grad",
         fn("%d: tensor<f32>, %l: tensor<2x3x7xf32>, %y: tensor<2x3xi32>) -> (tensor<2x3x7xf32>, tensor<2x3x7xf32>)",
            "  %0 = meg.cross_entropy_grad %d, %l, %y mean : tensor<2x3x7xf32>, tensor<2x3xi32>\n"
            "  %1 = meg.cross_entropy_grad %d, %l, %y sum : tensor<2x3x7xf32>, tensor<2x3xi32>\n"
            "  return %0, %1 : tensor<2x3x7xf32>, tensor<2x3x7xf32>"),
         [Input((), low=0.5, high=2), Input((2, 3, 7), low=-3, high=3),
          Input((2, 3), ints=7)],
         lambda d, l, y: tuple(
             numeric_grad(lambda a: exec_ops.cross_entropy(a, y, mean), [l], 0, d)
             for mean in (True, False)),
         rtol=1e-5, atol=1e-6),
    Case("rms_norm_grad",
         fn("%dy: tensor<2x3x8xf32>, %x: tensor<2x3x8xf32>, %w: tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>)",
            "  %0:2 = meg.rms_norm_grad %dy, %x, %w eps 1.0e-05 : tensor<2x3x8xf32>, tensor<8xf32>\n"
            "  return %0#0, %0#1 : tensor<2x3x8xf32>, tensor<8xf32>"),
         [Input((2, 3, 8)), Input((2, 3, 8)), Input((8,), low=0.5, high=1.5)],
         lambda dy, x, w: tuple(numeric_grad(lambda a, b: exec_ops.rms_norm(a, b, 1e-5),
                                             [x, w], i, dy) for i in range(2)),
         rtol=1e-4, atol=1e-5),
    Case("layer_norm_grad_affine",
         fn("%dy: tensor<3x8xf32>, %x: tensor<3x8xf32>, %w: tensor<8xf32>) -> (tensor<3x8xf32>, tensor<8xf32>, tensor<8xf32>)",
            "  %0:3 = meg.layer_norm_grad %dy, %x weight %w eps 1.0e-05 : tensor<3x8xf32>, tensor<8xf32>\n"
            "  return %0#0, %0#1, %0#2 : tensor<3x8xf32>, tensor<8xf32>, tensor<8xf32>"),
         [Input((3, 8)), Input((3, 8), low=-2, high=2), Input((8,), low=0.5, high=1.5)],
         lambda dy, x, w: tuple(numeric_grad(lambda a, b, c: layer_norm(a, b, c, 1e-5),
                                             [x, w, np.zeros(8)], i, dy) for i in range(3)),
         rtol=1e-4, atol=1e-5),
    Case("layer_norm_grad",
         fn("%dy: tensor<3x8xf32>, %x: tensor<3x8xf32>) -> tensor<3x8xf32>",
            "  %0 = meg.layer_norm_grad %dy, %x eps 1.0e-06 : tensor<3x8xf32>\n"
            "  return %0 : tensor<3x8xf32>"),
         [Input((3, 8)), Input((3, 8), low=-2, high=2)],
         lambda dy, x: numeric_grad(lambda a: layer_norm(a, 1.0, 0.0, 1e-6), [x], 0, dy),
         rtol=1e-4, atol=1e-5),
    rope_grad_case("rope_grad_half", "bshd", False, 8, 8, 5),
    rope_grad_case("rope_grad_interleaved_partial_sbhd", "sbhd", True, 12, 8, 7),
    Case("embedding_grad",
         fn("%dy: tensor<2x4x3xf32>, %ids: tensor<2x4xi32>) -> tensor<6x3xf32>",
            "  %0 = meg.embedding_grad %dy, %ids : tensor<2x4x3xf32>, tensor<2x4xi32> -> tensor<6x3xf32>\n"
            "  return %0 : tensor<6x3xf32>"),
         [Input((2, 4, 3)), Input((2, 4), ints=6)],
         lambda dy, ids: (lambda t: (np.add.at(t, ids.ravel(), dy.reshape(-1, 3)), t)[1])(
             np.zeros((6, 3)))),
    Case("attention_grad_causal_gqa",
         fn("%do: tensor<1x4x4x3xf32>, %q: tensor<1x4x4x3xf32>, %k: tensor<1x4x2x3xf32>, %v: tensor<1x4x2x3xf32>) -> (tensor<1x4x4x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>)",
            "  %o = meg.attention %q, %k, %v causal scale 0.6 : tensor<1x4x4x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>\n"
            "  %0:3 = meg.attention_grad %do, %q, %k, %v, %o causal scale 0.6 : tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>\n"
            "  return %0#0, %0#1, %0#2 : tensor<1x4x4x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>"),
         [Input((1, 4, 4, 3)), Input((1, 4, 4, 3)), Input((1, 4, 2, 3)),
          Input((1, 4, 2, 3))],
         lambda do, q, k, v: attention_grads(do, q, k, v, True, 0.6),
         rtol=1e-4, atol=1e-5),
    Case("attention_grad_longer_keys",
         fn("%do: tensor<1x2x2x3xf32>, %q: tensor<1x2x2x3xf32>, %k: tensor<1x5x2x3xf32>, %v: tensor<1x5x2x3xf32>) -> (tensor<1x2x2x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x2x3xf32>)",
            "  %o = meg.attention %q, %k, %v scale 0.5 : tensor<1x2x2x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x2x3xf32>\n"
            "  %0:3 = meg.attention_grad %do, %q, %k, %v, %o scale 0.5 : tensor<1x2x2x3xf32>, tensor<1x2x2x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x2x3xf32>\n"
            "  return %0#0, %0#1, %0#2 : tensor<1x2x2x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x2x3xf32>"),
         [Input((1, 2, 2, 3)), Input((1, 2, 2, 3)), Input((1, 5, 2, 3)),
          Input((1, 5, 2, 3))],
         lambda do, q, k, v: attention_grads(do, q, k, v, False, 0.5),
         rtol=1e-4, atol=1e-5),
    # Queries at positions 0 and 3 of 4 keys (a context-parallel rank's
    # chunks).
    Case("attention_grad_positions",
         fn("%do: tensor<1x2x2x3xf32>, %q: tensor<1x2x2x3xf32>, %k: tensor<1x4x2x3xf32>, %v: tensor<1x4x2x3xf32>) -> (tensor<1x2x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>)",
            "  %p = arith.constant dense<[0, 3]> : tensor<2xi32>\n"
            "  %o = meg.attention %q, %k, %v causal positions(%p : tensor<2xi32>) scale 0.5 : tensor<1x2x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>\n"
            "  %0:3 = meg.attention_grad %do, %q, %k, %v, %o causal positions(%p : tensor<2xi32>) scale 0.5 : tensor<1x2x2x3xf32>, tensor<1x2x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>\n"
            "  return %0#0, %0#1, %0#2 : tensor<1x2x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>"),
         [Input((1, 2, 2, 3)), Input((1, 2, 2, 3)), Input((1, 4, 2, 3)),
          Input((1, 4, 2, 3))],
         lambda do, q, k, v: attention_grads(do, q, k, v, True, 0.5, [0, 3]),
         rtol=1e-4, atol=1e-5),
    Case("adamw",
         fn("%p: tensor<3x4xf32>, %g: tensor<3x4xf32>, %m: tensor<3x4xf32>, %v: tensor<3x4xf32>, %step: tensor<i64>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)",
            "  %0:3 = meg.adamw %p, %g, %m, %v, %step config(#meg.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1>) : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<i64>\n"
            "  return %0#0, %0#1, %0#2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>"),
         [Input((3, 4)), Input((3, 4)), Input((3, 4)), Input((3, 4), low=0.0, high=0.5),
          StepInput(3)],
         lambda p, g, m, v, step: adamw(p, g, m, v, 3, 0.01, 0.9, 0.95, 1e-8, 0.1),
         rtol=1e-5, atol=1e-6),
]

if __name__ == "__main__":
    sys.exit(run_cases(CASES))
