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

import re
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

from ..cdecl import comment_text

TAB = "    "  # one level of indentation in the C npukit writes
_LITERAL = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')  # C string, char literals


def wrap(s: str, width: int = 88) -> str:
    """``s`` broken into lines of at most ``width`` characters (its own line breaks kept)."""
    return "\n".join(x for line in s.splitlines()
                     for x in textwrap.wrap(line, max(width, 40), break_on_hyphens=False) or [""])


def block_comment(text: str, width: int = 92) -> str:
    """``/* text */`` wrapped to ``width``, later lines aligned under the first.

    >>> print(block_comment("Act lookup of the table: index = p, saturated to the table, "
    ...                     "widened to int32.", 44))
    /* Act lookup of the table: index = p,
       saturated to the table, widened to int32. */
    """
    lines = wrap(comment_text(text), width - 3).splitlines()
    return "\n".join(("/* " if k == 0 else "   ") + x for k, x in enumerate(lines)) + " */"


def break_call(line: str, width: int = 100) -> list[str]:
    """``line`` as is when its code fits ``width``, else broken after the commas between the
    arguments of its first call, each continuation aligned after that call's ``(``; a
    trailing ``/* comment */`` stays on the last line. Comments and string and character
    literals are never broken here (their commas and parentheses are not the call's).

    >>> break_call("    f(aaaa, bbbb, cccc);  /* x */", 16)
    ['    f(aaaa,', '      bbbb,', '      cccc);  /* x */']
    >>> break_call('    f("a, (b", c);', 12)
    ['    f("a, (b",', '      c);']
    """
    # the line with each literal's inside blanked: where the code's own commas are
    blank = _LITERAL.sub(lambda m: m.group()[0] + "_" * (len(m.group()) - 2) + m.group()[0],
                         line)
    end = blank.find("  /*")
    end = len(line) if end < 0 else end
    code, comment = line[:end], line[end + 4:]
    if len(code) <= width or line.lstrip().startswith(("/*", "*")):
        return [line]
    start = blank.find("(", 0, end)
    if start < 0:
        return [line]
    cuts, depth = [], 0
    for k, ch in enumerate(blank[start:end], start):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 1:
            cuts.append(k + 1)
        if depth == 0:
            break
    if not cuts:
        return [line]
    pieces = [code[a:b].strip() for a, b in zip([0] + cuts, cuts + [len(code)])]
    pieces[0] = code[:cuts[0]]
    if not all(pieces[1:]):  # one argument per line already
        return [line]
    pad = " " * (start + 1)
    out = [pieces[0]]
    for piece in pieces[1:]:
        if len(out[-1]) + 1 + len(piece) <= width and len(out) > 1:
            out[-1] += " " + piece
        else:
            out.append(pad + piece)
    if comment:
        out[-1] += "  /*" + comment
    return out


class Writer:
    """Lines of C, each indented by ``tab`` per level of depth: npukit's one writer of C
    indentation. ``breaks`` breaks long calls (``break_call``); the GAP-style files keep
    the AutoTiler's tabs and long lines (``Writer(tab="\\t", breaks=False)``)."""

    def __init__(self, indent: int = 0, tab: str = TAB, breaks: bool = True):
        self.lines: list[str] = []
        self.depth = indent
        self.tab = tab
        self.breaks = breaks

    def line(self, s: str = "") -> None:
        """One line of code (long calls are broken after their arguments' commas)."""
        if not s:
            self.lines.append("")
            return
        code = self.tab * self.depth + s
        self.lines.extend(break_call(code) if self.breaks else [code])

    @contextmanager
    def indented(self, levels: int = 1) -> Iterator[None]:
        """The lines written inside, ``levels`` deeper."""
        self.depth += levels
        yield
        self.depth -= levels

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
        with self.indented():
            yield
        self.line("}")

    def extend(self, other: Writer) -> None:
        self.lines.extend(other.lines)

    def text(self) -> str:
        return "\n".join(self.lines)
