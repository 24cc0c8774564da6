"""Numerical tests of convert-meg-to-linalg: every lowered op on the CPU
against a NumPy reference written for this test."""
import math
import sys

import numpy as np

from exec_harness import Case, Input, bf16_round, run_cases

erf = np.vectorize(math.erf)
sigmoid = lambda x: 1.0 / (1.0 + np.exp(-x))  # noqa: E731


def fn(signature, body):
    return f"func.func @f({signature} {{\n{body}\n}}"


def unary(name, numpy_fn, low=-1.0, high=1.0):
    return Case(name, fn("%x: tensor<3x5xf32>) -> tensor<3x5xf32>",
                         f"  %0 = meg.{name} %x : tensor<3x5xf32>\n"
                         "  return %0 : tensor<3x5xf32>"),
                [Input((3, 5), low=low, high=high)], numpy_fn)


def binary(name, numpy_fn):
    return Case(name, fn("%a: tensor<2x3x4xf32>, %b: tensor<3x1xf32>) -> "
                         "tensor<2x3x4xf32>",
                         f"  %0 = meg.{name} %a, %b : tensor<2x3x4xf32>, "
                         "tensor<3x1xf32>\n  return %0 : tensor<2x3x4xf32>"),
                [Input((2, 3, 4)), Input((3, 1), low=0.5, high=2.0)], numpy_fn)


def rms_norm(x, w, eps):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + eps) * w


def layer_norm(x, eps, w=None, b=None):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    return y if w is None else y * w + b


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def rope(x, cos, sin, interleaved, layout):
    """Reference: x * cos + rotate_half(x) * sin on the rotary channels."""
    if layout == "sbhd":
        x = x.transpose(1, 0, 2, 3)
    seq, rot = x.shape[1], cos.shape[1]
    c = cos[:seq][None, :, None, :]
    s = sin[:seq][None, :, None, :]
    xr, tail = x[..., :rot], x[..., rot:]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        rotated_half = np.stack([-x2, x1], -1).reshape(xr.shape)
    else:
        x1, x2 = np.split(xr, 2, -1)
        rotated_half = np.concatenate([-x2, x1], -1)
    out = np.concatenate([xr * c + rotated_half * s, tail], -1)
    return out.transpose(1, 0, 2, 3) if layout == "sbhd" else out


def attention(q, k, v, causal, scale, positions=None):
    group = q.shape[2] // k.shape[2]
    k = np.repeat(k, group, axis=2)
    v = np.repeat(v, group, axis=2)
    scores = np.einsum("bshd,bthd->bhst", q, k) * scale
    if causal:
        sq, skv = q.shape[1], k.shape[1]
        if positions is None:
            positions = np.arange(sq) + (skv - sq)
        mask = np.arange(skv)[None, :] > np.asarray(positions)[:, None]
        scores = np.where(mask, -np.inf, scores)
    return np.einsum("bhst,bthd->bshd", softmax(scores, -1), v)


def cross_entropy(logits, labels, mean):
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + \
        logits.max(-1)
    picked = np.take_along_axis(logits, labels[..., None], -1)[..., 0]
    loss = (lse - picked).sum()
    return loss / labels.size if mean else loss


VOCAB_LABELS = np.array([[1, 7, -100], [11, 6, 0]])


def vocab_shard_stats(logits, max, labels, first):
    """Per token over classes [first, first + C): sum of exp(logits - max),
    the label's logit when it is one of them (else 0), and whether the label
    counts (not -100)."""
    classes = logits.shape[-1]
    sum_exp = np.exp(logits - max[..., None]).sum(-1)
    local = labels - first
    inside = (local >= 0) & (local < classes)
    picked = np.take_along_axis(logits, np.clip(local, 0, classes - 1)[..., None],
                                -1)[..., 0]
    return sum_exp, np.where(inside, picked, 0.0), (labels != -100) * 1.0


def rope_tables(rows, dim, interleaved, theta=10000.0):
    inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    freqs = np.outer(np.arange(rows), inv)
    emb = np.repeat(freqs, 2, -1) if interleaved else np.concatenate(
        [freqs, freqs], -1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


class TableInput(Input):
    """A cos or sin table as a framework computes it."""

    def __init__(self, rows, dim, interleaved, which):
        super().__init__((rows, dim))
        self.args = (rows, dim, interleaved)
        self.which = which

    def make(self, rng):
        return rope_tables(*self.args)[self.which]


def rope_case(name, layout, interleaved, head_dim, rotary, table_rows):
    shape = (2, 6, 3, head_dim) if layout == "bshd" else (6, 2, 3, head_dim)
    x = "x".join(map(str, shape))
    t = f"{table_rows}x{rotary}"
    flag = " interleaved" if interleaved else ""
    return Case(
        name,
        fn(f"%x: tensor<{x}xf32>, %c: tensor<{t}xf32>, %s: tensor<{t}xf32>) "
           f"-> tensor<{x}xf32>",
           f"  %0 = meg.rope %x, %c, %s layout {layout}{flag} : tensor<{x}xf32>, "
           f"tensor<{t}xf32>, tensor<{t}xf32>\n  return %0 : tensor<{x}xf32>"),
        [Input(shape), TableInput(table_rows, rotary, interleaved, 0),
         TableInput(table_rows, rotary, interleaved, 1)],
        lambda x, c, s: rope(x, c, s, interleaved, layout))


def moe_route(scores, bias, k, groups, top_groups, normalize, scaling):
    """Group-limited top-k: experts [T, k] from the best, and weights."""
    tokens, experts = scores.shape
    biased = scores.astype(np.float64) + bias
    per = biased.reshape(tokens, groups, experts // groups)
    group_score = np.sort(per, axis=-1)[..., -2:].sum(-1)
    kept = np.argsort(-group_score, axis=-1, kind="stable")[:, :top_groups]
    allowed = np.zeros((tokens, groups), bool)
    np.put_along_axis(allowed, kept, True, axis=1)
    allowed = np.repeat(allowed, experts // groups, axis=1)
    index = np.argsort(-np.where(allowed, biased, -np.inf), axis=-1,
                       kind="stable")[:, :k]
    weights = np.take_along_axis(scores.astype(np.float64), index, axis=1)
    if normalize:
        weights = weights / (weights.sum(-1, keepdims=True) + 1e-20)
    return index.astype(np.int32), weights * scaling


def moe_route_grad(dw, scores, index, normalize, scaling):
    """The weights' gradient by central differences in float64, the
    selection held fixed."""
    def weights(s):
        w = np.take_along_axis(s, index, axis=1)
        if normalize:
            w = w / (w.sum(-1, keepdims=True) + 1e-20)
        return w * scaling
    s = scores.astype(np.float64)
    grad = np.zeros_like(s)
    step = 1e-6
    for t, e in np.ndindex(*s.shape):
        up, down = s.copy(), s.copy()
        up[t, e] += step
        down[t, e] -= step
        grad[t, e] = ((weights(up) - weights(down)) * dw).sum() / (2 * step)
    return grad


def moe_assign(index, weights, experts, capacity, by_weight):
    """Slots of each expert's capacity, as meg.moe_assign lists them."""
    tokens, k = index.shape
    slot_tokens = np.full((experts, capacity), -1, np.int32)
    slot_choices = np.full((experts, capacity), -1, np.int32)
    positions = np.full((tokens, k), -1, np.int32)
    for e in range(experts):
        choices = [c for c in range(tokens * k) if index.flat[c] == e]
        if by_weight:
            choices.sort(key=lambda c: (-weights.flat[c], c))
        for place, c in enumerate(choices[:capacity]):
            slot_tokens[e, place], slot_choices[e, place] = c // k, c
            positions.flat[c] = e * capacity + place
    load = np.bincount(index.ravel(), minlength=experts).astype(np.int32)
    dropped = np.int32((positions < 0).sum())
    return slot_tokens, slot_choices, positions, load, dropped


ROUTE_BIAS = np.array([0.0, 0.3, -0.2, 0.1, 0.05, -0.1, 0.2, 0.0], np.float32)
# Tokens 0-3 choose experts as meg.moe_route would; 5 tokens x top-2 over
# 4 experts of capacity 2: experts 0 and 1 are asked by more choices than
# they hold.
ASSIGN_EXPERTS = np.array([[0, 1], [1, 0], [0, 2], [1, 3], [0, 1]], np.int32)
ASSIGN_WEIGHTS = np.array([[0.6, 0.4], [0.7, 0.3], [0.9, 0.1], [0.5, 0.5],
                           [0.55, 0.45]], np.float32)
GATHER_INDEX = np.array([[3, -1, 0], [5, 2, 3]], np.int32)


def route_case(name, groups, top_groups, normalize):
    attrs = (f"top_k 2 groups {groups} top_groups {top_groups}"
             f"{' normalize' if normalize else ''} scaling 2.5")
    bias = "[" + ", ".join(f"{b:.2f}" for b in ROUTE_BIAS) + "]"
    return Case(name, fn(
        "%s: tensor<6x8xf32>) -> (tensor<6x2xi32>, tensor<6x2xf32>)",
        f"  %b = arith.constant dense<{bias}> : tensor<8xf32>\n"
        f"  %e, %w = meg.moe_route %s, %b {attrs} : tensor<6x8xf32>, "
        "tensor<8xf32> -> tensor<6x2xi32>, tensor<6x2xf32>\n"
        "  return %e, %w : tensor<6x2xi32>, tensor<6x2xf32>"),
        [Input((6, 8), low=0.0, high=1.0)],
        lambda s: moe_route(s, ROUTE_BIAS, 2, groups, top_groups, normalize,
                            2.5))


def route_grad_case(name, normalize):
    return Case(name, fn(
        "%dw: tensor<6x2xf32>, %s: tensor<6x8xf32>) -> tensor<6x8xf32>",
        "  %e = arith.constant dense<[[1, 3], [0, 7], [2, 5], [6, 4], [3, 1],"
        " [7, 0]]> : tensor<6x2xi32>\n"
        f"  %0 = meg.moe_route_grad %dw, %s, %e"
        f"{' normalize' if normalize else ''} scaling 2.5 : tensor<6x2xf32>, "
        "tensor<6x8xf32>, tensor<6x2xi32> -> tensor<6x8xf32>\n"
        "  return %0 : tensor<6x8xf32>"),
        [Input((6, 2)), Input((6, 8), low=0.1, high=1.0)],
        lambda dw, s: moe_route_grad(dw, s, ROUTE_GRAD_EXPERTS, normalize,
                                     2.5), rtol=1e-4, atol=1e-6)


ROUTE_GRAD_EXPERTS = np.array([[1, 3], [0, 7], [2, 5], [6, 4], [3, 1],
                               [7, 0]])


def assign_case(name, policy):
    experts = np.array2string(ASSIGN_EXPERTS, separator=", ")
    weights = np.array2string(ASSIGN_WEIGHTS, separator=", ")
    return Case(name, fn(
        ") -> (tensor<4x2xi32>, tensor<4x2xi32>, tensor<5x2xi32>, "
        "tensor<4xi32>, tensor<i32>)",
        f"  %e = arith.constant dense<{experts}> : tensor<5x2xi32>\n"
        f"  %w = arith.constant dense<{weights}> : tensor<5x2xf32>\n"
        "  %t, %c, %p, %l, %d = meg.moe_assign %e, %w experts 4 capacity 2 "
        f"policy {policy} : tensor<5x2xi32>, tensor<5x2xf32> -> "
        "tensor<4x2xi32>, tensor<4x2xi32>, tensor<5x2xi32>, tensor<4xi32>, "
        "tensor<i32>\n"
        "  return %t, %c, %p, %l, %d : tensor<4x2xi32>, tensor<4x2xi32>, "
        "tensor<5x2xi32>, tensor<4xi32>, tensor<i32>"),
        [], lambda: moe_assign(ASSIGN_EXPERTS, ASSIGN_WEIGHTS, 4, 2,
                               policy == "probs"), rtol=0, atol=0)


CASES = [
    binary("add", lambda a, b: a + b),
    binary("sub", lambda a, b: a - b),
    binary("mul", lambda a, b: a * b),
    binary("div", lambda a, b: a / b),
    binary("max", lambda a, b: np.maximum(a, b)),
    unary("neg", lambda x: -x),
    unary("exp", np.exp),
    unary("log", np.log, 0.1, 3.0),
    unary("cos", np.cos, -4.0, 4.0),
    unary("sin", np.sin, -4.0, 4.0),
    unary("sqrt", np.sqrt, 0.1, 3.0),
    unary("rsqrt", lambda x: 1 / np.sqrt(x), 0.1, 3.0),
    unary("tanh", np.tanh, -3.0, 3.0),
    unary("sigmoid", sigmoid, -4.0, 4.0),
    unary("silu", lambda x: x * sigmoid(x), -4.0, 4.0),
    Case("gelu_tanh", fn("%x: tensor<4x8xf32>) -> tensor<4x8xf32>",
                         "  %0 = meg.gelu %x approximate tanh : tensor<4x8xf32>\n"
                         "  return %0 : tensor<4x8xf32>"),
         [Input((4, 8), low=-3, high=3)],
         lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) *
                                          (x + 0.044715 * x ** 3)))),
    Case("gelu_erf", fn("%x: tensor<4x8xf32>) -> tensor<4x8xf32>",
                        "  %0 = meg.gelu %x approximate none : tensor<4x8xf32>\n"
                        "  return %0 : tensor<4x8xf32>"),
         [Input((4, 8), low=-3, high=3)],
         lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))),
    Case("swiglu", fn("%g: tensor<4x8xf32>, %u: tensor<4x8xf32>) -> tensor<4x8xf32>",
                      "  %0 = meg.swiglu %g, %u : tensor<4x8xf32>\n"
                      "  return %0 : tensor<4x8xf32>"),
         [Input((4, 8), low=-3, high=3), Input((4, 8))],
         lambda g, u: g * sigmoid(g) * u),
    # Rounding to bf16 is bit-exact round-to-nearest-even.
    Case("cast_f32_to_bf16", fn("%x: tensor<64xf32>) -> tensor<64xbf16>",
                                "  %0 = meg.cast %x : tensor<64xf32> to tensor<64xbf16>\n"
                                "  return %0 : tensor<64xbf16>"),
         [Input((64,), low=-100, high=100)], bf16_round, rtol=0, atol=0),
    Case("cast_i32_to_f32", fn("%x: tensor<8xi32>) -> tensor<8xf32>",
                               "  %0 = meg.cast %x : tensor<8xi32> to tensor<8xf32>\n"
                               "  return %0 : tensor<8xf32>"),
         [Input((8,), ints=1000)], lambda x: x.astype(np.float32), rtol=0, atol=0),
    Case("modulate", fn("%x: tensor<2x5x4xf32>, %sh: tensor<2x4xf32>, %sc: tensor<2x4xf32>) -> tensor<2x5x4xf32>",
                        "  %0 = meg.modulate %x, %sh, %sc : tensor<2x5x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>\n"
                        "  return %0 : tensor<2x5x4xf32>"),
         [Input((2, 5, 4)), Input((2, 4)), Input((2, 4))],
         lambda x, sh, sc: x * (1 + sc[:, None, :]) + sh[:, None, :]),
    Case("iota", fn(") -> tensor<3x4xf32>",
                    "  %0 = meg.iota dim 1 : tensor<3x4xf32>\n"
                    "  return %0 : tensor<3x4xf32>"),
         [], lambda: np.tile(np.arange(4.0), (3, 1)), rtol=0, atol=0),
    Case("broadcast", fn("%x: tensor<1x4xf32>) -> tensor<3x4xf32>",
                         "  %0 = meg.broadcast %x : tensor<1x4xf32> to tensor<3x4xf32>\n"
                         "  return %0 : tensor<3x4xf32>"),
         [Input((1, 4))], lambda x: np.broadcast_to(x, (3, 4))),
    Case("reshape_transpose", fn("%x: tensor<2x6xf32>) -> tensor<3x2x2xf32>",
                                 "  %0 = meg.reshape %x : tensor<2x6xf32> to tensor<2x3x2xf32>\n"
                                 "  %1 = meg.transpose %0 [1, 2, 0] : tensor<2x3x2xf32>\n"
                                 "  return %1 : tensor<3x2x2xf32>"),
         [Input((2, 6))], lambda x: x.reshape(2, 3, 2).transpose(1, 2, 0)),
    Case("strided_slice", fn("%x: tensor<4x10xf32>) -> tensor<2x4xf32>",
                             "  %0 = meg.slice %x [1, 1] [2, 4] [2, 2] : tensor<4x10xf32>\n"
                             "  return %0 : tensor<2x4xf32>"),
         [Input((4, 10))], lambda x: x[1:4:2, 1:9:2]),
    Case("concat_split", fn("%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) -> (tensor<2x1xf32>, tensor<2x7xf32>)",
                            "  %0 = meg.concat %a, %b axis 1 : tensor<2x3xf32>, tensor<2x5xf32>\n"
                            "  %1:2 = meg.split %0 axis 1 sizes [1, 7] : tensor<2x8xf32>\n"
                            "  return %1#0, %1#1 : tensor<2x1xf32>, tensor<2x7xf32>"),
         [Input((2, 3)), Input((2, 5))],
         lambda a, b: (np.concatenate([a, b], 1)[:, :1],
                       np.concatenate([a, b], 1)[:, 1:])),
    Case("reduce", fn("%x: tensor<3x4x5xf32>) -> (tensor<4xf32>, tensor<3x1x5xf32>, tensor<3x4xf32>)",
                      "  %0 = meg.reduce sum %x dims [0, 2] : tensor<3x4x5xf32>\n"
                      "  %1 = meg.reduce mean %x dims [1] keep_dims : tensor<3x4x5xf32>\n"
                      "  %2 = meg.reduce max %x dims [2] : tensor<3x4x5xf32>\n"
                      "  return %0, %1, %2 : tensor<4xf32>, tensor<3x1x5xf32>, tensor<3x4xf32>"),
         [Input((3, 4, 5))],
         lambda x: (x.sum((0, 2)), x.mean(1, keepdims=True), x.max(2))),
    Case("rms_norm", fn("%x: tensor<2x3x16xf32>, %w: tensor<16xf32>) -> tensor<2x3x16xf32>",
                        "  %0 = meg.rms_norm %x, %w eps 1.0e-05 : tensor<2x3x16xf32>, tensor<16xf32>\n"
                        "  return %0 : tensor<2x3x16xf32>"),
         [Input((2, 3, 16)), Input((16,), low=0.5, high=1.5)],
         lambda x, w: rms_norm(x, w, 1e-5)),
    Case("rms_norm_bf16", fn("%x: tensor<4x32xbf16>, %w: tensor<32xbf16>) -> tensor<4x32xbf16>",
                             "  %0 = meg.rms_norm %x, %w eps 1.0e-06 : tensor<4x32xbf16>, tensor<32xbf16>\n"
                             "  return %0 : tensor<4x32xbf16>"),
         [Input((4, 32), "bf16"), Input((32,), "bf16", 0.5, 1.5)],
         lambda x, w: rms_norm(x, w, 1e-6), rtol=1e-2, atol=1e-2),
    Case("layer_norm", fn("%x: tensor<3x16xf32>) -> tensor<3x16xf32>",
                          "  %0 = meg.layer_norm %x eps 1.0e-06 : tensor<3x16xf32>\n"
                          "  return %0 : tensor<3x16xf32>"),
         [Input((3, 16), low=-2, high=3)], lambda x: layer_norm(x, 1e-6)),
    Case("layer_norm_affine", fn("%x: tensor<3x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<3x16xf32>",
                                 "  %0 = meg.layer_norm %x affine %w, %b eps 1.0e-05 : tensor<3x16xf32>, tensor<16xf32>, tensor<16xf32>\n"
                                 "  return %0 : tensor<3x16xf32>"),
         [Input((3, 16)), Input((16,)), Input((16,))],
         lambda x, w, b: layer_norm(x, 1e-5, w, b)),
    Case("softmax", fn("%x: tensor<3x7x2xf32>) -> tensor<3x7x2xf32>",
                       "  %0 = meg.softmax %x axis 1 : tensor<3x7x2xf32>\n"
                       "  return %0 : tensor<3x7x2xf32>"),
         [Input((3, 7, 2), low=-5, high=5)], lambda x: softmax(x, 1)),
    rope_case("rope_half_bshd", "bshd", False, 8, 8, 6),
    rope_case("rope_interleaved_bshd", "bshd", True, 8, 8, 6),
    rope_case("rope_half_partial_long_table", "bshd", False, 16, 8, 10),
    rope_case("rope_interleaved_partial_sbhd", "sbhd", True, 16, 8, 9),
    Case("matmul_batched_transposed", fn("%a: tensor<2x3x4xf32>, %b: tensor<2x5x4xf32>) -> tensor<2x3x5xf32>",
                                         "  %0 = meg.matmul %a, %b transpose_rhs : tensor<2x3x4xf32>, tensor<2x5x4xf32>\n"
                                         "  return %0 : tensor<2x3x5xf32>"),
         [Input((2, 3, 4)), Input((2, 5, 4))],
         lambda a, b: a @ b.transpose(0, 2, 1)),
    Case("matmul_shared_rhs", fn("%a: tensor<2x4x3xf32>, %b: tensor<4x6xf32>) -> tensor<2x3x6xf32>",
                                 "  %0 = meg.matmul %a, %b transpose_lhs : tensor<2x4x3xf32>, tensor<4x6xf32>\n"
                                 "  return %0 : tensor<2x3x6xf32>"),
         [Input((2, 4, 3)), Input((4, 6))],
         lambda a, b: a.transpose(0, 2, 1) @ b),
    Case("linear_bias", fn("%x: tensor<2x3x8xf32>, %w: tensor<5x8xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32>",
                           "  %0 = meg.linear %x, %w bias %b : tensor<2x3x8xf32>, tensor<5x8xf32>, tensor<5xf32>\n"
                           "  return %0 : tensor<2x3x5xf32>"),
         [Input((2, 3, 8)), Input((5, 8)), Input((5,))],
         lambda x, w, b: x @ w.T + b),
    Case("linear_bf16", fn("%x: tensor<4x32xbf16>, %w: tensor<8x32xbf16>) -> tensor<4x8xbf16>",
                           "  %0 = meg.linear %x, %w : tensor<4x32xbf16>, tensor<8x32xbf16>\n"
                           "  return %0 : tensor<4x8xbf16>"),
         [Input((4, 32), "bf16"), Input((8, 32), "bf16")],
         lambda x, w: x.astype(np.float64) @ w.T, rtol=1e-2, atol=1e-2),
    Case("attention_causal_gqa", fn("%q: tensor<2x5x4x8xf32>, %k: tensor<2x5x2x8xf32>, %v: tensor<2x5x2x6xf32>) -> tensor<2x5x4x6xf32>",
                                    "  %0 = meg.attention %q, %k, %v causal scale 0.35 : tensor<2x5x4x8xf32>, tensor<2x5x2x8xf32>, tensor<2x5x2x6xf32>\n"
                                    "  return %0 : tensor<2x5x4x6xf32>"),
         [Input((2, 5, 4, 8)), Input((2, 5, 2, 8)), Input((2, 5, 2, 6))],
         lambda q, k, v: attention(q, k, v, True, 0.35)),
    Case("attention_longer_keys", fn("%q: tensor<1x3x2x4xf32>, %k: tensor<1x7x2x4xf32>, %v: tensor<1x7x2x4xf32>) -> (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>)",
                                     "  %0 = meg.attention %q, %k, %v scale 0.5 : tensor<1x3x2x4xf32>, tensor<1x7x2x4xf32>, tensor<1x7x2x4xf32>\n"
                                     "  %1 = meg.attention %q, %k, %v causal scale 0.5 : tensor<1x3x2x4xf32>, tensor<1x7x2x4xf32>, tensor<1x7x2x4xf32>\n"
                                     "  return %0, %1 : tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>"),
         [Input((1, 3, 2, 4)), Input((1, 7, 2, 4)), Input((1, 7, 2, 4))],
         lambda q, k, v: (attention(q, k, v, False, 0.5),
                          attention(q, k, v, True, 0.5))),
    # A context-parallel rank's queries: chunks 1 and 2 (of 4 chunks of 2)
    # of a sequence of 8, at their positions, against all 8 keys.
    Case("attention_positions",
         fn("%q: tensor<2x4x4x8xf32>, %k: tensor<2x8x2x8xf32>, %v: tensor<2x8x2x6xf32>) -> tensor<2x4x4x6xf32>",
            "  %p = arith.constant dense<[2, 3, 4, 5]> : tensor<4xi32>\n"
            "  %0 = meg.attention %q, %k, %v causal positions(%p : tensor<4xi32>) scale 0.35 : tensor<2x4x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x6xf32>\n"
            "  return %0 : tensor<2x4x4x6xf32>"),
         [Input((2, 4, 4, 8)), Input((2, 8, 2, 8)), Input((2, 8, 2, 6))],
         lambda q, k, v: attention(q, k, v, True, 0.35, [2, 3, 4, 5])),
    Case("embedding", fn("%t: tensor<10x4xf32>, %ids: tensor<2x3xi32>) -> tensor<2x3x4xf32>",
                         "  %0 = meg.embedding %t, %ids : tensor<10x4xf32>, tensor<2x3xi32>\n"
                         "  return %0 : tensor<2x3x4xf32>"),
         [Input((10, 4)), Input((2, 3), ints=10)], lambda t, ids: t[ids],
         rtol=0, atol=1e-6),
    Case("cross_entropy", fn("%l: tensor<2x3x11xf32>, %y: tensor<2x3xi32>) -> (tensor<f32>, tensor<f32>)",
                             "  %0 = meg.cross_entropy %l, %y mean : tensor<2x3x11xf32>, tensor<2x3xi32>\n"
                             "  %1 = meg.cross_entropy %l, %y sum : tensor<2x3x11xf32>, tensor<2x3xi32>\n"
                             "  return %0, %1 : tensor<f32>, tensor<f32>"),
         [Input((2, 3, 11), low=-4, high=4), Input((2, 3), ints=11)],
         lambda l, y: (cross_entropy(l, y, True), cross_entropy(l, y, False))),
    # Vocab parallelism: rows 5..9 of a 10-row table; classes 6..11 of 12.
    Case("embedding_rows_from",
         fn("%t: tensor<5x4xf32>, %ids: tensor<2x3xi32>) -> tensor<2x3x4xf32>",
            "  %f = arith.constant dense<5> : tensor<i32>\n"
            "  %0 = meg.embedding %t, %ids rows from %f : tensor<5x4xf32>, tensor<2x3xi32>, tensor<i32>\n"
            "  return %0 : tensor<2x3x4xf32>"),
         [Input((5, 4)), Input((2, 3), ints=10)],
         lambda t, ids: np.where(((ids >= 5) & (ids < 10))[..., None],
                                 t[np.clip(ids - 5, 0, 4)], 0.0),
         rtol=0, atol=1e-6),
    Case("embedding_grad_rows_from",
         fn("%g: tensor<2x3x4xf32>, %ids: tensor<2x3xi32>) -> tensor<5x4xf32>",
            "  %f = arith.constant dense<5> : tensor<i32>\n"
            "  %0 = meg.embedding_grad %g, %ids rows from %f : tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<i32> -> tensor<5x4xf32>\n"
            "  return %0 : tensor<5x4xf32>"),
         [Input((2, 3, 4)), Input((2, 3), ints=10)],
         lambda g, ids: np.stack([g[ids == 5 + r].sum(0) for r in range(5)])),
    Case("vocab_shard_stats",
         fn("%l: tensor<2x3x6xf32>, %m: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>)",
            "  %f = arith.constant dense<6> : tensor<i32>\n"
            "  %y = arith.constant dense<[[1, 7, -100], [11, 6, 0]]> : tensor<2x3xi32>\n"
            "  %s, %t, %k = meg.vocab_shard_stats %l, %m, %y, %f vocab 12 ignore -100 : tensor<2x3x6xf32>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<i32>\n"
            "  return %s, %t, %k : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>"),
         [Input((2, 3, 6), low=-4, high=4), Input((2, 3), low=0, high=4)],
         lambda l, m: vocab_shard_stats(l, m, VOCAB_LABELS, 6)),
    Case("vocab_shard_stats_grad",
         fn("%gs: tensor<2x3xf32>, %gt: tensor<2x3xf32>, %l: tensor<2x3x6xf32>, %m: tensor<2x3xf32>) -> tensor<2x3x6xf32>",
            "  %f = arith.constant dense<6> : tensor<i32>\n"
            "  %y = arith.constant dense<[[1, 7, -100], [11, 6, 0]]> : tensor<2x3xi32>\n"
            "  %0 = meg.vocab_shard_stats_grad %gs, %gt, %l, %m, %y, %f : tensor<2x3xf32>, tensor<2x3x6xf32>, tensor<2x3xi32>, tensor<i32>\n"
            "  return %0 : tensor<2x3x6xf32>"),
         [Input((2, 3)), Input((2, 3)), Input((2, 3, 6), low=-4, high=4),
          Input((2, 3), low=0, high=4)],
         lambda gs, gt, l, m: (gs[..., None] * np.exp(l - m[..., None])
                               + gt[..., None] * (np.arange(6) + 6
                                                  == VOCAB_LABELS[..., None]))),
    Case("stop_gradient",
         fn("%x: tensor<2x3xf32>) -> tensor<2x3xf32>",
            "  %0 = meg.stop_gradient %x : tensor<2x3xf32>\n"
            "  return %0 : tensor<2x3xf32>"),
         [Input((2, 3))], lambda x: x),
    route_case("moe_route_groups", 2, 1, True),
    route_case("moe_route_four_groups", 4, 2, True),
    route_case("moe_route_one_group", 1, 1, False),
    route_grad_case("moe_route_grad", True),
    route_grad_case("moe_route_grad_unnormalized", False),
    assign_case("moe_assign_probs", "probs"),
    assign_case("moe_assign_position", "position"),
    Case("gather_rows",
         fn("%x: tensor<6x3xf32>) -> tensor<2x3x3xf32>",
            f"  %i = arith.constant dense<{GATHER_INDEX.tolist()}> : "
            "tensor<2x3xi32>\n"
            "  %0 = meg.gather_rows %x, %i : tensor<6x3xf32>, tensor<2x3xi32>"
            " -> tensor<2x3x3xf32>\n"
            "  return %0 : tensor<2x3x3xf32>"),
         [Input((6, 3))],
         lambda x: np.where((GATHER_INDEX >= 0)[..., None],
                            x[np.clip(GATHER_INDEX, 0, 5)], 0.0),
         rtol=0, atol=1e-6),
]

if __name__ == "__main__":
    sys.exit(run_cases(CASES))
