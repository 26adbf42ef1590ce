// The WebGPU compute kernels of the GPT-2 forward pass (WGSL in ./wgsl/), and how to dispatch them.
//
// createKernels(device) compiles every kernel. kernels.K.bind(buffers) makes K's bind group once; each
// bound.encode(pass, params) then costs no GPU object: params go into the next free 256-byte slot of one
// uniform buffer, bound with a dynamic offset. Between kernels.beginRun() and kernels.endRun() (which uploads
// the used slots with one writeBuffer, before the submit) each encode gets its own slot, so the passes of one
// command buffer never see each other's params.
//
// Buffers are GPUBuffers or { buffer, offset, size } bindings (offset a multiple of the device's
// minStorageBufferOffsetAlignment, 256). A buffer written by a dispatch must not also be bound to it as an
// input (WebGPU forbids a writable and a read-only use of one buffer in one dispatch).
import { EMBED_SOURCES, EMBED_WORKGROUP } from './wgsl/embed.js';
import { LAYERNORM_SOURCE } from './wgsl/layernorm.js';
import { GEMM_TM, GEMM_TN, GEMV_ROWS, LINEAR_SOURCES, SERIAL_WORKGROUP } from './wgsl/linear.js';
import { BLOCK_LINEAR_SOURCES } from './wgsl/linear_blocks.js';
import { BLOCK_FORMATS } from './wgsl/blocks.js';
import { STORE_KV_SOURCE, STORE_KV_WORKGROUP } from './wgsl/store_kv.js';
import { ATTENTION_MAX_HEAD_SIZE, ATTENTION_SOURCE } from './wgsl/attention.js';

const SLOT_BYTES = 256;
const SLOT_WORDS = SLOT_BYTES / 4;
const MAX_WORKGROUPS_PER_DIMENSION = 65535;
// linear takes the GEMV kernel up to this many token rows: re-reading the weights per row beats a GEMM tile
// that is mostly empty.
const GEMV_MAX_TOKENS = 2;
const DUMMY_BYTES = 256;

const ceilDiv = (a, b) => Math.ceil(a / b);

// The weight formats the kernels multiply, by the code the executor passes as params.format (the engine's names,
// gpt2::weight_format_name): fp32, int8, then the GGUF types of wgsl/blocks.js (f16, q8_0, ..., q6_k).
export const FORMAT_CODES = Object.fromEntries(['fp32', 'int8', ...Object.keys(BLOCK_FORMATS)].map((name, code) => [name, code]));
const FORMAT_NAMES = Object.keys(FORMAT_CODES);

function formatName(kernel, code) {
  const name = FORMAT_NAMES[code ?? 0];
  if (name === undefined) throw new Error(`${kernel}: unknown weight format code ${code}`);
  return name;
}

function checkDimension(name, count) {
  if (count > MAX_WORKGROUPS_PER_DIMENSION) {
    throw new Error(`${name}: ${count} workgroups in one dimension exceed ${MAX_WORKGROUPS_PER_DIMENSION}`);
  }
}

// Each kernel: params (the Params struct's fields in order: u32 unless f32; a missing value is 0), buffers
// (binding 1, 2, ... of the WGSL, and whether the kernel writes them; optional ones get the dummy buffer),
// sources (pipeline variants) and plan(params, the Kernels' options) -> { variant, groups }.
const KERNELS = {
  embed: {
    params: ['n', 'C', 'tokenOffset', 'pos0', 'rowBegin', 'rowEnd', 'first'],
    buffers: [['x', 'write'], ['tokens'], ['wte'], ['wteScale', 'optional'], ['wpe']],
    sources: EMBED_SOURCES,
    // the block formats' variants are compiled when first used (or by createKernels' formats)
    lazy: (variant) => variant in BLOCK_FORMATS,
    plan(p) {
      const format = formatName('embed', p.format);
      if (format !== 'fp32' && p.C % 4 !== 0) throw new Error(`embed: ${format} rows need C % 4 == 0 (C = ${p.C})`);
      checkDimension('embed', p.n);
      return { variant: format === 'fp32' ? 'f32' : format, groups: [ceilDiv(p.C, EMBED_WORKGROUP), p.n] };
    },
  },
  layernorm: {
    params: ['n', 'C', ['eps', 'f32'], 'rowOffset'],
    buffers: [['out', 'write'], ['input'], ['weight'], ['bias']],
    sources: { main: LAYERNORM_SOURCE },
    plan(p) {
      checkDimension('layernorm', p.n);
      return { variant: 'main', groups: [p.n] };
    },
  },
  linear: {
    params: ['n', 'nIn', 'nRows', 'o0', 'outStride', 'inRowOffset', 'outRowOffset', 'epilogue', 'hasBias'],
    buffers: [['out', 'write'], ['input'], ['weight'], ['scale', 'optional'], ['bias', 'optional']],
    sources: { ...LINEAR_SOURCES, ...BLOCK_LINEAR_SOURCES },
    lazy: (variant) => variant in BLOCK_LINEAR_SOURCES,
    plan: planLinear,
  },
  storeKv: {
    params: ['n', 'C', 'nHead', 'nCtx', 'layer', 'pos0'],
    buffers: [['qkv'], ['keyCache', 'write'], ['valueCache', 'write']],
    sources: { main: STORE_KV_SOURCE },
    plan(p) {
      checkDimension('storeKv', p.n);
      return { variant: 'main', groups: [ceilDiv(p.C, STORE_KV_WORKGROUP), p.n] };
    },
  },
  attention: {
    params: ['n', 'C', 'nHead', 'nCtx', 'layer', 'pos0'],
    buffers: [['out', 'write'], ['qkv'], ['keyCache'], ['valueCache']],
    sources: { main: ATTENTION_SOURCE },
    plan(p) {
      if (p.C / p.nHead > ATTENTION_MAX_HEAD_SIZE) {
        throw new Error(`attention: head size ${p.C / p.nHead} exceeds ${ATTENTION_MAX_HEAD_SIZE}`);
      }
      if (p.pos0 + p.n > p.nCtx) throw new Error(`attention: positions up to ${p.pos0 + p.n} exceed nCtx ${p.nCtx}`);
      checkDimension('attention', p.n);
      return { variant: 'main', groups: [p.nHead, p.n] };
    },
  },
};

// The variant of shape ('gemv', 'gemm', 'serial') for a weight format: gemvF32, gemvInt8, gemv_q4_k, ...
function linearVariant(shape, format, nIn) {
  if (format === 'fp32') return shape === 'serial' && nIn % 4 === 0 ? 'serialF32x4' : `${shape}F32`;
  return format === 'int8' ? `${shape}Int8` : `${shape}_${format}`;
}

function planLinear(p, { serialLinear }) {
  const format = formatName('linear', p.format);
  if (format !== 'fp32' && p.nIn % 4 !== 0) throw new Error(`linear: ${format} rows need nIn % 4 == 0 (nIn = ${p.nIn})`);
  if (serialLinear) {
    const groups = [ceilDiv(p.nRows, SERIAL_WORKGROUP), p.n];
    groups.forEach((count) => checkDimension('linear', count));
    return { variant: linearVariant('serial', format, p.nIn), groups };
  }
  const gemvGroups = ceilDiv(p.nRows, GEMV_ROWS);
  // Past 65535 GEMV workgroups (262140 rows, far more than GPT-2's LM head) the GEMM's wider tiles still fit
  // in one grid dimension.
  if (p.n <= GEMV_MAX_TOKENS && p.nIn % 4 === 0 && gemvGroups <= MAX_WORKGROUPS_PER_DIMENSION) {
    return { variant: linearVariant('gemv', format, p.nIn), groups: [gemvGroups, 1, p.n] };
  }
  const groups = [ceilDiv(p.nRows, GEMM_TN), ceilDiv(p.n, GEMM_TM)];
  groups.forEach((count) => checkDimension('linear', count));
  return { variant: linearVariant('gemm', format, p.nIn), groups };
}

// The Params struct of a kernel, and the writer of its fields into a slot.
function paramsLayout(fields) {
  const named = fields.map((field) => (Array.isArray(field) ? field : [field, 'u32']));
  const members = named.map(([name, type]) => `  ${name}: ${type},`).join('\n');
  return {
    wgsl: `struct Params {\n${members}\n}\n@group(0) @binding(0) var<uniform> p: Params;\n`,
    // A struct of 4-byte members is padded to a multiple of 16 bytes.
    bytes: ceilDiv(named.length * 4, 16) * 16,
    write(words, floats, base, params) {
      named.forEach(([name, type], i) => {
        const value = params[name] ?? 0;
        if (type === 'f32') floats[base + i] = value;
        else words[base + i] = value;
      });
    },
  };
}

// The variants compiled up front: all but the lazy ones (spec.lazy), and those of the block formats in formats.
function eagerVariant(spec, variant, formats) {
  return !spec.lazy?.(variant) || formats.some((format) => variant === format || variant.endsWith(`_${format}`));
}

async function compileKernel(device, name, spec, formats) {
  const layout = paramsLayout(spec.params);
  const visibility = GPUShaderStage.COMPUTE;
  const bindGroupLayout = device.createBindGroupLayout({
    label: name,
    entries: [
      { binding: 0, visibility, buffer: { type: 'uniform', hasDynamicOffset: true, minBindingSize: layout.bytes } },
      ...spec.buffers.map(([, use], i) => ({
        binding: i + 1, visibility, buffer: { type: use === 'write' ? 'storage' : 'read-only-storage' },
      })),
    ],
  });
  const pipelineLayout = device.createPipelineLayout({ label: name, bindGroupLayouts: [bindGroupLayout] });
  const pipelines = {};
  const eager = Object.entries(spec.sources).filter(([variant]) => eagerVariant(spec, variant, formats));
  await Promise.all(eager.map(async ([variant, source]) => {
    const label = `${name}/${variant}`;
    const module = device.createShaderModule({ label, code: layout.wgsl + source });
    try {
      pipelines[variant] = await device.createComputePipelineAsync({
        label, layout: pipelineLayout, compute: { module, entryPoint: 'main' },
      });
    } catch (error) {
      const info = await module.getCompilationInfo();
      const messages = info.messages.map((m) => `${m.type} at ${m.lineNum}:${m.linePos}: ${m.message}`).join('\n');
      throw new Error(`kernel ${label} failed to compile: ${error.message}\n${messages}`);
    }
  }));
  // A lazy variant's pipeline, made on its first encode: createComputePipeline returns at once, the GPU process
  // compiles it before the dispatch runs (a model compiles the variants of its own formats only).
  const pipeline = (variant) => {
    pipelines[variant] ??= device.createComputePipeline({
      label: `${name}/${variant}`, layout: pipelineLayout,
      compute: { module: device.createShaderModule({ label: `${name}/${variant}`, code: layout.wgsl + spec.sources[variant] }), entryPoint: 'main' },
    });
    return pipelines[variant];
  };
  return { spec, layout, bindGroupLayout, pipeline };
}

// A binding of a bind group entry: a GPUBuffer whole, or { buffer, offset, size }.
function bindingResource(value) {
  if (value && value.buffer) return { buffer: value.buffer, offset: value.offset ?? 0, size: value.size };
  return { buffer: value };
}

class Bound {
  constructor(kernels, kernel, bindGroup) {
    this.kernels = kernels;
    this.kernel = kernel;
    this.bindGroup = bindGroup;
  }

  // Records this kernel's dispatch for params into pass (a GPUComputePassEncoder).
  encode(pass, params) {
    const { variant, groups } = this.kernel.spec.plan(params, this.kernels.options);
    if (groups.some((count) => count === 0)) return;
    const offset = this.kernels.takeSlot(this.kernel.layout, params);
    pass.setPipeline(this.kernel.pipeline(variant));
    pass.setBindGroup(0, this.bindGroup, [offset]);
    pass.dispatchWorkgroups(...groups);
  }
}

class Kernels {
  constructor(device, compiled, { maxDispatches = 4096, serialLinear = false } = {}) {
    this.device = device;
    this.options = { serialLinear };
    this.maxDispatches = maxDispatches;
    // (maxDispatches, 256 bytes): one Params per slot.
    this.uniforms = device.createBuffer({
      label: 'kernel params', size: maxDispatches * SLOT_BYTES, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
    });
    // Stands in for the optional buffers a dispatch does not read (fp32 scales, absent bias).
    this.dummy = device.createBuffer({ label: 'kernel dummy', size: DUMMY_BYTES, usage: GPUBufferUsage.STORAGE });
    this.staging = new ArrayBuffer(maxDispatches * SLOT_BYTES);
    this.words = new Uint32Array(this.staging);
    this.floats = new Float32Array(this.staging);
    this.used = 0;
    for (const [name, kernel] of Object.entries(compiled)) {
      this[name] = { bind: (buffers) => this.bind(name, kernel, buffers) };
    }
  }

  bind(name, kernel, buffers) {
    const entries = [{ binding: 0, resource: { buffer: this.uniforms, offset: 0, size: SLOT_BYTES } }];
    kernel.spec.buffers.forEach(([key, use], i) => {
      const value = buffers[key];
      if ((value === null || value === undefined) && use !== 'optional') throw new Error(`${name}.bind: buffer ${key} is missing`);
      entries.push({ binding: i + 1, resource: bindingResource(value ?? this.dummy) });
    });
    const bindGroup = this.device.createBindGroup({ label: name, layout: kernel.bindGroupLayout, entries });
    return new Bound(this, kernel, bindGroup);
  }

  beginRun() {
    this.used = 0;
  }

  // Writes params into the next slot; returns its byte offset.
  takeSlot(layout, params) {
    if (this.used >= this.maxDispatches) {
      throw new Error(`more than ${this.maxDispatches} dispatches in one run: raise createKernels' maxDispatches`);
    }
    const slot = this.used++;
    layout.write(this.words, this.floats, slot * SLOT_WORDS, params);
    return slot * SLOT_BYTES;
  }

  // Uploads the params of this run's encodes; call before submitting the command buffer that holds them.
  endRun() {
    if (this.used > 0) this.device.queue.writeBuffer(this.uniforms, 0, this.staging, 0, this.used * SLOT_BYTES);
  }

  destroy() {
    this.uniforms.destroy();
    this.dummy.destroy();
  }
}

// Compiles every kernel for device. options: { maxDispatches } (encodes per run, default 4096), { serialLinear }
// (linear layers by the serial kernel, wgsl/linear.js: for software adapters), { formats } (block formats, e.g.
// ['q4_k'], whose variants to compile now; the others' are made on first use). Rejects with an Error naming the
// kernel, with the compiler's messages, when one fails.
export async function createKernels(device, options = {}) {
  const formats = options.formats ?? [];
  const entries = await Promise.all(Object.entries(KERNELS).map(
    async ([name, spec]) => [name, await compileKernel(device, name, spec, formats)]));
  return new Kernels(device, Object.fromEntries(entries), options);
}
