// The benchmark's prompt vocabulary: token ids that are whole lower-case words with their leading space (" house"),
// each of which our tokenizer encodes back to that single id. A prompt drawn from them (measure.mjs promptIds)
// has a text form that tokenizes back to exactly its ids: GPT-2's pre-tokenizer splits the text at each space,
// and each piece is one of these words. Runtimes that take text only (wllama: bench/wllama_driver.mjs) then prefill
// the same ids as ours.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTokenizer } from '../../web/lib/tokenizer.js';

const POOL_SIZE = 256;
const WORD = /^ [a-z]{3,}$/;

// modelDir: a Hugging Face folder with vocab.json and merges.txt -> { ids: [POOL_SIZE ids, ascending],
// words: { id: text } }.
export function promptPool(modelDir) {
  const vocab = JSON.parse(readFileSync(join(modelDir, 'vocab.json'), 'utf8'));
  const tokenizer = createTokenizer(vocab, readFileSync(join(modelDir, 'merges.txt'), 'utf8'));
  const ids = [];
  const words = {};
  for (const id of Object.values(vocab).sort((a, b) => a - b)) {
    const text = tokenizer.decode([id]);
    if (!WORD.test(text) || tokenizer.encode(text).join() !== String(id)) continue;
    ids.push(id);
    words[id] = text;
    if (ids.length === POOL_SIZE) return { ids, words };
  }
  throw new Error(`${modelDir}: the vocabulary has fewer than ${POOL_SIZE} whole-word tokens for the prompts`);
}

