"""The PyTorch side of the llama benchmarks and references: transformers'
LlamaForCausalLM configured as `megc gen llama` builds it (untied
embeddings), and megc's loss (mean token cross-entropy, labels not
shifted). Imported by the benchmark scripts and by the PyTorch processes
they start."""


def llama_config(cfg, attention="sdpa", **extra):
    """A LlamaConfig for `cfg` (the keys of `megc gen llama`'s flags:
    vocab, hidden, ffn, layers, heads, kv_heads, seq), with `extra`
    settings and the attention implementation `attention`."""
    from transformers import LlamaConfig
    config = LlamaConfig(
        vocab_size=cfg["vocab"], hidden_size=cfg["hidden"],
        intermediate_size=cfg["ffn"], num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kv_heads"],
        max_position_embeddings=cfg["seq"], tie_word_embeddings=False,
        **extra)
    config._attn_implementation = attention
    return config


def token_loss(logits, labels):
    """megc's loss: mean token cross-entropy, labels not shifted, in f32."""
    import torch
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))
