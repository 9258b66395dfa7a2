"""The graph memory planner (``npukit.tiler.planner``) on random chains of layers and budgets:
tensors live at the same time never overlap, every area fits its budget, refusals are
monotone in the budgets, a chain's dynamic area is the peak of its live bytes; and the
GAP AutoTiler document's MNIST numbers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npukit import CapacityError
from npukit.tiler import planner as P

MNIST = [P.Tensor("Input0", 1568, "arg"), P.Tensor("Step1Weights", 1600, "const"),
         P.Tensor("Step1Biases", 64, "const"), P.Tensor("Step2Weights", 102400, "const"),
         P.Tensor("Step2Biases", 128, "const"), P.Tensor("Step3Weights", 20480, "const"),
         P.Tensor("Step3Biases", 20, "const"), P.Tensor("Output0", 20, "arg"),
         P.Tensor("OutputStep2", 9216, "local"), P.Tensor("OutputStep3", 2048, "local"),
         P.Tensor("OutputStep4", 20, "local")]
MNIST_LAYERS = [
    P.Layer("c0", ("Input0", "Step1Weights", "Step1Biases"), ("OutputStep2",),
            {"Step1Weights": 100, "Step1Biases": 128, "Input0": 3136, "OutputStep2": 576}),
    P.Layer("c1", ("OutputStep2", "Step2Weights", "Step2Biases"), ("OutputStep3",),
            {"Step2Weights": 100, "Step2Biases": 256, "OutputStep2": 576, "OutputStep3": 64}),
    P.Layer("l", ("OutputStep3", "Step3Weights", "Step3Biases"), ("OutputStep4",),
            {"Step3Weights": 40960, "Step3Biases": 40, "OutputStep3": 4096,
             "OutputStep4": 40}),
    P.Layer("s", ("OutputStep4",), ("Output0",), {"OutputStep4": 40})]


def test_the_documents_mnist_numbers():
    p = P.plan("MnistCNN", MNIST, MNIST_LAYERS, P.Budgets(300 * 1024, 8 << 20, 20 << 20))
    assert p.memory["L2"].static == 124692 and p.memory["L2"].dynamic == 11264
    static = {n: (t.offset, t.size) for n, t in p.tensors.items() if t.area == "static"}
    assert static == {"Step2Weights": (0, 102400), "Step3Weights": (102400, 20480),
                      "Step1Weights": (122880, 1600), "Step2Biases": (124480, 128),
                      "Step1Biases": (124608, 64), "Step3Biases": (124672, 20)}
    assert all(p.tensors[n].flash == off for n, (off, _) in static.items())
    assert p.fetches == () and not any(p.streamed)


def test_disabled_promotion_fetches_or_streams():
    p = P.plan("MnistCNN", MNIST, MNIST_LAYERS,
               P.Budgets(300 * 1024, 8 << 20, 20 << 20, promote=False))
    assert p.memory["L2"].static == 0
    assert {f.tensor for f in p.fetches} == {t.name for t in MNIST if t.kind == "const"}
    no_fetch = P.plan("MnistCNN", MNIST, MNIST_LAYERS,
                      P.Budgets(300 * 1024, 8 << 20, 20 << 20, promote=False, fetch=False))
    assert no_fetch.fetches == () and no_fetch.streamed[1] == {"Step2Weights", "Step2Biases"}


def test_refusal_names_the_layer_and_the_bytes():
    with pytest.raises(CapacityError) as e:
        P.plan("MnistCNN", MNIST, MNIST_LAYERS, P.Budgets(12000, 8 << 20, 20 << 20))
    msg = str(e.value)
    assert "'l'" in msg and "12000 B" in msg and "Step3Weights" in msg and "missing" in msg
    with pytest.raises(CapacityError, match="flash budget of 1000 B"):
        P.plan("MnistCNN", MNIST, MNIST_LAYERS, P.Budgets(300 * 1024, 8 << 20, 1000))


# -- random chains --------------------------------------------------------------------------

@st.composite
def chains(draw):
    """A chain of layers: an input, one local between successive layers, an output, 0..2
    constants per layer; staging bytes per operand."""
    n = draw(st.integers(1, 6))
    size = st.integers(1, 4000)
    tensors = [P.Tensor("x", draw(size), "arg", draw(st.booleans())),
               P.Tensor("y", draw(size), "arg")]
    layers = []
    for i in range(n):
        src = "x" if i == 0 else f"a{i - 1}"
        dst = "y" if i == n - 1 else f"a{i}"
        if dst != "y":
            tensors.append(P.Tensor(dst, draw(size), "local", draw(st.booleans()) and
                                    draw(st.booleans())))
        consts = []
        for k in range(draw(st.integers(0, 2))):
            tensors.append(P.Tensor(f"w{i}_{k}", draw(size), "const"))
            consts.append(f"w{i}_{k}")
        staging = {t: draw(st.integers(0, 3000)) for t in (src, dst, *consts)}
        layers.append(P.Layer(f"l{i}", (src, *consts), (dst,), staging))
    return tensors, layers


budgets = st.builds(P.Budgets, l2=st.integers(0, 30000), l3=st.integers(0, 30000),
                    flash=st.integers(0, 40000),
                    l2_static=st.none() | st.integers(0, 20000),
                    l3_static=st.integers(0, 20000), promote=st.booleans(),
                    fetch=st.booleans())


def intervals(p: P.Plan, layers) -> dict[str, list[tuple[int, int, int, int]]]:
    """(first, last, offset, size) of everything in each dynamic area."""
    out = {"L2": [], "L3": []}
    for t in p.tensors.values():
        if t.area == "dynamic":
            out[t.memory].append((*t.live, t.offset, t.size))
    out["L2"] += [(f.at, f.until, f.offset, f.size) for f in p.fetches]
    out["L2"] += [(i, i, off, n) for i, (off, n) in enumerate(p.staging) if n]
    return out


def attempt(tensors, layers, b):
    try:
        return P.plan("g", tensors, layers, b)
    except CapacityError:
        return None


@settings(max_examples=300, deadline=None)
@given(chains(), budgets, st.data())
@pytest.mark.slow
def test_random_chains(chain, b, data):
    tensors, layers = chain
    p = attempt(tensors, layers, b)
    if p is None:
        # Shrinking any budget never turns the refusal into a plan.
        field = data.draw(st.sampled_from(["l2", "l3", "flash"]))
        smaller = P.Budgets(**{**b.__dict__, field: data.draw(
            st.integers(0, getattr(b, field)))})
        assert attempt(tensors, layers, smaller) is None
        return
    for area, items in intervals(p, layers).items():
        for k, (f1, l1, o1, s1) in enumerate(items):
            assert o1 % P.ALIGN == 0 and o1 >= 0
            assert o1 + s1 <= p.memory[area].dynamic
            for f2, l2, o2, s2 in items[k + 1:]:
                if f1 <= l2 and f2 <= l1:  # live at the same time
                    assert o1 + s1 <= o2 or o2 + s2 <= o1, (area, (f1, l1, o1, s1),
                                                            (f2, l2, o2, s2))
    statics = sorted((t.memory, t.offset, t.size) for t in p.tensors.values()
                     if t.area == "static")
    for (m1, o1, s1), (m2, o2, _) in zip(statics, statics[1:]):
        assert m1 != m2 or o1 + s1 <= o2
    assert p.memory["L2"].total <= b.l2 and p.memory["L3"].total <= b.l3
    assert p.memory["L3_FLASH"].static <= b.flash
    assert b.l2_static is None or p.memory["L2"].static <= b.l2_static
    assert p.memory["L3"].static <= b.l3_static
    if not b.promote:
        assert p.memory["L2"].static == 0
    if not b.fetch:
        assert p.fetches == ()
    for t in tensors:  # forced and streamed tensors are where they must be
        if t.kind == "local" and t.l3:
            assert p.tensors[t.name].memory == "L3"
    for i, layer in enumerate(layers):
        for t in layer.operands:
            where = p.tensors[t]
            fetched = any(f.tensor == t and f.at <= i <= f.until for f in p.fetches)
            direct = where.memory == "L2" or fetched or where.memory == "ARG" and not next(
                x for x in tensors if x.name == t).l3
            assert (t in p.streamed[i]) == (not direct)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=8))
def test_a_chains_dynamic_area_is_its_peak(sizes):
    """Activations only (no constants, no streams): each successive pair is live together,
    and the area is exactly the largest pair."""
    tensors = [P.Tensor("x", 8, "arg"), P.Tensor("y", 8, "arg")]
    tensors += [P.Tensor(f"a{k}", s, "local") for k, s in enumerate(sizes)]
    names = ["x"] + [f"a{k}" for k in range(len(sizes))] + ["y"]
    layers = [P.Layer(f"l{k}", (a,), (b,), {}) for k, (a, b) in enumerate(zip(names, names[1:]))]
    p = P.plan("g", tensors, layers, P.Budgets(10**9, 0, 0))
    up = [-(-s // P.ALIGN) * P.ALIGN for s in sizes]
    want = max([up[0]] + [a + b for a, b in zip(up, up[1:])])
    assert p.memory["L2"].dynamic <= want and p.memory["L2"].dynamic > want - P.ALIGN


# -- the allocator against its rules written plainly ------------------------------------

def up(n: int) -> int:
    return -(-n // P.ALIGN) * P.ALIGN


def plain_peak(items):
    times = {t for it in items for t in (it.first, it.last)}
    return max((sum(up(it.size) for it in items if it.first <= t <= it.last) for t in times),
               default=0)


def plain_allocate(items):
    def free(o, size, busy):
        return o >= 0 and all(o + size <= lo or o >= hi for lo, hi in busy)

    cap = plain_peak(items)
    placed, offsets = [], {}
    for it in sorted((i for i in items if i.size > 0), key=lambda i: (i.first, -i.size, i.key)):
        size = up(it.size)
        live = [(p, o) for p, o in placed if p.first <= it.last and it.first <= p.last]
        busy = [(o, o + up(p.size)) for p, o in live]
        bottoms = sorted({0, *(hi for _, hi in busy)})
        tops = sorted({cap - size, *((lo - size) // P.ALIGN * P.ALIGN for lo, _ in busy)},
                      reverse=True)
        lows = [o for o in bottoms if free(o, size, busy) and o + size <= cap]
        highs = [o for o in tops if free(o, size, busy) and o + size <= cap]
        last = max(live, key=lambda po: (po[0].first, po[0].key), default=None)
        prefer_top = last is not None and last[1] + up(last[0].size) / 2 <= cap / 2
        choice = (highs or lows) if prefer_top else (lows or highs)
        off = choice[0] if choice else min(o for o in bottoms if free(o, size, busy))
        placed.append((it, off))
        offsets[it.key] = off
    return offsets, max((offsets[i.key] + i.size for i in items if i.size > 0), default=0)


@st.composite
def items(draw):
    n = draw(st.integers(0, 40))
    out = []
    for k in range(n):
        first = draw(st.integers(0, 25))
        last = first + draw(st.integers(0, 12))
        out.append(P.Item(f"t{k}", first, last, draw(st.integers(0, 5000))))
    return out


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(items())
def test_the_allocator_follows_its_rules(its):
    assert P.peak(its) == plain_peak(its)
    offsets, size = P.allocate(its)
    assert (offsets, size) == plain_allocate(its)
    assert size >= P.least(its)  # the bound the planner refuses states by
    placed = [it for it in its if it.size > 0]
    for a in placed:  # and no two items live at once overlap
        for b in placed:
            if a.key < b.key and a.first <= b.last and b.first <= a.last:
                oa, ob = offsets[a.key], offsets[b.key]
                assert oa + a.size <= ob or ob + b.size <= oa
