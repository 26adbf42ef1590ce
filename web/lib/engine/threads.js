// How many threads an engine runs: the `threads` option of loadModel, checked, and resolved for this realm.
import { IS_NODE, importNodeBuiltin } from '../environment.js';
import { LIMITS } from './engine_constants.js';

// Threads: the engine comes in two builds, public/wasm/gpt2.* (one thread, runs everywhere) and gpt2-mt.* (-pthread:
// the forward pass split over a pool of workers, needs SharedArrayBuffer: a cross-origin-isolated page or worker,
// or Node). resolveThreads() picks the thread count, 1 meaning the single-thread build.
export const MAX_AUTO_THREADS = 8;
// The engine's limit (gpt2::ThreadPool::kMaxThreads): each thread is a worker with its own stack and scratch memory,
// and the forward pass gains nothing from more threads than cores.
export const MAX_THREADS = LIMITS.maxThreads;

// Whether this realm can run the threaded build: Node always; browsers only when cross-origin isolated (COOP +
// COEP headers), without which SharedArrayBuffer does not exist.
export function threadsAvailable() {
  return IS_NODE || (globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function');
}

// The default of loadModel's `threads`: browsers use threads when they can; Node asks for them.
export const DEFAULT_THREADS = IS_NODE ? 1 : 'auto';

// The `threads` option of loadModel: 'auto' (the machine's cores, at most MAX_AUTO_THREADS) or a count in
// 1..MAX_THREADS (TypeError otherwise).
export function checkThreads(threads) {
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1 && threads <= MAX_THREADS)) {
    throw new TypeError(`threads must be "auto" or an integer from 1 to ${MAX_THREADS}, got ${JSON.stringify(threads)}`);
  }
}

// -> the thread count to use in this realm for the `threads` option: 1 where threads are unavailable.
export async function resolveThreads(threads = DEFAULT_THREADS) {
  checkThreads(threads);
  if (!threadsAvailable()) return 1;
  if (threads !== 'auto') return threads;
  const cores = IS_NODE ? (await importNodeBuiltin('os')).availableParallelism() : globalThis.navigator?.hardwareConcurrency;
  return Math.max(1, Math.min(cores || 1, MAX_AUTO_THREADS));
}
