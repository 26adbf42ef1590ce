// How many threads an engine runs: the `threads` option of loadModel, checked, and resolved for this realm.
import { IS_NODE, importNodeBuiltin } from '../environment.js';
import { measureParallelThreads } from './core_probe.js';
import { LIMITS } from './engine_constants.js';

// Threads: the engine comes in two builds, public/wasm/gpt2.* (one thread, runs everywhere) and gpt2-mt.* (-pthread:
// the forward pass split over a pool of workers, needs SharedArrayBuffer: a cross-origin-isolated page or worker,
// or Node). resolveThreads() picks the thread count, 1 meaning the single-thread build.
export const MAX_AUTO_THREADS = 8;
// The fewest threads the core probe may cut a browser's reported cores to (planThreads).
const MIN_MEASURED_THREADS = 2;
// The engine's limit (gpt2::ThreadPool::kMaxThreads): each thread is a worker with its own stack and scratch memory,
// and the forward pass gains nothing from more threads than cores.
export const MAX_THREADS = LIMITS.maxThreads;

// Why a model runs on one thread where it asked for more ('auto' or a count), in the words of model.threadsReason.
export const ONE_THREAD_REASONS = Object.freeze({
  notIsolated: 'the page is not cross-origin isolated',
  noSharedArrayBuffer: 'the browser gives no SharedArrayBuffer',
  oneCore: 'one core',
  unmeasured: 'its cores could not be measured',
  workersTaken: "the engine's other threads are held by another model",
});

// -> null when a browser realm with these globals can run the threaded build, else why not (ONE_THREAD_REASONS).
// Without cross-origin isolation (COOP + COEP headers) browsers give no SharedArrayBuffer; WebKit gives none even
// with it.
export function threadsUnavailableReason({ crossOriginIsolated, SharedArrayBuffer }) {
  if (crossOriginIsolated !== true) return ONE_THREAD_REASONS.notIsolated;
  if (typeof SharedArrayBuffer !== 'function') return ONE_THREAD_REASONS.noSharedArrayBuffer;
  return null;
}

// Whether this realm can run the threaded build: Node always; browsers as threadsUnavailableReason says.
export function threadsAvailable() {
  return IS_NODE || threadsUnavailableReason(globalThis) === null;
}

// The default of loadModel's `threads`: browsers use threads when they can; Node asks for them.
export const DEFAULT_THREADS = IS_NODE ? 1 : 'auto';

// The `threads` option of loadModel: 'auto' (the cores, at most MAX_AUTO_THREADS) or a count in 1..MAX_THREADS
// (TypeError otherwise).
export function checkThreads(threads) {
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1 && threads <= MAX_THREADS)) {
    throw new TypeError(`threads must be "auto" or an integer from 1 to ${MAX_THREADS}, got ${JSON.stringify(threads)}`);
  }
}

// -> { threads, reason }: the thread count to use in this realm for the `threads` option, and, when that is 1 where
// more were asked for, why (ONE_THREAD_REASONS; null otherwise). 'auto' is the cores, at most MAX_AUTO_THREADS: in
// Node those the process may use; in browsers those the browser reports, cut to the threads measured to run at once
// (core_probe.js), since browsers may report more cores than the machine has, but not below two where it reports two
// or more: a measure taken while other programs hold a core comes out low, and two threads on one free core cost
// little, where one thread on two cores halves the speed. A count is taken as asked.
export async function planThreads(threads = DEFAULT_THREADS) {
  checkThreads(threads);
  const plan = (count, reason = null) => ({ threads: count, reason: count === 1 && threads !== 1 ? reason : null });
  if (!threadsAvailable()) return plan(1, threadsUnavailableReason(globalThis));
  if (threads !== 'auto') return plan(threads);
  if (IS_NODE) return plan(Math.min((await importNodeBuiltin('os')).availableParallelism(), MAX_AUTO_THREADS), ONE_THREAD_REASONS.oneCore);
  const reported = Math.max(1, Math.min(globalThis.navigator?.hardwareConcurrency || 1, MAX_AUTO_THREADS));
  try {
    return plan(Math.max(Math.min(reported, MIN_MEASURED_THREADS), await measuredThreads(reported)), ONE_THREAD_REASONS.oneCore);
  } catch {
    return plan(1, ONE_THREAD_REASONS.unmeasured);
  }
}

// -> the thread count of planThreads(threads).
export async function resolveThreads(threads = DEFAULT_THREADS) {
  return (await planThreads(threads)).threads;
}

// The probe's answer for n threads, measured once per realm: the engine and everything that asks again (a model
// loaded later, a test reading the engine's heap) get the same count.
const measured = new Map();  // n -> Promise of the threads
function measuredThreads(n) {
  if (!measured.has(n)) measured.set(n, measureParallelThreads(n));
  return measured.get(n);
}
