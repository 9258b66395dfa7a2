"""Importing a ``Concat`` of many small inputs ([1, 4] float32 each) from ONNX and generating
its C: the time of each step per input count. Both grow linearly with the count (every
input is a tensor, a copy task and a C parameter of the one layer).

Run: python benchmarks/onnx_concat.py [N ...]   (default 100 200 400 800)
"""

from __future__ import annotations

import sys
import time


def concat_model(n: int):
    from onnx import TensorProto
    from onnx import helper as h

    names = [f"x{i}" for i in range(n)]
    g = h.make_graph([h.make_node("Concat", names, ["y"], axis=1)], "concat",
                     [h.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4]) for x in names],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4 * n])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def main(counts: list[int]) -> None:
    import npukit.onnx

    npukit.onnx.load(concat_model(4)).c_source()  # imports and caches out of the way
    print(f"{'inputs':>7}{'import s':>10}{'C s':>8}{'C chars':>10}{'ms per input':>14}")
    for n in counts:
        m = concat_model(n)
        t0 = time.perf_counter()
        g = npukit.onnx.load(m)
        t1 = time.perf_counter()
        src = g.c_source()
        t2 = time.perf_counter()
        print(f"{n:>7}{t1 - t0:>10.2f}{t2 - t1:>8.2f}{len(src):>10}"
              f"{(t2 - t0) / n * 1e3:>14.2f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100, 200, 400, 800])
