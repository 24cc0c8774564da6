"""A NumPy Llama (Hugging Face LlamaForCausalLM semantics), written for the
end-to-end tests independently of the compiler: RMSNorm, half-split or
interleaved RoPE on a rotary fraction of each head, grouped-query causal
attention, SwiGLU MLP, untied head, mean token cross-entropy."""
import numpy as np


def parameter_shapes(cfg):
    """Hugging Face LlamaForCausalLM parameter names and shapes."""
    hidden, ffn, vocab = cfg["hidden"], cfg["ffn"], cfg["vocab"]
    kv = hidden // cfg["heads"] * cfg["kv_heads"]
    shapes = {"model.embed_tokens.weight": (vocab, hidden),
              "model.norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}
    for i in range(cfg["layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (hidden,),
                       p + "post_attention_layernorm.weight": (hidden,),
                       p + "self_attn.q_proj.weight": (hidden, hidden),
                       p + "self_attn.k_proj.weight": (kv, hidden),
                       p + "self_attn.v_proj.weight": (kv, hidden),
                       p + "self_attn.o_proj.weight": (hidden, hidden),
                       p + "mlp.gate_proj.weight": (ffn, hidden),
                       p + "mlp.up_proj.weight": (ffn, hidden),
                       p + "mlp.down_proj.weight": (hidden, ffn)})
    return shapes


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w


def rope(x, theta, percent, interleaved):
    seq, dim = x.shape[1], x.shape[-1]
    rot = int(round(dim * percent))
    inv = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
    freqs = np.outer(np.arange(seq), inv)
    if interleaved:
        emb = np.repeat(freqs, 2, -1)
    else:
        emb = np.concatenate([freqs, freqs], -1)
    cos, sin = np.cos(emb)[None, :, None, :], np.sin(emb)[None, :, None, :]
    xr, tail = x[..., :rot], x[..., rot:]
    if interleaved:
        half = np.stack([-xr[..., 1::2], xr[..., 0::2]], -1).reshape(xr.shape)
    else:
        a, b = np.split(xr, 2, -1)
        half = np.concatenate([-b, a], -1)
    return np.concatenate([xr * cos + half * sin, tail], -1)


def forward(w, ids, cfg):
    layers, heads, kv = cfg["layers"], cfg["heads"], cfg["kv_heads"]
    eps = cfg["eps"]
    h = w["model.embed_tokens.weight"][ids]
    batch, seq, hidden = h.shape
    dim = hidden // heads
    for i in range(layers):
        p = f"model.layers.{i}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(batch, seq, heads, dim)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(batch, seq, kv, dim)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(batch, seq, kv, dim)
        q = rope(q, cfg["theta"], cfg["percent"], cfg["interleaved"])
        k = rope(k, cfg["theta"], cfg["percent"], cfg["interleaved"])
        k = np.repeat(k, heads // kv, 2)
        v = np.repeat(v, heads // kv, 2)
        scores = np.einsum("bshd,bthd->bhst", q, k) / np.sqrt(dim)
        scores = np.where(np.triu(np.ones((seq, seq), bool), 1), -np.inf, scores)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        attn = np.einsum("bhst,bthd->bshd", probs, v).reshape(batch, seq, hidden)
        h = h + attn @ w[p + "self_attn.o_proj.weight"].T
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        gate = x @ w[p + "mlp.gate_proj.weight"].T
        up = x @ w[p + "mlp.up_proj.weight"].T
        h = h + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    h = rms_norm(h, w["model.norm.weight"], eps)
    return h @ w["lm_head.weight"].T


def loss(logits, labels):
    m = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(-1)) + m[..., 0]
    picked = np.take_along_axis(logits, labels[..., None], -1)[..., 0]
    return float(np.mean(lse - picked))
