// A model's weights in GPU buffers: the matrices taken row by row as they come (GpuWeightUpload.receive: from the
// engine's loader while the file streams in, so that the heap never holds them, or from a loaded model's heap,
// wasm/bindings.cpp's matrixRows), then the vectors from the heap (finish). fp32 matrices as f32 rows, int8 ones as
// their bytes (4 per u32 word) with the per-row scales, the GGUF types (F16, Q8_0 .. Q6_K) as the file's own ggml
// blocks, F16 as rows of halves (wgsl/blocks.js dequantizes them in the kernels).
// A matrix larger than the device's binding limit is split into parts of whole rows, each its own buffer.

import { FORMAT_CODES } from './kernels.js';
import { BLOCK_FORMATS } from './wgsl/blocks.js';

// The formats the GPU kernels multiply (web/lib/gpu/kernels.js): every one the engine runs (gpt2::WeightFormat).
// A model with another matrix, or whose n_embd the vec4 kernels cannot take, runs on the CPU.
export const GPU_WEIGHT_FORMATS = Object.keys(FORMAT_CODES);
// Rows copied out of the heap per upload of a loaded model: bounds the staging block the engine keeps.
const UPLOAD_BYTES = 4 << 20;
// Rows arrive in runs that start at multiples of this (the loaders' groups of rows), and parts start at multiples
// of it, so that every write starts on a 4-byte word whatever a row's bytes (Q6_K: 210 bytes a block).
const ROW_ALIGNMENT = 4;
const STORAGE = 0x80 | 0x8;  // GPUBufferUsage.STORAGE | COPY_DST, spelled out: Node has no GPUBufferUsage global

function formatsText() {
  return `${GPU_WEIGHT_FORMATS.slice(0, -1).join(', ')} and ${GPU_WEIGHT_FORMATS.at(-1)}`;
}

function embdReason(nEmbd) {
  return nEmbd % 4 === 0 ? null : `the GPU kernels need n_embd to be a multiple of 4, got ${nEmbd}`;
}

// Why engineModel cannot run on the GPU, or null.
export function unsupportedWeights(engineModel) {
  const formats = engineModel.weightTypes.split(', ').filter((f) => !GPU_WEIGHT_FORMATS.includes(f));
  if (formats.length > 0) return `the GPU kernels run ${formatsText()} weights; this model has ${formats.join(', ')}`;
  return embdReason(engineModel.config.n_embd);
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

// Bytes of one row of a matrix: f32 values, int8 bytes, or whole ggml blocks.
function rowBytesOf(format, nIn) {
  if (format in BLOCK_FORMATS) return nIn / BLOCK_FORMATS[format].values * BLOCK_FORMATS[format].bytes;
  return nIn * (format === 'int8' ? 1 : 4);
}

// bytes (a typed array) into buffer at byte offset at: writeBuffer takes whole words, and rows of blocks need not
// be, so an odd end is padded (the rows after it arrive later and overwrite the padding).
function writeBytes(device, buffer, at, values) {
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  if (bytes.byteLength % 4 === 0) device.queue.writeBuffer(buffer, at, bytes);
  else {
    const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
    padded.set(bytes);
    device.queue.writeBuffer(buffer, at, padded);
  }
}

// The weights of one model on device, matrix rows first (receive), the rest at the end (finish).
export class GpuWeightUpload {
  #device;
  #maxBindingBytes;
  // 'layer name' -> { format, formatCode (kernels.js), nOut, nIn, rowBytes, parts, rowsIn (the rows received so far) }
  #matrices = new Map();

  constructor(device) {
    this.#device = device;
    const limits = device.limits;
    this.#maxBindingBytes = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  }

  // Rows [row0, row0 + nRows) of matrix name of layer (-1: wte, lm_head), as gpt2::MatrixRows gives them; the rows
  // of a matrix arrive in order. Throws (one line) for a matrix the kernels cannot take.
  receive({ layer, name, format, nOut, nIn, row0, nRows, rows, scale }) {
    const matrix = this.#matrix(layer, name, format, nOut, nIn);
    const rowBytes = matrix.rowBytes;
    const bytes = new Uint8Array(rows.buffer, rows.byteOffset, rows.byteLength);
    for (const part of matrix.parts) {
      const first = Math.max(row0, part.o0), end = Math.min(row0 + nRows, part.o0 + part.nRows);
      if (first >= end) continue;
      writeBytes(this.#device, part.weight, (first - part.o0) * rowBytes, bytes.subarray((first - row0) * rowBytes, (end - row0) * rowBytes));
      if (part.scale) this.#device.queue.writeBuffer(part.scale, (first - part.o0) * 4, scale.subarray(first - row0, end - row0));
    }
    matrix.rowsIn = row0 + nRows;
  }

  #matrix(layer, name, format, nOut, nIn) {
    const key = `${layer} ${name}`;
    const known = this.#matrices.get(key);
    // a download that starts over hands the same matrices again
    if (known && known.format === format && known.nOut === nOut && known.nIn === nIn) return known;
    if (!(format in FORMAT_CODES)) throw new Error(`the GPU kernels run ${formatsText()} weights; this model has ${format}`);
    // n_in is n_embd or 4 n_embd, so only an n_embd can fail this
    if (nIn % 4 !== 0) throw new Error(embdReason(nIn));
    if (known) destroyMatrix(known);
    const rowBytes = rowBytesOf(format, nIn);
    const fitting = Math.floor(this.#maxBindingBytes / rowBytes);
    const rowsPerPart = Math.min(nOut, Math.max(ROW_ALIGNMENT, Math.floor(fitting / ROW_ALIGNMENT) * ROW_ALIGNMENT));
    const parts = [];
    for (let o0 = 0; o0 < nOut; o0 += rowsPerPart) {
      const count = Math.min(rowsPerPart, nOut - o0);
      const label = `${layer} ${name} rows ${o0}+${count}`;
      const weight = createBuffer(this.#device, count * rowBytes, label);
      const scale = format === 'int8' ? createBuffer(this.#device, count * 4, `${label} scales`) : null;
      parts.push({ weight, scale, o0, nRows: count });
    }
    const matrix = { format, formatCode: FORMAT_CODES[format], nOut, nIn, rowBytes, parts, rowsIn: 0 };
    this.#matrices.set(key, matrix);
    return matrix;
  }

  // Every matrix of a model whose heap holds them (no receiver at its load), read from the heap.
  receiveFromHeap(engineModel) {
    const { n_layer } = engineModel.config;
    const { modelMatrices: [wte, head], layerMatrices } = engineModel.engine.constants.weightNames;
    const names = [[-1, wte], ...(engineModel.call((model) => model.matrix(-1, head).tied) ? [] : [[-1, head]])];
    for (let l = 0; l < n_layer; l++) for (const name of layerMatrices) names.push([l, name]);
    for (const [layer, name] of names) {
      const { format, nOut, nIn } = engineModel.call((model) => model.matrix(layer, name));
      // whole groups of rows, so that every upload but a matrix's last starts and ends on a word
      const step = Math.max(ROW_ALIGNMENT, Math.floor(UPLOAD_BYTES / rowBytesOf(format, nIn) / ROW_ALIGNMENT) * ROW_ALIGNMENT);
      for (let row0 = 0; row0 < nOut; row0 += step) {
        const nRows = Math.min(step, nOut - row0);
        engineModel.call((model) => {
          const rows = model.matrixRows(layer, name, row0, nRows);
          if (!rows) throw new Error(`the engine gave no rows of ${name} (layer ${layer}): out of memory for its staging block`);
          const scale = format === 'int8' ? model.matrix(layer, name).scale.subarray(row0, row0 + nRows) : null;
          this.receive({ layer, name, format, nOut, nIn, row0, nRows, rows, scale });  // copied at once: the heap may move
        });
      }
    }
  }

  // The weights object the kernels bind (every matrix received whole; the vectors and biases from engineModel's
  // heap), keyed by the engine's weight names: { wte, wpe, layers: [{ ln_1: { weight, bias }, attn_qkv, ... }], ln_f,
  // lm_head, bytes }.
  finish(engineModel) {
    const device = this.#device;
    const { n_layer } = engineModel.config;
    const { modelMatrices: [wteName, headName], layerMatrices, modelVectors, layerVectors } = engineModel.engine.constants.weightNames;
    const matrix = (layer, name) => {
      const received = this.#matrices.get(`${layer} ${name}`);
      if (!received || received.rowsIn !== received.nOut) throw new Error(`the GPU upload lacks rows of ${name} (layer ${layer})`);
      const info = engineModel.call((model) => {
        const m = model.matrix(layer, name);
        return { tied: m.tied, bias: m.bias?.slice() };
      });
      const { format, formatCode, nOut, nIn, parts } = received;
      const bias = info.bias ? uploadVector(device, info.bias, `${layer} ${name} bias`) : null;
      return { format, formatCode, nOut, nIn, parts: parts.map(({ weight, scale, o0, nRows }) => ({ weight, scale, o0, nRows })), bias, tied: info.tied };
    };
    // the vectors of a layer (-1: the model's) into `into`: a layernorm's "ln_1.weight" as into.ln_1.weight
    const vectors = (layer, names, into) => {
      for (const name of names) {
        const [key, part] = name.split('.');
        const buffer = uploadVector(device, engineModel.call((model) => model.vector(layer, name).slice()), `${layer} ${name}`);
        if (part) (into[key] ??= {})[part] = buffer;
        else into[key] = buffer;
      }
      return into;
    };
    const wte = matrix(-1, wteName);
    const head = engineModel.call((model) => model.matrix(-1, headName).tied) ? wte : matrix(-1, headName);
    const layers = [];
    for (let l = 0; l < n_layer; l++) {
      const layer = vectors(l, layerVectors, {});
      for (const name of layerMatrices) layer[name] = matrix(l, name);
      layers.push(layer);
    }
    const weights = vectors(-1, modelVectors, { [wteName]: wte, layers, [headName]: head });
    weights.bytes = bufferBytes(weights);
    return weights;
  }

  // The matrices' buffers, for an upload that is abandoned before finish().
  destroy() {
    for (const matrix of this.#matrices.values()) destroyMatrix(matrix);
    this.#matrices.clear();
  }
}

function destroyMatrix({ parts }) {
  for (const { weight, scale } of parts) {
    weight.destroy();
    scale?.destroy();
  }
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
