// The command line of gpt2-wasm (web/cli/cli.js): node:util parseArgs (--flag value, --flag=value, -n5, -- ends the
// options), one flag per generate() and loadModel() option, checked before anything loads. Every error is one
// line that names the flag as it was typed (`-n: expected a positive integer, got "x"`), with the expectation
// taken from the API's own check, so the command line and the API never disagree on what a value may be.
import { parseArgs } from 'node:util';
import { checkThreads } from '../lib/engine/threads.js';
import { checkDevice } from '../lib/gpu/device.js';
import { GENERATE_OPTIONS, normalizeGenerateOptions, parseOptionText, textOptionError } from '../lib/generation/option_table.js';
import { parseNumber } from '../lib/generation/option_text.js';

export const USAGE = `usage: gpt2-wasm [options] "prompt"       generate a continuation of the prompt
       gpt2-wasm [options] -i             each line read from stdin continues the text
       gpt2-wasm [options] --score "text" each token's logprob and rank, then the perplexity

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
  -n, --max-new-tokens N     tokens to generate (default 64)
  --temperature T            0 = greedy (default 1)
  --top-k K                  0 = off (default)
  --top-p P                  nucleus sampling, 1 = off (default)
  --repetition-penalty R     1 = off (default)
  --min-p P                  drop tokens less likely than P times the likeliest one, 0 = off (default)
  --typical-p P              locally typical sampling, 1 = off (default)
  --no-repeat-ngram-size N   never repeat an n-gram of N tokens, 0 = off (default)
  --presence-penalty X       subtract X from the logit of each token generated so far, 0 = off (default)
  --frequency-penalty X      subtract X times its count so far from each token's logit, 0 = off (default)
  --logit-bias TEXT          add BIAS to TOKEN's logit: TOKEN:BIAS, comma-separated ("50256:-inf, 13:2.5";
                             -inf bans the token)
  --bad-words TEXT           never generate these texts, comma-separated ("thou, thee")
  --min-new-tokens N         no <|endoftext|> before N tokens, 0 = off (default)
  --seed S                   same seed, same text (default random)
  --stop TEXT                stop before TEXT (may be given several times)
  --ignore-eos               keep generating past <|endoftext|>
  --kv-cache int8|fp32       the KV cache's storage (default int8; with --score, fp32 gives the exact
                             log-probabilities, int8 within a few 1e-3 nats)
  --no-cache                 recompute every position at each step (no KV cache)
  --speculative lookup       speculative decoding with drafts from the context itself (prompt lookup): the
                             same text, several tokens per pass where the text repeats itself
  --speculative MODEL        speculative decoding with drafts from a smaller model of the same vocabulary
                             (a folder or .gguf file, loaded like --model): the same text
  --max-draft-tokens N       with --speculative: the most tokens drafted per step, 1..16 (default 8)
  --top-alternatives K       one line per token instead of the text: "text", probability, then the K likeliest
                             tokens and theirs (with --score: their logprobs after each token's line)
  --num-return-sequences N   sample N continuations of the prompt at once, 1..16 (default 1; N > 1 needs
                             --temperature > 0 or --num-beams): each printed after the run, under a line with
                             its log-probability (beam search: its score)
  --num-beams N              beam search with N beams, 1..16 (default 1: off); at --temperature 0 Hugging Face's
                             beam search, above it beam sampling; N >= --num-return-sequences
  --length-penalty X         beam search: a hypothesis scores its log-probability / length^X (default 1)
  --early-stopping WHEN      beam search: false (default: when no beam is likely to do better), true (at N
                             finished hypotheses) or never (when no beam can do better)
  -h, --help                 this help
A prompt that starts with - goes after --: gpt2-wasm -- "-prompt"`;

// parseArgs name -> { short?, option (generate's) or load (loadModel's, or the model), parse? (the text and the
// flag as typed -> the value; a text it cannot read throws, naming the flag; a generate() option's default is
// the options' table's parser, option_table.js, as the widget's data-* attributes and the page's fields use),
// check? (a load option's), multiple?, expected? }
const VALUE_FLAGS = {
  model: { load: 'model', parse: String },
  weights: { load: 'weights', parse: String, check: checkWeights },
  threads: { load: 'threads', parse: (text) => (text === 'auto' ? text : parseNumber(text)), check: checkThreads },
  device: { load: 'device', parse: String, check: checkDevice, expected: '"auto", "webgpu" or "wasm"' },
  'max-new-tokens': { short: 'n', option: 'maxNewTokens' },
  temperature: { option: 'temperature' },
  'top-k': { option: 'topK' },
  'top-p': { option: 'topP' },
  'repetition-penalty': { option: 'repetitionPenalty' },
  'min-p': { option: 'minP' },
  'typical-p': { option: 'typicalP' },
  'no-repeat-ngram-size': { option: 'noRepeatNgramSize' },
  'presence-penalty': { option: 'presencePenalty' },
  'frequency-penalty': { option: 'frequencyPenalty' },
  // the syntax the widget's data-* attributes and the page's fields share (option_text.js)
  'logit-bias': { option: 'logitBias' },
  'bad-words': { option: 'badWords' },
  'min-new-tokens': { option: 'minNewTokens' },
  seed: { option: 'seed' },
  stop: { option: 'stop', multiple: true },
  'kv-cache': { option: 'kvCache' },
  'top-alternatives': { option: 'topAlternatives' },
  'num-return-sequences': { option: 'numReturnSequences' },
  'num-beams': { option: 'numBeams' },
  'length-penalty': { option: 'lengthPenalty' },
  'early-stopping': { option: 'earlyStopping' },
  // the two fill generate's option speculative: { draft, maxDraftTokens }
  // anything but "lookup" names a draft model, which cli.js loads into the draft's place (parsed.draftModel)
  speculative: { option: 'speculative', field: 'draft', parse: (text) => (text === 'lookup' ? 'prompt-lookup' : text), draftModel: true },
  'max-draft-tokens': { option: 'speculative', field: 'maxDraftTokens', parse: parseNumber },
};

// parseArgs name -> what giving it sets
const SWITCHES = {
  help: { short: 'h', set: (parsed) => (parsed.help = true) },
  i: { short: 'i', set: (parsed) => (parsed.interactive = true) },
  score: { set: (parsed) => (parsed.score = true) },
  'no-cache': { generate: true, set: (parsed) => (parsed.options.useKVCache = false) },
  'ignore-eos': { generate: true, set: (parsed) => (parsed.options.stopAtEndOfText = false) },
};

// Options --score takes besides the load options (model.score's own).
const SCORE_OPTIONS = new Set(['topAlternatives', 'kvCache']);

const PARSE_ARGS_OPTIONS = Object.fromEntries([
  ...Object.entries(VALUE_FLAGS).map(([name, { short }]) => [name, { type: 'string', ...(short && { short }) }]),
  ...Object.entries(SWITCHES).map(([name, { short }]) => [name, { type: 'boolean', ...(short && { short }) }]),
]);

function checkWeights(weights) {
  if (weights !== 'fp32' && weights !== 'int8') throw new TypeError(`weights must be "fp32" or "int8", got ${weights}`);
}

// -> { help } | { model (null: the default), load: { weights?, threads?, device? }, options (generate's), prompt (null
// with -i), interactive, score }
export function parseCliArguments(args) {
  const { tokens } = parseArgs({ args, options: PARSE_ARGS_OPTIONS, allowPositionals: true, strict: false, tokens: true });
  const parsed = { model: null, load: {}, options: {}, prompt: null, interactive: false, score: false };
  const generateFlags = [];  // as typed, for --score's complaint
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
    if (SWITCHES[name].generate) generateFlags.push(rawName);
    return void SWITCHES[name].set(parsed);
  }
  const flag = VALUE_FLAGS[name];
  if (!flag) throw new Error(`unknown option ${rawName} (a prompt that starts with - goes after --)`);
  if (value === undefined) throw new Error(`${rawName}: missing value`);
  let parsedValue = flag.parse ? flag.parse(value, rawName) : parseOptionText(flag.option, value, rawName);
  if (flag.draftModel && parsedValue !== 'prompt-lookup') {
    parsed.draftModel = parsedValue;
    parsedValue = 'prompt-lookup';  // what the checks below see until the model takes its place
  }
  if (flag.load === 'model') parsed.model = parsedValue;
  else if (flag.load) {
    checked(rawName, value, () => flag.check(parsedValue), flag.expected);
    parsed.load[flag.load] = parsedValue;
  } else {
    if (!SCORE_OPTIONS.has(flag.option)) generateFlags.push(rawName);
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

function checkMode({ interactive, score, prompt, options }, generateFlags) {
  if (options.speculative && options.speculative.draft === undefined) throw new Error('--max-draft-tokens needs --speculative');
  if (interactive && score) throw new Error('-i and --score cannot be combined');
  if (options.numReturnSequences > 1) {
    // one line per token of several sequences at once would interleave them past reading
    if (options.topAlternatives > 0) throw new Error('--top-alternatives and --num-return-sequences > 1 cannot be combined');
    // -i continues one text; which of the sequences it would go on from is no choice to make for the user
    if (interactive) throw new Error('-i and --num-return-sequences > 1 cannot be combined');
  }
  checkTogether(options);
  if (interactive && prompt !== null) throw new Error('-i reads the text from stdin: give no prompt');
  if (score && generateFlags.length > 0) throw new Error(`--score takes no generation options, got ${generateFlags.join(', ')}`);
  if (!interactive && prompt === null) throw new Error(`missing ${score ? 'text' : 'prompt'} (gpt2-wasm --help for the usage)`);
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
