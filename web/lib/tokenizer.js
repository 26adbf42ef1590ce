// GPT-2 byte-level BPE tokenizer (the vocabulary OpenAI calls r50k_base): the package's gpt2-wasm/tokenizer.
// Plain ES modules without Node imports: they run in browsers, Web Workers and Node. tokenizer/token_files.js
// reads the files, tokenizer/byte_pair_encoder.js encodes (pre-tokenizer regex, UTF-8 bytes, BPE merges) and
// tokenizer/decoding.js decodes.
//
// Compatibility notes, measured against gpt-tokenizer (r50k_base) and OpenAI's Python encoder.py:
// - Lone UTF-16 surrogates cannot be UTF-8 encoded; like TextEncoder (and gpt-tokenizer) we encode each
//   as U+FFFD (bytes EF BF BD), so decode(encode(s)) returns s with its lone surrogates replaced by U+FFFD.
// - "<|endoftext|>" in the input is ordinary text; only decode() of eosId produces it.
// - The regex runs with JavaScript's \s, which (unlike Python's `regex` module used by GPT-2) counts
//   U+FEFF as whitespace and does not count U+0085. Texts with those two characters can split differently
//   from the Python original; gpt-tokenizer shares this behaviour and ids are identical to it.
import { createEncoder } from './tokenizer/byte_pair_encoder.js';
import { createDecoding } from './tokenizer/decoding.js';
import { byteAlphabet, describeType, parseMerges, parseVocab, quote, splitMergeLines } from './tokenizer/token_files.js';

const END_OF_TEXT = '<|endoftext|>';

// vocab: the parsed vocab.json object (token string -> id); merges: the text of merges.txt.
// Returns { encode(text) -> ids, decode(ids) -> text, createDecoder() -> { push(id), flush() }, eosId, vocabSize }.
export function createTokenizer(vocab, merges) {
  if (vocab === null || typeof vocab !== 'object' || Array.isArray(vocab)) {
    throw new Error(`createTokenizer: vocab must be the parsed vocab.json object (token string -> id), not ${describeType(vocab)}`);
  }
  if (typeof merges !== 'string') {
    throw new Error(`createTokenizer: merges must be the text of merges.txt, not ${describeType(merges)}`);
  }
  // Object.keys lists only own properties, so a "__proto__" key from JSON.parse is an ordinary token
  // (and vocab["__proto__"] reads that own property, not the prototype).
  const tokens = Object.keys(vocab);
  return buildTokenizer(tokens, (i) => vocab[tokens[i]], splitMergeLines(merges), (tokenToId) => {
    const eosId = tokenToId.get(END_OF_TEXT);
    if (eosId === undefined) throw new Error(`createTokenizer: vocab lacks ${END_OF_TEXT}`);
    return eosId;
  });
}

// The same tokenizer from a vocabulary as a GGUF file holds it (EngineModel.readVocabulary()): tokens (the
// token strings in id order, as vocab.json's keys), merges (merges.txt's lines as an array) and eosTokenId.
// Checked as createTokenizer checks the files, with the same messages.
export function createTokenizerFromVocabulary(vocabulary) {
  const { tokens, merges, eosTokenId } = vocabulary ?? {};
  checkStrings(tokens, 'tokens', 'an array of token strings (in id order)');
  checkStrings(merges, 'merges', 'an array of "left right" strings');
  return buildTokenizer(tokens, (i) => i, merges, () => {
    if (!(Number.isInteger(eosTokenId) && eosTokenId >= 0 && eosTokenId < tokens.length)) {
      throw new Error(`createTokenizer: end-of-text token id ${quote(eosTokenId)} is not in the vocab of ${tokens.length} tokens`);
    }
    return eosTokenId;
  });
}

// Element by element: every() would skip the holes of a sparse array.
function checkStrings(list, name, what) {
  if (!Array.isArray(list)) throw new Error(`createTokenizer: ${name} must be ${what}, not ${describeType(list)}`);
  for (let i = 0; i < list.length; i++) {
    if (typeof list[i] !== 'string') throw new Error(`createTokenizer: ${name} must be ${what}; ${name}[${i}] is ${describeType(list[i])}`);
  }
}

// tokens and idOf(i): the vocabulary (see parseVocab); mergeLines: see parseMerges; findEosId(tokenToId) -> id.
function buildTokenizer(tokens, idOf, mergeLines, findEosId) {
  const { byteToCharacter, charCodeToByte } = byteAlphabet();
  const vocabulary = parseVocab(tokens, idOf, charCodeToByte);
  const merges = parseMerges(mergeLines, vocabulary.tokenToId);
  const byteTokenIds = new Int32Array(256);
  for (let byte = 0; byte < 256; byte++) {
    const id = vocabulary.tokenToId.get(byteToCharacter[byte]);
    if (id === undefined) throw new Error(`createTokenizer: vocab lacks the token for byte ${byte} (${quote(byteToCharacter[byte])})`);
    byteTokenIds[byte] = id;
  }
  const eosId = findEosId(vocabulary.tokenToId);
  const { decode, createDecoder } = createDecoding(vocabulary);
  return { encode: createEncoder(byteTokenIds, merges), decode, createDecoder, eosId, vocabSize: vocabulary.vocabSize };
}
