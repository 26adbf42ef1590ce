// The tokenizer's files read into tables: vocab.json's tokens (their bytes, flat) and merges.txt's merges (a
// hash table of pair ranks), each checked as it is read, with one-line errors that quote what is wrong.
// A merge's rank goes into the encoder's heap entries as rank * 2^32 + position (byte_pair_encoder.js).
const MAX_MERGES = 2 ** 20; // keeps rank * 2^32 + position below 2^53
const MAX_VOCAB_SIZE = 2 ** 24; // ids index typed arrays; far above any BPE vocabulary

// Tokens, merge lines and values quoted in error messages are cut to this many characters: a message stays
// one readable line whatever the file holds.
const MAX_QUOTED_LENGTH = 64;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100...
// Returns the character of each byte and, indexed by char code, the byte of each character (-1: none).
export function byteAlphabet() {
  const byteToCharacter = new Array(256);
  const charCodeToByte = new Int16Array(256 + 68).fill(-1);
  let nextCharCode = 256;
  for (let byte = 0; byte < 256; byte++) {
    const printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
    const charCode = printable ? byte : nextCharCode++;
    byteToCharacter[byte] = String.fromCharCode(charCode);
    charCodeToByte[charCode] = byte;
  }
  return { byteToCharacter, charCodeToByte };
}

// A token, merge line or vocab value as error messages show it: quoted, cut short, never a whole structure
// (stringifying a deeply nested array would overflow the stack).
export function quote(value) {
  if (typeof value === 'string') {
    return JSON.stringify(value.length > MAX_QUOTED_LENGTH ? `${value.slice(0, MAX_QUOTED_LENGTH)}…` : value);
  }
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}

export function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

// Token bytes are stored flat (tokenBytes[tokenStart[id] .. tokenStart[id] + tokenLength[id]]) rather than
// as 50k small arrays: faster to build and to decode from.
// tokens: the token strings; idOf(i): the id of tokens[i]. The ids must be 0 .. tokens.length - 1, each once:
// GPT-2's vocab.json is numbered so, a token listed twice in it (which JSON.parse keeps once) leaves a gap,
// and every id the model generates then has its text. It also bounds the arrays below by the file's size.
export function parseVocab(tokens, idOf, charCodeToByte) {
  const vocabSize = tokens.length;
  if (vocabSize > MAX_VOCAB_SIZE) throw new Error(`createTokenizer: the vocab has more than ${MAX_VOCAB_SIZE} tokens`);
  const ids = new Int32Array(vocabSize);
  let totalLength = 0;
  for (let i = 0; i < vocabSize; i++) {
    const id = idOf(i);
    if (!Number.isInteger(id)) throw new Error(`createTokenizer: vocab id of token ${quote(tokens[i])} is not an integer: ${quote(id)}`);
    if (id < 0 || id >= vocabSize) {
      throw new Error(`createTokenizer: vocab id of token ${quote(tokens[i])} is ${id}, but the vocab's ` +
        `${plural(vocabSize, 'token')} must have the ids 0 to ${vocabSize - 1}, one each (a token listed twice?)`);
    }
    ids[i] = id;
    totalLength += tokens[i].length;
  }
  const tokenToId = new Map();
  const tokenBytes = new Uint8Array(totalLength);
  const tokenStart = new Int32Array(vocabSize);
  const tokenLength = new Int32Array(vocabSize);
  const tokenIndex = new Int32Array(vocabSize).fill(-1);  // of each id, its token's index in tokens (-1: none yet)
  let offset = 0;
  for (let i = 0; i < vocabSize; i++) {
    const token = tokens[i];
    const id = ids[i];
    if (tokenIndex[id] !== -1) {
      throw new Error(`createTokenizer: vocab id ${id} belongs to more than one token (${quote(tokens[tokenIndex[id]])} and ${quote(token)})`);
    }
    if (tokenToId.has(token)) {
      throw new Error(`createTokenizer: vocab token ${quote(token)} has more than one id (${tokenToId.get(token)} and ${id})`);
    }
    tokenStart[id] = offset;
    tokenLength[id] = token.length;
    tokenIndex[id] = i;
    for (let j = 0; j < token.length; j++) {
      const charCode = token.charCodeAt(j);
      const byte = charCode < charCodeToByte.length ? charCodeToByte[charCode] : -1;
      if (byte === -1) {
        const character = `U+${token.codePointAt(j).toString(16).toUpperCase().padStart(4, '0')}`;
        throw new Error(`createTokenizer: vocab token ${quote(token)} has a character outside GPT-2's byte alphabet: ${character}`);
      }
      tokenBytes[offset++] = byte;
    }
    tokenToId.set(token, id);
  }
  return { tokenToId, tokenBytes, tokenStart, tokenLength, vocabSize };
}

// Merge rank of each (left id, right id) pair in an open-addressing hash table over typed arrays:
// no per-entry allocation, and lookups in the BPE loop are a few integer operations. The slot is the high bits
// of a multiply-add with random odd factors (multiply-shift hashing): with fixed factors a merges.txt could be
// made whose pairs all share a few slots, and building the table would take hours instead of milliseconds.
function createPairTable(pairCount) {
  let capacityBits = 4;
  while (2 ** capacityBits < pairCount * 2) capacityBits++;
  const capacity = 2 ** capacityBits;
  const mask = capacity - 1;
  const shift = 32 - capacityBits;
  const [leftFactor, rightFactor] = [randomOddFactor(), randomOddFactor()];
  const lefts = new Int32Array(capacity).fill(-1);
  const rights = new Int32Array(capacity);
  const ranks = new Int32Array(capacity);
  const slotOf = (left, right) => {
    let slot = (Math.imul(left, leftFactor) + Math.imul(right, rightFactor)) >>> shift;
    while (lefts[slot] !== -1 && (lefts[slot] !== left || rights[slot] !== right)) slot = (slot + 1) & mask;
    return slot;
  };
  return {
    // Returns false when the pair is already present.
    insert(left, right, rank) {
      const slot = slotOf(left, right);
      if (lefts[slot] !== -1) return false;
      lefts[slot] = left;
      rights[slot] = right;
      ranks[slot] = rank;
      return true;
    },
    // Returns the merge rank, or -1 when the pair never merges.
    rank(left, right) {
      const slot = slotOf(left, right);
      return lefts[slot] === -1 ? -1 : ranks[slot];
    },
  };
}

function randomOddFactor() {
  return ((Math.random() * 2 ** 32) >>> 0) | 1;
}

function mergeLineError(lineIndex, line, problem) {
  return new Error(`createTokenizer: merges line ${lineIndex + 1} ${quote(line)} ${problem}`);
}

// lines: merges.txt's lines ("left right"; a first "#version" line and empty lines are skipped).
export function parseMerges(lines, tokenToId) {
  if (lines.length > MAX_MERGES) throw new Error(`createTokenizer: merges has more than ${MAX_MERGES} lines`);
  const pairTable = createPairTable(lines.length);
  const mergeLeft = new Int32Array(lines.length);
  const mergeRight = new Int32Array(lines.length);
  const mergeResult = new Int32Array(lines.length);
  let mergeCount = 0;
  for (let lineIndex = 0; lineIndex < lines.length; lineIndex++) {
    const line = lines[lineIndex].endsWith('\r') ? lines[lineIndex].slice(0, -1) : lines[lineIndex];
    if (line === '' || (lineIndex === 0 && line.startsWith('#version'))) continue;
    const space = line.indexOf(' ');
    if (space <= 0 || space === line.length - 1 || line.indexOf(' ', space + 1) !== -1) {
      throw mergeLineError(lineIndex, line, 'is not two tokens separated by one space');
    }
    const left = line.slice(0, space);
    const right = line.slice(space + 1);
    const leftId = tokenToId.get(left);
    const rightId = tokenToId.get(right);
    const resultId = tokenToId.get(left + right);
    if (leftId === undefined || rightId === undefined) {
      throw mergeLineError(lineIndex, line, `uses ${quote(leftId === undefined ? left : right)}, which is not in the vocab`);
    }
    if (resultId === undefined) throw mergeLineError(lineIndex, line, `makes ${quote(left + right)}, which is not in the vocab`);
    if (!pairTable.insert(leftId, rightId, mergeCount)) throw mergeLineError(lineIndex, line, 'repeats an earlier merge');
    mergeLeft[mergeCount] = leftId;
    mergeRight[mergeCount] = rightId;
    mergeResult[mergeCount] = resultId;
    mergeCount++;
  }
  return { pairTable, mergeLeft, mergeRight, mergeResult };
}

// merges.txt's lines, counted before the text is split: a file of newlines alone would otherwise become an
// array of tens of millions of strings before parseMerges could refuse it.
export function splitMergeLines(text) {
  for (let count = 1, newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n', newline + 1)) {
    if (++count > MAX_MERGES) throw new Error(`createTokenizer: merges has more than ${MAX_MERGES} lines`);
  }
  return text.split('\n');
}

// What a value is, for the messages about arguments of the wrong type.
export function describeType(value) {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
