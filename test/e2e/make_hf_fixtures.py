"""Make the Hugging Face fixtures under test/e2e/hf-fixtures.

Each case is a small random 2-layer causal LM saved with save_pretrained
(config.json plus safetensors), next to reference.safetensors holding
input_ids, labels, logits, the loss (mean cross entropy over all tokens,
labels not shifted) and grad.<name> for every parameter, all computed in
float32 on the CPU. The compiler's test reads these without PyTorch.

Needs torch and transformers; run by hand, e.g.
    python test/e2e/make_hf_fixtures.py
Re-running gives the same bytes.
"""
import argparse
import hashlib
import math
import os
import shutil

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from transformers import (DeepseekV3Config, DeepseekV3ForCausalLM,
                          LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

BATCH, SEQ, VOCAB = 2, 8, 96
WEIGHT_SCALE = 0.1

LLAMA = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=64, rms_norm_eps=1e-5,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
             attention_bias=False, mlp_bias=False, tie_word_embeddings=False)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}

# name -> (seed, model class, config class, config kwargs, save options)
CASES = {
    "llama": (1, LlamaForCausalLM, LlamaConfig, LLAMA, {}),
    "llama-bias": (2, LlamaForCausalLM, LlamaConfig,
                   dict(LLAMA, attention_bias=True, mlp_bias=True), {}),
    "llama31": (3, LlamaForCausalLM, LlamaConfig,
                dict(LLAMA, hidden_size=64, rope_parameters=LLAMA3_ROPE), {}),
    "mistral": (4, MistralForCausalLM, MistralConfig,
                dict(hidden_size=32, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16,
                     intermediate_size=64, rms_norm_eps=1e-5,
                     sliding_window=4096, tie_word_embeddings=False), {}),
    "qwen2": (5, Qwen2ForCausalLM, Qwen2Config,
              dict(hidden_size=32, num_attention_heads=4,
                   num_key_value_heads=2, intermediate_size=64,
                   rms_norm_eps=1e-6, use_sliding_window=False,
                   tie_word_embeddings=False), {}),
    "qwen3": (6, Qwen3ForCausalLM, Qwen3Config,
              dict(hidden_size=32, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, intermediate_size=64,
                   rms_norm_eps=1e-6, tie_word_embeddings=True), {}),
    "llama-tied-sharded": (7, LlamaForCausalLM, LlamaConfig,
                           dict(LLAMA, tie_word_embeddings=True),
                           {"max_shard_size": "30KB"}),
    "llama-bf16": (8, LlamaForCausalLM, LlamaConfig, LLAMA,
                   {"dtype": torch.bfloat16}),
    # MLA with a low-rank query and interleaved RoPE, one dense layer, then
    # an MoE layer: 8 experts in 2 groups, 1 group kept, top-2, a shared
    # expert. The router's correction bias is random (and positive, so the
    # biased scores stay positive), so that it changes the selection.
    "deepseek-v3": (9, DeepseekV3ForCausalLM, DeepseekV3Config,
                    dict(hidden_size=32, intermediate_size=64,
                         moe_intermediate_size=16, num_attention_heads=4,
                         num_key_value_heads=4, n_shared_experts=1,
                         n_routed_experts=8, num_experts_per_tok=2,
                         n_group=2, topk_group=1, first_k_dense_replace=1,
                         q_lora_rank=24, kv_lora_rank=16,
                         qk_nope_head_dim=8, qk_rope_head_dim=4,
                         v_head_dim=8, rope_interleave=True,
                         routed_scaling_factor=2.5, norm_topk_prob=True,
                         rms_norm_eps=1e-6, max_position_embeddings=64,
                         tie_word_embeddings=False,
                         rope_parameters={"rope_type": "default",
                                          "rope_theta": 10000.0}), {}),
    # YaRN as DeepSeek-V3 releases it, scaled down: 4 rotary frequencies of
    # which the correction range blends some, an mscale that scales cos and
    # sin, and mscale_all_dim that scales the softmax.
    "deepseek-v3-yarn": (10, DeepseekV3ForCausalLM, DeepseekV3Config,
                         dict(hidden_size=32, intermediate_size=64,
                              moe_intermediate_size=16,
                              num_attention_heads=4, num_key_value_heads=4,
                              n_shared_experts=1, n_routed_experts=8,
                              num_experts_per_tok=2, n_group=2, topk_group=1,
                              first_k_dense_replace=1, q_lora_rank=24,
                              kv_lora_rank=16, qk_nope_head_dim=8,
                              qk_rope_head_dim=8, v_head_dim=8,
                              rope_interleave=True,
                              routed_scaling_factor=2.5, norm_topk_prob=True,
                              rms_norm_eps=1e-6, max_position_embeddings=64,
                              tie_word_embeddings=False,
                              rope_parameters={
                                  "rope_type": "yarn", "rope_theta": 10000.0,
                                  "factor": 40.0,
                                  "original_max_position_embeddings": 16,
                                  "beta_fast": 32, "beta_slow": 1,
                                  "mscale": 0.9, "mscale_all_dim": 1.0}),
                         {}),
}


def llama3_branches(model):
    """Count the inverse frequencies left alone, divided and smoothed."""
    rope = model.config.rope_parameters
    rotary = model.model.rotary_emb
    base = rope["rope_theta"]
    dim = model.config.head_dim
    inv = 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)
    wavelen = 2 * math.pi / inv
    old = rope["original_max_position_embeddings"]
    low, high = old / rope["low_freq_factor"], old / rope["high_freq_factor"]
    kept = int((wavelen < high).sum())
    divided = int((wavelen > low).sum())
    smoothed = len(inv) - kept - divided
    assert min(kept, divided, smoothed) > 0, "a llama3 branch is unused"
    # The model's own table must agree with the three branches.
    smooth = (old / wavelen - rope["low_freq_factor"]) / (
        rope["high_freq_factor"] - rope["low_freq_factor"])
    want = torch.where(wavelen < high, inv, inv / rope["factor"])
    middle = (wavelen >= high) & (wavelen <= low)
    want[middle] = ((1 - smooth) * inv / rope["factor"] + smooth * inv)[middle]
    assert torch.allclose(rotary.inv_freq, want)
    print(f"  llama3 inv_freq: {kept} unchanged, {smoothed} smoothed, "
          f"{divided} divided by factor (wavelengths {wavelen.tolist()})")


def randomize(model, gen):
    """Give every parameter a random value: norms near 1, the rest small."""
    norms = {name for name, mod in model.named_modules()
             if type(mod).__name__.endswith("RMSNorm")}
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = WEIGHT_SCALE * torch.randn(p.shape, generator=gen)
            is_norm = name.rsplit(".", 1)[0] in norms
            p.copy_(noise + 1.0 if is_norm else noise)


def checkpoint_grads(name, grad):
    """The gradient of a parameter under its checkpoint names: the fused
    expert weights of an MoE layer ([E, 2I, H] gate_up_proj, [E, H, I]
    down_proj) are experts.{e}.gate_proj/up_proj/down_proj.weight there."""
    prefix, _, last = name.rpartition(".")
    if not prefix.endswith("mlp.experts"):
        return [(name, grad.clone())]
    out = []
    for e in range(grad.shape[0]):
        if last == "gate_up_proj":
            gate, up = grad[e].chunk(2, dim=0)
            out += [(f"{prefix}.{e}.gate_proj.weight", gate.clone()),
                    (f"{prefix}.{e}.up_proj.weight", up.clone())]
        else:
            out.append((f"{prefix}.{e}.{last}.weight", grad[e].clone()))
    return out


def make_case(out, name, seed, model_cls, config_cls, kwargs, save):
    print(name)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    config = config_cls(vocab_size=VOCAB, num_hidden_layers=2,
                        attn_implementation="eager", **kwargs)
    model = model_cls(config)
    randomize(model, gen)
    dtype = save.get("dtype")
    if dtype is not None:
        # Keep exactly the values the low-precision checkpoint will hold.
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(dtype).float())
    for bname, buf in model.named_buffers():
        if bname.endswith("e_score_correction_bias"):
            with torch.no_grad():
                buf.copy_(0.05 * torch.rand(buf.shape, generator=gen))
    model.eval()
    if config.rope_parameters["rope_type"] == "llama3":
        llama3_branches(model)

    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    logits = model(ids).logits
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
    loss.backward()
    ref = {"input_ids": ids.int(), "labels": labels.int(),
           "logits": logits.detach(), "loss": loss.detach()}
    for pname, p in model.named_parameters():
        for key, grad in checkpoint_grads(pname, p.grad):
            ref["grad." + key] = grad
    print(f"  loss {loss.item():.4f}, |logits| max {logits.abs().max():.3f}")

    path = os.path.join(out, name)
    shutil.rmtree(path, ignore_errors=True)
    if dtype is not None:
        model.to(dtype)
    model.save_pretrained(path, max_shard_size=save.get("max_shard_size",
                                                        "50GB"))
    # Generation settings are not part of the model; leave them out.
    os.remove(os.path.join(path, "generation_config.json"))
    save_file(ref, os.path.join(path, "reference.safetensors"))


def main():
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "hf-fixtures")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=default_out,
                        help="fixtures directory (default: %(default)s)")
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="make only this case (repeatable; default: all)")
    args = parser.parse_args()
    # One thread keeps the float32 reductions in a fixed order.
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    os.makedirs(args.out, exist_ok=True)
    for name, case in CASES.items():
        if not args.case or name in args.case:
            make_case(args.out, name, *case)

    total = 0
    for root, _, files in sorted(os.walk(args.out)):
        for f in sorted(files):
            p = os.path.join(root, f)
            data = open(p, "rb").read()
            total += len(data)
            print(f"{hashlib.sha256(data).hexdigest()[:16]} {len(data):8d} "
                  f"{os.path.relpath(p, args.out)}")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
