// A seeded mutation fuzzer of the tokenizer files (web/lib/tokenizer.js): vocab.json and merges.txt as the loader reads
// them (UTF-8, JSON.parse, createTokenizer), and a GGUF file's token lists (createTokenizerFromVocabulary). Each
// case starts from a valid tokenizer cut from the bundled model's files (public/models/tiny-shakespeare: the 256
// byte tokens, the first 0 to 400 merges, now and then all 50,000, and <|endoftext|>) and mutates it: ids of the
// wrong type, huge, negative, repeated or missing; tokens listed twice, removed (byte tokens too), added (random
// unicode, prototype names, 100k characters); merge lines repeated, dropped, swapped, malformed, of unknown
// tokens; flipped bytes, cut files, inserted text, a million lines, whole files of the wrong type.
// Invariant: the tokenizer is either refused with an Error whose message is one line starting "createTokenizer: "
// (never a TypeError or RangeError from inside, never a non-Error), or built, and then every sample text
// round-trips (decode(encode(t)) is t, lone surrogates read as U+FFFD, in one call and streamed), every id is in
// the vocab, and when no merge uses a token made by a later merge the ids are those of encoder.py's bpe(). Every
// input is at most a few MB, so each case takes milliseconds.
//   node tests/fuzz/fuzz_tokenizer.mjs [--seconds N | --cases N] [--seed S]   (default: 60 s from seed 1)
//   node tests/fuzz/fuzz_tokenizer.mjs --case SEED                            (one case: its mutations and outcome)
// Prints the cases run; a failure prints its seed and stops with status 1. tests/js/tokenizer_fuzz.test.js runs
// 3,000 cases; tools/dev/fuzz.sh SECONDS fuzz_tokenizer runs it for a time.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createTokenizer, createTokenizerFromVocabulary } from '../../web/lib/tokenizer.js';
import { BYTE_CHARACTERS, GPT2_PIECES } from '../js/encoder_reference.js';

const END_OF_TEXT = '<|endoftext|>';
const MAX_MERGES = 2 ** 20;  // tokenizer.js's bound on merges.txt's lines
const BUNDLED = new URL('../../public/models/tiny-shakespeare/', import.meta.url);
const BOOK = new URL('../fixtures/tinyshakespeare/tinyshakespeare.txt', import.meta.url);

// GPT-2's vocab.json numbers the byte tokens 0-255 and the result of merge i 256 + i: the first k merges and the
// tokens below 256 + k are a tokenizer of their own.
const bundledVocab = JSON.parse(readFileSync(new URL('vocab.json', BUNDLED), 'utf8'));
const tokensById = Object.keys(bundledVocab).sort((a, b) => bundledVocab[a] - bundledVocab[b]);
const bundledMerges = readFileSync(new URL('merges.txt', BUNDLED), 'utf8').split('\n').filter((line) => line !== '' && !line.startsWith('#'));
const book = readFileSync(BOOK, 'utf8').slice(0, 200000);


// mulberry32: a small, fast PRNG whose whole state is the seed.
export function createRandom(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const int = (n) => Math.floor(next() * n);
  return { next, int, pick: (list) => list[int(list.length)], chance: (p) => next() < p };
}

// Code points from every corner: ASCII, controls, Latin-1, GPT-2's remapped bytes, CJK, combining marks, emoji,
// noncharacters, the BOM, astral planes, and (allowLoneSurrogates) halves of surrogate pairs.
function randomText(random, maxLength, allowLoneSurrogates) {
  const ranges = [[0x20, 0x7e], [0, 0x1f], [0x80, 0xff], [0x100, 0x17f], [0x4e00, 0x4fff], [0x300, 0x36f],
    [0x1f600, 0x1f64f], [0xfff0, 0xffff], [0xfeff, 0xfeff], [0x10000, 0x10ffff]];
  if (allowLoneSurrogates) ranges.push([0xd800, 0xdfff]);
  let text = '';
  for (let length = random.int(maxLength + 1); length > 0; length--) {
    const [low, high] = random.pick(ranges);
    const codePoint = low + random.int(high - low + 1);
    text += codePoint >= 0xd800 && codePoint <= 0xdfff ? String.fromCharCode(codePoint) : String.fromCodePoint(codePoint);
  }
  return text;
}

// ---- mutations: each takes (c, random), changes the case c in place and returns its name ----
// c: { tokens: the token strings in id order, lines: the merge lines; for the files: entries (vocab.json's
// [{ token, id (its JSON text) }]), header, eol, mergesSuffix, then vocabText and mergesText; for a GGUF file:
// tokenArray and eos (its eosTokenId) }

const ODD_IDS = ['"0"', '"12"', '1.5', '-1', '-0', '1e2', '16777216', '2147483648', '4294967296', '9007199254740993',
  '1e308', '-1e308', 'null', 'true', '[]', '{}', '[0]', '{"id":0}', `${'['.repeat(5000)}${']'.repeat(5000)}`];
const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype'];
const MALFORMED_LINES = ['ab', ' a b', 'a  b', 'a b c', 'a\tb', 'a b ', ' ', '#version: 0.2', 'a b\r\r', '\u0000 a',
  'Ġ', 'Ġ Ġ Ġ'];

const randomEntry = (c, random) => c.entries[random.int(c.entries.length)];

// On vocab.json's entries.
const vocabMutations = [
  function oddId(c, random) {
    const entry = randomEntry(c, random);
    if (entry) entry.id = random.pick(ODD_IDS);
    return 'an id of the wrong type or range';
  },
  function shiftedId(c, random) {
    const entry = randomEntry(c, random);
    if (entry) entry.id = String(random.int(c.entries.length + 3));
    return 'an id repeated or past the end';
  },
  function swappedIds(c, random) {
    const [a, b] = [randomEntry(c, random), randomEntry(c, random)];
    if (a && b) [a.id, b.id] = [b.id, a.id];
    return 'two ids swapped';
  },
  function tokenTwice(c, random) {
    const entry = randomEntry(c, random);
    if (entry) c.entries.splice(random.int(c.entries.length + 1), 0, { ...entry });
    return 'a token listed twice';
  },
  function tokenRemoved(c, random) {
    c.entries.splice(random.int(random.chance(0.5) ? Math.min(256, c.entries.length) : c.entries.length), 1);
    return 'a token removed';
  },
  function tokenAdded(c, random) {
    const token = random.chance(0.3) ? random.pick(PROTOTYPE_NAMES)
      : random.chance(0.1) ? 'a'.repeat(1 + random.int(100000)) : randomText(random, 8, true);
    c.entries.splice(random.int(c.entries.length + 1), 0, { token, id: String(c.entries.length) });
    return 'a token added';
  },
];

const mergeMutations = [
  function lineTwice(c, random) {
    if (c.lines.length > 0) c.lines.splice(random.int(c.lines.length + 1), 0, random.pick(c.lines));
    return 'a merge repeated';
  },
  function lineRemoved(c, random) {
    c.lines.splice(random.int(c.lines.length), 1);
    return 'a merge removed';
  },
  function linesSwapped(c, random) {
    const [a, b] = [random.int(c.lines.length), random.int(c.lines.length)];
    if (c.lines.length > 1) [c.lines[a], c.lines[b]] = [c.lines[b], c.lines[a]];
    return 'two merges swapped';
  },
  function lineMalformed(c, random) {
    c.lines.splice(random.int(c.lines.length + 1), 0, random.pick(MALFORMED_LINES));
    return 'a malformed merge line';
  },
  function lineOfUnknownTokens(c, random) {
    const side = () => (random.chance(0.5) ? random.pick(BYTE_CHARACTERS) : randomText(random, 4, true) || 'x');
    c.lines.splice(random.int(c.lines.length + 1), 0, `${side()} ${side()}`);
    return 'a merge of unknown tokens';
  },
];

const fileMutations = [
  ...vocabMutations,
  ...mergeMutations,
  function noHeader(c) {
    c.header = '';
    return 'no #version line';
  },
  function crlf(c) {
    c.eol = '\r\n';
    return 'CRLF line ends';
  },
  function millionLines(c, random) {
    c.mergesSuffix = '\n'.repeat(MAX_MERGES - c.lines.length - 2 + random.int(5));
    return 'about a million merge lines';
  },
];

// On the serialized files (c.vocabText, c.mergesText).
const textMutations = [
  function bytesFlipped(c, random) {
    const key = random.pick(['vocabText', 'mergesText']);
    const bytes = new TextEncoder().encode(c[key]);
    for (let n = 1 + random.int(8); n > 0 && bytes.length > 0; n--) bytes[random.int(bytes.length)] ^= 1 << random.int(8);
    c[key] = bytes;
    return `bytes of ${key} flipped`;
  },
  function fileCut(c, random) {
    const key = random.pick(['vocabText', 'mergesText']);
    c[key] = c[key].slice(0, random.int(c[key].length + 1));
    return `${key} cut short`;
  },
  function textInserted(c, random) {
    const key = random.pick(['vocabText', 'mergesText']);
    const at = random.int(c[key].length + 1);
    c[key] = c[key].slice(0, at) + randomText(random, 6, false) + c[key].slice(at);
    return `text inserted into ${key}`;
  },
  function rangeRepeated(c, random) {
    const key = random.pick(['vocabText', 'mergesText']);
    const [start, length] = [random.int(c[key].length + 1), random.int(200)];
    c[key] = c[key].slice(0, start + length) + c[key].slice(start);
    return `a range of ${key} repeated`;
  },
  function vocabOfAnotherType(c, random) {
    c.vocabText = random.pick(['[]', '"vocab"', '42', 'null', 'true', '[{"a":0}]', '{}', '{"a":{"b":0}}']);
    return 'vocab.json of another type';
  },
  function mergesOfAnotherType(c, random) {
    c.mergesValue = random.pick([[], ['Ġ t'], 42, null, {}]);
    return 'merges of another type';
  },
];

// A GGUF file's lists (c.tokenArray in id order, c.lines) and its end-of-text id (c.eos).
const vocabularyMutations = [
  ...mergeMutations,
  function tokenRemovedFromList(c, random) {
    c.tokenArray.splice(random.chance(0.5) ? random.int(256) : random.int(c.tokenArray.length), 1);
    return 'a token removed';
  },
  function tokenListedTwice(c, random) {
    c.tokenArray.splice(random.int(c.tokenArray.length + 1), 0, random.pick(c.tokenArray));
    return 'a token listed twice';
  },
  function tokensSwapped(c, random) {
    const [a, b] = [random.int(c.tokenArray.length), random.int(c.tokenArray.length)];
    [c.tokenArray[a], c.tokenArray[b]] = [c.tokenArray[b], c.tokenArray[a]];
    return 'two tokens swapped';
  },
  function tokenAddedToList(c, random) {
    const token = random.chance(0.3) ? random.pick(PROTOTYPE_NAMES)
      : random.chance(0.1) ? 'a'.repeat(1 + random.int(100000)) : randomText(random, 8, true);
    c.tokenArray.splice(random.int(c.tokenArray.length + 1), 0, token);
    return 'a token added';
  },
  function tokenOfAnotherType(c, random) {
    const index = random.int(c.tokenArray.length);
    if (random.chance(0.2)) delete c.tokenArray[index];
    else c.tokenArray[index] = random.pick([0, null, undefined, {}, ['a'], true]);
    return 'a token that is not a string';
  },
  function mergeOfAnotherType(c, random) {
    c.lines[random.int(c.lines.length + 1)] = random.pick([0, null, undefined, {}, ['a b']]);
    return 'a merge that is not a string';
  },
  function oddEndOfText(c, random) {
    c.eos = random.pick([-1, c.tokenArray.length, c.tokenArray.length + 1, 1.5, '0', null, undefined, Number.NaN, 2 ** 53]);
    return 'an odd end-of-text id';
  },
  function listsOfAnotherType(c, random) {
    c[random.pick(['tokenArray', 'lines'])] = random.pick(['Ġ t', null, 42, { 0: 'a' }]);
    return 'token or merge lists of another type';
  },
];

// ---- one case ----

function baseCase(random) {
  const mergeCount = random.chance(0.05) ? 0 : random.chance(0.002) ? bundledMerges.length : 1 + random.int(400);
  const viaFiles = random.chance(0.7);
  return { viaFiles, tokens: [...tokensById.slice(0, 256 + mergeCount), END_OF_TEXT], lines: bundledMerges.slice(0, mergeCount) };
}

// The files as the loader reads them ({ vocab, merges }), or { loaderError } where it refuses them itself (not UTF-8,
// not JSON) before the tokenizer sees them.
function readFiles(c) {
  const decode = (content) => (typeof content === 'string' ? content : new TextDecoder('utf-8', { fatal: true }).decode(content));
  try {
    return { vocab: JSON.parse(decode(c.vocabText)), merges: 'mergesValue' in c ? c.mergesValue : decode(c.mergesText) };
  } catch (error) {
    return { loaderError: error };
  }
}

function mutateFiles(c, random) {
  Object.assign(c, { entries: c.tokens.map((token, id) => ({ token, id: String(id) })), header: '#version: 0.2\n', eol: '\n', mergesSuffix: '\n' });
  const mutations = [];
  for (let n = 1 + random.int(3); n > 0; n--) {
    const mutation = random.pick(fileMutations);
    if (mutation.name !== 'millionLines' || random.chance(0.05)) mutations.push(mutation(c, random));
  }
  c.vocabText = `{${c.entries.map(({ token, id }) => `${JSON.stringify(token)}:${id}`).join(',')}}`;
  c.mergesText = c.header + c.lines.join(c.eol) + c.mergesSuffix;
  if (random.chance(0.4)) mutations.push(random.pick(textMutations)(c, random));
  return mutations;
}

function mutateVocabulary(c, random) {
  c.tokenArray = [...c.tokens];
  c.eos = c.tokenArray.length - 1;
  const mutations = [];
  for (let n = 1 + random.int(3); n > 0; n--) {
    const mutation = random.pick(vocabularyMutations);
    if (Array.isArray(c.tokenArray) && Array.isArray(c.lines)) mutations.push(mutation(c, random));  // else no lists left
  }
  return mutations;
}

// -> { outcome: 'built' | 'refused' | 'refused by the loader', mutations, message (the refusal's), problem (a failure) }
export function fuzzCase(seed) {
  const random = createRandom(seed);
  const c = baseCase(random);
  const mutations = c.viaFiles ? mutateFiles(c, random) : mutateVocabulary(c, random);
  let build;
  let vocabulary;
  if (c.viaFiles) {
    const files = readFiles(c);
    if (files.loaderError) return { outcome: 'refused by the loader', mutations, message: files.loaderError.message };
    build = () => createTokenizer(files.vocab, files.merges);
    vocabulary = { idOf: (token) => files.vocab[token], mergeLines: () => files.merges.split('\n') };
  } else {
    const arguments_ = { tokens: c.tokenArray, merges: c.lines, eosTokenId: c.eos };
    build = () => createTokenizerFromVocabulary(arguments_);
    vocabulary = { idOf: (token) => c.tokenArray.indexOf(token), mergeLines: () => c.lines };
  }
  let tokenizer;
  try {
    tokenizer = build();
  } catch (error) {
    return { outcome: 'refused', mutations, message: error?.message, problem: refusalProblem(error) };
  }
  return { outcome: 'built', mutations, problem: tokenizerProblem(tokenizer, vocabulary, random) };
}

// What is wrong with a refusal (null: nothing).
export function refusalProblem(error) {
  if (!(error instanceof Error)) return `threw a non-Error: ${String(error)}`;
  if (error instanceof TypeError || error instanceof RangeError) return `threw ${error.name} from inside: ${error.message}`;
  if (!error.message.startsWith('createTokenizer: ') || error.message.includes('\n') || error.message.length > 500) {
    return `an unclear message: ${JSON.stringify(error.message.slice(0, 500))}`;
  }
  return null;
}

function sampleTexts(random) {
  const start = random.int(book.length - 400);
  const randomBytes = new Uint8Array(Array.from({ length: 20 }, () => random.int(256)));
  const bytesAsText = new TextDecoder().decode(randomBytes);  // U+FFFD where they are not UTF-8
  return [book.slice(start, start + 400), randomText(random, 40, true), bytesAsText, ' '.repeat(random.int(50)), ''];
}

// A sample text in a failure's message: quoted, cut short.
function show(text) {
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
}

// What is wrong with a tokenizer built (null: nothing). vocabulary: { idOf(token), mergeLines() } of its files.
export function tokenizerProblem(tokenizer, vocabulary, random) {
  for (const text of sampleTexts(random)) {
    const expected = text.toWellFormed();
    const ids = tokenizer.encode(text);
    const badId = ids.find((id) => !(Number.isInteger(id) && id >= 0 && id < tokenizer.vocabSize));
    if (badId !== undefined) return `encode(${show(text)}) gave id ${badId}, outside the vocab of ${tokenizer.vocabSize}`;
    const decoded = tokenizer.decode(ids);
    if (decoded !== expected) return `decode(encode(${show(text)})) is ${show(decoded)}`;
    const decoder = tokenizer.createDecoder();
    const streamed = ids.map((id) => decoder.push(id)).join('') + decoder.flush();
    if (streamed !== expected) return `the streamed decoding of ${show(text)} is ${show(streamed)}`;
    const reference = referenceIds(text, vocabulary);
    const at = reference ? reference.findIndex((id, i) => ids[i] !== id) : -1;
    if (reference && (at !== -1 || ids.length !== reference.length)) {
      return `encode(${show(text)}) differs from encoder.py's bpe() at token ${at === -1 ? reference.length : at}: ` +
        `${ids.slice(at, at + 5)} instead of ${reference.slice(at, at + 5)}`;
    }
  }
  if (!(Number.isInteger(tokenizer.eosId) && tokenizer.eosId >= 0 && tokenizer.eosId < tokenizer.vocabSize)) {
    return `end-of-text id ${tokenizer.eosId} outside the vocab`;
  }
  return null;
}

// The merges in effect, as merges.txt's grammar reads them (a first #version line, empty lines skipped, CR cut).
function mergePairs(lines) {
  const pairs = [];
  lines.forEach((raw, index) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line !== '' && !(index === 0 && line.startsWith('#version'))) pairs.push(line.split(' '));
  });
  return pairs;
}

// encoder.py's ids for text (merge every occurrence of the lowest-ranked pair, repeat), or null when some merge
// uses a token that a later merge makes: then merging in rank order is not encoder.py's order, and tokenizer.js
// (merging the lowest rank, leftmost first) may differ from it while still being a valid tokenization.
function referenceIds(text, { idOf, mergeLines }) {
  const pairs = mergePairs(mergeLines());
  const lastMadeAt = new Map();
  pairs.forEach(([left, right], rank) => lastMadeAt.set(left + right, rank));
  const ordered = pairs.every((pair, rank) => pair.every((token) => !(lastMadeAt.get(token) >= rank)));
  if (!ordered) return null;
  const ranks = new Map(pairs.map(([left, right], rank) => [`${left} ${right}`, rank]));
  const ids = [];
  for (const [piece] of text.matchAll(GPT2_PIECES)) {
    let word = Array.from(new TextEncoder().encode(piece), (byte) => BYTE_CHARACTERS[byte]);
    for (;;) {
      let best = null;
      for (let i = 0; i + 1 < word.length; i++) {
        const rank = ranks.get(`${word[i]} ${word[i + 1]}`);
        if (rank !== undefined && (best === null || rank < best)) best = rank;
      }
      if (best === null) break;
      const [first, second] = pairs[best];
      const merged = [];
      for (let i = 0; i < word.length; i++) {
          if (word[i] === first && word[i + 1] === second) {
          merged.push(first + second);
          i++;
        } else {
          merged.push(word[i]);
        }
      }
      word = merged;
    }
    ids.push(...word.map(idOf));
  }
  return ids;
}

// Runs cases from firstSeed on, `cases` of them or until `seconds` have passed. -> { cases, outcomes, failure }
// where failure is the first { seed, mutations, problem }, which stops the run.
export function runFuzz({ firstSeed = 1, cases = Infinity, seconds = Infinity }) {
  const deadline = performance.now() + seconds * 1000;
  const outcomes = { built: 0, refused: 0, 'refused by the loader': 0 };
  let run = 0;
  for (let seed = firstSeed; run < cases && performance.now() < deadline; seed++) {
    const { outcome, mutations, problem } = fuzzCase(seed);
    run++;
    outcomes[outcome]++;
    if (problem) return { cases: run, outcomes, failure: { seed, mutations, problem } };
  }
  return { cases: run, outcomes, failure: null };
}

function main(argv) {
  const option = (name) => {
    const index = argv.indexOf(name);
    return index === -1 ? undefined : Number(argv[index + 1]);
  };
  const oneCase = option('--case');
  if (oneCase !== undefined) {
    const result = fuzzCase(oneCase);
    console.log(`case ${oneCase}: ${result.mutations.join('; ')}: ${result.outcome}${result.message ? `: ${result.message}` : ''}`);
    if (result.problem) console.log(`FAILED: ${result.problem}`);
    return result.problem ? 1 : 0;
  }
  const cases = option('--cases');
  const seconds = option('--seconds') ?? (cases === undefined ? 60 : Infinity);
  const started = performance.now();
  const { cases: run, outcomes, failure } = runFuzz({ firstSeed: option('--seed') ?? 1, cases, seconds });
  const counts = Object.entries(outcomes).map(([outcome, count]) => `${count} ${outcome}`).join(', ');
  console.log(`fuzz_tokenizer: ${run} cases in ${((performance.now() - started) / 1000).toFixed(1)} s (${counts})`);
  if (!failure) return 0;
  console.log(`FAILED at seed ${failure.seed} (${failure.mutations.join('; ')}): ${failure.problem}\n` +
    `rerun it: node tests/fuzz/fuzz_tokenizer.mjs --case ${failure.seed}`);
  return 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = main(process.argv.slice(2));
