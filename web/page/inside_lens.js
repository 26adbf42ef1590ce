// The Inside the model view's logit lens: a table of layers x positions, each cell the layer's best guess at the next
// token there (its residual stream through the final layer norm and the LM head) with its probability, shaded by
// it; the positions end at the pass that produced the selected token, the guesses that came true marked.
import { formatProbability } from './tooltip.js';
import { element, scrollBox, table, tokenName } from './inside_dom.js';

// body: the panel's element; step: the selected token's step (inside_view.js); lens: { result: model.inspect()'s
// answer over the window up to the step's pass (null while it is computed), windowStart, note: what is happening }.
export function showLens(body, step, lens) {
  if (!step) {
    body.replaceChildren(element('p', 'inside-note', 'Select a token after the first.'));
    return;
  }
  const intro = element('p', 'inside-note', 'Each cell is what the model would predict next if it stopped after that layer, and how ' +
    'sure it would be: the last row is its real output. A ✓ marks a guess that is the token that came next. Each cell costs ' +
    'a pass through the LM head, so the view asks for the positions up to the selected one once the model is idle, or about ' +
    'once a second while it generates.');
  if (!lens?.result) {
    body.replaceChildren(intro, element('p', 'inside-note', lens?.note ?? 'Computing…'));
    return;
  }
  const box = lensTable(step, lens);
  body.replaceChildren(intro, box);
  box.scrollLeft = box.scrollWidth;  // the selected step's column, the last, in view on a narrow screen
}

function lensTable(step, { result, windowStart }) {
  const { positions, layers, logitLens } = result;
  const last = layers.length - 1;
  const position = (i) => windowStart + positions[i];
  const head = ['Layer', ...positions.map((_, i) => `${position(i)}: ${tokenName(step.text(position(i)))}`)];
  const rows = layers.map((layer, l) => ({
    className: l === last ? 'lens-output' : undefined,
    cells: [l === last ? `After layer ${layer} (the output)` : `After layer ${layer}`, ...positions.map((_, i) => guessCell(step, logitLens[l][i][0], position(i)))],
  }));
  rows.push({ cells: ['Next token', ...positions.map((_, i) => nextCell(step, position(i)))] });
  const caption = `Best guesses at the next token, positions ${position(0)} to ${position(positions.length - 1)}`;
  return scrollBox(caption, table({ caption, head, rows, className: 'inside-table lens-table' }));
}

// One layer's guess at position: the token, its probability, ✓ when the text goes on with it.
function guessCell(step, guess, position) {
  if (!guess) return '';
  const hit = step.idAt(position + 1) === guess.id;
  return {
    content: `${tokenName(guess.text)} ${formatProbability(guess.probability)}${hit ? ' ✓' : ''}`,
    heat: guess.probability,
    className: position === step.query ? 'current' : undefined,
  };
}

function nextCell(step, position) {
  const id = step.idAt(position + 1);
  return id === undefined ? '–' : tokenName(step.text(position + 1));
}
