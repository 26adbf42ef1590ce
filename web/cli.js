#!/usr/bin/env node
// gpt2-wasm: command-line text generation with the wasm engine in Node, through the public API (gpt2.js).
//
//   gpt2-wasm [--model DIR_OR_URL|FILE.gguf] [-n N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--no-cache]
//             [--kv-cache int8|fp32] [--threads N|auto] ("prompt" | -i)
//   gpt2-wasm [--model DIR_OR_URL|FILE.gguf] [--threads N|auto] --score "text"
//
// Streams the generated text to stdout as it is decoded, statistics to stderr; on any error prints one line
// and exits with status 1. -i (interactive): each line read from stdin is added to the text (without its line
// break; an empty line adds nothing) and the text is continued, so the model's KV cache is reused between lines
// (the stats line says how many prompt tokens were). --score: one line per token of the text, `"token
// text"<TAB>logprob<TAB>rank` (rank 1 = the model's likeliest token), then `total <sum of logprobs>
// perplexity <perplexity>` (model.score). The default model is the bundled public/models/tiny-shakespeare,
// as its safetensors folder: read from disk, the page's smaller Q4_0 GGUF file would save no download, and the
// folder's weights are the exact fp32 ones.
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { normalizeGenerateOptions } from './generate.js';
import { loadModel } from './gpt2.js';

const DEFAULT_MODEL = fileURLToPath(new URL('../public/models/tiny-shakespeare/', import.meta.url));
const USAGE =
  'usage: gpt2-wasm [--model DIR_OR_URL|FILE.gguf] [-n N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--no-cache] ' +
  '[--kv-cache int8|fp32] [--threads N|auto] ("prompt" | -i); gpt2-wasm [--model DIR_OR_URL|FILE.gguf] [--threads N|auto] --score "text"';

// flag -> [option name, parse]
const VALUE_FLAGS = {
  '--model': ['model', String],
  '-n': ['maxNewTokens', Number],
  '--temperature': ['temperature', Number],
  '--top-k': ['topK', Number],
  '--top-p': ['topP', Number],
  '--seed': ['seed', Number],
  '--kv-cache': ['kvCache', String],
  '--threads': ['threads', (value) => (value === 'auto' ? value : Number(value))],
};

function parseArguments(args) {
  const parsed = { model: DEFAULT_MODEL, threads: 1, options: {}, prompt: null, interactive: false, score: false };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '-h' || arg === '--help') return { help: true };
    if (arg === '--no-cache') parsed.options.useKVCache = false;
    else if (arg === '-i') parsed.interactive = true;
    else if (arg === '--score') parsed.score = true;
    else if (arg in VALUE_FLAGS) {
      if (i + 1 >= args.length) throw new Error(`${arg}: missing value`);
      const [name, parse] = VALUE_FLAGS[arg];
      const value = parse(args[++i]);
      if (name === 'model' || name === 'threads') parsed[name] = value;
      else parsed.options[name] = value;
    } else if (arg.startsWith('-') && arg !== '-') throw new Error(`unknown option ${arg}`);
    else if (parsed.prompt === null) parsed.prompt = arg;
    else throw new Error('give the prompt as one argument (quote it)');
  }
  checkMode(parsed);
  return parsed;
}

function checkMode({ interactive, score, prompt, options }) {
  if (interactive && score) throw new Error('-i and --score cannot be combined');
  if (interactive && prompt !== null) throw new Error('-i reads the text from stdin: give no prompt');
  if (score && Object.keys(options).length > 0) throw new Error('--score takes no generation options');
  if (!interactive && prompt === null) throw new Error(`missing ${score ? 'text' : 'prompt'}; ${USAGE}`);
}

function formatStats(stats, threads) {
  return (
    `\n[${stats.promptTokens} prompt tokens (${stats.reusedTokens} reused), prefill ${stats.prefillMs.toFixed(1)} ms; ` +
    `${stats.generatedTokens} generated, ${stats.decodeTokensPerSecond.toFixed(1)} tokens/s; ` +
    `context ${stats.contextUsed}/${stats.contextSize}; stop: ${stats.stopReason}; ${threads} ${threads === 1 ? 'thread' : 'threads'}]\n`
  );
}

// Streams the continuation of prompt (a text or token ids) to stdout, then the stats to stderr; -> the generated
// token ids.
async function continueText(model, prompt, options) {
  const generation = model.generate(prompt, options);
  const tokens = [];
  for await (const piece of generation) {
    process.stdout.write(piece.text);
    if (Number.isInteger(piece.token)) tokens.push(piece.token);
  }
  process.stdout.write('\n');
  process.stderr.write(formatStats(generation.stats, model.threads));
  return tokens;
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

async function printScores(model, text) {
  const { tokens, totalLogprob, perplexity } = await model.score(text);
  for (const token of tokens) process.stdout.write(`${JSON.stringify(token.text)}\t${token.logprob.toFixed(4)}\t${token.rank}\n`);
  process.stdout.write(`total ${totalLogprob.toFixed(4)} perplexity ${perplexity.toFixed(4)}\n`);
}

async function main(args) {
  const parsed = parseArguments(args);
  if (parsed.help) return void process.stdout.write(`${USAGE}\n`);
  normalizeGenerateOptions(parsed.options);  // reports bad values before the model loads
  const model = await loadModel(parsed.model, { threads: parsed.threads });
  try {
    if (parsed.score) await printScores(model, parsed.prompt);
    else if (parsed.interactive) await interact(model, parsed.options);
    else await continueText(model, parsed.prompt, parsed.options);
  } finally {
    model.dispose();
  }
}

main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`gpt2-wasm: ${error?.message ?? error}\n`);
  process.exitCode = 1;
});
