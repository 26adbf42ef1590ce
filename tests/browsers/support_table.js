// The browser-support table of docs/browsers.md, held to what the cross-browser suite saw each engine run: its row's
// wasm build, whether it has threads and WebGPU, and the browser and driver versions it was tested with.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const DOC = new URL('../../docs/browsers.md', import.meta.url);
const COLUMNS = ['browser', 'wasm build', 'threads', 'WebGPU', 'tested with'];
// Each engine's row, by its first cell, and how the row names the browser's version.
const ROWS = {
  chromium: { name: /^Chromium\b/, version: (version) => `Chromium ${major(version)}` },
  firefox: { name: /^Firefox\b/, version: (version) => `Firefox ESR ${major(version)}` },
  webkit: { name: /\bWebKit\b/, version: (version) => `WebKitGTK ${version.split('.').slice(0, 2).join('.')}` },
};

const major = (version) => version.split('.')[0];

// The table's rows -> [{ browser, 'wasm build', threads, WebGPU, 'tested with' }] (cells as written).
export function supportTable(markdown = readFileSync(DOC, 'utf8')) {
  const lines = markdown.split('\n');
  const header = lines.findIndex((line) => splitRow(line)?.join('|') === COLUMNS.join('|'));
  assert.ok(header >= 0, `docs/browsers.md has no table with the columns ${COLUMNS.join(', ')}`);
  const rows = [];
  for (const line of lines.slice(header + 2)) {
    const cells = splitRow(line);
    if (!cells) break;
    rows.push(Object.fromEntries(COLUMNS.map((column, i) => [column, cells[i]])));
  }
  return rows;
}

function splitRow(line) {
  if (!line.startsWith('|') || !line.endsWith('|')) return null;
  return line.slice(1, -1).split('|').map((cell) => cell.trim());
}

// A yes/no cell: its first word.
function yesNo(cell) {
  const word = /^\**(yes|no)\b/i.exec(cell)?.[1]?.toLowerCase();
  assert.ok(word, `a cell that starts with yes or no: ${cell}`);
  return word === 'yes';
}

// Fails unless the engine's row says what the session's engine ran: report is the page's (flows.js:
// { build, threadsAvailable, webgpu }).
export function checkSupportRow(session, report) {
  const { name, version } = ROWS[session.engine];
  const row = supportTable().find((candidate) => name.test(candidate.browser));
  assert.ok(row, `docs/browsers.md has no row for ${session.engine}`);
  const driver = session.driver.replace(/ (\d+)\.\d+\.\d+\b/, ' $1');  // 'puppeteer-core 24.43.1 over …' -> '… 24 over …'
  assert.deepEqual({
    build: /^(relaxed SIMD|SIMD128)\b/.exec(row['wasm build'])?.[1] ?? row['wasm build'],
    threads: yesNo(row.threads),
    webgpu: yesNo(row.WebGPU),
    browserVersion: row['tested with'].includes(version(session.version)),
    driver: row['tested with'].includes(driver),
  }, {
    build: report.build, threads: report.threadsAvailable, webgpu: report.webgpu, browserVersion: true, driver: true,
  }, `docs/browsers.md's ${row.browser} row against ${session.engine} ${session.version}, driven by ${session.driver} ` +
    `(the row must name "${version(session.version)}" and "${driver}")`);
}
