"""megc.import_hf: the IR `megc import` writes, Hugging Face checkpoints
loaded and saved by a Session, and errors that name the config field. The
models and their transformers outputs are the fixtures of the end-to-end
tests (test/e2e/hf-fixtures)."""

import json
import struct

import numpy as np
import pytest

import megc
from conftest import ROOT

FIXTURES = ROOT / "test" / "e2e" / "hf-fixtures"


def read_safetensors(path):
    """name -> array for the F32 and I32 tensors of a file."""
    data = path.read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    kinds = {"F32": np.float32, "I32": np.int32}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[8 + size + begin:8 + size + end],
                                      kinds[info["dtype"]]).reshape(
                                          info["shape"])
    return tensors


def test_import_matches_cli(tools):
    source = FIXTURES / "qwen3"
    cli = tools.run("megc", "import", source, "--seq", 8, "--batch", 2,
                    "--train", "--lr", 0.01).decode()
    assert megc.import_hf(source, seq=8, batch=2, train=True, lr=0.01) == cli


def test_deepseek_import_matches_cli(tools):
    source = FIXTURES / "deepseek-v3"
    cli = tools.run("megc", "import", source, "--seq", 8, "--batch", 2,
                    "--moe-capacity-factor", 1.0, "--moe-drop-policy",
                    "position", "--moe-aux-loss-coeff", 0.01).decode()
    assert megc.import_hf(source, seq=8, batch=2, moe_capacity_factor=1.0,
                          moe_drop_policy="position",
                          moe_aux_loss_coeff=0.01) == cli


def test_session_runs_and_saves_hf_checkpoints(tmp_path):
    source = FIXTURES / "qwen3"
    reference = read_safetensors(source / "reference.safetensors")
    session = megc.Session(
        megc.compile(megc.import_hf(source, seq=8, batch=2)), device="cpu")
    session.load_params(source)
    logits = session.run("forward", {"input_ids": reference["input_ids"]})
    error = (np.linalg.norm(logits["logits"] - reference["logits"]) /
             np.linalg.norm(reference["logits"]))
    assert error < 1e-5

    session.save_params(tmp_path, max_shard_bytes=40_000)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert "lm_head.weight" not in index["weight_map"]
    assert len(set(index["weight_map"].values())) > 1
    config = json.loads((tmp_path / "config.json").read_text())
    assert config == json.loads((source / "config.json").read_text())
    again = megc.Session(session.program, device="cpu")
    again.load_params(tmp_path)
    for name, value in session.parameters().items():
        np.testing.assert_array_equal(again.parameter(name), value)


def test_unsupported_field_names_it(tmp_path):
    config = json.loads((FIXTURES / "llama" / "config.json").read_text())
    config["rope_parameters"]["rope_type"] = "dynamic"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(megc.Error, match="field 'rope_type' is 'dynamic'"):
        megc.import_hf(tmp_path, seq=8, batch=2)
    with pytest.raises(megc.Error, match="needs --seq and --batch"):
        megc.import_hf(FIXTURES / "llama", seq=None, batch=2)


def test_train_matches_megc_run(tools, tmp_path):
    """megc.train on a token file gives megc-run --data's losses, learning
    rates and final weights, bit for bit."""
    reference = ROOT / "test" / "e2e" / "training-reference"
    ir = megc.import_hf(FIXTURES / "llama", seq=8, batch=2, train=True,
                        lr=0.01, lr_schedule="cosine", warmup_steps=2,
                        decay_steps=6, clip_grad=1.0)
    artifact = megc.compile(ir)
    (tmp_path / "model.megc").write_bytes(artifact)
    session = megc.Session(artifact, params=FIXTURES / "llama")
    log = megc.train(session, reference / "tokens.bin", steps=4, data_seed=3,
                     eval_data=reference / "tokens.bin", eval_every=2)
    tools.run("megc-run", tmp_path / "model.megc", "--entry", "train_step",
              "--params", FIXTURES / "llama", "--data",
              reference / "tokens.bin", "--data-seed", 3, "--steps", 4,
              "--metrics", tmp_path / "metrics.jsonl", "--save-params",
              tmp_path / "trained.safetensors")
    cli = [json.loads(line) for line in
           (tmp_path / "metrics.jsonl").read_text().splitlines()]
    for mine, theirs in zip(log, cli):
        for key in ("loss", "grad_norm", "lr"):
            assert np.float32(mine[key]) == np.float32(theirs[key]), key
    assert [r["position"] for r in log] == [2, 4, 6, 8]
    assert "eval_loss" in log[1] and "eval_loss" not in log[0]
    trained = megc.Session(artifact, params=tmp_path / "trained.safetensors")
    for name, value in trained.parameters().items():
        np.testing.assert_array_equal(session.parameter(name), value)
    with pytest.raises(megc.Error, match="too short for one window"):
        (tmp_path / "short.bin").write_bytes(b"\0\0" * 4)
        megc.train(session, tmp_path / "short.bin", steps=1)


def test_train_stops_on_a_nonfinite_loss_or_skips_it(tmp_path):
    """A NaN weight makes the loss NaN: train_step skips its update (the
    state stays as it was, step count included), megc.train raises naming
    the step, and with skip_nonfinite goes on, each such step's nonfinite
    nonzero."""
    reference = ROOT / "test" / "e2e" / "training-reference"
    ir = megc.import_hf(FIXTURES / "llama", seq=8, batch=2, train=True,
                        clip_grad=1.0)
    session = megc.Session(megc.compile(ir), params=FIXTURES / "llama")
    weight = session.parameter("model.norm.weight")
    weight[3] = np.nan
    session.set_parameter("model.norm.weight", weight)
    before = session.state()
    with pytest.raises(megc.Error, match="non-finite loss .or gradient norm. "
                       "at step 1 of entry 'train_step' .loss nan, grad_norm "
                       "nan.; its update was skipped"):
        megc.train(session, reference / "tokens.bin", steps=2)
    log = megc.train(session, reference / "tokens.bin", steps=2,
                     skip_nonfinite=True)
    # Both the loss and the norm are NaN, on the one rank.
    assert [record["nonfinite"] for record in log] == [2.0, 2.0]
    for name, value in session.state().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
