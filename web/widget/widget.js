// gpt2-widget.js: a GPT-2 text generator any page can embed with one tag, from any origin.
//
//   <script src="https://HOST/gpt2-widget.js" data-prompt="ROMEO:" data-max-new-tokens="60" async></script>
//
// renders a widget right after the tag (a tag in <head> renders none); <div data-gpt2-widget data-…>
// placeholders and GPT2Widget.mount(element, options) work too. OPTIONS below lists the options;
// public/embed.html documents them. The wasm (wasm/) and the default model are loaded from next to this
// script, so a host page needs nothing but the tag (and, under a CSP, to allow this origin).
//
// One request: tools/dev/bundle_web.mjs builds this module, the API and the engine worker's code (started from a
// Blob of it) into public/gpt2-widget.js, a classic script, since only classic scripts see
// document.currentScript (the tag, its URL and its data-* options). The only global is GPT2Widget; every
// widget lives in a Shadow DOM with its own styles, and model and user text only ever become text nodes.
//
// Sharing: all widgets of a page use one engine worker, and widgets of the same model share one download and
// one loaded copy (gpt2.js's model registry, web/lib/models/model_registry.js). Their generations run concurrently: the
// engine interleaves them token by token, each with its own KV cache. A widget removed from the DOM stops; the
// last widget of a model disposes it, and when no model is in use the worker ends.
import { configure } from '../lib/gpt2.js';
import { setWorkerSource } from '../lib/worker/worker_client.js';
import { GeneratorApi } from './generator_api.js';
import { BUNDLED_MODEL_PATH, PLACEHOLDER_SELECTOR, completeDatasetOptions, completeOptions } from './widget_options.js';
import { Widget, showRefusal } from './widget_view.js';

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

  function checkElement(element) {
    if (!(element instanceof Element)) throw new TypeError('GPT2Widget.mount: element must be a DOM element');
    if (widgets.has(element)) throw new Error('GPT2Widget.mount: this element already has a widget');
  }

  function shadowRootOf(element) {
    const root = roots.get(element) ?? element.attachShadow({ mode: 'open' });
    roots.set(element, root);
    return root;
  }

  // Options as an object: a value the widget does not take throws, and nothing is built.
  function mount(element, options = {}) {
    checkElement(element);
    return start(element, completeOptions(options, defaultModelUrl));
  }

  // Options as data-* attributes (a placeholder's, a tag's): a value the widget does not take shows its one-line
  // message inside the element's shadow root, and nothing else is built (-> null).
  function mountFromDataset(element) {
    checkElement(element);
    let complete;
    try {
      complete = completeDatasetOptions(element.dataset, defaultModelUrl);
    } catch (error) {
      showRefusal(shadowRootOf(element), error.message);
      return null;
    }
    return start(element, complete);
  }

  function start(element, complete) {
    const root = shadowRootOf(element);
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
      .map((element) => mountFromDataset(element))
      .filter((handle) => handle !== null);
  }

  return Object.freeze({ mount, mountAll });
}

// A tag's widget, with the tag's data-* options: a value it does not take shows its message inside the widget,
// as a placeholder's does. The default model is the one next to this tag's script, which may differ from the
// first tag's.
function mountAtScript(library, script) {
  const element = document.createElement('gpt2-widget');
  script.after(element);
  let options;
  try {
    options = completeDatasetOptions(script.dataset, new URL(BUNDLED_MODEL_PATH, script.src));
  } catch (error) {
    return void showRefusal(element.attachShadow({ mode: 'open' }), error.message);
  }
  library.mount(element, options);
}

// Run by gpt2-widget.js as it loads, with the engine worker's code (workerSource: a module, tools/dev/bundle_web.mjs).
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
