// A session whose forward passes run on the GPU: the engine's recording session (wasm/bindings.cpp, engine/gpt2.h
// Session::create_recording) keeps the window, the cache policy and the sampler, and writes each pass down as
// commands (engine/model/forward_ops.h); this runs them as WebGPU dispatches over activations and an fp32 KV cache
// of its own, allocated once at n_ctx. A pass is one command buffer, one submit and one readback: the last token's
// logits, which the engine's sampler then reads, or for a score pass its rows of logits, which the engine scores.
import { scoreAbortedError } from '../generation/score.js';

const STORAGE = 0x80 | 0x8 | 0x4;  // GPUBufferUsage.STORAGE | COPY_DST | COPY_SRC
const MAP_READ = 0x1 | 0x8;  // GPUBufferUsage.MAP_READ | COPY_DST
const GPU_MAP_READ = 0x1;  // GPUMapMode.READ

export class GpuSession {
  #recording;  // the engine's recording session (embind Session)
  #layout;  // a command's ints and its codes' names (engine/model/forward_ops.h, engine.constants.gpuCommands)
  #gpu;  // the model's GPU resources: { device, kernels, weights, lost, whenLost } (gpu_model.js)
  #config;
  #buffers;
  #bound;  // bound kernels, each made once: per layer, and the embedding and head parts
  #readback;  // (n_vocab) f32, mappable: the last token's logits
  #rowsReadback = null;  // (batchRows, n_vocab) f32, mappable: a score pass's rows of logits, once score() has run
  #batchRows;
  #logitsBytes;
  counters = { passes: 0, dispatches: 0, submits: 0, readbackBytes: 0 };  // since the session began

  // recording: an EngineSession made with { recording: true }; gpu: the model's GPU resources; batchRows: the
  // engine's chunk of rows (EngineSession.batchRows)
  constructor(recording, gpu, config, batchRows) {
    this.#recording = recording;
    this.#layout = recording.engine.constants.gpuCommands;
    this.#batchRows = batchRows;
    this.#gpu = gpu;
    this.#config = config;
    this.#logitsBytes = config.n_vocab * 4;
    if (gpu.lost) return;  // every pass runs on the CPU
    this.#buffers = createBuffers(gpu.device, config, batchRows);
    this.#bound = bindKernels(gpu.kernels, gpu.weights, this.#buffers, config);
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

  // EngineSession.score with each pass on the GPU: the engine keeps the windows and scores the rows of logits
  // each pass reads back (Scorer::begin). The window is then the last window scored, its cache on the GPU.
  // Once signal aborts, it rejects with score()'s AbortError between two passes.
  async score(ids, topK = 0, signal = undefined) {
    this.#recording.beginScore(ids, topK);
    while (this.#recording.feedScorePass()) {
      await this.#runPass();
      this.#recording.scoreFedPass();
      if (signal?.aborted) throw scoreAbortedError();
    }
    return this.#recording.scoreResult();
  }

  // The last fed position's logits as the GPU computed them (Float32Array over the heap: read it before the next
  // call).
  logits() {
    return this.#recording.call((session) => session.hostLogits());
  }

  dispose() {
    this.#recording.dispose();
    if (!this.#buffers) return;
    for (const buffer of Object.values(this.#buffers)) if (buffer.destroy) buffer.destroy();
    for (const buffer of [...this.#buffers.keyCache, ...this.#buffers.valueCache]) buffer.destroy();
    this.#readback.destroy();
    this.#rowsReadback?.destroy();
  }

  // 'webgpu', or 'wasm' once the GPU was lost and the session went on on the CPU (deviceLost then says why)
  get device() {
    return this.#gpu.lost ? 'wasm' : 'webgpu';
  }

  get deviceLost() {
    return this.#gpu.lost;
  }

  // A lost GPU (a driver reset, GPUDevice.destroy()) does not end the generation: the pass runs on the CPU
  // (EngineSession.runOnCpu) from the same window, with the weights loaded again if the heap had let them go; the
  // sampler keeps its state, and so a seeded run goes on with the text it would have had on the CPU from the start.
  async #runAndSample() {
    await this.#runPass();
    return this.#recording.checkedCall((session) => session.sample(), (token) => token < 0);
  }

  async #runPass() {
    if (!this.#gpu.lost) {
      try {
        await this.#runOnGpu();
        return;
      } catch (error) {
        if (!(await this.#gpu.whenLost())) throw error;
      }
    }
    this.#recording.runOnCpu(await this.#gpu.cpuModel());
  }

  async #runOnGpu() {
    const { device, kernels } = this.#gpu;
    const commands = this.#recording.call((session) => session.commands().slice());
    const window = this.#recording.call((session) => session.window());
    device.queue.writeBuffer(this.#buffers.tokens, 0, window);
    const encoder = device.createCommandEncoder();
    let pass = encoder.beginComputePass();
    kernels.beginRun();
    let lastLogitsRow = -1;  // the row of the last token's logits, when the pass computes them
    let passRows = 0;  // the rows of every-row logits the pass computes
    const { ints } = this.#layout;
    for (let i = 0; i < commands.length; i += ints) {
      const head = this.#encode(pass, commands.subarray(i, i + ints));
      if (head?.passRow >= 0) {  // rows of the pass's logits: copied out before the next chunk overwrites them
        pass.end();
        encoder.copyBufferToBuffer(this.#buffers.logits, head.row0 * this.#logitsBytes, this.#rowsReadbackBuffer(),
          head.passRow * this.#logitsBytes, head.n * this.#logitsBytes);
        passRows = Math.max(passRows, head.passRow + head.n);
        pass = encoder.beginComputePass();
      } else if (head) lastLogitsRow = head.row0 + head.n - 1;
    }
    pass.end();
    kernels.endRun();
    if (lastLogitsRow >= 0) encoder.copyBufferToBuffer(this.#buffers.logits, lastLogitsRow * this.#logitsBytes, this.#readback, 0, this.#logitsBytes);
    device.queue.submit([encoder.finish()]);
    this.counters.passes++;
    this.counters.submits++;
    if (lastLogitsRow >= 0) await this.#readInto(this.#readback, this.#logitsBytes, (session) => session.hostLogits());
    if (passRows > 0) await this.#readInto(this.#rowsReadback, passRows * this.#logitsBytes, (session) => session.allLogits());
  }

  // Copies the first bytes of a mapped readback buffer into the heap view target(session) gives.
  async #readInto(buffer, bytes, target) {
    this.counters.readbackBytes += bytes;
    await buffer.mapAsync(GPU_MAP_READ, 0, bytes);
    const values = new Float32Array(buffer.getMappedRange(0, bytes));
    // a heap view taken now: one taken before the wait could have been detached by a memory growth in between
    this.#recording.call((session) => target(session).set(values));
    buffer.unmap();
  }

  #rowsReadbackBuffer() {
    this.#rowsReadback ??= this.#gpu.device.createBuffer({ label: 'rows of logits readback', size: this.#batchRows * this.#logitsBytes, usage: MAP_READ });
    return this.#rowsReadback;
  }

  // Encodes one command (its fields in GpuCommand's order); -> for a head, the rows of logits it writes { row0, n,
  // passRow: their first row in the pass's logits, or -1 for the last token's }, else null.
  #encode(pass, command) {
    const [op, layer, which, out, input, epilogue, row0, n, pos0, tokenOffset, logitsRow] = command;
    const { ops, activations, matrices, norms } = this.#layout;
    const { n_embd: C, n_head: nHead, n_ctx: nCtx, layer_norm_epsilon: eps } = this.#config;
    const bound = layer >= 0 ? this.#bound.layers[layer] : this.#bound.head;
    if (logitsRow >= 0 && logitsRow + n > this.#batchRows) throw new Error(`a pass writes logits row ${logitsRow + n - 1}, the GPU reads back ${this.#batchRows}`);
    this.counters.dispatches++;
    switch (ops[op]) {
      case 'embed':
        this.#bound.embed.forEach(({ bound: part, rowBegin, rowEnd, format }, k) => {
          part.encode(pass, { n, C, tokenOffset, pos0, rowBegin, rowEnd, first: k === 0 ? 1 : 0, format });
        });
        this.counters.dispatches += this.#bound.embed.length - 1;
        return null;
      case 'layernorm':
        bound[norms[which]].encode(pass, { n, C, eps, rowOffset: row0 });
        return null;
      case 'linear': {
        const matrix = bound[matrices[which]];
        const target = activations[out];
        if (activations[input] !== matrix.input) throw new Error(`the engine multiplies ${matrices[which]} with ${activations[input]}, the GPU binds ${matrix.input}`);
        matrix.parts.forEach(({ byTarget, o0, nRows, format }) => {
          byTarget[target].encode(pass, {
            n, nIn: matrix.nIn, nRows, o0, outStride: matrix.nOut, inRowOffset: row0, outRowOffset: row0,
            epilogue, hasBias: matrix.hasBias, format,
          });
        });
        this.counters.dispatches += matrix.parts.length - 1;
        return target === 'logits' ? { row0, n, passRow: logitsRow } : null;
      }
      case 'store_kv':
        bound.storeKv.encode(pass, { n, C, nHead, nCtx, layer: 0, pos0 });
        return null;
      case 'attention':
        bound.attention.encode(pass, { n, C, nHead, nCtx, layer: 0, pos0 });
        return null;
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
