"""``Lut``: the values of a lookup table and their bank-interleaved memory images (the AIE API,
``aie::lut``).

A table holds ``offsets`` (the looked-up values) and, for linear approximation, ``slopes``.
Its memory image for N parallel accesses is:

- ``parallel=1``: the values stored linearly;
- ``parallel=2``: two copies interleaved at bank-width granularity: the first bank-width of
  values, the same values again, the next bank-width, again, and so on;
- ``parallel=4``: two distinct images of the ``parallel=2`` form, one per memory bank.

Storage rules: an 8-bit value of a direct table takes 16 bits (the AIE API: "8b value type
lookups require the data to be stored in the lookup tables as 16b values"); in a linear
table each entry is a (slope, offset) pair placed adjacent, the slope in the low half and the
offset in the high half, both stored at the width of the wider of the two (so a bfloat16
slope next to a float offset takes 32 bits with its low 16 bits zero, as the AIE API requires).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dtypes import is_float, ml_dtypes
from ..errors import LutError
from .reals import array

PARALLEL = (1, 2, 4)
MAX_BANK_BITS = 1 << 16     # far wider than any memory bank (the AIE API's example: 128)

# Widening used when a narrow value shares storage with a wider one; both are exact.
_WIDER_FLOAT = {4: np.dtype(np.float32), 8: np.dtype(np.float64)}


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


def _check_values(name: str, a: np.ndarray) -> None:
    if a.ndim != 1:
        raise LutError(f"{name} must be one-dimensional; got shape {a.shape}")
    if a.size == 0:
        raise LutError(f"{name} must hold at least 1 value; got an empty array")
    if not (a.dtype.kind in "iuc" or is_float(a.dtype)):
        raise LutError(f"{name} dtype {a.dtype} is not a number type")


@dataclass(frozen=True, eq=False)
class Lut:
    """An immutable lookup table: ``offsets`` and optional ``slopes``, as in ``aie::lut``.

    The arrays are copied and made read-only; their dtypes are the offset and slope types.

    >>> t = Lut(np.array([0, 10, 20, 30], np.int16))
    >>> t.size, t.offset_dtype.name, t.is_linear
    (4, 'int16', False)
    """

    offsets: np.ndarray
    slopes: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        offsets = array(self.offsets, "offsets")
        _check_values("offsets", offsets)
        object.__setattr__(self, "offsets", _frozen(offsets))
        if self.slopes is not None:
            slopes = array(self.slopes, "slopes")
            _check_values("slopes", slopes)
            if slopes.shape != offsets.shape:
                raise LutError(f"slopes must match offsets: slopes has {slopes.size} values, "
                               f"offsets {offsets.size}")
            object.__setattr__(self, "slopes", _frozen(slopes))

    @property
    def size(self) -> int:
        """Number of entries (not counting copies in a memory image)."""
        return int(self.offsets.size)

    def __len__(self) -> int:
        return self.size

    @property
    def offset_dtype(self) -> np.dtype:
        """The offset (value) type."""
        return self.offsets.dtype

    @property
    def slope_dtype(self) -> np.dtype | None:
        """The slope type, ``None`` for a direct table."""
        return None if self.slopes is None else self.slopes.dtype

    @property
    def is_linear(self) -> bool:
        """True when the table holds (slope, offset) pairs for ``linear_approx``."""
        return self.slopes is not None

    def __eq__(self, other: object) -> bool:
        # Bit-for-bit: a round trip must reproduce every value, NaN payloads included.
        if not isinstance(other, Lut):
            return NotImplemented
        return _key(self) == _key(other)

    def __hash__(self) -> int:
        return hash(_key(self))

    def __repr__(self) -> str:
        kind = f"{self.offset_dtype}" if self.slopes is None else \
            f"offset {self.offset_dtype}, slope {self.slope_dtype}"
        return f"Lut({self.size} entries, {kind})"

    def storage_dtype(self) -> np.dtype:
        """The dtype of one entry in memory (see the module docstring for the rules).

        >>> Lut(np.arange(4, dtype=np.int8)).storage_dtype()
        dtype('int16')
        """
        return entry_dtype(self.offset_dtype, self.slope_dtype)

    def layout(self, parallel: int = 1,
               bank_bits: int = 128) -> np.ndarray | tuple[np.ndarray, ...]:
        """The memory image for ``parallel`` (1, 2 or 4) accesses with banks of ``bank_bits``.

        Returns one array for 1 and 2, a tuple ``(ab, cd)`` of two arrays for 4. Entries of
        a linear table are records with fields ``slope`` and ``offset`` (slope first: low
        address, low half). A last partial bank-width block is padded with zero entries so
        each copy starts on a bank boundary.

        >>> t = Lut(np.arange(8, dtype=np.int32))
        >>> t.layout(2, bank_bits=128).tolist()      # 4 values per bank, each block twice
        [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7]
        """
        _check_parallel(parallel)
        storage = self.storage_dtype()
        entries = _to_storage(self, storage)
        if parallel == 1:
            return entries
        per_bank = _per_bank(storage, bank_bits)
        blocks = -(-self.size // per_bank)
        padded = np.zeros(blocks * per_bank, storage)
        padded[: self.size] = entries
        image = np.repeat(padded.reshape(blocks, 1, per_bank), 2, axis=1).reshape(-1)
        return image if parallel == 2 else (image, image.copy())

    @staticmethod
    def from_layout(image: np.ndarray | tuple[np.ndarray, np.ndarray], size: int, *,
                    offset_dtype, slope_dtype=None, parallel: int = 1,
                    bank_bits: int = 128) -> Lut:
        """Read a table back from its memory image (the inverse of ``layout``).

        ``size`` is the number of entries, not counting copies (``LUT_elems`` in the AIE API).
        Raises ``LutError`` when the image has the wrong dtype or length, when its copies
        disagree, or when a stored value does not fit the narrower type it stands for.

        >>> t = Lut(np.array([-3, 5, 7], np.int8))
        >>> Lut.from_layout(t.layout(4), 3, offset_dtype="int8", parallel=4) == t
        True
        """
        from ..dtypes import dtype as _dtype

        _check_parallel(parallel)
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise LutError(f"size must be a positive entry count; got {size!r}")
        odt = _dtype(offset_dtype)
        sdt = None if slope_dtype is None else _dtype(slope_dtype)
        storage = entry_dtype(odt, sdt)
        if parallel == 4:
            if not isinstance(image, (tuple, list)) or len(image) != 2:
                raise LutError("parallel=4 needs the image as a pair (ab, cd) of arrays, "
                               f"one per bank; got {type(image).__name__}")
            ab, cd = (array(i, "image") for i in image)
            _check_image("image[0]", ab, storage)
            _check_image("image[1]", cd, storage)
            if ab.shape != cd.shape or ab.tobytes() != cd.tobytes():
                raise LutError("parallel=4 needs two identical images; image[0] and image[1] "
                               "differ")
            image = ab
        else:
            image = array(image, "image")
            _check_image("image", image, storage)
        if parallel == 1:
            if image.size != size:
                raise LutError(f"image holds {image.size} entries, size is {size}; a "
                               "parallel=1 image stores each entry once")
            entries = image
        else:
            per_bank = _per_bank(storage, bank_bits)
            blocks = -(-size // per_bank)
            if image.size != 2 * blocks * per_bank:
                raise LutError(f"image holds {image.size} entries; {size} entries in two "
                               f"copies of {blocks} blocks of {per_bank} take "
                               f"{2 * blocks * per_bank}")
            pairs = image.reshape(blocks, 2, per_bank)
            differ = [b for b in range(blocks) if pairs[b, 0].tobytes() != pairs[b, 1].tobytes()]
            if differ:
                raise LutError(f"the two copies of bank block {differ[0]} differ; an image "
                               "for parallel access repeats every block")
            entries = pairs[:, 0, :].reshape(-1)[:size]
        if sdt is None:
            return Lut(_narrow("offsets", entries, odt))
        return Lut(_narrow("offsets", entries["offset"], odt),
                   _narrow("slopes", entries["slope"], sdt))


def _key(t: Lut) -> tuple:
    parts = [str(t.offset_dtype), t.offsets.tobytes()]
    if t.slopes is not None:
        parts += [str(t.slopes.dtype), t.slopes.tobytes()]
    return tuple(parts)


def _check_parallel(parallel: int) -> None:
    if isinstance(parallel, bool) or not isinstance(parallel, (int, np.integer)) \
            or parallel not in PARALLEL:
        raise LutError(f"parallel must be one of {PARALLEL} accesses; got {parallel!r}")


def _per_bank(storage: np.dtype, bank_bits: int) -> int:
    bits = storage.itemsize * 8
    if isinstance(bank_bits, bool) or not isinstance(bank_bits, (int, np.integer)) or \
            not 0 < bank_bits <= MAX_BANK_BITS or bank_bits % bits:
        raise LutError(f"bank_bits={bank_bits!r} must be a positive multiple of the "
                       f"{bits}-bit entry size, at most {MAX_BANK_BITS}")
    return bank_bits // bits


def _wide(dt: np.dtype, itemsize: int) -> np.dtype:
    """``dt`` widened exactly to ``itemsize`` bytes."""
    if dt.itemsize == itemsize:
        return dt
    if dt.kind in "iu":
        return np.dtype(f"{dt.kind}{itemsize}")
    if is_float(dt) and dt.itemsize >= 2 and itemsize in _WIDER_FLOAT:
        return _WIDER_FLOAT[itemsize]
    raise LutError(f"no storage rule widens {dt} to {itemsize * 8} bits")


def entry_dtype(odt: np.dtype, sdt: np.dtype | None) -> np.dtype:
    """How one entry of a table with offsets ``odt`` (and slopes ``sdt``) is stored: what
    ``Lut.storage_dtype`` returns, from the two types alone (to read a table image back)."""
    if sdt is None:
        if odt.itemsize != 1:
            return odt
        # 8-bit values take 16 bits: signed ones sign-extended, others zero-extended.
        return np.dtype(np.int16) if odt.kind == "i" else np.dtype(np.uint16)
    if (odt.kind in "iu") != (sdt.kind in "iu"):
        raise LutError(f"slope type {sdt} and offset type {odt} must both be integers or "
                       "both be floats to share an entry")
    width = max(odt.itemsize, sdt.itemsize)
    return np.dtype([("slope", _wide(sdt, width)), ("offset", _wide(odt, width))])


def _to_storage(t: Lut, storage: np.dtype) -> np.ndarray:
    if t.slopes is None:
        if t.offset_dtype.itemsize == 1 and t.offset_dtype.kind not in "iu":
            return t.offsets.view(np.uint8).astype(storage)
        return t.offsets.astype(storage)
    out = np.empty(t.size, storage)
    out["slope"] = t.slopes.astype(storage["slope"])
    out["offset"] = t.offsets.astype(storage["offset"])
    return out


def _check_image(name: str, image: np.ndarray, storage: np.dtype) -> None:
    if image.dtype != storage:
        raise LutError(f"{name} has dtype {image.dtype}; this table is stored as {storage}")
    if image.ndim != 1:
        raise LutError(f"{name} must be one-dimensional; got shape {image.shape}")


def _narrow(name: str, stored: np.ndarray, dt: np.dtype) -> np.ndarray:
    if stored.dtype == dt:
        return stored.copy()
    if dt.itemsize == 1 and dt.kind not in "iu":
        if np.any(stored > 0xFF):
            raise LutError(f"{name}: a 16-bit cell holding an 8-bit {dt} has high bits set")
        return stored.astype(np.uint8).view(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        values = stored.astype(dt)
    raw = np.ascontiguousarray(stored).view(np.uint8).reshape(stored.size, -1)
    back = np.ascontiguousarray(values.astype(stored.dtype)).view(np.uint8).reshape(stored.size, -1)
    differ = np.flatnonzero((raw != back).any(axis=1))
    if differ.size:
        bad = int(differ[0])
        rule = ("the low 16 mantissa bits of a float slope must be zero"
                if dt == ml_dtypes.bfloat16 else f"it must fit {dt}")
        raise LutError(f"{name}[{bad}] = {stored[bad]} cannot stand for a {dt} value: {rule}")
    return values
