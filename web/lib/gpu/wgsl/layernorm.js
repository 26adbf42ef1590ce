// layernorm: one workgroup per row; mean, then the variance around it (two passes over the row, which stays in
// cache: C is at most a few thousand), each summed by a shared-memory tree.
export const LAYERNORM_WORKGROUP = 128;

export const LAYERNORM_SOURCE = /* wgsl */ `
const WG = ${LAYERNORM_WORKGROUP}u;
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // (rowOffset + n, C) f32
@group(0) @binding(2) var<storage, read> input: array<f32>;     // (rowOffset + n, C) f32
@group(0) @binding(3) var<storage, read> weight: array<f32>;    // (C) f32
@group(0) @binding(4) var<storage, read> bias: array<f32>;      // (C) f32

var<workgroup> partial: array<f32, WG>;

// The workgroup's sum of v; every invocation gets it.
fn workgroupSum(v: f32, lid: u32) -> f32 {
  partial[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { partial[lid] += partial[lid + s]; }
    workgroupBarrier();
  }
  let total = partial[0];
  // partial is written again by the next call.
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  if (wid.x >= p.n) { return; }
  let base = (p.rowOffset + wid.x) * p.C;
  var s = 0.0;
  for (var c = lid; c < p.C; c += WG) { s += input[base + c]; }
  let mean = workgroupSum(s, lid) / f32(p.C);
  var d2 = 0.0;
  for (var c = lid; c < p.C; c += WG) {
    let d = input[base + c] - mean;
    d2 += d * d;
  }
  let variance = workgroupSum(d2, lid) / f32(p.C);
  let inv = 1.0 / sqrt(variance + p.eps);
  for (var c = lid; c < p.C; c += WG) {
    out[base + c] = (input[base + c] - mean) * inv * weight[c] + bias[c];
  }
}
`;
