"""Bad calls raise megc.Error with the whole message and leave the
interpreter running: compiler diagnostics, generator settings, LLVM's fatal
errors and the runtime's checks."""

import numpy as np
import pytest

import megc
from conftest import LLAMA


@pytest.fixture(scope="module")
def session(llama_artifact):
    return megc.Session(llama_artifact)


def test_wrong_shape(session):
    ids = np.zeros((2, 15), np.int32)
    with pytest.raises(megc.Error, match=r"input 'input_ids' has shape "
                       r"\[2,15\], expected \[2,16\]"):
        session.run("forward", {"input_ids": ids})


def test_wrong_dtype(session, batch):
    with pytest.raises(megc.Error, match="has dtype i64, expected i32"):
        session.run("forward",
                    {"input_ids": batch["input_ids"].astype(np.int64)})
    with pytest.raises(megc.Error, match="element type float64"):
        session.run("forward", {"input_ids": np.zeros((2, 16))})


def test_token_ids_outside_the_vocabulary(session, batch):
    vocab = LLAMA["vocab"]
    ids = batch["input_ids"].copy()
    ids[1, 3] = vocab
    with pytest.raises(megc.Error, match=rf"input 'input_ids' holds {vocab} "
                       rf"at \[1, 3\], outside \[0, {vocab}\) \(the rows of "
                       r"the embedding table\)"):
        session.run("forward", {"input_ids": ids})
    # -100 is the label the loss ignores; -3 is no class.
    labels = batch["labels"].copy()
    labels[0, 0] = -100
    session.run("loss", {"input_ids": batch["input_ids"], "labels": labels})
    labels[1, 2] = -3
    with pytest.raises(megc.Error, match=r"input 'labels' holds -3 at "
                       r"\[1, 2\], outside \[0, \d+\) and not the ignored "
                       r"label -100"):
        session.run("loss", {"input_ids": batch["input_ids"],
                             "labels": labels})


def test_unknown_entry(session):
    with pytest.raises(megc.Error, match="unknown entry 'nope'; the program "
                       "has entries: forward, loss, grad, train_step"):
        session.run("nope", {})


def test_missing_and_unexpected_inputs(session, batch):
    with pytest.raises(megc.Error, match=r"missing input 'input_ids' "
                       r"\(expected i32\[2,16\]\)"):
        session.run("forward", {})
    with pytest.raises(megc.Error, match="unexpected input 'labels'"):
        session.run("forward", batch)


def test_malformed_ir_carries_the_diagnostic():
    with pytest.raises(megc.Error) as error:
        megc.compile("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                     "  return %y : tensor<4xf32>\n}\n")
    message = str(error.value)
    assert "<string>:2:10: error: use of undeclared SSA value name" in message
    assert "  return %y : tensor<4xf32>\n         ^" in message


def test_verifier_error_names_the_op():
    # The IR parses; the verifier rejects the op, and the message names it
    # and its location.
    ir = ("func.func @f(%x: tensor<4x8xf32>, %w: tensor<7xf32>) -> "
          "tensor<4x8xf32> {\n"
          "  %y = meg.rms_norm %x, %w eps 1.0e-05 : tensor<4x8xf32>, "
          "tensor<7xf32>\n"
          "  return %y : tensor<4x8xf32>\n}\n")
    with pytest.raises(megc.Error, match=r"<string>:2:8: error: 'meg.rms_norm' "
                       r"op expects weight of shape \[8\] \(the last input "
                       r"dim\), got \[7\]"):
        megc.compile(ir)


def test_bad_compile_options(llama_ir):
    with pytest.raises(megc.Error, match="unknown --target 'tpu'; expected "
                       "cpu or cuda"):
        megc.compile(llama_ir, target="cpu,tpu")
    with pytest.raises(megc.Error, match="unsupported --cuda-arch 'sm_80'"):
        megc.compile(llama_ir, target="cuda", cuda_arch="sm_80")
    with pytest.raises(megc.Error, match="unknown --emit 'sass'"):
        megc.compile(llama_ir, emit="sass")
    with pytest.raises(megc.Error, match="needs the cpu target"):
        megc.compile(llama_ir, target="cuda", emit="llvm")
    with pytest.raises(megc.Error, match="unknown --recompute 'some'"):
        megc.compile(llama_ir, recompute="some")
    with pytest.raises(megc.Error, match="invalid --memory-budget '0'"):
        megc.compile(llama_ir, memory_budget=0)
    with pytest.raises(megc.Error, match="cannot be met"):
        megc.compile(llama_ir, memory_budget="1KB")
    with pytest.raises(TypeError, match="unexpected keyword argument "
                       "'cuda_graph'; its options are emit, target, "):
        megc.compile(llama_ir, cuda_graph="step")
    with pytest.raises(TypeError, match="no_fuse must be a bool"):
        megc.compile(llama_ir, no_fuse="yes")
    with pytest.raises(TypeError, match="loss_chunks must be an int"):
        megc.compile(llama_ir, loss_chunks=2.0)
    with pytest.raises(TypeError, match="target must be a str or a sequence"):
        megc.compile(llama_ir, target=[1])


def test_fatal_llvm_errors_raise(llama_ir):
    # An LLVM fatal error inside a compiler call would end the process
    # (LLVM's default handler exits): it raises, twice in a row, and the
    # lock and handler it held are released for the next compilation.
    for _ in range(2):
        with pytest.raises(megc.Error, match="^LLVM ERROR: a backend gave up$"):
            megc._megc._report_fatal_error("a backend gave up")
    assert isinstance(megc.compile(llama_ir), bytes)
    # NVPTX once aborted on a PTX version the architecture does not take:
    # whether or not it still does, the interpreter survives.
    try:
        megc.compile(llama_ir, target="cpu,cuda", cuda_arch="sm_100")
    except megc.Error as error:
        assert "LLVM ERROR" in str(error)


def test_generator_errors():
    with pytest.raises(megc.Error, match="--hidden 64 must be a multiple of "
                       "--heads 5"):
        megc.gen.llama(hidden=64, heads=5)
    with pytest.raises(megc.Error, match="--lr needs --train"):
        megc.gen.llama(lr=0.1)
    with pytest.raises(megc.Error) as error:
        megc.gen.llama(train=True, lr=-1.0)
    assert "expects lr > 0" in str(error.value)
    assert "invalid AdamW settings" in str(error.value)
    with pytest.raises(megc.Error, match="--precision: unknown key 'moments'"):
        megc.gen.llama(train=True, precision={"moments": "f32"})
    with pytest.raises(TypeError):
        megc.gen.mmdit(vocab=3)


def test_bad_artifacts_and_params(llama_artifact, tmp_path):
    with pytest.raises(megc.Error):
        megc.Program.from_bytes(b"not an artifact")
    with pytest.raises(megc.Error):
        megc.Session(tmp_path / "missing.megc")
    with pytest.raises(megc.Error):
        megc.Session(llama_artifact, params=tmp_path / "missing.safetensors")
    with pytest.raises(ValueError, match="init:SEED"):
        megc.Session(llama_artifact, params="init:x")
    with pytest.raises(megc.Error, match="tpu"):
        megc.Session(llama_artifact, device="tpu")
