// The token tooltip of the output and the analyzed text: the token's probability, rank and likeliest
// alternatives, shown on hover and on keyboard focus (arrow keys move between tokens).
import { elements, pieceOfToken } from './page_state.js';
import { rankBucket } from './rank_buckets.js';

function showTooltip(span) {
  const piece = pieceOfToken.get(span);
  if (!piece) return;
  const { tooltip } = elements;
  tooltip.querySelector('.tooltip-probability').textContent = `${visibleText(piece.text)}  p = ${formatProbability(piece.probability)}`;
  const rank = tooltip.querySelector('.tooltip-rank');
  rank.hidden = piece.rank === undefined;
  if (piece.rank !== undefined) rank.textContent = `Rank ${piece.rank}: ${rankBucket(piece.rank).label}`;
  const list = tooltip.querySelector('.tooltip-alternatives');
  list.replaceChildren(...(piece.alternatives ?? []).map((alternative) => alternativeItem(alternative, piece.token)));
  tooltip.hidden = false;
  span.setAttribute('aria-describedby', tooltip.id);
  placeTooltip(span);
}

function alternativeItem(alternative, chosenToken) {
  const item = document.createElement('li');
  item.classList.toggle('chosen', alternative.token === chosenToken);
  const text = document.createElement('span');
  text.className = 'alternative-text';
  text.textContent = visibleText(alternative.text);
  const bar = document.createElement('span');
  bar.className = 'alternative-bar';
  bar.style.setProperty('--probability', String(alternative.probability));
  const probability = document.createElement('span');
  probability.className = 'alternative-probability';
  probability.textContent = formatProbability(alternative.probability);
  // The spaces are not rendered in the grid but separate the parts in the text that screen readers get.
  item.append(text, ' ', bar, ' ', probability);
  return item;
}

// Below the token, or above it when there is no room below; kept inside the viewport.
function placeTooltip(span) {
  const { tooltip } = elements;
  const anchor = span.getBoundingClientRect();
  const box = tooltip.getBoundingClientRect();
  const margin = 8;
  const below = anchor.bottom + margin;
  const top = below + box.height <= window.innerHeight ? below : Math.max(margin, anchor.top - margin - box.height);
  const left = Math.min(Math.max(margin, anchor.left), window.innerWidth - box.width - margin);
  tooltip.style.top = `${top}px`;
  tooltip.style.left = `${left}px`;
}

// Keeps the tooltip on its token while the page or the token's box scrolls.
export function followScroll() {
  const describedToken = document.querySelector('.token[aria-describedby]');
  if (describedToken) placeTooltip(describedToken);
}

export function hideTooltip() {
  elements.tooltip.hidden = true;
  document.querySelector('.token[aria-describedby]')?.removeAttribute('aria-describedby');
}

function onTokenKeydown(event) {
  const span = event.target.closest('.token');
  if (!span) return;
  if (event.key === 'Escape') {
    hideTooltip();
    return;
  }
  const tokens = [...event.currentTarget.querySelectorAll('.token')];
  const index = tokens.indexOf(span);
  const targets = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tokens.length - 1 };
  const next = tokens[targets[event.key]];
  if (!next) return;
  event.preventDefault();
  span.tabIndex = -1;
  next.tabIndex = 0;
  next.focus();
}

// Makes whitespace tokens visible in the tooltip and the Inside the model view: a space as ␣, a newline as ↵, a tab as ⇥.
export function visibleText(text) {
  const shown = text.replaceAll(' ', '␣').replaceAll('\n', '↵').replaceAll('\t', '⇥');
  return `“${shown}”`;
}

// Two decimals like "0.41"; rare tokens as "3.2e-5", which stays short and still compares at a glance.
export function formatProbability(probability) {
  if (!Number.isFinite(probability)) return 'n/a';
  if (probability >= 0.01 || probability === 0) return probability.toFixed(2);
  return probability.toExponential(1).replace('e-', 'e−');
}

// The tooltip of the tokens in container (the output, or the analyzed text).
export function wireTooltip(container) {
  const tokenOf = (event) => event.target.closest?.('.token');
  container.addEventListener('mouseover', (event) => tokenOf(event) && showTooltip(tokenOf(event)));
  container.addEventListener('mouseout', (event) => tokenOf(event) && hideTooltip());
  container.addEventListener('focusin', (event) => tokenOf(event) && showTooltip(tokenOf(event)));
  container.addEventListener('focusout', hideTooltip);
  container.addEventListener('keydown', onTokenKeydown);
}
