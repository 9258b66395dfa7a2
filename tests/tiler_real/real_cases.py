"""Real AutoTiler cases: a model the real tool tiled, its L1 budget, and what the file it
generated says (read from the generated C: loop counts, tile sizes from the DMA sizes and
the kernel arguments, L1 offsets from ``L1_Memory + offset`` and slot counts from the
``% slots`` of each buffer's address).

Each case names the repository, path and commit of the generated file and of the model it
came from. ``expect`` holds per space (tile lines per full tile, tiles, lines in the last)
and per argument (L1 offset, bytes per slot, slots), and ``l1``, the L1 bytes used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import real_kernels as K
import real_ports as P

from npukit.tiler import *

PULP_DRONET = ("pulp-platform/pulp-dronet", "pulp-dronet-v1/src/PULPDronetKernels.c",
               "98f15cfe2e9c34c3a546358e22e45b3b09f11a79")
PULP_DRONET_MODEL = ("pulp-platform/pulp-dronet", "pulp-dronet-v1/src/PULPDronetGenerator.c "
                     "(L1 54400) + config.h", "98f15cfe2e9c34c3a546358e22e45b3b09f11a79")
FRONTNET = ("FullMetalNicky/FrontNetPorting", "Deployment/src/PULPDronetKernels.c",
            "3a1f586abedd0a6eb846c3fc1b76478e46a1723d")
FRONTNET_MODEL = ("FullMetalNicky/FrontNetPorting", "Deployment/src/PULPDronetGenerator.c "
                  "(L1 54400) + config.h", "3a1f586abedd0a6eb846c3fc1b76478e46a1723d")
OLD_GENERATORS = ("pulp-platform/autotiler", "src/CNN_Generator.c",
                  "dd4508adafd6e7b4242cb22ebc5f84b5bae8eaca")
MATMULT = ("fernandoFernandeSantos/gap9radsetup", "benchmarks/MatMult/MatMultKernels.c",
           "c55b744068e50c6738e43ab219c6f10328db50d8")
MATMULT_MODEL = ("fernandoFernandeSantos/gap9radsetup", "benchmarks/MatMult/MatMultModel.c "
                 "(L1 45000, KER_OPT_BUFFER_PROMOTE off)",
                 "c55b744068e50c6738e43ab219c6f10328db50d8")
MATMULT_GENERATOR = ("GreenWaves-Technologies/gap_sdk",
                     "tools/autotiler_v3/Generators/MatMult/MatMultGenerator.c",
                     "a23026507efe57410b98c5945544cff3150eb996")
MNIST = ("GreenWaves-Technologies/gap_sdk", "examples/autotiler/Mnist/MnistKernels.c",
         "15fcc33e3c7f11e1b837ae1393a6b9466bb8e55e")
MNIST_MODEL = ("GreenWaves-Technologies/gap_sdk", "examples/autotiler/Mnist/MnistModel.c "
               "(L1 45000) + tools/autotiler_v3/CNN_Generators/CNN_Generators.c",
               "15fcc33e3c7f11e1b837ae1393a6b9466bb8e55e")
GAPUINO = "CappelDen/Univariate-time-series-forecasting-with-Seq2Seq-models-on-GAPuino-"
GAPUINO_COMMIT = "0a34b071f9edd98f425b7284256ea129ef9192c9"


def gapuino(folder: str, generator: str, l1: int):
    """(generated file, model) of one of the GAPuino GRU models (AutoTiler 3.0.x: the
    repository's first commit pins TILER_VER=3.0.2)."""
    src = "GAPuino_Code/tested_models_sources/GRU/" + folder
    return ((GAPUINO, src + "/EncDecLayer.c", GAPUINO_COMMIT),
            (GAPUINO, f"{src}/Seq2SeqModel.c (L1 {l1}, KER_OPT_BUFFER_PROMOTE off) + "
             f"GAPuino_Code/autotiler_generators/tools/autotiler_v3/generators/GRU/{generator}"
             f"/EncDecGenerator.c", GAPUINO_COMMIT))


@dataclass(frozen=True)
class Case:
    """One real case: ``build()`` returns (model, user kernel name); ``data(rng)`` returns
    (inputs, outputs, expected outputs) for a run; ``covers`` says what it exercises."""

    name: str
    project: str
    generated: tuple[str, str, str]
    model: tuple[str, str, str]
    covers: str
    build: object
    data: object
    expect: dict
    args: dict
    l1: int
    xfail: str = ""
    extra: dict = field(default_factory=dict)


def old_model():
    m = Model(target="gap8", l1_budget=54400)
    m.SetInlineMode(ALWAYS_INLINE)
    m.SetSymbolNames("PULP_Dronet_L1_Memory", "PULP_Dronet_L2_Memory", "PULP_Dronet_KernelDescr",
                     "PULP_Dronet_KernelArgs")
    m.SetSymbolDynamics()
    m.SetUsedFilesNames("KernelLibStdTypes.h", 1, "CNN_BasicKernels.h")
    m.SetGeneratedFilesNames("PULPDronetKernelsInit.c", "PULPDronetKernelsInit.h",
                             "PULPDronetKernels.c", "PULPDronetKernels.h")
    m.SetL1MemorySize(54400)
    K.load_old_cnn_library(m)
    return m


def planes(rng, shape, lo=-3000, hi=3000):
    return rng.integers(lo, hi, shape).astype(np.int16)


# -- oracles (numpy, independent of the tiler) ----------------------------------------------

def relu_data(c, h, w):
    def data(rng):
        x = planes(rng, (c, h, w))
        return {"In": x}, {"Out": np.zeros((c, h, w), np.int16)}, {"Out": np.maximum(x, 0)}
    return data


def add_data(c, h, w):
    def data(rng):
        x, y = planes(rng, (c, h, w), -20000, 20000), planes(rng, (c, h, w), -20000, 20000)
        want = K.sat16(x.astype(np.int64) + y)
        return {"In": x}, {"Out": y}, {"Out": want}
    return data


def correlate(x, f, stride, pads):
    """(n, Ho, Wo): the plane x correlated with each of n (F, F) filters, zero padding
    (left, right, top, bottom), exact: a sum of shifted slices (independent of the basic
    kernels' references)."""
    left, right, top, bottom = pads
    xp = np.pad(x.astype(np.int64), ((top, bottom), (left, right)))
    F = f.shape[-1]
    ho, wo = (xp.shape[0] - F) // stride + 1, (xp.shape[1] - F) // stride + 1
    out = np.zeros((f.shape[0], ho, wo), np.int64)
    for i in range(F):
        for j in range(F):
            tap = xp[i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
            out += f[:, i, j].astype(np.int64)[:, None, None] * tap
    return out


def conv_oracle(x, f, bias, norm, stride, pads, pool, relu):
    """sat16(bias + sum over input features of (conv >> norm)), saturated after each input
    feature, then an optional 2x2 max pooling and ReLU."""
    nip = f.shape[1]
    out = None
    for i in range(nip):  # every output feature at once, input feature by input feature
        c = correlate(x[i], f[:, i], stride, pads) >> norm
        if out is None:
            out = np.broadcast_to(bias.astype(np.int64)[:, None, None], c.shape)
        out = K.sat16(out + c).astype(np.int64)
    if pool:  # 2x2 max, stride 2
        h, w = out.shape[1] // 2 * 2, out.shape[2] // 2 * 2
        out = out[:, :h, :w].reshape(out.shape[0], h // 2, 2, w // 2, 2).max(axis=(2, 4))
    if relu:
        out = np.maximum(out, 0)
    return out.astype(np.int16)


def medpar_data(nip, nop, w, h, fsc, stride, relu, norm=11):
    pads = ((fsc - 1) // 2, fsc // 2, (fsc - 1) // 2, fsc // 2)

    def data(rng):
        x = planes(rng, (nip, h, w), -2000, 2000)
        f = planes(rng, (nop, nip, fsc, fsc), -400, 400)
        b = planes(rng, (nop,), -3000, 3000)
        want = conv_oracle(x, f, b, norm, stride, pads, False, relu)
        ho, wo = want.shape[1:]
        return ({"In": x.reshape(nip, h * w), "Filter": f.reshape(nop, nip * fsc * fsc),
                 "Bias": b.reshape(nop, 1), "Norm": norm},
                {"Out": np.zeros((nop, ho * wo), np.int16)},
                {"Out": want.reshape(nop, ho * wo)})
    return data


def largepar_data(nip, nop, w, h, norm=12):
    def data(rng):
        x = planes(rng, (nip, h, w), -2000, 2000)
        f = planes(rng, (nop, nip, 5, 5), -400, 400)
        b = planes(rng, (nop,), -3000, 3000)
        want = conv_oracle(x, f, b, norm, 2, (2, 2, 2, 2), True, False)
        ho, wo = want.shape[1:]
        return ({"In": x, "Filter": f.reshape(nop, nip * 25), "Bias": b.reshape(nop, 1),
                 "Norm": norm},
                {"Out": np.zeros((nop, ho, wo), np.int16)}, {"Out": want})
    return data


def matmult_data(lines1, cols1, cols2, norm=10):
    def data(rng):
        a = planes(rng, (lines1, cols1), -300, 300)
        b = planes(rng, (cols1, cols2), -300, 300)
        want = K.sat16((a.astype(np.int64) @ b.astype(np.int64)) >> norm)
        return ({"M1": a, "M2": b, "Norm": norm},
                {"Out": np.zeros((lines1, cols2), np.int16)}, {"Out": want})
    return data


def linear_data(n_in, n_out, in_q, f_q, b_q, out_q):
    def data(rng):
        x = planes(rng, (n_in,), -4000, 4000)
        w = planes(rng, (n_out, n_in), -2000, 2000)
        b = planes(rng, (n_out,), -2000, 2000)
        acc = w.astype(np.int64) @ x.astype(np.int64)
        acc += b.astype(np.int64) * (1 << (f_q + in_q - b_q))
        want = np.clip(acc >> (f_q + in_q - out_q), -32768, 32767).astype(np.int16)
        return ({"In": x.reshape(1, n_in), "Filter": w.reshape(n_out, 1, n_in),
                 "Bias": b.reshape(n_out, 1, 1)},
                {"Out": np.zeros((n_out, 1, 1), np.int16)}, {"Out": want.reshape(n_out, 1, 1)})
    return data


def mnist_conv_data(nip, nop, w, h, norm=14):
    def data(rng):
        x = planes(rng, (nip, h, w), -3000, 3000)
        f = planes(rng, (nop, nip, 5, 5), -300, 300)
        b = planes(rng, (nop,), -3000, 3000)
        want = conv_oracle(x, f, b, norm, 1, (0, 0, 0, 0), True, True)
        return ({"In": x, "Filter": f.reshape(nop, nip, 1, 25), "Bias": b.reshape(nop, 1, 1)},
                {"Out": np.zeros(want.shape, np.int16)}, {"Out": want})
    return data


def gru_data(n, in_step=27, it=13, norm=10):
    """EncoderGRUGenerator's kernel with the GRU library's arithmetic (real_kernels.py), in
    int64 over whole vectors."""
    def data(rng):
        x, h = planes(rng, (in_step,), -1000, 1000), planes(rng, (n,), -1000, 1000)
        k, k2 = planes(rng, (2 * n,), -1000, 1000), planes(rng, (n,), -1000, 1000)
        rk, rk2 = planes(rng, (n, 2 * n), -200, 200), planes(rng, (n, n), -200, 200)
        b = rng.integers(-100000, 100000, 2 * n).astype(np.int32)
        b2 = rng.integers(-100000, 100000, n).astype(np.int32)
        xi = np.int64(x[it])
        z = K.sat16((xi * k + h.astype(np.int64) @ rk + b) >> norm)
        p1 = K.sat16((z[n:].astype(np.int64) * h) >> norm)
        p2 = (((xi * k2 + p1.astype(np.int64) @ rk2 + b2) >> norm) + z[:n]).astype(np.int32)
        row = lambda v: v.reshape(1, -1)  # noqa: E731 (one line of W items)
        return ({"In": row(x), "Iterazione": it, "Kernel": row(k), "Rec_Kernel": rk,
                 "Bias": row(b), "Kernel2": row(k2), "Rec_Kernel2": rk2, "Bias2": row(b2),
                 "Norm": norm},
                {"H_0": row(h), "Z": row(np.zeros(2 * n, np.int16)),
                 "prod1": row(np.zeros(n, np.int16)), "prod2": row(np.zeros(n, np.int32))},
                {"H_0": row(h), "Z": row(z), "prod1": row(p1), "prod2": row(p2)})
    return data


def gru_dec_data(n, out_step=9, it=8, norm=10):
    """DecoderGRUGenerator's kernel with the GRU library's arithmetic, in int64."""
    def data(rng):
        h = planes(rng, (n,), -1000, 1000)
        rk, rk2 = planes(rng, (n, 2 * n), -200, 200), planes(rng, (n, n), -200, 200)
        dk = planes(rng, (n,), -300, 300)
        b = rng.integers(-100000, 100000, 2 * n).astype(np.int32)
        b2 = rng.integers(-100000, 100000, n).astype(np.int32)
        db = rng.integers(-100000, 100000, 1).astype(np.int32)
        z = K.sat16((h.astype(np.int64) @ rk + b) >> norm)
        p1 = K.sat16((z[n:].astype(np.int64) * h) >> norm)
        p2 = (((p1.astype(np.int64) @ rk2 + b2) >> norm) + z[:n]).astype(np.int32)
        out = K.sat16([(h.astype(np.int64) @ np.roll(dk, -k) + db[0]) >> norm
                       for k in range(out_step)])
        row = lambda v: v.reshape(1, -1)  # noqa: E731 (one line of W items)
        return ({"Iterazione": it, "Rec_Kernel": rk, "Bias": row(b), "Rec_Kernel2": rk2,
                 "Bias2": row(b2), "Dense_Kernel": row(dk), "Dense_Bias": row(db), "Norm": norm},
                {"H_0": row(h), "Out": row(np.zeros(out_step, np.int16)),
                 "Z": row(np.zeros(2 * n, np.int16)), "prod1": row(np.zeros(n, np.int16)),
                 "prod2": row(np.zeros(n, np.int32))},
                {"H_0": row(h), "Out": row(out), "Z": row(z), "prod1": row(p1), "prod2": row(p2)})
    return data


# -- builders ---------------------------------------------------------------------------------

def dronet(port, name, *args):
    def build():
        m = old_model()
        port(m, name, *args)
        return m, name
    return build


def matmult_build(port, name):
    def build():
        m = Model(target="gap8", l1_budget=45000)
        m.SetSymbolDynamics()
        m.SetUsedFilesNames(0, 1, "MatMultBasicKernels.h")
        m.SetGeneratedFilesNames("MatMultKernels.c", "MatMultKernels.h")
        m.SetKernelOpts(KER_OPT_NONE, KER_OPT_BUFFER_PROMOTE)
        K.load_matmult_library(m)
        port(m, name, 200, 70, 70, 150, 1)
        return m, name
    return build


def mnist_model():
    """A model set up as MnistModel.c sets it up (L1 45000), no library loaded yet."""
    m = Model(target="gap8", l1_budget=45000)
    m.SetInlineMode(ALWAYS_INLINE)
    m.SetSymbolDynamics()
    m.SetSymbolNames("Mnist_L1_Memory", "Mnist_L2_Memory")
    m.SetUsedFilesNames(0, 1, "CNN_BasicKernels.h")
    m.SetGeneratedFilesNames("MnistKernels.c", "MnistKernels.h")
    m.SetL1MemorySize(45000)
    return m


def mnist_build(port, name, *args):
    def build():
        m = mnist_model()
        K.load_new_cnn_library(m)
        port(m, name, *args)
        return m, name
    return build


def gru_build(n, l1, rec2_buffer=False, call_type=CALL_PARALLEL, version="3.0",
              decoder=False):
    """EncGRUlayer (or DecGRUlayer) as Seq2SeqModel.c generates it."""
    def build():
        m = Model(target="gap8", l1_budget=l1, autotiler_version=version)
        m.SetSymbolDynamics()
        m.SetUsedFilesNames(0, 1, "EncDecKernel.h")
        m.SetGeneratedFilesNames("EncDecLayer.c", "EncDecLayer.h")
        m.SetKernelOpts(KER_OPT_NONE, KER_OPT_BUFFER_PROMOTE)
        K.load_gru_library(m, call_type)
        if decoder:
            P.decoder_gru_generator(m, "DecGRUlayer", n, 9, rec2_buffer)
            return m, "DecGRUlayer"
        P.encoder_gru_generator(m, "EncGRUlayer", n, 27, rec2_buffer)
        return m, "EncGRUlayer"
    return build


LARGEPAR = (5, 2, 1, 0, 2, 2, 0, 0, 1)  # FSc, stride, pad, ConvDoReLU, FSp, ..., DoPool

CASES = [
    Case("dronet_relu_1", "pulp-dronet", PULP_DRONET, PULP_DRONET_MODEL,
         "3-D, KER_IN_OUT_PLANE, in-out argument triple buffered",
         dronet(P.cnn_relu_sw_fp, "ReLU_SW_1", 32, 32, 50, 50), relu_data(32, 50, 50),
         {"InOutPlane": (1, 32, 1), "Tile0": (50, 1, 50)},
         {"In": (0, 5000, 2), "Out": (10000, 5000, 3)}, 25000),
    Case("dronet_add_1", "pulp-dronet", PULP_DRONET, PULP_DRONET_MODEL,
         "3-D in-out, slots padded to 4 bytes (1250 B tiles, 1252 B apart)",
         dronet(P.cnn_matrix_add_sw_fp, "AddFeatureMaps_SW_1", 32, 32, 25, 25),
         add_data(32, 25, 25),
         {"InOutPlane": (1, 32, 1), "Tile0": (25, 1, 25)},
         {"In": (0, 1250, 2), "Out": (2504, 1250, 3)}, 6260, extra={"pitch": {"In": 1252,
                                                                              "Out": 1252}}),
    Case("dronet_add_2", "pulp-dronet", PULP_DRONET, PULP_DRONET_MODEL,
         "whole-object promotion: 64 planes of 13 x 13 fit L1 whole, one buffer each",
         dronet(P.cnn_matrix_add_sw_fp, "AddFeatureMaps_SW_2", 64, 64, 13, 13),
         add_data(64, 13, 13),
         {"InOutPlane": (1, 64, 1), "Tile0": (13, 1, 13)},
         {"In": (0, 21632, 1), "Out": (21632, 21632, 1)}, 43264, extra={"promoted": True}),
    Case("dronet_medconv_3", "pulp-dronet", PULP_DRONET, PULP_DRONET_MODEL,
         "two nested tiled spaces (older rule: outer first), preferred multiple 8, an input "
         "buffer walked by tile, L1 placed by space",
         dronet(P.medium_par_out_feat_conv, "MedParConv_3x3_S1_3", 32, 32, 25, 25,
                3, 1, 1, 0, 0, 0, 0, 0, 0),
         medpar_data(32, 32, 25, 25, 3, 1, False),
         {"Tile0": (8, 4, 8), "Tile1": (10, 4, 2)},
         {"In": (29280, 12500, 2), "Filter": (0, 4608, 2), "Bias": (9216, 64, 1),
          "Out": (9280, 10000, 2)}, 54280),
    Case("dronet_medconv_2", "pulp-dronet", PULP_DRONET, PULP_DRONET_MODEL,
         "two nested tiled spaces: the inner one takes what the outer leaves (2 of 32)",
         dronet(P.medium_par_out_feat_conv, "MedParConv_3x3_S2_ReLU_2", 32, 32, 50, 50,
                3, 2, 1, 1, 0, 0, 0, 0, 0),
         medpar_data(32, 32, 50, 50, 3, 2, True),
         {"Tile0": (8, 4, 8), "Tile1": (2, 16, 2)},
         {"In": (29280, 10000, 2), "Filter": (0, 4608, 2), "Bias": (9216, 64, 1),
          "Out": (9280, 10000, 2)}, 49280),
    Case("dronet_largeconv_1", "pulp-dronet", PULP_DRONET, PULP_DRONET_MODEL,
         "2-D padded argument with overlap, preferred multiple on the tile step, a one-tile "
         "buffer between tiled arguments, a single-tile inner argument in one slot",
         dronet(P.large_par_out_feat_conv_hor, "LargeParConv_5x5_S2_Max2x2_S2_H_1", 1, 32,
                200, 200, *LARGEPAR),
         largepar_data(1, 32, 200, 200),
         {"Tile0": (2, 25, 2), "Tile1": (32, 1, 32)},
         {"In": (0, 4400, 2), "Filter": (47264, 1600, 1), "Bias": (8800, 64, 1),
          "Out": (8864, 6400, 2), "ConvOut": (21664, 25600, 1)}, 48864,
         extra={"lines": {"In": (11, 9, 10)}}),
    Case("frontnet_relu_1", "FrontNetPorting", FRONTNET, FRONTNET_MODEL,
         "whole-object promotion of a 3-D in-out kernel (32 planes of 27 x 15)",
         dronet(P.cnn_relu_sw_fp, "ReLU_SW_1", 32, 32, 27, 15), relu_data(32, 15, 27),
         {"InOutPlane": (1, 32, 1), "Tile0": (15, 1, 15)},
         {"In": (0, 25920, 1), "Out": (25920, 25920, 1)}, 51840, extra={"promoted": True}),
    Case("frontnet_largeconv_1", "FrontNetPorting", FRONTNET, FRONTNET_MODEL,
         "2-D padded argument, last tile smaller: the padded extent's end (PAD_REM)",
         dronet(P.large_par_out_feat_conv_hor, "LargeParConv_5x5_S2_Max2x2_S2_H_1", 1, 32,
                108, 60, *LARGEPAR),
         largepar_data(1, 32, 108, 60),
         {"Tile0": (4, 4, 3), "Tile1": (32, 1, 32)},
         {"In": (0, 4104, 2), "Filter": (49744, 1600, 1), "Bias": (8208, 64, 1),
          "Out": (8272, 6912, 2), "ConvOut": (22096, 27648, 1)}, 51344,
         extra={"lines": {"In": (19, 17, 14)}, "virtual": {"In": (19, 16)}}),
    Case("matmult", "gap9radsetup", MATMULT, MATMULT_MODEL,
         "newer generation, 2-D, TILE_VER, two nested tiled spaces sharing the budget out "
         "(AutoTiler 4: in proportion to 880 and 280 B per line, 38 and 38)",
         matmult_build(P.par_mat_mult_generator, "ParMatMult"), matmult_data(200, 70, 150),
         {"Tile1": (38, 6, 10), "Tile0": (38, 4, 36)},
         {"M1": (0, 5320, 2), "M2": (33440, 5320, 2), "Out": (10640, 11400, 2)}, 44080,
         extra={"generator": MATMULT_GENERATOR}),
    Case("matmult_vect", "gap9radsetup", MATMULT, MATMULT_MODEL,
         "newer generation, nested tiled spaces with an untiled buffer in Tile0: the buffer "
         "counts in Tile0's share (560 of 1440 B per line), so Tile0 takes 61 and Tile1 31",
         matmult_build(P.par_vect_mat_mult_generator, "ParVectMatMult"),
         matmult_data(200, 70, 150),
         {"Tile1": (31, 7, 14), "Tile0": (61, 3, 28)},
         {"KerBuff": (27280, 280, 1), "M1": (0, 4340, 2), "M2": (27560, 8540, 2),
          "Out": (8680, 9300, 2)}, 44640,
         extra={"generator": MATMULT_GENERATOR}),
    Case("mnist_linear", "gap_sdk", MNIST, MNIST_MODEL,
         "newer generation, a parametric space kept whole, whole-object promotion",
         mnist_build(P.cnn_linear_relu, "LinearLayerReLU_1", 12, 12, 8, 11, 1024, 10, False),
         linear_data(1024, 10, 12, 12, 8, 11),
         {"D0": (10, 1, 10), "Tile0": (1, 1, 1)},
         {"In": (0, 2048, 1), "Filter": (2048, 20480, 1), "Bias": (22528, 20, 1),
          "Out": (22548, 20, 1)}, 22568, extra={"promoted": True}),
    Case("mnist_conv_0", "gap_sdk", MNIST, MNIST_MODEL,
         "newer generation, KerArgP with overlap, preferred multiple, a one-tile buffer of "
         "every output feature between tiled arguments, constant arguments moved once",
         mnist_build(P.cnn_convolution_pool_relu, "Conv5x5ReLUMaxPool2x2_0", 12, 14, 14, 12,
                     1, 32, 28, 28, 5, 1, 0, 2, 2, 1, True),
         mnist_conv_data(1, 32, 28, 28),
         {"D1": (32, 1, 32), "Tile0": (8, 2, 4), "D0": (1, 1, 1)},
         {"In": (0, 1120, 2), "Bias": (2240, 64, 1), "Filter": (2304, 1600, 1),
          "Out": (3904, 6144, 2), "ConvOut": (16192, 24576, 1)}, 40768,
         extra={"lines": {"In": (20, 20, 12)}}),
    Case("mnist_conv_1", "gap_sdk", MNIST, MNIST_MODEL,
         "newer generation, a parametric space (input features) cut into 8 tiles of 4 before "
         "the tiled space is: the innermost space first",
         mnist_build(P.cnn_convolution_pool_relu, "Conv5x5ReLUMaxPool2x2_1", 12, 14, 14, 12,
                     32, 64, 12, 12, 5, 1, 0, 2, 2, 1, True),
         mnist_conv_data(32, 64, 12, 12),
         {"D1": (64, 1, 64), "Tile0": (4, 1, 4), "D0": (4, 8, 4)},
         {"In": (0, 1152, 2), "Bias": (2304, 128, 1), "Filter": (2432, 12800, 2),
          "Out": (28032, 2048, 1), "ConvOut": (30080, 8192, 1)}, 38272),
]

# -- AutoTiler 3.0: the GAPuino GRU encoders (autotiler_version="3.0") ----------------------
# Read from each EncDecLayer.c's EncGRUlayer: loop counts and the "Ker Arg Iter Spaces"
# comment, L1 offsets and slots from "L1_Memory+offset+size*((TnInd_Total)%slots)".

GRU_ONE_LINE = "In", "H_0", "Kernel", "Bias", "Kernel2", "Bias2", "Z", "prod1", "prod2"


def gru_l1(offsets, n, rec2, rec):
    """The arguments' (offset, bytes per slot, slots): the one-line ones at ``offsets`` (in
    GRU_ONE_LINE's order: 27 shorts, N in-out shorts, 2N shorts, 2N ints, N shorts, N ints,
    2N shorts, N shorts, N ints), Rec_Kernel2 and Rec_Kernel as given."""
    sizes = (54, 2 * n, 4 * n, 8 * n, 2 * n, 4 * n, 4 * n, 2 * n, 4 * n)
    slots = (2, 3, 2, 2, 2, 2, 2, 2, 2)
    return {**{a: (o, b, k) for a, o, b, k in zip(GRU_ONE_LINE, offsets, sizes, slots)},
            "Rec_Kernel2": rec2, "Rec_Kernel": rec}


CASES += [
    Case("gapuino_gru_60", "GAPuino Seq2Seq", *gapuino("60_single_core", "1core/tiled", 45000),
         "AutoTiler 3.0: single-tile double-buffered arguments keep 2 slots (3 in-out), so "
         "the kernel is tiled; three tiled spaces share the budget: Tile1 whole, Tile0 84 of "
         "120 columns",
         gru_build(60, 45000, call_type=CALL_SEQUENTIAL), gru_data(60),
         {"Tile2": (1, 1, 1), "Tile1": (60, 1, 60), "Tile0": (84, 2, 36)},
         gru_l1((0, 112, 472, 952, 1912, 2152, 2632, 3112, 3352), 60, (3832, 7200, 2),
                (18232, 10080, 2)), 38392, extra={"pitch": {"In": 56}}),
    Case("gapuino_gru_150", "GAPuino Seq2Seq", *gapuino("150", "8core/tiled", 48000),
         "AutoTiler 3.0: two nested tiled spaces of equal needs (600 B a column) get equal "
         "shares, Tile1 also what Tile2 leaves: 32 and 31 columns where 32 and 32 fit",
         gru_build(150, 48000), gru_data(150),
         {"Tile2": (1, 1, 1), "Tile1": (32, 5, 22), "Tile0": (31, 10, 21)},
         gru_l1((0, 112, 1012, 2212, 4612, 5212, 6412, 7612, 8212), 150, (9412, 9600, 2),
                (28612, 9300, 2)), 47212),
    Case("gapuino_gru_200", "GAPuino Seq2Seq", *gapuino("200", "8core/tiled", 48000),
         "AutoTiler 3.0: nested tiled spaces sharing the budget, 22 and 21 columns where 22 "
         "and 22 fit",
         gru_build(200, 48000), gru_data(200),
         {"Tile2": (1, 1, 1), "Tile1": (22, 10, 2), "Tile0": (21, 20, 1)},
         gru_l1((0, 112, 1312, 2912, 6112, 6912, 8512, 10112, 10912), 200, (12512, 8800, 2),
                (30112, 8400, 2)), 46912),
    Case("gapuino_gru_100", "GAPuino Seq2Seq", *gapuino("100", "8core/RecKer2notile", 48000),
         "AutoTiler 3.0: a whole input buffer in the outer space, whose share is capped at "
         "what it holds: Tile0 53 columns where 54 fit",
         gru_build(100, 48000, rec2_buffer=True), gru_data(100),
         {"Tile1": (1, 1, 1), "Tile0": (53, 4, 41)},
         gru_l1((0, 112, 712, 1512, 3112, 23512, 24312, 25112, 25512), 100, (3512, 20000, 1),
                (26312, 10600, 2)), 47512),
]

# The same files' DecGRUlayer: the one-line arguments H_0 (in-out), Bias, Bias2, Dense_Kernel,
# Dense_Bias (one int), Z, Out (9 shorts), prod1, prod2 (offset, bytes per slot, slots).

GRU_DEC_ONE_LINE = ("H_0", "Bias", "Bias2", "Dense_Kernel", "Dense_Bias", "Z", "Out", "prod1",
                    "prod2")


def gru_dec_l1(offsets, n, rec2, rec):
    sizes = (2 * n, 8 * n, 4 * n, 2 * n, 4, 4 * n, 18, 2 * n, 4 * n)
    slots = (3, 2, 2, 2, 2, 2, 2, 2, 2)
    return {**{a: (o, b, k) for a, o, b, k in zip(GRU_DEC_ONE_LINE, offsets, sizes, slots)},
            "Rec_Kernel2": rec2, "Rec_Kernel": rec}


CASES += [
    Case("gapuino_gru_dec_60", "GAPuino Seq2Seq",
         *gapuino("60_single_core", "1core/tiled", 45000),
         "AutoTiler 3.0, the decoder: Tile0's share of 20659 B less 44 (4 B per kernel "
         "argument) holds 85 columns, not 86",
         gru_build(60, 45000, call_type=CALL_SEQUENTIAL, decoder=True), gru_dec_data(60),
         {"Tile2": (1, 1, 1), "Tile1": (60, 1, 60), "Tile0": (85, 2, 35)},
         gru_dec_l1((0, 360, 1320, 1800, 2040, 2048, 2528, 2568, 2808), 60, (3288, 7200, 2),
                    (17688, 10200, 2)), 38088, extra={"pitch": {"Out": 20}}),
    Case("gapuino_gru_dec_150", "GAPuino Seq2Seq", *gapuino("150", "8core/tiled", 48000),
         "AutoTiler 3.0, the decoder: 33 and 32 columns where 33 and 33 fit",
         gru_build(150, 48000, decoder=True), gru_dec_data(150),
         {"Tile2": (1, 1, 1), "Tile1": (33, 5, 18), "Tile0": (32, 10, 12)},
         gru_dec_l1((0, 900, 3300, 4500, 5100, 5108, 6308, 6348, 6948), 150, (8148, 9900, 2),
                    (27948, 9600, 2)), 47148),
    Case("gapuino_gru_dec_200", "GAPuino Seq2Seq", *gapuino("200", "8core/tiled", 48000),
         "AutoTiler 3.0, the decoder: 23 and 22 columns where 23 and 23 fit",
         gru_build(200, 48000, decoder=True), gru_dec_data(200),
         {"Tile2": (1, 1, 1), "Tile1": (23, 9, 16), "Tile0": (22, 19, 4)},
         gru_dec_l1((0, 1200, 4400, 6000, 6800, 6808, 8408, 8448, 9248), 200, (10848, 9200, 2),
                    (29248, 8800, 2)), 46848),
    Case("gapuino_gru_dec_100", "GAPuino Seq2Seq",
         *gapuino("100", "8core/RecKer2notile", 48000),
         "AutoTiler 3.0, the decoder: the outer space with its whole buffer capped, Tile0 55 "
         "columns where 56 fit",
         gru_build(100, 48000, rec2_buffer=True, decoder=True), gru_dec_data(100),
         {"Tile1": (1, 1, 1), "Tile0": (55, 4, 35)},
         gru_dec_l1((0, 600, 22200, 23000, 23400, 23408, 24208, 24248, 24648), 100,
                    (2200, 20000, 1), (25448, 11000, 2)), 47448),
]


# -- more layers of the same two networks: every MediumPar convolution -----------------------
# (name, InFeat, OutFeat, W, H, FSc, stride, pad, relu); L1 in placement order as the
# generated file gives it: Filter, Bias, Out, In (offset, bytes per slot, slots); tiles of
# the out-feature space (Tile0) and the in-feature space (Tile1) from its loop counts.

MEDPAR = [
    (PULP_DRONET, PULP_DRONET_MODEL, ("MedParConv_1x1_S2_4", 32, 32, 50, 50, 1, 2, 0, 0),
     (4, 11), [(0, 512, 2), (1024, 64, 1), (1088, 10000, 2), (21088, 15000, 2)]),
    (PULP_DRONET, PULP_DRONET_MODEL, ("MedParConv_3x3_S2_ReLU_5", 32, 64, 25, 25, 3, 2, 1, 1),
     (3, 8), [(0, 13824, 2), (27648, 128, 1), (27776, 8112, 2), (44000, 5000, 2)]),
    (PULP_DRONET, PULP_DRONET_MODEL, ("MedParConv_3x3_S1_6", 64, 64, 13, 13, 3, 1, 1, 0),
     (4, 8), [(0, 18432, 2), (36864, 128, 1), (36992, 5408, 2), (47808, 3042, 2)]),
    (PULP_DRONET, PULP_DRONET_MODEL, ("MedParConv_1x1_S2_7", 32, 64, 25, 25, 1, 2, 0, 0),
     (1, 3), [(0, 4096, 1), (4096, 128, 1), (4224, 21632, 1), (25856, 13750, 2)]),
    (PULP_DRONET, PULP_DRONET_MODEL, ("MedParConv_3x3_S2_ReLU_8", 64, 128, 13, 13, 3, 2, 1, 1),
     (8, 4), [(0, 18432, 2), (36864, 256, 1), (37120, 1568, 2), (40256, 6760, 2)]),
    (PULP_DRONET, PULP_DRONET_MODEL, ("MedParConv_3x3_S1_9", 128, 128, 7, 7, 3, 1, 1, 0),
     (16, 1), [(0, 18432, 2), (36864, 256, 1), (37120, 784, 2), (38688, 12544, 1)]),
    (PULP_DRONET, PULP_DRONET_MODEL, ("MedParConv_1x1_S1_ReLU_10", 64, 128, 13, 13, 1, 2, 0, 1),
     (1, 1), [(0, 16384, 1), (16384, 256, 1), (16640, 12544, 1), (29184, 21632, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_3x3_S2_ReLU_2", 32, 32, 27, 15, 3, 2, 1, 1),
     (1, 1), [(0, 18432, 1), (18432, 64, 1), (18496, 7168, 1), (25664, 25920, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_3x3_S1_3", 32, 32, 14, 8, 3, 1, 1, 0),
     (1, 1), [(0, 18432, 1), (18432, 64, 1), (18496, 7168, 1), (25664, 7168, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_1x1_S2_4", 32, 32, 27, 15, 1, 2, 0, 0),
     (1, 1), [(0, 2048, 1), (2048, 64, 1), (2112, 7168, 1), (9280, 25920, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_3x3_S2_ReLU_5", 32, 64, 14, 8, 3, 2, 1, 1),
     (1, 1), [(0, 36864, 1), (36864, 128, 1), (36992, 3584, 1), (40576, 7168, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_3x3_S1_6", 64, 64, 7, 4, 3, 1, 1, 0),
     (4, 1), [(0, 18432, 2), (36864, 128, 1), (36992, 896, 2), (38784, 3584, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_1x1_S2_7", 32, 64, 14, 8, 1, 2, 0, 0),
     (1, 1), [(0, 4096, 1), (4096, 128, 1), (4224, 3584, 1), (7808, 7168, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_3x3_S2_ReLU_8", 64, 128, 7, 4, 3, 2, 1, 1),
     (8, 1), [(0, 18432, 2), (36864, 256, 1), (37120, 256, 2), (37632, 3584, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_3x3_S1_9", 128, 128, 4, 2, 3, 1, 1, 0),
     (16, 1), [(0, 18432, 2), (36864, 256, 1), (37120, 128, 2), (37376, 2048, 1)]),
    (FRONTNET, FRONTNET_MODEL, ("MedParConv_1x1_S1_ReLU_10", 64, 128, 7, 4, 1, 2, 0, 1),
     (1, 1), [(0, 16384, 1), (16384, 256, 1), (16640, 2048, 1), (18688, 3584, 1)]),
]


def _medpar_case(generated, model, layer, counts, args) -> Case:
    name, nip, nop, w, h, f, stride, pad, relu = layer
    filt, bias, out, inp = args
    t0 = filt[1] // (nip * f * f * 2)
    t1 = inp[1] // (w * h * 2)
    spaces = {"Tile0": (t0, counts[0], nop - (counts[0] - 1) * t0),
              "Tile1": (t1, counts[1], nip - (counts[1] - 1) * t1)}
    project = "pulp-dronet" if generated is PULP_DRONET else "FrontNetPorting"
    return Case(f"{project}_{name}", project, generated, model,
                "a MediumPar convolution: nested tiled spaces or promotion",
                dronet(P.medium_par_out_feat_conv, name, nip, nop, w, h, f, stride, pad, relu,
                       0, 0, 0, 0, 0),
                medpar_data(nip, nop, w, h, f, stride, bool(relu)), spaces,
                {"Filter": filt, "Bias": bias, "Out": out, "In": inp},
                inp[0] + (inp[1] if inp[2] == 1 else -(-inp[1] // 4) * 4 * inp[2]),
                extra={"promoted": counts == (1, 1) and all(a[2] == 1 for a in args)})


CASES += [_medpar_case(*layer) for layer in MEDPAR]



# -- npukit's built-in generators with the real model's arguments -----------------------------
# gap_sdk 4.8's examples/autotiler/Mnist/MnistModel.c (the MNIST rows above: the same
# generated file, the same numbers) calls the CNN generators themselves; the built-ins must
# give every number the port gives.

MNIST_BUILTIN = {
    "mnist_conv_0": lambda m: m.CNN_ConvolutionPoolReLU(
        "Conv5x5ReLUMaxPool2x2_0", 0, 2, 2, 2, 2, 12, 14, 14, 12, 0, 0, 0, 0, 1, 32, 28, 28,
        KOP_CONV, 5, 5, 1, 1, 1, 1, 0, KOP_MAXPOOL, 2, 2, 1, 1, 2, 2, 1, KOP_RELU),
    "mnist_conv_1": lambda m: m.CNN_ConvolutionPoolReLU(
        "Conv5x5ReLUMaxPool2x2_1", 0, 2, 2, 2, 2, 12, 14, 14, 12, 0, 0, 0, 0, 32, 64, 12, 12,
        KOP_CONV, 5, 5, 1, 1, 1, 1, 0, KOP_MAXPOOL, 2, 2, 1, 1, 2, 2, 1, KOP_RELU),
    "mnist_linear": lambda m: m.CNN_LinearReLU(
        "LinearLayerReLU_1", 0, 2, 2, 2, 2, 12, 12, 8, 11, 0, 0, 0, 0, 64 * 4 * 4, 10,
        KOP_LINEAR, KOP_NONE),
}


def _rnd(x, n):
    """Round half up after a right shift by n (GAP's AT_NORM)."""
    x = np.asarray(x, np.int64)
    return x if n == 0 else (x + (1 << (n - 1))) >> n


def _shift(x, n):
    return np.asarray(x, np.int64) << n if n >= 0 else _rnd(x, -n)


def _wrap32(x):
    return (np.asarray(x, np.int64) + 2**31) % 2**32 - 2**31


MNIST_Q = {"mnist_conv_0": (12, 14, 14, 12), "mnist_conv_1": (12, 14, 14, 12),
           "mnist_linear": (12, 12, 8, 11)}


def builtin_oracle(case: Case, ins: dict) -> np.ndarray:
    """What npukit's built-ins compute (docs/graph.md), from whole planes: a single precision
    convolution normalised (AT_NORM) and saturated after each input feature, then ReLU and a
    2x2 max pooling; a linear layer in a 32-bit accumulator normalised once."""
    qi, qw, qb, qo = MNIST_Q[case.name]
    x, f, b = (ins[k].astype(np.int64) for k in ("In", "Filter", "Bias"))
    if case.name == "mnist_linear":
        acc = _shift(b.reshape(-1), qi + qw - qb) + f.reshape(b.size, -1) @ x.reshape(-1)
        return np.clip(_rnd(_wrap32(acc), qi + qw - qo), -32768, 32767)
    f = f.reshape(b.size, x.shape[0], 5, 5)
    n = qi + qw - qo
    v = np.clip(_shift(b.reshape(-1), qo - qb), -32768, 32767)[:, None, None]
    for ci in range(x.shape[0]):
        s = correlate(x[ci], f[:, ci], 1, (0, 0, 0, 0))
        v = np.clip(_rnd(_wrap32(v * (1 << n) + s), n), -32768, 32767)
    v = np.maximum(v, 0)
    h, w = v.shape[1] // 2, v.shape[2] // 2
    return v.reshape(v.shape[0], h, 2, w, 2).max(axis=(2, 4))


def mnist_builtin(case: Case):
    """(model, kernel) of ``case`` built by ``MnistModel.c``'s calls to the built-ins."""
    m = mnist_model()
    m.LoadCNNLibrary()
    MNIST_BUILTIN[case.name](m)
    return m, case.build()[1]
