"""The MNIST graph of mnist.py under a shrinking L2 budget, as the GAP AutoTiler document's
"AT Graph Tensors Allocation" describes it: with less L2 the constants stop being promoted
to the static L2 area, largest first; what is left in flash is fetched whole into the
dynamic L2 area before its layer when there is room, else streamed through L2 by its layer.
The plan, the cycles per layer and the L3 traffic change; the results do not. Below the
smallest plan, the planner says which layer misses how many bytes.

Run: python examples/graph/mnist_l2_budget.py
"""

import runpy
import tempfile
from pathlib import Path

import numpy as np

from npukit import CapacityError
from npukit.tiler import *

mnist = runpy.run_path(str(Path(__file__).with_name("mnist.py")))
BUDGETS = (300 * 1024, 64 * 1024, 40000, 34000, 24000)


def where(g, name):
    """How a constant reaches its layer: promoted, fetched or streamed."""
    t = g.tensors[name]
    if t.memory == "L2":
        return f"L2@{t.offset}"
    if any(f.tensor == name for f in g.fetches):
        return "flash, fetched"
    return "flash, streamed"


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mnist["write_tensors"](tmp, mnist["weights"]())
        x = mnist["digits"](1)[0]
        print(f"{'L2 budget':>10}{'static':>8}{'dynamic':>9}  {'Step2Weights':<17}"
              f"{'Step3Weights':<17}{'cycles per layer':<36}{'flash B/run':>11}")
        graphs = []
        for l2 in BUDGETS:
            m = mnist["MnistModel"](48000, l2, 8 * 1024 * 1024, 20 * 1024 * 1024, const_dir=tmp)
            m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
            try:
                g = m.graph("MnistCNN")
            except CapacityError as e:
                print(f"{l2:>10}  refused: {e}")
                break
            r = g.report()  # the cycle model of a run: it does not depend on the data
            cycles = " ".join(f"{c:>8}" for c in r.layers.values())
            print(f"{l2:>10}{g.memory['L2'].static:>8}{g.memory['L2'].dynamic:>9}  "
                  f"{where(g, 'Step2Weights'):<17}{where(g, 'Step3Weights'):<17}{cycles:<36}"
                  f"{r.bytes_moved.get('L3_FLASH', 0):>11}")
            assert g.memory["L2"].total <= l2
            graphs.append(g)
        full, small = graphs[0], graphs[-1]
        assert full.memory["L2"].static == 124692 and small.memory["L2"].static < 2000
        assert small.tensors["Step2Weights"].memory == "L3_FLASH"
        assert "Step2Weights" in small.layers[1].streamed
        assert small.report().cycles > full.report().cycles
        print()
        print(small)
        want, sim, c = (np.zeros(10, np.int16) for _ in range(3))
        full.run("sim", Input0=x, Output0=want)
        small.run("sim", Input0=x, Output0=sim)
        small.run("c", Input0=x, Output0=c)
        assert want.tobytes() == sim.tobytes() == c.tobytes()
        print(f"\nOutput0 with {BUDGETS[len(graphs) - 1]} B of L2 (simulator and C) = "
              f"Output0 with {BUDGETS[0]} B: {want.tolist()}")
