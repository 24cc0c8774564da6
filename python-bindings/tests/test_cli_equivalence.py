"""The package does what the command-line tools do, bit for bit: the same
IR from megc.gen as `megc gen`, the same artifact from megc.compile as
`megc`, and the same outputs, parameters and training state from a Session
as from `megc-run`."""

import inspect
import typing

import numpy as np
import pytest

import megc
from conftest import LLAMA
from helpers import assert_bitwise


def flags(settings):
    return [f"--{key.replace('_', '-')}={value}"
            for key, value in settings.items()]


@pytest.mark.parametrize("preset, settings", [
    ("llama", dict(LLAMA, train=True, lr=3e-3)),
    ("llama", dict(layers=1, dtype="bf16", rotary_interleaved=True,
                   rotary_percent=0.5, train=True, betas=(0.8, 0.95),
                   precision={"exp_avg": "bf16"}, frozen="embed")),
    ("llama", dict(layers=1, batch=8, train=True, mesh="dp_outer=2,dp_shard=2",
                   fsdp="optim_grads_params", outer_fsdp="optim",
                   bucket_mb=2)),
    ("llama", dict(layers=1, batch=4, train=True, lr_schedule="wsd",
                   warmup_steps=2, decay_steps=10, wsd_decay_steps=4,
                   wsd_style="cosine", min_lr=1e-4, clip_grad=1.0,
                   micro_batches=2)),
    ("llama", dict(layers=1, batch=4, train=True, mesh="dp_shard=2,tp=2",
                   sequence_parallel=True, clip_grad=1.0)),
    ("llama", dict(layers=1, ignore_index="none")),
    ("llama", dict(layers=1, ignore_index=-1)),
    ("deepseek", dict(layers=2, experts=4, top_k=2, expert_groups=2,
                      top_groups=1, dense_layers=1, q_lora_rank=16,
                      routed_scaling=1.5, moe_capacity_factor=1.25,
                      moe_drop_policy="position", moe_aux_loss_coeff=0.01,
                      train=True, batch=4, mesh="dp_shard=2",
                      fsdp="optim_grads_params")),
    ("deepseek", dict(layers=2, experts=4, top_k=2, expert_groups=2,
                      top_groups=1, train=True, batch=4,
                      mesh="dp_shard=2,ep=2", fsdp="optim_grads",
                      moe_bias_update_rate=1e-3)),
    ("mmdit", dict(layers=1, hidden=32, heads=2, text_seq=4)),
    ("flux", dict(layers=1, hidden=32, heads=2, rope_theta=500.0)),
])
def test_gen_matches_cli(tools, preset, settings):
    cli = dict(settings)
    args = []
    if cli.pop("train", False):
        args.append("--train")
    if cli.pop("rotary_interleaved", False):
        args.append("--rotary-interleaved")
    if cli.pop("sequence_parallel", False):
        args.append("--sequence-parallel")
    if "betas" in cli:
        cli["betas"] = ",".join(map(str, cli["betas"]))
    if "precision" in cli:
        cli["precision"] = ",".join(f"{k}={v}"
                                    for k, v in cli["precision"].items())
    want = tools.run("megc", "gen", preset, *args, *flags(cli)).decode()
    assert getattr(megc.gen, preset)(**settings) == want


def test_compile_options_are_the_drivers_flags(tools):
    """megc.compile's keywords and megc's flags come from one declaration
    (CompileFlags.def): every keyword is a flag of `megc --help`, and the
    typed signatures of megc.compile name exactly those keywords."""
    flags = megc.compile_flags()
    keywords = {keyword for keyword, _, _ in flags}
    assert {"target", "cuda_arch", "emit", "memory_budget"} <= keywords
    help_text = tools.run("megc", "--help").decode()
    for keyword, flag, kind in flags:
        assert f"  {flag}" in help_text, flag
        assert kind in ("String", "Bool", "Int", "List")
    overloads = typing.get_overloads(megc.compile)
    assert overloads
    for overload in overloads:
        names = set(inspect.signature(overload).parameters) - {"source"}
        assert names == keywords


@pytest.mark.parametrize("emit", ["artifact", "mlir", "megrt", "megrt-ir"])
def test_compile_matches_cli(tools, tmp_path, llama_ir, emit):
    model = tmp_path / "model.mlir"
    model.write_text(llama_ir)
    want = tools.run("megc", model, f"--emit={emit}", "--no-fuse-rope")
    got = megc.compile(model, emit=emit, no_fuse_rope=True)
    assert (got if emit == "artifact" else got.encode()) == want


@pytest.mark.parametrize("options, cli", [
    (dict(recompute="full"), ["--recompute=full"]),
    (dict(recompute="selective", memory_budget=10**9),
     ["--recompute=selective", "--memory-budget=1000000000"]),
    (dict(memory_budget="1GiB"), ["--memory-budget=1GiB"]),
    (dict(loss_chunks=4), ["--loss-chunks=4"]),
    (dict(cuda_graphs="layer", capture_collectives=True),
     ["--cuda-graphs=layer", "--capture-collectives"]),
])
def test_recompute_matches_cli(tools, tmp_path, llama_ir, options, cli):
    model = tmp_path / "model.mlir"
    model.write_text(llama_ir)
    want = tools.run("megc", model, "--emit=megrt", *cli)
    assert megc.compile(model, emit="megrt", **options).encode() == want


def test_forward_and_training_match_megc_run(tools, tmp_path, llama_artifact,
                                             batch):
    model = tmp_path / "model.megc"
    model.write_bytes(llama_artifact)
    for name, array in batch.items():
        np.save(tmp_path / f"{name}.npy", array)

    tools.run("megc-run", model, "--entry", "forward", "--params", "init:3",
              "--input", f"input_ids={tmp_path / 'input_ids.npy'}",
              "--output-dir", tmp_path / "forward")
    steps = 3
    tools.run("megc-run", model, "--entry", "train_step", "--params",
              "init:3", "--steps", steps,
              "--input", f"input_ids={tmp_path / 'input_ids.npy'}",
              "--input", f"labels={tmp_path / 'labels.npy'}",
              "--output-dir", tmp_path / "train",
              "--save-params", tmp_path / "cli_params.safetensors",
              "--save-state", tmp_path / "cli_state.safetensors")

    session = megc.Session(llama_artifact, device="cpu", params="init:3")
    logits = session.run("forward", {"input_ids": batch["input_ids"]})
    assert_bitwise(logits["logits"], np.load(tmp_path / "forward/logits.npy"))
    for _ in range(steps):
        out = session.run("train_step", batch)
    assert_bitwise(out["loss"], np.load(tmp_path / "train/loss.npy"))
    session.save_params(tmp_path / "params.safetensors")
    session.save_state(tmp_path / "state.safetensors")
    for name in ("params", "state"):
        assert ((tmp_path / f"{name}.safetensors").read_bytes() ==
                (tmp_path / f"cli_{name}.safetensors").read_bytes())


def test_bf16_outputs_match_megc_run(tools, tmp_path, batch):
    artifact = megc.compile(megc.gen.llama(**LLAMA, dtype="bf16"))
    model = tmp_path / "model.megc"
    model.write_bytes(artifact)
    np.save(tmp_path / "ids.npy", batch["input_ids"])
    tools.run("megc-run", model, "--entry", "forward", "--params", "init:1",
              "--input", f"input_ids={tmp_path / 'ids.npy'}",
              "--output-dir", tmp_path)
    session = megc.Session(model, params="init:1")
    logits = session.run("forward", {"input_ids": batch["input_ids"]})["logits"]
    assert logits.dtype == np.uint16
    assert_bitwise(logits, np.load(tmp_path / "logits.npy"))
    values = megc.bfloat16_to_float32(logits)
    assert np.isfinite(values).all()
    assert_bitwise(megc.float32_to_bfloat16(values), logits)
