// The settings: the Weights menu, and the inputs kept across visits (localStorage), the Device menu's too.
import { $, elements, state } from './page_state.js';
import { GENERATE_OPTIONS, optionsWith } from '../lib/generation/option_table.js';
import { formatBytes } from '../lib/progress_text.js';

// The controls of generate()'s options (the options' table's `control`: an id in public/index.html) -> the
// option's name; page_state.js's elements name each control by its id in camelCase.
const OPTION_OF_CONTROL = Object.fromEntries(optionsWith('control').map(([name, { control }]) => [control, name]));
const elementName = (id) => id.replace(/-([a-z])/g, (_, letter) => letter.toUpperCase());

// The number fields of generate()'s options (#top-k, or a Compare column's data-setting="topK") take the options'
// table's ranges, narrowed where the page's markup offers less (a temperature up to 2): the browser then refuses a
// value outside before generate() would. root: the document, or a Compare column's template content.
export function applyOptionRanges(root) {
  for (const input of root.querySelectorAll('input[type="number"]')) {
    const name = input.dataset.setting ?? OPTION_OF_CONTROL[input.id];
    const entry = Object.hasOwn(GENERATE_OPTIONS, name) ? GENERATE_OPTIONS[name] : null;
    if (entry?.kind !== 'integer' && entry?.kind !== 'number') continue;
    if (input.min === '' || Number(input.min) < entry.min) input.min = String(entry.min);
    if (input.max === '' || Number(input.max) > entry.max) input.max = String(entry.max);
  }
}

// The weight format a choice loads with: the Weights setting, unless the model only fits as int8 (int8Only, or
// fp32Bytes: the size its fp32 weights turned out to need); none for a GGUF file, which runs in its own types.
export function weightsFor(choice) {
  if (choice.gguf) return undefined;
  return choice.int8Only || choice.fp32Bytes ? 'int8' : weightsSetting();
}

// The Weights menu holds the user's setting, fp32 or int8, which applies to safetensors folders. While a model
// that cannot follow it is loading or in use, the menu shows what that model runs instead, disabled, with the
// reason under it: a GGUF file's own types, or int8 for a model whose fp32 weights do not fit.
const FILE_TYPES_VALUE = 'file';

const fileTypesOption = new Option('', FILE_TYPES_VALUE);

export function weightsSetting() {
  return elements.weights.disabled ? state.weightsSetting : elements.weights.value;
}

// -> { value, label (FILE_TYPES_VALUE's), reason } for a choice that runs weights of its own, else null
function fixedWeights(choice) {
  if (choice.gguf) {
    const types = choice === state.modelChoice && !state.loadingChoice ? state.model.weightTypes : null;
    return {
      value: FILE_TYPES_VALUE,
      label: types ? `${types} (the file's own)` : "the file's own types",
      reason: 'A GGUF file runs in its own quantized types; this setting applies to safetensors folders.',
    };
  }
  if (choice.int8Only || choice.fp32Bytes) {
    const size = choice.fp32Bytes ? ` (${formatBytes(choice.fp32Bytes)})` : '';
    return { value: 'int8', reason: `Its fp32 weights${size} do not fit in WebAssembly's memory, so it runs as int8.` };
  }
  return null;
}

export function showWeightsSetting() {
  const choice = state.loadingChoice ?? state.modelChoice;
  const fixed = choice ? fixedWeights(choice) : null;
  state.weightsSetting = weightsSetting();
  if (fixed?.value === FILE_TYPES_VALUE) {
    fileTypesOption.textContent = fixed.label;
    elements.weights.append(fileTypesOption);
  } else {
    fileTypesOption.remove();
  }
  elements.weights.value = fixed?.value ?? state.weightsSetting;
  elements.weights.disabled = fixed !== null;
  elements.weightsReason.textContent = fixed?.reason ?? '';
  elements.weightsReason.hidden = fixed === null;
}

const SETTINGS_KEY = 'gpt2-wasm.settings';

// The inputs kept across visits, as page_state.js's elements name them: the prompt, every option's control, the
// Weights and Device menus. The logit bias and banned words are kept as they were typed (option_text.js reads them
// at Generate).
export const PERSISTED_INPUTS = ['prompt', ...Object.keys(OPTION_OF_CONTROL).map(elementName), 'weights', 'device'];

export function saveSettings() {
  const settings = Object.fromEntries(PERSISTED_INPUTS.map((name) => {
    const input = elements[name];
    if (name === 'weights') return [name, weightsSetting()];
    return [name, input.type === 'checkbox' ? input.checked : input.value];
  }));
  try {
    localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
  } catch {
    // Storage can be full or disabled (private browsing); settings then last for this visit only.
  }
}

export function restoreSettings() {
  applyOptionRanges(document);
  applyOptionRanges($('compare-column-template').content);
  let settings;
  try {
    settings = JSON.parse(localStorage.getItem(SETTINGS_KEY) ?? '{}');
  } catch {
    return;
  }
  for (const name of PERSISTED_INPUTS) {
    const input = elements[name];
    const value = settings?.[name];
    if (input.type === 'checkbox' && typeof value === 'boolean') input.checked = value;
    else if (typeof value === 'string' && isValidChoice(input, value)) input.value = value;
  }
}

// A stored value for a text field, or one of a menu's options (a menu set to anything else would be empty).
function isValidChoice(input, value) {
  if (input.type === 'checkbox') return false;
  return input.tagName !== 'SELECT' || [...input.options].some((option) => option.value === value);
}
