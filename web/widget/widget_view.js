// One widget: its Shadow DOM (the markup below, styled by widget.css), its controls, its model and its runs.
import { formatBytes, formatPace } from '../lib/progress_text.js';
import { GENERATE_OPTIONS } from './widget_options.js';
import WIDGET_CSS from './widget.css';

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
    <div class="sequences" hidden></div>
    <p class="alert" role="alert" hidden></p>
  </div>
`;

let styleSheet = null;

// One constructed sheet for every widget: unlike a <style> element, a CSP without 'unsafe-inline' in
// style-src allows it.
function widgetStyleSheet() {
  if (!styleSheet) {
    styleSheet = new CSSStyleSheet();
    styleSheet.replaceSync(WIDGET_CSS);
  }
  return styleSheet;
}

// A widget whose options were refused (a data-* attribute it does not take): its one-line message, and none of the
// widget's controls or outputs.
export function showRefusal(root, message) {
  root.adoptedStyleSheets = [widgetStyleSheet()];
  const widget = document.createElement('div');
  widget.className = 'widget blocked';
  widget.setAttribute('part', 'widget');
  const alert = document.createElement('p');
  alert.className = 'alert';
  alert.setAttribute('role', 'alert');
  alert.textContent = message;
  widget.append(alert);
  root.replaceChildren(widget);
}

export class Widget {
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
  #blocked = false;  // the engine cannot run on this page (GeneratorApi.findProblem)
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
    if (this.#generation || this.#destroyed || this.#blocked) return;
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
      output: find('.output'), echo: find('.echo'), generated: find('.generated'), sequences: find('.sequences'), alert: find('.alert'),
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

  // The engine cannot run on this page: the message, and no controls (Generate stays off, whoever calls it).
  #block(message) {
    this.#blocked = true;
    this.#ui.generate.disabled = true;
    this.#ui.widget.classList.add('blocked');
    this.#showAlert(message);
  }

  // -> the loaded model, or null after showing why it could not load.
  #ensureModel() {
    this.#ready ??= this.#loadModel();
    return this.#ready;
  }

  async #loadModel() {
    // a Generate clicked before #start knew whether the engine can run here
    const problem = await this.#generator.findProblem();
    if (this.#destroyed) return null;
    if (problem) {
      this.#block(problem);
      return null;
    }
    const { generate, progress, status } = this.#ui;
    let notCached = null;  // why the browser did not keep the model's files (e.g. a full quota), if it did not
    this.#lease = this.#generator.acquireModel(this.#options.model, this.#options.device, (event) => {
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
      const device = model.device === 'webgpu' ? 'GPU (WebGPU)' : 'CPU (WebAssembly)';
      status.textContent = `Ready · ${formatBytes(model.weightBytes)} of weights on the ${device}, running in your browser${kept}`;
      return model;
    } catch (error) {
      if (this.#destroyed) return null;
      this.#lease.release();
      this.#lease = this.#ready = null;
      this.#showAlert(`Could not load the model: ${error.message}`);
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
    // Several sequences each get a box of their own; the one output then stays empty, so Continue stays off:
    // there is no one text to continue.
    const sequenceOutputs = this.#options.numReturnSequences > 1 ? this.#showSequenceOutputs(echo.textContent) : null;
    output.hidden = sequenceOutputs !== null;
    this.#hideAlert();
    status.textContent = 'Generating…';
    try {
      // Continue gives the token ids of the prompt and the output (see gpt2.js: their text may encode to others).
      if (!continuing) this.#outputIds = await model.encode(echo.textContent);
      const input = continuing && this.#outputIds.length ? this.#outputIds : echo.textContent + generated.textContent;
      const generation = model.generate(input, { ...this.#generateOptions(), signal });
      for await (const piece of generation) {
        // text nodes: model output is never parsed as HTML
        if (sequenceOutputs) sequenceOutputs[piece.sequence].append(piece.text);
        else {
          if (Number.isInteger(piece.token)) this.#outputIds.push(piece.token);
          generated.append(piece.text);
        }
      }
      status.textContent = describeRun(generation.stats);
    } catch (error) {
      if (this.#destroyed) return;
      status.textContent = '';
      if (error.name === 'EngineAbortedError') await this.#recoverFromCrash(model, error);
      else this.#showAlert(`Generation failed: ${error.message}`);
    }
  }

  // Fills the sequences' box with one output per sequence, labelled "Sequence 1", "Sequence 2", …, each starting
  // with the prompt as the one output does; -> the element of each that receives its generated text.
  #showSequenceOutputs(promptText) {
    const outputs = [];
    const boxes = Array.from({ length: this.#options.numReturnSequences }, (_, i) => {
      const box = document.createElement('div');
      box.className = 'sequence';
      const label = document.createElement('div');
      label.className = 'sequence-label';
      label.textContent = `Sequence ${i + 1}`;
      label.id = `sequence-label-${i + 1}`;  // ids are the shadow root's own, so widgets do not clash
      const text = document.createElement('div');
      text.className = 'output';
      text.setAttribute('role', 'region');
      text.setAttribute('aria-labelledby', label.id);
      const echo = document.createElement('span');
      echo.className = 'echo';
      echo.textContent = promptText;
      const generated = document.createElement('span');
      generated.className = 'generated';
      text.append(echo, generated);
      box.append(label, text);
      outputs.push(generated);
      return box;
    });
    this.#ui.sequences.replaceChildren(...boxes);
    this.#ui.sequences.hidden = false;
    return outputs;
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
    this.#ui.generate.disabled = busy || this.#blocked;
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

function describeRun({ generatedTokens, decodeTokensPerSecond, stopReason, reusedTokens, draftedTokens, acceptedTokens }) {
  const speed = decodeTokensPerSecond > 0 ? ` · ${Math.round(decodeTokensPerSecond)} tokens/s` : '';
  const drafts = draftedTokens > 0 ? ` · ${acceptedTokens} of ${draftedTokens} drafts accepted` : '';
  const stopped = stopReason === 'abort' ? ' · stopped' : '';
  const reused = reusedTokens > 0 ? ` · ${reusedTokens} reused` : '';
  return `${generatedTokens} tokens${speed}${drafts}${stopped}${reused}`;
}
