// A session whose forward passes run on the GPU: the engine's recording session (wasm/bindings.cpp, engine/gpt2.h
// Session::create_recording) keeps the window, the cache policy and the sampler, and writes each pass down as
// commands (engine/model/forward_ops.h); this runs them as WebGPU dispatches over activations and an fp32 KV cache
// of its own, allocated once at n_ctx. A pass is one command buffer, one submit and one readback: the last token's
// logits, which the engine's sampler then reads.
import { EngineError } from '../errors.js';

// engine/model/forward_ops.h, field by field
const COMMAND_INTS = 11;
const OP = { embed: 0, layernorm: 1, linear: 2, storeKv: 3, attention: 4 };
const ACTIVATIONS = ['x', 'xb', 'qkv', 'att', 'fc', 'logits'];
const MATRICES = ['attn_qkv', 'attn_proj', 'mlp_fc', 'mlp_proj', 'lm_head'];
const NORMS = ['ln_1', 'ln_2', 'ln_f'];
const STORAGE = 0x80 | 0x8 | 0x4;  // GPUBufferUsage.STORAGE | COPY_DST | COPY_SRC
const MAP_READ = 0x1 | 0x8;  // GPUBufferUsage.MAP_READ | COPY_DST
const GPU_MAP_READ = 0x1;  // GPUMapMode.READ

export class GpuSession {
  #recording;  // the engine's recording session (embind Session)
  #gpu;  // the model's GPU resources: { device, kernels, weights, lost, whenLost } (gpu_model.js)
  #config;
  #buffers;
  #bound;  // bound kernels, each made once: per layer, and the embedding and head parts
  #readback;  // (n_vocab) f32, mappable: the last token's logits
  #logitsBytes;
  #makeScorer;
  #scorer = null;  // the CPU session score() runs on, once it has run
  counters = { passes: 0, dispatches: 0, submits: 0, readbackBytes: 0 };  // since the session began

  // recording: an EngineSession made with { recording: true }; gpu: the model's GPU resources; batchRows: the
  // engine's chunk of rows (EngineSession.batchRows); makeScorer: -> a CPU EngineSession of the same weights
  constructor(recording, gpu, config, batchRows, makeScorer) {
    this.#recording = recording;
    this.#makeScorer = makeScorer;
    this.#gpu = gpu;
    this.#config = config;
    this.#buffers = createBuffers(gpu.device, config, batchRows);
    this.#bound = bindKernels(gpu.kernels, gpu.weights, this.#buffers, config);
    this.#logitsBytes = config.n_vocab * 4;
    this.#readback = gpu.device.createBuffer({ label: 'logits readback', size: this.#logitsBytes, usage: MAP_READ });
  }

  setSampling(options) {
    this.#recording.setSampling(options);
  }

  async prefill(ids) {
    this.#recording.feedPrompt(ids, false);
    return this.#runAndSample();
  }

  async prefillReusing(ids) {
    this.#recording.feedPrompt(ids, true);
    return this.#runAndSample();
  }

  async step(id) {
    this.#recording.feedStep(id);
    return this.#runAndSample();
  }

  get reusedTokens() {
    return this.#recording.reusedTokens;
  }

  get nCached() {
    return this.#recording.nCached;
  }

  get kvCache() {
    return this.#recording.kvCache;
  }

  get kvCacheBytes() {
    return this.#recording.kvCacheBytes;
  }

  get vocabSize() {
    return this.#recording.vocabSize;
  }

  distribution(token, topK = 0) {
    return this.#recording.distribution(token, topK);
  }

  reset() {
    this.#recording.reset();
  }

  // Scores run on the CPU engine, over the same weights (which stay in the heap); the GPU session's window is
  // left as it was.
  score(ids, topK = 0) {
    this.#scorer ??= this.#makeScorer();
    return this.#scorer.score(ids, topK);
  }

  // The last fed position's logits as the GPU computed them (Float32Array over the heap: read it before the next
  // call).
  logits() {
    return this.#recording.call((session) => session.hostLogits());
  }

  dispose() {
    this.#recording.dispose();
    this.#scorer?.dispose();
    for (const buffer of Object.values(this.#buffers)) if (buffer.destroy) buffer.destroy();
    for (const buffer of [...this.#buffers.keyCache, ...this.#buffers.valueCache]) buffer.destroy();
    this.#readback.destroy();
  }

  // 'webgpu', or 'wasm' once the GPU was lost and the session went on on the CPU (deviceLost then says why)
  get device() {
    return this.#gpu.lost ? 'wasm' : 'webgpu';
  }

  get deviceLost() {
    return this.#gpu.lost;
  }

  // A lost GPU (a driver reset, GPUDevice.destroy()) does not end the generation: the engine runs the pass on the
  // CPU from the same window, the sampler keeps its state, and so a seeded run goes on with the text it would have
  // had on the CPU from the start.
  async #runAndSample() {
    if (!this.#gpu.lost) {
      try {
        await this.#runOnGpu();
      } catch (error) {
        if (!(await this.#gpu.whenLost())) throw error;
      }
    }
    if (this.#gpu.lost) this.#recording.checkedCall((session) => session.runOnCpu(), (ran) => !ran);
    return this.#recording.checkedCall((session) => session.sample(), (token) => token < 0);
  }

  async #runOnGpu() {
    const { device, kernels } = this.#gpu;
    const commands = this.#recording.call((session) => session.commands().slice());
    const window = this.#recording.call((session) => session.window());
    device.queue.writeBuffer(this.#buffers.tokens, 0, window);
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    kernels.beginRun();
    let lastLogitsRow = -1;
    for (let i = 0; i < commands.length; i += COMMAND_INTS) {
      const row = this.#encode(pass, commands.subarray(i, i + COMMAND_INTS));
      if (row >= 0) lastLogitsRow = row;
    }
    pass.end();
    kernels.endRun();
    encoder.copyBufferToBuffer(this.#buffers.logits, lastLogitsRow * this.#logitsBytes, this.#readback, 0, this.#logitsBytes);
    device.queue.submit([encoder.finish()]);
    this.counters.passes++;
    this.counters.submits++;
    this.counters.readbackBytes += this.#logitsBytes;
    await this.#readback.mapAsync(GPU_MAP_READ);
    const logits = new Float32Array(this.#readback.getMappedRange());
    // a heap view taken now: one taken before the wait could have been detached by a memory growth in between
    this.#recording.call((session) => session.hostLogits().set(logits));
    this.#readback.unmap();
  }

  // Encodes one command; -> the logits row a head writes, else -1.
  #encode(pass, command) {
    const [op, layer, which, out, input, epilogue, row0, n, pos0, tokenOffset, logitsRow] = command;
    const { n_embd: C, n_head: nHead, n_ctx: nCtx, layer_norm_epsilon: eps } = this.#config;
    const bound = layer >= 0 ? this.#bound.layers[layer] : this.#bound.head;
    if (logitsRow >= 0) throw new EngineError({ kind: 'input', message: 'the GPU session reads back the last token\'s logits only' });
    this.counters.dispatches++;
    switch (op) {
      case OP.embed:
        this.#bound.embed.forEach(({ bound: part, rowBegin, rowEnd, format }, k) => {
          part.encode(pass, { n, C, tokenOffset, pos0, rowBegin, rowEnd, first: k === 0 ? 1 : 0, format });
        });
        this.counters.dispatches += this.#bound.embed.length - 1;
        return -1;
      case OP.layernorm:
        bound[NORMS[which]].encode(pass, { n, C, eps, rowOffset: row0 });
        return -1;
      case OP.linear: {
        const matrix = bound[MATRICES[which]];
        const target = ACTIVATIONS[out];
        if (ACTIVATIONS[input] !== matrix.input) throw new Error(`the engine multiplies ${MATRICES[which]} with ${ACTIVATIONS[input]}, the GPU binds ${matrix.input}`);
        matrix.parts.forEach(({ byTarget, o0, nRows, format }) => {
          byTarget[target].encode(pass, {
            n, nIn: matrix.nIn, nRows, o0, outStride: matrix.nOut, inRowOffset: row0, outRowOffset: row0,
            epilogue, hasBias: matrix.hasBias, format,
          });
        });
        this.counters.dispatches += matrix.parts.length - 1;
        return target === 'logits' ? row0 + n - 1 : -1;
      }
      case OP.storeKv:
        bound.storeKv.encode(pass, { n, C, nHead, nCtx, layer: 0, pos0 });
        return -1;
      case OP.attention:
        bound.attention.encode(pass, { n, C, nHead, nCtx, layer: 0, pos0 });
        return -1;
      default:
        throw new Error(`unknown GPU command ${op}`);
    }
  }
}

// The activations (batchRows rows each, the engine's chunk), the window's tokens and the KV cache, a buffer per
// layer so that no binding outgrows the device's limit.
function createBuffers(device, { n_embd: C, n_vocab: V, n_ctx: T, n_layer: L }, rows) {
  const make = (label, floats) => device.createBuffer({ label, size: Math.max(16, floats * 4), usage: STORAGE });
  const buffers = {
    x: make('x', rows * C),  // (rows, n_embd)
    xb: make('xb', rows * C),  // (rows, n_embd)
    qkv: make('qkv', rows * 3 * C),  // (rows, 3 n_embd)
    att: make('att', rows * C),  // (rows, n_embd)
    fc: make('fc', rows * 4 * C),  // (rows, 4 n_embd)
    logits: make('logits', rows * V),  // (rows, n_vocab)
    tokens: make('tokens', T),  // (n_ctx) u32 the window
  };
  buffers.keyCache = Array.from({ length: L }, (_, l) => make(`keys ${l}`, T * C));  // per layer (n_head, n_ctx, head_size)
  buffers.valueCache = Array.from({ length: L }, (_, l) => make(`values ${l}`, T * C));
  return buffers;
}

// Every kernel bound to its buffers once, so that a pass only encodes.
function bindKernels(kernels, weights, buffers, { n_layer: L }) {
  const linear = (matrix, targets, input) => ({
    input,
    nIn: matrix.nIn,
    nOut: matrix.nOut,
    hasBias: matrix.bias ? 1 : 0,
    parts: matrix.parts.map(({ weight, scale, o0, nRows }) => ({
      o0, nRows, format: matrix.formatCode,
      byTarget: Object.fromEntries(targets.map((target) => [target, kernels.linear.bind({
        out: buffers[target], input: buffers[input], weight, scale, bias: matrix.bias,
      })])),
    })),
  });
  const norm = ({ weight, bias }) => kernels.layernorm.bind({ out: buffers.xb, input: buffers.x, weight, bias });
  const layers = weights.layers.map((w, l) => ({
    ln_1: norm(w.ln_1),
    ln_2: norm(w.ln_2),
    attn_qkv: linear(w.attn_qkv, ['qkv'], 'xb'),
    attn_proj: linear(w.attn_proj, ['x'], 'att'),
    mlp_fc: linear(w.mlp_fc, ['fc'], 'xb'),
    mlp_proj: linear(w.mlp_proj, ['x'], 'fc'),
    storeKv: kernels.storeKv.bind({ qkv: buffers.qkv, keyCache: buffers.keyCache[l], valueCache: buffers.valueCache[l] }),
    attention: kernels.attention.bind({ out: buffers.att, qkv: buffers.qkv, keyCache: buffers.keyCache[l], valueCache: buffers.valueCache[l] }),
  }));
  if (layers.length !== L) throw new Error('the GPU weights have another number of layers than the model');
  const head = { ln_f: norm(weights.ln_f), lm_head: linear(weights.lm_head, ['logits'], 'xb') };
  const embed = weights.wte.parts.map(({ weight, scale, o0, nRows }) => ({
    bound: kernels.embed.bind({ x: buffers.x, tokens: buffers.tokens, wte: weight, wteScale: scale, wpe: weights.wpe }),
    rowBegin: o0, rowEnd: o0 + nRows, format: weights.wte.formatCode,
  }));
  return { layers, head, embed };
}
