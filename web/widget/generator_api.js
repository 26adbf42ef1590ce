// The generator (gpt2.js), one for every widget of the page, and what keeps it from running on a page: no
// WebAssembly or Web Workers, or a CSP that forbids them.
import { loadModel } from '../lib/gpt2.js';

export const MESSAGES = {
  wasmBlocked: "This site's security policy does not allow WebAssembly, so the generator cannot run here.",
  workerBlocked: "This site's security policy does not allow the generator's background worker (blob: workers), so it cannot run here.",
  unsupported: 'This browser cannot run the generator: it needs WebAssembly and Web Workers.',
};

// The smallest valid module: compiling it fails exactly when WebAssembly may not run here.
const EMPTY_WASM_MODULE = new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);

// gpt2.js runs the models in its default engine worker, which ends with the last model, and shares a model
// between the widgets that ask for the same one (its model registry): one download, one loaded copy.
export class GeneratorApi {
  #webAssemblyProblem = null;
  #workerBlocked = false;

  constructor() {
    // A CSP that forbids blob: workers only shows as a violation event (and a worker error without detail).
    document.addEventListener('securitypolicyviolation', (event) => {
      if (event.effectiveDirective === 'worker-src' && event.blockedURI === 'blob') this.#workerBlocked = true;
    });
  }

  // -> Promise of null when the engine can run here, else the message that says why not.
  findProblem() {
    this.#webAssemblyProblem ??= probeWebAssembly();
    return this.#webAssemblyProblem;
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

  // Whether the page's CSP refused our blob: worker (the load error itself does not say why).
  get workerBlocked() {
    return this.#workerBlocked;
  }
}

async function probeWebAssembly() {
  if (typeof WebAssembly !== 'object' || typeof Worker !== 'function') return MESSAGES.unsupported;
  try {
    await WebAssembly.compile(EMPTY_WASM_MODULE);
    return null;
  } catch {
    return MESSAGES.wasmBlocked;
  }
}
