// The generator (gpt2.js), one for every widget of the page, and what keeps it from running on a page: no
// WebAssembly or Web Workers, or a CSP that forbids them.
import { loadModel } from '../lib/gpt2.js';

export const MESSAGES = {
  wasmBlocked: "This site's security policy does not allow WebAssembly, so the generator cannot run here.",
  workerBlocked: "This site's security policy does not allow the generator's background worker (blob: workers), so it cannot run here.",
  unsupported: 'This browser cannot run the generator: it needs WebAssembly and Web Workers.',
};

// The smallest valid module: instantiating it fails exactly when WebAssembly may not run here. (Compiling alone
// is not enough: WebKit compiles under a CSP without 'wasm-unsafe-eval' and refuses only the instance.)
const EMPTY_WASM_MODULE = new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);

// A worker as the engine's starts (a module from a blob: URL) that says it runs: it fails exactly when the page
// may not start the engine's.
const PROBE_WORKER_SOURCE = 'postMessage(0);';

// gpt2.js runs the models in its default engine worker, which ends with the last model, and shares a model
// between the widgets that ask for the same one (its model registry): one download, one loaded copy.
export class GeneratorApi {
  #problem = null;

  // -> Promise of null when the engine can run here, else the message that says why not. Asked before any
  // download, so that a page that cannot run the engine downloads nothing.
  findProblem() {
    this.#problem ??= probeWebAssembly().then((problem) => problem ?? probeWorker());
    return this.#problem;
  }

  // -> lease { model: Promise<Model>, release() }; onProgress gets the loader's progress events. device: loadModel's.
  acquireModel(url, device, onProgress) {
    const controller = new AbortController();
    const model = loadModel(url, { signal: controller.signal, onProgress, device });
    const release = () => {
      controller.abort();
      model.then((loaded) => loaded.dispose(), () => {});
    };
    return { model, release };
  }
}

async function probeWebAssembly() {
  if (typeof WebAssembly !== 'object' || typeof Worker !== 'function') return MESSAGES.unsupported;
  try {
    await WebAssembly.instantiate(EMPTY_WASM_MODULE);
    return null;
  } catch {
    return MESSAGES.wasmBlocked;
  }
}

// A CSP that forbids blob: workers shows in one of two ways: WebKit throws a SecurityError from the constructor,
// Chromium and Firefox start the worker and then report an error event (without detail) on it.
function probeWorker() {
  const url = URL.createObjectURL(new Blob([PROBE_WORKER_SOURCE], { type: 'text/javascript' }));
  let worker;
  try {
    worker = new Worker(url, { type: 'module' });
  } catch (error) {
    URL.revokeObjectURL(url);
    return Promise.resolve(error.name === 'SecurityError' ? MESSAGES.workerBlocked : MESSAGES.unsupported);
  }
  return new Promise((resolve) => {
    const finish = (problem) => {
      worker.terminate();
      URL.revokeObjectURL(url);
      resolve(problem);
    };
    worker.onmessage = () => finish(null);
    worker.onerror = (event) => {
      event.preventDefault();
      finish(MESSAGES.workerBlocked);
    };
  });
}
