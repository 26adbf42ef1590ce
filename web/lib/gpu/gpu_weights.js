// A model's weights in GPU buffers, uploaded tensor by tensor from the engine's heap (wasm/bindings.cpp's matrix,
// matrixRows and vector): fp32 matrices as f32 rows, int8 ones as their bytes (4 per u32 word) with the per-row scales,
// the GGUF types (F16, Q8_0 .. Q6_K) as the file's own ggml blocks, F16 as rows of halves (wgsl/blocks.js dequantizes
// them in the kernels).
// A matrix larger than the device's binding limit is split into parts of whole rows, each its own buffer.

import { FORMAT_CODES } from './kernels.js';
import { BLOCK_FORMATS } from './wgsl/blocks.js';

// The formats the GPU kernels multiply (web/lib/gpu/kernels.js): every one the engine runs (gpt2::WeightFormat).
// A model with another matrix, or whose n_embd the vec4 kernels cannot take, runs on the CPU.
export const GPU_WEIGHT_FORMATS = Object.keys(FORMAT_CODES);
const LAYER_MATRICES = ['attn_qkv', 'attn_proj', 'mlp_fc', 'mlp_proj'];
// Rows copied out of the heap per upload: bounds the staging block the engine keeps.
const UPLOAD_BYTES = 4 << 20;
const STORAGE = 0x80 | 0x8;  // GPUBufferUsage.STORAGE | COPY_DST, spelled out: Node has no GPUBufferUsage global

// Why engineModel cannot run on the GPU, or null.
export function unsupportedWeights(engineModel) {
  const formats = engineModel.weightTypes.split(', ').filter((f) => !GPU_WEIGHT_FORMATS.includes(f));
  if (formats.length > 0) {
    const known = `${GPU_WEIGHT_FORMATS.slice(0, -1).join(', ')} and ${GPU_WEIGHT_FORMATS.at(-1)}`;
    return `the GPU kernels run ${known} weights; this model has ${formats.join(', ')}`;
  }
  const { n_embd: C } = engineModel.config;
  if (C % 4 !== 0) return `the GPU kernels need n_embd to be a multiple of 4, got ${C}`;
  return null;
}

function createBuffer(device, bytes, label) {
  // bindings are at least 4 bytes, and writes are whole words
  return device.createBuffer({ label, size: Math.max(4, Math.ceil(bytes / 4) * 4), usage: STORAGE });
}

function uploadVector(device, values, label) {
  const buffer = createBuffer(device, values.byteLength, label);
  device.queue.writeBuffer(buffer, 0, values);
  return buffer;
}

// Bytes of one row of a matrix in the upload: f32 values, int8 bytes, or whole ggml blocks.
function rowBytesOf(format, nIn) {
  if (format in BLOCK_FORMATS) return nIn / BLOCK_FORMATS[format].values * BLOCK_FORMATS[format].bytes;
  return nIn * (format === 'int8' ? 1 : 4);
}

// rows (a typed array) into buffer at byte offset at: writeBuffer takes whole words, and rows of blocks need not
// be (Q6_K: 210 bytes a block), so the last piece of a part is padded.
function writeRows(device, buffer, at, rows) {
  const bytes = new Uint8Array(rows.buffer, rows.byteOffset, rows.byteLength);
  if (bytes.byteLength % 4 === 0) device.queue.writeBuffer(buffer, at, bytes);
  else {
    const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
    padded.set(bytes);
    device.queue.writeBuffer(buffer, at, padded);
  }
}

// -> { format, formatCode (kernels.js), nOut, nIn, parts: [{ weight, scale, o0, nRows }], bias } of one matrix, or the
// tied head's wte
function uploadMatrix(device, engineModel, layer, name, maxBindingBytes) {
  const info = engineModel.call((model) => {
    const m = model.matrix(layer, name);
    return m && { format: m.format, nOut: m.nOut, nIn: m.nIn, tied: m.tied, scale: m.scale?.slice(), bias: m.bias?.slice() };
  });
  const { format, nOut, nIn } = info;
  const rowBytes = rowBytesOf(format, nIn);
  const rowsPerPart = Math.max(1, Math.min(nOut, Math.floor(maxBindingBytes / rowBytes)));
  // 4 rows of any format are whole words, so every upload but a part's last starts and ends on a word
  const rowsPerUpload = Math.max(4, Math.floor(UPLOAD_BYTES / rowBytes / 4) * 4);
  const parts = [];
  for (let o0 = 0; o0 < nOut; o0 += rowsPerPart) {
    const nRows = Math.min(rowsPerPart, nOut - o0);
    const weight = createBuffer(device, nRows * rowBytes, `${layer} ${name} rows ${o0}+${nRows}`);
    for (let r = 0; r < nRows; r += rowsPerUpload) {
      const count = Math.min(rowsPerUpload, nRows - r);
      engineModel.call((model) => {
        const rows = model.matrixRows(layer, name, o0 + r, count);
        if (!rows) throw new Error(`the engine gave no rows of ${name} (layer ${layer}): out of memory for its staging block`);
        writeRows(device, weight, r * rowBytes, rows);  // copied at once, so the heap view may move
      });
    }
    const scale = format === 'int8' ? uploadVector(device, info.scale.subarray(o0, o0 + nRows), `${name} scales`) : null;
    parts.push({ weight, scale, o0, nRows });
  }
  const bias = info.bias ? uploadVector(device, info.bias, `${layer} ${name} bias`) : null;
  return { format, formatCode: FORMAT_CODES[format], nOut, nIn, parts, bias, tied: info.tied };
}

function uploadNorm(device, engineModel, layer, name) {
  const get = (part) => engineModel.call((model) => model.vector(layer, `${name}.${part}`).slice());
  return { weight: uploadVector(device, get('weight'), `${layer} ${name}.weight`), bias: uploadVector(device, get('bias'), `${layer} ${name}.bias`) };
}

// Every weight of engineModel on device; bytes: what the buffers hold.
export function uploadWeights(device, engineModel) {
  const { n_layer } = engineModel.config;
  const limits = device.limits;
  const maxBindingBytes = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const matrix = (layer, name) => uploadMatrix(device, engineModel, layer, name, maxBindingBytes);
  const wte = matrix(-1, 'wte');
  const head = engineModel.call((model) => model.matrix(-1, 'lm_head').tied) ? wte : matrix(-1, 'lm_head');
  const layers = [];
  for (let l = 0; l < n_layer; l++) {
    const layer = { ln_1: uploadNorm(device, engineModel, l, 'ln_1'), ln_2: uploadNorm(device, engineModel, l, 'ln_2') };
    for (const name of LAYER_MATRICES) layer[name] = matrix(l, name);
    layers.push(layer);
  }
  const wpe = uploadVector(device, engineModel.call((model) => model.vector(-1, 'wpe').slice()), 'wpe');
  const weights = { wte, wpe, layers, ln_f: uploadNorm(device, engineModel, -1, 'ln_f'), lm_head: head };
  weights.bytes = bufferBytes(weights);
  return weights;
}

// The GPU buffers a weights object holds, each once (a tied head shares wte's).
function gpuBuffers(weights) {
  const buffers = new Set();
  const seen = new Set();
  const visit = (value) => {
    if (!value || typeof value !== 'object' || seen.has(value)) return;
    seen.add(value);
    if (typeof value.destroy === 'function') buffers.add(value);
    else for (const inner of Object.values(value)) visit(inner);
  };
  visit(weights);
  return [...buffers];
}

function bufferBytes(weights) {
  return gpuBuffers(weights).reduce((bytes, buffer) => bytes + buffer.size, 0);
}

export function destroyWeights(weights) {
  for (const buffer of gpuBuffers(weights)) buffer.destroy();
}
