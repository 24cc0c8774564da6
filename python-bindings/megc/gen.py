"""Model presets as meg IR, as `megc gen` writes them.

Each keyword is the flag of the same name (`kv_heads` is `--kv-heads`);
one left as None keeps the preset's default. `betas` is a pair and
`precision` a dict such as {"main_grads": "f32", "exp_avg": "bf16"};
`mesh` is `--mesh`'s text ("dp_outer=2,dp_shard=4", "tp=2"), and with it
`fsdp`, `outer_fsdp` and `bucket_mb` configure FSDP / HSDP and
`sequence_parallel` (llama, import_hf) sequence parallelism. Errors raise
megc.Error and name the flags as the driver spells them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import _megc

__all__ = ["deepseek", "flux", "import_hf", "llama", "mmdit"]


def _generate(preset: str, settings: dict[str, Any]) -> str:
    given = {key: value for key, value in settings.items() if value is not None}
    if "betas" in given:
        beta1, beta2 = given["betas"]
        given["betas"] = f"{float(beta1)!r},{float(beta2)!r}"
    if "ignore_index" in given:
        given["ignore_index"] = str(given["ignore_index"])
    if "precision" in given:
        policy: Mapping[str, str] = given["precision"]
        given["precision"] = list(policy.items())
    return _megc.generate(preset, given)


def llama(
    *,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    ffn: int | None = None,
    vocab: int | None = None,
    seq: int | None = None,
    batch: int | None = None,
    dtype: str | None = None,
    rotary_interleaved: bool | None = None,
    rotary_percent: float | None = None,
    rope_theta: float | None = None,
    norm_eps: float | None = None,
    ignore_index: int | str | None = None,
    train: bool = False,
    lr: float | None = None,
    weight_decay: float | None = None,
    betas: tuple[float, float] | None = None,
    adam_eps: float | None = None,
    clip_grad: float | None = None,
    micro_batches: int | None = None,
    lr_schedule: str | None = None,
    warmup_steps: int | None = None,
    decay_steps: int | None = None,
    min_lr: float | None = None,
    warmup_init_lr: float | None = None,
    wsd_decay_steps: int | None = None,
    wsd_style: str | None = None,
    precision: Mapping[str, str] | None = None,
    frozen: str | None = None,
    mesh: str | None = None,
    fsdp: str | None = None,
    outer_fsdp: str | None = None,
    bucket_mb: int | None = None,
    sequence_parallel: bool = False,
) -> str:
    """A Llama decoder with Hugging Face names: `forward(input_ids) ->
    logits` and `loss(input_ids, labels) -> loss`; with `train`, megc
    compiles `grad` and `train_step` too. `ignore_index` is the label the
    loss ignores (default -100; "none": every label is a class)."""
    return _generate("llama", locals())


def mmdit(
    *,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    seq: int | None = None,
    text_seq: int | None = None,
    batch: int | None = None,
    in_channels: int | None = None,
    context_dim: int | None = None,
    dtype: str | None = None,
    norm_eps: float | None = None,
    train: bool = False,
    lr: float | None = None,
    weight_decay: float | None = None,
    betas: tuple[float, float] | None = None,
    adam_eps: float | None = None,
    clip_grad: float | None = None,
    micro_batches: int | None = None,
    lr_schedule: str | None = None,
    warmup_steps: int | None = None,
    decay_steps: int | None = None,
    min_lr: float | None = None,
    warmup_init_lr: float | None = None,
    wsd_decay_steps: int | None = None,
    wsd_style: str | None = None,
    precision: Mapping[str, str] | None = None,
    frozen: str | None = None,
    mesh: str | None = None,
    fsdp: str | None = None,
    outer_fsdp: str | None = None,
    bucket_mb: int | None = None,
) -> str:
    """Joint text/image blocks (diffusers SD3Transformer2DModel names):
    `forward(latents, context, conditioning) -> prediction` and `loss(...,
    target) -> loss`."""
    return _generate("mmdit", locals())


def flux(
    *,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    seq: int | None = None,
    text_seq: int | None = None,
    batch: int | None = None,
    in_channels: int | None = None,
    context_dim: int | None = None,
    dtype: str | None = None,
    rotary_interleaved: bool | None = None,
    rotary_percent: float | None = None,
    rope_theta: float | None = None,
    norm_eps: float | None = None,
    train: bool = False,
    lr: float | None = None,
    weight_decay: float | None = None,
    betas: tuple[float, float] | None = None,
    adam_eps: float | None = None,
    clip_grad: float | None = None,
    micro_batches: int | None = None,
    lr_schedule: str | None = None,
    warmup_steps: int | None = None,
    decay_steps: int | None = None,
    min_lr: float | None = None,
    warmup_init_lr: float | None = None,
    wsd_decay_steps: int | None = None,
    wsd_style: str | None = None,
    precision: Mapping[str, str] | None = None,
    frozen: str | None = None,
    mesh: str | None = None,
    fsdp: str | None = None,
    outer_fsdp: str | None = None,
    bucket_mb: int | None = None,
) -> str:
    """Single-stream blocks with parallel attention and MLP and RoPE
    (diffusers FluxSingleTransformerBlock names), with mmdit's entries."""
    return _generate("flux", locals())


def deepseek(
    *,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    ffn: int | None = None,
    vocab: int | None = None,
    seq: int | None = None,
    batch: int | None = None,
    dtype: str | None = None,
    rope_theta: float | None = None,
    norm_eps: float | None = None,
    ignore_index: int | str | None = None,
    experts: int | None = None,
    top_k: int | None = None,
    expert_groups: int | None = None,
    top_groups: int | None = None,
    shared_experts: int | None = None,
    moe_ffn: int | None = None,
    dense_layers: int | None = None,
    q_lora_rank: int | None = None,
    kv_lora_rank: int | None = None,
    qk_nope_dim: int | None = None,
    qk_rope_dim: int | None = None,
    v_head_dim: int | None = None,
    routed_scaling: float | None = None,
    moe_capacity_factor: float | None = None,
    moe_drop_policy: str | None = None,
    moe_aux_loss_coeff: float | None = None,
    moe_bias_update_rate: float | None = None,
    train: bool = False,
    lr: float | None = None,
    weight_decay: float | None = None,
    betas: tuple[float, float] | None = None,
    adam_eps: float | None = None,
    clip_grad: float | None = None,
    micro_batches: int | None = None,
    precision: Mapping[str, str] | None = None,
    frozen: str | None = None,
    mesh: str | None = None,
    fsdp: str | None = None,
    outer_fsdp: str | None = None,
    bucket_mb: int | None = None,
) -> str:
    """DeepSeek-V3 with DeepseekV3ForCausalLM names: MLA, dense layers,
    then mixture-of-experts layers (group-limited routing, static expert
    capacity, shared experts); llama's entries, `forward` also returning
    `dropped_tokens` (and `moe_aux_loss` with `moe_aux_loss_coeff`); with
    `train` and `moe_bias_update_rate` each step moves the routers'
    correction biases towards even expert loads."""
    return _generate("deepseek", locals())


def import_hf(
    path: str | os.PathLike[str],
    *,
    seq: int,
    batch: int,
    dtype: str | None = None,
    ignore_index: int | str | None = None,
    train: bool = False,
    lr: float | None = None,
    weight_decay: float | None = None,
    betas: tuple[float, float] | None = None,
    adam_eps: float | None = None,
    clip_grad: float | None = None,
    micro_batches: int | None = None,
    lr_schedule: str | None = None,
    warmup_steps: int | None = None,
    decay_steps: int | None = None,
    min_lr: float | None = None,
    warmup_init_lr: float | None = None,
    wsd_decay_steps: int | None = None,
    wsd_style: str | None = None,
    precision: Mapping[str, str] | None = None,
    frozen: str | None = None,
    mesh: str | None = None,
    fsdp: str | None = None,
    outer_fsdp: str | None = None,
    bucket_mb: int | None = None,
    sequence_parallel: bool = False,
    moe_capacity_factor: float | None = None,
    moe_drop_policy: str | None = None,
    moe_aux_loss_coeff: float | None = None,
    moe_bias_update_rate: float | None = None,
) -> str:
    """A Hugging Face model as meg IR, as `megc import PATH` writes it: PATH
    is a config.json or a model directory of LlamaForCausalLM,
    MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM or
    DeepseekV3ForCausalLM (with the `moe_` settings); `seq` and
    `batch` set the entries' shapes and `dtype` replaces the config's. A
    config field megc does not implement raises megc.Error naming it."""
    settings = dict(locals())
    settings["hf_config"] = os.fspath(settings.pop("path"))
    return _generate("", settings)
