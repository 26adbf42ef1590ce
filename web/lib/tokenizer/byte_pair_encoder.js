// encode(text) of the tokenizer: GPT-2's pre-tokenizer regex cuts the text into pieces; each piece becomes its
// UTF-8 bytes, one symbol (byte token id) per byte; then the adjacent symbol pair with the lowest merge rank is
// merged, again and again (BPE). Pieces seen before come from a cache.

const PRETOKEN_PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

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

// byteTokenIds: Int32Array(256), the token id of each byte; merges: token_files.js parseMerges's tables.
// -> encode(text) -> ids
export function createEncoder(byteTokenIds, merges) {
  const encodePiece = createPieceEncoder(byteTokenIds, merges);
  // piece text -> its id (a number, the common case) or ids (an array); insertion-ordered for eviction.
  const pieceCache = new Map();

  return function encode(text) {
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
      encodePiece(piece, ids);
      if (piece.length <= MAX_CACHED_PIECE_LENGTH) {
        if (pieceCache.size >= PIECE_CACHE_CAPACITY) pieceCache.delete(pieceCache.keys().next().value);
        pieceCache.set(detachedCopy(piece), ids.length - start === 1 ? ids[start] : ids.slice(start));
      }
    }
    return ids;
  };
}

// Where a text can be cut so that encoding its two parts gives the ids of the whole: the first index >= from
// (and >= 1) of a whitespace character that follows a non-whitespace one, or text.length if there is none. The
// pre-tokenizer's pieces always end there (no piece runs from a non-space into a whitespace character: a space
// only ever starts one), its matches depend on the text ahead only (\s+(?!\S) looks forward), and the pieces
// before the cut match the same without the text after it (the last one ends in a non-space). A text without
// such a place (one long word, CJK without spaces) is one part.
const CUT_PATTERN = /\S\s/gu;

export function pretokenCut(text, from) {
  CUT_PATTERN.lastIndex = Math.max(0, from - 1);
  const match = CUT_PATTERN.exec(text);
  return match ? match.index + match[0].length - 1 : text.length;
}

// A regex match is a slice that keeps the whole input text alive (V8 sliced strings); a cache key made
// from it would pin every encoded text. Slicing a fresh concatenation copies the characters instead.
function detachedCopy(piece) {
  return (' ' + piece).slice(1);
}

// -> encodePiece(piece, output), which appends the piece's ids to output.
function createPieceEncoder(byteTokenIds, { pairTable, mergeLeft, mergeRight, mergeResult }) {
  // Scratch space for one piece, reused across pieces and grown on demand. A symbol is a run of bytes;
  // symbols form a doubly linked list over byte positions, a merged symbol lives at its leftmost position.
  let symbolIds, nextPosition, previousPosition;
  const heap = new MergeHeap();
  allocateScratch(INITIAL_SCRATCH_CAPACITY);

  function allocateScratch(capacity) {
    symbolIds = new Int32Array(capacity);
    nextPosition = new Int32Array(capacity);
    previousPosition = new Int32Array(capacity);
    heap.allocate(capacity);
  }

  function pushPairAt(position, rightPosition) {
    const rank = pairTable.rank(symbolIds[position], symbolIds[rightPosition]);
    if (rank !== -1) heap.push(rank * POSITION_SPAN + position);
  }

  // BPE over the loaded symbols in O(n log n): a min-heap of candidate pairs with lazy deletion
  // instead of rescanning all pairs after every merge. Appends the resulting ids to output.
  function bytePairEncode(length, output) {
    heap.size = 0;
    for (let position = 0; position < length; position++) {
      nextPosition[position] = position + 1;
      previousPosition[position] = position - 1;
      if (position + 1 < length) pushPairAt(position, position + 1);
    }
    while (heap.size > 0) {
      const entry = heap.pop();
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

  return function encodePiece(piece, output) {
    const byteCount = piece.length * 3; // a UTF-16 unit never takes more than 3 UTF-8 bytes
    if (byteCount > symbolIds.length) allocateScratch(Math.max(byteCount, symbolIds.length * 2));
    bytePairEncode(writeByteSymbols(piece, symbolIds, byteTokenIds), output);
    if (symbolIds.length > MAX_RETAINED_SCRATCH_CAPACITY) allocateScratch(INITIAL_SCRATCH_CAPACITY);
  };
}

// Writes the piece's UTF-8 bytes into symbolIds as byte-token symbols; returns the byte count.
function writeByteSymbols(piece, symbolIds, byteTokenIds) {
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

// The candidate pairs of a piece, lowest entry first: a binary min-heap over a Float64Array.
class MergeHeap {
  entries = null;
  size = 0;

  allocate(capacity) {
    this.entries = new Float64Array(capacity);
  }

  push(entry) {
    let heap = this.entries;
    // A piece of n bytes has at most n - 1 pairs alive, but stale entries stay until popped.
    if (this.size === heap.length) {
      const grown = new Float64Array(heap.length * 2);
      grown.set(heap);
      heap = this.entries = grown;
    }
    let index = this.size++;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (heap[parent] <= entry) break;
      heap[index] = heap[parent];
      index = parent;
    }
    heap[index] = entry;
  }

  pop() {
    const heap = this.entries;
    const top = heap[0];
    const size = --this.size;
    const last = heap[size];
    let index = 0;
    for (;;) {
      let child = 2 * index + 1;
      if (child >= size) break;
      if (child + 1 < size && heap[child + 1] < heap[child]) child++;
      if (heap[child] >= last) break;
      heap[index] = heap[child];
      index = child;
    }
    heap[index] = last;
    return top;
  }
}
