// The Compare strategies view: the page's prompt run with several decoding strategies, one column each, side by
// side, so that a learner sees what temperature, beam search, top-k, top-p, min-p and speculative decoding change
// in the text and in the speed. Its tokens carry the output's tooltips (tooltip.js).
import { breaksRule } from '../lib/generation/option_checks.js';
import { recoverFromCrash } from './crash_recovery.js';
import { $, BEAMS_AND_SPECULATION, TOP_ALTERNATIVES, beamsPastContext, clearError, elements, invalidNumberMessage, pieceOfToken, showError, showInvalid, state, updateControls } from './page_state.js';
import { hideTooltip, wireTooltip } from './tooltip.js';

// One of each family the page offers, with a fixed seed so that a run can be repeated and a copied column with
// speculation on can be checked against the one without. topK 0, topP 1 and minP 0 are off: each sampling column
// shows one filter alone.
const DEFAULT_COLUMNS = [
  { temperature: 0, topK: 0, topP: 1, minP: 0, numBeams: 1, seed: 1, speculative: false },
  { temperature: 0, topK: 0, topP: 1, minP: 0, numBeams: 4, seed: 1, speculative: false },
  { temperature: 0.8, topK: 40, topP: 1, minP: 0, numBeams: 1, seed: 1, speculative: false },
  { temperature: 0.8, topK: 0, topP: 0.9, minP: 0, numBeams: 1, seed: 1, speculative: false },
  { temperature: 1, topK: 0, topP: 1, minP: 0.1, numBeams: 1, seed: 1, speculative: false },
];

const NUMBER_SETTINGS = ['temperature', 'topK', 'topP', 'minP', 'numBeams', 'seed'];

const view = {
  details: $('compare-view'),
  columns: $('compare-columns'),
  template: $('compare-column-template'),
  add: $('compare-add'),
};

let nextColumnId = 1; // ids stay unique when columns are removed and added
let activeRun = null; // AbortController of the comparison in progress, whose end gives the column controls back

export function wireComparePanel() {
  for (const settings of DEFAULT_COLUMNS) addColumn(settings);
  elements.compare.addEventListener('click', runComparison);
  view.add.addEventListener('click', () => addColumn(readSettings(columnList().at(-1))));
  view.columns.addEventListener('input', (event) => {
    const column = event.target.closest('.compare-column');
    if (column) showTitle(column);
  });
  view.columns.addEventListener('click', (event) => {
    const remove = event.target.closest('.compare-remove');
    if (remove) removeColumn(remove.closest('.compare-column'));
  });
}

function columnList() {
  return [...view.columns.querySelectorAll('.compare-column')];
}

function addColumn(settings) {
  const column = view.template.content.firstElementChild.cloneNode(true);
  const id = `compare-${nextColumnId++}`;
  column.querySelector('.compare-title').id = `${id}-title`;
  column.setAttribute('aria-labelledby', `${id}-title`);
  for (const input of column.querySelectorAll('input[data-setting]')) {
    const { setting } = input.dataset;
    input.id = `${id}-${setting}`;
    column.querySelector(`label[data-setting="${setting}"]`).htmlFor = input.id;
    if (setting === 'speculative') input.checked = settings.speculative;
    else input.value = settings[setting] ?? '';
  }
  wireTooltip(column.querySelector('.compare-text'));
  view.columns.append(column);
  numberColumns();
  return column;
}

function removeColumn(column) {
  if (columnList().length <= 1) return;
  const next = column.nextElementSibling ?? column.previousElementSibling;
  hideTooltip();
  column.remove();
  numberColumns();
  // The focus was on the removed button: it goes to the neighbouring column's, not back to the page's start.
  next.querySelector('.compare-remove').focus();
}

// The column's number is part of every control's name, so that a screen reader (and a test) tells the
// columns' Temperature fields apart.
function numberColumns() {
  const columns = columnList();
  columns.forEach((column, index) => {
    const number = index + 1;
    column.dataset.number = String(number);
    for (const suffix of column.querySelectorAll('.column-suffix')) suffix.textContent = ` (column ${number})`;
    column.querySelector('.compare-remove').setAttribute('aria-label', `Remove column ${number}`);
    showTitle(column);
  });
  updateColumnControls();
}

function showTitle(column) {
  column.querySelector('.compare-title').textContent = `Column ${column.dataset.number}: ${strategyName(readSettings(column))}`;
}

// The strategy in a learner's words: greedy or beam search, or the filters that sample (one text, or beams) from
// what is left at the temperature.
function strategyName({ temperature, topK, topP, minP, numBeams, speculative }) {
  const beams = numBeams > 1 ? `${numBeams} beams` : null;
  let name;
  if (temperature === 0) name = beams ? `Beam search, ${beams}` : 'Greedy';
  else {
    const filters = [topK > 0 && `top-k ${topK}`, topP < 1 && `top-p ${topP}`, minP > 0 && `min-p ${minP}`].filter(Boolean);
    name = `${filters.length ? filters.join(', ') : 'sampling'} at temperature ${temperature}`;
    name = beams ? `Beam sampling, ${beams}, ${name}` : name[0].toUpperCase() + name.slice(1);
  }
  return speculative ? `${name}, speculative` : name;
}

function readSettings(column) {
  const settings = { speculative: column.querySelector('input[data-setting="speculative"]').checked };
  for (const setting of NUMBER_SETTINGS) {
    const input = column.querySelector(`input[data-setting="${setting}"]`);
    settings[setting] = input.value === '' ? undefined : input.valueAsNumber;
  }
  return settings;
}

// While a comparison runs its columns stay as they are: the run reads each column when it reaches it.
function updateColumnControls() {
  const running = activeRun !== null;
  const columns = columnList();
  view.add.disabled = running;
  for (const column of columns) {
    column.querySelector('.compare-settings').disabled = running;
    column.querySelector('.compare-remove').disabled = running || columns.length === 1;
  }
}

// -> the generate() options of each column, or null after pointing at the first invalid field
function readAllOptions() {
  const maxNewTokens = elements.maxNewTokens;
  if (!maxNewTokens.checkValidity() || maxNewTokens.value === '') return showInvalid(maxNewTokens, invalidNumberMessage(maxNewTokens));
  const columnOptions = [];
  for (const column of columnList()) {
    const invalid = NUMBER_SETTINGS.map((setting) => column.querySelector(`input[data-setting="${setting}"]`))
      .find((input) => !input.checkValidity() || (input.dataset.setting !== 'seed' && input.value === ''));
    if (invalid) return showInvalid(invalid, invalidNumberMessage(invalid));
    const { speculative, ...numbers } = readSettings(column);
    if (breaksRule('sequencesWithoutSpeculation', { numBeams: numbers.numBeams, speculative })) {
      return showInvalid(column.querySelector('input[data-setting="numBeams"]'), BEAMS_AND_SPECULATION);
    }
    const pastContext = beamsPastContext(numbers.numBeams, maxNewTokens.valueAsNumber);
    if (pastContext) return showInvalid(column.querySelector('input[data-setting="numBeams"]'), pastContext);
    columnOptions.push({
      ...numbers,
      maxNewTokens: maxNewTokens.valueAsNumber,
      // the page's cache settings, so that the columns' speeds compare with each other and with Generate's
      useKVCache: elements.kvCache.checked,
      kvCache: elements.kvStorage.value,
      speculative: speculative ? { draft: 'prompt-lookup' } : undefined,
      topAlternatives: TOP_ALTERNATIVES,
    });
  }
  return columnOptions;
}

// The columns run one after another rather than at once: the engine runs one generation at a time, and each
// column's tokens/s is then its own. The run is the page's generation (state.generation), so that Generate,
// Analyze and the model menu wait for it and the page's Stop ends it.
async function runComparison() {
  const { model } = state;
  if (!model || state.generation || state.loading || state.analyzing || state.recovery) return;
  const columnOptions = readAllOptions();
  if (!columnOptions) return;
  const prompt = elements.prompt.value;
  const controller = new AbortController();
  state.generation = activeRun = controller;
  clearError();
  updateControls();
  updateColumnControls();
  hideTooltip();
  const columns = columnList();
  for (const column of columns) startColumn(column);
  try {
    for (const [index, column] of columns.entries()) {
      if (controller.signal.aborted) break;
      await runColumn(model, prompt, column, columnOptions[index], controller.signal);
    }
  } catch (error) {
    if (error.name === 'EngineAbortedError') recoverFromCrash(error);
    else if (!controller.signal.aborted) showError(`Comparison failed: ${error.message}`);
  } finally {
    for (const column of columns) column.querySelector('.compare-text').setAttribute('aria-busy', 'false');
    if (state.generation === controller) {
      state.generation = null;
      updateControls();
    }
    if (activeRun === controller) {
      activeRun = null;
      updateColumnControls();
    }
  }
}

async function runColumn(model, prompt, column, options, signal) {
  const text = column.querySelector('.compare-text');
  text.setAttribute('aria-busy', 'true');
  const run = model.generate(prompt, { ...options, signal });
  try {
    for await (const piece of run) {
      if (signal.aborted) break;
      appendToken(text, piece);
      showColumnStats(column, run.stats);
    }
  } finally {
    showColumnStats(column, run.stats, signal.aborted);
    text.setAttribute('aria-busy', 'false');
  }
}

function startColumn(column) {
  const promptSpan = document.createElement('span');
  promptSpan.className = 'prompt-text';
  promptSpan.textContent = elements.prompt.value;
  column.querySelector('.compare-text').replaceChildren(promptSpan);
  column.querySelector('.compare-speed').textContent = 'waiting';
}

function appendToken(text, piece) {
  const span = document.createElement('span');
  span.className = 'token';
  span.textContent = piece.text;
  // Roving tabindex, as in the output: each column's text is one Tab stop; arrow keys move between its tokens.
  span.tabIndex = text.querySelector('.token') ? -1 : 0;
  pieceOfToken.set(span, piece);
  const followingEnd = text.scrollHeight - text.scrollTop - text.clientHeight < 24;
  text.append(span);
  if (followingEnd) text.scrollTop = text.scrollHeight;
}

function showColumnStats(column, stats, stopped = false) {
  const speed = column.querySelector('.compare-speed');
  const parts = [];
  const tokensPerSecond = stats?.decodeTokensPerSecond;
  parts.push(Number.isFinite(tokensPerSecond) && tokensPerSecond > 0 ? `${tokensPerSecond.toFixed(1)} tokens/s` : '– tokens/s');
  // Speculation keeps the text and changes the speed: how many of its guesses the model kept is why.
  if (stats?.draftedTokens > 0) {
    const share = Math.round((100 * stats.acceptedTokens) / stats.draftedTokens);
    parts.push(`${stats.acceptedTokens} of ${stats.draftedTokens} drafts accepted (${share} %)`);
  }
  if (stopped) parts.push('stopped');
  speed.textContent = parts.join(' · ');
}
