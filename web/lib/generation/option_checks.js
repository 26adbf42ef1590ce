// generate()'s and score()'s options checked against their table (option_table.js): each value on its own, then
// the rules between options, each written once (OPTION_RULES), then the limits only a loaded model knows. Given
// as text (a flag, a data-* attribute, a page field), a value is read by the table's parser and its complaint
// names it as its reader does, so every surface takes the same values and refuses the same ones, in the same words.
// Plain ES module.
import {
  GENERATE_OPTIONS, INSPECT_GENERATION_OPTIONS, INSPECT_OPTIONS, MAX_FLOAT, MAX_INT, MAX_SCORE_ALTERNATIVES, SCORE_OPTIONS,
  SPECULATIVE_OPTIONS, expectedText,
} from './option_table.js';

// Whether value is one the table's entry takes (a 'custom' entry's own check is below).
function fitsEntry({ kind, min, max, minExclusive, values }, value) {
  if (kind === 'integer') return Number.isSafeInteger(value) && value >= min && value <= max;
  if (kind === 'number') return typeof value === 'number' && (minExclusive ? value > min : value >= min) && value <= max;
  if (kind === 'boolean') return typeof value === 'boolean';
  if (kind === 'choice') return values.includes(value);
  return true;
}

export function describeValue(value) {
  return typeof value === 'string' || (typeof value === 'object' && value !== null) ? JSON.stringify(value) : String(value);
}

// Checks and completes generate() options; throws a TypeError / RangeError naming the offending option.
export function normalizeGenerateOptions(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('generate: options must be an object');
  for (const name of Object.keys(options)) {
    if (!Object.hasOwn(GENERATE_OPTIONS, name)) throw new TypeError(`generate: unknown option "${name}"`);
  }
  const o = Object.fromEntries(Object.entries(GENERATE_OPTIONS).map(([name, entry]) => [name, entry.default]));
  for (const [name, value] of Object.entries(options)) if (value !== undefined) o[name] = value;
  const fail = (name, expected) => {
    throw new RangeError(`generate: option ${name} must be ${expected}, got ${describeValue(o[name])}`);
  };
  if (typeof o.stop === 'string') o.stop = [o.stop];
  for (const [name, entry] of Object.entries(GENERATE_OPTIONS)) {
    if (name === 'seed' && o.seed === undefined) continue;
    if (!fitsEntry(entry, o[name])) fail(name, expectedText(entry));
  }
  checkLogitBias(o.logitBias);
  checkBadWords(o.badWords);
  if (o.seed === undefined) o.seed = Math.floor(Math.random() * 2 ** 32);
  if (!Array.isArray(o.stop) || !o.stop.every((s) => typeof s === 'string' && s.length > 0)) {
    fail('stop', 'a non-empty string or an array of them');
  }
  if (o.signal !== undefined && typeof o.signal?.aborted !== 'boolean') fail('signal', 'an AbortSignal');
  if (o.speculative !== undefined) o.speculative = normalizeSpeculative(o.speculative);
  if (o.inspect !== undefined && o.inspect !== false) {
    o.inspect = checkInspectOptions(o.inspect === true ? {} : o.inspect, INSPECT_GENERATION_OPTIONS, 'generate', 'inspect.');
  } else {
    o.inspect = undefined;
  }
  o.logitBias = { ...o.logitBias };
  o.badWords = [...o.badWords];
  for (const rule of Object.values(OPTION_RULES)) if (rule.broken(o)) throw new RangeError(rule.message(o));
  return o;
}

// -> score()'s { topAlternatives, kvCache, signal } checked; throws a TypeError / RangeError naming the option.
export function normalizeScoreOptions(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('score: options must be an object');
  for (const name of Object.keys(options)) {
    if (!Object.hasOwn(SCORE_OPTIONS, name)) throw new TypeError(`score: unknown option "${name}"`);
  }
  const checked = {};
  for (const [name, entry] of Object.entries(SCORE_OPTIONS)) {
    const value = options[name] === undefined ? entry.default : options[name];
    if (!fitsEntry(entry, value)) throw new RangeError(`score: option ${name} must be ${expectedText(entry)}, got ${describeValue(value)}`);
    checked[name] = value;
  }
  if (checked.signal !== undefined && typeof checked.signal?.aborted !== 'boolean') {
    throw new RangeError(`score: option signal must be an AbortSignal, got ${describeValue(checked.signal)}`);
  }
  return checked;
}

// -> inspect()'s options checked and completed: { positions, layers, heads (each an array, or undefined for the
// default), topK, logitLens, kvCache }; throws a TypeError / RangeError naming the option.
export function normalizeInspectOptions(options = {}) {
  return checkInspectOptions(options, INSPECT_OPTIONS, 'inspect', '');
}

// options against table (INSPECT_OPTIONS, or INSPECT_GENERATION_OPTIONS as generate()'s inspect: prefix 'inspect.')
function checkInspectOptions(options, table, caller, prefix) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${caller}: ${prefix ? `option ${prefix.slice(0, -1)} must be true or an object` : 'options must be an object'}`);
  }
  for (const name of Object.keys(options)) {
    if (!Object.hasOwn(table, name)) throw new TypeError(`${caller}: unknown option "${prefix}${name}"`);
  }
  const checked = {};
  for (const [name, entry] of Object.entries(table)) {
    const value = options[name] === undefined ? entry.default : options[name];
    const fits = entry.integers ? value === undefined || isAscendingIntegers(value) : fitsEntry(entry, value);
    if (!fits) {
      const expected = entry.integers ? 'an array of integers >= 0, ascending without repeats' : expectedText(entry);
      throw new RangeError(`${caller}: option ${prefix}${name} must be ${expected}, got ${describeValue(value)}`);
    }
    checked[name] = Array.isArray(value) ? [...value] : value;
  }
  return checked;
}

const isAscendingIntegers = (value) => Array.isArray(value)
  && value.every((v, i) => Number.isSafeInteger(v) && v >= 0 && (i === 0 || v > value[i - 1]));

// The engine's request (EngineSession.inspect) for checked options (normalizeInspectOptions, or generate()'s
// inspect) on a model of config whose input has nTokens tokens (null: generate()'s new token, the last fed): each
// list filled or checked against the model. caller, prefix: as the options' check names them.
export function inspectionRequest(checked, { n_layer: nLayer, n_head: nHead }, nTokens, caller = 'inspect', prefix = '') {
  const all = (n) => Array.from({ length: n }, (_, i) => i);
  const within = (name, list, limit, what) => {
    const outside = list.find((v) => v >= limit);
    if (outside !== undefined) throw new RangeError(`${caller}: option ${prefix}${name} has ${outside}, outside ${what} [0, ${limit})`);
    return list;
  };
  return {
    positions: nTokens === null ? [] : within('positions', checked.positions ?? [nTokens - 1], nTokens, "the input's positions"),
    layers: within('layers', checked.layers ?? all(nLayer), nLayer, "the model's layers"),
    heads: within('heads', checked.heads ?? all(nHead), nHead, "the model's heads"),
    topK: checked.topK,
    logitLens: checked.logitLens,
  };
}

// What a run of several sequences is called in a message, or null for a run of one.
function severalSequences(o) {
  if (o.numBeams > 1) return 'numBeams > 1';
  return o.numReturnSequences > 1 ? 'numReturnSequences > 1' : null;
}

// The rules between options, each written once, checked in this order: broken(options) -> whether the options
// break it (options may be partial: a missing one is as if off); message(options) -> generate()'s complaint. The
// page asks the same of its fields (breaksRule) and points at one in its own words.
export const OPTION_RULES = Object.freeze({
  returnAtMostBeams: {
    broken: (o) => o.numBeams > 1 && o.numReturnSequences > o.numBeams,
    message: (o) => `generate: option numReturnSequences must be an integer in [1, numBeams = ${o.numBeams}], got ${describeValue(o.numReturnSequences)}`,
  },
  sequencesNeedSampling: {
    broken: (o) => !(o.numBeams > 1) && o.numReturnSequences > 1 && o.temperature === 0,
    message: () => 'generate: numReturnSequences > 1 needs sampling (temperature > 0) or numBeams: greedy gives one sequence n times',
  },
  // beams and several sequences decode in batched passes that verify no drafts
  sequencesWithoutSpeculation: {
    broken: (o) => severalSequences(o) !== null && Boolean(o.speculative),
    message: (o) => `generate: ${severalSequences(o)} cannot be combined with speculative`,
  },
  // an inspection looks at the one token each step feeds
  inspectOneTokenAtATime: {
    broken: (o) => Boolean(o.inspect) && (severalSequences(o) !== null || Boolean(o.speculative)),
    message: (o) => `generate: inspect looks at one new token per step: it cannot be combined with ${severalSequences(o) ?? 'speculative'}`,
  },
  sequencesNeedCache: {
    broken: (o) => severalSequences(o) !== null && o.useKVCache === false,
    message: (o) => `generate: ${severalSequences(o)} needs the KV cache (useKVCache: true): the sequences fork it`,
  },
});

// Whether options (given or partial) break the rule of that name (OPTION_RULES).
export function breaksRule(name, options) {
  return OPTION_RULES[name].broken(options);
}

// A token id as an option names it: an exact integer the engine's int32 holds (the model's vocabulary is
// checkModelOptions').
const isTokenId = (value) => Number.isSafeInteger(value) && value >= 0 && value <= MAX_INT;

function checkLogitBias(logitBias) {
  if (logitBias === null || typeof logitBias !== 'object' || Array.isArray(logitBias)) {
    throw new RangeError(`generate: option logitBias must be an object { tokenId: bias }, got ${describeValue(logitBias)}`);
  }
  for (const [token, bias] of Object.entries(logitBias)) {
    if (!/^\d+$/.test(token) || !isTokenId(Number(token))) throw new RangeError(`generate: option logitBias has a key that is not a token id: ${JSON.stringify(token)}`);
    if (typeof bias !== 'number' || !((bias >= -MAX_FLOAT && bias <= MAX_FLOAT) || bias === -Infinity)) {
      throw new RangeError(`generate: option logitBias[${token}] must be a number in [${-MAX_FLOAT}, ${MAX_FLOAT}] or -Infinity (a ban), got ${describeValue(bias)}`);
    }
  }
}

function checkBadWords(badWords) {
  const isWord = (word) => (typeof word === 'string' && word.length > 0) || (Array.isArray(word) && word.length > 0 && word.every(isTokenId));
  if (!Array.isArray(badWords)) throw new RangeError(`generate: option badWords must be an array of texts or token id arrays, got ${describeValue(badWords)}`);
  const bad = badWords.findIndex((word) => !isWord(word));
  if (bad >= 0) throw new RangeError(`generate: option badWords[${bad}] must be a non-empty text or a non-empty array of token ids, got ${describeValue(badWords[bad])}`);
}

// speculative: { draft, maxDraftTokens } (SPECULATIVE_OPTIONS) -> with its defaults
function normalizeSpeculative(speculative) {
  if (speculative === null || typeof speculative !== 'object') {
    throw new RangeError(`generate: option speculative must be an object { draft, maxDraftTokens }, got ${describeValue(speculative)}`);
  }
  for (const name of Object.keys(speculative)) {
    if (!Object.hasOwn(SPECULATIVE_OPTIONS, name)) throw new TypeError(`generate: unknown option "speculative.${name}"`);
  }
  const { draft: draftEntry, maxDraftTokens: lengthEntry } = SPECULATIVE_OPTIONS;
  const { draft = draftEntry.default, maxDraftTokens = lengthEntry.default } = speculative;
  if (!draftEntry.values.includes(draft) && typeof draft?.generate !== 'function') {
    throw new RangeError(`generate: option speculative.draft must be ${draftEntry.values.map((s) => JSON.stringify(s)).join(' or ')} or a model, got ${describeValue(draft)}`);
  }
  if (!fitsEntry(lengthEntry, maxDraftTokens)) {
    throw new RangeError(`generate: option speculative.maxDraftTokens must be ${expectedText(lengthEntry)}, got ${describeValue(maxDraftTokens)}`);
  }
  return { draft, maxDraftTokens };
}

// Whether beams would generate more than a context (nCtx): the beams' token buffers hold one.
export function beamsPastContext({ numBeams, maxNewTokens }, nCtx) {
  return numBeams > 1 && maxNewTokens > nCtx;
}

// The limits only a loaded model knows (normalizeGenerateOptions cannot): the token ids of the options and of a
// prompt given as ids within its vocabulary, topAlternatives at most its vocabulary, and with beams maxNewTokens
// at most its context, inspect's layers and heads the model's. config: the model's { n_ctx, n_vocab, n_layer, n_head }.
export function checkModelOptions(options, prompt, { n_ctx: nCtx, n_vocab: nVocab, n_layer: nLayer, n_head: nHead }) {
  const { logitBias, badWords, topAlternatives, numBeams, maxNewTokens } = options;
  if (nVocab !== undefined) {
    checkPromptIds(prompt, nVocab);
    for (const token of Object.keys(logitBias)) {
      if (Number(token) >= nVocab) throw new RangeError(`generate: option logitBias has token ${token}, outside the model's vocabulary [0, ${nVocab})`);
    }
    badWords.forEach((word, i) => {
      const outside = Array.isArray(word) ? word.find((id) => id >= nVocab) : undefined;
      if (outside !== undefined) throw new RangeError(`generate: option badWords[${i}] has token ${outside}, outside the model's vocabulary [0, ${nVocab})`);
    });
    checkTopAlternatives('generate', topAlternatives, nVocab);
  }
  if (options.inspect && nLayer !== undefined) inspectionRequest(options.inspect, { n_layer: nLayer, n_head: nHead }, null, 'generate', 'inspect.');
  if (nCtx !== undefined && beamsPastContext(options, nCtx)) {
    throw new RangeError(`generate: option maxNewTokens must be at most the model's context (${nCtx} tokens) with numBeams > 1, got ${maxNewTokens}`);
  }
  // beam search scores each returned hypothesis with the prompt's newest n_ctx - 1 tokens before it (beams.js)
  const scored = nCtx - 1 + maxNewTokens;
  if (numBeams > 1 && nCtx !== undefined && scored * topAlternatives > MAX_SCORE_ALTERNATIVES) {
    throw new RangeError(`generate: option topAlternatives ${topAlternatives} with numBeams > 1 asks for up to ${scored * topAlternatives} alternatives (${scored} scored tokens: the prompt's newest ${nCtx - 1} and maxNewTokens), more than ${MAX_SCORE_ALTERNATIVES} (the most one score returns)`);
  }
}

// topAlternatives against a model's vocabulary (generate()'s and score()'s; caller: 'generate' or 'score').
export function checkTopAlternatives(caller, topAlternatives, nVocab) {
  if (topAlternatives > nVocab) {
    throw new RangeError(`${caller}: option topAlternatives must be at most the model's vocabulary (${nVocab} tokens), got ${topAlternatives}`);
  }
}

// The alternatives one score of nScored tokens returns, topAlternatives each, against MAX_SCORE_ALTERNATIVES
// (caller: 'generate' for beam search's scores, or 'score').
export function checkScoreAlternatives(caller, nScored, topAlternatives) {
  if (nScored * topAlternatives > MAX_SCORE_ALTERNATIVES) {
    throw new RangeError(`${caller}: option topAlternatives ${topAlternatives} for ${nScored} scored tokens asks for ${nScored * topAlternatives} alternatives, more than ${MAX_SCORE_ALTERNATIVES} (the most one score returns)`);
  }
}

// A prompt given as token ids: each an exact integer in [0, n_vocab), never one the engine's int32 would wrap
// into another token.
function checkPromptIds(prompt, nVocab) {
  if (typeof prompt === 'string') return;
  const bad = Array.prototype.findIndex.call(prompt, (id) => !(Number.isSafeInteger(id) && id >= 0 && id < nVocab));
  if (bad >= 0) throw new RangeError(`generate: prompt has token ${describeValue(prompt[bad])} at index ${bad}, outside the model's vocabulary [0, ${nVocab})`);
}

// The value of an option from its text form (a flag's, a data-* attribute's, a field's), by the table's parser:
// decimal numbers only ("0x10", " 5 ", "Infinity" and "" are no numbers, and the check refuses them, naming
// what it expected). label: the option as its reader names it, for the parsers that throw their own errors.
export function parseOptionText(name, text, label) {
  return GENERATE_OPTIONS[name].parse(text, label);
}

// A check's complaint about a value given as text, told of the option as its reader names it (the flag as typed,
// the data-* attribute) and of the text: `--top-k: expected an integer in [0, 2147483647] (0 = off), got "0x10"`.
// expected: what the text may be, where the check's own words fit the reader less well.
export function textOptionError(label, typed, error, expected) {
  const what = expected ?? /must be (.*), got /.exec(error.message)?.[1];
  return new RangeError(`${label}: ${what ? `expected ${what}, got ${JSON.stringify(typed)}` : error.message.replace(/^generate: /, '')}`);
}

// One generate() option given as text (a data-* attribute, a page field) -> its value, parsed and checked on its
// own; throws a RangeError that names it as its reader does (label) and quotes the text.
export function readOptionText(name, text, label) {
  const value = parseOptionText(name, text, label);
  try {
    normalizeGenerateOptions({ [name]: value });
  } catch (error) {
    throw textOptionError(label, text, error, GENERATE_OPTIONS[name].textExpected);
  }
  return value;
}

// The complaint of normalizeGenerateOptions about options that were given as text, told of the option as its
// reader names it: texts: option name -> { label, text }. A complaint about no one option is as it is.
export function relabelOptionError(error, texts) {
  const [, name] = /^generate: option (\w+) must be /.exec(error.message) ?? [];
  return name && texts[name] ? textOptionError(texts[name].label, texts[name].text, error) : error;
}
