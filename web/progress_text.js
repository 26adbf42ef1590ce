// The words for a download's pace in the loader's progress events (loader.js: bytesPerSecond and secondsLeft,
// null until measured), shared by the page and the widget, which each format bytes their own way.
export function formatDuration(seconds) {
  if (seconds < 60) return `${Math.ceil(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

// -> " · 1.2 MB/s · 3 min left", each part left out while unknown.
export function formatPace({ bytesPerSecond, secondsLeft }, formatBytes) {
  const speed = bytesPerSecond > 0 ? ` · ${formatBytes(bytesPerSecond)}/s` : '';
  const left = Number.isFinite(secondsLeft) ? ` · ${formatDuration(secondsLeft)} left` : '';
  return speed + left;
}
