"""The Compass DSL's namespace ``S`` (``from npukit.dsl import script as S``): every name of
``npukit.dsl`` (``S.vload``, ``S.ptr``, ``S.i8x26``), under this module's name, so that a name
neither has is reported as Python reports a missing module attribute, as the Compass DSL's
``script`` module does.

>>> from npukit.dsl import script as S
>>> S.i8x26.lanes, S.vload is __import__("npukit.dsl").dsl.vload
(26, True)
"""

from __future__ import annotations

from .. import dsl as _dsl


def __getattr__(name: str):
    try:
        return getattr(_dsl, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
