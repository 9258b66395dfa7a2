"""``npukit demo``: one section per capability, each quick and self-checking."""

from __future__ import annotations

from .layout import Layout


def _heading(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 74 - len(title)))


def layouts() -> None:
    """Seed 000's tensor editing: vectorize, fuse and broadcast as pure layout values."""
    _heading("Layouts (seed 000 tensor editing)")
    x = Layout((2, 5, 7), "int8")
    steps = [
        ("x = Layout((2, 5, 7), 'int8')", x),
        ("x.vectorize(16)", x.vectorize(16)),
        ("x.vectorize(4)[1, 2, 1]  (3 valid lanes)", x.vectorize(4)[1, 2, 1]),
        ("Layout((1, 1, 1), 'int8').broadcast_as(x)", Layout((1, 1, 1), "int8").broadcast_as(x)),
        ("Layout((5, 7), 'int8').broadcast_as(x)", Layout((5, 7), "int8").broadcast_as(x)),
    ]
    y = Layout((5, 3, 3, 2), "int8")
    steps += [
        ("y = Layout((5, 3, 3, 2), 'int8')", y),
        ("y.vectorize(16)  (2 of 16 lanes used)", y.vectorize(16)),
        ("y.fuse(y.dense_dims()).vectorize(16)", y.fuse(y.dense_dims()).vectorize(16)),
        ("y[1:4, :, ::2].dense_dims()", y[1:4, :, ::2].dense_dims()),
    ]
    width = max(len(s) for s, _ in steps)
    for text, value in steps:
        print(f"  {text:<{width}}  -> {value!r}")


def demo() -> None:
    print("npukit demo: one sequential description, every transfer derived, simulated and run.")
    layouts()
