// embed: x[t] = (first ? wpe[pos0 + t] : x[t]) + (token row of this part of wte, or 0 when the token lies in
// another part). One invocation per (column, token row): the work is a copy, nothing to share.
import { UNPACK_INT8 } from './common.js';
import { BLOCK_FORMATS, blockSource } from './blocks.js';

export const EMBED_WORKGROUP = 64;

// weightType: the element type of wte; value: WGSL expression of the embedding value for (row, c); prelude: the
// functions it calls.
function embedSource(weightType, value, prelude = UNPACK_INT8) {
  return /* wgsl */ `
${prelude}
@group(0) @binding(1) var<storage, read_write> x: array<f32>;      // (n, C) f32
@group(0) @binding(2) var<storage, read> tokens: array<u32>;       // (tokenOffset + n) u32
@group(0) @binding(3) var<storage, read> wte: array<${weightType}>; // fp32 (rows, C) f32, int8 (rows, C/4) u32, block formats (rows, C / values per block) blocks as u32 words
@group(0) @binding(4) var<storage, read> wteScale: array<f32>;     // int8: (rows) f32; fp32: unused
@group(0) @binding(5) var<storage, read> wpe: array<f32>;          // (n_ctx, C) f32

@compute @workgroup_size(${EMBED_WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let c = id.x;
  let t = id.y;
  if (c >= p.C || t >= p.n) { return; }
  let tok = tokens[p.tokenOffset + t];
  var e = 0.0;
  if (tok >= p.rowBegin && tok < p.rowEnd) {
    let row = tok - p.rowBegin;
    e = ${value};
  }
  let i = t * p.C + c;
  if (p.first != 0u) {
    x[i] = wpe[(p.pos0 + t) * p.C + c] + e;
  } else {
    x[i] = x[i] + e;
  }
}
`;
}

export const EMBED_SOURCES = {
  f32: embedSource('f32', 'wte[row * p.C + c]'),
  int8: embedSource('u32', 'unpackInt8(wte[row * (p.C / 4u) + c / 4u])[c % 4u] * wteScale[row]'),
  // a GGUF block format's rows dequantized as read (./blocks.js)
  ...Object.fromEntries(Object.keys(BLOCK_FORMATS).map((format) => [
    format, embedSource('u32', 'weight4(row, c / 4u, p.C)[c % 4u]', blockSource(format, 'wte'))])),
};
