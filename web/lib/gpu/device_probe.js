// 'auto' on a hardware adapter: which of the GPU and the CPU decodes this model faster on this machine (small
// models can be slower on a GPU, whose every pass costs a submit and a readback), measured once with a few steps
// of each and remembered per adapter and model in the Cache API, so that later loads pay nothing (and one
// remembered for the GPU streams the weights straight there).
import { sourceIdentity } from '../loading/model_source.js';

const CHOICES_CACHE = 'gpt2-wasm-device-choices-v1';
// Cache API keys are http(s) requests: a name that is never fetched.
const CHOICE_URL = 'https://device-choice.gpt2-wasm.invalid/';
const PROMPT = [0, 1, 2, 3];  // ids every vocabulary has
const WARM_UP_STEPS = 1;
const TIMED_STEPS = 4;

// What the device probe remembers its choice under: the model's source (model_source.js: its URL or path; local
// files and in-memory parts by name, size and date) and the weights asked for.
export function deviceChoiceKey(source, weights) {
  return JSON.stringify([sourceIdentity(source), weights]);
}

// The choice remembered for the model modelKey names (deviceChoiceKey) on adapterInfo's adapter: { device, gpuMs, wasmMs, remembered: true }, or null before
// its first probe. Read before the model loads, so that a remembered GPU gets the weights straight from the download.
export async function rememberedChoice(adapterInfo, modelKey, cacheStorage = globalThis.caches) {
  const stored = await readChoice(await openChoices(cacheStorage), choiceKey(modelKey, adapterInfo));
  return stored && { ...stored, remembered: true };
}

// -> { device: 'webgpu' | 'wasm', gpuMs, wasmMs, remembered } for models (GpuModel and the engine model of the same
// weights, which modelKey names) on adapterInfo's adapter.
export async function probeFasterDevice(gpuModel, engineModel, adapterInfo, modelKey, cacheStorage = globalThis.caches) {
  const key = choiceKey(modelKey, adapterInfo);
  const cache = await openChoices(cacheStorage);
  const stored = await readChoice(cache, key);
  if (stored) return { ...stored, remembered: true };
  const gpuMs = await msPerStep(gpuModel);
  const wasmMs = await msPerStep(engineModel);
  const choice = { device: gpuMs < wasmMs ? 'webgpu' : 'wasm', gpuMs, wasmMs };
  await rememberChoice(adapterInfo, modelKey, choice, cacheStorage);
  return { ...choice, remembered: false };
}

// Stores choice ({ device, gpuMs, wasmMs }) for modelKey on adapterInfo's adapter, as a probe does.
export async function rememberChoice(adapterInfo, modelKey, choice, cacheStorage = globalThis.caches) {
  try {
    const cache = await openChoices(cacheStorage);
    await cache?.put(new Request(`${CHOICE_URL}?key=${encodeURIComponent(choiceKey(modelKey, adapterInfo))}`), new Response(JSON.stringify(choice)));
  } catch {
    // a full or disabled store: measured again at the next load
  }
}

// The median time of a decode step of model's session (GPU steps are promises, the CPU's numbers).
async function msPerStep(model) {
  const session = model.createSession({ useKVCache: true, kvCache: 'fp32' });
  try {
    session.setSampling({ temperature: 0 });
    let token = await session.prefill(PROMPT);
    for (let i = 0; i < WARM_UP_STEPS; i++) token = await session.step(token);
    const times = [];
    for (let i = 0; i < TIMED_STEPS; i++) {
      const started = performance.now();
      token = await session.step(token);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    return times[Math.floor(times.length / 2)];
  } finally {
    session.dispose();
  }
}

function choiceKey(modelKey, { vendor, architecture, device, description }) {
  return JSON.stringify([vendor, architecture, device, description, modelKey]);
}

async function openChoices(cacheStorage) {
  try {
    return cacheStorage ? await cacheStorage.open(CHOICES_CACHE) : null;
  } catch {
    return null;  // storage disabled: measured at every load
  }
}

async function readChoice(cache, key) {
  try {
    const response = await cache?.match(`${CHOICE_URL}?key=${encodeURIComponent(key)}`);
    const choice = response && await response.json();
    const valid = choice && ['webgpu', 'wasm'].includes(choice.device) && Number.isFinite(choice.gpuMs) && Number.isFinite(choice.wasmMs);
    return valid ? choice : null;
  } catch {
    return null;
  }
}

// How deviceReason says the probe chose the CPU.
export function probeReason({ gpuMs, wasmMs, remembered }) {
  const measured = `${wasmMs.toFixed(1)} ms a token against ${gpuMs.toFixed(1)} ms on the GPU`;
  return `the CPU decodes this model faster here (${measured}${remembered ? ', measured at an earlier load' : ''})`;
}
