"""docs/tpp.md: every python block runs as written (in order, one namespace), and the
printed optimizer decisions it shows are what the optimizer prints."""

import re
from pathlib import Path

DOC = Path(__file__).parent.parent / "docs" / "tpp.md"


def test_docs_blocks_run_and_show_real_output(capsys):
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 6
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    shown = re.search(r"prints\n\n```text\n(.*?)```", text, re.S).group(1).strip()
    assert shown == str(namespace["fast"]).strip()
