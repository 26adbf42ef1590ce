// The benchmark's results as records (bench-results.json): speeds per context and mode, memory per run, and the
// GGUF types' speed targets; and the look-ups of one run's figures that the tables share.
import { adapterName } from '../../web/lib/gpu/device.js';
import { GGUF_TYPES } from './gguf_files.mjs';
import { median } from './measure.mjs';

// Bytes of the weight matrices one decode step streams: every layer's c_attn, attn c_proj, c_fc and mlp c_proj
// (12 n_embd^2 weights) plus the tied LM head (n_vocab x n_embd). fp32: 4 bytes each, whatever the file's dtype
// (onnxruntime-web's export too: its LM head copy is the same size); int8: 1 byte each plus a float scale per
// output row (engine/kernels/linear.h).
export function decodeWeightBytes(config, weights) {
  const { n_vocab: vocab, n_embd: embd, n_layer: layers } = config;
  const count = vocab * embd + layers * 12 * embd ** 2;
  if (weights === 'fp32') return 4 * count;
  const rows = vocab + layers * (3 + 1 + 4 + 1) * embd;
  return count + 4 * rows;
}

export const tokensPerSecond = (tokens, ms) => (1000 * tokens) / ms;

export const range = (values) => [Math.min(...values), Math.max(...values)];

// A GPU run's figures for one context and mode: the adapter, and the work per decoded token and per prefill pass
// (session.counters' deltas over the timed calls). No speed target is set for the GPU; a software adapter's figures
// (SwiftShader: the GPU's work on the CPU) never carry one.
function gpuFields(adapter, counters) {
  const per = (sum) => sum && { dispatches: sum.dispatches / sum.calls, submits: sum.submits / sum.calls, readback_bytes: sum.readbackBytes / sum.calls };
  return {
    adapter: adapterName(adapter),
    adapter_info: adapter,
    software: adapter.software,
    speed_target: null,
    speed_target_note: adapter.software ? 'software adapter: figures carry no speed target' : 'no GPU speed target is set',
    per_decoded_token: per(counters?.decode),
    per_prefill: per(counters?.prefill),
  };
}

export function toRecords({ model, runtime, weights, kvCache, simd, threads, result, decodeBytes }) {
  const ceilingBytesPerSecond = tokensPerSecond(result.weightBytes, median(result.ceilingMs));
  const records = [];
  for (const context of result.contexts.filter((c) => !c.skipped)) {
    for (const mode of ['cached', 'uncached'].filter((m) => context[m])) {
      const { prefillMs, msPerToken } = context[mode];
      const msPerTokenMedian = median(msPerToken);
      records.push({
        model,
        runtime,
        weights,
        kv_cache: kvCache,
        simd,
        threads,
        mode,
        context: context.context,
        prompt_tokens: context.promptLength,
        prefill_tok_s: tokensPerSecond(context.promptLength, median(prefillMs)),
        decode_tok_s: tokensPerSecond(1, msPerTokenMedian),
        decode_ms_per_token: msPerTokenMedian,
        bandwidth_fraction: tokensPerSecond(decodeBytes, msPerTokenMedian) / ceilingBytesPerSecond,
        runs: msPerToken.length,
        prefill_runs: prefillMs.length,
        spread: {
          prefill_tok_s: range(prefillMs.map((ms) => tokensPerSecond(context.promptLength, ms))),
          decode_tok_s: range(msPerToken.map((ms) => tokensPerSecond(1, ms))),
        },
        ...(result.adapter ? gpuFields(result.adapter, context[mode].counters) : {}),
        ...(result.adapter && mode === 'cached' ? { greedy_tokens_equal_wasm: Boolean(context.cached.referenceChecked) } : {}),
      });
    }
  }
  return records;
}

export const cachedDecode = (run, context) => run?.records.find((r) => r.mode === 'cached' && r.context === context)?.decode_tok_s;

export const oneThreadRun = (runs, model, runtime, weights) =>
  runs.find((run) => run.threads === 1 && run.defaultKv && run.defaultSimd && run.model === model && run.baseRuntime === runtime &&
    run.weights === weights);

// The GGUF types measured on a model on one thread by any of runtimes, in GGUF_TYPES's order.
export const ggufTypesMeasured = (runs, model, runtimes) =>
  GGUF_TYPES.filter((type) => runs.some((run) => run.threads === 1 && run.model === model && run.weights === type && runtimes.includes(run.baseRuntime)));

// The GGUF types' speed targets: cached decode tokens/s at this context on one thread, in Node and Chromium.
export const TARGET_CONTEXT = 16;

const TARGETS_OVER_INT8 = { q8_0: 1, q4_0: 1.5, q4_k: 1.5 };

const TARGET_OVER_WLLAMA = 3;

// The GGUF types' speed targets, per model measured with GGUF types, in Node and Chromium at TARGET_CONTEXT on one thread:
// [{ model, runtime, target, ratio (null when a side was not measured), met }].
export function targetResults(runs) {
  const results = [];
  for (const model of [...new Set(runs.map((run) => run.model))]) {
    for (const runtime of ['node', 'chromium']) {
      const types = ggufTypesMeasured(runs, model, [runtime]);
      const decode = (engine, weights) => cachedDecode(oneThreadRun(runs, model, engine, weights), TARGET_CONTEXT);
      const check = (target, value, base, minimum) => {
        const measured = value && base ? value / base : null;
        results.push({ model, runtime, target, ratio: measured, met: measured === null ? null : measured >= minimum });
      };
      for (const [type, minimum] of Object.entries(TARGETS_OVER_INT8)) {
        if (types.includes(type)) check(`${type} ≥ ${minimum}× our int8`, decode(runtime, type), decode(runtime, 'int8'), minimum);
      }
      for (const type of types) check(`${type} ≥ ${TARGET_OVER_WLLAMA}× wllama`, decode(runtime, type), decode('wllama', type), TARGET_OVER_WLLAMA);
    }
  }
  return results;
}

// Several sequences (generate's numReturnSequences, tools/bench/speculation_runner.mjs sequences): the decode's total
// tokens/s with this many sequences against one, per model and weights.
export const SEQUENCES_TARGET = { sequences: 4, minimum: 1.5 };

// A sequences measurement's target: { target, ratio (null when n = 4 was not measured), met }.
export function sequencesTarget({ results }) {
  const { sequences, minimum } = SEQUENCES_TARGET;
  const ratio = results.find((r) => r.sequences === sequences)?.ratio ?? null;
  return { target: `${sequences} sequences ≥ ${minimum}× one (total decode tokens/s)`, ratio, met: ratio === null ? null : ratio >= minimum };
}

// Peak and steady memory per job. wasm: the heap's size (it never shrinks, so it is the peak) and what malloc
// holds; native, onnxruntime-web and llama.cpp: the process's peak RSS (VmHWM) and RSS; wllama: what Chromium
// measures of the page (its wasm memory never shrinks either: peak = the largest of the three figures). Steady =
// after generation, with the model and one cached session alive; for a GPU runtime without the copy of the weights
// that the benchmark keeps for its reference check and a GPU model frees.
export function memoryRecords(runs) {
  return runs.map(({ model, runtime, weights, kvCache, simd, result }) => {
    const { steady } = result.memory;
    const [wasm, page, gpu] = ['heapBytes' in steady, 'pageBytes' in steady, Boolean(steady.gpu)];
    const steadyBytes = page ? steady.pageBytes : gpu ? steady.heapUsedBytes - steady.referenceWeightBytes
      : wasm ? steady.heapUsedBytes : steady.rssBytes;
    const pagePeak = () => Math.max(...Object.values(result.memory).map((figures) => figures.pageBytes));
    return {
      model, runtime, weights, kv_cache: kvCache, simd,
      load_s: result.loadMs === undefined ? null : result.loadMs / 1000,
      measure: page ? 'page (Chromium)' : gpu ? 'wasm heap (GPU buffers: weights + KV)' : wasm ? 'wasm heap' : 'process RSS',
      weight_bytes: result.weightBytes,
      kv_cache_bytes: result.kvCacheBytes,
      peak_bytes: page ? pagePeak() : wasm ? steady.heapBytes : steady.peakRssBytes,
      steady_bytes: steadyBytes,
      steady_fraction: steadyBytes / (result.weightBytes + result.kvCacheBytes),
      raw: result.memory,
    };
  });
}
