#!/usr/bin/env python3
"""Writes tests/fixtures/ggml-blocks/: one small matrix per ggml block type, quantized by gguf_blocks.quantize
(ggml's quantize_row_*_ref semantics) and dequantized by gguf_blocks.dequantize (the independent NumPy decoder),
so the engine's block formats can be checked bit for bit against them.

For each TYPE: TYPE.bin holds the matrix as a GGUF file stores it (rows of blocks, back to back) and TYPE.f32 its
dequantized values (float32 little-endian, row-major). manifest.json gives the shape. The rows cover the
cases that matter: several magnitudes, a row with one large outlier, an all-zero block, negative-only and
positive-only rows. Deterministic (NumPy's legacy RandomState, fixed seed).

    /usr/bin/python3 tools/make_block_fixtures.py [--out DIR]
"""
import argparse
import json
import os

import numpy as np

import gguf_blocks

TYPES = ["F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
N_OUT = 10  # not a multiple of the kernels' 4-row panels: the last rows are a partial panel
N_IN = 512  # two K-quant super-blocks, sixteen 32-value blocks


def matrix():
    rng = np.random.RandomState(20261130)
    w = rng.standard_normal((N_OUT, N_IN)).astype(np.float32)
    w *= np.float32(0.02) * (np.float32(4.0) ** np.arange(N_OUT, dtype=np.float32) / np.float32(64.0))[:, None]
    w[3, 77] = np.float32(5.0)        # one outlier
    w[4, 256:288] = np.float32(0.0)   # an all-zero block
    w[5] = -np.abs(w[5])              # negative only
    w[6] = np.abs(w[6])               # positive only
    return w


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "ggml-blocks"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    w = matrix()
    for type_ in TYPES:
        raw = gguf_blocks.quantize(type_, w)
        values = gguf_blocks.dequantize(type_, raw, w.size)
        with open(os.path.join(args.out, f"{type_}.bin"), "wb") as f:
            f.write(raw)
        with open(os.path.join(args.out, f"{type_}.f32"), "wb") as f:
            f.write(values.astype("<f4").tobytes())
        print(f"{type_}: {len(raw)} bytes, max |w - dequantized| {float(np.max(np.abs(values - w.ravel()))):.4g}")
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"n_out": N_OUT, "n_in": N_IN, "types": TYPES,
                   "made_by": "tools/make_block_fixtures.py"}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
