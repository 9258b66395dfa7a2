"""The README's example is code a newcomer will paste: it must run and its asserts hold."""

import re
from pathlib import Path


def test_readme_example_runs():
    text = (Path(__file__).parent.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks and "nk.build" in blocks[0] and "assert" in blocks[0]
    exec(compile(blocks[0], "README.md", "exec"), {})


def test_readme_commands_match_ci():
    text = (Path(__file__).parent.parent / "README.md").read_text()
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    command = 'pip install -e ".[test]" && pytest -q -n auto --dist loadfile\n'
    assert command in text and command in ci
    # The main command installs what every section of the demo needs, and matplotlib for
    # save_png and --plot (the plot extra).
    assert 'pip install -e ".[onnx,plot]" && npukit demo' in text
