// storeKv: copies the k and v thirds of each qkv row into the caches at positions pos0 + t, one invocation per
// (column, token row).
export const STORE_KV_WORKGROUP = 64;

export const STORE_KV_SOURCE = /* wgsl */ `
@group(0) @binding(1) var<storage, read> qkv: array<f32>;              // (n, 3C) f32: q | k | v
@group(0) @binding(2) var<storage, read_write> keyCache: array<f32>;   // (n_layer, nHead, nCtx, hs) f32
@group(0) @binding(3) var<storage, read_write> valueCache: array<f32>; // (n_layer, nHead, nCtx, hs) f32

@compute @workgroup_size(${STORE_KV_WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let c = id.x;
  let t = id.y;
  if (c >= p.C || t >= p.n) { return; }
  let hs = p.C / p.nHead;
  let h = c / hs;
  let dst = ((p.layer * p.nHead + h) * p.nCtx + p.pos0 + t) * hs + c % hs;
  let src = t * 3u * p.C + c;
  keyCache[dst] = qkv[src + p.C];
  valueCache[dst] = qkv[src + 2u * p.C];
}
`;
