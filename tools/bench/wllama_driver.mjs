// The measure.mjs driver over wllama (npm @wllama/wllama: llama.cpp's server loop compiled to wasm, running in a
// worker of its own), in the page tools/bench/wllama.html. wllama 3.x takes text prompts and generates whole
// completions: its low-level tokenize/decode calls were removed in 3.0. So the driver gives it the text of the
// prompt's ids (prompts are drawn from bench/prompt_pool.mjs's whole words, whose text tokenizes back to the
// same ids; the prompt token count wllama reports is checked), and prefill(ids) runs the whole completion of
// 1 + decodeSteps tokens; the steps then replay it. Times are llama.cpp's own (its server's timings): prompt_ms
// for the prefill and predicted_per_token_ms (generation time ÷ tokens decoded after the first) for each step.
// Greedy token ids come from the completion's logprobs, asked for in one untimed completion per prompt (they
// cost a softmax over the vocabulary per token): the timed runs must produce the same text.
import { Wllama } from '/tools/bench/node_modules/@wllama/wllama/esm/index.js';

const WASM = '/tools/bench/node_modules/@wllama/wllama/esm/wasm/wllama.wasm';

// fileUrl: the GGUF file; config: { n_vocab, n_ctx, n_embd, n_head, n_layer }; words: { id: text } of the prompt
// pool; probeStreamRead(bytes, repeats): the streaming-read ceiling of this page.
export async function createWllamaDriver({ fileUrl, config, threads, words, decodeSteps, probeStreamRead }) {
  const response = await fetch(fileUrl);
  if (!response.ok) throw new Error(`HTTP ${response.status} from ${fileUrl}`);
  const file = await response.blob();
  const wllama = new Wllama({ default: WASM }, { suppressNativeLog: true });
  // n_gpu_layers 0: the CPU (wasm) backend, never WebGPU. One sequence with the model's whole context, and the
  // longest prompt in one batch, as our engine prefills it.
  await wllama.loadModel([file], { n_threads: threads, n_gpu_layers: 0, n_ctx: config.n_ctx, n_batch: config.n_ctx,
    n_ubatch: config.n_ctx, n_parallel: 1 });
  const greedyTokens = new Map();  // prompt text -> { text, tokens } of its untimed completion
  let replay = null;  // the steps left of the last completion: { tokens, ms, last (the token returned last) }

  const textOf = (ids) => ids.map((id) => {
    if (!(id in words)) throw new Error(`prompt id ${id} is not in the prompt pool`);
    return words[id];
  }).join('');

  // -> { text, tokens (with logprobs) | null, promptMs, stepMs }
  async function complete(prompt, promptTokens, withTokens) {
    const { choices: [choice], usage, timings } = await wllama.createCompletion({ prompt, max_tokens: decodeSteps + 1,
      temperature: 0, ignore_eos: true, cache_prompt: false, ...(withTokens ? { logprobs: 1 } : {}) });
    if (usage.prompt_tokens !== promptTokens) {
      throw new Error(`wllama tokenized the ${promptTokens}-token prompt into ${usage.prompt_tokens} tokens`);
    }
    if (timings.predicted_n !== decodeSteps + 1) throw new Error(`wllama generated ${timings.predicted_n} tokens, not ${decodeSteps + 1}`);
    return { text: choice.text, tokens: withTokens ? choice.logprobs.content.map((entry) => entry.id) : null,
      promptMs: timings.prompt_ms, stepMs: timings.predicted_per_token_ms };
  }

  function cachedOnly(mode) {
    if (mode !== 'cached') throw new Error('the wllama runtime measures cached decoding only');
  }

  return {
    async info() {
      // llama.cpp's KV cache: keys and values in F16 for n_ctx positions per layer.
      return { config, weightBytes: file.size, kvCacheBytes: 2 * config.n_layer * config.n_ctx * config.n_embd * 2, threads: wllama.getNumThreads() };
    },
    async prefill(mode, ids) {
      cachedOnly(mode);
      const prompt = textOf(ids);
      if (!greedyTokens.has(prompt)) greedyTokens.set(prompt, await complete(prompt, ids.length, true));
      const expected = greedyTokens.get(prompt);
      const run = await complete(prompt, ids.length, false);
      if (run.text !== expected.text) {
        throw new Error(`wllama generated ${JSON.stringify(run.text)} but ${JSON.stringify(expected.text)} before on the same prompt`);
      }
      replay = { tokens: expected.tokens.slice(1), ms: run.stepMs, last: expected.tokens[0] };
      return { token: expected.tokens[0], ms: run.promptMs };
    },
    async step(mode, id) {
      cachedOnly(mode);
      if (!replay || replay.tokens.length === 0) throw new Error(`the wllama driver decodes ${decodeSteps} steps per prefill`);
      // The completion fed its own last token back; the caller must be continuing that sequence.
      if (id !== replay.last) throw new Error(`step(${id}) does not continue the completion, whose last token was ${replay.last}`);
      replay.last = replay.tokens.shift();
      return { token: replay.last, ms: replay.ms };
    },
    async streamWeights(repeats) {
      return probeStreamRead(file.size, repeats);
    },
    // pageBytes: what the page and its workers hold (wllama's wasm memory among it), measured by Chromium
    // (eagerly with --enable-blink-features=ForceEagerMeasureMemory; the page is cross-origin isolated).
    async memory() {
      return { pageBytes: (await performance.measureUserAgentSpecificMemory()).bytes };
    },
    async releaseUncached() {},  // there is no uncached session
    dispose: () => wllama.exit(),
  };
}
