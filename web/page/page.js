// Page logic: model choice and download progress, the stored models, settings, streaming generation with
// per-token probabilities, Continue, speed statistics and the ms/token chart, and the Analyze text mode (each
// token of a text coloured by the rank the model gave it). All model and user text is inserted with
// textContent, never as HTML.
import { deleteCachedModel, listCachedModels, loadModel } from '../lib/gpt2.js';
import { TokenTimeChart } from './chart.js';
import { hubFileUrl, isGgufName } from '../lib/loading/model_files.js';
import { requestPersistentStorage } from '../lib/loading/model_cache.js';
import { formatBytes, formatDuration, formatPace } from './progress_text.js';

// The bundled model comes twice: first (the default) as one Q4_0 GGUF file, a third of the download of its
// safetensors folder for a held-out loss within 0.01 of fp32 (public/models/tiny-shakespeare/README.md); then
// as that folder, which the Weights setting applies to. Download sizes of the others are those of
// model.safetensors on the Hugging Face Hub (float32 weights). int8Only: the fp32 weights (3.1 and 6.2 GB)
// exceed what one WebAssembly allocation can hold (2 GB), so the model always loads quantized (0.8 and 1.6 GB).
const MODEL_CHOICES = [
  { value: 'tiny-shakespeare', label: 'Tiny Shakespeare (bundled, offline)', source: 'models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf', gguf: true },
  { value: 'tiny-shakespeare-safetensors', label: 'Tiny Shakespeare, safetensors (bundled, fp32 or int8)', source: 'models/tiny-shakespeare/' },
  { value: 'gpt2', label: 'GPT-2 124M', size: '548 MB', source: hubFileUrl('openai-community/gpt2') },
  { value: 'gpt2-medium', label: 'GPT-2 355M', size: '1.5 GB', source: hubFileUrl('openai-community/gpt2-medium') },
  { value: 'gpt2-large', label: 'GPT-2 774M', size: '3.2 GB', source: hubFileUrl('openai-community/gpt2-large'), int8Only: true },
  { value: 'gpt2-xl', label: 'GPT-2 1.5B', size: '6.4 GB', source: hubFileUrl('openai-community/gpt2-xl'), int8Only: true },
  { value: 'distilgpt2', label: 'DistilGPT2', size: '353 MB', source: hubFileUrl('distilbert/distilgpt2') },
];

// GGUF files on the Hub, one file each, run in their own (quantized) types; sizes as the Hub lists them. Only
// files whose types the engine runs (F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): the Hub's Q2_K
// and Q3_K variants are left out.
const GGUF_REPOSITORY = 'QuantFactory/gpt2-GGUF';
const GGUF_CHOICES = [
  ['Q8_0', '178 MB'], ['Q6_K', '138 MB'], ['Q5_1', '130 MB'], ['Q5_K_M', '127 MB'], ['Q5_0', '122 MB'],
  ['Q5_K_S', '122 MB'], ['Q4_1', '114 MB'], ['Q4_K_M', '113 MB'], ['Q4_0', '107 MB'], ['Q4_K_S', '107 MB'],
].map(([type, size]) => ggufChoice('GPT-2 124M', GGUF_REPOSITORY, `gpt2.${type}.gguf`, size)).concat([
  ggufChoice('GPT-2 355M', 'mradermacher/gpt2-medium-GGUF', 'gpt2-medium.Q4_K_M.gguf', '271 MB'),
  ggufChoice('GPT-2 1.5B', 'mradermacher/gpt2-xl-GGUF', 'gpt2-xl.Q4_K_M.gguf', '1.19 GB'),
]);

function ggufChoice(model, repository, file, size) {
  return { value: `gguf:${repository}/${file}`, label: `${model} · ${file}`, size, source: hubFileUrl(repository, file), gguf: true };
}
const LOCAL_FILES_VALUE = 'local-files';
const LOADED_LOCAL_VALUE = 'loaded-local';
const URL_PARAMETER_VALUE = 'url-parameter';
const TOP_ALTERNATIVES = 5;
// Analyze text colours a token by the rank the model gave it, in GLTR's four buckets (the first that holds it).
const RANK_BUCKETS = [
  { name: 'top-10', maxRank: 10, label: 'top 10' },
  { name: 'top-100', maxRank: 100, label: 'top 100' },
  { name: 'top-1000', maxRank: 1000, label: 'top 1000' },
  { name: 'beyond', maxRank: Infinity, label: 'beyond the top 1000' },
];
const SETTINGS_KEY = 'gpt2-wasm.settings';

const $ = (id) => document.getElementById(id);
const elements = {
  form: $('generate-form'),
  prompt: $('prompt'),
  generate: $('generate'),
  continue: $('continue'),
  stop: $('stop'),
  modes: document.querySelectorAll('input[name="mode"]'),
  promptHeading: $('prompt-heading'),
  outputHint: $('output-hint'),
  statsCard: $('stats-card'),
  analyzeForm: $('analyze-form'),
  analyzeText: $('analyze-text'),
  analyze: $('analyze'),
  analysis: $('analysis'),
  analysisText: $('analysis-text'),
  perplexity: $('analysis-perplexity'),
  analyzedTokens: $('analysis-tokens'),
  reloadModel: $('reload-model'),
  modelStatus: $('model-status'),
  error: $('error'),
  progressPanel: $('progress-panel'),
  progress: $('download-progress'),
  progressDetail: $('download-detail'),
  output: $('output'),
  model: $('model'),
  localFiles: $('local-files'),
  storedModels: $('stored-models'),
  storedModelsEmpty: $('stored-models-empty'),
  weights: $('weights'),
  weightsReason: $('weights-reason'),
  kvCache: $('kv-cache'),
  kvStorage: $('kv-storage'),
  temperature: $('temperature'),
  topK: $('top-k'),
  topP: $('top-p'),
  maxNewTokens: $('max-new-tokens'),
  seed: $('seed'),
  tooltip: $('token-tooltip'),
  stats: {
    speed: $('stat-speed'),
    prefill: $('stat-prefill'),
    reused: $('stat-reused'),
    context: $('stat-context'),
    kv: $('stat-kv'),
    stop: $('stat-stop'),
  },
};
const PERSISTED_INPUTS = ['prompt', 'temperature', 'topK', 'topP', 'maxNewTokens', 'seed', 'kvCache', 'kvStorage', 'weights'];

const chart = new TokenTimeChart($('token-chart'));
// output <span> -> its generated piece, or analyzed token as { text, token, probability, rank, alternatives }
const pieceOfToken = new WeakMap();

const state = {
  model: null,
  modelChoice: null, // the choice (with .value and .label) whose model is loaded
  modelWeights: null, // 'fp32' | 'int8' | undefined (a GGUF file): the weights setting the model loaded with
  weightsSetting: 'fp32', // the user's Weights setting, also while the menu shows what a model runs instead
  failedChoice: null, // the choice whose load failed last, which the Weights menu retries
  modelNotCached: null, // why the Cache API did not keep the model (e.g. a full quota); null: it did, or local files
  loadingChoice: null, // the choice being loaded, if any
  urlChoice: null, // the folder given as ?model=, if any
  localChoice: null, // the latest local files picked
  loading: null, // AbortController of the model load in progress
  generation: null, // AbortController of the generation in progress
  latestGeneration: null, // AbortController of the latest generation, whose run the output and the stats show
  analyzing: false, // whether an Analyze text run is in progress
  recovery: null, // 'reloading' | 'failed' after the engine crashed: the model is not usable (null: it is)
  outputIds: null, // the token ids of the prompt and the tokens the output shows, for Continue
};

// ---- Model choice -------------------------------------------------------------------------------

function fillModelSelect(urlChoice) {
  const choices = urlChoice ? [urlChoice, ...MODEL_CHOICES] : MODEL_CHOICES;
  elements.model.append(...choices.map(choiceOption));
  const ggufGroup = document.createElement('optgroup');
  ggufGroup.label = 'GGUF files (quantized)';
  ggufGroup.append(...GGUF_CHOICES.map(choiceOption));
  elements.model.append(ggufGroup, new Option('Open local files…', LOCAL_FILES_VALUE));
}

function choiceOption(choice) {
  return new Option(choice.size ? `${choice.label} (${choice.size} download)` : choice.label, choice.value);
}

// `?model=<URL>` preselects a model folder, or a GGUF file (a path ending in .gguf), absolute or relative to
// this page.
function choiceFromUrlParameter() {
  const address = new URLSearchParams(location.search).get('model');
  if (!address) return null;
  let url;
  try {
    url = new URL(address, location.href);
  } catch {
    throw new Error(`The model address in this page's URL is not a valid URL: ${address}`);
  }
  const gguf = isGgufName(url.pathname);
  if (!gguf && !url.pathname.endsWith('/')) url.pathname += '/';
  return { value: URL_PARAMETER_VALUE, label: `Model at ${url.href}`, source: url.href, gguf };
}

function findChoice(value) {
  return [...MODEL_CHOICES, ...GGUF_CHOICES, state.urlChoice, state.localChoice].find((choice) => choice?.value === value);
}

function onModelSelected() {
  const value = elements.model.value;
  if (value === LOCAL_FILES_VALUE) {
    elements.localFiles.value = '';
    elements.localFiles.click();
    return;
  }
  switchModel(findChoice(value));
}

function onLocalFilesChosen() {
  const files = [...elements.localFiles.files];
  if (files.length === 0) {
    restoreModelSelection();
    return;
  }
  const weights = files.find((file) => isGgufName(file.name)) ?? files.find((file) => file.name.endsWith('.safetensors'));
  const label = `Local files${weights ? ` (${weights.name}, ${formatBytes(weights.size)})` : ''}`;
  // One file alone cannot be a folder's: it is loaded as a GGUF file (see model_sources.js).
  const gguf = files.length === 1 || files.some((file) => isGgufName(file.name));
  const choice = { value: LOADED_LOCAL_VALUE, label, source: files, gguf };
  state.localChoice = choice;
  elements.model.querySelector(`option[value="${LOADED_LOCAL_VALUE}"]`)?.remove();
  const option = new Option(label, LOADED_LOCAL_VALUE);
  elements.model.insertBefore(option, elements.model.querySelector(`option[value="${LOCAL_FILES_VALUE}"]`));
  elements.model.value = LOADED_LOCAL_VALUE;
  switchModel(choice);
}

// After a failed load the menu shows the model in use again, or nothing when there is none, so that
// choosing the failed model again (a retry) is a change too.
function restoreModelSelection() {
  if (state.modelChoice) elements.model.value = state.modelChoice.value;
  else elements.model.selectedIndex = -1;
}

// The weight format a choice loads with: the Weights setting, unless the model only fits as int8 (int8Only, or
// fp32Bytes: the size its fp32 weights turned out to need); none for a GGUF file, which runs in its own types.
function weightsFor(choice) {
  if (choice.gguf) return undefined;
  return choice.int8Only || choice.fp32Bytes ? 'int8' : weightsSetting();
}

// ---- Weights setting ------------------------------------------------------------------------------
// The Weights menu holds the user's setting, fp32 or int8, which applies to safetensors folders. While a model
// that cannot follow it is loading or in use, the menu shows what that model runs instead, disabled, with the
// reason under it: a GGUF file's own types, or int8 for a model whose fp32 weights do not fit.

const FILE_TYPES_VALUE = 'file';
const fileTypesOption = new Option('', FILE_TYPES_VALUE);

function weightsSetting() {
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

function showWeightsSetting() {
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

// The bytes an "out of memory" error says the fp32 weights need, when that is why a load failed, else null.
function fp32WeightsTooLarge(error, weights) {
  const need = weights === 'fp32' ? /^out of memory: need (\d+) bytes for the weights\b/.exec(error?.message ?? '') : null;
  return need ? Number(need[1]) : null;
}

// Loads a model; choosing again cancels this load. The previous model stays in use until the new one is
// ready, and stays usable if the new one fails.
async function switchModel(choice) {
  stopGeneration();
  state.loading?.abort();
  const controller = new AbortController();
  state.loading = controller;
  state.loadingChoice = choice;
  state.failedChoice = null;
  const weights = weightsFor(choice);
  clearError();
  showWeightsSetting();
  const why = choice.fp32Bytes ? `: its fp32 weights, ${formatBytes(choice.fp32Bytes)}, do not fit in WebAssembly's memory` : '';
  showModelStatus(weights ? `Loading ${choice.label} (${weights} weights${why})…` : `Loading ${choice.label}…`);
  showProgress({ loaded: 0, total: 0 });
  updateControls();
  let notCached = null;  // why the Cache API did not keep the model (loader.js), if it did not
  const onProgress = (progress) => {
    notCached = progress.notCached ?? notCached;
    showProgress(progress);
  };
  try {
    const model = await loadModel(choice.source, { signal: controller.signal, onProgress, weights });
    if (controller.signal.aborted) {
      model.dispose();
      return;
    }
    state.model?.dispose();
    state.model = model;
    state.modelChoice = choice;
    state.modelWeights = weights;
    state.modelNotCached = notCached;
    state.recovery = null;
    elements.reloadModel.hidden = true;
  } catch (error) {
    if (controller.signal.aborted) return; // replaced by a newer choice: not an error
    const fp32Bytes = fp32WeightsTooLarge(error, weights);
    if (fp32Bytes) {
      choice.fp32Bytes = fp32Bytes;
      void switchModel(choice);  // as int8 now; the load it starts is the one in progress
      return;
    }
    state.failedChoice = choice;
    showError(`Could not load ${choice.label}: ${error.message}`);
    restoreModelSelection();
  } finally {
    if (state.loading === controller) {
      state.loading = null;
      state.loadingChoice = null;
      elements.progressPanel.hidden = true;
      showWeightsSetting();
      showModelStatus(describeLoadedModel());
      updateControls();
      refreshStoredModels();
    }
  }
}

// A new weight format reloads the model being loaded, or the one whose load failed last (a retry), or else the
// one in use (unless it already runs that format).
function onWeightsChanged() {
  saveSettings();
  const choice = state.loadingChoice ?? state.failedChoice ?? state.modelChoice;
  if (!choice) return;
  if (choice === state.modelChoice && weightsFor(choice) === state.modelWeights) return;
  switchModel(choice);
}

function describeLoadedModel() {
  if (!state.model) return 'No model loaded: choose one in Settings.';
  const { n_layer, n_embd, n_ctx } = state.model.config;
  const { weightBytes, weightTypes, threads } = state.model;
  // threads: more than one only on a cross-origin-isolated page (tools/serve.mjs sends COOP + COEP)
  const fp32TooLarge = state.modelChoice.fp32Bytes ? ' (its fp32 weights do not fit)' : '';
  const details = `${n_layer} layers, width ${n_embd}, ${n_ctx}-token context, ${formatBytes(weightBytes)} of ` +
    `${weightTypes} weights${fp32TooLarge}, ${threads} ${threads === 1 ? 'thread' : 'threads'}`;
  const kept = state.modelNotCached ? ` · not kept for offline use: ${state.modelNotCached}` : '';
  return `Ready: ${state.modelChoice.label} · ${details}${kept}`;
}

// Called with the loader's progress events (loader.js) for the file being read: { file, loaded, total,
// fraction, bytesPerSecond, secondsLeft (these three null while unknown), caching, retry? }. The worker that
// loads cannot ask to keep the site's storage (persist() is the page's), so the page asks for it.
function showProgress({ file, loaded, total, fraction, bytesPerSecond, secondsLeft, caching, retry }) {
  if (caching) requestPersistentStorage(total);
  elements.progressPanel.hidden = false;
  if (Number.isFinite(fraction)) elements.progress.value = fraction;
  else elements.progress.removeAttribute('value'); // indeterminate until sizes are known
  const percent = Number.isFinite(fraction) ? ` (${Math.floor(fraction * 100)}%)` : '';
  const bytes = total > 0 ? `${formatBytes(loaded)} of ${formatBytes(total)}` : formatBytes(loaded);
  const pace = retry ? ` · connection lost, retrying${retry.delayMs > 0 ? ` in ${formatDuration(retry.delayMs / 1000)}` : ''}`
    : formatPace({ bytesPerSecond, secondsLeft });
  elements.progressDetail.textContent = file ? `${file}: ${bytes}${percent}${pace}` : 'Starting…';
}

// ---- Stored models -------------------------------------------------------------------------------

// The models the Cache API keeps (listCachedModels), each with its size and a Delete button; listed again after
// each load and delete. Deleting the model in use is allowed: it stays loaded, and loading it again downloads it.
let storedModelsRefreshes = 0;  // a refresh that ends after a later one has started shows nothing
const MEGABYTES = new Intl.NumberFormat('en', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

async function refreshStoredModels() {
  const refresh = ++storedModelsRefreshes;
  let models;
  let failure = null;
  try {
    models = await listCachedModels();
  } catch (error) {
    [models, failure] = [[], error];
  }
  if (refresh !== storedModelsRefreshes) return;
  elements.storedModels.replaceChildren(...models.map(storedModelItem));
  elements.storedModels.hidden = models.length === 0;
  elements.storedModelsEmpty.hidden = models.length > 0;
  elements.storedModelsEmpty.textContent = failure ? `Could not read the stored models: ${failure.message}` : 'No models stored';
}

function storedModelItem({ source, bytes, complete }) {
  const name = storedModelName(source);
  const label = document.createElement('span');
  label.className = 'stored-model-name';
  label.textContent = name;
  const size = document.createElement('data');  // its value: the exact bytes
  size.className = 'stored-model-size';
  size.value = String(bytes);
  size.textContent = `${MEGABYTES.format(bytes / 1e6)} MB${complete ? '' : ', incomplete'}`;
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = 'Delete';
  button.setAttribute('aria-label', `Delete ${name}`);
  button.addEventListener('click', () => deleteStoredModel(source, button));
  const item = document.createElement('li');
  item.append(label, ' ', size, ' ', button);  // the spaces separate the parts in what screen readers get
  return item;
}

// A stored model's name: the menu's label when its source is a menu entry's, else its URL.
function storedModelName(source) {
  const choices = [...MODEL_CHOICES, ...GGUF_CHOICES, state.urlChoice];
  const choice = choices.find((entry) => entry && new URL(entry.source, document.baseURI).href === source);
  return choice?.label ?? source;
}

// Keyboard users keep their place: focus moves to the Delete button that takes the deleted one's place, or to
// the list's empty state.
async function deleteStoredModel(source, button) {
  const position = [...elements.storedModels.children].indexOf(button.closest('li'));
  const hadFocus = document.activeElement === button;
  button.disabled = true;
  try {
    await deleteCachedModel(source);
  } catch (error) {
    showError(`Could not delete ${storedModelName(source)}: ${error.message}`);
  }
  await refreshStoredModels();
  if (!hadFocus) return;
  const buttons = elements.storedModels.querySelectorAll('button');
  (buttons[Math.min(position, buttons.length - 1)] ?? elements.storedModelsEmpty).focus();
}

// ---- Generation ---------------------------------------------------------------------------------

// Generate starts the output from the prompt; Continue generates more after what the output shows (the prompt
// it started from and the tokens so far), with the same settings. It gives the model those token ids, not their
// text (which the tokenizer may cut into other tokens), so the model's cache holds all but the last of them
// (generate() reuses the longest common prefix of its cache) and only that one is fed again.
function generate() {
  runGeneration(elements.prompt.value, { continuing: false });
}

function continueGeneration() {
  if (hasGeneratedOutput()) runGeneration(elements.output.textContent, { continuing: true });
}

function hasGeneratedOutput() {
  return elements.output.querySelector('.token') !== null;
}

async function runGeneration(text, { continuing }) {
  if (!state.model || state.generation || state.loading || state.analyzing) return;
  const options = readGenerationOptions();
  if (!options) return;
  const controller = new AbortController();
  state.generation = state.latestGeneration = controller;
  clearError();
  updateControls();
  if (continuing) continueOutput();
  else startOutput(text);
  chart.startRun(options.useKVCache);
  let run = null;
  try {
    // The ids of what the output shows; an empty prompt (the model starts from <|endoftext|>) keeps none, and
    // Continue then gives the text.
    if (!continuing) state.outputIds = await state.model.encode(text);
    const prompt = continuing && state.outputIds?.length ? state.outputIds : text;
    run = state.model.generate(prompt, { ...options, signal: controller.signal, topAlternatives: TOP_ALTERNATIVES });
    let isFirstPiece = true;
    for await (const piece of run) {
      if (controller.signal.aborted) break;
      if (Number.isInteger(piece.token)) state.outputIds?.push(piece.token);
      appendToken(piece);
      // The first piece's time is the prompt's prefill, shown on its own; the chart is about decode steps.
      if (!isFirstPiece) chart.addPoint(piece.position, piece.ms);
      isFirstPiece = false;
      showStats(run.stats);
    }
  } catch (error) {
    if (error.name === 'EngineAbortedError') recoverFromCrash(error);
    else if (!controller.signal.aborted) showError(`Generation failed: ${error.message}`);
  } finally {
    // A stopped run ends in the worker only at its next token, maybe after a newer run has started: its stats
    // must not replace the newer run's.
    if (run && state.latestGeneration === controller) showStats(run.stats, controller.signal.aborted);
    finishGeneration(controller);
  }
}

// The engine aborted (a genuine out-of-memory, say): the model loads itself again (gpt2.js) while the page says
// so; if that fails, one button tries again.
function recoverFromCrash(crash) {
  const { label } = state.modelChoice;
  const crashed = `The engine crashed (${crash.reason}) and was restarted`;
  awaitRecovery(`${crashed}; loading ${label} again…`, `${crashed}; ${label} was loaded again: Generate to continue.`,
    `${crashed}, and ${label} could not be loaded again`);
}

function reloadAfterFailedRecovery() {
  const { label } = state.modelChoice;
  awaitRecovery(`Loading ${label} again…`, `${label} was loaded again: Generate to continue.`, `${label} could not be loaded again`);
}

// Says `during` while the model is not usable, then `loaded`, or `failed` with the reason and the reload button.
async function awaitRecovery(during, loaded, failed) {
  const { model } = state;
  state.recovery = 'reloading';
  elements.reloadModel.hidden = true;
  updateControls();
  showError(during);
  try {
    await model.whenUsable();
    if (state.model !== model) return;
    state.recovery = null;
    showError(loaded);
  } catch (error) {
    if (state.model !== model) return;
    state.recovery = 'failed';
    showError(`${failed}: ${error.message}`);
    elements.reloadModel.textContent = `Load ${state.modelChoice.label} again`;
    elements.reloadModel.hidden = false;
  } finally {
    updateControls();
  }
}

// The controls come back at once on Stop, without waiting for the engine to finish its current step.
function stopGeneration() {
  const controller = state.generation;
  if (!controller) return;
  controller.abort();
  elements.stats.stop.textContent = 'stopped';
  finishGeneration(controller);
}

function finishGeneration(controller) {
  if (state.generation !== controller) return;
  state.generation = null;
  elements.output.setAttribute('aria-busy', 'false');
  updateControls();
}

// Returns the generate() options, or null after pointing at the first invalid field.
function readGenerationOptions() {
  const numberFields = [elements.temperature, elements.topK, elements.topP, elements.maxNewTokens, elements.seed];
  const invalid = numberFields.find((input) => !input.checkValidity() || (input !== elements.seed && input.value === ''));
  if (invalid) {
    const label = document.querySelector(`label[for="${invalid.id}"]`).textContent;
    showError(`${label}: ${invalid.validationMessage || 'please enter a number.'}`);
    invalid.focus();
    return null;
  }
  return {
    temperature: elements.temperature.valueAsNumber,
    topK: elements.topK.valueAsNumber,
    topP: elements.topP.valueAsNumber,
    maxNewTokens: elements.maxNewTokens.valueAsNumber,
    seed: elements.seed.value === '' ? undefined : elements.seed.valueAsNumber,
    useKVCache: elements.kvCache.checked,
    kvCache: elements.kvStorage.value,
  };
}

function startOutput(prompt) {
  hideTooltip();
  const promptSpan = document.createElement('span');
  promptSpan.className = 'prompt-text';
  promptSpan.textContent = prompt;
  elements.output.replaceChildren(promptSpan);
  startStats();
}

function continueOutput() {
  hideTooltip();
  startStats();
}

function startStats() {
  elements.output.setAttribute('aria-busy', 'true');
  for (const cell of Object.values(elements.stats)) cell.textContent = '–';
}

function appendToken(piece) {
  const span = document.createElement('span');
  span.className = 'token';
  span.textContent = piece.text;
  // Roving tabindex: the output is one Tab stop; arrow keys move between tokens.
  span.tabIndex = elements.output.querySelector('.token') ? -1 : 0;
  pieceOfToken.set(span, piece);
  const { output } = elements;
  // Follow the text as it grows, unless the reader has scrolled up to read earlier output.
  const followingEnd = output.scrollHeight - output.scrollTop - output.clientHeight < 24;
  output.append(span);
  if (followingEnd) output.scrollTop = output.scrollHeight;
}

const STOP_REASONS = {
  length: 'token limit',
  eos: 'end of text',
  stop: 'stop sequence',
  abort: 'stopped',
  error: 'error',
};

function showStats(stats, stopped = false) {
  if (!stats) return;
  const { speed, prefill, reused, context, kv, stop } = elements.stats;
  if (Number.isFinite(stats.decodeTokensPerSecond) && stats.decodeTokensPerSecond > 0) {
    speed.textContent = stats.decodeTokensPerSecond.toFixed(1);
  }
  if (Number.isFinite(stats.prefillMs)) {
    const promptTokens = document.createElement('small');
    promptTokens.textContent = `for ${stats.promptTokens} prompt tokens`;
    prefill.replaceChildren(`${stats.prefillMs.toFixed(1)} ms`, promptTokens);
  }
  if (Number.isFinite(stats.prefillMs) && Number.isFinite(stats.reusedTokens)) {
    const promptTokens = document.createElement('small');
    promptTokens.textContent = `of ${stats.promptTokens} prompt tokens`;
    reused.replaceChildren(String(stats.reusedTokens), promptTokens);
  }
  if (Number.isFinite(stats.contextUsed)) context.textContent = `${stats.contextUsed} / ${stats.contextSize} tokens`;
  if (Number.isFinite(stats.kvCacheBytes)) {
    kv.textContent = stats.kvCacheBytes > 0 ? `${formatBytes(stats.kvCacheBytes)} (${stats.kvCache})` : 'none';
  }
  if (stopped) stop.textContent = 'stopped';
  else if (stats.stopReason) stop.textContent = STOP_REASONS[stats.stopReason] ?? stats.stopReason;
}

// ---- Analyze text -------------------------------------------------------------------------------

async function analyze() {
  const { model } = state;
  if (!model || state.analyzing || state.generation || state.loading || state.recovery) return;
  const text = elements.analyzeText.value;
  if (text === '') {
    showError('Text to analyze: paste or type a text first.');
    elements.analyzeText.focus();
    return;
  }
  state.analyzing = true;
  clearError();
  updateControls();
  elements.analysisText.setAttribute('aria-busy', 'true');
  try {
    const result = await model.score(text, { topAlternatives: TOP_ALTERNATIVES });
    if (state.model === model) showAnalysis(result);
  } catch (error) {
    if (state.model !== model) return;
    if (error.name === 'EngineAbortedError') recoverFromCrash(error);
    else showError(`Analysis failed: ${error.message}`);
  } finally {
    state.analyzing = false;
    elements.analysisText.setAttribute('aria-busy', 'false');
    updateControls();
  }
}

// result: model.score()'s { tokens: [{ token, text, logprob, rank, alternatives: [{ token, text, logprob }] }],
// perplexity }.
function showAnalysis({ tokens, perplexity }) {
  hideTooltip();
  const spans = tokens.map(analyzedTokenSpan);
  if (spans.length > 0) spans[0].tabIndex = 0; // roving tabindex, as in the output
  elements.analysisText.replaceChildren(...spans);
  elements.perplexity.textContent = tokens.length > 0 ? formatPerplexity(perplexity) : '–';
  elements.analyzedTokens.textContent = String(tokens.length);
  for (const bucket of RANK_BUCKETS) {
    const count = tokens.filter((token) => rankBucket(token.rank) === bucket).length;
    const share = tokens.length > 0 ? ` (${Math.round((100 * count) / tokens.length)} %)` : '';
    $(`count-${bucket.name}`).textContent = `${count} ${count === 1 ? 'token' : 'tokens'}${share}`;
  }
}

function analyzedTokenSpan({ token, text, logprob, rank, alternatives }) {
  const span = document.createElement('span');
  span.className = `token rank-${rankBucket(rank).name}`;
  span.textContent = text;
  span.tabIndex = -1;
  pieceOfToken.set(span, {
    text, token, rank, probability: Math.exp(logprob),
    alternatives: alternatives.map((alternative) => ({ ...alternative, probability: Math.exp(alternative.logprob) })),
  });
  return span;
}

function rankBucket(rank) {
  return RANK_BUCKETS.find((bucket) => rank <= bucket.maxRank);
}

function formatPerplexity(perplexity) {
  return perplexity < 1000 ? perplexity.toFixed(2) : String(Math.round(perplexity));
}

// Generate shows the prompt, the output and the speed; Analyze text its text box and the analysis.
function showMode(mode) {
  const analyzing = mode === 'analyze';
  hideTooltip();
  elements.promptHeading.textContent = analyzing ? 'Text to analyze' : 'Prompt';
  for (const element of [elements.form, elements.output, elements.outputHint, elements.statsCard]) element.hidden = analyzing;
  for (const element of [elements.analyzeForm, elements.analysis]) element.hidden = !analyzing;
}

// ---- Token tooltip ------------------------------------------------------------------------------

function showTooltip(span) {
  const piece = pieceOfToken.get(span);
  if (!piece) return;
  const { tooltip } = elements;
  tooltip.querySelector('.tooltip-probability').textContent = `${visibleText(piece.text)}  p = ${formatProbability(piece.probability)}`;
  const rank = tooltip.querySelector('.tooltip-rank');
  rank.hidden = piece.rank === undefined;
  if (piece.rank !== undefined) rank.textContent = `Rank ${piece.rank}: ${rankBucket(piece.rank).label}`;
  const list = tooltip.querySelector('.tooltip-alternatives');
  list.replaceChildren(...(piece.alternatives ?? []).map((alternative) => alternativeItem(alternative, piece.token)));
  tooltip.hidden = false;
  span.setAttribute('aria-describedby', tooltip.id);
  placeTooltip(span);
}

function alternativeItem(alternative, chosenToken) {
  const item = document.createElement('li');
  item.classList.toggle('chosen', alternative.token === chosenToken);
  const text = document.createElement('span');
  text.className = 'alternative-text';
  text.textContent = visibleText(alternative.text);
  const bar = document.createElement('span');
  bar.className = 'alternative-bar';
  bar.style.setProperty('--probability', String(alternative.probability));
  const probability = document.createElement('span');
  probability.className = 'alternative-probability';
  probability.textContent = formatProbability(alternative.probability);
  // The spaces are not rendered in the grid but separate the parts in the text that screen readers get.
  item.append(text, ' ', bar, ' ', probability);
  return item;
}

// Below the token, or above it when there is no room below; kept inside the viewport.
function placeTooltip(span) {
  const { tooltip } = elements;
  const anchor = span.getBoundingClientRect();
  const box = tooltip.getBoundingClientRect();
  const margin = 8;
  const below = anchor.bottom + margin;
  const top = below + box.height <= window.innerHeight ? below : Math.max(margin, anchor.top - margin - box.height);
  const left = Math.min(Math.max(margin, anchor.left), window.innerWidth - box.width - margin);
  tooltip.style.top = `${top}px`;
  tooltip.style.left = `${left}px`;
}

// Keeps the tooltip on its token while the page or the token's box scrolls.
function followScroll() {
  const describedToken = document.querySelector('.token[aria-describedby]');
  if (describedToken) placeTooltip(describedToken);
}

function hideTooltip() {
  elements.tooltip.hidden = true;
  document.querySelector('.token[aria-describedby]')?.removeAttribute('aria-describedby');
}

function onTokenKeydown(event) {
  const span = event.target.closest('.token');
  if (!span) return;
  if (event.key === 'Escape') {
    hideTooltip();
    return;
  }
  const tokens = [...event.currentTarget.querySelectorAll('.token')];
  const index = tokens.indexOf(span);
  const targets = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tokens.length - 1 };
  const next = tokens[targets[event.key]];
  if (!next) return;
  event.preventDefault();
  span.tabIndex = -1;
  next.tabIndex = 0;
  next.focus();
}

// Makes whitespace tokens visible in the tooltip: a space as ␣, a newline as ↵, a tab as ⇥.
function visibleText(text) {
  const shown = text.replaceAll(' ', '␣').replaceAll('\n', '↵').replaceAll('\t', '⇥');
  return `“${shown}”`;
}

// ---- Controls, messages, settings ---------------------------------------------------------------

function updateControls() {
  const generating = state.generation !== null;
  const busy = generating || state.analyzing || !state.model || state.loading !== null || state.recovery !== null;
  elements.generate.disabled = busy;
  elements.continue.disabled = busy || !hasGeneratedOutput();
  elements.analyze.disabled = busy;
  elements.stop.disabled = !generating;
}

function showModelStatus(text) {
  elements.modelStatus.textContent = text;
}

function showError(message) {
  elements.error.textContent = message;
}

function clearError() {
  elements.error.textContent = '';
}

function saveSettings() {
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

function restoreSettings() {
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

// Two decimals like "0.41"; rare tokens as "3.2e-5", which stays short and still compares at a glance.
function formatProbability(probability) {
  if (!Number.isFinite(probability)) return 'n/a';
  if (probability >= 0.01 || probability === 0) return probability.toFixed(2);
  return probability.toExponential(1).replace('e-', 'e−');
}

// ---- Wiring -------------------------------------------------------------------------------------

function start() {
  restoreSettings();
  let urlParameterError = null;
  try {
    state.urlChoice = choiceFromUrlParameter();
  } catch (error) {
    urlParameterError = error;
  }
  fillModelSelect(state.urlChoice);
  elements.model.addEventListener('change', onModelSelected);
  elements.localFiles.addEventListener('change', onLocalFilesChosen);
  elements.localFiles.addEventListener('cancel', restoreModelSelection);
  elements.form.addEventListener('submit', (event) => {
    event.preventDefault();
    generate();
  });
  elements.prompt.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) elements.form.requestSubmit();
  });
  elements.continue.addEventListener('click', continueGeneration);
  elements.stop.addEventListener('click', stopGeneration);
  elements.analyzeForm.addEventListener('submit', (event) => {
    event.preventDefault();
    analyze();
  });
  elements.analyzeText.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) elements.analyzeForm.requestSubmit();
  });
  for (const radio of elements.modes) radio.addEventListener('change', () => showMode(radio.value));
  showMode(document.querySelector('input[name="mode"]:checked').value); // a reload may keep the last choice
  elements.reloadModel.addEventListener('click', reloadAfterFailedRecovery);
  for (const name of PERSISTED_INPUTS) elements[name].addEventListener('input', saveSettings);
  elements.weights.addEventListener('change', onWeightsChanged);
  wireTooltip(elements.output);
  wireTooltip(elements.analysisText);
  document.addEventListener('keydown', (event) => event.key === 'Escape' && hideTooltip());
  // Scroll events do not bubble; capturing catches a token box scrolling as well as the page.
  document.addEventListener('scroll', followScroll, { capture: true, passive: true });
  refreshStoredModels();
  switchModel(state.urlChoice ?? MODEL_CHOICES[0]);
  if (urlParameterError) showError(urlParameterError.message); // after switchModel, which clears errors
}

// The tooltip of the tokens in container (the output, or the analyzed text).
function wireTooltip(container) {
  const tokenOf = (event) => event.target.closest?.('.token');
  container.addEventListener('mouseover', (event) => tokenOf(event) && showTooltip(tokenOf(event)));
  container.addEventListener('mouseout', (event) => tokenOf(event) && hideTooltip());
  container.addEventListener('focusin', (event) => tokenOf(event) && showTooltip(tokenOf(event)));
  container.addEventListener('focusout', hideTooltip);
  container.addEventListener('keydown', onTokenKeydown);
}

start();
