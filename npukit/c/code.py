"""A tiny writer of indented C with the block comments generated code carries.

>>> w = Writer()
>>> w.banner("Load input1 -> IRAM idata", "data1 = s.iram.load(input1[i])")
>>> with w.block("for (int64_t i0 = 0; i0 < 4; i0++)"):
...     w.line("f(i0);")
>>> print(w.text())
/* ==== Load input1 -> IRAM idata ==== */
/*      data1 = s.iram.load(input1[i]) */
for (int64_t i0 = 0; i0 < 4; i0++) {
    f(i0);
}
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager


def wrap(s: str, width: int = 88) -> str:
    """``s`` broken into lines of at most ``width`` characters (its own line breaks kept)."""
    return "\n".join(x for line in s.splitlines()
                     for x in textwrap.wrap(line, max(width, 40), break_on_hyphens=False) or [""])


def comment_text(s: str) -> str:
    """``s`` made safe inside ``/* */``."""
    return s.replace("*/", "* /").replace("/*", "/ *")


class Writer:
    def __init__(self, indent: int = 0):
        self.lines: list[str] = []
        self.depth = indent

    def line(self, s: str = "") -> None:
        self.lines.append(("    " * self.depth + s) if s else "")

    def comment(self, s: str) -> None:
        """``/* s */``, wrapped to the page at this depth, later lines aligned under the
        first."""
        parts = [comment_text(x) for x in wrap(s, 94 - 4 * self.depth).splitlines()]
        for k, part in enumerate(parts):
            head = "/* " if k == 0 else "   "
            self.line(head + part + (" */" if k == len(parts) - 1 else ""))

    def banner(self, title: str, label: str = "") -> None:
        """The comment that opens a block: what it is for, then the kernel statement."""
        self.line(f"/* ==== {comment_text(title)} ==== */")
        if label:
            self.line(f"/*      {comment_text(label)} */")

    @contextmanager
    def block(self, head: str = "", attach: bool = False) -> Iterator[None]:
        """``head { ... }``; ``attach`` puts the head on the closing line of the block just
        written (``} else {``)."""
        if attach:
            self.lines[-1] += f" {head} {{"
        else:
            self.line(f"{head} {{" if head else "{")
        self.depth += 1
        yield
        self.depth -= 1
        self.line("}")

    def extend(self, other: Writer) -> None:
        self.lines.extend(other.lines)

    def text(self) -> str:
        return "\n".join(self.lines)
