"""What a user's text may become in generated C and in the files written next to it.

A ``TCArg("short int * __restrict__", "In")``, a basic kernel's name, a flash file's name or
a tensor's name ends up in generated files, so nothing is pasted as written: a name must be
a C identifier (``identifier``), a type must parse into a closed set of types and is written
back from what was parsed (``parse_ctype``), a file name must be a plain name that stays in
its folder (``file_name``), and any other text is escaped for where it goes: a C comment
(``comment_text``) or a C string literal (``c_string``). Every writer of C uses these.

Names: ASCII letters, digits and ``_``, not starting with a digit, not a C keyword (C99, C11,
C23, and ``asm``), not starting with ``__`` (the compiler's own names: ``__attribute__``).

Types: one of the scalar types of ``C_TYPES`` (the standard spellings, ``<stdint.h>``'s and
GAP's ``Word8`` ... ``Wordu32``), optionally qualified ``const`` and/or ``volatile``,
optionally one pointer level whose ``*`` may be followed by ``const``, ``volatile``,
``restrict`` or ``__restrict__``::

    [const] [volatile] BASE [const] [volatile] [* [const|volatile|restrict|__restrict__]...]

>>> str(parse_ctype("short int*  __restrict__"))
'short int *__restrict__'
>>> parse_ctype("const Word8 *").dtype, parse_ctype("const Word8 *").const
(dtype('int8'), True)
>>> parse_ctype("int; system")
Traceback (most recent call last):
    ...
npukit.errors.TilingError: C type 'int; system': ';' cannot appear in a C type ...

File names: ASCII letters, digits, ``_``, ``.`` and ``-``, starting with a letter, a digit or
``_`` (so no directory, no ``..``, no absolute path, no quote, space or control character).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .dtypes import dtype as _dtype
from .errors import NpukitError, TilingError

# The C types a C argument may have (pointers: may point to), and the dtype of one value.
C_TYPES = {
    "signed char": "int8", "char": "int8", "Word8": "int8", "int8_t": "int8",
    "unsigned char": "uint8", "Wordu8": "uint8", "uint8_t": "uint8",
    "short": "int16", "short int": "int16", "Word16": "int16", "int16_t": "int16",
    "unsigned short": "uint16", "unsigned short int": "uint16", "Wordu16": "uint16",
    "uint16_t": "uint16", "int": "int32", "Word32": "int32", "int32_t": "int32",
    "unsigned int": "uint32", "unsigned": "uint32", "Wordu32": "uint32", "uint32_t": "uint32",
    "int64_t": "int64", "long long int": "int64", "long long": "int64", "_Bool": "bool",
    "uint64_t": "uint64", "unsigned long long int": "uint64", "unsigned long long": "uint64",
    "float": "float32",
    "float _Complex": "complex64", "double": "float64",
    "npk_float16": "float16", "npk_bfloat16": "bfloat16",  # npukit's own (npukit.c.ctype)
}

C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic
    _Generic _Noreturn _Static_assert _Thread_local alignas alignof bool constexpr false
    nullptr static_assert thread_local true typeof typeof_unqual asm""".split())

_POINTEE_QUALIFIERS = ("const", "volatile")
_POINTER_QUALIFIERS = ("const", "volatile", "restrict", "__restrict__")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\*|\S")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def identifier(name: object, what: str, error: type[NpukitError] = TilingError) -> str:
    """``name`` when it may be written into C as a name; else ``error`` naming ``what``.

    >>> identifier("KerArg0", "argument")
    'KerArg0'
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise error(f"{what} {name!r} is not a C identifier (ASCII letters, digits and _, not "
                    f"starting with a digit)")
    if name in C_KEYWORDS or name.startswith("__"):
        why = "a C keyword" if name in C_KEYWORDS else "reserved: names starting with __ " \
                                                       "belong to the compiler"
        raise error(f"{what} {name!r} cannot be a C name: it is {why}")
    return name


def file_name(name: object, what: str, error: type[NpukitError] = TilingError) -> str:
    """``name`` when it is a plain file name (grammar in the module docstring), safe in a
    folder, a C string, an ``#include`` line and a Makefile; else ``error`` naming ``what``.

    >>> file_name("Mnist_L3_Flash_Const.dat", "flash file name")
    'Mnist_L3_Flash_Const.dat'
    >>> file_name("../x.dat", "flash file name")
    Traceback (most recent call last):
        ...
    npukit.errors.TilingError: flash file name '../x.dat': give a plain file name ...
    """
    if not isinstance(name, str) or not _FILE_NAME.fullmatch(name):
        raise error(f"{what} {name!r}: give a plain file name (ASCII letters, digits, _ . -, "
                    f"not starting with . or -; no directory, no quote, space or control "
                    f"character)")
    return name


def comment_text(s: str) -> str:
    """``s`` made safe inside ``/* */``: control characters (a line break, NUL, which the
    compiler drops) become spaces, ``*/`` and ``/*`` are broken apart.

    >>> comment_text("In */ system(0); /*")
    'In * / system(0); / *'
    """
    return _CONTROL.sub(" ", s).replace("*/", "* /").replace("/*", "/ *")


def c_string(text: str) -> str:
    """``text`` as a C string literal: printable ASCII as is (but ``\\``, ``"`` and ``?``,
    which could start a trigraph, escaped), every other byte of its UTF-8 in octal.

    >>> print(c_string('x.dat", &E); system("'))
    "x.dat\\042, &E); system(\\042"
    """
    out = []
    for b in text.encode():
        ch = chr(b)
        out.append(ch if 32 <= b < 127 and ch not in '\\"?' else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class CType:
    """A parsed C type: ``base`` (a key of ``C_TYPES``), the qualifiers of the value (or of
    the pointee, for a pointer), and for a pointer the qualifiers after its ``*``."""

    base: str
    qualifiers: tuple[str, ...] = ()
    pointer: bool = False
    pointer_qualifiers: tuple[str, ...] = ()

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of one value (pointers: of what they point to)."""
        return _dtype(C_TYPES[self.base])

    @property
    def const(self) -> bool:
        """True when the value (a pointer: its pointee) is ``const``."""
        return "const" in self.qualifiers

    def __str__(self) -> str:
        """The type as the AutoTiler's generated code spells it: ``short int *__restrict__``."""
        text = " ".join((*self.qualifiers, self.base))
        return f"{text} *" + " ".join(self.pointer_qualifiers) if self.pointer else text


def parse_ctype(text: object, what: str = "C type",
                error: type[NpukitError] = TilingError) -> CType:
    """``text`` parsed into a ``CType`` (grammar in the module docstring); ``error`` naming
    ``what`` and the offending part otherwise."""
    # A plan parses the same few type strings tens of thousands of times: each is parsed
    # once; a refusal is made again, to name ``what`` in the caller's error type.
    if isinstance(text, str):
        try:
            return _parsed(text)
        except NpukitError:
            pass
    return _parse(text, what, error)


@lru_cache(maxsize=1 << 10)
def _parsed(text: str) -> CType:
    return _parse(text, "C type", TilingError)


def _parse(text: object, what: str, error: type[NpukitError]) -> CType:
    if not isinstance(text, str):
        raise error(f"{what} {text!r}: a C type is a string such as 'short int *'")
    tokens = _TOKEN.findall(text)
    where = f"{what} {text!r}" if what == "C type" else f"{what}: C type {text!r}"
    bad = next((t for t in tokens if t != "*" and not _NAME.fullmatch(t)), None)
    if bad is not None:
        raise error(f"{where}: {bad!r} cannot appear in a C type (allowed: a type name, const, "
                    f"volatile, one *, restrict)")
    if tokens.count("*") > 1:
        raise error(f"{where}: one level of pointer at most")
    star = tokens.index("*") if "*" in tokens else len(tokens)
    before, after = tokens[:star], tokens[star + 1:]
    qualifiers = tuple(q for q in _POINTEE_QUALIFIERS if q in before)
    base = " ".join(t for t in before if t not in _POINTEE_QUALIFIERS)
    if base not in C_TYPES:
        raise error(f"{where}: unknown element type {base!r}; known: {sorted(C_TYPES)}")
    extra = [t for t in after if t not in _POINTER_QUALIFIERS]
    if extra:
        raise error(f"{where}: {extra[0]!r} after '*' (allowed: "
                    f"{', '.join(_POINTER_QUALIFIERS)})")
    pointer_qualifiers = tuple(dict.fromkeys(after))
    return CType(base, qualifiers, star < len(tokens), pointer_qualifiers)
