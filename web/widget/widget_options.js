// The widget's options: their data-* attributes, defaults and checks (GPT2Widget.mount's, docs/embedding.md). The
// generation options are the options' table's with a data-* attribute (option_table.js), read and checked through
// it, so a data-* attribute takes what the command line's flag takes and is refused in the same words.
import { resolveAgainstPage } from '../lib/environment.js';
import { normalizeGenerateOptions, readOptionText, relabelOptionError } from '../lib/generation/option_checks.js';
import { GENERATE_OPTIONS as OPTION_TABLE, LOOKUP_TEXT, SPECULATIVE_OPTIONS, optionsWith } from '../lib/generation/option_table.js';
import { parseBoolean } from '../lib/generation/option_text.js';
import { DEVICES } from '../lib/gpu/device.js';
import { modelLocation } from '../lib/loading/model_files.js';

// The generation options a widget passes to Model.generate (web/lib/gpt2.js), and its defaults where they are not
// generate()'s own (which turn each processor off).
export const GENERATE_OPTIONS = optionsWith('attribute').map(([name]) => name);
const WIDGET_DEFAULTS = { temperature: 0.8, topK: 40 };

// The widget's own options: name -> [parser of a data-* attribute value, default]. data-auto-generate and
// data-lazy are on as "" (the attribute alone) or "true", off as "false".
const OWN_OPTIONS = {
  model: [String, undefined],  // a model folder URL or a .gguf file URL, relative to the page; default: the bundled model
  prompt: [String, ''],
  autoGenerate: [parseBoolean, false],
  lazy: [parseBoolean, false],
  theme: [String, 'auto'],
  device: [String, 'auto'],  // loadModel's: 'auto' (a hardware GPU, else the CPU), 'webgpu' or 'wasm'
};
const OPTION_NAMES = [...Object.keys(OWN_OPTIONS), ...GENERATE_OPTIONS];
const THEMES = ['auto', 'light', 'dark'];
const BOOLEAN_TEXT = '"true", "false" or "" (true)';
// The bundled model as one Q4_0 GGUF file: 8.4 MB to download, where its safetensors folder is 24 MB.
export const BUNDLED_MODEL_PATH = 'models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf';
export const PLACEHOLDER_SELECTOR = '[data-gpt2-widget]';

// "autoGenerate" -> "data-auto-generate": an option's attribute (a generation option's is the table's)
const attributeName = (name) => OPTION_TABLE[name]?.attribute ?? `data-${name.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;

// Options from data-* attributes, each read and checked on its own (a throw names the attribute and quotes its
// text); other data-* attributes (the host's own) are ignored. An empty attribute is the text "": a number or
// a stop string it is not, an empty logit bias or list of bad words it is, and data-model="" is the default.
export function optionsFromDataset(dataset) {
  const options = {};
  for (const name of OPTION_NAMES) {
    const text = dataset[name];
    if (text === undefined || (name === 'model' && text === '')) continue;
    const label = attributeName(name);
    if (name === 'speculative') options[name] = readSpeculative(text, label);
    else if (name in OWN_OPTIONS) options[name] = OWN_OPTIONS[name][0](text);
    else options[name] = readOptionText(name, text, label);
    if (OWN_OPTIONS[name]?.[0] === parseBoolean && typeof options[name] !== 'boolean') {
      throw new RangeError(`${label}: expected ${BOOLEAN_TEXT}, got ${JSON.stringify(text)}`);
    }
    const choices = { theme: THEMES, device: DEVICES }[name];
    if (choices && !choices.includes(text)) throw new RangeError(`${label}: expected one of ${choices.join(', ')}, got ${JSON.stringify(text)}`);
  }
  return options;
}

// data-speculative="lookup": speculation with prompt-lookup drafts, the one draft source a text names that a widget
// can use (a draft model is an object of the page's)
function readSpeculative(text, label) {
  if (text !== LOOKUP_TEXT) throw new RangeError(`${label}: expected ${JSON.stringify(LOOKUP_TEXT)}, got ${JSON.stringify(text)}`);
  return { draft: SPECULATIVE_OPTIONS.draft.parse(text) };
}

// -> the complete options of a widget from its data-* attributes (optionsFromDataset), checked together; a
// complaint about one option names its attribute.
export function completeDatasetOptions(dataset, defaultModelUrl) {
  const options = optionsFromDataset(dataset);
  const texts = Object.fromEntries(GENERATE_OPTIONS.filter((name) => dataset[name] !== undefined)
    .map((name) => [name, { label: attributeName(name), text: dataset[name] }]));
  try {
    return completeOptions(options, defaultModelUrl);
  } catch (error) {
    throw relabelOptionError(error, texts);
  }
}

// -> the widget's options complete with their defaults, every one checked (the generation options together, as
// generate() will take them) before anything of the widget is built: a value it does not take throws, naming it.
export function completeOptions(options, defaultModelUrl) {
  if (options === null || typeof options !== 'object') throw new TypeError('GPT2Widget.mount: options must be an object');
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.includes(name)) throw new TypeError(`GPT2Widget.mount: unknown option "${name}" (known: ${OPTION_NAMES.join(', ')})`);
  }
  const fallback = (name) => (name in OWN_OPTIONS ? OWN_OPTIONS[name][1] : WIDGET_DEFAULTS[name] ?? OPTION_TABLE[name].default);
  const complete = Object.fromEntries(OPTION_NAMES.map((name) => [name, options[name] ?? fallback(name)]));
  if (!THEMES.includes(complete.theme)) throw new RangeError(`GPT2Widget.mount: theme must be one of ${THEMES.join(', ')}`);
  if (!DEVICES.includes(complete.device)) throw new RangeError(`GPT2Widget.mount: device must be one of ${DEVICES.join(', ')}`);
  for (const name of ['autoGenerate', 'lazy']) {
    if (typeof complete[name] !== 'boolean') throw new TypeError(`GPT2Widget.mount: ${name} must be a boolean, got ${JSON.stringify(complete[name])}`);
  }
  normalizeGenerateOptions(Object.fromEntries(GENERATE_OPTIONS.map((name) => [name, complete[name]])));
  complete.model = modelUrl(complete.model === undefined ? defaultModelUrl : resolveAgainstPage(complete.model));
  complete.prompt = String(complete.prompt);
  return complete;
}

// A GGUF file's URL as it is; a folder's with a trailing slash (modelLocation), so that widgets of one folder
// share it however it is spelled.
function modelUrl(address) {
  return modelLocation(address).url.href;
}
