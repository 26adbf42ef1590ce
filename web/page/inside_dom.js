// What the Inside the model view's panels share: building their elements and tables, the numbers' and tokens'
// short forms, and the theme's colours for the pictures drawn on canvases. All model text goes in as textContent.
import { visibleText } from './tooltip.js';

// <tag class=className>text</tag>; children appended after the text.
export function element(tag, className, text, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  node.append(...children);
  return node;
}

// A table with a caption, a header row and body rows. A cell is a string, a Node, or { content, header, className,
// heat: 0..1 for a background that grows with it, bar: 0..1 for a bar beside the content }; a row's first cell is
// its header (th scope=row) when rowHeaders is true.
export function table({ caption, head, rows, rowHeaders = true, className = 'inside-table' }) {
  const node = element('table', className);
  if (caption) node.append(element('caption', null, caption));
  const thead = element('thead');
  thead.append(element('tr', null, null, ...head.map((content) => tableCell({ content, header: true }, 'col'))));
  const tbody = element('tbody');
  for (const row of rows) {
    tbody.append(element('tr', row.className, null, ...row.cells.map((content, i) => tableCell(content, rowHeaders && i === 0 ? 'row' : null))));
  }
  node.append(thead, tbody);
  return node;
}

function tableCell(content, scope) {
  const spec = content instanceof Node || typeof content !== 'object' ? { content } : content;
  const header = spec.header || scope === 'row';
  const node = element(header ? 'th' : 'td', spec.className);
  if (header) node.scope = scope ?? 'col';
  if (spec.heat !== undefined) {
    node.classList.add('heat');
    node.style.setProperty('--heat', String(clamp01(spec.heat)));
  }
  node.append(spec.content ?? '');
  if (spec.bar !== undefined) node.append(' ', bar(spec.bar));
  return node;
}

// A horizontal bar of a cell, its length the share 0..1 (hidden from screen readers: the number beside it says it).
export function bar(share) {
  const node = element('span', 'inside-bar');
  node.setAttribute('aria-hidden', 'true');
  node.style.setProperty('--share', String(clamp01(share)));
  return node;
}

// A table too wide for a phone scrolls sideways in a region of its own, which the keyboard can reach.
export function scrollBox(label, content) {
  const box = element('div', 'inside-scroll', null, content);
  box.tabIndex = 0;
  box.setAttribute('role', 'group');
  box.setAttribute('aria-label', label);
  return box;
}

// A disclosure holding a picture's text equivalent.
export function tableDisclosure(summary, ...content) {
  const node = element('details', 'inside-tables');
  node.append(element('summary', null, summary), ...content);
  return node;
}

export function clamp01(x) {
  return Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0;
}

// A token's text where every character shows: “␣the”, “↵”.
export function tokenName(text) {
  return visibleText(text ?? '');
}

// Three significant digits ("48.1", "0.599", "1.2e−5"), as the panels show norms, logits and weights.
export function formatNumber(x) {
  if (!Number.isFinite(x)) return String(x);
  if (x !== 0 && Math.abs(x) < 1e-3) return x.toExponential(1).replace('-', '−');
  return Number(x.toPrecision(3)).toString().replace('-', '−');
}

// "12.5 kB", "1.2 MB": a size in bytes (powers of 1000, as the page's other sizes).
export function formatSize(bytes) {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1e6) return `${Number((bytes / 1e3).toPrecision(3))} kB`;
  return `${Number((bytes / 1e6).toPrecision(3))} MB`;
}

// A theme colour (a custom property of style.css) as [r, g, b], read from node's computed style (node in the page:
// a detached one has no styles).
export function themeColour(node, property, fallback) {
  const hex = (value) => /^#([\da-f]{2})([\da-f]{2})([\da-f]{2})$/i.exec(value)?.slice(1).map((part) => parseInt(part, 16));
  return hex(getComputedStyle(node).getPropertyValue(property).trim()) ?? hex(fallback);
}

// The colour t of the way from `from` to `to`, as [r, g, b].
export function mixColour(from, to, t) {
  return from.map((channel, i) => Math.round(channel + (to[i] - channel) * clamp01(t)));
}

// A canvas whose every pixel is one cell (rows x columns), scaled up by CSS without smoothing; paint(x, y) ->
// [r, g, b]. Hidden from screen readers: each picture's table says what it shows.
export function cellCanvas(className, columns, rows, paint) {
  const canvas = element('canvas', className);
  canvas.width = Math.max(1, columns);
  canvas.height = Math.max(1, rows);
  canvas.setAttribute('aria-hidden', 'true');
  const context = canvas.getContext('2d');
  const image = context.createImageData(canvas.width, canvas.height);
  for (let y = 0; y < rows; y++) {
    for (let x = 0; x < columns; x++) {
      const offset = 4 * (y * canvas.width + x);
      image.data.set(paint(x, y), offset);
      image.data[offset + 3] = 255;
    }
  }
  context.putImageData(image, 0, 0);
  return canvas;
}
