// The GGUF block formats the GPU multiplies, dequantized inside the kernels: each format's weight4(r, k, nIn), the
// values 4k .. 4k + 3 of weight row r (nIn values) as ggml's dequantize_row_* computes them, read straight from the
// file's ggml blocks (ggml-common.h, as wasm/bindings.cpp's matrixRows hands them over) in a buffer of u32 words.
// F16 counts as a format of 1-value blocks of 2 bytes (rows of nIn halves). Blocks are not 4-byte aligned in every
// format (Q8_0: 34 bytes, Q4_0: 18, Q5_0: 22, Q6_K: 210), so the bytes are read at any offset (wordAt); the fp16
// values and scales lie at even offsets and are widened with unpack2x16float (no shader-f16).
// `W` stands for the kernel's weight binding: blockSource(format, name) names it.

// The engine's format names (gpt2::weight_format_name) and how many values and bytes a block has.
export const BLOCK_FORMATS = {
  f16: { values: 1, bytes: 2 },
  q8_0: { values: 32, bytes: 34 },
  q4_0: { values: 32, bytes: 18 },
  q4_1: { values: 32, bytes: 20 },
  q5_0: { values: 32, bytes: 22 },
  q5_1: { values: 32, bytes: 24 },
  q4_k: { values: 256, bytes: 144 },
  q5_k: { values: 256, bytes: 176 },
  q6_k: { values: 256, bytes: 210 },
};

const BYTES = /* wgsl */ `
// The 4 bytes at byte offset b, any alignment (little-endian, byte b lowest).
fn wordAt(b: u32) -> u32 {
  let lo = W[b >> 2u];
  let s = (b & 3u) * 8u;
  if (s == 0u) { return lo; }
  return (lo >> s) | (W[(b >> 2u) + 1u] << (32u - s));
}
fn byteAt(b: u32) -> u32 { return (W[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu; }
// The fp16 at an even byte offset b.
fn halfAt(b: u32) -> f32 { return unpack2x16float(W[b >> 2u] >> ((b & 2u) * 8u)).x; }
// The low nibbles of a word's 4 bytes.
fn nibbles(w: u32) -> vec4<f32> {
  return vec4<f32>(f32(w & 15u), f32((w >> 8u) & 15u), f32((w >> 16u) & 15u), f32((w >> 24u) & 15u));
}
// Bits 0 .. 3 of h, each 16 or 0: the fifth bits of Q5_0 and Q5_1.
fn fifthBits(h: u32) -> vec4<f32> {
  return vec4<f32>(f32(h & 1u), f32((h >> 1u) & 1u), f32((h >> 2u) & 1u), f32((h >> 3u) & 1u)) * 16.0;
}
fn signedBytes(w: u32) -> vec4<f32> {
  let s = bitcast<i32>(w);
  return vec4<f32>(f32(extractBits(s, 0u, 8u)), f32(extractBits(s, 8u, 8u)),
                   f32(extractBits(s, 16u, 8u)), f32(extractBits(s, 24u, 8u)));
}
`;

// Q4_K and Q5_K: ggml's get_scale_min_k4, the 6-bit scale and min of sub-block j (of 32 values) from the 12 bytes
// at sb + 4, and the sub-block's factors d * scale and dmin * min (d, dmin: the halves at sb).
const SCALE_MIN_K4 = /* wgsl */ `
fn scaleMinK4(sb: u32, j: u32) -> vec2<f32> {
  var sm: vec2<u32>;
  if (j < 4u) {
    sm = vec2<u32>(byteAt(sb + 4u + j) & 63u, byteAt(sb + 8u + j) & 63u);
  } else {
    let q = byteAt(sb + 8u + j);
    sm = vec2<u32>((q & 15u) | ((byteAt(sb + j) >> 6u) << 4u), (q >> 4u) | ((byteAt(sb + 4u + j) >> 6u) << 4u));
  }
  let dm = unpack2x16float(W[sb >> 2u]);
  return vec2<f32>(dm.x * f32(sm.x), dm.y * f32(sm.y));
}
`;

// The 4-bit values 4q .. 4q + 3 of a 32-value block whose qs[16] start at byte b: value j < 16 in the low nibble
// of qs[j], j + 16 in its high one (Q4_0, Q4_1, Q5_0, Q5_1).
const NIBBLES4 = /* wgsl */ `
fn nibbles4(b: u32, q: u32) -> vec4<f32> { return nibbles(wordAt(b + 4u * (q % 4u)) >> (4u * (q / 4u))); }
`;

const WEIGHT4 = {
  // F16: rows of nIn halves (nIn % 4 == 0: each group of 4 is the two words at 8-byte offset r nIn 2 + 8k)
  f16: /* wgsl */ `
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let w = r * (nIn / 2u) + 2u * k;
  return vec4<f32>(unpack2x16float(W[w]), unpack2x16float(W[w + 1u]));
}`,
  // block_q8_0: half d; i8 qs[32]. y = qs * d
  q8_0: /* wgsl */ `
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let block = (r * (nIn / 32u) + k / 8u) * 34u;
  return signedBytes(wordAt(block + 2u + 4u * (k % 8u))) * halfAt(block);
}`,
  // block_q4_0: half d; u8 qs[16], value j < 16 in the low nibble of qs[j], j + 16 in its high one. y = (q - 8) * d
  q4_0: /* wgsl */ `${NIBBLES4}
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let block = (r * (nIn / 32u) + k / 8u) * 18u;
  return (nibbles4(block + 2u, k % 8u) - 8.0) * halfAt(block);
}`,
  // block_q4_1: half d, m; u8 qs[16] as Q4_0's. y = q * d + m
  q4_1: /* wgsl */ `${NIBBLES4}
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let block = (r * (nIn / 32u) + k / 8u) * 20u;
  let dm = unpack2x16float(W[block >> 2u]);
  return nibbles4(block + 4u, k % 8u) * dm.x + dm.y;
}`,
  // block_q5_0: half d; u8 qh[4] (bit j of the little-endian u32: 16 added to value j); u8 qs[16] as Q4_0's.
  // y = (q - 16) * d
  q5_0: /* wgsl */ `${NIBBLES4}
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let block = (r * (nIn / 32u) + k / 8u) * 22u;
  let q = k % 8u;
  return (nibbles4(block + 6u, q) + fifthBits(wordAt(block + 2u) >> (4u * q)) - 16.0) * halfAt(block);
}`,
  // block_q5_1: half d, m; u8 qh[4] as Q5_0's; u8 qs[16]. y = q * d + m
  q5_1: /* wgsl */ `${NIBBLES4}
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let block = (r * (nIn / 32u) + k / 8u) * 24u;
  let q = k % 8u;
  let dm = unpack2x16float(W[block >> 2u]);
  return (nibbles4(block + 8u, q) + fifthBits(W[(block + 4u) >> 2u] >> (4u * q))) * dm.x + dm.y;
}`,
  // block_q4_K: half d, dmin; u8 scales[12]; u8 qs[128]: 64-value chunk c is qs[32c ..] with its first 32 values
  // in the low nibbles, the next 32 in the high ones. y = d * scale * q - dmin * min per sub-block of 32.
  q4_k: /* wgsl */ `${SCALE_MIN_K4}
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let u = k / 8u;  // the 32-value sub-block of the row
  let sb = (r * (nIn / 256u) + u / 8u) * 144u;
  let j = u % 8u;
  let f = scaleMinK4(sb, j);
  let q = nibbles(W[(sb + 16u + 32u * (j / 2u) + 4u * (k % 8u)) >> 2u] >> (4u * (j % 2u)));
  return f.x * q - f.y;
}`,
  // block_q5_K: as Q4_K with u8 qh[32] at 16 (bit j of qh[l]: 16 added to value l of sub-block j), qs at 48.
  q5_k: /* wgsl */ `${SCALE_MIN_K4}
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let u = k / 8u;
  let sb = (r * (nIn / 256u) + u / 8u) * 176u;
  let j = u % 8u;
  let f = scaleMinK4(sb, j);
  let l = 4u * (k % 8u);
  let h = W[(sb + 16u + l) >> 2u] >> j;
  let high = vec4<f32>(f32(h & 1u), f32((h >> 8u) & 1u), f32((h >> 16u) & 1u), f32((h >> 24u) & 1u)) * 16.0;
  let q = nibbles(W[(sb + 48u + 32u * (j / 2u) + l) >> 2u] >> (4u * (j % 2u))) + high;
  return f.x * q - f.y;
}`,
  // block_q6_K: u8 ql[128]; u8 qh[64]; i8 scales[16]; half d. Per half h of 128 values, value 32k + l (k < 4) has
  // its low 4 bits in ql[64h + 32(k % 2) + l] (high nibble for k >= 2), its top 2 in bits 2k of qh[32h + l], and
  // the scale scales[8h + l / 16 + 2k]. y = d * scale * (q - 32), evaluated (d * scale) * (q - 32).
  q6_k: /* wgsl */ `
fn weight4(r: u32, k: u32, nIn: u32) -> vec4<f32> {
  let u = k / 8u;
  let sb = (r * (nIn / 256u) + u / 8u) * 210u;
  let h = (u % 8u) / 4u;
  let kk = u % 4u;
  let l = 4u * (k % 8u);
  let lo = wordAt(sb + 64u * h + 32u * (kk % 2u) + l) >> (4u * (kk / 2u));
  let hi = wordAt(sb + 128u + 32u * h + l) >> (2u * kk);
  let q = nibbles(lo) + 16.0 * vec4<f32>(f32(hi & 3u), f32((hi >> 8u) & 3u), f32((hi >> 16u) & 3u), f32((hi >> 24u) & 3u));
  let scale = f32(extractBits(bitcast<i32>(byteAt(sb + 192u + 8u * h + l / 16u + 2u * kk)), 0u, 8u));
  return (halfAt(sb + 208u) * scale) * (q - 32.0);
}`,
};

// The WGSL of format's weight4 over the binding called name.
export function blockSource(format, name) {
  return `${BYTES}${WEIGHT4[format]}\n`.replaceAll(/\bW\[/g, `${name}[`);
}
