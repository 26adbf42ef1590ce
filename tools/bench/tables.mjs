// The benchmark's markdown tables, from its runs ({ model, runtime, baseRuntime, weights, kvCache, threads, result,
// records, decodeBytes }) and records (records.mjs).
import { median } from './measure.mjs';
import { OTHER_ENGINES } from './options.mjs';
import { SEQUENCES_TARGET, cachedDecode, ggufTypesMeasured, oneThreadRun, range } from './records.mjs';

const fixed = (value, digits = 1) => value.toFixed(digits);

const withRange = (value, [low, high], digits = 1) => `${fixed(value, digits)} (${fixed(low, digits)}–${fixed(high, digits)})`;

const megabytes = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

const table = (header, rows) => [header, header.map(() => '---'), ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');

function contextLabel(context, promptTokens) {
  return promptTokens === context ? String(context) : `${context} (prompt ${promptTokens})`;
}

// A GPU run's runtime says when its adapter is a software one.
const runtimeLabel = ({ runtime, result }) => (result.adapter?.software ? `${runtime} (software adapter)` : runtime);

export function speedTable(runs) {
  const rows = [];
  for (const run of runs) {
    const { model, weights, result, records } = run;
    const runtime = runtimeLabel(run);
    for (const context of result.contexts) {
      if (context.skipped) {
        rows.push([model, runtime, weights, '—', String(context.context), `skipped: ${context.skipped}`, '', '', '', '']);
        continue;
      }
      for (const record of records.filter((r) => r.context === context.context)) {
        const prefill = record.prefill_runs === 1 ? `${fixed(record.prefill_tok_s)} (1 run)` : withRange(record.prefill_tok_s, record.spread.prefill_tok_s);
        rows.push([model, runtime, weights, record.mode, contextLabel(record.context, record.prompt_tokens), prefill,
          withRange(record.decode_tok_s, record.spread.decode_tok_s, 2), fixed(record.decode_ms_per_token, 2),
          fixed(record.bandwidth_fraction * 100) + ' %', String(record.runs)]);
      }
    }
  }
  return table(['model', 'runtime', 'weights', 'mode', 'context', 'prefill tok/s (min–max)', 'decode tok/s (min–max)', 'ms/token',
    'weight bandwidth / ceiling', 'runs'], rows);
}

// The GPU runs: per context, the adapter, the speeds and the work per decoded token (cached and uncached) and per
// prefill pass, and whether its greedy tokens were the wasm engine's; then the weights the GPU does not run.
// skips: [{ model, runtime, weights, reason }].
export function gpuTable(runs, skips) {
  const rows = [];
  for (const run of runs.filter((r) => r.result.adapter)) {
    for (const record of run.records) {
      const work = (figures) => (figures ? `${fixed(figures.dispatches)} / ${fixed(figures.submits)} / ${fixed(figures.readback_bytes / 1024)} KiB` : '—');
      rows.push([run.model, run.runtime, `${record.adapter}${record.software ? ', software' : ''}`, run.weights, record.mode,
        contextLabel(record.context, record.prompt_tokens), fixed(record.prefill_tok_s), fixed(record.decode_tok_s, 2),
        work(record.per_decoded_token), work(record.per_prefill),
        record.mode === 'cached' ? (record.greedy_tokens_equal_wasm ? 'equal' : 'not checked') : 'equal to cached',
        record.software ? 'none (software)' : 'none set']);
    }
  }
  for (const { model, runtime, weights, reason } of skips) rows.push([model, runtime, '—', weights, '—', '—', reason, '', '', '', '', '']);
  return rows.length ? table(['model', 'runtime', 'adapter', 'weights', 'mode', 'context', 'prefill tok/s', 'decode tok/s',
    'per decoded token: dispatches / submits / readback', 'per prefill', 'greedy tokens vs wasm engine', 'speed target'], rows) : null;
}

// Uncached ÷ cached ms/token: the median ratio, and the range over the interleaved run pairs.
export function speedupTable(runs, contexts) {
  const rows = runs.filter(({ result }) => result.contexts.some((c) => c.uncached)).map(({ model, runtime, weights, result }) => [model, runtime, weights, ...contexts.map((c) => {
    const context = result.contexts.find((entry) => entry.context === c);
    if (!context || context.skipped) return context ? 'skipped (> n_ctx)' : '—';
    const { cached, uncached } = context;
    if (!uncached) return 'not measured';
    const pairs = uncached.msPerToken.map((ms, i) => ms / cached.msPerToken[i]);
    return `${withRange(median(uncached.msPerToken) / median(cached.msPerToken), range(pairs))}×`;
  })]);
  return table(['model', 'runtime', 'weights', ...contexts.map((c) => `context ${c}`)], rows);
}

// int8 ÷ fp32 cached decode tokens/s (medians) for every model and runtime measured with both.
export function int8RatioTable(runs, contexts) {
  const rows = [];
  for (const fp32 of runs.filter((run) => run.weights === 'fp32')) {
    const int8 = runs.find((run) => run.weights === 'int8' && run.model === fp32.model && run.runtime === fp32.runtime);
    if (!int8) continue;
    rows.push([fp32.model, fp32.runtime, ...contexts.map((c) => {
      const [fast, slow] = [cachedDecode(int8, c), cachedDecode(fp32, c)];
      return fast && slow ? `${fixed(fast / slow, 2)}× (${fixed(fast)} vs ${fixed(slow)})` : '—';
    })]);
  }
  return rows.length ? table(['model', 'runtime', ...contexts.map((c) => `context ${c}`)], rows) : null;
}

// The relaxed-SIMD build ÷ the SIMD128 build in the same runtime (same model, weights, KV cache and threads): prefill
// and cached decode tokens/s (medians) at each context.
export function simdTable(runs, contexts) {
  const rows = [];
  for (const relaxed of runs.filter((run) => run.simd === 'relaxed')) {
    const simd128 = runs.find((run) => run.simd === 'simd128' && run.baseRuntime === relaxed.baseRuntime && run.model === relaxed.model &&
      run.weights === relaxed.weights && run.kvCache === relaxed.kvCache && run.threads === relaxed.threads);
    if (!simd128) continue;
    const cached = (run, c) => run.records.find((r) => r.mode === 'cached' && r.context === c);
    rows.push([relaxed.model, relaxed.baseRuntime + (relaxed.threads > 1 ? `, ${relaxed.threads} threads` : ''), relaxed.weights,
      ...contexts.map((c) => {
        const [fast, slow] = [cached(relaxed, c), cached(simd128, c)];
        if (!fast || !slow) return '—';
        return `${fixed(fast.prefill_tok_s / slow.prefill_tok_s, 2)}× / ${fixed(fast.decode_tok_s / slow.decode_tok_s, 2)}× ` +
          `(${fixed(fast.prefill_tok_s)} / ${fixed(fast.decode_tok_s)})`;
      })]);
  }
  return rows.length ? table(['model', 'runtime', 'weights', ...contexts.map((c) => `context ${c}`)], rows) : null;
}

// Per run of ours: cached decode tok/s at each context as a fraction of its speed at the first context (how much of
// its speed a long context keeps: the KV cache's share of a step grows with the context).
export function contextRetentionTable(runs, contexts) {
  const rows = runs.filter((run) => !OTHER_ENGINES[run.baseRuntime] && cachedDecode(run, contexts[0])).map((run) =>
    [run.model, run.runtime, run.weights, run.kvCache, ...contexts.map((c) => {
      const value = cachedDecode(run, c);
      return value ? `${fixed(value / cachedDecode(run, contexts[0]), 2)} (${fixed(value)})` : '—';
    })]);
  return rows.length ? table(['model', 'runtime', 'weights', 'KV cache', ...contexts.map((c) => `context ${c}`)], rows) : null;
}

// How many of onnxruntime-web's greedy tokens (the prefill's, then each step's) equal ours before the first
// difference. Random weights make near-ties common, and fp32 sums in another order may flip one; after that
// the sequences go their own ways, so the common prefix is the figure that means something.
function agreement(ortTokens, ourTokens) {
  let same = 0;
  while (same < ortTokens.length && ortTokens[same] === ourTokens[same]) same++;
  return `${same}/${ortTokens.length}`;
}

// Ours in Node (the same wasm runtime as onnxruntime-web there) against onnxruntime-web, per model measured by ort.
export function sideBySideTables(runs, contexts) {
  const tables = [];
  for (const ort of runs.filter((run) => run.runtime === 'ort')) {
    const ours = (runtime, weights) => runs.find((run) => run.model === ort.model && run.runtime === runtime && run.weights === weights);
    const [fp32, int8] = [ours('node', 'fp32'), ours('node', 'int8')];
    // Tokens from whichever fp32 run of ours there is: all of them are bit-identical across runtimes.
    const reference = fp32 ?? ['native', 'chromium'].map((runtime) => ours(runtime, 'fp32')).find(Boolean);
    const rows = contexts.map((c) => {
      const ortSpeed = cachedDecode(ort, c);
      if (!ortSpeed) return null;
      const [oursFp32, oursInt8] = [cachedDecode(fp32, c), cachedDecode(int8, c)];
      const ortTokens = ort.result.contexts.find((entry) => entry.context === c).cached.tokens;
      const referenceContext = reference?.result.contexts.find((entry) => entry.context === c && !entry.skipped);
      return [String(c), oursFp32 ? fixed(oursFp32) : '—', oursInt8 ? fixed(oursInt8) : '—', fixed(ortSpeed),
        oursFp32 ? `${fixed(oursFp32 / ortSpeed, 2)}×` : '—', oursInt8 ? `${fixed(oursInt8 / ortSpeed, 2)}×` : '—',
        referenceContext ? `${agreement(ortTokens, referenceContext.cached.tokens)} (vs ${reference.runtime})` : '—'];
    }).filter(Boolean);
    tables.push(`### ${ort.model}\n\n${table(['context', 'ours Node wasm fp32 tok/s', 'ours Node wasm int8 tok/s', 'onnxruntime-web fp32 tok/s',
      'fp32 / ORT', 'int8 / ORT', 'greedy tokens equal to our fp32 before the first difference'], rows)}`);
  }
  return tables;
}

// ---- GGUF types: ours against our int8, wllama and llama.cpp (one thread) ----

const ratio = (value, base) => (value && base ? `${fixed(value / base, 2)}×` : '—');

const speed = (value) => (value ? fixed(value) : '—');

const contextTokens = (run, context) => run?.result.contexts.find((entry) => entry.context === context && !entry.skipped)?.cached.tokens;

// How many greedy tokens of another engine's run equal those of the first of our runs given (same file, same
// prompt ids) before the first difference, and which of ours it was compared with.
function tokensAgreement(other, ours, context) {
  const theirs = contextTokens(other, context);
  const reference = ours.find((run) => contextTokens(run, context));
  return theirs && reference ? `${agreement(theirs, contextTokens(reference, context))} (vs ${reference.baseRuntime})` : '—';
}

// Per model and context: each GGUF type in our Node and Chromium runtimes, against our int8 in the same runtime and
// wllama on the same file (cached decode tokens/s, medians).
export function ggufTables(runs, contexts) {
  const tables = [];
  for (const model of [...new Set(runs.map((run) => run.model))]) {
    const types = ggufTypesMeasured(runs, model, ['node', 'chromium', 'wllama']);
    if (types.length === 0) continue;
    for (const context of contexts) {
      const decode = (runtime, weights) => cachedDecode(oneThreadRun(runs, model, runtime, weights), context);
      const rows = types.map((type) => {
        const [node, inChromium, wllama] = ['node', 'chromium', 'wllama'].map((runtime) => decode(runtime, type));
        const ours = ['node', 'chromium', 'native'].map((runtime) => oneThreadRun(runs, model, runtime, type)).filter(Boolean);
        return [type, speed(node), ratio(node, decode('node', 'int8')), speed(inChromium), ratio(inChromium, decode('chromium', 'int8')), speed(wllama),
          ratio(node, wllama), ratio(inChromium, wllama), tokensAgreement(oneThreadRun(runs, model, 'wllama', type), ours, context)];
      });
      tables.push(`### ${model}, context ${context}\n\n${table(['type', 'ours Node tok/s', 'Node ÷ our int8', 'ours Chromium tok/s',
        'Chromium ÷ our int8', 'wllama tok/s', 'Node ÷ wllama', 'Chromium ÷ wllama', 'wllama greedy tokens equal to ours before the first difference'], rows)}`);
    }
  }
  return tables;
}

// Per model and context: ours natively (build/native/gpt2) against llama.cpp (node-llama-cpp) on each GGUF file.
export function nativeTables(runs, contexts) {
  const tables = [];
  for (const model of [...new Set(runs.filter((run) => run.baseRuntime === 'llamacpp' && run.threads === 1).map((run) => run.model))]) {
    for (const context of contexts) {
      const rows = ggufTypesMeasured(runs, model, ['native', 'llamacpp']).map((type) => {
        const [ours, llama] = ['native', 'llamacpp'].map((runtime) => oneThreadRun(runs, model, runtime, type));
        const [oursRecord, llamaRecord] = [ours, llama].map((run) => run?.records.find((r) => r.mode === 'cached' && r.context === context));
        return [type, speed(oursRecord?.decode_tok_s), speed(llamaRecord?.decode_tok_s), ratio(oursRecord?.decode_tok_s, llamaRecord?.decode_tok_s),
          speed(oursRecord?.prefill_tok_s), speed(llamaRecord?.prefill_tok_s), ratio(oursRecord?.prefill_tok_s, llamaRecord?.prefill_tok_s),
          tokensAgreement(llama, [ours].filter(Boolean), context)];
      });
      tables.push(`### ${model}, context ${context}\n\n${table(['type', 'ours decode tok/s', 'llama.cpp decode tok/s', 'decode ours ÷ llama.cpp',
        'ours prefill tok/s', 'llama.cpp prefill tok/s', 'prefill ours ÷ llama.cpp', 'llama.cpp greedy tokens equal to ours before the first difference'], rows)}`);
    }
  }
  return tables;
}

export function targetsTable(results) {
  const verdict = (result) => (result.met === null ? 'not measured' : result.met ? 'met' : 'NOT met');
  return table(['model', 'runtime', 'target', 'measured', 'verdict'],
    results.map((result) => [result.model, result.runtime, result.target, result.ratio === null ? '—' : `${fixed(result.ratio, 2)}×`, verdict(result)]));
}

export function bandwidthTable(runs) {
  const rows = runs.map(({ model, runtime, weights, result, records, decodeBytes }) => {
    const gigabytesPerSecond = (ms) => result.weightBytes / ms / 1e6;
    const ceiling = result.ceilingMs.map(gigabytesPerSecond);
    const cached = records.filter((r) => r.mode === 'cached');
    const best = cached.reduce((a, b) => (b.decode_tok_s > a.decode_tok_s ? b : a));
    const achieved = (decodeBytes * best.decode_tok_s) / 1e9;
    return [model, runtime, weights, megabytes(decodeBytes), withRange(median(ceiling), range(ceiling), 2),
      `${fixed(achieved, 2)} (context ${best.context})`, fixed(best.bandwidth_fraction * 100) + ' %'];
  });
  return table(['model', 'runtime', 'weights', 'weights read per token', 'streaming ceiling GB/s median (min–max)',
    'best cached decode GB/s', 'of ceiling'], rows);
}

export function memoryTable(memory) {
  const rows = memory.map((m) => [m.model, m.runtime, m.weights, m.load_s === null ? '—' : `${fixed(m.load_s)} s`, m.measure,
    megabytes(m.weight_bytes), `${megabytes(m.kv_cache_bytes)} (${m.kv_cache})`, megabytes(m.weight_bytes + m.kv_cache_bytes),
    megabytes(m.peak_bytes), megabytes(m.steady_bytes), `${fixed(m.steady_fraction, 3)}`]);
  return table(['model', 'runtime', 'weights', 'load', 'measured', 'weight bytes', 'KV cache (one session)', 'weights + KV', 'peak',
    'steady', 'steady ÷ (weights + KV)'], rows);
}

// One row per model, runtime, weights and thread count: per context the cached decode tok/s and its ratio to the
// same model, runtime and weights at the first thread count of --threads (onnxruntime-web runs one thread only).
export function threadScalingTable(runs, contexts) {
  const rows = runs.filter((run) => run.baseRuntime !== 'ort').map((run) => {
    const base = runs.find((other) => other.model === run.model && other.baseRuntime === run.baseRuntime && other.weights === run.weights &&
      other.kvCache === run.kvCache);
    return [run.model, run.baseRuntime, run.weights, String(run.threads), ...contexts.map((context) => {
      const [value, baseValue] = [cachedDecode(run, context), cachedDecode(base, context)];
      return value === undefined ? '—' : `${fixed(value, 2)} (${fixed(value / baseValue, 2)}×)`;
    })];
  });
  return table(['model', 'runtime', 'weights', 'threads', ...contexts.map((c) => `context ${c}`)], rows);
}

// Speculative decoding (tools/bench/speculation_runner.mjs): prompt lookup's end-to-end speed with and without, and
// what verifying k drafted tokens costs against one step.
export function speculationTables({ lookup, verification }) {
  const lookupTable = table(['workload', 'sampling', 'tokens/s without', 'with prompt lookup', 'with ÷ without (median of pairs)',
    'drafted tokens kept'], lookup.map((r) => [r.workload, r.sampling, fixed(r.tokens_per_second_off), fixed(r.tokens_per_second_on),
    `${fixed(r.speedup, 2)}×`, `${r.accepted_tokens} of ${r.drafted_tokens}`]));
  const ks = verification[0]?.verify_ms.map((_, i) => i + 1) ?? [];
  const verificationTable = table(['model', 'weights', 'step ms', 'prefill ÷ decode tokens/s',
    ...ks.map((k) => `k = ${k}: ms kept (÷ step), failing at once, break-even`)], verification.map((r) => [r.model, r.weights,
    fixed(r.step_ms, 2), fixed(r.prefill_tokens_per_second / r.decode_tokens_per_second, 1),
    ...r.verify_ms.map((ms, i) => `${fixed(ms, 2)} (${fixed(ms / r.step_ms, 2)}×), ${fixed(r.failed_verify_ms[i], 2)} ` +
      `(${fixed(r.failed_verify_ms[i] / r.step_ms, 2)}×), ${fixed(100 * r.break_even_acceptance[i])} %`)]));
  return { lookupTable, verificationTable };
}

// Several sequences (tools/bench/speculation_runner.mjs sequences): per model and weights, the decode's total tokens/s
// (all sequences' tokens) for each n and its ratio to n = 1, and the target's verdict.
export function sequencesTable(sequences) {
  const counts = sequences[0]?.results.map((r) => r.sequences) ?? [];
  const verdict = ({ target }) => (target.met === null ? 'not measured' : target.met ? 'met' : 'NOT met');
  return table(['model', 'weights', ...counts.map((n) => `n = ${n}: tokens/s (÷ n = 1)`), `target: ${SEQUENCES_TARGET.sequences} ≥ ${SEQUENCES_TARGET.minimum}× one`],
    sequences.map((r) => [r.model, r.weights, ...r.results.map((x) => `${fixed(x.tokens_per_second)} (${fixed(x.ratio, 2)}×)`),
      `${r.target.ratio === null ? '—' : `${fixed(r.target.ratio, 2)}×`} ${verdict(r)}`]));
}

// Beam search (tools/bench/speculation_runner.mjs beams): per model, the decode's tokens/s over all beams for each
// number of beams and its ratio to greedy decoding (n = 1).
export function beamsTable(beams) {
  const counts = beams[0]?.results.map((r) => r.sequences) ?? [];
  return table(['model', 'weights', ...counts.map((n) => (n === 1 ? 'greedy: tokens/s' : `${n} beams: tokens/s (÷ greedy)`))],
    beams.map((r) => [r.model, r.weights, ...r.results.map((x) => (x.sequences === 1 ? fixed(x.tokens_per_second) : `${fixed(x.tokens_per_second)} (${fixed(x.ratio, 2)}×)`))]));
}

// The inspection runner's measurements (inspection_runner.mjs), each { model, weights, contexts }: per context, rows
// of the sessions named in labels (under the header rowHeader), each its ms/token (the median, and the range over the runs) and its ratio to the
// first label's median.
function stepTable(inspection, labels, [rowHeader, ratioHeader]) {
  const rows = [];
  for (const { model, weights, contexts } of inspection) {
    for (const context of contexts) {
      if (context.skipped) {
        rows.push([model, weights, String(context.context), `skipped: ${context.skipped}`, '', '']);
        continue;
      }
      const reference = median(context.msPerToken[Object.keys(labels)[0]]);
      for (const [name, label] of Object.entries(labels)) {
        const ms = context.msPerToken[name];
        rows.push([model, weights, contextLabel(context.context, context.promptLength), label,
          withRange(median(ms), [Math.min(...ms), Math.max(...ms)], 2), `${fixed(median(ms) / reference, 3)}×`]);
      }
    }
  }
  return table(['model', 'weights', 'context', rowHeader, 'decode ms/token: median of the runs (min–max)', ratioHeader], rows);
}

// A plain decode step of the engine before inspection existed (--baseline) and of this one.
export function baselineTable(inspection) {
  return stepTable(inspection.filter((record) => record.contexts.some((c) => c.msPerToken?.baseline)),
    { baseline: 'baseline', plain: 'current' }, ['engine', '÷ baseline']);
}

// A decode step inspected (every layer and head, the results read), the logit lens off and on, beside a plain one.
export function inspectionCostTable(inspection) {
  return stepTable(inspection, { plain: 'plain step', lensOff: 'inspected, logit lens off', lensOn: 'inspected, logit lens on' }, ['step', '÷ plain']);
}
