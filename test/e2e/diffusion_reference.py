"""NumPy references of the DiT presets, written for the end-to-end tests
independently of the compiler, from the diffusers model semantics:

* MMDiT: Stable Diffusion 3 joint transformer blocks (diffusers
  JointTransformerBlock without qk-norm and without a context-pre-only last
  block): adaLN-Zero modulation of both streams from one conditioning vector,
  joint attention over [image tokens, text tokens], gated residuals and a
  tanh-GELU feed-forward per stream.
* Flux: single-stream blocks (diffusers FluxSingleTransformerBlock) over
  [text tokens, image tokens]: one modulated input feeds attention (RMS-normed
  q/k with RoPE over the token positions) and the MLP in parallel, joined by
  one output projection and a gated residual.

Both end with AdaLayerNormContinuous (scale first, then shift) and a linear
projection back to the latent channels; the loss is the mean squared error
against a target. Weights are a dict keyed by the diffusers parameter names;
all math is float64."""
import numpy as np


def linear(x, w, name):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) *
                                    (x + 0.044715 * x ** 3)))


def layer_norm(x, eps):
    """LayerNorm over the last axis, elementwise_affine=False."""
    centred = x - x.mean(-1, keepdims=True)
    return centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + eps)


def rms_norm(x, weight, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * weight


def ada_norm_zero(w, name, cond, chunks):
    """Linear(SiLU(cond)) chunked along the features: [B, H] each."""
    return np.split(linear(silu(cond), w, name), chunks, axis=-1)


def modulated(x, shift, scale, eps):
    """norm(x) * (1 + scale) + shift, scale/shift broadcast over tokens."""
    return layer_norm(x, eps) * (1.0 + scale[:, None, :]) + shift[:, None, :]


def attention(q, k, v):
    """Unmasked softmax(q k^T / sqrt(d)) v, q/k/v as [B, S, H, D]."""
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def split_heads(x, heads):
    b, s, h = x.shape
    return x.reshape(b, s, heads, h // heads)


def merge_heads(x):
    b, s, heads, d = x.shape
    return x.reshape(b, s, heads * d)


def rotary(x, theta, percent, interleaved):
    """RoPE on the leading `percent` of each head of x [B, S, H, D], token
    positions 0..S-1. Each channel pair (i, i + rot/2) in the half-split
    form, or (2i, 2i + 1) in the interleaved form, is a complex number
    rotated by the angle pos * theta^(-2i/rot)."""
    seq, dim = x.shape[1], x.shape[-1]
    rot = int(round(dim * percent))
    half = rot // 2
    # The frameworks compute the angles in float32.
    inv = (1.0 / np.float32(theta) ** (np.arange(half, dtype=np.float32) * 2
                                       / np.float32(rot))).astype(np.float32)
    angle = (np.arange(seq, dtype=np.float32)[:, None] * inv[None, :])
    turn = np.exp(1j * angle.astype(np.float64))[None, :, None, :]
    part, tail = x[..., :rot], x[..., rot:]
    if interleaved:
        z = (part[..., 0::2] + 1j * part[..., 1::2]) * turn
        out = np.stack([z.real, z.imag], -1).reshape(part.shape)
    else:
        z = (part[..., :half] + 1j * part[..., half:]) * turn
        out = np.concatenate([z.real, z.imag], -1)
    return np.concatenate([out, tail], -1)


def output_head(w, x, cond, eps):
    """AdaLayerNormContinuous (chunks: scale, shift) then proj_out."""
    scale, shift = ada_norm_zero(w, "norm_out.linear", cond, 2)
    return linear(modulated(x, shift, scale, eps), w, "proj_out")


def _joint_block(w, p, x, c, cond, heads, eps):
    (shift_msa, scale_msa, gate_msa,
     shift_mlp, scale_mlp, gate_mlp) = ada_norm_zero(w, p + "norm1.linear",
                                                     cond, 6)
    (c_shift_msa, c_scale_msa, c_gate_msa,
     c_shift_mlp, c_scale_mlp, c_gate_mlp) = ada_norm_zero(
         w, p + "norm1_context.linear", cond, 6)
    nx = modulated(x, shift_msa, scale_msa, eps)
    nc = modulated(c, c_shift_msa, c_scale_msa, eps)

    def proj(image_name, text_name):
        return np.concatenate(
            [split_heads(linear(nx, w, p + "attn." + image_name), heads),
             split_heads(linear(nc, w, p + "attn." + text_name), heads)], 1)

    joint = attention(proj("to_q", "add_q_proj"), proj("to_k", "add_k_proj"),
                      proj("to_v", "add_v_proj"))
    seq = x.shape[1]
    attn_x = merge_heads(joint[:, :seq])
    attn_c = merge_heads(joint[:, seq:])

    x = x + gate_msa[:, None] * linear(attn_x, w, p + "attn.to_out.0")
    ff = linear(gelu_tanh(linear(modulated(x, shift_mlp, scale_mlp, eps), w,
                                 p + "ff.net.0.proj")), w, p + "ff.net.2")
    x = x + gate_mlp[:, None] * ff

    c = c + c_gate_msa[:, None] * linear(attn_c, w, p + "attn.to_add_out")
    ff = linear(gelu_tanh(linear(modulated(c, c_shift_mlp, c_scale_mlp, eps),
                                 w, p + "ff_context.net.0.proj")),
                w, p + "ff_context.net.2")
    c = c + c_gate_mlp[:, None] * ff
    return x, c


def mmdit_forward(w, latents, context, cond, cfg):
    """SD3 transformer: prediction [B, S, in_channels]."""
    eps = cfg["eps"]
    x = linear(latents, w, "x_embedder")
    c = linear(context, w, "context_embedder")
    for i in range(cfg["layers"]):
        x, c = _joint_block(w, f"transformer_blocks.{i}.", x, c, cond,
                            cfg["heads"], eps)
    return output_head(w, x, cond, eps)


def flux_forward(w, latents, context, cond, cfg):
    """Flux single-stream transformer: prediction [B, S, in_channels]."""
    eps, heads = cfg["eps"], cfg["heads"]
    x = linear(latents, w, "x_embedder")
    c = linear(context, w, "context_embedder")
    text = c.shape[1]
    h = np.concatenate([c, x], 1)

    def rope(t):
        return rotary(t, cfg["theta"], cfg["percent"], cfg["interleaved"])

    for i in range(cfg["layers"]):
        p = f"single_transformer_blocks.{i}."
        shift, scale, gate = ada_norm_zero(w, p + "norm.linear", cond, 3)
        n = modulated(h, shift, scale, eps)
        mlp = gelu_tanh(linear(n, w, p + "proj_mlp"))
        q = rms_norm(split_heads(linear(n, w, p + "attn.to_q"), heads),
                     w[p + "attn.norm_q.weight"], eps)
        k = rms_norm(split_heads(linear(n, w, p + "attn.to_k"), heads),
                     w[p + "attn.norm_k.weight"], eps)
        v = split_heads(linear(n, w, p + "attn.to_v"), heads)
        attn = merge_heads(attention(rope(q), rope(k), v))
        out = linear(np.concatenate([attn, mlp], -1), w, p + "proj_out")
        h = h + gate[:, None] * out
    return output_head(w, h[:, text:], cond, eps)


def mse(prediction, target):
    return float(np.mean((prediction - target) ** 2))
