#!/usr/bin/env node
// gpt2-wasm: command-line text generation with the wasm engine in Node, through the public API (gpt2.js); its
// flags are the API's options (cli_args.js, `gpt2-wasm --help`).
//
// Streams the generated text to stdout as it is decoded, statistics to stderr; on any error prints one line
// and exits with status 1. -i (interactive): each line read from stdin is added to the text (without its line
// break; an empty line adds nothing) and the text is continued, so the model's KV cache is reused between lines
// (the stats line says how many prompt tokens were). --score: one line per token of the text, `"token
// text"<TAB>logprob<TAB>rank` (rank 1 = the model's likeliest token), then `total <sum of logprobs>
// perplexity <perplexity>` (model.score). --inspect: the text's last position looked inside (model.inspect): a line
// naming it, then per layer `layer L` and the logit lens's likeliest next tokens, `<TAB>"text"<TAB>probability` each;
// a line naming the heads, then per layer `layer L` and the positions the last one attends to most (attention
// averaged over the heads), `<TAB>P "text"<TAB>weight` each. --top-alternatives K: generation prints one line per token instead
// of the text, `"token text"<TAB>probability`, and each line (of both modes) ends with the K likeliest tokens,
// `<TAB>"text"<TAB>probability or logprob` each. --num-return-sequences N > 1: the N sequences are printed after
// the run, each under a `--- sequence i (log-probability S, stop: REASON) ---` line. Without --model, a checkout
// of the repository runs the bundled public/models/tiny-shakespeare, as its safetensors folder: read from disk,
// the page's smaller Q4_0 GGUF file would save no download, and the folder's weights are the exact fp32 ones. The npm package leaves the bundled
// model out (package.json "files"), so an installed gpt2-wasm runs GPT-2 itself from the Hugging Face Hub
// instead, and says so. Remote models (URLs, Hub ids) are downloaded once into a disk cache (cli_cache.js), with
// a progress bar when stderr is a terminal. On a terminal, control characters in the text are shown escaped
// (cli_output.js). Node has no WebGPU of its own: --device webgpu or auto finds one only where the optional npm
// package webgpu (Dawn) is installed (web/lib/gpu/device.js), and the stats line says where the model ran.
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { INSPECT_TOP_ATTENDED, INSPECT_TOP_K, USAGE, parseCliArguments } from './cli_args.js';
import { cacheDirectory, cachedModel, resolveModelSource } from './cli_cache.js';
import { textWriter } from './cli_output.js';
import { progressBar } from './cli_progress.js';
import { loadModel } from '../lib/gpt2.js';
import { adapterName } from '../lib/gpu/device.js';
import { MODEL_FILES } from '../lib/loading/model_files.js';

const BUNDLED_MODEL = fileURLToPath(new URL('../../public/models/tiny-shakespeare/', import.meta.url));
const HUB_DEFAULT_MODEL = 'openai-community/gpt2';
const writeOut = textWriter(process.stdout);
const writeError = textWriter(process.stderr);

function formatStats(stats, model) {
  const { threads } = model;
  return (
    `\n[${stats.promptTokens} prompt tokens (${stats.reusedTokens} reused), prefill ${stats.prefillMs.toFixed(1)} ms; ` +
    `${stats.generatedTokens} generated, ${stats.decodeTokensPerSecond.toFixed(1)} tokens/s; ` +
    (stats.draftedTokens > 0 ? `${stats.acceptedTokens} of ${stats.draftedTokens} drafted tokens accepted; ` : '') +
    `context ${stats.contextUsed}/${stats.contextSize}; stop: ${stats.stopReason}; ${threads} ${threads === 1 ? 'thread' : 'threads'}; ` +
    `device: ${stats.deviceLost ? `wasm (${stats.deviceLost}: the run went on on the CPU)` : formatDevice(model)}]\n`
  );
}

// "webgpu (its adapter)" or "wasm"; with why auto kept the CPU where Node has a WebGPU to consider (the webgpu
// package) and turned it down. Without one, the CPU is simply what Node runs on, not worth a reason every line.
function formatDevice({ device, adapterInfo, deviceReason }) {
  if (device === 'webgpu') return `webgpu (${adapterInfo ? adapterName(adapterInfo) : 'unknown adapter'})`;
  return globalThis.navigator?.gpu && deviceReason ? `wasm (${deviceReason.replace(/^device 'webgpu': /, '')})` : 'wasm';
}

// Streams the continuation of prompt (a text or token ids) to stdout, then the stats to stderr; -> the generated
// token ids.
async function continueText(model, prompt, options) {
  if (options.numReturnSequences > 1) return printSequences(model, prompt, options);
  const generation = model.generate(prompt, options);
  const tokens = [];
  const write = options.topAlternatives > 0 ? writePieceLine : (piece) => writeOut(piece.text);
  for await (const piece of generation) {
    write(piece);
    if (Number.isInteger(piece.token)) tokens.push(piece.token);
  }
  if (!(options.topAlternatives > 0)) writeOut('\n');
  writeError(formatStats(generation.stats, model));
  return tokens;
}

// --num-return-sequences N > 1: the sequences' pieces arrive interleaved, step by step, so streaming them would mix
// N texts on one terminal; each is printed whole once the run ends, under a line that says which it is, its
// log-probability (beam search: its score) and why it stopped. -> []: there is no one text to continue (-i
// refuses N > 1).
async function printSequences(model, prompt, options) {
  const generation = model.generate(prompt, options);
  for await (const piece of generation) void piece;  // the texts are in generation.sequences once it ends
  for (const [i, { text, score, stopReason }] of generation.sequences.entries()) {
    const scored = options.numBeams > 1 ? 'score' : 'log-probability';
    writeOut(`--- sequence ${i} (${scored} ${score.toFixed(4)}, stop: ${stopReason}) ---\n${text}\n`);
  }
  writeError(formatStats(generation.stats, model));
  return [];
}

function writePieceLine({ text, probability, alternatives }) {
  writeOut(`${JSON.stringify(text)}\t${probability.toFixed(4)}${formatAlternatives(alternatives, 'probability')}\n`);
}

function formatAlternatives(alternatives, key) {
  return alternatives.map((a) => `\t${JSON.stringify(a.text)}\t${a[key].toFixed(4)}`).join('');
}

// The text so far is kept as token ids (each line's, then the generated ones), so that each continuation
// starts exactly where the last one stopped and the model reuses all of its cache but the newest token.
async function interact(model, options) {
  const ids = [];
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    ids.push(...await model.encode(line));
    ids.push(...await continueText(model, ids, options));
  }
}

async function printScores(model, text, { topAlternatives, kvCache }) {
  const { tokens, totalLogprob, perplexity } = await model.score(text, { topAlternatives, kvCache });
  for (const token of tokens) {
    const alternatives = formatAlternatives(token.alternatives, 'logprob');
    writeOut(`${JSON.stringify(token.text)}\t${token.logprob.toFixed(4)}\t${token.rank}${alternatives}\n`);
  }
  writeOut(`total ${totalLogprob.toFixed(4)} perplexity ${perplexity.toFixed(4)}\n`);
}

// --inspect: the text's last position inside every layer, from one inspected prefill of the text's window.
async function printInspection(model, text, { kvCache }) {
  const result = await model.inspect(text, { topK: INSPECT_TOP_K, kvCache });
  if (result.note) writeError(`gpt2-wasm: ${result.note}\n`);
  const [position] = result.positions;
  const named = `position ${position}, ${JSON.stringify(result.tokens[position].text)}`;
  writeOut(`logit lens at ${named}: the ${INSPECT_TOP_K} likeliest next tokens after each layer\n`);
  for (const [l, layer] of result.layers.entries()) {
    writeOut(`layer ${layer}${formatAlternatives(result.logitLens[l][0], 'probability')}\n`);
  }
  writeOut(`attention at ${named}: the ${INSPECT_TOP_ATTENDED} positions it attends to most, averaged over the ` +
    `${result.heads.length} heads\n`);
  for (const [l, layer] of result.layers.entries()) {
    const attended = mostAttended(result.attention[l].map((rows) => rows[0]), INSPECT_TOP_ATTENDED);
    writeOut(`layer ${layer}${attended.map(({ at, weight }) => `\t${at} ${JSON.stringify(result.tokens[at].text)}\t${weight.toFixed(4)}`).join('')}\n`);
  }
}

// rows: one attention row per head over the same positions -> the count positions of the highest mean weight,
// highest first (the earlier position first on a tie): [{ at, weight }].
function mostAttended(rows, count) {
  const mean = Array.from(rows[0], (_, at) => ({ at, weight: rows.reduce((sum, row) => sum + row[at], 0) / rows.length }));
  return mean.sort((a, b) => b.weight - a.weight || a.at - b.at).slice(0, count);
}

// The model when --model is not given: the bundled one where it exists (a checkout of the repository), else
// the Hub's GPT-2 (an installed package).
function defaultModel() {
  if (existsSync(`${BUNDLED_MODEL}${MODEL_FILES.weights}`)) return BUNDLED_MODEL;
  writeError(`gpt2-wasm: no --model, so ${HUB_DEFAULT_MODEL} from the Hugging Face Hub (GPT-2 124M: 548 MB, ` +
    `downloaded once into ${cacheDirectory()})\n`);
  return HUB_DEFAULT_MODEL;
}

// A remote model is loaded from its copy in the disk cache; one whose files prove invalid is removed from it,
// so the next run downloads it again.
async function loadCliModel(text, load) {
  const source = resolveModelSource(text ?? defaultModel());
  if (source.kind === 'path') return loadModel(source.path, { threads: 1, ...load });
  const onProgress = process.stderr.isTTY ? progressBar(process.stderr) : undefined;
  const cached = await cachedModel(source, { onProgress });
  try {
    return await loadModel(cached.path, { threads: 1, ...load });
  } catch (error) {
    if (error.kind !== 'invalid') throw error;
    await cached.evict();
    throw new Error(`${source.url}: ${error.message} (removed from the cache)`, { cause: error });
  }
}

async function main(args) {
  const parsed = parseCliArguments(args);
  if (parsed.help) return void writeOut(`${USAGE}\n`);
  const model = await loadCliModel(parsed.model, parsed.load);
  // --speculative MODEL: the draft model loads as --model does, with the same weights and threads
  const draft = parsed.draftModel === undefined ? null : await loadDraftModel(parsed.draftModel, parsed.load, model);
  const options = draft ? { ...parsed.options, speculative: { ...parsed.options.speculative, draft } } : parsed.options;
  try {
    if (parsed.score) await printScores(model, parsed.prompt, options);
    else if (parsed.inspect) await printInspection(model, parsed.prompt, options);
    else if (parsed.interactive) await interact(model, options);
    else await continueText(model, parsed.prompt, options);
  } finally {
    draft?.dispose();
    model.dispose();
  }
}

async function loadDraftModel(text, load, model) {
  try {
    return await loadCliModel(text, load);
  } catch (error) {
    model.dispose();
    throw new Error(`--speculative: ${error.message}`, { cause: error });
  }
}

main(process.argv.slice(2)).catch((error) => {
  writeError(`gpt2-wasm: ${error?.message ?? error}\n`);
  process.exitCode = 1;
});
