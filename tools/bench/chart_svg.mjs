// The benchmark's picture (bench-results.svg): per model, decode ms/token against the context, both axes
// logarithmic, one line per runtime, weights and KV cache, solid for cached decoding and dashed for uncached
// (recomputing the whole prefix), from bench-results.json's records. Plain SVG text, no dependencies.

const WIDTH = 980;
const PANEL_HEIGHT = 430;
const MARGIN = { left: 64, right: 330, top: 40, bottom: 46 };
// Colour-blind-safe (Okabe–Ito) and a few more; a series keeps its colour in both modes.
const COLOURS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000', '#999933', '#882255',
  '#44AA99', '#AA4499', '#666666', '#332288', '#DDCC77', '#117733', '#EE3377'];

const escape = (text) => String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const round = (value) => Math.round(value * 10) / 10;

// The ticks of a log axis between low and high: 1, 2 and 5 times the powers of ten.
function logTicks(low, high) {
  const ticks = [];
  for (let power = Math.floor(Math.log10(low)); power <= Math.ceil(Math.log10(high)); power++) {
    for (const step of [1, 2, 5]) {
      const value = step * 10 ** power;
      if (value >= low && value <= high) ticks.push(value);
    }
  }
  return ticks;
}

// The runtime's label already names a second KV cache or thread count (tools/bench/bench.mjs); the first KV cache is
// added.
const seriesName = (record) => `${record.runtime} · ${record.weights} weights` +
  (record.kv_cache && !String(record.runtime).includes('KV cache') ? ` · ${record.kv_cache} KV` : '');

function panel(model, records, top) {
  const series = new Map();  // name -> { cached: [[context, ms]], uncached: [...] }
  for (const record of records) {
    const name = seriesName(record);
    if (!series.has(name)) series.set(name, { cached: [], uncached: [] });
    series.get(name)[record.mode].push([record.context, record.decode_ms_per_token]);
  }
  const contexts = [...new Set(records.map((r) => r.context))].sort((a, b) => a - b);
  const values = records.map((r) => r.decode_ms_per_token);
  const [xLow, xHigh] = [contexts[0], contexts.at(-1)];
  const [yLow, yHigh] = [Math.min(...values) / 1.3, Math.max(...values) * 1.3];
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom;
  const logScale = (value, low, high) => (Math.log(value) - Math.log(low)) / (Math.log(high) - Math.log(low) || 1);
  const x = (context) => round(MARGIN.left + plotWidth * logScale(context, xLow, xHigh));
  const y = (ms) => round(top + MARGIN.top + plotHeight * (1 - logScale(ms, yLow, yHigh)));
  const bottom = top + MARGIN.top + plotHeight;

  const parts = [`<text x="${MARGIN.left}" y="${top + 24}" class="title">${escape(model)}: decode ms/token against context ` +
    '(log–log; solid: cached, dashed: uncached)</text>'];
  for (const context of contexts) {
    parts.push(`<line x1="${x(context)}" y1="${top + MARGIN.top}" x2="${x(context)}" y2="${bottom}" class="grid"/>`,
      `<text x="${x(context)}" y="${bottom + 16}" class="tick" text-anchor="middle">${context}</text>`);
  }
  for (const ms of logTicks(yLow, yHigh)) {
    parts.push(`<line x1="${MARGIN.left}" y1="${y(ms)}" x2="${MARGIN.left + plotWidth}" y2="${y(ms)}" class="grid"/>`,
      `<text x="${MARGIN.left - 6}" y="${y(ms) + 4}" class="tick" text-anchor="end">${ms}</text>`);
  }
  parts.push(`<text x="${MARGIN.left + plotWidth / 2}" y="${bottom + 36}" class="label" text-anchor="middle">context (tokens)</text>`,
    `<text x="16" y="${top + MARGIN.top + plotHeight / 2}" class="label" text-anchor="middle" ` +
    `transform="rotate(-90 16 ${top + MARGIN.top + plotHeight / 2})">ms per generated token</text>`,
    `<rect x="${MARGIN.left}" y="${top + MARGIN.top}" width="${plotWidth}" height="${plotHeight}" class="frame"/>`);
  [...series.entries()].forEach(([name, { cached, uncached }], i) => {
    const colour = COLOURS[i % COLOURS.length];
    for (const [points, dash] of [[cached, ''], [uncached, ' stroke-dasharray="6 4"']]) {
      if (points.length === 0) continue;
      const path = points.sort((a, b) => a[0] - b[0]).map(([c, ms]) => `${x(c)},${y(ms)}`).join(' ');
      parts.push(`<polyline points="${path}" stroke="${colour}"${dash} class="series"/>`);
      for (const [c, ms] of points) parts.push(`<circle cx="${x(c)}" cy="${y(ms)}" r="2.5" fill="${colour}"/>`);
    }
    const legendY = top + MARGIN.top + 8 + 17 * i;
    const legendX = MARGIN.left + plotWidth + 18;
    parts.push(`<line x1="${legendX}" y1="${legendY}" x2="${legendX + 22}" y2="${legendY}" stroke="${colour}" class="series"/>`,
      `<text x="${legendX + 28}" y="${legendY + 4}" class="legend">${escape(name)}</text>`);
  });
  return parts.join('\n');
}

// records: bench-results.json's; caption: a line under the panels (machine, commit, date).
export function benchChartSvg(records, caption) {
  const models = [...new Set(records.map((r) => r.model))];
  const height = PANEL_HEIGHT * models.length + 30;
  const panels = models.map((model, i) => panel(model, records.filter((r) => r.model === model), PANEL_HEIGHT * i));
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" ` +
    'font-family="sans-serif">\n<style>.title{font-size:15px;font-weight:bold}.tick{font-size:11px;fill:#444}' +
    '.label{font-size:12px}.legend{font-size:11.5px}.grid{stroke:#e4e4e4}.frame{fill:none;stroke:#888}' +
    '.series{fill:none;stroke-width:2}</style>\n<rect width="100%" height="100%" fill="#fff"/>\n' +
    `${panels.join('\n')}\n<text x="${MARGIN.left}" y="${height - 10}" class="tick">${escape(caption)}</text>\n</svg>\n`;
}
