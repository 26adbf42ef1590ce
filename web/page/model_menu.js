// The model menu: choosing a model (or local files) loads it, with its download progress, and the status line
// says what is loaded and where it runs.
import { loadModel } from '../lib/gpt2.js';
import { adapterName } from '../lib/gpu/device.js';
import { requestPersistentStorage } from '../lib/loading/model_cache.js';
import { isGgufName } from '../lib/loading/model_files.js';
import { stopGeneration } from './generate_panel.js';
import { GGUF_CHOICES, LOADED_LOCAL_VALUE, LOCAL_FILES_VALUE, MODEL_CHOICES, findChoice } from './model_choices.js';
import { clearError, elements, showError, showModelStatus, state, updateControls } from './page_state.js';
import { formatBytes, formatDuration, formatPace } from '../lib/progress_text.js';
import { saveSettings, showWeightsSetting, weightsFor } from './settings.js';
import { refreshStoredModels } from './stored_models.js';

export function fillModelSelect(urlChoice) {
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

export function onModelSelected() {
  const value = elements.model.value;
  if (value === LOCAL_FILES_VALUE) {
    elements.localFiles.value = '';
    elements.localFiles.click();
    return;
  }
  switchModel(findChoice(value));
}

export function onLocalFilesChosen() {
  const files = [...elements.localFiles.files];
  if (files.length === 0) {
    restoreModelSelection();
    return;
  }
  const weights = files.find((file) => isGgufName(file.name)) ?? files.find((file) => file.name.endsWith('.safetensors'));
  const label = `Local files${weights ? ` (${weights.name}, ${formatBytes(weights.size)})` : ''}`;
  // One file alone cannot be a folder's: it is loaded as a GGUF file (see source_files.js).
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
export function restoreModelSelection() {
  if (state.modelChoice) elements.model.value = state.modelChoice.value;
  else elements.model.selectedIndex = -1;
}

// The bytes an "out of memory" error says the fp32 weights need, when that is why a load failed, else null.
function fp32WeightsTooLarge(error, weights) {
  const need = weights === 'fp32' ? /^out of memory: need (\d+) bytes for the weights\b/.exec(error?.message ?? '') : null;
  return need ? Number(need[1]) : null;
}

// Loads a model; choosing again cancels this load. The previous model stays in use until the new one is
// ready, and stays usable if the new one fails, except where the new one replaces it on the CPU (replacesModelInUse).
export async function switchModel(choice) {
  stopGeneration();
  state.loading?.abort();
  const controller = new AbortController();
  state.loading = controller;
  state.loadingChoice = choice;
  state.failedChoice = null;
  const weights = weightsFor(choice);
  const device = elements.device.value;
  if (replacesModelInUse(choice, weights, device)) {
    state.model.dispose();
    state.model = state.modelChoice = state.recovery = null;
  }
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
    const model = await loadModel(choice.source, { signal: controller.signal, onProgress, weights, device });
    if (controller.signal.aborted) {
      model.dispose();
      return;
    }
    state.model?.dispose();
    state.model = model;
    state.modelChoice = choice;
    state.modelWeights = weights;
    state.modelDevice = device;
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

// A model holds its engine's pool threads while it lives, so that a model loaded beside it gets fewer (model.threads):
// the model in use loaded again with another device or weight format is disposed of first. (With the same ones, the
// load shares its loaded copy: gpt2.js's model registry.) Not for the GPU, where a load can fail that the CPU's would
// not: the model in use then stays until the new one is ready.
function replacesModelInUse(choice, weights, device) {
  return state.model !== null && choice === state.modelChoice && device !== 'webgpu' &&
    (weights !== state.modelWeights || device !== state.modelDevice);
}

// A new weight format or device reloads the model being loaded, or the one whose load failed last (a retry), or
// else the one in use. A model in use that already loaded with these settings stays: when it is also the one whose
// load failed (another device, say), going back to its settings is no longer a failure to report.
export function onLoadSettingChanged() {
  saveSettings();
  const choice = state.loadingChoice ?? state.failedChoice ?? state.modelChoice;
  if (!choice) return;
  if (choice === state.modelChoice && weightsFor(choice) === state.modelWeights && elements.device.value === state.modelDevice) {
    if (state.failedChoice) clearError();
    state.failedChoice = null;
    return;
  }
  switchModel(choice);
}

function describeLoadedModel() {
  if (!state.model) return 'No model loaded: choose one in Settings.';
  const { n_layer, n_embd, n_ctx } = state.model.config;
  const { weightBytes, weightTypes, threads, threadsReason } = state.model;
  // threads: more than one only on a cross-origin-isolated page (tools/dev/serve.mjs sends COOP + COEP), and the API
  // says why when not
  const fp32TooLarge = state.modelChoice.fp32Bytes ? ' (its fp32 weights do not fit)' : '';
  const oneThreadWhy = threadsReason ? ` (${threadsReason})` : '';
  const details = `${n_layer} layers, width ${n_embd}, ${n_ctx}-token context, ${formatBytes(weightBytes)} of ` +
    `${weightTypes} weights${fp32TooLarge}, ${threads} ${threads === 1 ? 'thread' : 'threads'}${oneThreadWhy}`;
  const kept = state.modelNotCached ? ` · not kept for offline use: ${state.modelNotCached}` : '';
  return `Ready: ${state.modelChoice.label} · ${details} · ${describeDevice(state.model)}${kept}`;
}

// Where the model runs: the GPU and its adapter, or the CPU, in which wasm build (relaxed SIMD where the browser
// runs it), and, when the CPU was not asked for, why not the GPU.
function describeDevice({ device, adapterInfo, deviceReason, simd }) {
  if (device === 'webgpu') return `on the GPU: ${adapterInfo ? adapterName(adapterInfo) : 'WebGPU'}`;
  const build = simd === 'relaxed' ? 'relaxed SIMD' : 'SIMD128';
  // the API's reasons may carry the prefix of its 'webgpu' errors, which the status line does not need
  return `on the CPU (WebAssembly, ${build})${deviceReason ? ` because ${deviceReason.replace(/^device 'webgpu': /, '')}` : ''}`;
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
