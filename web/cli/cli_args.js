// The command line of gpt2-wasm (web/cli/cli.js): node:util parseArgs (--flag value, --flag=value, -n5, -- ends the
// options), one flag per loadModel() option and one per generate() option, checked before anything loads. The
// generation flags and their --help lines come from the options' table (option_table.js: each option's flag, doc,
// range and default). Every error is one line that names the flag as it was typed (`-n: expected a positive
// integer, got "x"`), with the expectation taken from the API's own check, so the command line and the API never
// disagree on what a value may be.
import { parseArgs } from 'node:util';
import { checkThreads } from '../lib/engine/threads.js';
import { checkDevice } from '../lib/gpu/device.js';
import { normalizeGenerateOptions, textOptionError } from '../lib/generation/option_checks.js';
import { GENERATE_OPTIONS, INSPECT_OPTIONS, SCORE_OPTIONS, defaultText } from '../lib/generation/option_table.js';
import { parseNumber } from '../lib/generation/option_text.js';

// What the command line adds to a generation flag's line of --help: how it prints, or reads, what the option gives.
const CLI_NOTES = {
  'kv-cache': 'with --score, fp32 gives the exact log-probabilities, int8 within a few 1e-3 nats; with --inspect, the '
    + 'cache the inspected pass writes and reads',
  speculative: 'lookup: drafts from the context itself (prompt lookup), the same text in fewer passes where it repeats; MODEL: '
    + 'drafts from a smaller model of the same vocabulary (a folder or .gguf file, loaded like --model)',
  'top-alternatives': 'one line per token instead of the text: "text", probability, then the K likeliest tokens and theirs '
    + "(with --score: their logprobs after each token's line)",
  stop: 'may be given several times',
  'num-return-sequences': 'each printed after the run, under a line with its log-probability (beam search: its score)',
};

// The flags of generate()'s options, in the table's order (speculative's fields where speculative is): { name (the
// long flag), short?, usage, option, field? (of the option's object), entry (the table's), sets? (a switch's
// value), multiple? }
const OPTION_FLAGS = Object.entries(GENERATE_OPTIONS).flatMap(([option, entry]) => (entry.fields
  ? Object.entries(entry.fields).filter(([, field]) => field.flag).map(([field, fieldEntry]) => optionFlag(option, fieldEntry, field))
  : entry.flag ? [optionFlag(option, entry)] : []));

function optionFlag(option, entry, field) {
  const { usage, sets, multiple } = typeof entry.flag === 'string' ? { usage: entry.flag } : entry.flag;
  const [, short, name] = /^(?:-(\w), )?--([a-z-]+)/.exec(usage);
  return { name, short, usage, option, field, entry, sets, multiple };
}

// One flag's --help line: its usage, then what it does (the table's doc, the meaning of a value at the range's
// edge, the text form, the range where it is short, the default, and the command line's note). Of the flags of an
// option's fields (speculative's), the first stands for the option (--speculative: its doc and default) and the
// others say that they go with it (--max-draft-tokens).
function optionHelp({ name, usage, option, field, entry, sets }) {
  if (sets !== undefined) return helpLine(usage, entry.flag.doc);
  let doc = [entry.doc, entry.note].filter(Boolean).join(', ');
  let fallback = defaultText(option, entry);
  let textForm = entry.textForm ? `; as text, ${entry.textForm}` : '';
  if (field !== undefined) {
    const lead = OPTION_FLAGS.find((flag) => flag.option === option);
    textForm = '';
    if (lead.field !== field) doc = `with --${lead.name}: ${doc}`;
    else [doc, fallback] = [GENERATE_OPTIONS[option].doc, defaultText(option, GENERATE_OPTIONS[option])];
  }
  const short = (entry.kind === 'integer' || entry.kind === 'number') && Math.max(Math.abs(entry.min), entry.max) <= MAX_SHOWN_RANGE;
  const range = short ? `in [${entry.min}, ${entry.max}], ` : '';
  const note = CLI_NOTES[name] ? `; ${CLI_NOTES[name]}` : '';
  return helpLine(usage, `${doc}${textForm} (${range}default ${fallback})${note}`);
}

// A range this small is shown in --help; larger ones (the engine's int32 and float) in the error that refuses a value.
const MAX_SHOWN_RANGE = 1024;
const HELP_WIDTH = 114;
const USAGE_WIDTH = 26;

// "  --flag X                   text", wrapped at HELP_WIDTH under the text's column ("1 = off" and "[1, 16]" kept
// on one line).
function helpLine(usage, text) {
  const lines = [`  ${usage.padEnd(USAGE_WIDTH)}`];
  for (const word of text.split(/(?<!=) (?!=)(?![^[]*\])/)) {
    if (lines.at(-1).length + 1 + word.length > HELP_WIDTH) lines.push(' '.repeat(USAGE_WIDTH + 2));
    lines.push(`${lines.pop()} ${word}`);
  }
  return lines.join('\n');
}

// What --inspect prints at the text's last token: the logit lens's likeliest tokens per layer, and the positions
// with the most attention (averaged over the heads) per layer.
export const INSPECT_TOP_K = 5;
export const INSPECT_TOP_ATTENDED = 3;

export const USAGE = `usage: gpt2-wasm [options] "prompt"         generate a continuation of the prompt
       gpt2-wasm [options] -i               each line read from stdin continues the text
       gpt2-wasm [options] --score "text"   each token's logprob and rank, then the perplexity
       gpt2-wasm [options] --inspect "text" at the text's last token, per layer: the logit lens's ${INSPECT_TOP_K} likeliest
                                            next tokens, and the ${INSPECT_TOP_ATTENDED} positions its attention weighs most

model:
  --model M                  a folder or .gguf path, an http(s) URL of a folder or .gguf file, a Hugging Face
                             repository (owner/name) or a .gguf file in one (owner/name/file.gguf);
                             default: the bundled tiny-shakespeare in a checkout of the repository, else
                             (the npm package) openai-community/gpt2. Remote models are downloaded once, into
                             $GPT2_WASM_CACHE_DIR or the platform's cache folder (HF_ENDPOINT: another Hub)
  --weights fp32|int8        int8 quantizes a safetensors model on load (default fp32)
  --threads N|auto           engine threads (default 1)
  --device auto|webgpu|wasm  where the model runs (default auto: a hardware WebGPU adapter, else the CPU);
                             webgpu: the GPU, an error where there is none (Node has WebGPU only with the
                             optional npm package webgpu installed); wasm: the CPU
generation:
${OPTION_FLAGS.map(optionHelp).join('\n')}
  -h, --help                 this help
A prompt that starts with - goes after --: gpt2-wasm -- "-prompt"`;

// parseArgs name -> { short?, load (loadModel's option, or the model), parse (the text -> the value), check?,
// expected? } for the load options, and for generate()'s { short?, option, field?, parse (the table's parser: the
// text and the flag as typed -> the value; a text it cannot read throws, naming the flag), multiple?, draftModel? }
const VALUE_FLAGS = {
  model: { load: 'model', parse: String },
  weights: { load: 'weights', parse: String, check: checkWeights },
  threads: { load: 'threads', parse: (text) => (text === 'auto' ? text : parseNumber(text)), check: checkThreads },
  device: { load: 'device', parse: String, check: checkDevice, expected: '"auto", "webgpu" or "wasm"' },
  ...Object.fromEntries(OPTION_FLAGS.filter((flag) => flag.sets === undefined).map(({ name, short, option, field, entry, multiple }) => [name, {
    short, option, field, multiple, parse: entry.parse,
    // anything but "lookup" names a draft model, which cli.js loads into the draft's place (parsed.draftModel)
    draftModel: field === 'draft',
  }])),
};

// The modes that run another call than generate(), each taking the generation flags whose options are that call's
// own (the same table entries): --score, score()'s topAlternatives and kvCache; --inspect, inspect()'s kvCache (its
// topK is the logit lens's, not the sampler's --top-k).
const MODE_OPTIONS = { score: SCORE_OPTIONS, inspect: INSPECT_OPTIONS };

// parseArgs name -> what giving it sets
const SWITCHES = {
  help: { short: 'h', set: (parsed) => (parsed.help = true) },
  i: { short: 'i', set: (parsed) => (parsed.interactive = true) },
  ...Object.fromEntries(Object.keys(MODE_OPTIONS).map((mode) => [mode, { set: (parsed) => (parsed[mode] = true) }])),
  ...Object.fromEntries(OPTION_FLAGS.filter((flag) => flag.sets !== undefined).map(({ name, option, sets }) => [name, {
    option, set: (parsed) => (parsed.options[option] = sets),
  }])),
};

const PARSE_ARGS_OPTIONS = Object.fromEntries([
  ...Object.entries(VALUE_FLAGS).map(([name, { short }]) => [name, { type: 'string', ...(short && { short }) }]),
  ...Object.entries(SWITCHES).map(([name, { short }]) => [name, { type: 'boolean', ...(short && { short }) }]),
]);

function checkWeights(weights) {
  if (weights !== 'fp32' && weights !== 'int8') throw new TypeError(`weights must be "fp32" or "int8", got ${weights}`);
}

// -> { help } | { model (null: the default), load: { weights?, threads?, device? }, options (generate's), prompt (null
// with -i), interactive, score, inspect }
export function parseCliArguments(args) {
  const { tokens } = parseArgs({ args, options: PARSE_ARGS_OPTIONS, allowPositionals: true, strict: false, tokens: true });
  const parsed = { model: null, load: {}, options: {}, prompt: null, interactive: false, score: false, inspect: false };
  const generateFlags = [];  // { rawName (as typed), option }, for the complaint of a mode that does not take them
  for (const token of tokens) {
    if (token.kind === 'positional') addPrompt(parsed, token.value);
    else if (token.kind === 'option') applyOption(parsed, token, generateFlags);
  }
  if (parsed.help) return { help: true };
  checkMode(parsed, generateFlags);
  return parsed;
}

function addPrompt(parsed, text) {
  if (parsed.prompt !== null) throw new Error('give the prompt as one argument (quote it)');
  parsed.prompt = text;
}

function applyOption(parsed, { name, rawName, value }, generateFlags) {
  if (name in SWITCHES) {
    if (value !== undefined) throw new Error(`${rawName}: takes no value, got ${JSON.stringify(value)}`);
    if (SWITCHES[name].option) generateFlags.push({ rawName, option: SWITCHES[name].option });
    return void SWITCHES[name].set(parsed);
  }
  const flag = VALUE_FLAGS[name];
  if (!flag) throw new Error(`unknown option ${rawName} (a prompt that starts with - goes after --)`);
  if (value === undefined) throw new Error(`${rawName}: missing value`);
  let parsedValue = flag.parse(value, rawName);
  if (flag.draftModel && parsedValue !== 'prompt-lookup') {
    parsed.draftModel = parsedValue;
    parsedValue = 'prompt-lookup';  // what the checks below see until the model takes its place
  }
  if (flag.load === 'model') parsed.model = parsedValue;
  else if (flag.load) {
    checked(rawName, value, () => flag.check(parsedValue), flag.expected);
    parsed.load[flag.load] = parsedValue;
  } else {
    generateFlags.push({ rawName, option: flag.option });
    const optionValue = flag.multiple ? [...(parsed.options[flag.option] ?? []), parsedValue]
      : flag.field ? { ...parsed.options[flag.option], [flag.field]: parsedValue } : parsedValue;
    checked(rawName, value, () => normalizeGenerateOptions({ [flag.option]: optionValue }), GENERATE_OPTIONS[flag.option].textExpected);
    parsed.options[flag.option] = optionValue;
  }
}

// Runs the API's check of a value; its complaint is told of the flag and of the text as typed (textOptionError).
// expected: what the flag takes, where the API's words fit the command line less well.
function checked(rawName, typed, check, expected) {
  try {
    check();
  } catch (error) {
    throw new Error(textOptionError(rawName, typed, error, expected).message);
  }
}

function checkMode(parsed, generateFlags) {
  const { interactive, score, inspect, prompt, options } = parsed;
  if (options.speculative && options.speculative.draft === undefined) throw new Error('--max-draft-tokens needs --speculative');
  const modes = [interactive && '-i', score && '--score', inspect && '--inspect'].filter(Boolean);
  if (modes.length > 1) throw new Error(`${modes[0]} and ${modes[1]} cannot be combined`);
  if (options.numReturnSequences > 1) {
    // one line per token of several sequences at once would interleave them past reading
    if (options.topAlternatives > 0) throw new Error('--top-alternatives and --num-return-sequences > 1 cannot be combined');
    // -i continues one text; which of the sequences it would go on from is no choice to make for the user
    if (interactive) throw new Error('-i and --num-return-sequences > 1 cannot be combined');
  }
  checkTogether(options);
  if (interactive && prompt !== null) throw new Error('-i reads the text from stdin: give no prompt');
  for (const mode of Object.keys(MODE_OPTIONS).filter((name) => parsed[name])) {
    const refused = generateFlags.filter(({ option }) => MODE_OPTIONS[mode][option] !== GENERATE_OPTIONS[option]);
    if (refused.length > 0) throw new Error(`--${mode} takes no generation options, got ${refused.map(({ rawName }) => rawName).join(', ')}`);
  }
  if (!interactive && prompt === null) throw new Error(`missing ${score || inspect ? 'text' : 'prompt'} (gpt2-wasm --help for the usage)`);
}

// The generation options' checks that span several flags (--num-return-sequences against --num-beams, ...), with
// the flag named when the complaint is about one.
function checkTogether(options) {
  try {
    normalizeGenerateOptions(options);
  } catch (error) {
    const [, option, expected, got] = /option (\w+) must be (.*), got (.*)$/.exec(error.message) ?? [];
    const flag = Object.keys(VALUE_FLAGS).find((name) => option && VALUE_FLAGS[name].option === option);
    throw new Error(flag ? `--${flag}: expected ${expected}, got ${JSON.stringify(got)}` : error.message.replace(/^generate: /, ''));
  }
}
