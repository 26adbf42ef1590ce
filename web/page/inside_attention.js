// The Inside the model view's attention panel: for the pass that produced the selected token, every layer as a small
// heatmap (a row per head, a column per position it attends to), one layer enlarged with its chosen head outlined,
// lines from the pass's token to the tokens that head attends to most, and the same numbers as tables.
import { cellCanvas, element, formatNumber, mixColour, scrollBox, table, tableDisclosure, themeColour, tokenName } from './inside_dom.js';

// The tokens the lines go to: the head's largest weights.
const LINES_SHOWN = 6;

export class AttentionPanel {
  #body;
  #layer;   // <select> of the enlarged layer
  #head;    // <select> of the head whose lines and row are shown
  #content;
  #step = null;
  #tablesOpen = false;

  constructor(body) {
    this.#body = body;
    this.#layer = element('select');
    this.#head = element('select');
    this.#layer.id = 'attention-layer';
    this.#head.id = 'attention-head';
    const layerLabel = element('label', null, 'Layer');
    const headLabel = element('label', null, 'Head');
    layerLabel.htmlFor = this.#layer.id;
    headLabel.htmlFor = this.#head.id;
    const controls = element('div', 'inside-controls', null, element('div', 'inside-control', null, layerLabel, this.#layer),
      element('div', 'inside-control', null, headLabel, this.#head));
    this.#content = element('div');
    body.append(controls, this.#content);
    for (const select of [this.#layer, this.#head]) select.addEventListener('change', () => this.show(this.#step));
  }

  // step: the selected token's step (inside_view.js); its inspection null while it is computed.
  show(step) {
    this.#step = step;
    // the tables stay open or closed as the step changes
    this.#tablesOpen = this.#content.querySelector('.inside-tables')?.open ?? this.#tablesOpen;
    if (!step?.inspection) {
      this.#content.replaceChildren(element('p', 'inside-note', step?.pending ?? 'Select a token after the first.'));
      return;
    }
    const { layers, heads, attention } = step.inspection;
    fillOptions(this.#layer, layers, 'layer');
    fillOptions(this.#head, heads, 'head');
    const l = this.#layer.selectedIndex, h = this.#head.selectedIndex;
    const colours = heatColours(this.#body);
    this.#content.replaceChildren(
      element('p', 'inside-note', summary(step)),
      this.#thumbnails(attention, layers, l, colours),
      enlarged(attention[l], layers[l], heads, h, colours),
      lines(step, attention[l][h], layers[l], heads[h]),
      tableDisclosure('Attention as tables', strongestTable(step, attention, layers, heads),
        rowTable(step, attention[l][h], layers[l], heads[h])),
    );
    this.#content.querySelector('.inside-tables').open = this.#tablesOpen;
  }

  // One button per layer, its picture a row per head; the pressed one is enlarged.
  #thumbnails(attention, layers, chosen, colours) {
    const grid = element('div', 'attention-thumbs');
    layers.forEach((layer, l) => {
      const button = element('button', 'attention-thumb', null, element('span', null, `Layer ${layer}`), heatmap('attention-thumb-map', attention[l], colours));
      button.type = 'button';
      button.setAttribute('aria-pressed', String(l === chosen));
      button.addEventListener('click', () => {
        this.#layer.selectedIndex = l;
        this.show(this.#step);
        this.#body.querySelectorAll('.attention-thumb')[l]?.focus();
      });
      grid.append(button);
    });
    return grid;
  }
}

function fillOptions(select, values, noun) {
  const wanted = values.map(String).join(',');
  if (select.dataset.values === wanted) return;
  const kept = select.selectedIndex;
  select.replaceChildren(...values.map((value) => element('option', null, `${noun} ${value}`)));
  select.dataset.values = wanted;
  select.selectedIndex = kept >= 0 && kept < values.length ? kept : 0;
}

function summary(step) {
  const count = step.query - step.windowStart + 1;
  return `Producing ${tokenName(step.selectedText)}, the pass at ${tokenName(step.queryText)} (position ${step.query}) attended over ` +
    `${count} position${count === 1 ? '' : 's'} (${step.windowStart} to ${step.query}). Each picture is one layer: a row per head, a ` +
    'column per position, darker where the head attends more (each row scaled to its largest weight). Choose a layer to enlarge it.';
}

// [surface, accent]: a weight of 0 to the row's largest.
function heatColours(node) {
  return [themeColour(node, '--surface', '#ffffff'), themeColour(node, '--accent', '#0f766e')];
}

// rows[h][0]: a head's weights (attention[l][h] of one position); each row scaled to its own largest weight.
function heatmap(className, rows, [low, high]) {
  const largest = rows.map((row) => Math.max(...row[0]));
  return cellCanvas(className, rows[0][0].length, rows.length, (x, y) => mixColour(low, high, rows[y][0][x] / largest[y]));
}

function enlarged(rows, layer, heads, chosen, colours) {
  const frame = element('div', 'attention-large', null, heatmap('attention-large-map', rows, colours));
  frame.style.setProperty('--rows', String(heads.length));
  const outline = element('div', 'attention-row-outline');
  outline.setAttribute('aria-hidden', 'true');
  outline.style.setProperty('--row', String(chosen));
  frame.append(outline);
  const caption = element('figcaption', null, `Layer ${layer}: heads ${heads[0]} to ${heads.at(-1)} from top to bottom, positions from left ` +
    `to right; head ${heads[chosen]} outlined.`);
  return element('figure', 'attention-figure', null, frame, caption);
}

// Lines from the pass's token (left) to the positions the head attends to most (right, in text order), each as
// thick as its weight.
function lines(step, row, layer, head) {
  const weights = row[0];
  const strongest = [...weights.keys()].sort((a, b) => weights[b] - weights[a]).slice(0, LINES_SHOWN).sort((a, b) => a - b);
  const rowHeight = 22, height = Math.max(strongest.length, 1) * rowHeight + 8;
  const svg = svgElement('svg', { viewBox: `0 0 320 ${height}`, class: 'attention-lines', role: 'img',
    'aria-label': `Layer ${layer}, head ${head}: the pass at ${tokenName(step.queryText)} attends most to ` +
      strongest.map((j) => `${tokenName(step.text(step.windowStart + j))} (${formatNumber(weights[j])})`).join(', ') });
  const fromY = height / 2;
  svg.append(svgText(6, fromY + 4, tokenName(step.queryText), 'attention-line-from'));
  strongest.forEach((j, k) => {
    const y = 4 + rowHeight * (k + 0.5);
    svg.append(svgElement('line', { x1: 110, y1: fromY, x2: 190, y2: y, 'stroke-width': String(0.5 + 6 * weights[j]), class: 'attention-line' }));
    svg.append(svgText(196, y + 4, `${tokenName(step.text(step.windowStart + j))} ${formatNumber(weights[j])}`));
  });
  const caption = element('figcaption', null, `Layer ${layer}, head ${head}: the ${strongest.length} positions it attends to most, the ` +
    'line as thick as the weight.');
  return element('figure', 'attention-figure', null, svg, caption);
}

function svgElement(tag, attributes) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

function svgText(x, y, text, className) {
  const node = svgElement('text', { x: String(x), y: String(y) });
  if (className) node.setAttribute('class', className);
  node.textContent = text;
  return node;
}

// Layers x heads: the position each head attends to most, and its weight.
function strongestTable(step, attention, layers, heads) {
  const rows = layers.map((layer, l) => ({
    cells: [`Layer ${layer}`, ...heads.map((_, h) => {
      const weights = attention[l][h][0];
      const j = weights.indexOf(Math.max(...weights));
      return `${tokenName(step.text(step.windowStart + j))} ${formatNumber(weights[j])}`;
    })],
  }));
  const caption = 'The token each head attends to most, and its weight';
  return scrollBox(caption, table({ caption, head: ['Layer', ...heads.map((head) => `Head ${head}`)], rows }));
}

// One head's weight on every position.
function rowTable(step, row, layer, head) {
  const weights = row[0];
  const rows = [...weights].map((weight, j) => ({
    cells: [String(step.windowStart + j), tokenName(step.text(step.windowStart + j)), { content: formatNumber(weight), bar: weight }],
  }));
  const caption = `Layer ${layer}, head ${head}: the weight on each position`;
  return scrollBox(caption, table({ caption, head: ['Position', 'Token', 'Weight'], rows }));
}
