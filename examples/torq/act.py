"""The Torq compiler's activation-unit operations (its ActPattern), written with the Torq
EasyKernel names: each vector goes through the ALU unchanged (or times one weight, for an
unsigned cast) and the Act applies the operation's mode, then clamps to the output
type's range (or the clamp operation's bounds):

    abs, negate, clz, ceil, floor     q = clamp(mode(p), lo, hi)
    i2f, f2i                          int32 <-> float32 (f2i truncates, saturating)
    i2i, f2f, clamp                   q = clamp(p, lo, hi)
    an unsigned cast (one weight)     p = uint(x) * w: the input's bytes read unsigned

The pattern's clip bounds for float outputs are the bit patterns of -inf and +inf; here
they are those floats.

Run: python examples/torq/act.py
"""

import math

import numpy as np

import npukit as nk
from npukit.easy import ACTMode

MODES = {"abs": ACTMode.ABS, "negate": ACTMode.NEG, "clz": ACTMode.CLZ,
         "ceil": ACTMode.CEL, "floor": ACTMode.FLR, "i2f": ACTMode.I2F, "f2i": ACTMode.F2I}


def configure(name, out_dtype, clamp_bounds, i1):
    """(mode, lo, hi) as the pattern's configureActivation chooses them."""
    out = np.dtype(out_dtype)
    if i1:
        lo, hi = 0, 1
    elif out.kind == "i":
        lo, hi = int(np.iinfo(out).min), int(np.iinfo(out).max)
    else:
        lo, hi = -math.inf, math.inf
    if name == "f2i":
        lo, hi = -math.inf, math.inf
    elif name == "i2i":
        lo, hi = -2**31, 2**31 - 1          # truncate without clipping
    elif name == "clamp":
        lo, hi = clamp_bounds
    return MODES.get(name, ACTMode.ACT), lo, hi


def act_body(s, input, output, weights, name, clamp_bounds, i1=False):
    n = min(s.act.width(input.dtype), s.act.width(output.dtype))
    mode, lo, hi = configure(name, output.dtype, clamp_bounds, i1)
    if name in ("ceil", "floor") and (input.dtype.kind != "f" or input.dtype != output.dtype):
        raise nk.KernelError(f"{name}: float input and output of the same type")
    wdata = None
    if weights is not None:   # an unsigned cast: the input's bytes read as unsigned
        wdata = s.wram.load(weights)
        input = input.setElementType("u" + input.dtype.name)
    x = input.fuse(min(input.denseDims(), output.denseDims())).vectorize(n)
    for ndd in s.iterate(x.dims(0, -2)):
        for iv in s.iterate(x.dim(-2)):
            idata = s.iram.load(x[ndd][iv])
            if wdata is not None:
                pdata = s.alu.scalarProductAccumulate(idata, wdata)
            else:
                pdata = s.alu.load(idata)
            s.append(output[ndd], s.act.clamp(pdata, lo, hi, mode))


@nk.kernel
def act(s, input, output, *, name, clamp_bounds=None, i1=False):
    """``i1``: the output holds booleans, one per byte (a uint8 tensor)."""
    act_body(s, input, output, None, name, clamp_bounds, i1)


@nk.kernel
def act_unsigned_cast(s, input, weights, output, *, name):
    act_body(s, input, output, weights, name, None)


def check(name, x, out_dtype, want, **attrs):
    prog = nk.build(act, target="torq", input=nk.spec(x.shape, x.dtype),
                    output=nk.spec(x.shape, out_dtype), name=name, **attrs)
    want = np.asarray(want).astype(out_dtype)
    for backend in ("sim", "c"):
        out = np.full(x.shape, 3, out_dtype)
        out[want == 3] = 4
        prog.run(backend, input=x, output=out)
        print(name, backend, out.reshape(-1)[:5], "matches numpy:",
              out.tobytes() == want.tobytes())
        assert out.tobytes() == want.tobytes()


rng = np.random.default_rng(18)
i32 = rng.integers(-2**31, 2**31, (3, 20)).astype(np.int32)
i32.reshape(-1)[:4] = [0, -2**31, 1, -1]
i8 = rng.integers(-128, 128, (3, 20)).astype(np.int8)
f32 = (rng.standard_normal((3, 20)) * 100).astype(np.float32)
f32.reshape(-1)[:4] = [-0.5, 2.5, 3e9, -3e9]
wide = i8.astype(np.int64)
check("abs", i8, "int8", np.clip(np.abs(wide), -128, 127))
check("negate", i32, "int32", np.clip(-i32.astype(np.int64), -2**31, 2**31 - 1))
check("clz", i32, "int32", [[32 - int(v).bit_length() for v in row] for row in i32.view(np.uint32)])
check("ceil", f32, "float32", np.ceil(f32))
check("floor", f32, "float32", np.floor(f32))
check("i2f", i32, "float32", i32.astype(np.float32))
check("f2i", f32, "int32", np.clip(np.trunc(f32.astype(np.float64)), -2**31, 2**31 - 1))
check("i2i", i32, "int16", np.clip(i32, -2**15, 2**15 - 1))   # the store saturates
check("f2f", f32, "float32", f32)
check("clamp", i8, "int8", np.clip(wide, -20, 30), clamp_bounds=(-20, 30))
check("clamp", f32, "float32", np.clip(f32, -50.5, 60.25), clamp_bounds=(-50.5, 60.25))
check("abs", i8, "uint8", np.abs(wide) != 0, i1=True)       # an i1 output: clip to 0..1

prog = nk.build(act_unsigned_cast, target="torq", input=nk.spec(i8.shape, "int8"),
                weights=nk.spec((1,), "uint8"), output=nk.spec(i8.shape, "int16"), name="i2i")
for backend in ("sim", "c"):
    out = np.full(i8.shape, -1, np.int16)
    prog.run(backend, input=i8, weights=np.array([1], np.uint8), output=out)
    print("unsigned cast", backend, "matches numpy:", bool((out == i8.view(np.uint8)).all()))
    assert (out == i8.view(np.uint8)).all()
