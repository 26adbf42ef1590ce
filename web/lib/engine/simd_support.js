// Which wasm build this JS realm runs: 'relaxed' (relaxed SIMD: Chrome 114+, Firefox 145+) or 'simd128' (Safari,
// and Node unless asked). A module holding the two relaxed instructions the engine uses is validated, then run on
// inputs with known results: validating alone would accept Node 20 under --experimental-wasm-relaxed-simd, whose
// baseline compiler (Liftoff) computes the dot product wrongly. Node runs the relaxed build only when the
// environment variable GPT2_WASM_SIMD is "relaxed" (and Node runs relaxed SIMD: Node 22+, or Node 20 with
// --experimental-wasm-relaxed-simd --no-liftoff): measured on Node 20 and 22, their V8 lowers the 8-bit dot product
// into several instructions, and int8 prefill runs at 0.67x the SIMD128 build's, where Chromium 156 runs it at 1.2x.
import { IS_NODE } from '../environment.js';

// (module (memory (export "memory") 1)
//   (func (export "probe")
//     (v128.store offset=48 (i32.const 0) (f32x4.relaxed_madd (v128.load (i32.const 0)) (v128.load offset=16 ...)
//                                                             (v128.load offset=32 ...)))
//     (v128.store offset=112 (i32.const 0) (i32x4.relaxed_dot_i8x16_i7x16_add_s (v128.load offset=64 ...)
//                                                 (v128.load offset=80 ...) (v128.load offset=96 ...)))))
const load = (offset) => [0x41, 0x00, 0xfd, 0x00, 0x00, offset];  // i32.const 0; v128.load align=1 offset
const store = (offset) => [0xfd, 0x0b, 0x00, offset];
const RELAXED_MADD = [0xfd, 0x85, 0x02];
const RELAXED_DOT_ADD = [0xfd, 0x93, 0x02];
const BODY = [
  0x00,  // no locals
  0x41, 0x00, ...load(0), ...load(16), ...load(32), ...RELAXED_MADD, ...store(48),
  0x41, 0x00, ...load(64), ...load(80), ...load(96), ...RELAXED_DOT_ADD, ...store(112),
  0x0b,
];
const section = (id, bytes) => [id, bytes.length, ...bytes];
const name = (text) => [text.length, ...Array.from(text, (c) => c.charCodeAt(0))];
const PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  ...section(1, [0x01, 0x60, 0x00, 0x00]),  // type 0: [] -> []
  ...section(3, [0x01, 0x00]),  // function 0 has type 0
  ...section(5, [0x01, 0x00, 0x01]),  // memory 0: one page
  ...section(7, [0x02, ...name('probe'), 0x00, 0x00, ...name('memory'), 0x02, 0x00]),
  ...section(10, [0x01, BODY.length, ...BODY]),
]);

// Inputs whose results are exact whether the multiply-add is fused or not: a * b + c per lane, and per 32-bit lane
// the four products of int8 x (7-bit unsigned) y, plus the accumulator.
const MADD_A = [1.5, -2, 3, 4], MADD_B = [10, 20, -30, 0.25], MADD_C = [100, 200, 300, -400];
const DOT_X = Array.from({ length: 16 }, (_, i) => (i * 37) % 256 - 128);
const DOT_Y = Array.from({ length: 16 }, (_, i) => (i * 53 + 7) % 128);
const DOT_ACC = [1000, -2000, 3000, -4000];

function runsRelaxedSimd() {
  if (typeof WebAssembly !== 'object' || !WebAssembly.validate(PROBE)) return false;
  try {
    const instance = new WebAssembly.Instance(new WebAssembly.Module(PROBE));
    const { buffer } = instance.exports.memory;
    new Float32Array(buffer, 0, 12).set([...MADD_A, ...MADD_B, ...MADD_C]);
    new Int8Array(buffer, 64, 32).set([...DOT_X, ...DOT_Y]);
    new Int32Array(buffer, 96, 4).set(DOT_ACC);
    instance.exports.probe();
    const madd = new Float32Array(buffer, 48, 4), dot = new Int32Array(buffer, 112, 4);
    for (let lane = 0; lane < 4; lane++) {
      if (madd[lane] !== MADD_A[lane] * MADD_B[lane] + MADD_C[lane]) return false;
      let expected = DOT_ACC[lane];
      for (let k = 4 * lane; k < 4 * lane + 4; k++) expected += DOT_X[k] * DOT_Y[k];
      if (dot[lane] !== expected) return false;
    }
    return true;
  } catch {
    return false;
  }
}

let support = null;

// 'relaxed' or 'simd128': the build this JS realm runs (probed once).
export function simdSupport() {
  support ??= (!IS_NODE || process.env.GPT2_WASM_SIMD === 'relaxed') && runsRelaxedSimd() ? 'relaxed' : 'simd128';
  return support;
}
