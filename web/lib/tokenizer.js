// GPT-2 byte-level BPE tokenizer (the vocabulary OpenAI calls r50k_base).
// Plain ES module without Node imports: it runs in browsers, Web Workers and Node.
//
// Pipeline of encode(text):
//   1. split the text into pieces with GPT-2's pre-tokenizer regex;
//   2. turn each piece into its UTF-8 bytes, one symbol (byte token id) per byte;
//   3. repeatedly merge the adjacent symbol pair with the lowest merge rank (BPE).
//
// Compatibility notes, measured against gpt-tokenizer (r50k_base) and OpenAI's Python encoder.py:
// - Lone UTF-16 surrogates cannot be UTF-8 encoded; like TextEncoder (and gpt-tokenizer) we encode each
//   as U+FFFD (bytes EF BF BD), so decode(encode(s)) returns s with its lone surrogates replaced by U+FFFD.
// - "<|endoftext|>" in the input is ordinary text; only decode() of eosId produces it.
// - The regex runs with JavaScript's \s, which (unlike Python's `regex` module used by GPT-2) counts
//   U+FEFF as whitespace and does not count U+0085. Texts with those two characters can split differently
//   from the Python original; gpt-tokenizer shares this behaviour and ids are identical to it.

const PRETOKEN_PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

const END_OF_TEXT = '<|endoftext|>';

// Pieces up to this many UTF-16 units are cached; longer ones are rare and would bloat the cache.
const MAX_CACHED_PIECE_LENGTH = 64;
// Enough for every distinct piece of a large book (tinyshakespeare has ~15k) while bounding memory.
const PIECE_CACHE_CAPACITY = 32768;

// Scratch arrays grow for long pieces; past this capacity they are dropped after the piece so that one
// huge input does not pin tens of megabytes for the tokenizer's lifetime.
const INITIAL_SCRATCH_CAPACITY = 256;
const MAX_RETAINED_SCRATCH_CAPACITY = 1 << 16;

// Heap entries pack (rank, position) into one double: rank * 2^32 + position. Ordering by that number
// merges the lowest rank first and, among equal ranks (the same pair), the leftmost occurrence first.
// That is encoder.py's order (merge all occurrences of the lowest-ranked pair, left to right) because a
// merge never creates a pair ranked below itself: in GPT-2's merges.txt every merge uses only tokens
// made by earlier merges.
const POSITION_SPAN = 2 ** 32;
const MAX_MERGES = 2 ** 20; // keeps rank * POSITION_SPAN + position below 2^53
const MAX_VOCAB_SIZE = 2 ** 24; // ids index typed arrays; far above any BPE vocabulary

// Tokens, merge lines and values quoted in error messages are cut to this many characters: a message stays
// one readable line whatever the file holds.
const MAX_QUOTED_LENGTH = 64;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100...
// Returns the character of each byte and, indexed by char code, the byte of each character (-1: none).
function byteAlphabet() {
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
function quote(value) {
  if (typeof value === 'string') {
    return JSON.stringify(value.length > MAX_QUOTED_LENGTH ? `${value.slice(0, MAX_QUOTED_LENGTH)}…` : value);
  }
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}

function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

// Token bytes are stored flat (tokenBytes[tokenStart[id] .. tokenStart[id] + tokenLength[id]]) rather than
// as 50k small arrays: faster to build and to decode from.
// tokens: the token strings; idOf(i): the id of tokens[i]. The ids must be 0 .. tokens.length - 1, each once:
// GPT-2's vocab.json is numbered so, a token listed twice in it (which JSON.parse keeps once) leaves a gap,
// and every id the model generates then has its text. It also bounds the arrays below by the file's size.
function parseVocab(tokens, idOf, charCodeToByte) {
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

// A regex match is a slice that keeps the whole input text alive (V8 sliced strings); a cache key made
// from it would pin every encoded text. Slicing a fresh concatenation copies the characters instead.
function detachedCopy(piece) {
  return (' ' + piece).slice(1);
}

function mergeLineError(lineIndex, line, problem) {
  return new Error(`createTokenizer: merges line ${lineIndex + 1} ${quote(line)} ${problem}`);
}

// lines: merges.txt's lines ("left right"; a first "#version" line and empty lines are skipped).
function parseMerges(lines, tokenToId) {
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
function splitMergeLines(text) {
  for (let count = 1, newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n', newline + 1)) {
    if (++count > MAX_MERGES) throw new Error(`createTokenizer: merges has more than ${MAX_MERGES} lines`);
  }
  return text.split('\n');
}

// What a value is, for the messages about arguments of the wrong type.
function describeType(value) {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

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
  const { tokenToId, tokenBytes, tokenStart, tokenLength, vocabSize } = parseVocab(tokens, idOf, charCodeToByte);
  const { pairTable, mergeLeft, mergeRight, mergeResult } = parseMerges(mergeLines, tokenToId);

  const byteTokenIds = new Int32Array(256);
  for (let byte = 0; byte < 256; byte++) {
    const id = tokenToId.get(byteToCharacter[byte]);
    if (id === undefined) throw new Error(`createTokenizer: vocab lacks the token for byte ${byte} (${quote(byteToCharacter[byte])})`);
    byteTokenIds[byte] = id;
  }
  const eosId = findEosId(tokenToId);

  // Scratch space for one piece, reused across pieces and grown on demand. A symbol is a run of bytes;
  // symbols form a doubly linked list over byte positions, a merged symbol lives at its leftmost position.
  let symbolIds, nextPosition, previousPosition, heap;
  allocateScratch(INITIAL_SCRATCH_CAPACITY);
  let heapSize = 0;

  function allocateScratch(capacity) {
    symbolIds = new Int32Array(capacity);
    nextPosition = new Int32Array(capacity);
    previousPosition = new Int32Array(capacity);
    heap = new Float64Array(capacity);
  }

  function ensureScratchCapacity(byteCount) {
    if (byteCount > symbolIds.length) allocateScratch(Math.max(byteCount, symbolIds.length * 2));
  }

  function heapPush(entry) {
    // A piece of n bytes has at most n - 1 pairs alive, but stale entries stay until popped.
    if (heapSize === heap.length) {
      const grown = new Float64Array(heap.length * 2);
      grown.set(heap);
      heap = grown;
    }
    let index = heapSize++;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (heap[parent] <= entry) break;
      heap[index] = heap[parent];
      index = parent;
    }
    heap[index] = entry;
  }

  function heapPop() {
    const top = heap[0];
    const last = heap[--heapSize];
    let index = 0;
    for (;;) {
      let child = 2 * index + 1;
      if (child >= heapSize) break;
      if (child + 1 < heapSize && heap[child + 1] < heap[child]) child++;
      if (heap[child] >= last) break;
      heap[index] = heap[child];
      index = child;
    }
    heap[index] = last;
    return top;
  }

  function pushPairAt(position, rightPosition) {
    const rank = pairTable.rank(symbolIds[position], symbolIds[rightPosition]);
    if (rank !== -1) heapPush(rank * POSITION_SPAN + position);
  }

  // Writes the piece's UTF-8 bytes as byte-token symbols; returns the byte count.
  function loadPieceBytes(piece) {
    ensureScratchCapacity(piece.length * 3); // a UTF-16 unit never takes more than 3 UTF-8 bytes
    let length = 0;
    for (let i = 0; i < piece.length; i++) {
      let codePoint = piece.charCodeAt(i);
      if (codePoint >= 0xd800 && codePoint <= 0xdfff) {
        const low = i + 1 < piece.length ? piece.charCodeAt(i + 1) : 0;
        if (codePoint <= 0xdbff && low >= 0xdc00 && low <= 0xdfff) {
          codePoint = 0x10000 + ((codePoint - 0xd800) << 10) + (low - 0xdc00);
          i++;
        } else {
          codePoint = 0xfffd; // lone surrogate, as TextEncoder does
        }
      }
      if (codePoint < 0x80) {
        symbolIds[length++] = byteTokenIds[codePoint];
      } else if (codePoint < 0x800) {
        symbolIds[length++] = byteTokenIds[0xc0 | (codePoint >> 6)];
        symbolIds[length++] = byteTokenIds[0x80 | (codePoint & 0x3f)];
      } else if (codePoint < 0x10000) {
        symbolIds[length++] = byteTokenIds[0xe0 | (codePoint >> 12)];
        symbolIds[length++] = byteTokenIds[0x80 | ((codePoint >> 6) & 0x3f)];
        symbolIds[length++] = byteTokenIds[0x80 | (codePoint & 0x3f)];
      } else {
        symbolIds[length++] = byteTokenIds[0xf0 | (codePoint >> 18)];
        symbolIds[length++] = byteTokenIds[0x80 | ((codePoint >> 12) & 0x3f)];
        symbolIds[length++] = byteTokenIds[0x80 | ((codePoint >> 6) & 0x3f)];
        symbolIds[length++] = byteTokenIds[0x80 | (codePoint & 0x3f)];
      }
    }
    return length;
  }

  // BPE over the loaded symbols in O(n log n): a min-heap of candidate pairs with lazy deletion
  // instead of rescanning all pairs after every merge. Appends the resulting ids to output.
  function bytePairEncode(length, output) {
    heapSize = 0;
    for (let position = 0; position < length; position++) {
      nextPosition[position] = position + 1;
      previousPosition[position] = position - 1;
      if (position + 1 < length) pushPairAt(position, position + 1);
    }
    while (heapSize > 0) {
      const entry = heapPop();
      const rank = Math.floor(entry / POSITION_SPAN);
      const position = entry - rank * POSITION_SPAN;
      const rightPosition = nextPosition[position];
      // Skip entries made stale by earlier merges: the symbol was absorbed or its pair has changed.
      if (symbolIds[position] !== mergeLeft[rank] || rightPosition >= length || symbolIds[rightPosition] !== mergeRight[rank]) {
        continue;
      }
      symbolIds[position] = mergeResult[rank];
      symbolIds[rightPosition] = -1;
      const afterRight = nextPosition[rightPosition];
      nextPosition[position] = afterRight;
      if (afterRight < length) {
        previousPosition[afterRight] = position;
        pushPairAt(position, afterRight);
      }
      const leftPosition = previousPosition[position];
      if (leftPosition >= 0) pushPairAt(leftPosition, position);
    }
    for (let position = 0; position < length; position = nextPosition[position]) {
      output.push(symbolIds[position]);
    }
  }

  // piece text -> its id (a number, the common case) or ids (an array); insertion-ordered for eviction.
  const pieceCache = new Map();

  function encode(text) {
    if (typeof text !== 'string') throw new TypeError('encode: text must be a string');
    const ids = [];
    // An exec loop is about twice as fast as text.match() here, which materialises every piece up front.
    PRETOKEN_PATTERN.lastIndex = 0;
    let match;
    while ((match = PRETOKEN_PATTERN.exec(text)) !== null) {
      const piece = match[0];
      const cached = pieceCache.get(piece);
      if (cached !== undefined) {
        if (typeof cached === 'number') ids.push(cached);
        else for (let i = 0; i < cached.length; i++) ids.push(cached[i]);
        continue;
      }
      const start = ids.length;
      bytePairEncode(loadPieceBytes(piece), ids);
      if (symbolIds.length > MAX_RETAINED_SCRATCH_CAPACITY) allocateScratch(INITIAL_SCRATCH_CAPACITY);
      if (piece.length <= MAX_CACHED_PIECE_LENGTH) {
        if (pieceCache.size >= PIECE_CACHE_CAPACITY) pieceCache.delete(pieceCache.keys().next().value);
        pieceCache.set(detachedCopy(piece), ids.length - start === 1 ? ids[start] : ids.slice(start));
      }
    }
    return ids;
  }

  function checkId(id) {
    if (!(Number.isInteger(id) && id >= 0 && id < vocabSize)) {
      throw new Error(`decode: invalid token id ${String(id)} (not in the vocab of ${vocabSize} ids)`);
    }
  }

  // ignoreBOM keeps a leading U+FEFF in the text instead of silently stripping it.
  const fullDecoder = new TextDecoder('utf-8', { ignoreBOM: true });

  function decode(ids) {
    if (!Array.isArray(ids) && !ArrayBuffer.isView(ids)) throw new TypeError('decode: ids must be an array of token ids');
    let byteCount = 0;
    for (let i = 0; i < ids.length; i++) {
      checkId(ids[i]);
      byteCount += tokenLength[ids[i]];
    }
    const bytes = new Uint8Array(byteCount);
    let offset = 0;
    for (let i = 0; i < ids.length; i++) {
      const start = tokenStart[ids[i]];
      const end = start + tokenLength[ids[i]];
      for (let j = start; j < end; j++) bytes[offset++] = tokenBytes[j];
    }
    return fullDecoder.decode(bytes);
  }

  // A streaming TextDecoder holds back the bytes of an incomplete UTF-8 character until the token
  // that completes it arrives, so generated text never shows half a character.
  function createDecoder() {
    const streamDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
    return {
      push(id) {
        checkId(id);
        return streamDecoder.decode(tokenBytes.subarray(tokenStart[id], tokenStart[id] + tokenLength[id]), { stream: true });
      },
      flush: () => streamDecoder.decode(),
    };
  }

  return { encode, decode, createDecoder, eosId, vocabSize };
}
