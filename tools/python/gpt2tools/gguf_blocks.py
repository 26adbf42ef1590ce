"""ggml's tensor block formats in NumPy: dequantize every type GPT-2 GGUF files use, and quantize them.

Written from the published block layouts (ggml's ggml-common.h) and the reference routines' semantics
(ggml-quants.c: dequantize_row_*, quantize_row_*_ref, make_qkx2_quants, make_qx_quants); it shares no code
with the engine, so the engine's decoder can be checked bit for bit against it.

Block layouts (little-endian; "half" is an IEEE float16; a block covers `block_size` values):

    type  id  block bytes  layout
    F32    0      1     4  float
    F16    1      1     2  half
    Q4_0   2     32    18  half d; u8 qs[16]                   x = (q - 8) * d
    Q4_1   3     32    20  half d, m; u8 qs[16]                x = q * d + m
    Q5_0   6     32    22  half d; u32 qh; u8 qs[16]           x = (q - 16) * d
    Q5_1   7     32    24  half d, m; u32 qh; u8 qs[16]        x = q * d + m
    Q8_0   8     32    34  half d; i8 qs[32]                   x = q * d
    Q4_K  12    256   144  half d, dmin; u8 scales[12]; u8 qs[128]
    Q5_K  13    256   176  half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
    Q6_K  14    256   210  u8 ql[128]; u8 qh[64]; i8 scales[16]; half d

In the 32-value formats byte j of qs holds value j in its low nibble and value j + 16 in its high one; bit j
of qh is the fifth bit of value j. The K-quants' super-block of 256 has 8 sub-blocks of 32 (Q4_K, Q5_K:
6-bit scales and mins packed in 12 bytes) or 16 of 16 (Q6_K: int8 scales).

Arithmetic is float32 in ggml's order with every product rounded separately (ggml's C without FMA
contraction); float16 <-> float32 conversions round to nearest even, as ggml's do.
"""
import numpy as np

QK = 32       # values per block of the legacy formats
QK_K = 256    # values per K-quant super-block

# name -> (ggml type id, values per block, bytes per block)
TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2),
    "Q4_0": (2, QK, 18), "Q4_1": (3, QK, 20), "Q5_0": (6, QK, 22), "Q5_1": (7, QK, 24), "Q8_0": (8, QK, 34),
    "Q4_K": (12, QK_K, 144), "Q5_K": (13, QK_K, 176), "Q6_K": (14, QK_K, 210),
}
NAME_OF_ID = {type_id: name for name, (type_id, _, _) in TYPES.items()}
GROUP_MAX_EPS = np.float32(1e-15)
F32 = np.float32


def type_name(type_):
    """A type given as its name ("Q4_K", any case) or its ggml id (12) -> its name; unknown types raise."""
    if isinstance(type_, str) and type_.upper() in TYPES:
        return type_.upper()
    if isinstance(type_, (int, np.integer)) and int(type_) in NAME_OF_ID:
        return NAME_OF_ID[int(type_)]
    raise ValueError(f"unsupported tensor type {type_!r}")


def row_bytes(type_, n_values):
    """Bytes that n_values of a type take; n_values must be a whole number of blocks."""
    _, block_size, block_bytes = TYPES[type_name(type_)]
    if n_values % block_size:
        raise ValueError(f"{type_name(type_)}: {n_values} values are not a whole number of {block_size}-value blocks")
    return n_values // block_size * block_bytes


def _blocks(type_, raw, n_values):
    """raw bytes -> uint8 array [n_blocks, block_bytes], checking the size."""
    name = type_name(type_)
    need = row_bytes(name, n_values)
    raw = np.frombuffer(raw, dtype=np.uint8) if not isinstance(raw, np.ndarray) else raw.view(np.uint8).ravel()
    if raw.size != need:
        raise ValueError(f"{name}: {n_values} values need {need} bytes, got {raw.size}")
    return raw.reshape(-1, TYPES[name][2])


def _half(blocks, offset):
    """The float16 at byte `offset` of each block -> float32 [n_blocks, 1] (exact)."""
    return blocks[:, offset:offset + 2].copy().view("<f2").astype(F32)


def _nibbles(qs):
    """qs [n, 16] -> [n, 32] values: low nibbles are values 0..15, high nibbles values 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)


def _fifth_bits(qh_bytes):
    """qh [n, 4] (a little-endian u32 per block) -> [n, 32] with bit j of the u32 as 0 or 16."""
    qh = qh_bytes.copy().view("<u4").astype(np.uint32)  # [n, 1]
    return (((qh >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.int32)


def _scale_min_k4(scales):
    """Q4_K/Q5_K's 12 packed bytes [n, 12] -> (scales [n, 8], mins [n, 8]) as 6-bit integers
    (ggml's get_scale_min_k4: sub-blocks 0-3 in the low 6 bits of bytes 0-3 / 4-7, sub-blocks 4-7 split
    between the nibbles of bytes 8-11 and the top 2 bits of bytes 0-7)."""
    s = scales.astype(np.int32)
    sc_low, m_low = s[:, 0:4] & 63, s[:, 4:8] & 63
    sc_high = (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)
    m_high = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return np.concatenate([sc_low, sc_high], axis=1), np.concatenate([m_low, m_high], axis=1)


def _dequantize_q4_0(b):
    return (_nibbles(b[:, 2:18]) - 8).astype(F32) * _half(b, 0)


def _dequantize_q4_1(b):
    return _nibbles(b[:, 4:20]).astype(F32) * _half(b, 0) + _half(b, 2)


def _dequantize_q5_0(b):
    q = _nibbles(b[:, 6:22]) | _fifth_bits(b[:, 2:6])
    return (q - 16).astype(F32) * _half(b, 0)


def _dequantize_q5_1(b):
    q = _nibbles(b[:, 8:24]) | _fifth_bits(b[:, 4:8])
    return q.astype(F32) * _half(b, 0) + _half(b, 2)


def _dequantize_q8_0(b):
    return b[:, 2:34].view(np.int8).astype(F32) * _half(b, 0)


def _k_sub_block_values(qs, qh=None):
    """Q4_K/Q5_K quants [n, 128] (+ qh [n, 32]) -> [n, 8, 32] integers. Each 64-value chunk c uses qs
    bytes 32c..32c+31: low nibbles are sub-block 2c, high nibbles sub-block 2c+1; their fifth bits are bits
    2c and 2c+1 of qh."""
    chunks = qs.reshape(-1, 4, 32).astype(np.int32)
    q = np.stack([chunks & 0x0F, chunks >> 4], axis=2).reshape(-1, 8, 32)  # sub-block 2c + {0, 1}
    if qh is not None:
        bit = np.arange(8, dtype=np.int32).reshape(1, 8, 1)
        q = q | (((qh.astype(np.int32)[:, None, :] >> bit) & 1) << 4)
    return q


def _dequantize_qk(b, qs_at, qh_at=None):
    """Q4_K / Q5_K: y = (d * sc) * q - (dmin * m) per sub-block."""
    sc, m = _scale_min_k4(b[:, 4:16])
    d1 = _half(b, 0) * sc.astype(F32)       # [n, 8]
    m1 = _half(b, 2) * m.astype(F32)        # [n, 8]
    q = _k_sub_block_values(b[:, qs_at:qs_at + 128], None if qh_at is None else b[:, qh_at:qh_at + 32])
    return (d1[:, :, None] * q.astype(F32) - m1[:, :, None]).reshape(-1, QK_K)


def _q6_k_values(ql, qh):
    """Q6_K quants ql [n, 128], qh [n, 64] -> [n, 256] integers in 0..63. Per 128-value half h: values
    32*k + l (k = 0..3) have their low nibble in ql[64h + l] (k = 0, 2: low/high) or ql[64h + 32 + l]
    (k = 1, 3), and their top 2 bits at bits 2k of qh[32h + l]."""
    ql = ql.reshape(-1, 2, 2, 32).astype(np.int32)   # [n, half, ql row 0/1, l]
    qh = qh.reshape(-1, 2, 32).astype(np.int32)      # [n, half, l]
    low = np.stack([ql[:, :, 0] & 0x0F, ql[:, :, 1] & 0x0F, ql[:, :, 0] >> 4, ql[:, :, 1] >> 4], axis=2)
    high = np.stack([(qh >> (2 * k)) & 3 for k in range(4)], axis=2)
    return (low | (high << 4)).reshape(-1, QK_K)     # [n, half, k, l] -> value 128h + 32k + l


def _dequantize_q6_k(b):
    """y = (d * scale[value // 16]) * (q - 32)."""
    q = _q6_k_values(b[:, 0:128], b[:, 128:192]) - 32
    scales = b[:, 192:208].view(np.int8).astype(F32)           # [n, 16]
    ds = _half(b, 208) * scales                                  # [n, 16]
    return (np.repeat(ds, 16, axis=1) * q.astype(F32))


_DEQUANTIZERS = {
    "Q4_0": _dequantize_q4_0, "Q4_1": _dequantize_q4_1, "Q5_0": _dequantize_q5_0, "Q5_1": _dequantize_q5_1,
    "Q8_0": _dequantize_q8_0, "Q4_K": lambda b: _dequantize_qk(b, 16), "Q5_K": lambda b: _dequantize_qk(b, 48, 16),
    "Q6_K": _dequantize_q6_k,
}


def dequantize(type_, raw, n_values):
    """raw bytes of n_values of a type -> float32 [n_values], exactly as ggml's dequantize_row_* computes."""
    name = type_name(type_)
    if name == "F32":
        return _blocks(name, raw, n_values).copy().view("<f4").astype(F32).ravel()
    if name == "F16":
        return _blocks(name, raw, n_values).copy().view("<f2").astype(F32).ravel()
    with np.errstate(over="ignore", invalid="ignore"):
        return _DEQUANTIZERS[name](_blocks(name, raw, n_values)).astype(F32).ravel()


# ---- quantization: ggml's quantize_row_*_ref, vectorized over blocks, float32 in ggml's order ----

def _nearest_int(values):
    """ggml's nearest_int: round half to even (its 1.5 * 2^23 trick, valid for |v| < 2^22)."""
    return np.rint(values).astype(np.int32)


def _to_half(values):
    """float32 -> float16 bytes-ready array, rounding to nearest even (ggml's FP32_TO_FP16)."""
    return np.asarray(values, dtype=F32).astype("<f2")


def _half_bytes(values):
    """float32 [n] -> uint8 [n, 2], the float16 of each."""
    return _to_half(values).reshape(-1, 1).view(np.uint8)


def _truncate_to_int8(values):
    """C's (int8_t) cast of a float in range: truncation toward zero."""
    return np.trunc(values).astype(np.int32)


def _pack_nibbles(q):
    """[n, 32] integers 0..15 -> [n, 16] bytes: value j low, value j + 16 high."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def _pack_fifth_bits(q):
    """[n, 32] integers 0..31 -> [n, 4] bytes of the u32 whose bit j is bit 4 of value j."""
    bits = ((q >> 4) & 1).astype(np.uint32) << np.arange(32, dtype=np.uint32)
    return np.bitwise_or.reduce(bits, axis=1).astype("<u4").reshape(-1, 1).view(np.uint8)


def _signed_absmax(x):
    """The value of largest magnitude in each row (the first such, as ggml's strict '<' scan keeps)."""
    return x[np.arange(x.shape[0]), np.argmax(np.abs(x), axis=1)]


def _inverse(d):
    """ggml's `id = d ? 1.0f/d : 0.0f`."""
    with np.errstate(divide="ignore"):
        return np.where(d != 0, F32(1) / d, F32(0)).astype(F32)


def _quantize_q4_0(x):
    d = (_signed_absmax(x) / F32(-8)).astype(F32)
    q = np.minimum(15, _truncate_to_int8(x * _inverse(d)[:, None] + F32(8.5)))
    return np.concatenate([_half_bytes(d), _pack_nibbles(q)], axis=1)


def _quantize_q5_0(x):
    d = (_signed_absmax(x) / F32(-16)).astype(F32)
    q = np.minimum(31, _truncate_to_int8(x * _inverse(d)[:, None] + F32(16.5)))
    return np.concatenate([_half_bytes(d), _pack_fifth_bits(q), _pack_nibbles(q & 0x0F)], axis=1)


def _min_max_scale(x, levels):
    """(d, min) of the affine formats: d = (max - min) / levels."""
    lo, hi = x.min(axis=1), x.max(axis=1)
    return ((hi - lo) / F32(levels)).astype(F32), lo


def _quantize_q4_1(x):
    d, lo = _min_max_scale(x, 15)
    q = np.minimum(15, _truncate_to_int8((x - lo[:, None]) * _inverse(d)[:, None] + F32(0.5)))
    return np.concatenate([_half_bytes(d), _half_bytes(lo), _pack_nibbles(q)], axis=1)


def _quantize_q5_1(x):
    d, lo = _min_max_scale(x, 31)
    q = _truncate_to_int8((x - lo[:, None]) * _inverse(d)[:, None] + F32(0.5))
    return np.concatenate([_half_bytes(d), _half_bytes(lo), _pack_fifth_bits(q), _pack_nibbles(q & 0x0F)], axis=1)


def _quantize_q8_0(x):
    d = (np.abs(x).max(axis=1) / F32(127)).astype(F32)
    v = x * _inverse(d)[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + F32(0.5))).astype(np.int8)  # C's roundf: half away from zero
    return np.concatenate([_half_bytes(d), q.view(np.uint8)], axis=1)


def _make_qkx2_quants(x, weights, nmax, rmin, rdelta, nstep):
    """ggml's make_qkx2_quants for every row of x [n, 32] at once (use_mad false): the scale and -min of
    an affine fit q * scale + min, searched over nstep candidate scales, minimising the weighted squared
    error; candidates step 0..nstep inclusive. Sums run element by element in float32, in ggml's order.
    Returns (scale [n], -min [n], L [n, 32])."""
    n, count = x.shape
    lo, hi = x[:, 0].copy(), x[:, 0].copy()
    sum_w = weights[:, 0].copy()
    sum_x = (sum_w * x[:, 0]).astype(F32)
    for i in range(1, count):
        lo, hi = np.minimum(lo, x[:, i]), np.maximum(hi, x[:, i])
        sum_w = (sum_w + weights[:, i]).astype(F32)
        sum_x = (sum_x + weights[:, i] * x[:, i]).astype(F32)
    lo = np.minimum(lo, F32(0))
    flat = hi <= lo

    def quantize_at(iscale, at):
        # ggml clamps before rounding so that an infinite or NaN value (when `at` is near max) gives 0 or nmax.
        v = (iscale[:, None] * (x - at[:, None])).astype(F32)
        return np.where(v > 0, _nearest_int(np.minimum(v, F32(nmax))), 0)

    def weighted_error(scale, mins, levels):
        err = np.zeros(n, F32)
        for i in range(count):
            diff = (scale * levels[:, i].astype(F32) + mins - x[:, i]).astype(F32)
            err = (err + weights[:, i] * (diff * diff)).astype(F32)
        return err

    iscale = (F32(nmax) / np.where(flat, F32(1), hi - lo)).astype(F32)
    scale = (F32(1) / iscale).astype(F32)
    mins = lo.copy()
    levels = np.clip(_nearest_int(iscale[:, None] * (x - lo[:, None])), 0, nmax)
    best = weighted_error(scale, mins, levels)
    for step in range(nstep + 1):
        # ggml divides by max minus the best min so far, which moves as candidates win.
        with np.errstate(divide="ignore"):
            iscale = ((F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / (hi - mins)).astype(F32)
        aux = quantize_at(iscale, mins)
        sum_l, sum_l2, sum_xl = np.zeros(n, F32), np.zeros(n, F32), np.zeros(n, F32)
        for i in range(count):
            wl = (weights[:, i] * aux[:, i].astype(F32)).astype(F32)
            sum_l = (sum_l + wl).astype(F32)
            sum_l2 = (sum_l2 + wl * aux[:, i].astype(F32)).astype(F32)
            sum_xl = (sum_xl + wl * x[:, i]).astype(F32)
        det = (sum_w * sum_l2 - sum_l * sum_l).astype(F32)
        fits = det > 0
        safe_det = np.where(fits, det, F32(1))
        this_scale = ((sum_w * sum_xl - sum_x * sum_l) / safe_det).astype(F32)
        this_min = ((sum_l2 * sum_x - sum_l * sum_xl) / safe_det).astype(F32)
        positive_min = this_min > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            this_scale = np.where(positive_min, sum_xl / sum_l2, this_scale).astype(F32)
        this_min = np.where(positive_min, F32(0), this_min).astype(F32)
        err = weighted_error(this_scale, this_min, aux)
        better = fits & (err < best)
        levels = np.where(better[:, None], aux, levels)
        best = np.where(better, err, best)
        scale = np.where(better, this_scale, scale)
        mins = np.where(better, this_min, mins)
    scale = np.where(flat, F32(0), scale).astype(F32)
    mins = np.where(flat, lo, mins)
    levels = np.where(flat[:, None], 0, levels)
    return scale, (-mins).astype(F32), levels


def _pack_scale_min_k4(ls, lm):
    """6-bit scales and mins [n, 8] -> the 12 packed bytes [n, 12] that _scale_min_k4 reads back."""
    out = np.zeros((ls.shape[0], 12), np.int32)
    out[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    out[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (ls[:, 4:8] & 0x0F) | ((lm[:, 4:8] & 0x0F) << 4)
    return out.astype(np.uint8)


def _quantize_qk(x, nmax, rmin, nstep):
    """quantize_row_q4_K_ref / q5_K_ref up to the integer levels: returns (d, dmin, packed scales, L [n, 256])."""
    n = x.shape[0]
    sub = x.reshape(n * 8, 32)
    sum_x2 = np.zeros(n * 8, F32)
    for i in range(32):
        sum_x2 = (sum_x2 + sub[:, i] * sub[:, i]).astype(F32)
    av_x = np.sqrt(sum_x2 / F32(32)).astype(F32)
    weights = (av_x[:, None] + np.abs(sub)).astype(F32)
    scales, mins, search_levels = _make_qkx2_quants(sub, weights, nmax, rmin, 0.1, nstep)
    scales, mins = scales.reshape(n, 8), mins.reshape(n, 8)
    max_scale = np.maximum(scales.max(axis=1), F32(0))
    max_min = np.maximum(mins.max(axis=1), F32(0))
    with np.errstate(divide="ignore"):
        inv_scale = np.where(max_scale > 0, F32(63) / max_scale, F32(0)).astype(F32)
        inv_min = np.where(max_min > 0, F32(63) / max_min, F32(0)).astype(F32)
    ls = np.minimum(63, _nearest_int(inv_scale[:, None] * scales))
    lm = np.minimum(63, _nearest_int(inv_min[:, None] * mins))
    packed = _pack_scale_min_k4(ls, lm)
    d = _to_half(max_scale / F32(63))
    dmin = _to_half(max_min / F32(63))
    sc, m = _scale_min_k4(packed)
    d_sub = (d.astype(F32)[:, None] * sc.astype(F32)).astype(F32)        # [n, 8]
    dm_sub = (dmin.astype(F32)[:, None] * m.astype(F32)).astype(F32)     # [n, 8]
    safe_d = np.where(d_sub != 0, d_sub, F32(1))
    levels = np.clip(_nearest_int((x.reshape(n, 8, 32) + dm_sub[:, :, None]) / safe_d[:, :, None]), 0, nmax)
    # ggml skips a sub-block whose scale rounds to 0, keeping the levels its search found.
    levels = np.where((d_sub != 0)[:, :, None], levels, search_levels.reshape(n, 8, 32))
    return d, dmin, packed, levels


def _pack_k_quants(levels):
    """Levels [n, 8, 32] -> qs [n, 128]: chunk c holds sub-block 2c in low nibbles, 2c + 1 in high."""
    pairs = levels.reshape(-1, 4, 2, 32)
    return ((pairs[:, :, 0] & 0x0F) | ((pairs[:, :, 1] & 0x0F) << 4)).reshape(-1, 128).astype(np.uint8)


def _quantize_q4_k(x):
    d, dmin, packed, levels = _quantize_qk(x, 15, -1.0, 20)
    halves = np.stack([d, dmin], axis=1).view(np.uint8)
    return np.concatenate([halves, packed, _pack_k_quants(levels)], axis=1)


def _quantize_q5_k(x):
    d, dmin, packed, levels = _quantize_qk(x, 31, -0.5, 15)
    bit = np.arange(8, dtype=np.int32).reshape(1, 8, 1)
    qh = np.bitwise_or.reduce(((levels >> 4) & 1) << bit, axis=1).astype(np.uint8)   # [n, 32]
    halves = np.stack([d, dmin], axis=1).view(np.uint8)
    return np.concatenate([halves, packed, qh, _pack_k_quants(levels)], axis=1)


def _make_qx_quants(x, nmax):
    """ggml's make_qx_quants with rmse_type 1 (weights x^2) for every row of x [n, 16]: a symmetric scale
    searched over 19 candidates. Returns (scale [n], levels + nmax [n, 16]); 0 and 0 for an all-zero row."""
    n, count = x.shape
    top = _signed_absmax(x)
    tiny = np.abs(top) < GROUP_MAX_EPS
    safe_top = np.where(tiny, F32(1), top).astype(F32)

    def sums(iscale):
        levels = np.clip(_nearest_int(iscale[:, None] * x), -nmax, nmax - 1)
        sum_lx, sum_l2 = np.zeros(n, F32), np.zeros(n, F32)
        for i in range(count):
            w = (x[:, i] * x[:, i]).astype(F32)
            lf = levels[:, i].astype(F32)
            sum_lx = (sum_lx + (w * x[:, i]).astype(F32) * lf).astype(F32)
            sum_l2 = (sum_l2 + (w * lf).astype(F32) * lf).astype(F32)
        return sum_lx, sum_l2, levels

    sum_lx, sum_l2, levels = sums((F32(-nmax) / safe_top).astype(F32))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(sum_l2 != 0, sum_lx / sum_l2, F32(0)).astype(F32)
    best = (scale * sum_lx).astype(F32)
    for step in range(-9, 10):
        if step == 0:
            continue
        lx, l2, candidate = sums((-(F32(nmax) + F32(0.1) * F32(step)) / safe_top).astype(F32))
        better = (l2 > 0) & ((lx * lx).astype(F32) > (best * l2).astype(F32))
        levels = np.where(better[:, None], candidate, levels)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(better, lx / l2, scale).astype(F32)
        best = np.where(better, (scale * lx).astype(F32), best).astype(F32)
    return np.where(tiny, F32(0), scale).astype(F32), np.where(tiny[:, None], 0, levels + nmax)


def _quantize_q6_k(x):
    n = x.shape[0]
    scales, search_levels = _make_qx_quants(x.reshape(n * 16, 16), 32)
    scales = scales.reshape(n, 16)
    max_scale = _signed_absmax(scales)
    empty = np.abs(max_scale) < GROUP_MAX_EPS
    with np.errstate(divide="ignore"):
        iscale = np.where(empty, F32(0), F32(-128) / np.where(empty, F32(1), max_scale)).astype(F32)
        d = _to_half(np.where(empty, F32(0), F32(1) / np.where(empty, F32(1), iscale)))
    sc = np.minimum(127, _nearest_int(iscale[:, None] * scales))               # [n, 16] in -128..127
    d_sub = (d.astype(F32)[:, None] * sc.astype(F32)).astype(F32)              # [n, 16]
    safe_d = np.where(d_sub != 0, d_sub, F32(1))
    levels = np.clip(_nearest_int(x.reshape(n, 16, 16) / safe_d[:, :, None]), -32, 31) + 32
    # As in Q4_K, a sub-block whose scale rounds to 0 keeps the levels its search found.
    levels = np.where((d_sub != 0)[:, :, None], levels, search_levels.reshape(n, 16, 16)).reshape(n, 2, 4, 32)
    ql = np.stack([(levels[:, :, 0] & 0x0F) | ((levels[:, :, 2] & 0x0F) << 4),
                   (levels[:, :, 1] & 0x0F) | ((levels[:, :, 3] & 0x0F) << 4)], axis=2).reshape(n, 128)
    qh = sum((levels[:, :, k] >> 4) << (2 * k) for k in range(4)).reshape(n, 64)
    out = np.concatenate([ql.astype(np.uint8), qh.astype(np.uint8), sc.astype(np.int8).view(np.uint8),
                          d.reshape(-1, 1).view(np.uint8)], axis=1)
    out[empty] = 0
    return out


_QUANTIZERS = {
    "Q4_0": _quantize_q4_0, "Q4_1": _quantize_q4_1, "Q5_0": _quantize_q5_0, "Q5_1": _quantize_q5_1,
    "Q8_0": _quantize_q8_0, "Q4_K": _quantize_q4_k, "Q5_K": _quantize_q5_k, "Q6_K": _quantize_q6_k,
}


def quantize(type_, values):
    """float32 values (a whole number of blocks) -> the bytes of that type, as ggml's quantize_row_*_ref."""
    name = type_name(type_)
    x = np.ascontiguousarray(values, dtype=F32).ravel()
    if name == "F32":
        return x.astype("<f4").tobytes()
    if name == "F16":
        return x.astype("<f2").tobytes()
    block_size = TYPES[name][1]
    row_bytes(name, x.size)  # checks whole blocks
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(_QUANTIZERS[name](x.reshape(-1, block_size))).tobytes()
