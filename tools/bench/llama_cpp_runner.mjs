// The llamacpp runtime of tools/bench/bench.mjs: native llama.cpp through npm node-llama-cpp (not a dependency of this
// project: imported from the folder given, e.g. /tmp/llama-check/node_modules/node-llama-cpp), CPU only, on one
// GGUF file, cached decoding only, in its own Node process so that its memory figures are its own. It takes
// token ids like our engine: prefill(ids) starts a new generation of the sequence (history cleared) whose first
// next() is the batched prompt evaluation and first greedy token; each step is one more next() (the previous
// token evaluated, the next sampled). Writes measure.mjs's result as JSON on stdout and progress on stderr.
//
//   node tools/bench/llama_cpp_runner.mjs NODE_LLAMA_CPP_DIR FILE.gguf CONFIG_JSON PLAN_JSON THREADS
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { measureModel } from './measure.mjs';

const REPO = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const [llamaDir, file, configJson, planJson, threadsText] = process.argv.slice(2);
const config = JSON.parse(configJson);  // { n_vocab, n_ctx, n_embd, n_head, n_layer }
const threads = Number(threadsText);

const start = performance.now();
const { getLlama } = await import(pathToFileURL(join(llamaDir, 'dist/index.js')).href);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error', maxThreads: threads });
const model = await llama.loadModel({ modelPath: file });
// The model's whole context in one sequence, and the longest prompt in one batch, as our engine prefills it.
const context = await model.createContext({ contextSize: config.n_ctx, batchSize: config.n_ctx, threads });
const sequence = context.getSequence();
console.error(`model loaded in ${((performance.now() - start) / 1000).toFixed(1)} s (llama.cpp ${llama.buildType} build)`);

let generation = null;  // { tokens: the running evaluate() generator, last: the token it returned last }

async function next() {
  const begin = performance.now();
  const { value, done } = await generation.tokens.next();
  const ms = performance.now() - begin;
  if (done) throw new Error('node-llama-cpp ended the generation early');
  generation.last = value;
  return { token: value, ms };
}

function cachedOnly(mode) {
  if (mode !== 'cached') throw new Error('the llamacpp runtime measures cached decoding only');
}

const driver = {
  async info() {
    // llama.cpp's KV cache: keys and values in F16 for n_ctx positions per layer.
    return { config, weightBytes: statSync(file).size, kvCacheBytes: 2 * config.n_layer * config.n_ctx * config.n_embd * 2,
      threads: context.idealThreads };
  },
  async prefill(mode, ids) {
    cachedOnly(mode);
    await generation?.tokens.return();
    await sequence.clearHistory();
    generation = { tokens: sequence.evaluate(ids, { temperature: 0 }), last: null };
    return next();
  },
  async step(mode, id) {
    cachedOnly(mode);
    // The generator feeds its own last token back; the caller must be continuing that sequence.
    if (id !== generation?.last) throw new Error(`step(${id}) does not continue the generation, whose last token was ${generation?.last}`);
    return next();
  },
  // llama.cpp runs natively: the native probe measures its ceiling.
  async streamWeights(repeats) {
    const output = execFileSync(join(REPO, 'build/native/gpt2_bandwidth'), ['--bytes', String(statSync(file).size), '--repeats', String(repeats)],
      { encoding: 'utf8' });
    return JSON.parse(output).ms;
  },
  // rssBytes: resident now; peakRssBytes: the process's high-water mark (VmHWM).
  async memory() {
    const status = readFileSync('/proc/self/status', 'utf8');
    const kib = (field) => Number(new RegExp(`^${field}:\\s*(\\d+) kB`, 'm').exec(status)[1]) * 1024;
    return { rssBytes: kib('VmRSS'), peakRssBytes: kib('VmHWM') };
  },
  async releaseUncached() {},  // there is no uncached session
};

const result = await measureModel(driver, JSON.parse(planJson), (text) => console.error(text));
await generation?.tokens.return();
await context.dispose();
await model.dispose();
await llama.dispose();
process.stdout.write(`${JSON.stringify(result)}\n`);
