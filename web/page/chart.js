// Live line chart of milliseconds per generated token by context position, drawn on a <canvas>.
// It keeps the latest run with the KV cache on and the latest with it off, so the two can be compared:
// with the cache each step costs about the same (a flat line); without it each step reprocesses the whole
// context, so the cost climbs with position.

const SERIES_STYLE = {
  on: { label: 'KV cache on', colorVariable: '--chart-cache-on', fallbackColor: '#0f766e' },
  off: { label: 'KV cache off', colorVariable: '--chart-cache-off', fallbackColor: '#c2410c' },
};
const PADDING = { top: 30, right: 14, bottom: 34, left: 48 };
const TARGET_TICKS = 4;
const MIN_POSITION_SPAN = 16;
// Single steps are noisy (garbage collection, other tabs, a busy CPU), so the thick line is the median of
// the latest MEDIAN_WINDOW steps; the thin line shows every step. The y axis fits the medians, so a rare
// spike is cut off at the top rather than flattening the trend that the chart is about.
const MEDIAN_WINDOW = 9;
const Y_HEADROOM = 1.3;

// A draw reads no layout: it runs in the frames that show streaming tokens, where a forced layout, a backing store
// allocated again or a style read per line would cost more than the lines; the size comes from the ResizeObserver.
export class TokenTimeChart {
  #canvas;
  #series = new Map(); // 'on' | 'off' -> [{ position, ms }]
  #activeKey = null;
  #drawQueued = false;
  #size = { width: 0, height: 0 }; // the canvas's CSS size, as last observed

  constructor(canvas) {
    this.#canvas = canvas;
    new ResizeObserver(([entry]) => {
      const { width, height } = entry.contentRect;
      this.#size = { width, height };
      this.#draw();
    }).observe(canvas);
  }

  // Starts (and replaces) the series for one cache mode.
  startRun(useKVCache) {
    this.#activeKey = useKVCache ? 'on' : 'off';
    this.#series.set(this.#activeKey, []);
    this.#queueDraw();
  }

  addPoint(position, ms) {
    if (!this.#activeKey || !Number.isFinite(position) || !Number.isFinite(ms)) return;
    this.#series.get(this.#activeKey).push({ position, ms });
    this.#queueDraw();
  }

  // A text equivalent of the picture, for the canvas's accessible name.
  describe() {
    const parts = [...this.#series].filter(([, points]) => points.length > 0).map(([key, points]) => {
      const start = medianMs(points.slice(0, MEDIAN_WINDOW));
      const end = medianMs(points.slice(-MEDIAN_WINDOW));
      return `${SERIES_STYLE[key].label}: ${points.length} tokens, about ${formatMs(start)} per token at first and ${formatMs(end)} at the end`;
    });
    const body = parts.length > 0 ? parts.join('. ') : 'no generation yet';
    return `Chart of milliseconds per token by position. ${body}.`;
  }

  // Redraws at most once per frame however many tokens arrive.
  #queueDraw() {
    if (this.#drawQueued) return;
    this.#drawQueued = true;
    requestAnimationFrame(() => {
      this.#drawQueued = false;
      this.#draw();
      this.#canvas.setAttribute('aria-label', this.describe());
    });
  }

  #draw() {
    const context = this.#prepareCanvas();
    if (!context) return;
    const { width, height } = this.#size;
    const colors = this.#colors();
    const plot = {
      left: PADDING.left,
      top: PADDING.top,
      width: width - PADDING.left - PADDING.right,
      height: height - PADDING.top - PADDING.bottom,
    };
    const lines = [...this.#series].map(([key, points]) => ({ key, points, medians: runningMedians(points) }));
    const allPoints = lines.flatMap((line) => line.points);
    const allMedians = lines.flatMap((line) => line.medians);
    const xAxis = niceAxis(Math.max(MIN_POSITION_SPAN, ...allPoints.map((point) => point.position + 1)));
    const yAxis = niceAxis(Math.max(1, ...allMedians.map((point) => point.ms * Y_HEADROOM)));
    const scale = {
      x: (position) => plot.left + (position / xAxis.max) * plot.width,
      y: (ms) => plot.top + plot.height - (ms / yAxis.max) * plot.height,
    };
    this.#drawAxes(context, plot, scale, xAxis, yAxis, colors);
    context.save();
    context.beginPath();
    context.rect(plot.left, plot.top, plot.width, plot.height);
    context.clip();
    for (const { key, points, medians } of lines) {
      const color = colors[key];
      this.#drawLine(context, points, scale, { color, width: 1, alpha: 0.35 });
      this.#drawLine(context, medians, scale, { color, width: 2.5, alpha: 1 });
    }
    context.restore();
    this.#drawLegend(context, plot, colors);
  }

  // Sizes the backing store for the device pixel ratio so lines stay crisp (only when that size changes: setting it
  // allocates the store again); returns a cleared context in CSS pixels.
  #prepareCanvas() {
    const { width, height } = this.#size;
    if (width === 0 || height === 0) return null;
    const ratio = window.devicePixelRatio || 1;
    const [storeWidth, storeHeight] = [Math.round(width * ratio), Math.round(height * ratio)];
    if (this.#canvas.width !== storeWidth) this.#canvas.width = storeWidth;
    if (this.#canvas.height !== storeHeight) this.#canvas.height = storeHeight;
    const context = this.#canvas.getContext('2d');
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, height);
    return context;
  }

  // The chart's font and colours from the page's style, read once per draw.
  #colors() {
    const style = getComputedStyle(this.#canvas);
    const variable = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
    const colors = { font: `12px ${style.fontFamily}`, grid: variable('--chart-grid', '#d4d4d8'), text: variable('--chart-text', '#52525b') };
    for (const [key, { colorVariable, fallbackColor }] of Object.entries(SERIES_STYLE)) colors[key] = variable(colorVariable, fallbackColor);
    return colors;
  }

  #drawAxes(context, plot, scale, xAxis, yAxis, colors) {
    context.font = colors.font;
    context.lineWidth = 1;
    context.strokeStyle = colors.grid;
    context.fillStyle = colors.text;
    context.textAlign = 'right';
    context.textBaseline = 'middle';
    for (const ms of ticks(yAxis)) {
      const y = Math.round(scale.y(ms)) + 0.5;
      context.beginPath();
      context.moveTo(plot.left, y);
      context.lineTo(plot.left + plot.width, y);
      context.stroke();
      context.fillText(formatTick(ms), plot.left - 6, y);
    }
    context.textAlign = 'center';
    context.textBaseline = 'top';
    for (const position of ticks(xAxis)) {
      context.fillText(formatTick(position), scale.x(position), plot.top + plot.height + 6);
    }
    context.textAlign = 'left';
    context.textBaseline = 'alphabetic';
    context.fillText('ms / token', 4, 14);
    context.textAlign = 'right';
    context.fillText('token position →', plot.left + plot.width, plot.top + plot.height + 30);
  }

  #drawLine(context, points, scale, { color, width, alpha }) {
    if (points.length === 0) return;
    context.globalAlpha = alpha;
    context.strokeStyle = color;
    context.fillStyle = color;
    context.lineWidth = width;
    context.lineJoin = 'round';
    context.beginPath();
    points.forEach((point, i) => {
      const [x, y] = [scale.x(point.position), scale.y(point.ms)];
      if (i === 0) context.moveTo(x, y);
      else context.lineTo(x, y);
    });
    context.stroke();
    if (points.length === 1) {
      context.beginPath();
      context.arc(scale.x(points[0].position), scale.y(points[0].ms), 3, 0, 2 * Math.PI);
      context.fill();
    }
    context.globalAlpha = 1;
  }

  #drawLegend(context, plot, colors) {
    let x = plot.left + plot.width;
    context.textAlign = 'right';
    context.textBaseline = 'middle';
    for (const key of ['off', 'on']) {
      const label = SERIES_STYLE[key].label;
      const present = (this.#series.get(key)?.length ?? 0) > 0;
      context.globalAlpha = present ? 1 : 0.4;
      context.fillStyle = colors.text;
      context.fillText(label, x, 12);
      x -= context.measureText(label).width + 6;
      context.fillStyle = colors[key];
      context.fillRect(x - 14, 10, 14, 4);
      x -= 30;
    }
    context.globalAlpha = 1;
  }
}

function medianMs(points) {
  const sorted = points.map((point) => point.ms).sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

// Each point's ms replaced by the median of it and the steps just before it (a trailing window, so the
// line does not change behind the newest point as tokens stream in).
function runningMedians(points) {
  return points.map((point, i) => ({ position: point.position, ms: medianMs(points.slice(Math.max(0, i - MEDIAN_WINDOW + 1), i + 1)) }));
}

function formatMs(ms) {
  return ms >= 10 ? `${Math.round(ms)} ms` : `${ms.toFixed(1)} ms`;
}

function formatTick(value) {
  return String(Number(value.toFixed(2)));
}

// An axis from 0 whose ticks are 1, 2, 2.5 or 5 times a power of ten apart, about TARGET_TICKS of them.
function niceAxis(maxValue) {
  const rawStep = maxValue / TARGET_TICKS;
  const power = 10 ** Math.floor(Math.log10(rawStep));
  const step = [1, 2, 2.5, 5, 10].find((factor) => factor * power >= rawStep) * power;
  return { step, max: Math.ceil(maxValue / step) * step };
}

function ticks({ step, max }) {
  const count = Math.round(max / step);
  return Array.from({ length: count + 1 }, (_, i) => i * step);
}
