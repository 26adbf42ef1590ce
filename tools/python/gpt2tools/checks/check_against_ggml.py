"""Checks gguf_blocks.py bit for bit against ggml's own C routines: quantize_row_*_ref and dequantize_row_* of a
prebuilt libggml-base.so (the one npm node-llama-cpp ships, tools only; see llama_cpp_check.mjs for installing it).
For every quantized type: our quantize() must produce ggml's bytes, and our dequantize() must produce ggml's
float32 bits, both on ggml's blocks and on blocks of random bytes (NaN/Inf scales included).

    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.checks.check_against_ggml [--lib PATH/libggml-base.so] [--blocks 2048]
"""
import argparse
import ctypes
import sys

import numpy as np

from gpt2tools import gguf_blocks as gb

DEFAULT_LIB = "/tmp/llama-check/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"
QUANTIZED = [name for name in gb.TYPES if name not in ("F32", "F16")]


def _symbol(lib, prefix, name):
    """ggml spells the K-quants with a capital K: quantize_row_q4_K_ref, dequantize_row_q6_K."""
    suffix = name.lower().replace("_k", "_K")
    return getattr(lib, prefix.format(suffix))


def ggml_quantize(lib, name, x):
    out = np.zeros(gb.row_bytes(name, x.size), np.uint8)
    _symbol(lib, "quantize_row_{}_ref", name)(x.ctypes.data, out.ctypes.data, x.size)
    return out.tobytes()


def ggml_dequantize(lib, name, raw, n_values):
    src = np.frombuffer(raw, np.uint8).copy()
    out = np.zeros(n_values, np.float32)
    _symbol(lib, "dequantize_row_{}", name)(src.ctypes.data, out.ctypes.data, n_values)
    return out


def test_data(rng, n_blocks):
    """n_blocks * 256 values: Gaussian blocks at several scales, all-positive, all-negative, constant, zero,
    outliers and tiny values, so every branch of the reference routines runs."""
    x = rng.standard_normal((n_blocks, 256)).astype(np.float32)
    x *= np.float32(10.0) ** rng.integers(-6, 2, size=(n_blocks, 1)).astype(np.float32)
    kinds = rng.integers(0, 8, size=n_blocks)
    x[kinds == 1] = np.abs(x[kinds == 1])
    x[kinds == 2] = -np.abs(x[kinds == 2])
    x[kinds == 3] = np.float32(0.25)
    x[kinds == 4] = 0
    x[kinds == 5, rng.integers(0, 256)] *= 100
    x[kinds == 6] *= np.float32(1e-12)
    x[kinds == 7, :128] = 0    # half-empty super-blocks: sub-blocks whose scale rounds to 0
    return x.ravel()


def same_bits(a, b):
    return np.array_equal(np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", default=DEFAULT_LIB)
    p.add_argument("--blocks", type=int, default=2048, help="256-value blocks of test data per type")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    lib = ctypes.CDLL(args.lib)
    for name in QUANTIZED:
        for prefix in ("quantize_row_{}_ref", "dequantize_row_{}"):
            fn = _symbol(lib, prefix, name)
            fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    rng = np.random.default_rng(args.seed)
    x = test_data(rng, args.blocks)
    failures = 0
    for name in QUANTIZED:
        ours, theirs = gb.quantize(name, x), ggml_quantize(lib, name, x)
        differing = np.flatnonzero(np.frombuffer(ours, np.uint8) != np.frombuffer(theirs, np.uint8))
        block_bytes = gb.TYPES[name][2]
        bad_blocks = np.unique(differing // block_bytes)
        random_raw = rng.integers(0, 256, size=len(theirs), dtype=np.uint8).tobytes()
        decode_ok = all(same_bits(gb.dequantize(name, raw, x.size), ggml_dequantize(lib, name, raw, x.size))
                        for raw in (theirs, random_raw))
        ok = bad_blocks.size == 0 and decode_ok
        failures += not ok
        n_blocks = len(theirs) // block_bytes
        quantized = "identical bytes" if bad_blocks.size == 0 else f"{bad_blocks.size} of {n_blocks} blocks differ"
        decoded = "identical bits" if decode_ok else "DIFFERENT"
        print(f"{name:5} quantize: {quantized}; dequantize: {decoded} ({x.size} values)")
    print("all identical to ggml" if not failures else f"{failures} types differ from ggml")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
