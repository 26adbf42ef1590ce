// generate()'s and score()'s options, defined once: each one's kind, range, default and the parser of its text form
// (a command-line flag, a widget data-* attribute, a page field). normalizeGenerateOptions and
// normalizeScoreOptions check against it; the command line (web/cli/cli_args.js), the widget
// (web/widget/widget_options.js) and the page read their values through it, so every surface takes the same
// values and refuses the same ones, in the same words. Plain ES module.
import { parseBadWords, parseEarlyStopping, parseLogitBias, parseNumber } from './option_text.js';

// Integers that cross into the engine are int32 there: larger ones are refused, never wrapped (engine/gpt2.h
// kMaxInt, limits().maxInt).
export const MAX_INT = 2147483647;
// Numbers that cross into the engine are float there: beyond this one they would become infinite (engine/gpt2.h
// kMaxFloat, FLT_MAX, limits().maxFloat).
export const MAX_FLOAT = 3.4028234663852886e38;
// The most sequences one run decodes together (engine/gpt2.h Session::kMaxSequences, limits().maxSequences).
export const MAX_SEQUENCES = 16;
// Speculative decoding's drafts: at most this many per step (engine/gpt2.h Session::kMaxDraftTokens,
// limits().maxDraftTokens); a run's own length adapts below its maxDraftTokens (draft_policy.js).
export const MAX_DRAFT_TOKENS = 16;
// The most alternatives one score returns in all, its scored tokens x topAlternatives (engine/gpt2.h
// Session::kMaxScoreAlternatives, limits().maxScoreAlternatives): 4,194,304 of 16 bytes in the heap, and as many
// objects in JS.
export const MAX_SCORE_ALTERNATIVES = 4194304;
const DEFAULT_MAX_DRAFT_TOKENS = 8;
const DRAFT_SOURCES = ['prompt-lookup'];

// The kinds: 'integer' and 'number' (in [min, max]; minExclusive: (min, max]), 'boolean', 'choice' (one of
// `values`), and 'custom' (checked by its own function below). note: what a value means, after the range in a
// message; expected: the whole expectation, where the range says it less well; textExpected: what the text
// form takes, where it differs. parse: the text form's parser (the text -> the value, or something the check
// refuses).
const integer = (min, max, fields) => ({ kind: 'integer', min, max, parse: parseNumber, ...fields });
const number = (min, max, fields) => ({ kind: 'number', min, max, parse: parseNumber, ...fields });
const custom = (fields) => ({ kind: 'custom', parse: String, ...fields });

export const GENERATE_OPTIONS = deepFreeze({
  // up to 2^53 (the run counts its tokens in JS); with numBeams > 1 at most the model's context (checkModelOptions)
  maxNewTokens: integer(1, Number.MAX_SAFE_INTEGER, { default: 64, expected: 'a positive integer' }),
  temperature: number(0, MAX_FLOAT, { default: 1, note: '0 = greedy' }),
  topK: integer(0, MAX_INT, { default: 0, note: '0 = off' }),
  topP: number(0, 1, { default: 1, note: '0 = the most likely token only' }),
  repetitionPenalty: number(0, MAX_FLOAT, { minExclusive: true, default: 1, note: '1 = off' }),
  minP: number(0, 1, { default: 0, note: '0 = off' }),  // drop tokens below minP x the most likely one's probability
  typicalP: number(0, 1, { default: 1, note: '1 = off' }),  // locally typical sampling
  noRepeatNgramSize: integer(0, MAX_INT, { default: 0, note: '0 = off' }),  // never repeat an n-gram of this size (over the window)
  presencePenalty: number(-MAX_FLOAT, MAX_FLOAT, { default: 0, note: '0 = off' }),  // OpenAI's, over the tokens this run generated
  frequencyPenalty: number(-MAX_FLOAT, MAX_FLOAT, { default: 0, note: '0 = off' }),
  logitBias: custom({ default: {}, parse: parseLogitBias }),  // token id -> added to its logit; -Infinity bans it
  badWords: custom({ default: [], parse: parseBadWords }),  // texts (banned with and without a leading space) or token id sequences
  minNewTokens: integer(0, MAX_INT, { default: 0, note: '0 = off' }),  // end-of-text is held back until this many tokens
  // random when not given; the engine's generator takes any integer below 2^53 as it is
  seed: integer(0, Number.MAX_SAFE_INTEGER, { default: undefined, expected: 'an integer in [0, 2^53)' }),
  stop: custom({ default: [], textExpected: 'a non-empty text' }),  // a text form gives one stop string
  stopAtEndOfText: { kind: 'boolean', default: true },
  useKVCache: { kind: 'boolean', default: true },
  kvCache: { kind: 'choice', values: ['int8', 'fp32'], default: 'int8', parse: String },  // the KV cache's storage: 'int8' (a quarter of the bytes) or 'fp32'
  signal: custom({ default: undefined, parse: undefined }),
  // at most the model's vocabulary too (checkModelOptions)
  topAlternatives: integer(0, MAX_INT, { default: 0 }),
  speculative: custom({ default: undefined, parse: undefined }),  // { draft: 'prompt-lookup', maxDraftTokens }: off when undefined
  numBeams: integer(1, MAX_SEQUENCES, { default: 1, note: '1 = off' }),  // beam search (engine/gpt2.h BeamSearch); beam sampling when temperature > 0
  // sequences sampled from one prefill, decoded together (engine/gpt2.h Session::step_sequences); at most numBeams with beams
  numReturnSequences: integer(1, MAX_SEQUENCES, { default: 1 }),
  lengthPenalty: number(-MAX_FLOAT, MAX_FLOAT, { default: 1 }),  // a hypothesis scores its log-probability sum / length ^ lengthPenalty
  // Hugging Face's: false (a heuristic), true (at numBeams hypotheses) or 'never'
  earlyStopping: { kind: 'choice', values: [true, false, 'never'], default: false, parse: parseEarlyStopping },
});

// score()'s: the same options as generate()'s of those names.
export const SCORE_OPTIONS = deepFreeze({
  topAlternatives: GENERATE_OPTIONS.topAlternatives,
  kvCache: GENERATE_OPTIONS.kvCache,
  signal: GENERATE_OPTIONS.signal,  // an AbortSignal: an abort rejects the score with an AbortError
});

function deepFreeze(object) {
  for (const value of Object.values(object)) if (value && typeof value === 'object') deepFreeze(value);
  return Object.freeze(object);
}

// What an option of the table takes, in words: "an integer in [0, 2147483647] (0 = off)".
export function expectedText({ kind, min, max, minExclusive, values, note, expected }) {
  if (expected) return expected;
  let text;
  if (kind === 'integer') text = `an integer in [${min}, ${max}]`;
  else if (kind === 'number') text = `a number in ${minExclusive ? '(' : '['}${min}, ${max}]`;
  else if (kind === 'boolean') text = 'a boolean';
  else if (kind === 'choice') text = values.map((value) => JSON.stringify(value)).join(', ').replace(/, ([^,]*)$/, ' or $1');
  return note ? `${text} (${note})` : text;
}

// Whether value is one the table's entry takes (a 'custom' entry's own check is elsewhere).
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
  o.logitBias = { ...o.logitBias };
  o.badWords = [...o.badWords];
  checkSequenceOptions(o, fail);
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

// numReturnSequences against numBeams, and what several sequences need.
function checkSequenceOptions(o, fail) {
  if (o.numBeams > 1 && o.numReturnSequences > o.numBeams) fail('numReturnSequences', `an integer in [1, numBeams = ${o.numBeams}]`);
  const several = o.numBeams > 1 ? 'numBeams > 1' : o.numReturnSequences > 1 ? 'numReturnSequences > 1' : null;
  if (!several) return;
  if (o.numBeams === 1 && o.temperature === 0) throw new RangeError('generate: numReturnSequences > 1 needs sampling (temperature > 0) or numBeams: greedy gives one sequence n times');
  if (o.speculative) throw new RangeError(`generate: ${several} cannot be combined with speculative`);
  if (!o.useKVCache) throw new RangeError(`generate: ${several} needs the KV cache (useKVCache: true): the sequences fork it`);
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

// speculative: { draft: 'prompt-lookup' (drafts from n-grams of the context) or a model (a draft model of the same
// vocabulary, loaded in the same thread: local_model.js checks it), maxDraftTokens (1..16, default 8) }
function normalizeSpeculative(speculative) {
  if (speculative === null || typeof speculative !== 'object') {
    throw new RangeError(`generate: option speculative must be an object { draft, maxDraftTokens }, got ${describeValue(speculative)}`);
  }
  for (const name of Object.keys(speculative)) {
    if (name !== 'draft' && name !== 'maxDraftTokens') throw new TypeError(`generate: unknown option "speculative.${name}"`);
  }
  const { draft = 'prompt-lookup', maxDraftTokens = DEFAULT_MAX_DRAFT_TOKENS } = speculative;
  if (!DRAFT_SOURCES.includes(draft) && typeof draft?.generate !== 'function') {
    throw new RangeError(`generate: option speculative.draft must be ${DRAFT_SOURCES.map((s) => JSON.stringify(s)).join(' or ')} or a model, got ${describeValue(draft)}`);
  }
  if (!Number.isSafeInteger(maxDraftTokens) || maxDraftTokens < 1 || maxDraftTokens > MAX_DRAFT_TOKENS) {
    throw new RangeError(`generate: option speculative.maxDraftTokens must be an integer in [1, ${MAX_DRAFT_TOKENS}], got ${describeValue(maxDraftTokens)}`);
  }
  return { draft, maxDraftTokens };
}

// The limits only a loaded model knows (normalizeGenerateOptions cannot): the token ids of the options and of a
// prompt given as ids within its vocabulary, topAlternatives at most its vocabulary, and with beams maxNewTokens
// at most its context (the beams' token buffers hold one context). config: the model's { n_ctx, n_vocab }.
export function checkModelOptions(options, prompt, { n_ctx: nCtx, n_vocab: nVocab }) {
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
  if (numBeams > 1 && nCtx !== undefined && maxNewTokens > nCtx) {
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
