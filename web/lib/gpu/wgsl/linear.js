// linear: out[outRowOffset + t][o0 + r] (=, gelu =, +=) dot(input[inRowOffset + t], W[r]) * scale[r] + bias[o0 + r].
// Two shapes of kernel, each for fp32 and int8 weights:
// - GEMV (few token rows: decode). Reading the weights is the whole cost, so each workgroup takes
//   GEMV_ROWS weight rows, GEMV_LANES invocations per row reading it as consecutive vec4s (coalesced), then a
//   shared-memory tree per row. Needs n_in % 4 == 0 (vec4 rows). Grid: (row groups, 1, token rows).
// - GEMM (prefill, and fp32 with n_in % 4 != 0): a GEMM_TM x GEMM_TN output tile per workgroup, the K dimension
//   in steps of GEMM_TK staged in workgroup memory (6 KiB), each invocation 2 x 4 outputs. Scalar loads, so fp32
//   takes any n_in. Grid: (row tiles, token tiles).
import { UNPACK_INT8 } from './common.js';

export const GEMV_LANES = 64;
export const GEMV_ROWS = 4;
export const GEMM_TM = 32;
export const GEMM_TN = 64;
export const GEMM_TK = 16;

// tanh's argument is clamped: some implementations compute tanh through exp and return NaN for large inputs;
// tanh(10) is 1 in f32.
export const EPILOGUE = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // (outRowOffset + n, outStride) f32
@group(0) @binding(4) var<storage, read> scale: array<f32>;     // int8: (nRows) f32; fp32: unused
@group(0) @binding(5) var<storage, read> bias: array<f32>;      // (n_out) f32, or a dummy when hasBias == 0

fn gelu(y: f32) -> f32 {
  let u = clamp(0.7978845608028654 * (y + 0.044715 * y * y * y), -10.0, 10.0);
  return 0.5 * y * (1.0 + tanh(u));
}

// Stores the dot product of token row t with weight row r.
fn finish(t: u32, r: u32, dotProduct: f32) {
  var y = dotProduct;
  if (INT8) { y *= scale[r]; }
  if (p.hasBias != 0u) { y += bias[p.o0 + r]; }
  let i = (p.outRowOffset + t) * p.outStride + p.o0 + r;
  if (p.epilogue == 1u) { out[i] = gelu(y); }
  else if (p.epilogue == 2u) { out[i] = out[i] + y; }
  else { out[i] = y; }
}
`;

// The GEMV's main(): GEMV_LANES invocations per weight row read it as consecutive vec4s, then a shared-memory tree
// per row. weightAt is the WGSL of vec4 k of weight row r in the caller's layout; every format's GEMV shares it
// (linear_blocks.js).
export function gemvMain(weightAt) {
  return /* wgsl */ `
var<workgroup> partial: array<f32, LANES * ROWS>;

@compute @workgroup_size(LANES, ROWS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = wid.z;
  let r = wid.x * ROWS + lid.y;
  let k4 = p.nIn / 4u;
  var acc = 0.0;
  if (r < p.nRows) {
    let x = (p.inRowOffset + t) * k4;
    for (var k = lid.x; k < k4; k += LANES) { acc += dot(${weightAt}, input[x + k]); }
  }
  let slot = lid.y * LANES + lid.x;
  partial[slot] = acc;
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s >>= 1u) {
    if (lid.x < s) { partial[slot] += partial[slot + s]; }
    workgroupBarrier();
  }
  if (lid.x == 0u && r < p.nRows) { finish(t, r, partial[slot]); }
}
`;
}

function gemvSource(int8) {
  return /* wgsl */ `
${UNPACK_INT8}
const INT8 = ${int8};
const LANES = ${GEMV_LANES}u;
const ROWS = ${GEMV_ROWS}u;
${EPILOGUE}
@group(0) @binding(2) var<storage, read> input: array<vec4<f32>>;     // (inRowOffset + n, nIn/4) vec4<f32>
@group(0) @binding(3) var<storage, read> weight: array<${int8 ? 'u32' : 'vec4<f32>'}>; // (nRows, nIn/4)

${gemvMain(int8 ? 'unpackInt8(weight[r * k4 + k])' : 'weight[r * k4 + k]')}`;
}

// Fills Bs (GEMM_TK, GEMM_TN) with weight rows n0.. at columns k0..; zeros past the matrix.
const LOAD_WEIGHTS_F32 = /* wgsl */ `
  for (var e = li; e < TN * TK; e += THREADS) {
    let r = e / TK;
    let k = e % TK;
    var b = 0.0;
    if (n0 + r < p.nRows && k0 + k < p.nIn) { b = weight[(n0 + r) * p.nIn + k0 + k]; }
    Bs[k * TN + r] = b;
  }`;
const LOAD_WEIGHTS_INT8 = /* wgsl */ `
  for (var e = li; e < TN * TK / 4u; e += THREADS) {
    let r = e / (TK / 4u);
    let q = e % (TK / 4u);
    let k4 = p.nIn / 4u;
    var b = vec4<f32>(0.0);
    if (n0 + r < p.nRows && k0 / 4u + q < k4) { b = unpackInt8(weight[(n0 + r) * k4 + k0 / 4u + q]); }
    for (var i = 0u; i < 4u; i++) { Bs[(4u * q + i) * TN + r] = b[i]; }
  }`;

// The GEMM's main(): the input's and the weights' tiles staged in workgroup memory (As, Bs: declared by the
// caller's source), loadWeights filling Bs from the caller's weight layout, then each invocation's 2 x 4 outputs.
// Every format's GEMM shares it (linear_blocks.js).
export function gemmMain(loadWeights) {
  return /* wgsl */ `
// Invocation (x, y) computes token rows m0 + y + 16 i (i < 2) by weight rows n0 + x + 16 j (j < 4): adjacent
// invocations store adjacent outputs.
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let n0 = wid.x * TN;
  let m0 = wid.y * TM;
  var acc: array<f32, 8>; // [i * 4 + j]
  for (var k0 = 0u; k0 < p.nIn; k0 += TK) {
    for (var e = li; e < TM * TK; e += THREADS) {
      let m = e / TK;
      let k = e % TK;
      var a = 0.0;
      if (m0 + m < p.n && k0 + k < p.nIn) { a = input[(p.inRowOffset + m0 + m) * p.nIn + k0 + k]; }
      As[k * TM + m] = a;
    }
${loadWeights}
    workgroupBarrier();
    for (var k = 0u; k < TK; k++) {
      let a0 = As[k * TM + lid.y];
      let a1 = As[k * TM + lid.y + 16u];
      for (var j = 0u; j < 4u; j++) {
        let b = Bs[k * TN + lid.x + 16u * j];
        acc[j] += a0 * b;
        acc[4u + j] += a1 * b;
      }
    }
    // The next step overwrites the tiles.
    workgroupBarrier();
  }
  for (var i = 0u; i < 2u; i++) {
    for (var j = 0u; j < 4u; j++) {
      let m = m0 + lid.y + 16u * i;
      let r = n0 + lid.x + 16u * j;
      if (m < p.n && r < p.nRows) { finish(m, r, acc[i * 4u + j]); }
    }
  }
}
`;
}

function gemmSource(int8) {
  return /* wgsl */ `
${UNPACK_INT8}
const INT8 = ${int8};
const TM = ${GEMM_TM}u;
const TN = ${GEMM_TN}u;
const TK = ${GEMM_TK}u;
const THREADS = 256u;
${EPILOGUE}
@group(0) @binding(2) var<storage, read> input: array<f32>;   // (inRowOffset + n, nIn) f32
@group(0) @binding(3) var<storage, read> weight: array<${int8 ? 'u32' : 'f32'}>; // (nRows, nIn${int8 ? '/4' : ''})

var<workgroup> As: array<f32, TK * TM>; // (TK, TM): input columns k0.. of token rows m0..
var<workgroup> Bs: array<f32, TK * TN>; // (TK, TN): weight columns k0.. of rows n0..

${gemmMain(int8 ? LOAD_WEIGHTS_INT8 : LOAD_WEIGHTS_F32)}`;
}

// Serial: one invocation per output element (token row, weight row), its dot product in one loop, no workgroup
// memory and no barriers. For software adapters, which run a workgroup's invocations as CPU coroutines and pay
// dearly for each barrier (SwiftShader: the LM head's GEMV takes seconds, this tens of milliseconds); hardware runs
// the two kernels above. Grid: (ceil(nRows / SERIAL_WORKGROUP), n).
export const SERIAL_WORKGROUP = 64;

// vec4: rows read as vec4s (n_in % 4 == 0), else one float at a time (fp32 of any n_in).
function serialSource(int8, vec4) {
  const weightType = int8 ? 'u32' : vec4 ? 'vec4<f32>' : 'f32';
  const row = vec4 ? `  let k4 = p.nIn / 4u;
  for (var k = 0u; k < k4; k++) {
    acc += dot(${int8 ? 'unpackInt8(weight[r * k4 + k])' : 'weight[r * k4 + k]'}, input[x / 4u + k]);
  }` : '  for (var k = 0u; k < p.nIn; k++) { acc += input[x + k] * weight[r * p.nIn + k]; }';
  return /* wgsl */ `
${UNPACK_INT8}
const INT8 = ${int8};
${EPILOGUE}
@group(0) @binding(2) var<storage, read> input: array<${vec4 ? 'vec4<f32>' : 'f32'}>; // (inRowOffset + n, nIn) f32
@group(0) @binding(3) var<storage, read> weight: array<${weightType}>; // (nRows, nIn${int8 || vec4 ? '/4' : ''})

@compute @workgroup_size(${SERIAL_WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  let t = gid.y;
  if (r >= p.nRows || t >= p.n) { return; }
  let x = (p.inRowOffset + t) * p.nIn;
  var acc = 0.0;
${row}
  finish(t, r, acc);
}
`;
}

export const LINEAR_SOURCES = {
  gemvF32: gemvSource(false),
  gemvInt8: gemvSource(true),
  gemmF32: gemmSource(false),
  gemmInt8: gemmSource(true),
  serialF32: serialSource(false, false),
  serialF32x4: serialSource(false, true),
  serialInt8: serialSource(true, true),
};
