// The Analyze text mode: each token of a text coloured by the rank the model gave it, and the text's perplexity.
// Its Stop aborts the score (the engine worker stops between two passes), leaving the last analysis shown.
import { recoverFromCrash } from './crash_recovery.js';
import { $, TOP_ALTERNATIVES, clearError, elements, pieceOfToken, showError, state, updateControls } from './page_state.js';
import { RANK_BUCKETS, rankBucket } from './rank_buckets.js';
import { hideTooltip } from './tooltip.js';

export async function analyze() {
  const { model } = state;
  if (!model || state.analyzing || state.generation || state.loading || state.recovery) return;
  const text = elements.analyzeText.value;
  if (text === '') {
    showError('Text to analyze: paste or type a text first.');
    elements.analyzeText.focus();
    return;
  }
  const controller = new AbortController();
  state.analyzing = controller;
  clearError();
  updateControls();
  elements.analysisText.setAttribute('aria-busy', 'true');
  try {
    const result = await model.score(text, { topAlternatives: TOP_ALTERNATIVES, signal: controller.signal });
    if (state.model === model) showAnalysis(result);
  } catch (error) {
    if (state.model !== model || error.name === 'AbortError') return;
    if (error.name === 'EngineAbortedError') recoverFromCrash(error);
    else showError(`Analysis failed: ${error.message}`);
  } finally {
    state.analyzing = null;
    elements.analysisText.setAttribute('aria-busy', 'false');
    updateControls();
  }
}

export function stopAnalysis() {
  state.analyzing?.abort();
}

// result: model.score()'s { tokens: [{ token, text, logprob, rank, alternatives: [{ token, text, logprob }] }],
// perplexity }.
function showAnalysis({ tokens, perplexity }) {
  hideTooltip();
  const spans = tokens.map(analyzedTokenSpan);
  if (spans.length > 0) spans[0].tabIndex = 0; // roving tabindex, as in the output
  elements.analysisText.replaceChildren(...spans);
  elements.perplexity.textContent = tokens.length > 0 ? formatPerplexity(perplexity) : '–';
  elements.analyzedTokens.textContent = String(tokens.length);
  for (const bucket of RANK_BUCKETS) {
    const count = tokens.filter((token) => rankBucket(token.rank) === bucket).length;
    const share = tokens.length > 0 ? ` (${Math.round((100 * count) / tokens.length)} %)` : '';
    $(`count-${bucket.name}`).textContent = `${count} ${count === 1 ? 'token' : 'tokens'}${share}`;
  }
}

function analyzedTokenSpan({ token, text, logprob, rank, alternatives }) {
  const span = document.createElement('span');
  span.className = `token rank-${rankBucket(rank).name}`;
  span.textContent = text;
  span.tabIndex = -1;
  pieceOfToken.set(span, {
    text, token, rank, probability: Math.exp(logprob),
    alternatives: alternatives.map((alternative) => ({ ...alternative, probability: Math.exp(alternative.logprob) })),
  });
  return span;
}

function formatPerplexity(perplexity) {
  return perplexity < 1000 ? perplexity.toFixed(2) : String(Math.round(perplexity));
}
