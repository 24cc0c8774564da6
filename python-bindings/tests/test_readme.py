"""The Python examples of the READMEs run as shown."""

import re

import pytest

from conftest import ROOT

READMES = [ROOT / "README.md", ROOT / "python-bindings" / "README.md"]


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_readme_examples_run(readme, tmp_path, monkeypatch):
    blocks = python_blocks(readme)
    assert blocks, f"{readme} has no Python example"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(readme), "exec"), {})
