// The widget's options: their data-* attributes, defaults and checks (GPT2Widget.mount's, docs/embedding.md).
import { resolveAgainstPage } from '../lib/environment.js';
import { normalizeGenerateOptions } from '../lib/generation/generate.js';
import { parseBadWords, parseEarlyStopping, parseLogitBias } from '../lib/generation/option_text.js';
import { DEVICES } from '../lib/gpu/device.js';
import { modelLocation } from '../lib/loading/model_files.js';

// name -> [parser of a data-* attribute value, default]. The generation options are those of
// Model.generate (web/lib/gpt2.js), which checks their values.
const OPTIONS = {
  model: [String, undefined],  // a model folder URL or a .gguf file URL, relative to the page; default: the bundled model
  prompt: [String, ''],
  maxNewTokens: [Number, 64],
  temperature: [Number, 0.8],
  topK: [Number, 40],
  topP: [Number, 1],
  repetitionPenalty: [Number, 1],
  minP: [Number, 0],
  typicalP: [Number, 1],
  noRepeatNgramSize: [Number, 0],
  presencePenalty: [Number, 0],
  frequencyPenalty: [Number, 0],
  // data-logit-bias="50256:-inf, 13:2.5" and data-bad-words="thou, thee": the command line's syntax (option_text.js);
  // the defaults are frozen, since every widget shares them
  logitBias: [(text) => parseLogitBias(text, 'data-logit-bias'), Object.freeze({})],
  badWords: [parseBadWords, Object.freeze([])],
  minNewTokens: [Number, 0],
  seed: [Number, undefined],  // random
  stop: [String, undefined],
  autoGenerate: [parseBoolean, false],
  lazy: [parseBoolean, false],
  theme: [String, 'auto'],
  device: [String, 'auto'],  // loadModel's: 'auto' (a hardware GPU, else the CPU), 'webgpu' or 'wasm'
  speculative: [parseSpeculative, undefined],  // generate's: data-speculative="lookup" is { draft: 'prompt-lookup' }
  numReturnSequences: [Number, 1],  // generate's: n > 1 shows one output per sequence (widget_view.js)
  numBeams: [Number, 1],  // generate's beam search; data-early-stopping="true", "false" or "never"
  lengthPenalty: [Number, 1],
  earlyStopping: [parseEarlyStopping, false],
};
export const GENERATE_OPTIONS = ['maxNewTokens', 'temperature', 'topK', 'topP', 'repetitionPenalty', 'minP', 'typicalP',
  'noRepeatNgramSize', 'presencePenalty', 'frequencyPenalty', 'logitBias', 'badWords', 'minNewTokens', 'seed', 'stop', 'speculative', 'numReturnSequences', 'numBeams', 'lengthPenalty', 'earlyStopping'];
const THEMES = ['auto', 'light', 'dark'];
// The bundled model as one Q4_0 GGUF file: 8.4 MB to download, where its safetensors folder is 24 MB.
export const BUNDLED_MODEL_PATH = 'models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf';
export const PLACEHOLDER_SELECTOR = '[data-gpt2-widget]';

function parseBoolean(value) {
  return value !== 'false';
}

// "lookup": speculation with prompt-lookup drafts; anything else goes on as it is, for generate()'s check to name
function parseSpeculative(value) {
  return value === 'lookup' ? { draft: 'prompt-lookup' } : value;
}

// Options from data-* attributes; other data-* attributes (the host's own) are ignored.
export function optionsFromDataset(dataset) {
  const options = {};
  for (const [name, [parse]] of Object.entries(OPTIONS)) {
    const value = dataset[name];
    if (value === undefined || (value === '' && parse !== parseBoolean)) continue;
    options[name] = parse(value);
  }
  return options;
}

export function completeOptions(options, defaultModelUrl) {
  if (options === null || typeof options !== 'object') throw new TypeError('GPT2Widget.mount: options must be an object');
  for (const name of Object.keys(options)) {
    if (!(name in OPTIONS)) throw new TypeError(`GPT2Widget.mount: unknown option "${name}" (known: ${Object.keys(OPTIONS).join(', ')})`);
  }
  const complete = Object.fromEntries(Object.entries(OPTIONS).map(([name, [, fallback]]) => [name, options[name] ?? fallback]));
  if (!THEMES.includes(complete.theme)) throw new RangeError(`GPT2Widget.mount: theme must be one of ${THEMES.join(', ')}`);
  if (!DEVICES.includes(complete.device)) throw new RangeError(`GPT2Widget.mount: device must be one of ${DEVICES.join(', ')}`);
  if (complete.speculative !== undefined) normalizeGenerateOptions({ speculative: complete.speculative });  // at mount, not at Generate
  complete.model = modelUrl(complete.model === undefined ? defaultModelUrl : resolveAgainstPage(complete.model));
  complete.prompt = String(complete.prompt);
  return complete;
}

// A GGUF file's URL as it is; a folder's with a trailing slash (modelLocation), so that widgets of one folder
// share it however it is spelled.
function modelUrl(address) {
  return modelLocation(address).url.href;
}
