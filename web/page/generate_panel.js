// The Generate mode: streaming generation with per-token probabilities, Continue, Stop, the speed statistics
// and the ms/token chart. The pieces that arrive between two frames go into the page together, in one animation
// frame: at hundreds of tokens a second, a DOM change (and a layout) per token would leave the page no time for
// its frames, its input and the accessibility tree.
import { TokenTimeChart } from './chart.js';
import { recoverFromCrash } from './crash_recovery.js';
import { $, BEAMS_AND_SPECULATION, TOP_ALTERNATIVES, beamsPastContext, clearError, elements, hasGeneratedOutput, invalidNumberMessage, labelOf, pieceOfToken, showError, showInvalid, state, updateControls } from './page_state.js';
import { breaksRule } from '../lib/generation/option_checks.js';
import { parseBadWords, parseLogitBias } from '../lib/generation/option_text.js';
import { formatBytes } from '../lib/progress_text.js';
import { insideInspectOption, insidePiece, insideRunEnded, insideRunStarted } from './inside_view.js';
import { RunAnnouncer } from './run_announcer.js';
import { hideTooltip } from './tooltip.js';

const chart = new TokenTimeChart($('token-chart'));
const announcer = new RunAnnouncer($('run-announcer'));
// The pieces received and not shown yet, with the run they belong to, and the frame that shows them.
const unshown = { pieces: [], run: null, frame: 0, shownInRun: 0 };

// Generate starts the output from the prompt; Continue generates more after what the output shows (the prompt
// it started from and the tokens so far), with the same settings. It gives the model those token ids, not their
// text (which the tokenizer may cut into other tokens), so the model's cache holds all but the last of them
// (generate() reuses the longest common prefix of its cache) and only that one is fed again.
export function generate() {
  runGeneration(elements.prompt.value, { continuing: false });
}

export function continueGeneration() {
  if (hasGeneratedOutput()) runGeneration(elements.output.textContent, { continuing: true });
}

async function runGeneration(text, { continuing }) {
  if (!state.model || state.generation || state.loading || state.analyzing) return;
  const options = readGenerationOptions();
  if (!options) return;
  const controller = new AbortController();
  state.generation = state.latestGeneration = controller;
  clearError();
  updateControls();
  if (continuing) continueOutput();
  else startOutput(text);
  chart.startRun(options.useKVCache);
  let run = null;
  try {
    // The ids of what the output shows; an empty prompt (the model starts from <|endoftext|>) keeps none, and
    // Continue then gives the text.
    if (!continuing) state.outputIds = await state.model.encode(text);
    const prompt = continuing && state.outputIds?.length ? state.outputIds : text;
    insideRunStarted({ continuing });
    const inspect = insideInspectOption(options);
    run = state.model.generate(prompt, { ...options, inspect, signal: controller.signal, topAlternatives: TOP_ALTERNATIVES });
    let isFirstPiece = true;
    for await (const piece of run) {
      if (controller.signal.aborted) break;
      if (Number.isInteger(piece.token)) state.outputIds?.push(piece.token);
      insidePiece(piece);
      // The first piece's time is the prompt's prefill, shown on its own; the chart is about decode steps.
      if (!isFirstPiece) chart.addPoint(piece.position, piece.ms);
      isFirstPiece = false;
      showInNextFrame(piece, run);
    }
  } catch (error) {
    if (error.name === 'EngineAbortedError') recoverFromCrash(error);
    else if (!controller.signal.aborted) showError(`Generation failed: ${error.message}`);
  } finally {
    // A stopped run ends in the worker only at its next token, maybe after a newer run has started: its stats
    // must not replace the newer run's.
    showUnshown();
    if (run && state.latestGeneration === controller) showStats(run.stats, controller.signal.aborted);
    if (run && state.generation === controller) announcer.end(unshown.shownInRun, elements.stats.stop.textContent);
    finishGeneration(controller);
    insideRunEnded();
  }
}

function showInNextFrame(piece, run) {
  unshown.pieces.push(piece);
  unshown.run = run;
  unshown.frame ||= requestAnimationFrame(showUnshown);
}

// The pieces received since the last frame: their tokens, the run's stats, a lost GPU. The page is laid out once:
// where the output was scrolled is read before anything changes, the new end after everything has.
function showUnshown() {
  cancelAnimationFrame(unshown.frame);
  unshown.frame = 0;
  const { pieces, run } = unshown;
  if (pieces.length === 0) return;
  unshown.pieces = [];
  const { output } = elements;
  // Follow the text as it grows, unless the reader has scrolled up to read earlier output.
  const followingEnd = output.scrollHeight - output.scrollTop - output.clientHeight < 24;
  appendTokens(pieces);
  showStats(run.stats);
  if (followingEnd) output.scrollTop = output.scrollHeight;
  announcer.add(pieces.map((piece) => piece.text).join(''));
  unshown.shownInRun += pieces.length;
  // a GPU lost mid-run: the run goes on on the CPU (web/lib/gpu/gpu_session.js), and so does the model
  if (run.stats.deviceLost) showError(`${run.stats.deviceLost}: the run went on on the CPU (WebAssembly), where the model now runs.`);
}

// The controls come back at once on Stop, without waiting for the engine to finish its current step; the output
// keeps the tokens received before it.
export function stopGeneration() {
  const controller = state.generation;
  if (!controller) return;
  controller.abort();
  showUnshown();
  // A comparison (compare_panel.js) is a generation too, but the stats show Generate's latest run.
  if (controller === state.latestGeneration) {
    elements.stats.stop.textContent = 'stopped';
    announcer.end(unshown.shownInRun, 'stopped');
  }
  finishGeneration(controller);
}

function finishGeneration(controller) {
  if (state.generation !== controller) return;
  state.generation = null;
  elements.output.setAttribute('aria-busy', 'false');
  updateControls();
}

// Returns the generate() options, or null after pointing at the first invalid field.
function readGenerationOptions() {
  const numberFields = [elements.temperature, elements.topK, elements.topP, elements.maxNewTokens, elements.seed, elements.minP,
    elements.typicalP, elements.presencePenalty, elements.frequencyPenalty, elements.noRepeatNgramSize, elements.minNewTokens,
    elements.numBeams, elements.lengthPenalty];
  const invalid = numberFields.find((input) => !input.checkValidity() || (input !== elements.seed && input.value === ''));
  if (invalid) return showInvalid(invalid, invalidNumberMessage(invalid));
  if (breaksRule('sequencesWithoutSpeculation', { numBeams: elements.numBeams.valueAsNumber, speculative: elements.speculative.checked })) {
    return showInvalid(elements.numBeams, BEAMS_AND_SPECULATION);
  }
  const pastContext = beamsPastContext(elements.numBeams.valueAsNumber, elements.maxNewTokens.valueAsNumber);
  if (pastContext) return showInvalid(elements.maxNewTokens, pastContext);
  let logitBias;
  try {
    logitBias = parseLogitBias(elements.logitBias.value, labelOf(elements.logitBias));
  } catch (error) {
    return showInvalid(elements.logitBias, error.message);
  }
  return {
    temperature: elements.temperature.valueAsNumber,
    topK: elements.topK.valueAsNumber,
    topP: elements.topP.valueAsNumber,
    maxNewTokens: elements.maxNewTokens.valueAsNumber,
    seed: elements.seed.value === '' ? undefined : elements.seed.valueAsNumber,
    minP: elements.minP.valueAsNumber,
    typicalP: elements.typicalP.valueAsNumber,
    presencePenalty: elements.presencePenalty.valueAsNumber,
    frequencyPenalty: elements.frequencyPenalty.valueAsNumber,
    noRepeatNgramSize: elements.noRepeatNgramSize.valueAsNumber,
    minNewTokens: elements.minNewTokens.valueAsNumber,
    numBeams: elements.numBeams.valueAsNumber,
    lengthPenalty: elements.lengthPenalty.valueAsNumber,
    logitBias,
    badWords: parseBadWords(elements.badWords.value),
    useKVCache: elements.kvCache.checked,
    kvCache: elements.kvStorage.value,
    speculative: elements.speculative.checked ? { draft: 'prompt-lookup' } : undefined,
  };
}

function startOutput(prompt) {
  hideTooltip();
  const promptSpan = document.createElement('span');
  promptSpan.className = 'prompt-text';
  promptSpan.textContent = prompt;
  elements.output.replaceChildren(promptSpan);
  startStats();
}

function continueOutput() {
  hideTooltip();
  startStats();
}

function startStats() {
  unshown.shownInRun = 0;
  announcer.start();
  elements.output.setAttribute('aria-busy', 'true');
  for (const cell of Object.values(elements.stats)) cell.textContent = '–';
}

function appendTokens(pieces) {
  const { output } = elements;
  // Roving tabindex: the output is one Tab stop; arrow keys move between tokens.
  let tabIndex = output.querySelector('.token') ? -1 : 0;
  const spans = pieces.map((piece) => {
    const span = document.createElement('span');
    span.className = 'token';
    span.textContent = piece.text;
    span.tabIndex = tabIndex;
    tabIndex = -1;
    pieceOfToken.set(span, piece);
    return span;
  });
  output.append(...spans);
}

const STOP_REASONS = {
  length: 'token limit',
  eos: 'end of text',
  stop: 'stop sequence',
  abort: 'stopped',
  error: 'error',
};

function showStats(stats, stopped = false) {
  if (!stats) return;
  const { speed, drafts, prefill, reused, context, kv, stop } = elements.stats;
  if (Number.isFinite(stats.decodeTokensPerSecond) && stats.decodeTokensPerSecond > 0) {
    speed.textContent = stats.decodeTokensPerSecond.toFixed(1);
  }
  if (stats.draftedTokens > 0) {
    const share = document.createElement('small');
    share.textContent = `of ${stats.draftedTokens} drafted (${Math.round((100 * stats.acceptedTokens) / stats.draftedTokens)} %)`;
    drafts.replaceChildren(String(stats.acceptedTokens), share);
  }
  if (Number.isFinite(stats.prefillMs)) {
    const promptTokens = document.createElement('small');
    promptTokens.textContent = `for ${stats.promptTokens} prompt tokens`;
    prefill.replaceChildren(`${stats.prefillMs.toFixed(1)} ms`, promptTokens);
  }
  if (Number.isFinite(stats.prefillMs) && Number.isFinite(stats.reusedTokens)) {
    const promptTokens = document.createElement('small');
    promptTokens.textContent = `of ${stats.promptTokens} prompt tokens`;
    reused.replaceChildren(String(stats.reusedTokens), promptTokens);
  }
  if (Number.isFinite(stats.contextUsed)) context.textContent = `${stats.contextUsed} / ${stats.contextSize} tokens`;
  if (Number.isFinite(stats.kvCacheBytes)) {
    kv.textContent = stats.kvCacheBytes > 0 ? `${formatBytes(stats.kvCacheBytes)} (${stats.kvCache})` : 'none';
  }
  if (stopped) stop.textContent = 'stopped';
  else if (stats.stopReason) stop.textContent = STOP_REASONS[stats.stopReason] ?? stats.stopReason;
}
