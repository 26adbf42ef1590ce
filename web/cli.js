#!/usr/bin/env node
// gpt2-wasm: command-line text generation with the wasm engine in Node, through the public API (gpt2.js).
//
//   gpt2-wasm [--model DIR_OR_URL|FILE.gguf] [-n N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--no-cache]
//             [--kv-cache int8|fp32] [--threads N|auto] "prompt"
//
// Streams the generated text to stdout as it is decoded, statistics to stderr; on any error prints one line
// and exits with status 1. The default model is the bundled public/models/tiny-shakespeare, as its safetensors
// folder: read from disk, the page's smaller Q4_0 GGUF file would save no download, and the folder's weights are
// the exact fp32 ones.
import { fileURLToPath } from 'node:url';
import { normalizeGenerateOptions } from './generate.js';
import { loadModel } from './gpt2.js';

const DEFAULT_MODEL = fileURLToPath(new URL('../public/models/tiny-shakespeare/', import.meta.url));
const USAGE =
  'usage: gpt2-wasm [--model DIR_OR_URL|FILE.gguf] [-n N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--no-cache] ' +
  '[--kv-cache int8|fp32] [--threads N|auto] "prompt"';

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
  const parsed = { model: DEFAULT_MODEL, threads: 1, options: {}, prompt: null };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '-h' || arg === '--help') return { help: true };
    if (arg === '--no-cache') parsed.options.useKVCache = false;
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
  if (parsed.prompt === null) throw new Error(`missing prompt; ${USAGE}`);
  return parsed;
}

function formatStats(stats, threads) {
  return (
    `\n[${stats.promptTokens} prompt tokens, prefill ${stats.prefillMs.toFixed(1)} ms; ` +
    `${stats.generatedTokens} generated, ${stats.decodeTokensPerSecond.toFixed(1)} tokens/s; ` +
    `context ${stats.contextUsed}/${stats.contextSize}; stop: ${stats.stopReason}; ${threads} ${threads === 1 ? 'thread' : 'threads'}]\n`
  );
}

async function main(args) {
  const parsed = parseArguments(args);
  if (parsed.help) return void process.stdout.write(`${USAGE}\n`);
  normalizeGenerateOptions(parsed.options);  // reports bad values before the model loads
  const model = await loadModel(parsed.model, { threads: parsed.threads });
  try {
    const generation = model.generate(parsed.prompt, parsed.options);
    for await (const piece of generation) process.stdout.write(piece.text);
    process.stdout.write('\n');
    process.stderr.write(formatStats(generation.stats, model.threads));
  } finally {
    model.dispose();
  }
}

main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`gpt2-wasm: ${error?.message ?? error}\n`);
  process.exitCode = 1;
});
