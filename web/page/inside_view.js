// The Inside the model view (public/index.html #inside-view): the tokens of the output, the one selected, and the
// step that produced it shown by the panels (inside_attention.js, inside_blocks.js, inside_lens.js, inside_kv.js,
// inside_check.js, inside_sampler.js) and walked through by the tour (tour.js). A generated token's step is what its
// piece recorded as the run went (generate()'s inspect, asked while the view is open: cheap, no logit lens); a
// prompt token's, and the logit lens, come from model.inspect() (inside_requests.js). It renders only while open,
// at most a few times a second.
import { AttentionPanel } from './inside_attention.js';
import { showBlocks } from './inside_blocks.js';
import { showCheck } from './inside_check.js';
import { tokenName } from './inside_dom.js';
import { showKvCache } from './inside_kv.js';
import { showLens } from './inside_lens.js';
import { InspectQueue } from './inside_requests.js';
import { showSampler } from './inside_sampler.js';
import { TokenStrip } from './inside_tokens.js';
import { $, elements, pieceOfToken, state } from './page_state.js';
import { wireTour } from './tour.js';

// The logit lens's and the sampler trace's tokens per entry, and the positions the lens shows up to a selected step.
const TOP_K = 5;
const LENS_POSITIONS = 12;
const RENDER_INTERVAL_MS = 250;
const NO_TOKENS = 'The prompt\'s and the generated tokens appear here once you generate.';
// The recorded attention and KV rows kept; older steps' are dropped and computed again by a fresh pass if selected.
const KEPT_RECORDED_BYTES = 32 * 2 ** 20;
const PASSES_KEPT = 8;

const view = {
  ids: [],               // the token ids of the text, by position: the prompt's, then the generated ones
  texts: [],             // their texts, by position
  generatedFrom: Infinity,
  pieces: new Map(),     // position -> its generated piece (with .inspection when the view recorded its step)
  recorded: [],          // the positions whose pieces still hold their attention and KV rows, oldest first
  recordedBytes: 0,
  selected: null,
  following: true,       // the selection moves to each new token
  generating: false,
  runs: 0,               // runs started: a new run's step may look like the last one's at the same position
  passes: new Map(),     // pass key -> model.inspect()'s result, or { error }
  passesModel: null,     // the model they came from
  shown: '',             // what the panels show (stepSignature)
  lastRender: 0,
  renderTimer: null,
};
const textsOfIds = new Map();  // token id -> text
const textsAsked = new Set();   // token ids whose text the model is decoding
const nodes = {};
// Busy: a run of Generate or Compare strategies, or Analyze text, is using the model.
const queue = new InspectQueue(() => state.generation !== null || state.analyzing !== null);

export function wireInsideView() {
  Object.assign(nodes, { view: $('inside-view'), list: $('inside-tokens'), selection: $('inside-selection'), tourStart: $('tour-start') });
  for (const name of ['attention', 'blocks', 'lens', 'kv', 'check', 'sampler']) nodes[name] = $(`${name}-body`);
  nodes.strip = new TokenStrip(nodes.list, (position, { focus }) => select(position, { focus }));
  nodes.attentionPanel = new AttentionPanel(nodes.attention);
  nodes.view.addEventListener('toggle', () => (nodes.view.open ? render() : queue.drop()));
  elements.output.addEventListener('click', (event) => selectFromOutput(event.target));
  elements.output.addEventListener('keydown', (event) => event.key === 'Enter' && selectFromOutput(event.target));
  wireTour({
    select: (position) => select(position, { scroll: false }),
    open: () => (nodes.view.open = true),
    tokens: () => ({ ids: view.ids, texts: view.texts, generatedFrom: view.generatedFrom, pieces: view.pieces }),
    config: () => state.model?.config,
  });
}

// generate()'s inspect option for a run with these options, or undefined: each step recorded while the view is open
// (on a GPU model the recorded run goes on on the CPU engine), where a step feeds one token.
export function insideInspectOption({ numBeams, speculative }) {
  if (!nodes.view.open || numBeams > 1 || speculative) return undefined;
  return { logitLens: false, topK: TOP_K };
}

// A run starts from state.outputIds (known by now); continuing: it goes on after the text shown.
export function insideRunStarted({ continuing }) {
  const ids = state.outputIds ?? [];
  if (!continuing || ids.length !== view.ids.length) {
    Object.assign(view, { generatedFrom: Math.max(ids.length, 1), pieces: new Map(), recorded: [], recordedBytes: 0, selected: null, following: true });
    view.passes.clear();
    view.texts = [];
    nodes.strip.clear(NO_TOKENS);
  }
  view.ids = [...ids];
  if (ids.length === 0) fillStartToken();
  view.generating = true;
  view.runs++;
  scheduleRender();
}

export function insidePiece(piece) {
  if (!Number.isInteger(piece.token)) return;
  view.ids[piece.position] = piece.token;
  view.pieces.set(piece.position, piece);
  if (piece.inspection) {
    view.texts[piece.position] = textsOfIds.get(piece.token) ?? piece.inspection.sampler.text;
    keepRecorded(piece);
  }
  if (view.following) view.selected = piece.position;
  scheduleRender();
}

export function insideRunEnded() {
  view.generating = false;
  queue.poke();
  scheduleRender();
}

// An empty prompt starts from <|endoftext|>, which the output does not show: its id and text from the model.
async function fillStartToken() {
  try {
    const { tokens } = await state.model.inspect([], { heads: [], logitLens: false });
    if (view.ids[0] === undefined) view.ids[0] = tokens[0].id;
    textsOfIds.set(tokens[0].id, tokens[0].text);
    scheduleRender();
  } catch {
    // the model went away (a reload): the next run starts again
  }
}

// Keeps the recorded attention and KV rows of the newest steps within KEPT_RECORDED_BYTES.
function keepRecorded(piece) {
  view.recorded.push(piece.position);
  view.recordedBytes += recordedBytes(piece.inspection);
  while (view.recordedBytes > KEPT_RECORDED_BYTES && view.recorded.length > 1) {
    const inspection = view.pieces.get(view.recorded.shift())?.inspection;
    if (!inspection) continue;
    view.recordedBytes -= recordedBytes(inspection);
    inspection.attention = null;
    inspection.kv.rows = null;
  }
}

function recordedBytes({ attention, kv }) {
  let floats = 0;
  for (const layer of attention ?? []) for (const head of layer) for (const row of head) floats += row.length;
  for (const layer of kv.rows ?? []) for (const head of layer) for (const row of head) floats += row.key.length + row.value.length;
  return 4 * floats;
}

function selectFromOutput(target) {
  const piece = pieceOfToken.get(target.closest?.('.token'));
  if (!Number.isInteger(piece?.position) || !view.pieces.has(piece.position)) return;
  nodes.view.open = true;
  select(piece.position);
}

function select(position, { focus = false, scroll = true } = {}) {
  view.selected = position;
  view.following = position === view.ids.length - 1;
  render();
  nodes.strip.select(position, { focus, scroll });
}

function scheduleRender() {
  if (!nodes.view.open || view.renderTimer !== null) return;
  const wait = Math.max(0, view.lastRender + RENDER_INTERVAL_MS - performance.now());
  view.renderTimer = setTimeout(render, wait);
}

function render() {
  clearTimeout(view.renderTimer);
  view.renderTimer = null;
  if (!nodes.view.open) return;
  view.lastRender = performance.now();
  fillTexts();
  nodes.tourStart.disabled = !(view.generatedFrom < view.ids.length);
  if (view.ids.length === 0) return nodes.strip.clear(NO_TOKENS);
  if (view.selected === null || view.selected >= view.ids.length) view.selected = view.ids.length - 1;
  nodes.strip.show(view.texts, view.generatedFrom);
  nodes.strip.select(view.selected, { scroll: true });
  const step = stepAt(view.selected);
  if (step && !passFor(step)) wantPass(step);
  showStep(step);
}

// Draws the panels, unless they already show this step as it is.
function showStep(step) {
  const signature = stepSignature(step);
  if (signature === view.shown) return;
  view.shown = signature;
  nodes.selection.textContent = selectionText(step);
  const lens = lensOf(step);
  nodes.attentionPanel.show(step);
  showBlocks(nodes.blocks, step, state.model?.config);
  showLens(nodes.lens, step, lens);
  showKvCache(nodes.kv, step);
  showCheck(nodes.check, step, lens);
  showSampler(nodes.sampler, step);
}

function stepSignature(step) {
  if (!step) return `none ${view.selected} ${view.texts[view.selected]} ${view.runs} ${Boolean(state.model)}`;
  const pass = passFor(step);
  return [step.position, step.windowStart, step.source, Boolean(step.inspection), pass ? 'pass' : '', pass?.error ?? '',
    view.texts.slice(step.windowStart, step.position + 1).join('\u0000'), view.generating, view.runs].join(' ');
}

// The step that produced the token at position: its pass (at the token before it) as the run recorded it, or as a
// fresh pass over the window up to it computes it; null for the first token.
function stepAt(position) {
  if (position < 1 || position >= view.ids.length || !state.model) return null;
  const recorded = view.pieces.get(position)?.inspection;
  const windowStart = recorded ? position - 1 - recorded.positions[0] : Math.max(0, position - state.model.config.n_ctx);
  const step = {
    position, query: position - 1, windowStart, source: recorded ? 'run' : 'pass',
    selectedText: view.texts[position] ?? '', queryText: view.texts[position - 1] ?? '',
    text: (i) => view.texts[i] ?? '', idAt: (i) => view.ids[i],
    kvCache: recorded?.kv.format ?? elements.kvStorage.value,
    sampler: recorded?.sampler ?? null, samplerNote: samplerNote(position),
  };
  const pass = passFor(step);
  step.inspection = recorded?.attention ? atPosition(recorded, 0) : pass && !pass.error ? atPosition(pass, pass.positions.length - 1) : null;
  step.kv = recorded?.kv ?? (pass && !pass.error ? pass.kv : null);
  step.pending = pass?.error ? `Could not look inside: ${pass.error}` : view.generating ? 'Computing… (about once a second while the model generates)' : 'Computing…';
  return step;
}

function samplerNote(position) {
  if (position < view.generatedFrom) return 'A prompt token is given, not drawn: the sampler runs for generated tokens only.';
  return 'This token\'s draw was not recorded: the view records each step while it is open, with Beams 1 and speculative ' +
    'decoding off. Open it, then generate, to see how the sampler drew each token.';
}

// An inspection's values at its i-th position, as the panels take them (each list of positions one long).
function atPosition({ layers, heads, attention, blocks, note }, i) {
  return { layers, heads, note, attention: attention.map((layer) => layer.map((head) => [head[i]])), blocks: blocks.map((layer) => [layer[i]]) };
}

function passKey(step) {
  return `${step.windowStart} ${step.position} ${step.kvCache}`;
}

function passFor(step) {
  if (view.passesModel !== state.model) {
    view.passes.clear();
    view.passesModel = state.model;
  }
  return view.passes.get(passKey(step));
}

function lensOf(step) {
  const pass = step ? passFor(step) : null;
  if (pass?.error) return { result: null, note: `Could not compute it: ${pass.error}` };
  return { result: pass ?? null, windowStart: step?.windowStart, note: step?.pending };
}

// One fresh pass over the window up to the step's pass: the logit lens over its last positions, and for a step the
// run did not record (or whose rows were dropped), its attention, blocks and cache.
function wantPass(step) {
  const key = passKey(step);
  const model = state.model;
  const ids = view.ids.slice(step.windowStart, step.position);
  const last = ids.length - 1;
  const positions = Array.from({ length: Math.min(LENS_POSITIONS, ids.length) }, (_, i) => last - Math.min(LENS_POSITIONS, ids.length) + 1 + i);
  const needsRows = !view.pieces.get(step.position)?.inspection?.attention;
  queue.want({
    key,
    run: () => model.inspect(ids, { positions, topK: TOP_K, kvCache: step.kvCache, ...(needsRows ? {} : { heads: [] }) }),
    done: (error, result) => {
      if (model !== state.model) return;
      view.passes.set(key, error ? { error: error.message } : result);
      while (view.passes.size > PASSES_KEPT) view.passes.delete(view.passes.keys().next().value);
      scheduleRender();
    },
  });
}

function selectionText(step) {
  const position = view.selected;
  const name = tokenName(view.texts[position]);
  if (!state.model) return 'The model is loading: the view looks inside it once it is ready.';
  if (!step) return `${name} at position ${position} starts the text: no pass produced it. Select a later token.`;
  const kind = step.source === 'run' ? 'recorded as the run went' : 'a fresh pass over the text up to it';
  const note = step.inspection?.note ? ` (${step.inspection.note})` : '';
  return `Selected ${name} at position ${position} (${position >= view.generatedFrom ? 'generated' : 'prompt'}), produced by ` +
    `the pass at ${tokenName(step.queryText)} (position ${step.query}): ${kind}${note}.`;
}

// The texts of the ids whose text is not known yet, from the model's tokenizer; a render follows.
function fillTexts() {
  const missing = [];
  view.ids.forEach((id, position) => {
    if (textsOfIds.has(id)) view.texts[position] = textsOfIds.get(id);
    else if (id !== undefined) missing.push(id);
  });
  const asked = [...new Set(missing)].filter((id) => !textsAsked.has(id));
  if (asked.length === 0 || !state.model) return;
  const model = state.model;
  for (const id of asked) textsAsked.add(id);
  const settle = () => asked.forEach((id) => textsAsked.delete(id));
  // a failure: the model went away (a reload), and the next render asks again
  Promise.all(asked.map(async (id) => textsOfIds.set(id, await model.decode([id])))).then(() => (settle(), scheduleRender()), settle);
}
