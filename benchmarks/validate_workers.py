"""Validating an int8 QDQ CNN (``benchmarks/onnx_cnn.py``'s, at SIZE x SIZE, quantized by ONNX
Runtime's ``quantize_static``) on 64 inputs with ``npukit.onnx.validate`` on 1 and on 2 local
worker processes: wall times (worker start, import and C cache lookup included; the C is
compiled once, by a warm-up run, before either is timed) and their ratio against the goal
of at most 0.65x. The result must be the same JSON both ways.

Run: python benchmarks/validate_workers.py [SIZE] [COUNT]
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from onnx_cnn import BUDGETS, cnn  # noqa: E402

GOAL = 0.65


def main(size: int = 128, count: int = 64) -> None:
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    import npukit.onnx

    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, (count, 1, 3, size, size)).astype(np.float32)

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.data = iter({"x": x} for x in xs[:4])

        def get_next(self):
            return next(self.data, None)

    logging.getLogger().setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        f, q, data = Path(tmp) / "f.onnx", Path(tmp) / "q.onnx", Path(tmp) / "in.npz"
        onnx.save(cnn(size), f)
        quantize_static(str(f), str(q), Calibration(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        np.savez(data, x=xs)
        budgets = {k: v for k, v in BUDGETS.items() if k != "l3_flash_budget"}
        npukit.onnx.validate(q, data, count=2, workers=1, **budgets)  # compile the C once
        times, jsons = {}, {}
        for n in (1, 2):
            t0 = time.perf_counter()
            v = npukit.onnx.validate(q, data, workers=n, **budgets)
            times[n] = time.perf_counter() - t0
            jsons[n] = v.to_json()
    ratio = times[2] / times[1]
    print(f"int8 QDQ CNN at {size}x{size}, {count} inputs, bit-exact "
          f"{100 * v.outputs[0].exact:.2f}% vs ONNX Runtime")
    print(f"| workers | wall time |\n| ---: | ---: |\n| 1 | {times[1]:.2f} s |\n"
          f"| 2 | {times[2]:.2f} s |")
    print(f"2 workers / 1 worker: {ratio:.2f}x (goal <= {GOAL}x: "
          f"{'met' if ratio <= GOAL else 'NOT met'}); same JSON: {jsons[1] == jsons[2]}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
