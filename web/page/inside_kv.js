// The Inside the model view's KV cache panel: the cache after the pass that produced the selected token, as a strip
// of its positions (filled or not, and what that pass did to each: written, kept from before, rolled back, slid out
// of the window, cleared), its storage and bytes, and the same as a table.
import { cellCanvas, element, formatSize, scrollBox, table, themeColour, tokenName } from './inside_dom.js';

// What a pass did to a range of positions (gpt2.d.ts CacheEvent), the strip's colour for it, and its legend.
const EVENT_KINDS = {
  written: { colour: ['--accent', '#0f766e'], label: 'written by this pass' },
  kept: { colour: ['--rank-top-10', '#87bcf0'], label: 'kept from before (reused)' },
  rolledBack: { colour: ['--danger', '#b91c1c'], label: 'rolled back (the new text differs there)' },
  slid: { colour: ['--chart-cache-off', '#c2410c'], label: 'slid out (a full window kept its newest half)' },
  cleared: { colour: ['--muted', '#52525b'], label: 'cleared for a new text' },
};
const FILLED = { colour: ['--accent-soft', '#ccfbf1'], label: 'held, read by this pass' };
const EMPTY = { colour: ['--chart-grid', '#e4e4e7'], label: 'empty' };

// body: the panel's element; step: the selected token's step (inside_view.js), its kv the cache as its pass left it.
export function showKvCache(body, step) {
  if (!step?.kv) {
    body.replaceChildren(element('p', 'inside-note', step?.pending ?? 'Select a token after the first.'));
    return;
  }
  const { kv } = step;
  const colours = Object.fromEntries([...Object.entries(EVENT_KINDS), ['filled', FILLED], ['empty', EMPTY]]
    .map(([kind, { colour }]) => [kind, themeColour(body, ...colour)]));
  const states = positionStates(kv);
  body.replaceChildren(
    element('p', 'inside-kv-summary', `${kv.format} storage · ${kv.filled} of ${kv.capacity} positions hold keys and values · ` +
      `${formatSize(kv.bytes)} in all, ${formatSize(Math.round(kv.bytesPerPosition))} a position`),
    element('figure', 'kv-figure', null, cellCanvas('kv-strip', kv.capacity, 1, (x) => colours[states[x]]),
      element('figcaption', null, `The cache's ${kv.capacity} positions from left to right.`)),
    legend(states),
    element('p', 'inside-note', explanation(step)),
    eventsTable(kv),
  );
}

// -> the state of each position: an event kind, 'filled' or 'empty'; a later event paints over an earlier one.
function positionStates(kv) {
  const states = Array.from({ length: kv.capacity }, (_, i) => (i < kv.filled ? 'filled' : 'empty'));
  for (const { kind, first, count } of kv.events) {
    for (let i = first; i < Math.min(first + count, kv.capacity); i++) states[i] = kind;
  }
  return states;
}

function legend(states) {
  const shown = new Set(states);
  const list = element('ul', 'kv-legend');
  list.setAttribute('aria-label', 'Colour key of the strip');
  for (const [kind, { label }] of [...Object.entries(EVENT_KINDS), ['filled', FILLED], ['empty', EMPTY]]) {
    if (!shown.has(kind)) continue;
    const swatch = element('span', `kv-swatch kv-${kind}`);
    swatch.setAttribute('aria-hidden', 'true');
    list.append(element('li', null, null, swatch, ` ${label}`));
  }
  return list;
}

// Why the cache makes a step cheap, in this pass's numbers.
function explanation(step) {
  const written = step.kv.events.filter((event) => event.kind === 'written').reduce((sum, event) => sum + event.count, 0);
  const read = step.kv.filled - written;
  if (step.source === 'run' && written === 1) {
    return `This step computed the keys and values of ${tokenName(step.queryText)} alone and read the other ${read} positions' ` +
      `from the cache. Without the cache it would compute all ${step.kv.filled} again, and every step a little more as the text grows.`;
  }
  if (step.source === 'run') {
    return `This pass wrote ${written} positions at once (a prompt, or a window that slid) and read ${read} from the cache; each ` +
      'step after it computes one position.';
  }
  return `A fresh pass over the ${step.kv.filled} positions up to ${tokenName(step.queryText)}, as the prompt's pass computed them: ` +
    'the cache it leaves holds each position\'s keys and values for the steps that follow.';
}

function eventsTable(kv) {
  const rows = kv.events.map(({ kind, first, count }) => ({
    cells: [EVENT_KINDS[kind]?.label ?? kind, count === 1 ? String(first) : `${first} to ${first + count - 1}`, String(count)],
  }));
  const caption = 'What this pass did to the cache';
  return scrollBox(caption, table({ caption, head: ['Change', 'Positions', 'Count'], rows }));
}
