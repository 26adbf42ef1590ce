// What every part of the page shares: its elements, the state of the model, the load and the runs, and the
// controls and messages that follow that state. All model and user text is inserted with textContent, never as
// HTML.
import { beamsPastContext as beamsPastModelContext } from '../lib/generation/option_checks.js';

export const $ = (id) => document.getElementById(id);

export const elements = {
  form: $('generate-form'),
  prompt: $('prompt'),
  generate: $('generate'),
  continue: $('continue'),
  stop: $('stop'),
  compare: $('compare'),
  compareCard: $('compare-card'),
  insideCard: $('inside-card'),
  modes: document.querySelectorAll('input[name="mode"]'),
  promptHeading: $('prompt-heading'),
  outputHint: $('output-hint'),
  statsCard: $('stats-card'),
  analyzeForm: $('analyze-form'),
  analyzeText: $('analyze-text'),
  analyze: $('analyze'),
  analyzeStop: $('analyze-stop'),
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
  device: $('device'),
  kvCache: $('kv-cache'),
  kvStorage: $('kv-storage'),
  speculative: $('speculative'),
  temperature: $('temperature'),
  topK: $('top-k'),
  topP: $('top-p'),
  maxNewTokens: $('max-new-tokens'),
  seed: $('seed'),
  minP: $('min-p'),
  typicalP: $('typical-p'),
  presencePenalty: $('presence-penalty'),
  frequencyPenalty: $('frequency-penalty'),
  noRepeatNgramSize: $('no-repeat-ngram-size'),
  minNewTokens: $('min-new-tokens'),
  numBeams: $('num-beams'),
  lengthPenalty: $('length-penalty'),
  logitBias: $('logit-bias'),
  badWords: $('bad-words'),
  tooltip: $('token-tooltip'),
  stats: {
    speed: $('stat-speed'),
    drafts: $('stat-drafts'),
    prefill: $('stat-prefill'),
    reused: $('stat-reused'),
    context: $('stat-context'),
    kv: $('stat-kv'),
    stop: $('stat-stop'),
  },
};

// output <span> -> its generated piece, or analyzed token as { text, token, probability, rank, alternatives }
export const pieceOfToken = new WeakMap();

export const state = {
  model: null,
  modelChoice: null, // the choice (with .value and .label) whose model is loaded
  modelWeights: null, // 'fp32' | 'int8' | undefined (a GGUF file): the weights setting the model loaded with
  weightsSetting: 'fp32', // the user's Weights setting, also while the menu shows what a model runs instead
  modelDevice: null, // 'auto' | 'webgpu' | 'wasm': the Device setting the model loaded with (model.device: where it runs)
  failedChoice: null, // the choice whose load failed last, which the Weights and Device menus retry
  modelNotCached: null, // why the Cache API did not keep the model (e.g. a full quota); null: it did, or local files
  loadingChoice: null, // the choice being loaded, if any
  urlChoice: null, // the folder given as ?model=, if any
  localChoice: null, // the latest local files picked
  loading: null, // AbortController of the model load in progress
  generation: null, // AbortController of the generation in progress
  latestGeneration: null, // AbortController of the latest generation, whose run the output and the stats show
  analyzing: null, // AbortController of the Analyze text run in progress
  recovery: null, // 'reloading' | 'failed' after the engine crashed: the model is not usable (null: it is)
  outputIds: null, // the token ids of the prompt and the tokens the output shows, for Continue
};

// The likeliest tokens the tooltip lists for each generated or analyzed token.
export const TOP_ALTERNATIVES = 5;

export function hasGeneratedOutput() {
  return elements.output.querySelector('.token') !== null;
}

export function updateControls() {
  const generating = state.generation !== null;
  const busy = generating || state.analyzing || !state.model || state.loading !== null || state.recovery !== null;
  elements.generate.disabled = busy;
  elements.continue.disabled = busy || !hasGeneratedOutput();
  elements.analyze.disabled = busy;
  elements.analyzeStop.disabled = !state.analyzing;
  elements.compare.disabled = busy;
  elements.stop.disabled = !generating;
}

export function showModelStatus(text) {
  elements.modelStatus.textContent = text;
}

export function showError(message) {
  elements.error.textContent = message;
}

// The label of a settings field, for its error message.
export function labelOf(input) {
  return document.querySelector(`label[for="${input.id}"]`).textContent;
}

// The error of a number field the browser finds invalid (or that is empty).
export function invalidNumberMessage(input) {
  return `${labelOf(input)}: ${input.validationMessage || 'please enter a number.'}`;
}

// Shows the error and moves to the field; -> null, the answer of the option readers that call it. A field in a
// folded <details> (Advanced decoding, Compare strategies) is unfolded first: a hidden one cannot take the focus.
// Beams above 1 with speculation on, in the Generate panel or a Compare column (option_checks.js's rule
// sequencesWithoutSpeculation): generate() takes one or the other.
export const BEAMS_AND_SPECULATION = 'Beam search and speculative decoding cannot be combined: set Beams to 1 or turn speculation off.';

// Beams above 1 with more new tokens than the loaded model's context, in the Generate panel or a Compare column:
// the beams' buffers hold one context (generate() refuses more) -> the message, or null when they fit.
export function beamsPastContext(numBeams, maxNewTokens) {
  const nCtx = state.model?.config.n_ctx;
  if (nCtx === undefined || !beamsPastModelContext({ numBeams, maxNewTokens }, nCtx)) return null;
  return `Beam search generates at most the model's context (${nCtx} tokens): set Max new tokens to ${nCtx} or less, or Beams to 1.`;
}

export function showInvalid(input, message) {
  showError(message);
  const group = input.closest('details');
  if (group) group.open = true;
  input.focus();
  return null;
}

export function clearError() {
  elements.error.textContent = '';
}
