// Cross-checks gpt2tools.convert.convert_to_gguf against llama.cpp itself (through npm node-llama-cpp, tools only):
// converts a model to each GGUF type, loads every file with llama.cpp, and prints a table of file size, whether it
// loads, and llama.cpp's greedy tokens for a prompt next to our native engine's fp32 tokens on the Hugging Face folder.
// The prompt is tokenized by llama.cpp from the GGUF's own tokenizer and by web/lib/tokenizer.js; both must agree.
// Our native engine then runs each .gguf itself (its matrices in their block types) for its greedy tokens and,
// with --eval, its held-out loss; each file is also dequantized back to a Hugging Face folder
// (gpt2tools.convert.gguf_to_safetensors) and run in fp32, which separates the weights' quantization from the
// activations'.
//
// node-llama-cpp is not a dependency of this project; install it in a scratch folder:
//   mkdir -p /tmp/llama-check && cd /tmp/llama-check && npm init -y && npm install node-llama-cpp
// usage: node tools/bench/llama_cpp_check.mjs [--model DIR] [--types f32,q8_0,...] [--prompt TEXT] [-n 16]
//                                             [--llama /tmp/llama-check/node_modules/node-llama-cpp] [--out-dir DIR]
//                                             [--eval FILE.u16]   (e.g. tests/fixtures/tinyshakespeare-held-out.u16)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createTokenizer } from '../../web/lib/tokenizer.js';
import { runPython } from './python_tools.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ALL_TYPES = ['f32', 'f16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k_m', 'q4_k', 'q5_k', 'q6_k'];

function parseArgs(argv) {
  const options = {
    model: path.join(repoRoot, 'public/models/tiny-shakespeare'),
    types: ALL_TYPES,
    prompt: 'ROMEO:',
    n: 16,
    llama: '/tmp/llama-check/node_modules/node-llama-cpp',
    outDir: path.join(repoRoot, 'build/gguf-check'),
    eval: null,
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--model') options.model = path.resolve(value);
    else if (flag === '--types') options.types = value.split(',');
    else if (flag === '--prompt') options.prompt = value;
    else if (flag === '-n') options.n = Number(value);
    else if (flag === '--llama') options.llama = path.resolve(value);
    else if (flag === '--out-dir') options.outDir = path.resolve(value);
    else if (flag === '--eval') options.eval = path.resolve(value);
    else throw new Error(`unknown option ${flag}`);
  }
  return options;
}

async function importNodeLlamaCpp(folder) {
  const entry = path.join(folder, 'dist/index.js');
  if (!existsSync(entry)) {
    console.error(`node-llama-cpp not found at ${folder}. Install it outside the project:\n` +
      '  mkdir -p /tmp/llama-check && cd /tmp/llama-check && npm init -y && npm install node-llama-cpp\n' +
      'or pass --llama PATH/node_modules/node-llama-cpp');
    process.exit(2);
  }
  return import(pathToFileURL(entry).href);
}

function ourPromptIds(modelDir, prompt) {
  const vocab = JSON.parse(readFileSync(path.join(modelDir, 'vocab.json'), 'utf8'));
  return createTokenizer(vocab, readFileSync(path.join(modelDir, 'merges.txt'), 'utf8')).encode(prompt);
}

const nativeBinary = path.join(repoRoot, 'build/native/gpt2');

// The native engine's greedy tokens on a Hugging Face folder or a .gguf, or null when it is not built.
function nativeTokens(model, ids, n) {
  if (!existsSync(nativeBinary)) return null;
  const args = ['--model', model, '--ids', ids.join(','), '-n', String(n), '--temperature', '0', '--no-stop'];
  return execFileSync(nativeBinary, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split(',').map(Number);
}

// The native engine's mean cross-entropy (nats/token) of a token file, as a string with 4 decimals.
function nativeEval(model, idsFile) {
  const out = execFileSync(nativeBinary, ['--model', model, '--eval', idsFile], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return Number(out.match(/eval: ([0-9.]+)/)[1]).toFixed(4);
}

const pythonTool = (module, args) => runPython(['-m', module, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });

// llama.cpp's prompt ids and greedy continuation of n tokens (temperature 0, no stop) from one GGUF file.
async function llamaGreedy(llama, file, prompt, n) {
  const model = await llama.loadModel({ modelPath: file });
  try {
    const promptIds = [...model.tokenize(prompt)];
    const context = await model.createContext({ contextSize: 256, batchSize: 256 });
    const generated = [];
    for await (const token of context.getSequence().evaluate(promptIds, { temperature: 0 })) {
      generated.push(token);
      if (generated.length >= n) break;
    }
    await context.dispose();
    return { promptIds, generated };
  } finally {
    await model.dispose();
  }
}

const agreeing = (a, b) => {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
};

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const { getLlama } = await importNodeLlamaCpp(options.llama);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const ourIds = ourPromptIds(options.model, options.prompt);
  const native = nativeTokens(options.model, ourIds, options.n);
  console.log(`prompt ${JSON.stringify(options.prompt)}: web/lib/tokenizer.js ids ${ourIds.join(',')}`);
  console.log(`native engine (fp32, safetensors): ${native ? native.join(',') : 'not built (build/native/gpt2)'}`);
  if (options.eval) console.log(`held-out loss, fp32 safetensors: ${nativeEval(options.model, options.eval)}`);
  console.log('\n| type | file size | loads | prompt ids match | greedy tokens (llama.cpp) | = native fp32 | = ours on the .gguf | = ours on its dequantized weights (fp32) |' +
    (options.eval ? ' held-out loss (ours on the .gguf) |' : ''));
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |' + (options.eval ? ' --- |' : ''));
  mkdirSync(options.outDir, { recursive: true });
  let failures = 0;
  for (const type of options.types) {
    const file = path.join(options.outDir, `${path.basename(options.model)}-${type}.gguf`);
    pythonTool('gpt2tools.convert.convert_to_gguf', [options.model, '--type', type, '-o', file, '--quiet']);
    const dequantizedDir = file.replace(/\.gguf$/, '-dequantized');
    pythonTool('gpt2tools.convert.gguf_to_safetensors', [file, '-o', dequantizedDir]);
    const engineOnDequantized = nativeTokens(dequantizedDir, ourIds, options.n);
    const engineOnFile = nativeTokens(file, ourIds, options.n);
    const loss = options.eval ? ` ${nativeEval(file, options.eval)} |` : '';
    const size = `${(statSync(file).size / 2 ** 20).toFixed(2)} MiB`;
    try {
      const { promptIds, generated } = await llamaGreedy(llama, file, options.prompt, options.n);
      const idsMatch = promptIds.join(',') === ourIds.join(',');
      const agree = (tokens) => (tokens ? `${agreeing(generated, tokens)}/${options.n}` : 'n/a');
      failures += idsMatch ? 0 : 1;
      const ids = idsMatch ? 'yes' : `no (${promptIds})`;
      console.log(`| ${type} | ${size} | yes | ${ids} | ${generated.join(',')} | ${agree(native)} | ${agree(engineOnFile)} | ${agree(engineOnDequantized)} |${loss}`);
    } catch (error) {
      failures++;
      console.log(`| ${type} | ${size} | error: ${String(error.message).split('\n')[0]} | | | | | |${loss}`);
    }
  }
  await llama.dispose();
  process.exit(failures ? 1 : 0);
}

await main();
