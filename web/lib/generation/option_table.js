// generate()'s and score()'s options, each declared once: its kind, range and default, what it does in one line,
// and its name on each surface: the command line's flag (web/cli/cli_args.js builds its flags and --help from
// them), the widget's data-* attribute (web/widget/widget_options.js) and the page's control (web/page/settings.js;
// public/index.html's controls are held to the table by tests/js/option_surfaces.test.js, the .d.ts comments and
// the docs' tables too). option_checks.js checks values against it, in the same words on every surface.
// Plain ES module.
import { LIMITS, SAMPLING_DEFAULTS } from '../engine/engine_constants.js';
import { parseBadWords, parseEarlyStopping, parseLogitBias, parseNumber } from './option_text.js';

// The engine's bounds (engine/gpt2.h, read from the engine into engine_constants.js). Integers that cross into the
// engine are int32 there and floats float: larger ones are refused, never wrapped or made infinite. At most
// MAX_SEQUENCES sequences decode together; speculative decoding drafts at most MAX_DRAFT_TOKENS per step (a run's
// own length adapts below its maxDraftTokens: draft_policy.js); one score returns at most MAX_SCORE_ALTERNATIVES
// alternatives in all, its scored tokens x topAlternatives (16 bytes each in the heap, and as many objects in JS).
export const { maxInt: MAX_INT, maxFloat: MAX_FLOAT, maxSequences: MAX_SEQUENCES, maxDraftTokens: MAX_DRAFT_TOKENS,
  maxScoreAlternatives: MAX_SCORE_ALTERNATIVES, maxInspectTopK: MAX_INSPECT_TOP_K } = LIMITS;
// The text form of speculative decoding with drafts from the text itself (prompt lookup).
export const LOOKUP_TEXT = 'lookup';

// An entry's fields. kind: 'integer' or 'number' (in [min, max]; minExclusive: (min, max]), 'boolean', 'choice'
// (one of `values`) or 'custom' (checked by its own function, option_checks.js). default: its value when not given
// (undefined: none). doc: what it does, in one line. note: what a value at an end of the range means, after the
// range in a message; expected: the whole expectation, where the range says it less well; textExpected: what the
// text form takes, where it differs; also: a bound checked elsewhere (against a loaded model or another option),
// in words. parse: the text form's parser (the text -> the value, or something the check refuses); textForm: that
// text's syntax, in words, where it is not the value's. engine: crosses into the engine's SamplingSettings
// (sampling_settings.js), whose own defaults are the table's (tests/js/engine_limits.test.js).
// The surfaces. flag: the command line's, as --help shows it ('--top-k K', '-n, --max-new-tokens N'), or { usage,
// sets, doc } for a switch that sets the option to `sets`, or { usage, multiple } for a flag given several times.
// attribute: the widget's data-* attribute (element.dataset names it as the option). control: the id of the page's
// control in public/index.html.
const integer = (min, max, fields) => ({ kind: 'integer', min, max, parse: parseNumber, ...fields });
const number = (min, max, fields) => ({ kind: 'number', min, max, parse: parseNumber, ...fields });
const custom = (fields) => ({ kind: 'custom', parse: String, ...fields });

// speculative's fields: { draft, maxDraftTokens }
export const SPECULATIVE_OPTIONS = deepFreeze({
  // a draft model of the same vocabulary is loaded in the same thread (local_model.js checks it)
  draft: custom({
    default: 'prompt-lookup', values: ['prompt-lookup'], parse: (text) => (text === LOOKUP_TEXT ? 'prompt-lookup' : text),
    doc: "where drafts come from: 'prompt-lookup', n-grams of the context, or a draft model of the same vocabulary",
    flag: '--speculative lookup|MODEL',
  }),
  maxDraftTokens: integer(1, MAX_DRAFT_TOKENS, { default: 8, doc: 'the most tokens drafted per step', flag: '--max-draft-tokens N' }),
});

// What an inspection looks at (engine/inspection/inspector.h): model.inspect()'s options below, and generate()'s
// inspect, for each new token. A list is ascending without repeats (integers >= 0, checked against the model once it
// is known); a missing one means all.
const integers = (fields) => custom({ default: undefined, parse: undefined, integers: true, ...fields });
export const INSPECT_GENERATION_OPTIONS = deepFreeze({
  layers: integers({ doc: 'the layers looked inside, from 0 (default: all)' }),
  heads: integers({ doc: 'the attention heads whose attention and KV rows are shown (default: all; [] for none)' }),
  topK: integer(1, MAX_INSPECT_TOP_K, { default: 5, doc: "the logit lens's and the sampler trace's tokens per entry" }),
  logitLens: {
    kind: 'boolean', default: true,
    doc: "each layer's best guesses at the next token: an LM head per layer and position, the costly part",
  },
});

// An option that crosses into the engine as it is: its default is the engine's (SamplingSettings).
const engineDefault = (name) => ({ default: SAMPLING_DEFAULTS[name], engine: true });

export const GENERATE_OPTIONS = deepFreeze({
  maxNewTokens: integer(1, Number.MAX_SAFE_INTEGER, {
    default: 64, expected: 'a positive integer', also: "with numBeams > 1 at most the model's context",
    doc: 'the most tokens to generate', flag: '-n, --max-new-tokens N', attribute: 'data-max-new-tokens', control: 'max-new-tokens',
  }),
  temperature: number(0, MAX_FLOAT, {
    note: '0 = greedy', ...engineDefault('temperature'),
    doc: "the softmax's temperature: how random the text is", flag: '--temperature T', attribute: 'data-temperature', control: 'temperature',
  }),
  topK: integer(0, MAX_INT, {
    note: '0 = off', ...engineDefault('topK'),
    doc: 'sample among the k likeliest tokens', flag: '--top-k K', attribute: 'data-top-k', control: 'top-k',
  }),
  topP: number(0, 1, {
    note: '0 = the most likely token only', ...engineDefault('topP'),
    doc: 'nucleus sampling: the likeliest tokens of probability p together, 1 = off', flag: '--top-p P', attribute: 'data-top-p', control: 'top-p',
  }),
  repetitionPenalty: number(0, MAX_FLOAT, {
    minExclusive: true, note: '1 = off', ...engineDefault('repetitionPenalty'),
    doc: "CTRL's, over the window: a positive logit divided by it, a negative one multiplied",
    flag: '--repetition-penalty R', attribute: 'data-repetition-penalty',
  }),
  minP: number(0, 1, {
    note: '0 = off', ...engineDefault('minP'),
    doc: "drop the tokens below p times the likeliest one's probability", flag: '--min-p P', attribute: 'data-min-p', control: 'min-p',
  }),
  typicalP: number(0, 1, {
    note: '1 = off', ...engineDefault('typicalP'),
    doc: 'locally typical sampling', flag: '--typical-p P', attribute: 'data-typical-p', control: 'typical-p',
  }),
  noRepeatNgramSize: integer(0, MAX_INT, {
    note: '0 = off', ...engineDefault('noRepeatNgramSize'),
    doc: 'never repeat an n-gram of n tokens of the window', flag: '--no-repeat-ngram-size N', attribute: 'data-no-repeat-ngram-size',
    control: 'no-repeat-ngram-size',
  }),
  presencePenalty: number(-MAX_FLOAT, MAX_FLOAT, {
    note: '0 = off', ...engineDefault('presencePenalty'),
    doc: "OpenAI's: subtracted once from the logit of each token this run generated", flag: '--presence-penalty X',
    attribute: 'data-presence-penalty', control: 'presence-penalty',
  }),
  frequencyPenalty: number(-MAX_FLOAT, MAX_FLOAT, {
    note: '0 = off', ...engineDefault('frequencyPenalty'),
    doc: "OpenAI's: subtracted from a token's logit once per time this run generated it", flag: '--frequency-penalty X',
    attribute: 'data-frequency-penalty', control: 'frequency-penalty',
  }),
  logitBias: custom({
    default: {}, parse: parseLogitBias, engine: true, textForm: 'TOKEN:BIAS pairs, comma-separated ("50256:-inf, 13:2.5")',
    doc: "added to a token's logit; -Infinity (-inf) bans the token", flag: '--logit-bias TEXT', attribute: 'data-logit-bias',
    control: 'logit-bias',
  }),
  badWords: custom({
    default: [], parse: parseBadWords, engine: true, textForm: 'comma-separated ("thou, thee")',
    doc: 'never generated: texts (with and without a leading space) or token id sequences', flag: '--bad-words TEXT',
    attribute: 'data-bad-words', control: 'bad-words',
  }),
  minNewTokens: integer(0, MAX_INT, {
    note: '0 = off', ...engineDefault('minNewTokens'),
    doc: 'end-of-text is held back until this many new tokens', flag: '--min-new-tokens N', attribute: 'data-min-new-tokens',
    control: 'min-new-tokens',
  }),
  // the engine's generator takes any integer below 2^53 as it is
  seed: integer(0, Number.MAX_SAFE_INTEGER, {
    default: undefined, expected: 'an integer in [0, 2^53)',
    doc: 'same seed, same text', flag: '--seed S', attribute: 'data-seed', control: 'seed',
  }),
  stop: custom({
    default: [], textExpected: 'a non-empty text',
    doc: 'generation ends before the first of these texts', flag: { usage: '--stop TEXT', multiple: true }, attribute: 'data-stop',
  }),
  stopAtEndOfText: {
    kind: 'boolean', default: true,
    doc: 'end at <|endoftext|>', flag: { usage: '--ignore-eos', sets: false, doc: 'keep generating past <|endoftext|>' },
  },
  useKVCache: {
    kind: 'boolean', default: true, doc: 'keep the keys and values of the positions fed (off: every step computes them all again)',
    flag: { usage: '--no-cache', sets: false, doc: 'recompute every position at each step (no KV cache)' }, control: 'kv-cache',
  },
  kvCache: {
    kind: 'choice', values: ['int8', 'fp32'], default: 'int8', parse: String,
    doc: "the KV cache's storage: int8, a quarter of the bytes, or fp32", flag: '--kv-cache int8|fp32', control: 'kv-storage',
  },
  signal: custom({ default: undefined, parse: undefined, doc: 'an AbortSignal: an abort ends the run (stopReason abort)' }),
  topAlternatives: integer(0, MAX_INT, {
    default: 0, also: "at most the model's vocabulary",
    doc: "each token's probability and this many likeliest alternatives", flag: '--top-alternatives K',
  }),
  speculative: custom({
    default: undefined, parse: undefined, fields: SPECULATIVE_OPTIONS, textForm: LOOKUP_TEXT,
    doc: 'speculative decoding: drafted tokens verified several per pass, the text unchanged', attribute: 'data-speculative',
    control: 'speculative',
  }),
  // sequences sampled from one prefill, decoded together (engine/decoding/sequences.h Sequences::step)
  numReturnSequences: integer(1, MAX_SEQUENCES, {
    default: 1, also: 'at most numBeams with beams',
    doc: 'sequences sampled from one prefill and decoded together', flag: '--num-return-sequences N', attribute: 'data-num-return-sequences',
  }),
  // engine/gpt2.h BeamSearch
  numBeams: integer(1, MAX_SEQUENCES, {
    default: 1, note: '1 = off',
    doc: 'beam search with this many beams, beam sampling above temperature 0', flag: '--num-beams N', attribute: 'data-num-beams', control: 'num-beams',
  }),
  lengthPenalty: number(-MAX_FLOAT, MAX_FLOAT, {
    default: 1, doc: 'beam search: a hypothesis scores its log-probability sum / length ^ this', flag: '--length-penalty X',
    attribute: 'data-length-penalty', control: 'length-penalty',
  }),
  inspect: custom({
    default: undefined, parse: undefined, fields: INSPECT_GENERATION_OPTIONS,
    doc: "each new token's inspection (attention, logit lens, blocks, KV cache, sampler trace) as its piece's inspection",
  }),
  // Hugging Face's
  earlyStopping: {
    kind: 'choice', values: [true, false, 'never'], default: false, parse: parseEarlyStopping,
    doc: 'when beam search ends: false, when no beam is likely to do better; true, at numBeams hypotheses; never, when none can',
    flag: '--early-stopping WHEN', attribute: 'data-early-stopping',
  },
});

// score()'s: the same options as generate()'s of those names.
export const SCORE_OPTIONS = deepFreeze({
  topAlternatives: GENERATE_OPTIONS.topAlternatives,
  kvCache: GENERATE_OPTIONS.kvCache,
  signal: GENERATE_OPTIONS.signal,  // an abort rejects the score with an AbortError
});

// model.inspect()'s: positions (window positions of the input's tokens, default the last) and generate()'s inspect.
export const INSPECT_OPTIONS = deepFreeze({
  positions: integers({ doc: "the positions looked at, from 0, below the input's length in tokens (default: the last)" }),
  ...INSPECT_GENERATION_OPTIONS,
  kvCache: GENERATE_OPTIONS.kvCache,
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

// An option's default in words: "64", "int8", "none" ({} and []), "random" (the seed), "off" (speculative).
export function defaultText(name, { default: value }) {
  if (value === undefined) return name === 'seed' ? 'random' : 'off';
  if (typeof value === 'object') return Object.keys(value).length === 0 ? 'none' : JSON.stringify(value);
  return String(value);
}

// The entries with a name on a surface ('flag', 'attribute' or 'control'): [name, entry] in the table's order.
export function optionsWith(surface) {
  return Object.entries(GENERATE_OPTIONS).filter(([, entry]) => entry[surface] !== undefined);
}
