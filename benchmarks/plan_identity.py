"""The plans of four models under three L2 budgets, written as text (``npukit run --plan``'s
memory plan, tiles and predicted cycles, then the sha256 of the host plan's C), to compare
the plans of two versions of npukit byte for byte: a change that speeds planning up must
leave every plan as it was.

Run: python benchmarks/plan_identity.py --save DIR     (before the change)
     python benchmarks/plan_identity.py --check DIR    (after: every plan compared)
     [--models resnet18,mobilenet_v2,densenet121,vit-tiny] [--l2 256,512,1024] (KiB)

The plan cache is off (``NPUKIT_PLAN_CACHE=0``): every plan is made.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

from first_result import BUDGETS, build
from onnx_plan import vit

os.environ["NPUKIT_PLAN_CACHE"] = "0"


def model(name: str):
    if name == "vit-tiny":
        return vit(hidden=192, heads=3)
    return build(name)


def plan_text(m, l2: int) -> str:
    """The plan of ``m`` under an L2 of ``l2`` bytes as text: the summary with cycles, then
    the sha256 of the host plan's C source."""
    import npukit.onnx

    budgets = {**BUDGETS, "l2_budget": l2, "l3_budget": 1 << 30, "l3_flash_budget": 1 << 30}
    g = npukit.onnx.load(m, **budgets)
    host = hashlib.sha256(g.host_graph().c_source().encode()).hexdigest()
    return f"{g.summary()}\nhost plan C: sha256 {host}\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--save", type=Path, help="write the plans into this folder")
    where.add_argument("--check", type=Path, help="compare the plans with this folder's")
    ap.add_argument("--models", default="resnet18,mobilenet_v2,densenet121,vit-tiny")
    ap.add_argument("--l2", default="256,512,1024", help="L2 budgets in KiB")
    a = ap.parse_args(argv)
    differ = 0
    for name in a.models.split(","):
        m = model(name)
        for kib in map(int, a.l2.split(",")):
            t = time.process_time()
            text = plan_text(m, kib * 1024)
            cpu = time.process_time() - t
            file = f"{name}-l2_{kib}k.txt"
            if a.save:
                a.save.mkdir(parents=True, exist_ok=True)
                (a.save / file).write_text(text)
                verdict = "saved"
            else:
                same = (a.check / file).read_text() == text
                differ += not same
                verdict = "same" if same else "DIFFERENT"
            print(f"{name:<14} L2 {kib:>5} KiB  {cpu:7.2f} s CPU  {verdict}", flush=True)
    if a.check:
        print("every plan the same" if not differ else f"{differ} plans differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
