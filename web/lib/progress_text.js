// The words for sizes and for a download's pace in the loader's progress events (loader.js: bytesPerSecond and
// secondsLeft, null until measured), shared by the page, the widget and the CLI.

// Decimal units, as downloads and disks count: "812 bytes", "7.4 MB", "548 MB", "6.2 GB".
export function formatBytes(bytes) {
  if (!Number.isFinite(bytes)) return '?';
  const units = ['bytes', 'KB', 'MB', 'GB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${value} bytes` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

const MEGABYTES = new Intl.NumberFormat('en', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

// The number of MB with one decimal, for sizes listed one under another or side by side: "0.5", "24.0", "1,548.2".
export function megabytes(bytes) {
  return MEGABYTES.format(bytes / 1e6);
}

export function formatMegabytes(bytes) {
  return `${megabytes(bytes)} MB`;
}

export function formatDuration(seconds) {
  if (seconds < 60) return `${Math.ceil(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

// -> " · 1.2 MB/s · 3 min left", each part left out while unknown.
export function formatPace({ bytesPerSecond, secondsLeft }) {
  const speed = bytesPerSecond > 0 ? ` · ${formatBytes(bytesPerSecond)}/s` : '';
  const left = Number.isFinite(secondsLeft) ? ` · ${formatDuration(secondsLeft)} left` : '';
  return speed + left;
}
