"""megc: compile transformer training graphs and run them with megrt.

    import megc, numpy as np
    ir = megc.gen.llama(layers=2, hidden=64, train=True)
    artifact = megc.compile(ir, target="cpu")
    session = megc.Session(artifact, device="cpu", params="init:3")
    ids = np.zeros((2, 16), np.int32)
    logits = session.run("forward", {"input_ids": ids})["logits"]

Element types: f32 is float32, f16 float16, i32 int32 and i64 int64. NumPy
has no bfloat16, so bf16 tensors are uint16 arrays holding the bits (as
megc-run writes them); inputs may also be ml_dtypes' bfloat16 arrays or any
DLPack tensor. `bfloat16_to_float32` and `float32_to_bfloat16` convert.
Inputs are never converted between dtypes: an entry that takes i32 wants
int32 arrays.

Every failure of the compiler, the generator or the runtime raises
`megc.Error`, whose message is the whole report (the compiler's diagnostics
with their source lines, or the runtime's message naming the object, what
was expected and what was found).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, overload

import numpy as np

from . import _megc, gen
from .gen import import_hf
from ._megc import (
    EntrySpec,
    Error,
    ParameterSpec,
    Program,
    TensorSpec,
    supported_devices,
)

__all__ = [
    "EntrySpec",
    "Error",
    "ParameterSpec",
    "Program",
    "Session",
    "TensorSpec",
    "bfloat16_to_float32",
    "compile",
    "compile_flags",
    "float32_to_bfloat16",
    "gen",
    "import_hf",
    "supported_devices",
    "train",
]

PathLike = Union[str, "os.PathLike[str]"]
ArtifactLike = Union[Program, bytes, bytearray, memoryview, str, "os.PathLike[str]"]
Parameters = Union[PathLike, Mapping[str, Any]]


@overload
def compile(
    source: str | os.PathLike[str],
    *,
    target: str | Sequence[str] = ...,
    cuda_arch: str = ...,
    emit: Literal["artifact", "cuda-emulation"] = ...,
    no_fuse: bool = ...,
    no_fuse_rope: bool = ...,
    no_early_sends: bool = ...,
    cuda_graphs: Literal["none", "step", "layer"] = ...,
    share_io_buffers: bool = ...,
    capture_collectives: bool = ...,
    cpu: Literal["x86-64", "native"] = ...,
    recompute: Literal["none", "selective", "full"] = ...,
    memory_budget: str | int | None = ...,
    loss_chunks: int = ...,
) -> bytes: ...
@overload
def compile(
    source: str | os.PathLike[str],
    *,
    target: str | Sequence[str] = ...,
    cuda_arch: str = ...,
    emit: Literal["mlir", "megrt", "megrt-ir", "kernels", "llvm", "ptx",
                  "gpu"],
    no_fuse: bool = ...,
    no_fuse_rope: bool = ...,
    no_early_sends: bool = ...,
    cuda_graphs: Literal["none", "step", "layer"] = ...,
    share_io_buffers: bool = ...,
    capture_collectives: bool = ...,
    cpu: Literal["x86-64", "native"] = ...,
    recompute: Literal["none", "selective", "full"] = ...,
    memory_budget: str | int | None = ...,
    loss_chunks: int = ...,
) -> str: ...
def compile(source: str | os.PathLike[str], **options: Any) -> bytes | str:
    """Compiles a model as `megc model.mlir` does.

    `source` is meg IR text, or a path (`pathlib.Path`) to a file of it.
    The options are the driver's flags, declared once for both
    (include/megc/Compiler/CompileFlags.def; `megc.compile_flags()` lists
    them), each defaulting as the flag does: `target` ("cpu", "cuda",
    "cpu,cuda" or a list), `cuda_arch`, `emit` ("artifact" returns the
    artifact's bytes, "cuda-emulation" the GPU emulator's kernel library;
    "mlir", "megrt", "megrt-ir", "kernels", "llvm", "ptx" and "gpu" return
    text),
    `no_fuse`, `no_fuse_rope`, `cuda_graphs` ("none", "step", "layer"),
    `share_io_buffers`, `capture_collectives` (collectives inside the graph
    regions), `cpu` ("x86-64", or "native" for this host's
    instruction-set extensions), `recompute` ("none", "selective", "full")
    `memory_budget` (bytes per rank as an int, or a size such as "40GiB")
    and `loss_chunks`. An unknown option is a TypeError naming it. Raises
    megc.Error with the diagnostics; what a successful compilation reports
    (warnings) becomes a Python warning.
    """
    if isinstance(source, os.PathLike):
        name = os.fspath(source)
        with open(name, encoding="utf-8") as file:
            text = file.read()
    else:
        name, text = "<string>", source
    return _megc.compile(text, name, options)


def compile_flags() -> list[tuple[str, str, str]]:
    """Every option of megc.compile: (keyword, the driver's flag, kind)."""
    return _megc.compile_flags()


def _as_program(program: ArtifactLike) -> Program:
    if isinstance(program, Program):
        return program
    if isinstance(program, (bytes, bytearray, memoryview)):
        return Program.from_bytes(bytes(program))
    if isinstance(program, (str, os.PathLike)):
        return Program.load(os.fspath(program))
    raise TypeError(
        f"expected a megc.Program, artifact bytes or a path, got {type(program).__name__}"
    )


def _as_array(value: Any) -> Any:
    """What the native module takes: a C-contiguous NumPy array, or a DLPack
    tensor as it is (which may be bfloat16, unknown to NumPy)."""
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        return value
    # Not ascontiguousarray: it turns scalars into 1-d arrays.
    array = np.asarray(value, order="C")
    if array.dtype.name == "bfloat16":
        return array.view(np.uint16)
    return array


def _init_seed(params: str) -> int | None:
    """The seed of "init" or "init:SEED", or None for anything else."""
    if params == "init":
        return 0
    if not params.startswith("init:"):
        return None
    seed = params[len("init:") :]
    if not seed.isdigit():
        raise ValueError(
            f"params {params!r}: expected init:SEED with a non-negative integer seed"
        )
    return int(seed)


class Session:
    """Runs the entries of a program on a device and owns its parameters.

    `program` is a megc.Program, artifact bytes (what megc.compile returns)
    or the path of a .megc file. `device` is "cpu", or "cuda" / "cuda:N"
    where supported (see supported_devices()). `params` is "init" or
    "init:SEED" (the parameters' init specs with that seed), the path of a
    safetensors file, or a dict of arrays by parameter name; the file or
    dict must hold every model weight (see load_params). `cuda_graphs`
    False runs graph regions command by command; `trace` is the path of a
    Chrome trace-event file with device timings of every command, written
    by write_trace() and when the session is released. `threads` is the
    number of CPU threads the session runs on: a "cpu" device's kernels,
    and the initialisation of parameters on any device (None:
    MEGRT_NUM_THREADS, else every core); results are the same for any
    number.
    """

    def __init__(
        self,
        program: ArtifactLike,
        *,
        device: str = "cpu",
        params: Parameters = "init",
        allow_extra_params: bool = False,
        cuda_graphs: bool = True,
        trace: str | os.PathLike | None = None,
        threads: int | None = None,
    ) -> None:
        seed = _init_seed(params) if isinstance(params, str) else None
        if threads is not None and (
                isinstance(threads, bool) or not isinstance(threads, int)
                or not 1 <= threads <= 4096):
            raise ValueError(
                f"threads {threads!r}: expected a number of threads from 1 to 4096")
        # Weights that load_params sets next are not initialised first.
        self._native = _megc.Session(
            _as_program(program), device, seed or 0, cuda_graphs,
            os.fspath(trace) if trace is not None else "", threads or 0,
            seed is not None)
        if seed is None:
            self.load_params(params, allow_extra=allow_extra_params)

    @property
    def program(self) -> Program:
        return self._native.program

    def run(
        self, entry: str, inputs: Mapping[str, Any] | None = None
    ) -> dict[str, np.ndarray]:
        """Runs one entry. `inputs` must hold exactly the entry's inputs with
        their dtypes and shapes; returns every output by name."""
        arrays = {name: _as_array(value) for name, value in (inputs or {}).items()}
        return self._native.run(entry, arrays)

    @property
    def learning_rate(self) -> float | None:
        """The rate the last training step used, from the artifact's
        schedule; None before one or when the rate is compiled in."""
        return self._native.learning_rate()

    def write_trace(self) -> None:
        """Writes the trace file now (the session was created with `trace`)."""
        self._native.write_trace()

    def clear_trace(self) -> None:
        """Drops the trace's events so far (warm-up runs), so that the file
        holds only later runs."""
        self._native.clear_trace()

    def init_params(self, seed: int = 0) -> None:
        """Reinitialises every parameter (training state included) from its
        init spec; bit-identical to megc-run --params init:SEED."""
        self._native.init_parameters(seed)

    def load_params(self, source: Parameters, *, allow_extra: bool = False) -> None:
        """Sets every model weight from a safetensors file, a Hugging Face
        model directory (model.safetensors or a sharded index) or a dict of
        arrays; training state keeps its values. Weights in another float
        dtype are converted, a tied weight is found under its alias. A
        missing weight, a shape mismatch or (unless allow_extra) a name that
        is not a parameter raises megc.Error, and then nothing has
        changed."""
        if isinstance(source, Mapping):
            self._native.load_dict(
                {name: _as_array(value) for name, value in source.items()},
                allow_extra,
                False,
            )
        else:
            self._native.load_parameters(os.fspath(source), allow_extra)

    def save_params(
        self, path: PathLike, *, max_shard_bytes: int = 50_000_000_000
    ) -> None:
        """Writes the model weights as a safetensors file or, when `path` is
        a directory (or a string ending in '/'), in Hugging Face layout:
        model.safetensors or shards of at most `max_shard_bytes` with
        model.safetensors.index.json, and the model's config.json, which
        transformers' from_pretrained loads."""
        text = os.fspath(path)
        if os.path.isdir(text) and not text.endswith("/"):
            text += "/"
        self._native.save_parameters(text, max_shard_bytes)

    def load_state(self, source: Parameters) -> None:
        """Sets the full training state (weights, optimizer moments, step
        count) from a file written by save_state or a dict from state()."""
        if isinstance(source, Mapping):
            self._native.load_dict(
                {name: _as_array(value) for name, value in source.items()},
                False,
                True,
            )
        else:
            self._native.load_state(os.fspath(source))

    def save_state(self, path: PathLike) -> None:
        """Writes the full training state as safetensors."""
        self._native.save_state(os.fspath(path))

    def start_save_state(self, path: PathLike) -> None:
        """save_state while training goes on: returns once the state is
        copied to host memory, and a background thread writes the file
        (byte for byte what save_state writes). finish_save() waits for it;
        another save, save_state and closing the session finish it first.
        A directory (or a path ending in '/') takes a distributed
        checkpoint."""
        self._native.start_save_state(os.fspath(path))

    def finish_save(self) -> str:
        """Waits for the save start_save_state began and raises its error;
        returns its path, or "" when none was in flight."""
        return self._native.finish_save()

    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the model weights by name (what save_params writes)."""
        return self._native.parameters(False)

    def state(self) -> dict[str, np.ndarray]:
        """Copies of every parameter, training state included."""
        return self._native.parameters(True)

    def parameter(self, name: str) -> np.ndarray:
        """A copy of one parameter (a weight or training state)."""
        return self._native.parameter(name)

    def set_parameter(self, name: str, value: Any) -> None:
        """`value` must have the parameter's dtype and shape."""
        self._native.set_parameter(name, _as_array(value))


def train(
    session: Session,
    data: PathLike,
    *,
    steps: int,
    entry: str = "train_step",
    data_dtype: str | None = None,
    data_seed: int | None = None,
    position: int = 0,
    eval_data: PathLike | None = None,
    eval_every: int = 0,
    eval_batches: int = 1,
    skip_nonfinite: bool = False,
) -> list[dict[str, float]]:
    """Trains as `megc-run --entry ENTRY --data DATA --steps STEPS` does: each
    step runs `entry` on the next windows of the token data (a Megatron
    indexed dataset, PREFIX.bin with PREFIX.idx, whose index gives the
    dtype; or a raw file of `data_dtype` ids: uint16 by default, uint32 or
    int32; seq + 1 tokens a window, in order or shuffled per epoch by
    `data_seed`, from window `position`), and every `eval_every` steps (and
    after the last) the `loss` entry's mean over `eval_batches` batches of
    `eval_data`. Returns one dict per step: `step`, the scalar outputs (loss,
    grad_norm, nonfinite), `lr` when the artifact has a schedule,
    `eval_loss` on evaluation steps, and `position`, the data position after
    the step (to resume from). Every token is checked when the data is
    opened: bad files raise megc.Error naming the file and offset. A step whose loss or gradient norm is NaN or infinite (its
    update skipped inside train_step) raises megc.Error, as megc-run stops;
    with `skip_nonfinite` the loop goes on, as `--skip-nonfinite`, and such
    steps have a nonzero `nonfinite`."""
    if steps < 1:
        raise ValueError(f"steps {steps!r}: expected at least one step")
    stream = _megc.TokenDataset(session.program, entry, os.fspath(data),
                                data_dtype, data_seed)
    stream.position = position
    held_out = (_megc.TokenDataset(session.program, "loss",
                                   os.fspath(eval_data), data_dtype, None)
                if eval_data is not None else None)
    log = []
    for step in range(1, steps + 1):
        outputs = session.run(entry, stream.next())
        record: dict[str, float] = {"step": step}
        record.update({name: float(value) for name, value in outputs.items()
                       if np.ndim(value) == 0})
        checked = [record[name] for name in ("loss", "grad_norm")
                   if name in record]
        bad = (record["nonfinite"] != 0 if "nonfinite" in record
               else not all(np.isfinite(checked)))
        if bad and not (skip_nonfinite and "nonfinite" in record):
            values = ", ".join(f"{name} {record[name]}"
                               for name in ("loss", "grad_norm")
                               if name in record)
            raise Error(f"non-finite loss (or gradient norm) at step {step} "
                        f"of entry '{entry}' ({values})"
                        + ("; its update was skipped (skip_nonfinite=True "
                           "skips such steps and goes on)"
                           if "nonfinite" in record else ""))
        if session.learning_rate is not None:
            record["lr"] = session.learning_rate
        if held_out is not None and (
                (eval_every and step % eval_every == 0) or step == steps):
            losses = [float(session.run("loss", held_out.windows(
                k * held_out.rows))["loss"]) for k in range(eval_batches)]
            record["eval_loss"] = sum(losses) / len(losses)
        record["position"] = stream.position
        log.append(record)
    return log


def bfloat16_to_float32(bits: Any) -> np.ndarray:
    """The values of bf16 bits (uint16), exactly."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bfloat16(values: Any) -> np.ndarray:
    """bf16 bits (uint16) of float32 values, rounded to nearest even as the
    runtime rounds; NaN stays NaN."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)
