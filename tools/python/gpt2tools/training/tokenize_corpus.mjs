// Tokenizes a text file with the GPT-2 (r50k_base) vocabulary and writes the ids as little-endian uint16.
// Used by train_tiny.py so that training needs no Python tokenizer; gpt-tokenizer is an independent
// implementation of the same byte-level BPE that the engine's web/lib/tokenizer.js implements.
// usage: node tools/python/gpt2tools/training/tokenize_corpus.mjs INPUT.txt OUTPUT.u16
import { readFileSync, writeFileSync } from 'node:fs';
import { encode } from 'gpt-tokenizer/encoding/r50k_base';

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node tools/python/gpt2tools/training/tokenize_corpus.mjs INPUT.txt OUTPUT.u16');
  process.exit(2);
}
const ids = encode(readFileSync(input, 'utf8'), { allowedSpecial: new Set() });
writeFileSync(output, Buffer.from(Uint16Array.from(ids).buffer));
console.error(`${input}: ${ids.length} tokens -> ${output}`);
