"""The GAP AutoTiler document's MNIST graph (``MnistModel``), ported line by line: two 5x5
convolutions with ReLU and 2x2 max pooling, a linear layer and a softmax, on int16 data in
the document's Q formats, then the graph ``MnistCNN`` that connects them.

The weights come from a fixed random seed, quantised to the model's Q formats and written as
``.tensor`` files under ``model/`` in a temporary folder: raw little-endian int16 values in
row-major order ([out, in, y, x] filters, [out] biases), no header — what
``ConstInfo("model/Step1Weights.tensor", 1, 1, 16, 0)`` reads (Format 1: already fixed point,
Binary 1, 16-bit containers). The graph runs on the simulator and in C on synthetic digits
and is compared with a float64 numpy forward pass of the same network, within the
quantisation error bound derived in docs/graph.md.

Run: python examples/graph/mnist.py
"""

import tempfile
from pathlib import Path

import numpy as np

from npukit.tiler import *

Q = {"In": 12, "W1": 14, "B1": 14, "W2": 14, "B2": 14, "W3": 12, "B3": 8, "Z": 11, "Sm": 15}


def MnistModel(L1Memory, L2Memory, L3Memory, L3Flash, const_dir="."):
    m = Model(target="gap8")
    m.SetConstDir(const_dir)  # npukit: the folder ConstInfo's relative file names start from

    Cop = KOP_CONV_DP

    m.SetSymbolDynamics()

    m.SetUsedFilesNames(0, 2, "CNN_BasicKernels.h", "MnistKernels.h")
    m.SetGeneratedFilesNames("MnistKernels.c", "MnistKernels.h")
    m.SetMemoryDeviceInfos(4,
        AT_MEM_L1, L1Memory, "Mnist_L1_Memory", 0, 0,
        AT_MEM_L2, L2Memory, "Mnist_L2_Memory", 0, 0,
        AT_MEM_L3_DEFAULTRAM, L3Memory, "Mnist_L3_Memory", 0, 0,
        AT_MEM_L3_DEFAULTFLASH, L3Flash, "0", "Mnist_L3_Flash_Const.dat", 0
    )

    m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_ON)

    m.LoadCNNLibrary()
    # Convolutional Layer
    m.CNN_ConvolutionPoolReLU("Conv5x5ReLUMaxPool2x2_0", 0, 2,2,2,2, 12,14,14,12, 1,1,1,1, 1,32,28,28,
        Cop, 5, 5, 1, 1, 1, 1, 0,
        KOP_MAXPOOL, 2, 2, 1, 1, 2, 2, 0, KOP_RELU)
    # Convolutional Layer
    m.CNN_ConvolutionPoolReLU("Conv5x5ReLUMaxPool2x2_1", 0, 2,2,2,2, 12,14,14,12, 1,1,1,1, 32,64,12,12,
        Cop, 5, 5, 1, 1, 1, 1, 0,
        KOP_MAXPOOL, 2, 2, 1, 1, 2, 2, 0, KOP_RELU)
    # Linear Layer
    m.CNN_LinearReLU("LinearLayerReLU_0", 0, 2,2,2,2, 12,12,8,11, 2,2,2,2, 1024, 10,
        KOP_LINEAR, KOP_NONE)
    # Sofmax
    m.CNN_SoftMax("SoftMax_0", 0, 2,2, 15,15,1,1, 10, KOP_SOFTMAX)

    # Open Graph Creation
    m.CreateGraph("MnistCNN",
        # Arguments either passed or globals
        CArgs(8,
            TCArgInfo("short int *__restrict__", "Input0", ARG_SCOPE_ARG, ARG_DIR_IN, AT_MEM_L2, AT_MEM_UNDEF, 0),
            TCArgInfo("short int *__restrict__", "Step1Weights", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH, AT_MEM_UNDEF, ConstInfo("model/Step1Weights.tensor", 1, 1, 16, 0)),
            TCArgInfo("short int *__restrict__", "Step1Biases",  ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH, AT_MEM_UNDEF, ConstInfo("model/Step1Biases.tensor"  , 1, 1, 16, 0)),
            TCArgInfo("short int *__restrict__", "Step2Weights", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH, AT_MEM_UNDEF, ConstInfo("model/Step2Weights.tensor", 1, 1, 16, 0)),
            TCArgInfo("short int *__restrict__", "Step2Biases",  ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH, AT_MEM_UNDEF, ConstInfo("model/Step2Biases.tensor"  , 1, 1, 16, 0)),
            TCArgInfo("short int *__restrict__", "Step3Weights", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH, AT_MEM_UNDEF, ConstInfo("model/Step3Weights.tensor", 1, 1, 16, 0)),
            TCArgInfo("short int *__restrict__", "Step3Biases",  ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH, AT_MEM_UNDEF, ConstInfo("model/Step3Biases.tensor"  , 1, 1, 16, 0)),
            TCArgInfo("short int *__restrict__", "Output0", ARG_SCOPE_ARG, ARG_DIR_OUT, AT_MEM_UNDEF, AT_MEM_L2, 0)
        ),
        # Locals, allocated dynamically
        CArgs(3,
            TCArgInfo("short int *__restrict__", "OutputStep2", ARG_SCOPE_LOCAL, ARG_DIR_INOUT, AT_MEM_UNDEF, AT_MEM_UNDEF, 0),
            TCArgInfo("short int *__restrict__", "OutputStep3", ARG_SCOPE_LOCAL, ARG_DIR_INOUT, AT_MEM_UNDEF, AT_MEM_UNDEF, 0),
            TCArgInfo("short int *__restrict__", "OutputStep4", ARG_SCOPE_LOCAL, ARG_DIR_INOUT, AT_MEM_UNDEF, AT_MEM_UNDEF, 0)
        )
    )
    # Node Connections with arguments
    m.AddNode("Conv5x5ReLUMaxPool2x2_0",
            Bindings(4,
                GNodeArg(GNA_IN, "Input0", 0),
                GNodeArg(GNA_IN, "Step1Weights", 0),
                GNodeArg(GNA_IN, "Step1Biases", 0),
                GNodeArg(GNA_OUT, "OutputStep2", 0)
                )
            )

    m.AddNode("Conv5x5ReLUMaxPool2x2_1", Bindings(4, GNodeArg(GNA_IN, "OutputStep2", 0), GNodeArg(GNA_IN, "Step2Weights", 0), GNodeArg(GNA_IN, "Step2Biases", 0), GNodeArg(GNA_OUT, "OutputStep3",0)))
    m.AddNode("LinearLayerReLU_0", Bindings(4, GNodeArg(GNA_IN, "OutputStep3", 0), GNodeArg(GNA_IN, "Step3Weights", 0), GNodeArg(GNA_IN, "Step3Biases", 0), GNodeArg(GNA_OUT, "OutputStep4",0)))
    m.AddNode("SoftMax_0", Bindings(2, GNodeArg(GNA_IN, "OutputStep4", 0), GNodeArg(GNA_OUT, "Output0", 0)))
    # Close Graph creation
    m.CloseGraph()
    return m


# -- weights, inputs and the float64 network ------------------------------------------------

def weights(seed=0):
    """Random weights of the network, quantised: {tensor: int16 array}."""
    rng = np.random.default_rng(seed)

    def q(x, frac):
        return np.clip(np.floor(x * 2**frac + 0.5), -32768, 32767).astype(np.int16)

    return {"Step1Weights": q(rng.normal(0, 0.2, (32, 1, 5, 5)), Q["W1"]),
            "Step1Biases": q(rng.normal(0, 0.05, 32), Q["B1"]),
            "Step2Weights": q(rng.normal(0, 0.05, (64, 32, 5, 5)), Q["W2"]),
            "Step2Biases": q(rng.normal(0, 0.05, 64), Q["B2"]),
            "Step3Weights": q(rng.normal(0, 0.12, (10, 1024)), Q["W3"]),
            "Step3Biases": q(rng.normal(0, 0.1, 10), Q["B3"])}


def write_tensors(folder, w):
    """The weights as ``model/<name>.tensor`` files (raw little-endian int16)."""
    (Path(folder) / "model").mkdir(parents=True, exist_ok=True)
    for name, v in w.items():
        (Path(folder) / "model" / f"{name}.tensor").write_bytes(v.astype("<i2").tobytes())


def digits(n, seed=1):
    """``n`` synthetic 28x28 digits in [0, 1) as Q12 int16: a few thick random strokes."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    out = np.zeros((n, 28, 28), np.int16)
    for k in range(n):
        img = np.zeros((28, 28))
        for _ in range(rng.integers(2, 5)):
            (y0, x0), (y1, x1) = rng.uniform(4, 24, (2, 2))
            t = np.clip(((yy - y0) * (y1 - y0) + (xx - x0) * (x1 - x0))
                        / max((y1 - y0) ** 2 + (x1 - x0) ** 2, 1e-9), 0, 1)
            d = np.hypot(yy - y0 - t * (y1 - y0), xx - x0 - t * (x1 - x0))
            img = np.maximum(img, np.exp(-(d / 1.5) ** 2))
        out[k] = np.floor(np.minimum(img, 0.999) * 2**Q["In"])
    return out


def _conv_relu_pool(x, w, b):
    nop, _, fy, fx = w.shape
    h, wd = x.shape[1] - fy + 1, x.shape[2] - fx + 1
    acc = np.zeros((nop, h, wd))
    for i in range(fy):
        for j in range(fx):
            acc += np.einsum("oc,chw->ohw", w[:, :, i, j], x[:, i:i + h, j:j + wd])
    acc = np.maximum(acc + b[:, None, None], 0)
    return acc.reshape(nop, h // 2, 2, wd // 2, 2).max(axis=(2, 4))


def forward(x, w):
    """The network in float64 on the real values of the int16 input and weights: returns
    (activations after each layer, softmax). The softmax reads the linear layer's Q11
    output as Q15 (its In_Q), so it computes softmax(z / 16), as the model says."""
    r = {k: v.astype(np.float64) / 2.0 ** Q[{"Step1Weights": "W1", "Step1Biases": "B1",
                                              "Step2Weights": "W2", "Step2Biases": "B2",
                                              "Step3Weights": "W3", "Step3Biases": "B3"}[k]]
         for k, v in w.items()}
    a1 = _conv_relu_pool(x.astype(np.float64)[None] / 2.0 ** Q["In"], r["Step1Weights"],
                         r["Step1Biases"])
    a2 = _conv_relu_pool(a1, r["Step2Weights"], r["Step2Biases"])
    z = r["Step3Weights"] @ a2.reshape(-1) + r["Step3Biases"]
    y = z * 2.0 ** (Q["Z"] - Q["Sm"])
    e = np.exp(y - y.max())
    return (a1, a2, z), e / e.sum()


EXP_Q15_ERROR = 1  # LSBs: max |exp_q15(x) - 2**15 e**(x / 2**15)| over every x (tests check)


def error_bound(w):
    """The bound docs/graph.md derives on |Output0 / 2**15 - float64 softmax|, for these
    weights: each layer rounds once (half an LSB of its Q format) and propagates the error
    of its input through the l1 norm of its weights; the softmax adds its own."""
    e1 = 2.0 ** -(Q["In"] + 1)  # layer 0's output rounding, Q12
    l1_2 = np.abs(w["Step2Weights"].astype(np.float64) / 2**Q["W2"]).sum(axis=(1, 2, 3)).max()
    e2 = l1_2 * e1 + 2.0 ** -(Q["In"] + 1)
    l1_3 = np.abs(w["Step3Weights"].astype(np.float64) / 2**Q["W3"]).sum(axis=1).max()
    ez = l1_3 * e2 + 2.0 ** -(Q["Z"] + 1)
    n = w["Step3Weights"].shape[0]
    return ez * 2.0 ** (Q["Z"] - Q["Sm"]) / 2 + (EXP_Q15_ERROR * (n + 1) + 2.5) / 2**15


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        w = weights()
        write_tensors(tmp, w)
        m = MnistModel(48000, 300*1024, 8*1024*1024, 20*1024*1024, const_dir=tmp)
        g = m.graph("MnistCNN")
        print(g)
        xs = digits(4)
        out = np.zeros(10, np.int16)
        res = g.run("sim", Input0=xs[0], Output0=out)  # traces each layer
        print(res.report)
        m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
        g = m.graph("MnistCNN")
        bound, worst = error_bound(w), 0.0
        for x in xs:
            sim, c = np.zeros(10, np.int16), np.zeros(10, np.int16)
            g.run("sim", Input0=x, Output0=sim)
            g.run("c", Input0=x, Output0=c)
            (a1, a2, z), want = forward(x, w)
            assert max(a1.max(), a2.max()) < 8 and np.abs(z).max() < 16  # no saturation
            assert (sim == c).all()
            assert sim.argmax() == want.argmax()
            worst = max(worst, np.abs(sim / 2**15 - want).max())
        print(f"sim == C on {len(xs)} inputs; max |Output0 - float64 softmax| = {worst:.2e} "
              f"<= bound {bound:.2e}; same argmax everywhere")
        assert worst <= bound
