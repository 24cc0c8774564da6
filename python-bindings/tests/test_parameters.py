"""Parameters and training state to and from dicts of arrays and
safetensors files, and the Program a Session runs."""

import numpy as np
import pytest

import megc
from helpers import assert_bitwise


def test_program_describes_the_artifact(llama_artifact):
    program = megc.Program.from_bytes(llama_artifact)
    assert program.to_bytes() == llama_artifact
    assert [e.name for e in program.entries] == [
        "forward", "loss", "grad", "train_step"]
    forward = program.entries[0]
    assert [(t.name, t.dtype, t.shape) for t in forward.inputs] == [
        ("input_ids", "i32", (2, 16))]
    weights = [p for p in program.parameters if not p.state]
    assert weights[0].name == "model.embed_tokens.weight"
    assert weights[0].shape == (256, 64) and weights[0].trainable
    assert any(p.state for p in program.parameters)
    assert program.has_cpu_module
    assert "cpu" in megc.supported_devices()


def test_dict_round_trip(llama_artifact, batch):
    first = megc.Session(llama_artifact, params="init:5")
    params = first.parameters()
    program = megc.Program.from_bytes(llama_artifact)
    assert sorted(params) == sorted(p.name for p in program.parameters
                                    if not p.state)
    second = megc.Session(program, params=params)
    for name, value in second.parameters().items():
        assert_bitwise(value, params[name])
    inputs = {"input_ids": batch["input_ids"]}
    assert_bitwise(second.run("forward", inputs)["logits"],
                   first.run("forward", inputs)["logits"])


def test_state_round_trip_continues_training(llama_artifact, batch, tmp_path):
    trained = megc.Session(llama_artifact, params="init:2")
    trained.run("train_step", batch)
    state = trained.state()
    trained.save_state(tmp_path / "state.safetensors")
    from_dict = megc.Session(llama_artifact)
    from_dict.load_state(state)
    from_file = megc.Session(llama_artifact)
    from_file.load_state(tmp_path / "state.safetensors")
    want = trained.run("train_step", batch)["loss"]
    assert_bitwise(from_dict.run("train_step", batch)["loss"], want)
    assert_bitwise(from_file.run("train_step", batch)["loss"], want)


def test_state_saved_while_training_goes_on(llama_artifact, batch, tmp_path):
    trained = megc.Session(llama_artifact, params="init:2")
    trained.run("train_step", batch)
    trained.save_state(tmp_path / "sync.safetensors")
    trained.start_save_state(tmp_path / "async.safetensors")
    # The snapshot was taken: the next step does not reach the file.
    trained.run("train_step", batch)
    assert trained.finish_save() == str(tmp_path / "async.safetensors")
    assert trained.finish_save() == ""
    assert ((tmp_path / "sync.safetensors").read_bytes() ==
            (tmp_path / "async.safetensors").read_bytes())


def test_params_file_round_trip(llama_artifact, tmp_path):
    first = megc.Session(llama_artifact, params="init:7")
    first.save_params(tmp_path / "p.safetensors")
    second = megc.Session(llama_artifact, params=str(tmp_path / "p.safetensors"))
    for name, value in first.parameters().items():
        assert_bitwise(second.parameter(name), value)
    second.init_params(0)
    assert not np.array_equal(second.parameter("lm_head.weight"),
                              first.parameter("lm_head.weight"))


def test_bad_dicts_raise_and_change_nothing(llama_artifact):
    session = megc.Session(llama_artifact, params="init:1")
    params = session.parameters()
    before = session.parameter("model.norm.weight")

    missing = dict(params)
    del missing["model.norm.weight"]
    with pytest.raises(megc.Error, match="missing parameter 'model.norm.weight'"):
        session.load_params(missing)

    wrong = dict(params, **{"model.norm.weight": np.zeros(64)})
    with pytest.raises(megc.Error, match="element type float64"):
        session.load_params(wrong)

    shaped = dict(params, **{"model.norm.weight": np.zeros(65, np.float32)})
    with pytest.raises(megc.Error, match=r"is f32\[65\], expected f32\[64\]"):
        session.load_params(shaped)

    extra = dict(params, bogus=np.zeros(1, np.float32))
    with pytest.raises(megc.Error, match="'bogus' is not a parameter"):
        session.load_params(extra)
    assert_bitwise(session.parameter("model.norm.weight"), before)
    session.load_params(extra, allow_extra=True)


def test_set_parameter(llama_artifact):
    session = megc.Session(llama_artifact)
    ones = np.ones(64, np.float32)
    session.set_parameter("model.norm.weight", ones)
    assert_bitwise(session.parameter("model.norm.weight"), ones)
    with pytest.raises(megc.Error, match="unknown parameter 'nope'"):
        session.parameter("nope")


def test_dlpack_and_non_contiguous_inputs(llama_artifact, batch):
    class OnlyDLPack:
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    session = megc.Session(llama_artifact)
    ids = batch["input_ids"]
    want = session.run("forward", {"input_ids": ids})["logits"]
    assert_bitwise(
        session.run("forward", {"input_ids": OnlyDLPack(ids)})["logits"], want)
    strided = np.asfortranarray(ids)
    assert_bitwise(session.run("forward", {"input_ids": strided})["logits"],
                   want)


def test_trace_and_graph_options(llama_ir, batch, tmp_path):
    """A session writes a Chrome trace of its runs; graph regions replayed
    or run command by command give the same training."""
    import json

    artifact = megc.compile(llama_ir, target="cpu", cuda_graphs="layer")
    trace = tmp_path / "trace.json"
    graphs = megc.Session(artifact, params="init:2", trace=trace)
    plain = megc.Session(artifact, params="init:2", cuda_graphs=False)
    for _ in range(2):
        want = plain.run("train_step", batch)["loss"]
        assert_bitwise(graphs.run("train_step", batch)["loss"], want)
    graphs.write_trace()
    events = json.loads(trace.read_text())["traceEvents"]
    categories = {event["cat"] for event in events}
    assert {"entry", "graph", "gemm"} <= categories
    assert sum(event["cat"] == "entry" for event in events) == 2
    # Events dropped by clear_trace() are not in the file.
    graphs.clear_trace()
    graphs.run("train_step", batch)
    graphs.write_trace()
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(event["cat"] == "entry" for event in events) == 1
    with pytest.raises(megc.Error, match="clearTrace: tracing is off"):
        plain.clear_trace()


def test_thread_count_changes_no_result(llama_artifact, batch):
    """A CPU session runs on `threads` threads; the results are the same
    bits for any number, and a bad number is refused."""
    sessions = [megc.Session(llama_artifact, params="init:4", threads=n)
                for n in (1, 3)]
    for _ in range(2):
        losses = [s.run("train_step", batch)["loss"] for s in sessions]
        assert_bitwise(losses[1], losses[0])
    for name, value in sessions[1].parameters().items():
        assert_bitwise(value, sessions[0].parameters()[name])
    for bad in (0, -1, 5000, 2.5, True):
        with pytest.raises(ValueError, match="expected a number of threads"):
            megc.Session(llama_artifact, threads=bad)


def test_kernel_module_and_strategies(llama_ir):
    """emit="kernels" gives the kernel functions the back end compiles, and
    the program text each kernel's strategy and dispatches."""
    kernels = megc.compile(llama_ir, emit="kernels")
    assert "func.func @megk0_meg_embedding" in kernels
    program = megc.compile(llama_ir, emit="megrt")
    assert "  cpu strategy #meg.kernel_strategy<" in program
    assert "_d0_entry grid " in program


def test_llvm_ir_of_the_cpu_code(llama_ir):
    """emit="llvm" gives the CPU module's optimised LLVM IR, which megc
    --emit=llvm prints too; it needs the cpu target."""
    ir = megc.compile(llama_ir, emit="llvm")
    assert "define void @megk0_meg_embedding_d0_entry(" in ir
    assert "<4 x float>" in ir
    with pytest.raises(megc.Error, match="--emit=llvm prints the CPU code"):
        megc.compile(llama_ir, target="cuda", emit="llvm")
