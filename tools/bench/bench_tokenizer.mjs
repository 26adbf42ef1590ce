// Encode speed of web/lib/tokenizer.js against gpt-tokenizer (r50k_base, same ids) on tinyshakespeare,
// plus our times on long adversarial inputs. Each figure is the median of 5 runs after a warm-up run.
// The machine may be shared: compare the two encoders within one run, not across runs.
// usage: node tools/bench/bench_tokenizer.mjs [TEXT_FILE]
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { encode as gptTokenizerEncode } from 'gpt-tokenizer/encoding/r50k_base';
import { createTokenizer } from '../../web/lib/tokenizer.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const textFile = process.argv[2] ?? path.join(repoRoot, 'tests/fixtures/tinyshakespeare/tinyshakespeare.txt');
const vocabDir = path.join(repoRoot, 'tests/fixtures/gpt2-vocab');

function timeMs(run) {
  const start = performance.now();
  run();
  return performance.now() - start;
}

const median = (times) => [...times].sort((a, b) => a - b)[times.length >> 1];

// Each measure() returns one run's milliseconds. The first round only warms up the JIT and caches; the
// measures then take turns, so that load from other processes hits them alike.
function interleavedMedians(measures, repeats = 5) {
  for (const measure of measures) measure();
  const times = measures.map(() => []);
  for (let round = 0; round < repeats; round++) {
    measures.forEach((measure, i) => times[i].push(measure()));
  }
  return times.map(median);
}

const medianOf = (measure) => interleavedMedians([measure])[0];
const medianMs = (run) => medianOf(() => timeMs(run));

const text = readFileSync(textFile, 'utf8');
const vocab = JSON.parse(readFileSync(path.join(vocabDir, 'vocab.json'), 'utf8'));
const merges = readFileSync(path.join(vocabDir, 'merges.txt'), 'utf8');
const initMs = medianMs(() => createTokenizer(vocab, merges));
const tokenizer = createTokenizer(vocab, merges);

const ours = tokenizer.encode(text);
const theirs = gptTokenizerEncode(text, { disallowedSpecial: new Set() });
if (ours.length !== theirs.length || ours.some((id, i) => id !== theirs[i])) {
  throw new Error('ids differ from gpt-tokenizer');
}

console.log(`${path.basename(textFile)}: ${text.length} characters, ${ours.length} tokens (ids identical)`);
console.log(`createTokenizer: ${initMs.toFixed(1)} ms`);
const report = (name, ms) =>
  console.log(`${name.padEnd(24)} ${ms.toFixed(1).padStart(8)} ms ${(ours.length / (ms / 1000) / 1e6).toFixed(2).padStart(6)} M tokens/s`);
const [oursMs, theirsMs] = interleavedMedians([
  () => timeMs(() => tokenizer.encode(text)),
  () => timeMs(() => gptTokenizerEncode(text, { disallowedSpecial: new Set() })),
]);
report('web/lib/tokenizer.js encode', oursMs);
report('gpt-tokenizer encode', theirsMs);
console.log(`speed-up: ${(theirsMs / oursMs).toFixed(2)}x`);
report('web/lib/tokenizer.js decode', medianMs(() => tokenizer.decode(ours)));

let seed = 1;
const randomCodePoint = () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  const codePoint = Math.floor((seed / 2 ** 32) * 0x110000);
  return codePoint >= 0xd800 && codePoint <= 0xdfff ? 0x20 : codePoint;
};
const longInputs = {
  '100k-letter word': 'abcdefghijklmnopqrstuvwxyz'.repeat(3847).slice(0, 100000),
  '100k spaces': ' '.repeat(100000),
  '100k of one emoji': '😀'.repeat(50000),
  '100k random code points': Array.from({ length: 100000 }, () => String.fromCodePoint(randomCodePoint())).join(''),
  '1M-letter word': 'ab'.repeat(500000),
  '1M spaces': ' '.repeat(1000000),
  '1M of one emoji': '😀'.repeat(500000),
};
console.log('long inputs (length in UTF-16 units), web/lib/tokenizer.js encode:');
for (const [name, input] of Object.entries(longInputs)) {
  // A fresh tokenizer for each run so that the piece cache cannot hide the BPE work.
  const ms = medianOf(() => {
    const fresh = createTokenizer(vocab, merges);
    return timeMs(() => fresh.encode(input));
  });
  console.log(`  ${name.padEnd(24)} ${ms.toFixed(1).padStart(8)} ms`);
}
