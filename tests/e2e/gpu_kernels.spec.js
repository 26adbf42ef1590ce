// The WebGPU kernels (web/lib/gpu/kernels.js) one by one against float64 reference math on seeded random data,
// in Chromium's SwiftShader WebGPU (project webgpu in playwright.config.js). Sizes are chosen not to be
// multiples of the workgroups and tiles, every binding with an offset is used, and each test records all its
// dispatches in one run, so that the uniform slots of one submit are checked not to clobber each other.
// Each comparison reports the largest |gpu - reference| and its ratio to the bound the test states (ratio <= 1
// passes); the whole output buffer is compared, so writes outside the rows a kernel owns fail too.
import { test, expect } from './under_csp.js';

// Installs globalThis.gpuTest in the page: the device, the kernels and helpers to make buffers, run and compare.
async function installHarness() {
  const { createKernels } = await import('/js/lib/gpu/kernels.js');
  const adapter = await navigator.gpu.requestAdapter();
  const { maxStorageBufferBindingSize, maxBufferSize } = adapter.limits;
  const device = await adapter.requestDevice({ requiredLimits: { maxStorageBufferBindingSize, maxBufferSize } });
  const { BLOCK_FORMATS } = await import('/js/lib/gpu/wgsl/blocks.js');
  // the block formats' variants compiled up front here (createKernels' formats); serialKernels makes its own on use
  const kernels = await createKernels(device, { formats: Object.keys(BLOCK_FORMATS) });
  // the linear layers of software adapters (createKernels' serialLinear)
  const serialKernels = await createKernels(device, { serialLinear: true });
  // mulberry32: the same data on every run.
  let seed = 0x9e3779b9;
  const random = () => {
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  globalThis.gpuTest = {
    device,
    kernels,
    serialKernels,
    randoms: (count, lo = -1, hi = 1) => Float32Array.from({ length: count }, () => lo + (hi - lo) * random()),
    randomInts: (count, below) => Uint32Array.from({ length: count }, () => Math.floor(random() * below)),
    // count int8 values (count % 4 == 0) and their packing, four to a little-endian u32.
    int8s(count) {
      const values = Int8Array.from({ length: count }, () => Math.floor(random() * 256) - 128);
      return { values, packed: new Uint32Array(values.buffer) };
    },
    // A storage buffer holding data at byte `offset`; returns the buffer when offset is 0, else the binding.
    buffer(data, offset = 0) {
      const size = Math.max(16, Math.ceil(data.byteLength / 16) * 16);
      const buffer = device.createBuffer({ size: offset + size, usage });
      device.queue.writeBuffer(buffer, offset, data);
      return offset ? { buffer, offset, size } : buffer;
    },
    // Records encode(pass) as one run of the kernels (or of another Kernels, `on`) and submits it; rejects on a
    // validation error.
    async run(encode, on = kernels) {
      device.pushErrorScope('validation');
      on.beginRun();
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      encode(pass);
      pass.end();
      on.endRun();
      device.queue.submit([encoder.finish()]);
      const error = await device.popErrorScope();
      if (error) throw new Error(`validation: ${error.message}`);
    },
    // The f32 contents of a buffer or binding (count values).
    async read(binding, count) {
      const { buffer, offset = 0 } = binding.buffer ? binding : { buffer: binding };
      const staging = device.createBuffer({ size: count * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(buffer, offset, staging, 0, count * 4);
      device.queue.submit([encoder.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      const values = new Float32Array(staging.getMappedRange().slice(0));
      staging.destroy();
      return values;
    },
    // got against ref (float64) with a bound per element: bound(i).
    compare(name, got, ref, bound) {
      let maxAbs = 0;
      let maxRef = 0;
      let ratio = 0;
      for (let i = 0; i < ref.length; i++) {
        const diff = Number.isFinite(got[i]) ? Math.abs(got[i] - ref[i]) : Infinity;
        maxAbs = Math.max(maxAbs, diff);
        maxRef = Math.max(maxRef, Math.abs(ref[i]));
        ratio = Math.max(ratio, diff / bound(i));
      }
      return { name, maxAbs, maxRelative: maxAbs / maxRef, ratio };
    },
  };
  return { architecture: adapter.info.architecture, fallback: adapter.isFallbackAdapter ?? adapter.info.isFallbackAdapter };
}

// One page for the whole file: compiling the kernels on SwiftShader takes seconds. Any same-origin document
// will do; the kernels' own module is a small one.
test.describe.configure({ mode: 'serial' });
let page;
let adapter;
test.beforeAll(async ({ browser }) => {
  page = await browser.newPage();
  await page.goto('/js/lib/gpu/kernels.js');
  adapter = await page.evaluate(installHarness);
  await page.evaluate(installLinearCase);
  await page.evaluate(installBlocks);
});
test.afterAll(async () => page.close());
test.beforeEach(() => test.info().annotations.push({ type: 'adapter', description: JSON.stringify(adapter) }));

// Annotates and prints each comparison, then expects every one within its bound.
function expectWithinBounds(results) {
  for (const { name, maxAbs, maxRelative, ratio } of results) {
    const description = `${name}: max |diff| ${maxAbs.toExponential(2)}, relative to max |ref| ` +
      `${maxRelative.toExponential(2)}, ${ratio.toFixed(3)} of the bound`;
    test.info().annotations.push({ type: 'max difference', description });
    console.log(description);
  }
  for (const { name, ratio } of results) expect(ratio, `${name}: max |diff| / bound`).toBeLessThanOrEqual(1);
}

test('embed writes position plus token rows, from fp32 and int8 tables split in two parts', async () => {
  // Bound: one f32 addition (and, for int8, one product) on values near 1: |diff| <= 1e-6 (1 + |ref|).
  expectWithinBounds(await page.evaluate(async () => {
    const { kernels, randoms, randomInts, int8s, buffer, run, read, compare } = globalThis.gpuTest;
    const vocab = 50;
    const nCtx = 80;
    const cases = [];
    for (const [n, C, pos0, tokenOffset, split] of [[67, 100, 7, 5, 23], [3, 36, 10, 0, vocab]]) {
      for (const int8 of [0, 1]) {
        const tokens = randomInts(tokenOffset + n, vocab); // (tokenOffset + n) u32
        const wpe = randoms(nCtx * C); // (nCtx, C) f32
        const table = int8 ? int8s(vocab * C) : { values: randoms(vocab * C) }; // (vocab, C) int8 or f32
        const scales = randoms(vocab, 0.001, 0.02); // (vocab) f32
        const x = buffer(randoms(n * C), 256); // (n, C) f32
        const parts = [[0, split], [split, vocab]].filter(([begin, end]) => end > begin).map(([rowBegin, rowEnd]) => {
          const rows = int8 ? table.packed.subarray(rowBegin * C / 4, rowEnd * C / 4) : table.values.subarray(rowBegin * C, rowEnd * C);
          const bound = kernels.embed.bind({
            x, tokens: buffer(tokens), wpe: buffer(wpe), wte: buffer(rows, 512),
            wteScale: int8 ? buffer(scales.subarray(rowBegin, rowEnd)) : null,
          });
          return { bound, rowBegin, rowEnd };
        });
        const ref = new Float64Array(n * C);
        for (let t = 0; t < n; t++) {
          const tok = tokens[tokenOffset + t];
          for (let c = 0; c < C; c++) {
            ref[t * C + c] = wpe[(pos0 + t) * C + c] + table.values[tok * C + c] * (int8 ? scales[tok] : 1);
          }
        }
        cases.push({ name: `embed ${int8 ? 'int8' : 'fp32'} n=${n} C=${C} in ${parts.length} part(s)`, n, C, pos0, tokenOffset, int8, x, parts, ref });
      }
    }
    await run((pass) => {
      for (const { n, C, pos0, tokenOffset, int8, parts } of cases) {
        parts.forEach(({ bound, rowBegin, rowEnd }, i) => bound.encode(pass, { n, C, tokenOffset, pos0, rowBegin, rowEnd, first: i === 0 ? 1 : 0, format: int8 }));
      }
    });
    return Promise.all(cases.map(async ({ name, n, C, x, ref }) =>
      compare(name, await read(x, n * C), ref, (i) => 1e-6 * (1 + Math.abs(ref[i])))));
  }));
});

test('layernorm normalises the rows from a row offset and leaves the other rows alone', async () => {
  // Bound: the row's mean and variance are f32 sums of at most 768 terms: |diff| <= 1e-5 (1 + |ref|).
  expectWithinBounds(await page.evaluate(async () => {
    const { kernels, randoms, buffer, run, read, compare } = globalThis.gpuTest;
    const eps = 1e-5;
    const cases = [[3, 100, 2, 7], [67, 36, 1, 70], [1, 768, 0, 1]].map(([n, C, rowOffset, rows]) => {
      const input = randoms(rows * C, 2, 5); // (rows, C) f32, mean far from 0 to test the centring
      const weight = randoms(C); // (C) f32
      const bias = randoms(C); // (C) f32
      const before = randoms(rows * C); // (rows, C) f32
      const out = buffer(before, 256);
      const ref = Float64Array.from(before);
      for (let t = rowOffset; t < rowOffset + n; t++) {
        const row = input.subarray(t * C, (t + 1) * C);
        const mean = row.reduce((s, v) => s + v, 0) / C;
        const variance = row.reduce((s, v) => s + (v - mean) ** 2, 0) / C;
        for (let c = 0; c < C; c++) ref[t * C + c] = (row[c] - mean) / Math.sqrt(variance + eps) * weight[c] + bias[c];
      }
      const bound = kernels.layernorm.bind({ out, input: buffer(input), weight: buffer(weight), bias: buffer(bias, 256) });
      return { name: `layernorm n=${n} C=${C} rowOffset=${rowOffset}`, bound, params: { n, C, eps, rowOffset }, out, ref };
    });
    await run((pass) => cases.forEach(({ bound, params }) => bound.encode(pass, params)));
    return Promise.all(cases.map(async ({ name, out, ref }) =>
      compare(name, await read(out, ref.length), ref, (i) => 1e-5 * (1 + Math.abs(ref[i])))));
  }));
});

// Page side: builds a linear case (random input, weights, bias and prior output) and its float64 reference of
// `times` encodes, with per-element bounds (|diff| <= (nIn + 4) 2^-24 S + 1e-6, S the sum of the magnitudes
// of everything summed into the element: the standard bound of f32 summation in any order, plus GELU's slope and
// tanh's error). Installed as globalThis.gpuTest.linearCase.
function installLinearCase() {
  const { randoms, int8s, buffer } = globalThis.gpuTest;
  const gelu = (y) => 0.5 * y * (1 + Math.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3)));
  // block: a GGUF block format (installBlocks), whose weights are random blocks and their float64 dequantization
  globalThis.gpuTest.linearCase = ({ n, nIn, nRows, o0 = 5, epilogue, hasBias, int8, block, inRowOffset = 2, outRowOffset = 1, times = 1, serial = false }) => {
    const kernels = serial ? globalThis.gpuTest.serialKernels : globalThis.gpuTest.kernels;
    const nOut = o0 + nRows + 4;
    const outStride = nOut + 3;
    const input = randoms((inRowOffset + n) * nIn); // (inRowOffset + n, nIn) f32
    // (nRows, nIn) int8 or f32, or the blocks of (nRows, nIn) values; magnitudes: each value's |terms| (K-quants:
    // |d scale q| + |dmin min|, which the GPU's f32 dequantization rounds)
    const weights = block ? globalThis.gpuTest.blocks.random(block, nRows, nIn) : int8 ? int8s(nRows * nIn) : { values: randoms(nRows * nIn) };
    const weightMagnitudes = weights.magnitudes ?? Float64Array.from(weights.values, Math.abs);
    const scales = randoms(nRows, 0.001, 0.02); // (nRows) f32
    const bias = randoms(nOut); // (nOut) f32
    const before = randoms((outRowOffset + n) * outStride); // (outRowOffset + n, outStride) f32
    const out = buffer(before, nRows % 2 ? 256 : 0);
    const ref = Float64Array.from(before);
    const magnitude = before.map(Math.abs);
    for (let t = 0; t < n; t++) {
      for (let r = 0; r < nRows; r++) {
        let y = 0;
        let s = 0;
        for (let k = 0; k < nIn; k++) {
          const term = input[(inRowOffset + t) * nIn + k] * weights.values[r * nIn + k];
          y += term;
          s += Math.abs(input[(inRowOffset + t) * nIn + k]) * weightMagnitudes[r * nIn + k];
        }
        const scale = int8 ? scales[r] : 1;
        const b = hasBias ? bias[o0 + r] : 0;
        y = y * scale + b;
        const i = (outRowOffset + t) * outStride + o0 + r;
        if (epilogue === 1) ref[i] = gelu(y);
        else if (epilogue === 2) ref[i] += times * y;
        else ref[i] = y;
        magnitude[i] = (s * scale + Math.abs(b)) * (epilogue === 2 ? times : 1.2) + (epilogue === 2 ? magnitude[i] : 0);
      }
    }
    const bound = kernels.linear.bind({
      out, input: buffer(input), weight: buffer(block ? weights.words : int8 ? weights.packed : weights.values, nRows % 2 ? 0 : 512),
      scale: int8 ? buffer(scales) : undefined, bias: hasBias ? buffer(bias) : null,
    });
    const name = `linear${serial ? ' serial' : ''} ${block ?? (int8 ? 'int8' : 'fp32')} n=${n} nIn=${nIn} nRows=${nRows} epilogue ${epilogue}${hasBias ? ' bias' : ''}`;
    const params = { n, nIn, nRows, o0, outStride, inRowOffset, outRowOffset, epilogue, hasBias, format: block ? globalThis.gpuTest.blocks.codes[block] : int8 };
    // the block formats' f32 dequantization adds up to 3 roundings a weight (d scale, the product, - dmin min)
    const roundings = nIn + (block ? 8 : 4);
    return { name, bound, params, out, before, ref, bounds: (i) => roundings * 2 ** -24 * magnitude[i] + 1e-6, times };
  };
}

// Page side: random GGUF blocks (ggml-common.h's layouts) and ggml's dequantize_row_* in float64, as
// globalThis.gpuTest.blocks: random(format, nRows, nIn) -> { bytes, words (the bytes padded to u32 words), values,
// magnitudes } (values and magnitudes (nRows, nIn)), codes (kernels.js's FORMAT_CODES). The quants are random
// bytes; the fp16 scales and mins, and F16's values (blocks of one), are random normal halves of magnitude 2^-7 ..
// 2^-3 (real files' range of scales; an adapter may flush fp16 subnormals).
async function installBlocks() {
  const { FORMAT_CODES } = await import('/js/lib/gpu/kernels.js');
  const { BLOCK_FORMATS } = await import('/js/lib/gpu/wgsl/blocks.js');
  const { randomInts } = globalThis.gpuTest;
  const half = (bits) => (bits & 0x8000 ? -1 : 1) * 2 ** (((bits >> 10) & 31) - 15) * (1 + (bits & 1023) / 1024);
  const halfAt = (b, at) => half(b[at] | (b[at + 1] << 8));
  const signed = (byte) => (byte << 24) >> 24;
  // ggml's get_scale_min_k4: sub-block j's 6-bit scale and min from the 12 bytes at q
  const scaleMin = (b, q, j) => (j < 4 ? [b[q + j] & 63, b[q + j + 4] & 63]
    : [(b[q + j + 4] & 15) | ((b[q + j - 4] >> 6) << 4), (b[q + j + 4] >> 4) | ((b[q + j] >> 6) << 4)]);
  // Each: (bytes, byte offset of a block, out, magnitudes, index of its first value) -> writes its values.
  // values 4q .. : the low nibbles of qs[j] (j < 16), then the high ones; fifth: bit j of qh (a u32) adds 16
  const nibble = (b, qs, j) => (j < 16 ? b[qs + j] & 15 : b[qs + j - 16] >> 4);
  const fifth = (b, qh, j) => (((b[qh] | (b[qh + 1] << 8) | (b[qh + 2] << 16) | (b[qh + 3] << 24)) >>> j) & 1) * 16;
  // Q4_1, Q5_1: y = q d + m, magnitudes |q d| + |m|
  const withMin = (b, at, y, m, i, q) => {
    const d = halfAt(b, at), min = halfAt(b, at + 2);
    for (let j = 0; j < 32; j++) {
      y[i + j] = q(j) * d + min;
      m[i + j] = Math.abs(q(j) * d) + Math.abs(min);
    }
  };
  const DEQUANTIZE = {
    f16(b, at, y, m, i) {
      y[i] = halfAt(b, at);
    },
    q8_0(b, at, y, m, i) {
      for (let j = 0; j < 32; j++) y[i + j] = halfAt(b, at) * signed(b[at + 2 + j]);
    },
    q4_0(b, at, y, m, i) {
      for (let j = 0; j < 16; j++) {
        y[i + j] = ((b[at + 2 + j] & 15) - 8) * halfAt(b, at);
        y[i + j + 16] = ((b[at + 2 + j] >> 4) - 8) * halfAt(b, at);
      }
    },
    q4_1(b, at, y, m, i) {
      withMin(b, at, y, m, i, (j) => nibble(b, at + 4, j));
    },
    q5_0(b, at, y, m, i) {
      for (let j = 0; j < 32; j++) y[i + j] = (nibble(b, at + 6, j) + fifth(b, at + 2, j) - 16) * halfAt(b, at);
    },
    q5_1(b, at, y, m, i) {
      withMin(b, at, y, m, i, (j) => nibble(b, at + 8, j) + fifth(b, at + 4, j));
    },
    q4_k(b, at, y, m, i, high = false) {
      const d = halfAt(b, at), dmin = halfAt(b, at + 2), qs = at + (high ? 48 : 16);
      for (let j = 0; j < 8; j++) {
        const [sc, mn] = scaleMin(b, at + 4, j);
        for (let l = 0; l < 32; l++) {
          const q = (j % 2 ? b[qs + 32 * (j >> 1) + l] >> 4 : b[qs + 32 * (j >> 1) + l] & 15) + (high && (b[at + 16 + l] >> j) & 1 ? 16 : 0);
          y[i + 32 * j + l] = d * sc * q - dmin * mn;
          m[i + 32 * j + l] = Math.abs(d * sc * q) + Math.abs(dmin * mn);
        }
      }
    },
    q5_k(b, at, y, m, i) {
      DEQUANTIZE.q4_k(b, at, y, m, i, true);
    },
    q6_k(b, at, y, m, i) {
      const d = halfAt(b, at + 208);
      for (let v = 0; v < 256; v++) {
        const h = v >> 7, k = (v % 128) >> 5, l = v % 32;
        const ql = b[at + 64 * h + 32 * (k % 2) + l];
        const q = ((k < 2 ? ql & 15 : ql >> 4) | (((b[at + 128 + 32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
        y[i + v] = d * signed(b[at + 192 + 8 * h + (l >> 4) + 2 * k]) * q;
      }
    },
  };
  // the offsets of each format's fp16 fields in a block
  const HALVES = { f16: [0], q8_0: [0], q4_0: [0], q4_1: [0, 2], q5_0: [0], q5_1: [0, 2], q4_k: [0, 2], q5_k: [0, 2], q6_k: [208] };
  // the formats whose dequantization writes its own magnitudes (a product and a min, each rounded)
  const OWN_MAGNITUDES = ['q4_1', 'q5_1', 'q4_k', 'q5_k'];
  globalThis.gpuTest.blocks = {
    codes: FORMAT_CODES,
    random(format, nRows, nIn) {
      const { values: perBlock, bytes: blockBytes } = BLOCK_FORMATS[format];
      const nBlocks = nRows * nIn / perBlock;
      const words = new Uint32Array(Math.ceil(nBlocks * blockBytes / 4));
      const bytes = new Uint8Array(words.buffer, 0, nBlocks * blockBytes);
      bytes.set(randomInts(bytes.length, 256));
      const halves = randomInts(nBlocks * 2, 1 << 16);
      for (let k = 0; k < nBlocks; k++) {
        HALVES[format].forEach((offset, h) => {
          const bits = (halves[2 * k + h] & 0x83ff) | ((8 + (halves[2 * k + h] >> 10) % 5) << 10);
          bytes[k * blockBytes + offset] = bits & 255;
          bytes[k * blockBytes + offset + 1] = bits >> 8;
        });
      }
      const values = new Float64Array(nRows * nIn);
      const magnitudes = new Float64Array(nRows * nIn);
      for (let k = 0; k < nBlocks; k++) DEQUANTIZE[format](bytes, k * blockBytes, values, magnitudes, k * perBlock);
      if (!OWN_MAGNITUDES.includes(format)) magnitudes.set(values.map(Math.abs));
      return { bytes, words, values, magnitudes };
    },
  };
}

test('linear matches float64 for fp32 and int8 weights, every epilogue, decode and prefill sizes', async () => {
  expectWithinBounds(await page.evaluate(async () => {
    const { linearCase, run, read, compare } = globalThis.gpuTest;
    const cases = [];
    for (const int8 of [0, 1]) {
      for (const [n, nIn, nRows] of [[1, 100, 37], [2, 132, 300], [3, 100, 37], [67, 132, 300]]) {
        for (const epilogue of [0, 1, 2]) cases.push(linearCase({ n, nIn, nRows, epilogue, hasBias: (n + epilogue) % 2, int8 }));
      }
    }
    // n_in not a multiple of 4 (fp32 only), and more rows than 65535 GEMV workgroups hold (the GEMM takes them).
    cases.push(linearCase({ n: 1, nIn: 101, nRows: 37, epilogue: 0, hasBias: 1, int8: 0 }));
    cases.push(linearCase({ n: 3, nIn: 101, nRows: 37, epilogue: 1, hasBias: 0, int8: 0 }));
    for (const int8 of [0, 1]) cases.push(linearCase({ n: 1, nIn: 4, nRows: 270_000, epilogue: 0, hasBias: 1, int8, o0: 0 }));
    await run((pass) => cases.forEach(({ bound, params }) => bound.encode(pass, params)));
    return Promise.all(cases.map(async ({ name, out, ref, bounds }) => compare(name, await read(out, ref.length), ref, bounds)));
  }));
});

test('the serial linear kernel of software adapters matches float64 for both formats, every epilogue and size', async () => {
  expectWithinBounds(await page.evaluate(async () => {
    const { linearCase, run, read, compare, serialKernels } = globalThis.gpuTest;
    const cases = [];
    for (const int8 of [0, 1]) {
      for (const [n, nIn, nRows] of [[1, 100, 37], [3, 132, 300], [67, 100, 37]]) {
        for (const epilogue of [0, 1, 2]) cases.push(linearCase({ n, nIn, nRows, epilogue, hasBias: (n + epilogue) % 2, int8, serial: true }));
      }
    }
    cases.push(linearCase({ n: 2, nIn: 101, nRows: 37, epilogue: 1, hasBias: 1, int8: 0, serial: true }));
    await run((pass) => cases.forEach(({ bound, params }) => bound.encode(pass, params)), serialKernels);
    return Promise.all(cases.map(async ({ name, out, ref, bounds }) => compare(name, await read(out, ref.length), ref, bounds)));
  }));
});

const BLOCK_FORMAT_NAMES = ['f16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k', 'q5_k', 'q6_k'];
// nIn per format: 3 blocks of 32 (rows of 102, 54 or 66 bytes: most rows start off a word) or of 256 (Q6_K: 630
// bytes); F16 100 values, not a multiple of the GEMM's K step (16)
const blockNIn = (format) => (format === 'f16' ? 100 : format.endsWith('_k') ? 768 : 96);

test('linear dequantizes the GGUF block formats as ggml does: GEMV, GEMM and serial against float64', async () => {
  // Bound: f32 summation of nIn terms and up to 3 roundings in dequantizing a weight, (nIn + 8) 2^-24 S + 1e-6 with
  // S the sum of |x| (|d scale q| + |dmin min|) over the row (linearCase).
  expectWithinBounds(await page.evaluate(async (formats) => {
    const { linearCase, run, read, compare, serialKernels } = globalThis.gpuTest;
    const cases = [];
    const serialCases = [];
    formats.forEach(({ format, nIn }) => {
      // n 1, 2: the GEMV; 67: the GEMM (tiles of 32 tokens, 64 rows); 37 and 300 rows: no whole workgroups
      [[1, 37, 0], [2, 300, 1], [67, 37, 2]].forEach(([n, nRows, epilogue]) =>
        cases.push(linearCase({ n, nIn, nRows, epilogue, hasBias: (n + epilogue) % 2, block: format })));
      [[1, 37, 2], [3, 70, 1]].forEach(([n, nRows, epilogue]) =>
        serialCases.push(linearCase({ n, nIn, nRows, epilogue, hasBias: 1, block: format, serial: true })));
    });
    await run((pass) => cases.forEach(({ bound, params }) => bound.encode(pass, params)));
    await run((pass) => serialCases.forEach(({ bound, params }) => bound.encode(pass, params)), serialKernels);
    return Promise.all([...cases, ...serialCases].map(async ({ name, out, ref, bounds }) =>
      compare(name, await read(out, ref.length), ref, bounds)));
  }, BLOCK_FORMAT_NAMES.map((format) => ({ format, nIn: blockNIn(format) }))));
});

test('embed looks up token rows of GGUF block tables split in two parts, dequantized as ggml does', async () => {
  // Bound: one f32 addition to the position row and up to 3 roundings of the value: 1e-6 (1 + |ref|).
  expectWithinBounds(await page.evaluate(async (formats) => {
    const { kernels, randoms, randomInts, buffer, run, read, compare, blocks } = globalThis.gpuTest;
    const vocab = 50, nCtx = 80, n = 37, pos0 = 5, tokenOffset = 3, split = 23;
    const cases = formats.map(({ format, nIn: C }) => {
      const table = blocks.random(format, vocab, C);  // (vocab, C) values in blocks
      const rowBytes = table.bytes.length / vocab;
      const tokens = randomInts(tokenOffset + n, vocab); // (tokenOffset + n) u32
      const wpe = randoms(nCtx * C); // (nCtx, C) f32
      const x = buffer(randoms(n * C), 256); // (n, C) f32
      const parts = [[0, split], [split, vocab]].map(([rowBegin, rowEnd]) => {
        // each part its own buffer from its first row, as gpu_weights.js uploads them: (rows, C / values) blocks
        const rows = new Uint8Array(Math.ceil((rowEnd - rowBegin) * rowBytes / 4) * 4);
        rows.set(table.bytes.subarray(rowBegin * rowBytes, rowEnd * rowBytes));
        const bound = kernels.embed.bind({ x, tokens: buffer(tokens), wpe: buffer(wpe), wte: buffer(rows) });
        return { bound, rowBegin, rowEnd };
      });
      const ref = new Float64Array(n * C);
      for (let t = 0; t < n; t++) {
        const tok = tokens[tokenOffset + t];
        for (let c = 0; c < C; c++) ref[t * C + c] = wpe[(pos0 + t) * C + c] + table.values[tok * C + c];
      }
      return { name: `embed ${format} n=${n} C=${C} in 2 parts`, C, x, parts, ref, code: blocks.codes[format] };
    });
    await run((pass) => {
      for (const { C, parts, code } of cases) {
        parts.forEach(({ bound, rowBegin, rowEnd }, i) => bound.encode(pass, { n, C, tokenOffset, pos0, rowBegin, rowEnd, first: i === 0 ? 1 : 0, format: code }));
      }
    });
    return Promise.all(cases.map(async ({ name, C, x, ref }) =>
      compare(name, await read(x, n * C), ref, (i) => 1e-6 * (1 + Math.abs(ref[i])))));
  }, BLOCK_FORMAT_NAMES.map((format) => ({ format, nIn: blockNIn(format) }))));
});

test('linear with the accumulate epilogue adds to the output: run twice it adds twice, which once would not match', async () => {
  const results = await page.evaluate(async () => {
    const { linearCase, run, read, compare } = globalThis.gpuTest;
    const cases = [
      linearCase({ n: 1, nIn: 132, nRows: 37, epilogue: 2, hasBias: 1, int8: 1, times: 2 }),
      linearCase({ n: 3, nIn: 100, nRows: 37, epilogue: 2, hasBias: 1, int8: 0, times: 2 }),
    ];
    await run((pass) => cases.forEach(({ bound, params }) => [1, 2].forEach(() => bound.encode(pass, params))));
    const compared = [];
    for (const { name, out, ref, bounds, before } of cases) {
      const got = await read(out, ref.length);
      compared.push(compare(`${name} run twice against twice`, got, ref, bounds));
      // The reference with the accumulated term once (halfway between before and twice).
      const once = ref.map((v, i) => (v + before[i]) / 2);
      compared.push({ ...compare(`${name} run twice against once`, got, once, bounds), negative: true });
    }
    return compared;
  });
  expectWithinBounds(results.filter((result) => !result.negative));
  for (const { name, maxAbs, ratio } of results.filter((result) => result.negative)) {
    console.log(`${name}: max |diff| ${maxAbs.toExponential(2)}, ${ratio.toFixed(0)} times the bound`);
    expect(ratio, `${name}: the comparison tells a wrong result`).toBeGreaterThan(1);
  }
});

test('storeKv and attention match causal softmax attention, across more than 1024 keys and up to head size 128', async () => {
  // Bound: outputs are convex combinations of values in [-1, 1]; f32 scores and exp: |diff| <= 1e-5.
  expectWithinBounds(await page.evaluate(async () => {
    const { kernels, randoms, buffer, run, read, compare } = globalThis.gpuTest;
    const cases = [[5, 36, 3, 20, 2, 1, 4], [3, 36, 4, 1030, 1, 0, 1027], [67, 36, 3, 1030, 1, 0, 0], [3, 256, 2, 20, 1, 0, 2]];
    const built = cases.map(([n, C, nHead, nCtx, nLayer, layer, pos0]) => {
      const hs = C / nHead;
      const qkv = randoms(n * 3 * C); // (n, 3C) f32
      const keys = randoms(nLayer * nHead * nCtx * hs); // (nLayer, nHead, nCtx, hs) f32
      const values = randoms(keys.length); // (nLayer, nHead, nCtx, hs) f32
      const keyCache = buffer(keys, 256);
      const valueCache = buffer(values);
      const outBefore = randoms(n * C); // (n, C) f32
      const out = buffer(outBefore);
      const refKeys = Float64Array.from(keys);
      const refValues = Float64Array.from(values);
      const cache = (h, j) => ((layer * nHead + h) * nCtx + j) * hs;
      for (let t = 0; t < n; t++) {
        for (let c = 0; c < C; c++) {
          refKeys[cache(Math.floor(c / hs), pos0 + t) + c % hs] = qkv[t * 3 * C + C + c];
          refValues[cache(Math.floor(c / hs), pos0 + t) + c % hs] = qkv[t * 3 * C + 2 * C + c];
        }
      }
      const ref = new Float64Array(n * C);
      for (let t = 0; t < n; t++) {
        for (let h = 0; h < nHead; h++) {
          const scores = Array.from({ length: pos0 + t + 1 }, (_, j) => {
            let s = 0;
            for (let i = 0; i < hs; i++) s += qkv[t * 3 * C + h * hs + i] * refKeys[cache(h, j) + i];
            return s / Math.sqrt(hs);
          });
          const max = Math.max(...scores);
          const p = scores.map((s) => Math.exp(s - max));
          const sum = p.reduce((a, b) => a + b, 0);
          for (let i = 0; i < hs; i++) {
            ref[t * C + h * hs + i] = p.reduce((a, pj, j) => a + pj * refValues[cache(h, j) + i], 0) / sum;
          }
        }
      }
      const params = { n, C, nHead, nCtx, layer, pos0 };
      return {
        name: `n=${n} C=${C} heads=${nHead} nCtx=${nCtx} layer=${layer} pos0=${pos0}`, params, out, keyCache, valueCache, ref, refKeys, refValues,
        store: kernels.storeKv.bind({ qkv: buffer(qkv), keyCache, valueCache }),
        attend: kernels.attention.bind({ out, qkv: buffer(qkv, 256), keyCache, valueCache }),
      };
    });
    // storeKv writes the caches that attention then reads: separate dispatches, each its own usage scope.
    await run((pass) => built.forEach(({ store, attend, params }) => {
      store.encode(pass, params);
      attend.encode(pass, params);
    }));
    const results = [];
    for (const { name, out, keyCache, valueCache, ref, refKeys, refValues } of built) {
      results.push(compare(`storeKv keys ${name}`, await read(keyCache, refKeys.length), refKeys, () => 1e-30));
      results.push(compare(`storeKv values ${name}`, await read(valueCache, refValues.length), refValues, () => 1e-30));
      results.push(compare(`attention ${name}`, await read(out, ref.length), ref, () => 1e-5));
    }
    return results;
  }));
});

test('a run holds at most maxDispatches encodes', async () => {
  const message = await page.evaluate(async () => {
    const { kernels, device, buffer } = globalThis.gpuTest;
    const bound = kernels.storeKv.bind({ qkv: buffer(new Float32Array(12)), keyCache: buffer(new Float32Array(4)), valueCache: buffer(new Float32Array(4)) });
    const pass = device.createCommandEncoder().beginComputePass();
    kernels.beginRun();
    try {
      for (let i = 0; i <= kernels.maxDispatches; i++) bound.encode(pass, { n: 1, C: 4, nHead: 1, nCtx: 1, layer: 0, pos0: 0 });
      return null;
    } catch (error) {
      return error.message;
    } finally {
      pass.end();
    }
  });
  expect(message).toMatch(/more than 4096 dispatches/);
});
