"""The Python examples of the READMEs run as shown and do what they say:
the session trains (the loss of an untrained language model is near
log(vocab): its logits are small, so the one target's logit moves it by
tenths; and a second step on the same batch lowers it), forward gives
the logits' shape, and save_params writes weights a new session loads."""

import math
import re

import numpy as np
import pytest

import megc
from conftest import ROOT

READMES = [ROOT / "README.md", ROOT / "python-bindings" / "README.md"]
# megc.gen.llama's default vocabulary, which the examples keep.
VOCAB = 256


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_readme_examples_run(readme, tmp_path, monkeypatch):
    blocks = python_blocks(readme)
    assert blocks, f"{readme} has no Python example"
    monkeypatch.chdir(tmp_path)
    names = {}
    for block in blocks:
        exec(compile(block, str(readme), "exec"), names)
    session, ids = names["session"], names["ids"]
    loss = names["loss"]
    assert np.shape(loss) == () and abs(float(loss) - math.log(VOCAB)) < 0.5, loss
    again = session.run("train_step", {"input_ids": ids, "labels": ids})["loss"]
    assert float(again) < float(loss), (again, loss)
    if "logits" in names:
        assert names["logits"].shape == (*ids.shape, VOCAB)
    if (tmp_path / "weights.safetensors").exists():
        loaded = megc.Session(names["artifact"],
                              params=tmp_path / "weights.safetensors")
        # Saved after the README's step, before the one above.
        assert loaded.parameters().keys() == session.parameters().keys()
        first = megc.Session(names["artifact"], params="init:3")
        first.run("train_step", {"input_ids": ids, "labels": ids})
        for name, value in loaded.parameters().items():
            np.testing.assert_array_equal(value, first.parameter(name),
                                          err_msg=name)
