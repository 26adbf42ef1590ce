// attention: one workgroup per (token row t, head h). Keys are taken in chunks of ATTENTION_CHUNK whose scores sit
// in workgroup memory, with the softmax kept online (running max and sum, the output rescaled when the max
// grows), so any number of keys works in 4 KiB. In the weighted sum of values invocation i owns output
// dimensions i and i + WG, which keeps reads of each value row coalesced; hence hs <= 2 * WG.
export const ATTENTION_WORKGROUP = 64;
export const ATTENTION_CHUNK = 1024;
export const ATTENTION_MAX_HEAD_SIZE = 2 * ATTENTION_WORKGROUP;

export const ATTENTION_SOURCE = /* wgsl */ `
const WG = ${ATTENTION_WORKGROUP}u;
const CHUNK = ${ATTENTION_CHUNK}u;
const MAX_HS = ${ATTENTION_MAX_HEAD_SIZE}u;
// Below any score; exp(NEG - m) is 0 without producing inf - inf.
const NEG = -3.0e38;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;     // (n, C) f32
@group(0) @binding(2) var<storage, read> qkv: array<f32>;           // (n, 3C) f32: q | k | v
@group(0) @binding(3) var<storage, read> keyCache: array<f32>;      // (n_layer, nHead, nCtx, hs) f32
@group(0) @binding(4) var<storage, read> valueCache: array<f32>;    // (n_layer, nHead, nCtx, hs) f32

var<workgroup> scores: array<f32, CHUNK>; // this chunk's scores, then their exp
var<workgroup> q: array<f32, MAX_HS>;     // (hs) f32, scaled by 1 / sqrt(hs)
var<workgroup> partial: array<f32, WG>;

// The workgroup's max (isMax) or sum of v; every invocation gets it.
fn workgroupReduce(v: f32, lid: u32, isMax: bool) -> f32 {
  partial[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      if (isMax) { partial[lid] = max(partial[lid], partial[lid + s]); }
      else { partial[lid] += partial[lid + s]; }
    }
    workgroupBarrier();
  }
  let r = partial[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let t = wid.y;
  if (h >= p.nHead || t >= p.n) { return; }
  let hs = p.C / p.nHead;
  let nKeys = p.pos0 + t + 1u;
  let cacheBase = (p.layer * p.nHead + h) * p.nCtx * hs;
  let scale = 1.0 / sqrt(f32(hs));
  for (var i = lid; i < hs; i += WG) { q[i] = qkv[t * 3u * p.C + h * hs + i] * scale; }
  workgroupBarrier();
  var runMax = NEG;
  var runSum = 0.0;
  var acc0 = 0.0; // output dimension lid
  var acc1 = 0.0; // output dimension lid + WG
  for (var base = 0u; base < nKeys; base += CHUNK) {
    let len = min(CHUNK, nKeys - base);
    var localMax = NEG;
    for (var j = lid; j < len; j += WG) {
      let k = cacheBase + (base + j) * hs;
      var s = 0.0;
      for (var i = 0u; i < hs; i++) { s += q[i] * keyCache[k + i]; }
      scores[j] = s;
      localMax = max(localMax, s);
    }
    let newMax = max(runMax, workgroupReduce(localMax, lid, true));
    var localSum = 0.0;
    for (var j = lid; j < len; j += WG) {
      let e = exp(scores[j] - newMax);
      scores[j] = e;
      localSum += e;
    }
    let alpha = exp(runMax - newMax);
    // The reduction's barriers also make every scores[j] visible to the loop below.
    runSum = runSum * alpha + workgroupReduce(localSum, lid, false);
    acc0 *= alpha;
    acc1 *= alpha;
    runMax = newMax;
    for (var j = 0u; j < len; j++) {
      let v = cacheBase + (base + j) * hs;
      let e = scores[j];
      if (lid < hs) { acc0 += e * valueCache[v + lid]; }
      if (lid + WG < hs) { acc1 += e * valueCache[v + lid + WG]; }
    }
    // The next chunk overwrites scores.
    workgroupBarrier();
  }
  let o = t * p.C + h * hs;
  if (lid < hs) { out[o + lid] = acc0 / runSum; }
  if (lid + WG < hs) { out[o + lid + WG] = acc1 / runSum; }
}
`;
