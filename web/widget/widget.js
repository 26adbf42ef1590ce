// gpt2-widget.js: a GPT-2 text generator any page can embed with one tag, from any origin.
//
//   <script src="https://HOST/gpt2-widget.js" data-prompt="ROMEO:" data-max-new-tokens="60" async></script>
//
// renders a widget right after the tag (a tag in <head> renders none); <div data-gpt2-widget data-…>
// placeholders and GPT2Widget.mount(element, options) work too. OPTIONS below lists the options;
// public/embed.html documents them. The wasm (wasm/) and the default model are loaded from next to this
// script, so a host page needs nothing but the tag (and, under a CSP, to allow this origin).
//
// One request: tools/bundle_web.mjs builds this module, the API and the engine worker's code (started from a
// Blob of it) into public/gpt2-widget.js, a classic script, since only classic scripts see
// document.currentScript (the tag, its URL and its data-* options). The only global is GPT2Widget; every
// widget lives in a Shadow DOM with its own styles, and model and user text only ever become text nodes.
//
// Sharing: all widgets of a page use one engine worker, and widgets of the same model share one download and
// one loaded copy (gpt2.js's model registry, web/lib/models/model_registry.js). Their generations run concurrently: the
// engine interleaves them token by token, each with its own KV cache. A widget removed from the DOM stops; the
// last widget of a model disposes it, and when no model is in use the worker ends.
import { configure, loadModel } from '../lib/gpt2.js';
import { setWorkerSource } from '../lib/worker/worker_client.js';
import { formatBytes, formatPace } from '../page/progress_text.js';

// name -> [parser of a data-* attribute value, default]. The generation options are those of
// Model.generate (web/lib/gpt2.js), which checks their values.
const OPTIONS = {
  model: [String, undefined],  // a model folder URL or a .gguf file URL, relative to the page; default: the bundled model
  prompt: [String, ''],
  maxNewTokens: [Number, 64],
  temperature: [Number, 0.8],
  topK: [Number, 40],
  topP: [Number, 1],
  repetitionPenalty: [Number, 1],
  seed: [Number, undefined],  // random
  stop: [String, undefined],
  autoGenerate: [parseBoolean, false],
  lazy: [parseBoolean, false],
  theme: [String, 'auto'],
};
const GENERATE_OPTIONS = ['maxNewTokens', 'temperature', 'topK', 'topP', 'repetitionPenalty', 'seed', 'stop'];
const THEMES = ['auto', 'light', 'dark'];
// The bundled model as one Q4_0 GGUF file: 8.4 MB to download, where its safetensors folder is 24 MB.
const BUNDLED_MODEL_PATH = 'models/tiny-shakespeare/tiny-shakespeare.Q4_0.gguf';
const PLACEHOLDER_SELECTOR = '[data-gpt2-widget]';

const MESSAGES = {
  wasmBlocked: "This site's security policy does not allow WebAssembly, so the generator cannot run here.",
  workerBlocked: "This site's security policy does not allow the generator's background worker (blob: workers), so it cannot run here.",
  unsupported: 'This browser cannot run the generator: it needs WebAssembly and Web Workers.',
};

// The smallest valid module: compiling it fails exactly when WebAssembly may not run here.
const EMPTY_WASM_MODULE = new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);

function parseBoolean(value) {
  return value !== 'false';
}

// Options from data-* attributes; other data-* attributes (the host's own) are ignored.
function optionsFromDataset(dataset) {
  const options = {};
  for (const [name, [parse]] of Object.entries(OPTIONS)) {
    const value = dataset[name];
    if (value === undefined || (value === '' && parse !== parseBoolean)) continue;
    options[name] = parse(value);
  }
  return options;
}

function completeOptions(options, defaultModelUrl) {
  if (options === null || typeof options !== 'object') throw new TypeError('GPT2Widget.mount: options must be an object');
  for (const name of Object.keys(options)) {
    if (!(name in OPTIONS)) throw new TypeError(`GPT2Widget.mount: unknown option "${name}" (known: ${Object.keys(OPTIONS).join(', ')})`);
  }
  const complete = Object.fromEntries(Object.entries(OPTIONS).map(([name, [, fallback]]) => [name, options[name] ?? fallback]));
  if (!THEMES.includes(complete.theme)) throw new RangeError(`GPT2Widget.mount: theme must be one of ${THEMES.join(', ')}`);
  complete.model = modelUrl(complete.model === undefined ? defaultModelUrl : new URL(complete.model, document.baseURI));
  complete.prompt = String(complete.prompt);
  return complete;
}

// A GGUF file's URL (its path ends in .gguf) as it is; a folder's with a trailing slash, so that widgets
// of one folder share it however it is spelled.
function modelUrl(address) {
  const url = new URL(address);
  if (!/\.gguf$/i.test(url.pathname) && !url.pathname.endsWith('/')) url.pathname += '/';
  return url.href;
}

// ---- the generator (gpt2.js), one for every widget of the page ----

// gpt2.js runs the models in its default engine worker, which ends with the last model, and shares a model
// between the widgets that ask for the same one (its model registry): one download, one loaded copy.
class GeneratorApi {
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

  // -> lease { model: Promise<Model>, release() }; onProgress gets the loader's progress events.
  acquireModel(url, onProgress) {
    const controller = new AbortController();
    const model = loadModel(url, { signal: controller.signal, onProgress });
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

// ---- one widget ----

const STYLE = `
  :host { display: block; margin: 1em 0; }
  :host([hidden]) { display: none; }
  .widget {
    all: initial;
    --accent: var(--gpt2-widget-accent, light-dark(#0f766e, #2dd4bf));
    --accent-text: light-dark(#fff, #042f2e);
    --surface: light-dark(#fff, #1b1e21);
    --sunken: light-dark(#f6f7f9, #111315);
    --text: light-dark(#18181b, #ececef);
    --muted: light-dark(#60606a, #a1a1aa);
    --border: light-dark(#d4d4d8, #3f3f46);
    --danger: light-dark(#b91c1c, #fca5a5);
    color-scheme: light dark;
    display: grid;
    gap: 8px;
    box-sizing: border-box;
    max-width: 100%;
    padding: 12px;
    border: 1px solid var(--border);
    border-radius: 10px;
    background: var(--surface);
    color: var(--text);
    font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
    text-align: start;
  }
  .widget[data-theme="light"] { color-scheme: light; }
  .widget[data-theme="dark"] { color-scheme: dark; }
  *, *::before, *::after { box-sizing: inherit; }
  [hidden] { display: none !important; }
  header { display: flex; align-items: baseline; justify-content: space-between; gap: 8px; }
  .title { font-weight: 600; }
  .model { overflow: hidden; color: var(--muted); font-size: 12px; text-overflow: ellipsis; white-space: nowrap; }
  textarea, .output {
    width: 100%;
    margin: 0;
    padding: 8px 10px;
    border: 1px solid var(--border);
    border-radius: 6px;
    background: var(--sunken);
    color: inherit;
    font: 13px/1.5 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
  }
  textarea { min-height: 4.2em; resize: vertical; }
  textarea:focus-visible, button:focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
  .controls { display: flex; flex-wrap: wrap; align-items: center; gap: 8px; }
  button {
    padding: 5px 14px;
    border: 1px solid var(--accent);
    border-radius: 6px;
    background: var(--accent);
    color: var(--accent-text);
    font: inherit;
    font-size: 13px;
    font-weight: 600;
    cursor: pointer;
  }
  button.secondary { background: transparent; color: var(--accent); }
  button:disabled { border-color: var(--border); background: transparent; color: var(--muted); cursor: default; }
  .status { min-width: 0; color: var(--muted); font-size: 12px; }
  .progress { height: 4px; overflow: hidden; border-radius: 2px; background: var(--border); }
  .bar { width: 0; height: 100%; background: var(--accent); transition: width 0.15s; }
  .output { min-height: 3em; max-height: 20em; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; }
  .echo { color: var(--muted); }
  .alert { margin: 0; color: var(--danger); font-size: 13px; }
  .form { display: grid; gap: 8px; }
  .widget.blocked .form { display: none; }
`;

const MARKUP = `
  <div class="widget" part="widget">
    <header><span class="title">GPT-2</span><span class="model"></span></header>
    <div class="form">
      <textarea class="prompt" aria-label="Prompt" placeholder="Start a text, and the model continues it…" spellcheck="false"></textarea>
      <div class="controls">
        <button class="generate" type="button">Generate</button>
        <button class="continue secondary" type="button" disabled>Continue</button>
        <button class="stop secondary" type="button" disabled>Stop</button>
        <span class="status" role="status"></span>
      </div>
    </div>
    <div class="progress" role="progressbar" aria-label="Model download" aria-valuemin="0" aria-valuemax="100" hidden><div class="bar"></div></div>
    <div class="output" role="region" aria-label="Output" hidden><span class="echo"></span><span class="generated"></span></div>
    <p class="alert" role="alert" hidden></p>
  </div>
`;

let styleSheet = null;

// One constructed sheet for every widget: unlike a <style> element, a CSP without 'unsafe-inline' in
// style-src allows it.
function widgetStyleSheet() {
  if (!styleSheet) {
    styleSheet = new CSSStyleSheet();
    styleSheet.replaceSync(STYLE);
  }
  return styleSheet;
}

class Widget {
  element;
  #root;
  #ui;
  #options;
  #generator;
  #onDestroy;
  #lease = null;
  #ready = null;  // Promise<Model | null> once loading starts
  #generation = null;  // AbortController of the running generation
  #outputIds = [];  // token ids of the prompt and of the output so far, for Continue
  #destroyed = false;
  #connectedOnce = false;

  constructor(element, root, options, generator, onDestroy) {
    this.element = element;
    this.#root = root;
    this.#options = options;
    this.#generator = generator;
    this.#onDestroy = onDestroy;
    this.#ui = this.#render();
    this.#start();
  }

  // Destroys the widget once its element, connected before, is no longer in the document.
  noteConnection() {
    if (this.element.isConnected) this.#connectedOnce = true;
    else if (this.#connectedOnce) this.destroy();
  }

  generate() {
    return this.#run({ continuing: false });
  }

  // Generates more after the output (the prompt it started from and the text so far); the model reuses what
  // it already read of that text.
  continueGeneration() {
    if (!this.#ui.generated.textContent) return Promise.resolve();
    return this.#run({ continuing: true });
  }

  async #run({ continuing }) {
    if (this.#generation || this.#destroyed) return;
    const controller = (this.#generation = new AbortController());
    this.#setBusy(true);
    try {
      const model = await this.#ensureModel();
      if (model && !controller.signal.aborted) await this.#stream(model, controller.signal, continuing);
    } finally {
      if (this.#generation === controller) this.#generation = null;
      if (!this.#destroyed) this.#setBusy(false);
    }
  }

  stop() {
    this.#generation?.abort();
  }

  destroy() {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.stop();
    this.#lease?.release();
    this.#root.replaceChildren();
    this.#onDestroy(this);
  }

  #render() {
    this.#root.adoptedStyleSheets = [widgetStyleSheet()];
    this.#root.innerHTML = MARKUP;  // static markup only: no model or user text
    const find = (selector) => this.#root.querySelector(selector);
    const ui = {
      widget: find('.widget'), model: find('.model'), prompt: find('.prompt'), generate: find('.generate'),
      continue: find('.continue'), stop: find('.stop'), status: find('.status'), progress: find('.progress'), bar: find('.bar'),
      output: find('.output'), echo: find('.echo'), generated: find('.generated'), alert: find('.alert'),
    };
    ui.widget.dataset.theme = this.#options.theme;
    ui.model.textContent = modelName(this.#options.model);
    ui.model.title = this.#options.model;
    ui.prompt.value = this.#options.prompt;
    ui.generate.addEventListener('click', () => this.generate());
    ui.continue.addEventListener('click', () => this.continueGeneration());
    ui.stop.addEventListener('click', () => this.stop());
    ui.prompt.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) this.generate();
    });
    return ui;
  }

  async #start() {
    const problem = await this.#generator.findProblem();
    if (this.#destroyed) return;
    if (problem) return this.#block(problem);
    if (this.#options.autoGenerate) this.generate();
    else if (!this.#options.lazy) this.#ensureModel();
  }

  #block(message) {
    this.#ui.widget.classList.add('blocked');
    this.#showAlert(message);
  }

  // -> the loaded model, or null after showing why it could not load.
  #ensureModel() {
    this.#ready ??= this.#loadModel();
    return this.#ready;
  }

  async #loadModel() {
    const { generate, progress, status } = this.#ui;
    let notCached = null;  // why the browser did not keep the model's files (e.g. a full quota), if it did not
    this.#lease = this.#generator.acquireModel(this.#options.model, (event) => {
      notCached = event.notCached ?? notCached;
      this.#showProgress(event);
    });
    generate.disabled = true;
    progress.hidden = false;
    status.textContent = 'Loading the model…';
    this.#hideAlert();
    try {
      const model = await this.#lease.model;
      const kept = notCached ? ` · not kept for offline use: ${notCached}` : '';
      status.textContent = `Ready · ${formatBytes(model.weightBytes)} of weights, running in your browser${kept}`;
      return model;
    } catch (error) {
      if (this.#destroyed) return null;
      this.#lease.release();
      this.#lease = this.#ready = null;
      if (this.#generator.workerBlocked) this.#block(MESSAGES.workerBlocked);
      else this.#showAlert(`Could not load the model: ${error.message}`);
      status.textContent = '';
      return null;
    } finally {
      progress.hidden = true;
      generate.disabled = Boolean(this.#generation);
    }
  }

  async #stream(model, signal, continuing) {
    const { prompt, output, echo, generated, status } = this.#ui;
    if (!continuing) {
      echo.textContent = prompt.value;
      generated.textContent = '';
    }
    output.hidden = false;
    this.#hideAlert();
    status.textContent = 'Generating…';
    try {
      // Continue gives the token ids of the prompt and the output (see gpt2.js: their text may encode to others).
      if (!continuing) this.#outputIds = await model.encode(echo.textContent);
      const input = continuing && this.#outputIds.length ? this.#outputIds : echo.textContent + generated.textContent;
      const generation = model.generate(input, { ...this.#generateOptions(), signal });
      for await (const piece of generation) {
        if (Number.isInteger(piece.token)) this.#outputIds.push(piece.token);
        generated.append(piece.text);  // a text node: model output is never parsed as HTML
      }
      status.textContent = describeRun(generation.stats);
    } catch (error) {
      if (this.#destroyed) return;
      status.textContent = '';
      if (error.name === 'EngineAbortedError') await this.#recoverFromCrash(model, error);
      else this.#showAlert(`Generation failed: ${error.message}`);
    }
  }

  // The engine aborted (a genuine out-of-memory, say): the model loads itself again (gpt2.js); if that fails,
  // the next Generate loads it from the start.
  async #recoverFromCrash(model, crash) {
    this.#showAlert(`The engine crashed (${crash.reason}) and was restarted; loading the model again…`);
    try {
      await model.whenUsable();
      if (!this.#destroyed) this.#showAlert(`The engine crashed (${crash.reason}) and was restarted; the model was loaded again: Generate to continue.`);
    } catch (error) {
      if (this.#destroyed) return;
      this.#lease.release();
      this.#lease = this.#ready = null;
      this.#showAlert(`The engine crashed (${crash.reason}) and the model could not be loaded again (${error.message}): Generate loads it from the start.`);
    }
  }

  #generateOptions() {
    return Object.fromEntries(GENERATE_OPTIONS.map((name) => [name, this.#options[name]]));
  }

  #setBusy(busy) {
    this.#ui.generate.disabled = busy;
    this.#ui.continue.disabled = busy || !this.#ui.generated.textContent;
    this.#ui.stop.disabled = !busy;
  }

  // The loader's progress events (web/lib/loading/loader.js); speed and time left are null until measured.
  #showProgress({ file, loaded, fraction, bytesPerSecond, secondsLeft, retry }) {
    const { progress, bar, status } = this.#ui;
    const percent = fraction === null ? null : Math.round(fraction * 100);
    bar.style.width = `${percent ?? 100}%`;
    if (percent === null) progress.removeAttribute('aria-valuenow');
    else progress.setAttribute('aria-valuenow', String(percent));
    const pace = retry ? ' · connection lost, retrying' : formatPace({ bytesPerSecond, secondsLeft });
    status.textContent = `Loading ${file} · ${percent === null ? formatBytes(loaded) : `${percent}%`}${pace}`;
  }

  #showAlert(message) {
    this.#ui.alert.textContent = message;
    this.#ui.alert.hidden = false;
  }

  #hideAlert() {
    this.#ui.alert.hidden = true;
  }
}

function modelName(url) {
  return new URL(url).pathname.split('/').filter(Boolean).at(-1) ?? url;
}

function describeRun({ generatedTokens, decodeTokensPerSecond, stopReason, reusedTokens }) {
  const speed = decodeTokensPerSecond > 0 ? ` · ${Math.round(decodeTokensPerSecond)} tokens/s` : '';
  const stopped = stopReason === 'abort' ? ' · stopped' : '';
  const reused = reusedTokens > 0 ? ` · ${reusedTokens} reused` : '';
  return `${generatedTokens} tokens${speed}${stopped}${reused}`;
}

// ---- the GPT2Widget global: mounting, and noticing widgets removed from the DOM ----

// The wasm is in wasm/ next to the script; the worker runs the code the script carries.
function createLibrary(scriptUrl, workerSource) {
  configure({ assetBase: new URL('wasm/', scriptUrl) });
  setWorkerSource(workerSource);
  const generator = new GeneratorApi();
  const defaultModelUrl = new URL(BUNDLED_MODEL_PATH, scriptUrl);
  const widgets = new Map();  // element -> Widget
  const roots = new WeakMap();  // element -> the ShadowRoot we attached (kept for a later mount)
  // A removed widget is only noticed through mutations of the tree it was in (the document or a shadow root).
  const observer = new MutationObserver(() => widgets.forEach((widget) => widget.noteConnection()));

  const onDestroy = (widget) => {
    widgets.delete(widget.element);
    if (widgets.size === 0) observer.disconnect();
  };

  function mount(element, options = {}) {
    if (!(element instanceof Element)) throw new TypeError('GPT2Widget.mount: element must be a DOM element');
    if (widgets.has(element)) throw new Error('GPT2Widget.mount: this element already has a widget');
    const complete = completeOptions(options, defaultModelUrl);
    const root = roots.get(element) ?? element.attachShadow({ mode: 'open' });
    roots.set(element, root);
    const widget = new Widget(element, root, complete, generator, onDestroy);
    widget.noteConnection();
    widgets.set(element, widget);
    observer.observe(document, { childList: true, subtree: true });
    const tree = element.getRootNode();
    if (tree instanceof ShadowRoot) observer.observe(tree, { childList: true, subtree: true });
    return Object.freeze({
      element,
      generate: () => widget.generate(),
      stop: () => widget.stop(),
      destroy: () => widget.destroy(),
    });
  }

  function mountAll(container = document) {
    return Array.from(container.querySelectorAll(PLACEHOLDER_SELECTOR))
      .filter((element) => !widgets.has(element))
      .map((element) => mount(element, optionsFromDataset(element.dataset)));
  }

  return Object.freeze({ mount, mountAll });
}

function mountAtScript(library, script) {
  const element = document.createElement('gpt2-widget');
  script.after(element);
  // The default model is the one next to this tag's script, which may differ from the first tag's.
  library.mount(element, { model: new URL(BUNDLED_MODEL_PATH, script.src).href, ...optionsFromDataset(script.dataset) });
}

// Run by gpt2-widget.js as it loads, with the engine worker's code (workerSource: a module, tools/bundle_web.mjs).
export function startWidget(workerSource) {
  const script = document.currentScript;  // set only during this first, synchronous run
  if (!script?.src) {
    console.error('gpt2-widget.js must be loaded by a classic <script src="…/gpt2-widget.js"> tag: it finds the engine and the model next to its own URL');
    return;
  }
  // A page that includes the tag several times gets one library, hence one worker and shared models.
  window.GPT2Widget ??= createLibrary(script.src, workerSource);
  const library = window.GPT2Widget;
  if (!script.closest('head')) mountAtScript(library, script);
  library.mountAll();
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', () => library.mountAll(), { once: true });
}
