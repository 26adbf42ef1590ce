// The measurement protocol of tools/bench/bench.mjs, shared by every runtime (native over a pipe, Node in process,
// Chromium in a worker) so all of them run exactly the same sequence. Plain ES module without imports.
//
// A driver answers (all async):
//   info()                  -> { config, weightBytes, kvCacheBytes, threads }
//   prefill(mode, ids)      -> { token, ms }   mode: 'cached' | 'uncached'; greedy sampling
//   step(mode, id)          -> { token, ms }
//   streamWeights(repeats)  -> [ms of each streaming read over a buffer of weightBytes]
//   memory()                -> runtime-specific byte counts (wasm heap, native RSS)
//   releaseUncached()       -> frees the uncached session, so the last memory figure is one cached session's
// A GPU driver (tools/bench/gpu_driver.mjs) also answers, and is checked against:
//   prefill and step        -> { token, ms, counters: { dispatches, submits, readbackBytes } } of that call
//   referenceTokens(ids, n) -> the wasm engine's greedy tokens after ids: the prefill's, then n steps'
// A runtime without an uncached mode (onnxruntime-web) is only given plans whose uncachedContexts is empty.
// Times are measured inside the runtime around the engine call alone.

// "Context C": a prompt of C token ids is prefilled, then decodeSteps tokens are decoded after it. A prompt that
// would push decoding past n_ctx (where the engine slides its window and re-prefills) is shortened to
// n_ctx - decodeSteps; contexts above n_ctx are skipped.
export function promptLength(context, config, decodeSteps) {
  if (context > config.n_ctx) return null;
  return Math.min(context, config.n_ctx - decodeSteps);
}

// Deterministic pseudo-random token ids (the same prompt in every runtime): speed does not depend on them. pool:
// the ids to draw from (plan.promptPool: whole words that a text prompt tokenizes back to, for runtimes that take
// text, see tools/bench/prompt_pool.mjs), or null for any id below nVocab.
export function promptIds(length, nVocab, pool = null) {
  const ids = new Array(length);
  let state = 12345;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    ids[i] = pool ? pool[(state >>> 8) % pool.length] : (state >>> 8) % nVocab;
  }
  return ids;
}

// Begins the message of a measurement whose tokens differ where they must be equal (a correctness failure, which
// stops the whole benchmark: tools/bench/bench.mjs), so that it is recognized after crossing a process or a page.
export const TOKENS_DIFFER = 'greedy tokens differ';

// plan: { contexts, uncachedContexts, runs, decodeSteps, ceilingRepeats, promptPool? }: uncached runs are interleaved only at
// the contexts listed in uncachedContexts. log(text) reports progress.
export async function measureModel(driver, plan, log) {
  const info = await driver.info();
  const memory = { afterLoad: await driver.memory() };
  await warmUp(driver, info.config, plan);
  const contexts = [];
  for (const context of plan.contexts) {
    const result = await measureContext(driver, info.config, context, plan);
    contexts.push(result);
    if (result.skipped) log(`context ${context}: skipped (${result.skipped})`);
    else {
      log(`context ${context}: prefill ${median(result.cached.prefillMs).toFixed(1)} ms, decode ` +
        `${median(result.cached.msPerToken).toFixed(2)} ms/token cached` +
        (result.uncached ? `, ${median(result.uncached.msPerToken).toFixed(1)} uncached` : ''));
    }
  }
  memory.afterGeneration = await driver.memory();
  // Steady state: the model and one cached session that has generated, which is what an application holds.
  await driver.releaseUncached();
  memory.steady = await driver.memory();
  // Last, so that its buffer does not show in the memory figures. Its first pass is a warm-up (page faults,
  // tier-up).
  const ceilingMs = (await driver.streamWeights(plan.ceilingRepeats + 1)).slice(1);
  log(`streaming read of ${info.weightBytes} bytes: median ${median(ceilingMs).toFixed(2)} ms`);
  return { ...info, memory, ceilingMs, contexts };
}

// V8 compiles wasm with its baseline tier first and optimizes hot functions later; the native caches and page
// mappings also warm up here. Exercises every path timed later: batched prefill, cached step, uncached step.
async function warmUp(driver, config, plan) {
  const prompt = promptIds(promptLength(64, config, plan.decodeSteps), config.n_vocab, plan.promptPool);
  for (let round = 0; round < 2; round++) {
    let { token } = await driver.prefill('cached', prompt);
    for (let i = 0; i < plan.decodeSteps; i++) ({ token } = await driver.step('cached', token));
    if (plan.uncachedContexts.length === 0) continue;
    ({ token } = await driver.prefill('uncached', prompt.slice(0, 16)));
    for (let i = 0; i < 2; i++) ({ token } = await driver.step('uncached', token));
  }
}

// Cached runs (prefill + decodeSteps steps each) interleave with uncached runs (one step each: every uncached
// step recomputes the whole window, so one step is one full measurement), so both modes see the same machine
// load on a shared machine and their ratio stays meaningful. The uncached session is prefilled once. Without
// uncached runs at this context, uncached is null.
async function measureContext(driver, config, context, plan) {
  const length = promptLength(context, config, plan.decodeSteps);
  if (length === null) return { context, skipped: `above n_ctx ${config.n_ctx}` };
  const prompt = promptIds(length, config.n_vocab, plan.promptPool);
  let uncached = null;
  if (plan.uncachedContexts.includes(context)) {
    const uncachedPrefill = await driver.prefill('uncached', prompt);
    uncached = { prefillMs: [uncachedPrefill.ms], msPerToken: [], tokens: [uncachedPrefill.token] };
    count(uncached, 'prefill', uncachedPrefill.counters);
  }
  const cached = { prefillMs: [], msPerToken: [], tokens: null };
  for (let run = 0; run < plan.runs; run++) {
    const first = await driver.prefill('cached', prompt);
    count(cached, 'prefill', first.counters);
    const tokens = [first.token];
    let decodeMs = 0;
    for (let i = 0; i < plan.decodeSteps; i++) {
      const next = await driver.step('cached', tokens.at(-1));
      count(cached, 'decode', next.counters);
      tokens.push(next.token);
      decodeMs += next.ms;
    }
    cached.prefillMs.push(first.ms);
    cached.msPerToken.push(decodeMs / plan.decodeSteps);
    if (cached.tokens === null) cached.tokens = tokens;
    else if (tokens.join() !== cached.tokens.join()) {
      throw new Error(`${TOKENS_DIFFER}: context ${context}: cached run ${run} generated [${tokens}] but run 0 [${cached.tokens}]`);
    }
    if (!uncached) continue;
    const next = await driver.step('uncached', uncached.tokens.at(-1));
    count(uncached, 'decode', next.counters);
    uncached.tokens.push(next.token);
    uncached.msPerToken.push(next.ms);
  }
  if (driver.referenceTokens) {
    const reference = await driver.referenceTokens(prompt, plan.decodeSteps);
    if (reference.join() !== cached.tokens.join()) {
      const at = reference.findIndex((token, i) => token !== cached.tokens[i]);
      throw new Error(`${TOKENS_DIFFER}: context ${context}: the GPU generated [${cached.tokens}] but the wasm engine [${reference}] ` +
        `(first difference at token ${at})`);
    }
    cached.referenceChecked = true;
  }
  if (!uncached) return { context, promptLength: length, cached, uncached };
  const expected = cached.tokens.slice(0, uncached.tokens.length);
  if (uncached.tokens.join() !== expected.join()) {
    throw new Error(`${TOKENS_DIFFER}: context ${context}: cached [${expected}], uncached [${uncached.tokens}]`);
  }
  return { context, promptLength: length, cached, uncached };
}

// Sums a GPU call's counters into mode.counters[kind] ({ calls, dispatches, submits, readbackBytes }); CPU drivers
// have none.
function count(mode, kind, counters) {
  if (!counters) return;
  mode.counters ??= {};
  const sum = (mode.counters[kind] ??= { calls: 0, dispatches: 0, submits: 0, readbackBytes: 0 });
  sum.calls++;
  for (const name of ['dispatches', 'submits', 'readbackBytes']) sum[name] += counters[name];
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}
