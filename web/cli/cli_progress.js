// gpt2-wasm's download progress bar (web/cli/cli.js): one line on a terminal, redrawn in place as a file downloads
// (at most every PROGRESS_INTERVAL_MS) and ended when it is complete.
import { formatMegabytes, megabytes } from '../lib/progress_text.js';

const PROGRESS_INTERVAL_MS = 100;
const BAR_WIDTH = 24;
// A terminal that reports no width (0: a pseudo-terminal nobody sized, as `script` makes) gets this one.
const DEFAULT_COLUMNS = 80;

// -> the line for a progress event ({ file, loaded, total (bytes or null) }), at most `columns` characters.
export function formatProgress({ file, loaded, total }, columns = DEFAULT_COLUMNS) {
  const line = total
    ? `${file} [${bar(loaded / total)}] ${String(Math.floor((100 * loaded) / total)).padStart(3)}% ${megabytes(loaded)}/${megabytes(total)} MB`
    : `${file} ${formatMegabytes(loaded)}`;
  return line.slice(0, Math.max(0, columns - 1));  // a full-width line would wrap on some terminals
}

function bar(fraction) {
  const filled = Math.round(Math.min(1, fraction) * BAR_WIDTH);
  return '#'.repeat(filled) + '.'.repeat(BAR_WIDTH - filled);
}

// -> onProgress for cli_cache.js's downloads, drawing on stream (a TTY).
export function progressBar(stream) {
  let lastDraw = -Infinity;
  return (event) => {
    const now = Date.now();
    if (!event.done && now - lastDraw < PROGRESS_INTERVAL_MS) return;
    lastDraw = now;
    stream.write(`\r\x1b[K${formatProgress(event, stream.columns || DEFAULT_COLUMNS)}${event.done ? '\n' : ''}`);
  };
}
