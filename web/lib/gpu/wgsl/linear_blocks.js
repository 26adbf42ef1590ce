// linear (./linear.js's contract) for the GGUF block formats of ./blocks.js: the weights stay the file's ggml
// blocks and each kernel dequantizes the values it reads (weight4). The three shapes of ./linear.js:
// - GEMV (decode): GEMV_ROWS rows a workgroup, GEMV_LANES invocations a row each reading vec4 groups of the row
//   (a sub-block's scale is read again per group: it stays in cache), then a shared-memory tree per row.
// - GEMM (prefill): the GEMM_TM x GEMM_TN tile of ./linear.js, its weight tile dequantized into workgroup memory.
// - serial: one invocation per output, no workgroup memory, no barriers (software adapters).
// Rows are whole vec4 groups: n_in is a multiple of the block (32 or 256 values), or of 4 for F16 (the planner's
// rule, kernels.js); the GEMM's K steps (GEMM_TK) may overrun n_in there, and read zeros past it.
import { BLOCK_FORMATS, blockSource } from './blocks.js';
import { EPILOGUE, GEMM_TK, GEMM_TM, GEMM_TN, GEMV_LANES, GEMV_ROWS, SERIAL_WORKGROUP, gemmMain, gemvMain } from './linear.js';

function weightsOf(format) {
  const { values, bytes } = BLOCK_FORMATS[format];
  return /* wgsl */ `
const INT8 = false;
${EPILOGUE}
// (nRows, nIn / ${values}) blocks of ${bytes} bytes, read as u32 words
@group(0) @binding(3) var<storage, read> weight: array<u32>;
${blockSource(format, 'weight')}`;
}

function gemvSource(format) {
  return /* wgsl */ `${weightsOf(format)}
const LANES = ${GEMV_LANES}u;
const ROWS = ${GEMV_ROWS}u;
@group(0) @binding(2) var<storage, read> input: array<vec4<f32>>;  // (inRowOffset + n, nIn / 4) vec4<f32>

${gemvMain('weight4(r, k, p.nIn)')}`;
}

function gemmSource(format) {
  return /* wgsl */ `${weightsOf(format)}
const TM = ${GEMM_TM}u;
const TN = ${GEMM_TN}u;
const TK = ${GEMM_TK}u;
const THREADS = 256u;
@group(0) @binding(2) var<storage, read> input: array<f32>;  // (inRowOffset + n, nIn) f32

var<workgroup> As: array<f32, TK * TM>; // (TK, TM): input columns k0.. of token rows m0..
var<workgroup> Bs: array<f32, TK * TN>; // (TK, TN): dequantized weight columns k0.. of rows n0..

${gemmMain(`
    for (var e = li; e < TN * TK / 4u; e += THREADS) {
      let r = e / (TK / 4u);
      let q = e % (TK / 4u);
      var b = vec4<f32>(0.0);
      if (n0 + r < p.nRows && k0 + 4u * q < p.nIn) { b = weight4(n0 + r, k0 / 4u + q, p.nIn); }
      for (var i = 0u; i < 4u; i++) { Bs[(4u * q + i) * TN + r] = b[i]; }
    }`)}
`;
}

function serialSource(format) {
  return /* wgsl */ `${weightsOf(format)}
@group(0) @binding(2) var<storage, read> input: array<vec4<f32>>;  // (inRowOffset + n, nIn / 4) vec4<f32>

@compute @workgroup_size(${SERIAL_WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  let t = gid.y;
  if (r >= p.nRows || t >= p.n) { return; }
  let k4 = p.nIn / 4u;
  let x = (p.inRowOffset + t) * k4;
  var acc = 0.0;
  for (var k = 0u; k < k4; k++) { acc += dot(weight4(r, k, p.nIn), input[x + k]); }
  finish(t, r, acc);
}
`;
}

// gemv_<format>, gemm_<format>, serial_<format> for each block format (the engine's names: q8_0, q4_k, ...).
export const BLOCK_LINEAR_SOURCES = Object.fromEntries(Object.keys(BLOCK_FORMATS).flatMap((format) => [
  [`gemv_${format}`, gemvSource(format)], [`gemm_${format}`, gemmSource(format)], [`serial_${format}`, serialSource(format)],
]));
