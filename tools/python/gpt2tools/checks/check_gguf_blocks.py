"""Self-checks of gguf_blocks.py: hand-built blocks decode to the values their layout says, and every type's
quantize -> dequantize error stays within the format's bound on random data. Exits non-zero on a failure.

    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.checks.check_gguf_blocks
"""
import argparse
import struct
import sys

import numpy as np

from gpt2tools import gguf_blocks as gb


def half(value):
    """The 2 bytes of a float16 (value exactly representable)."""
    return struct.pack("<e", value)


def hand_built_cases():
    """(type, block bytes, expected float32 values) per type, each block written byte by byte from the layout."""
    j = np.arange(16)
    cases = []
    # Q4_0: d = 0.5; byte j = j (value j) | (15 - j) << 4 (value j + 16); x = (q - 8) * d.
    qs = bytes(int(v) for v in (j | ((15 - j) << 4)))
    cases.append(("Q4_0", half(0.5) + qs, np.concatenate([(j - 8) * 0.5, (7 - j) * 0.5])))
    # Q4_1: d = 0.25, m = -1; x = q * d + m.
    cases.append(("Q4_1", half(0.25) + half(-1.0) + qs, np.concatenate([j * 0.25 - 1, (15 - j) * 0.25 - 1])))
    # Q5_0: d = 1; qh = 0xFFFF0000 sets the fifth bit of values 16..31; byte j = j | j << 4; x = q - 16.
    qs5 = bytes(int(v) for v in (j | (j << 4)))
    cases.append(("Q5_0", half(1.0) + struct.pack("<I", 0xFFFF0000) + qs5, np.concatenate([j - 16, j])))
    # Q5_1: d = 2, m = 1; qh = 1 sets the fifth bit of value 0 only; x = q * d + m.
    expected = np.concatenate([j * 2 + 1, j * 2 + 1]).astype(np.float64)
    expected[0] = 16 * 2 + 1
    cases.append(("Q5_1", half(2.0) + half(1.0) + struct.pack("<I", 1) + qs5, expected))
    # Q8_0: d = 0.125, q = -16..15.
    q8 = np.arange(-16, 16)
    cases.append(("Q8_0", half(0.125) + q8.astype(np.int8).tobytes(), q8 * 0.125))
    cases += k_quant_cases()
    return cases


def k_quant_cases():
    """Q4_K and Q5_K with scales (1, 2, 3, 4, 17, 33, 50, 63) and mins (0, 5, 10, 63, 16, 32, 48, 7), whose 12
    packed bytes were worked out by hand; Q6_K with int8 scales -8..7."""
    sc = np.array([1, 2, 3, 4, 17, 33, 50, 63])
    mins = np.array([0, 5, 10, 63, 16, 32, 48, 7])
    packed = bytes([65, 130, 195, 196, 64, 133, 202, 63, 1, 1, 2, 127])
    l = np.arange(32)
    # Chunk c's byte l: sub-block 2c's value l in the low nibble, sub-block 2c + 1's in the high one.
    qs = bytes(int(v) for v in np.tile((l % 16) | ((15 - l % 16) << 4), 4))
    q = np.array([(l % 16) if s % 2 == 0 else 15 - l % 16 for s in range(8)])        # [8, 32]
    q4 = (1.0 * sc[:, None]) * q - 0.5 * mins[:, None]
    qh = bytes(range(32))                  # bit s of byte l: +16 on sub-block s's value l
    fifth = np.array([((l >> s) & 1) * 16 for s in range(8)])
    q5 = (1.0 * sc[:, None]) * (q + fifth) - 0.5 * mins[:, None]
    cases = [("Q4_K", half(1.0) + half(0.5) + packed + qs, q4.ravel()),
             ("Q5_K", half(1.0) + half(0.5) + packed + qh + qs, q5.ravel())]
    # Q6_K: value v = 128h + 32k + l has 6-bit q(v) = 7v mod 64; low nibbles in ql, top 2 bits in qh.
    q6 = (7 * np.arange(256)) % 64
    ql, qh6 = bytearray(128), bytearray(64)
    for h in range(2):
        for i in range(32):
            v = 128 * h + i
            ql[64 * h + i] = (q6[v] & 15) | ((q6[v + 64] & 15) << 4)
            ql[64 * h + 32 + i] = (q6[v + 32] & 15) | ((q6[v + 96] & 15) << 4)
            qh6[32 * h + i] = sum(int(q6[v + 32 * k] >> 4) << (2 * k) for k in range(4))
    scales6 = np.arange(-8, 8)
    expected6 = 0.5 * np.repeat(scales6, 16) * (q6 - 32)
    cases.append(("Q6_K", bytes(ql) + bytes(qh6) + scales6.astype(np.int8).tobytes() + half(0.5), expected6))
    return cases


# Per type: (bound on the largest error in a block, as a fraction of the block's largest magnitude (or its
# range for the affine formats); bound on the RMS error relative to the data's RMS). A 4-bit symmetric block
# steps by amax / 8 and clamps one end by one step; the K-quants' 6-bit scales add error on small sub-blocks.
ERROR_BOUNDS = {
    "F32": (0, 0), "F16": (2 ** -11, 2 ** -11), "Q8_0": (1 / 127, 0.008),
    "Q4_0": (1 / 8 + 1e-3, 0.10), "Q4_1": (1 / 15 + 1e-3, 0.09), "Q5_0": (1 / 16 + 1e-3, 0.05),
    "Q5_1": (1 / 31 + 1e-3, 0.045), "Q4_K": (1 / 8, 0.085), "Q5_K": (1 / 16, 0.045), "Q6_K": (1 / 32, 0.022),
}


def check_round_trip(name, x):
    """quantize -> dequantize of x stays within the type's bounds; returns a one-line summary."""
    raw = gb.quantize(name, x)
    assert len(raw) == gb.row_bytes(name, x.size), f"{name}: wrong byte count"
    err = gb.dequantize(name, raw, x.size) - x
    block = max(gb.TYPES[name][1], 32)
    xb, eb = x.reshape(-1, block), np.abs(err).reshape(-1, block)
    affine = name in ("Q4_1", "Q5_1", "Q4_K", "Q5_K")
    spread = (xb.max(axis=1) - np.minimum(xb.min(axis=1), 0)) if affine else np.abs(xb).max(axis=1)
    max_bound, rms_bound = ERROR_BOUNDS[name]
    worst = float(np.max(eb.max(axis=1) / np.where(spread > 0, spread, 1)))
    rms = float(np.sqrt(np.mean(err.astype(np.float64) ** 2) / np.mean(x.astype(np.float64) ** 2)))
    assert worst <= max_bound, f"{name}: block error {worst:.4g} of its scale exceeds {max_bound:.4g}"
    assert rms <= rms_bound, f"{name}: relative RMS error {rms:.4g} exceeds {rms_bound:.4g}"
    assert gb.quantize(name, x) == raw, f"{name}: quantize is not deterministic"
    return (f"{name:5} max block error {worst:.4f} of its scale (bound {max_bound:.4f}), "
            f"rms {rms:.4f} (bound {rms_bound})")


def random_data(seed):
    """256 blocks of 256 values: Gaussian at GPT-2's weight scale, with a zero block, an all-positive block,
    a constant block and a block with one outlier, the cases that change the formats' scale choices."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((256, 256)) * 0.02).astype(np.float32)
    x[1] = 0
    x[2] = np.abs(x[2])
    x[3] = 0.5
    x[4, 17] = 1.0
    return x.ravel()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=12)
    args = p.parse_args()
    failures = 0
    for name, raw, expected in hand_built_cases():
        got = gb.dequantize(name, raw, len(expected))
        ok = np.array_equal(got, np.asarray(expected, np.float32))
        failures += not ok
        print(f"hand-built {name:5} block decodes to its layout's values: {'ok' if ok else 'FAILED'}")
    x = random_data(args.seed)
    for name in gb.TYPES:
        try:
            print("round trip " + check_round_trip(name, x))
        except AssertionError as e:
            failures += 1
            print(f"round trip FAILED: {e}")
    print("all checks passed" if not failures else f"{failures} checks failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
