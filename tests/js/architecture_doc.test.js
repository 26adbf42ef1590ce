// docs/architecture.md's file map against the repository: every product file of engine/, wasm/ and web/lib/ is
// named there by its path in backticks, and every path under those folders that the document names exists.
// The files are git's tracked files (git ls-files), or those of a walk of the folders where git is unavailable.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = 'docs/architecture.md';
const FOLDERS = ['engine', 'wasm', 'web/lib'];

// A path under the folders, with a file extension, not part of a longer path (public/wasm/gpt2.wasm is not
// wasm/gpt2.wasm): what the document names as a file of the map's folders.
const NAMED_PATH = /(?<![\w./-])(?:engine|wasm|web\/lib)\/[\w./-]*\.\w+/g;

function walk(folder) {
  return readdirSync(join(ROOT, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return walk(path);
    return entry.isFile() ? [relative(ROOT, join(ROOT, path)).split(sep).join('/')] : [];
  });
}

// -> the files under FOLDERS, repository-relative with '/', sorted.
function productFiles() {
  let files;
  try {
    const output = execFileSync('git', ['ls-files', '-z', '--', ...FOLDERS], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    files = output.split('\0').filter(Boolean);
  } catch {
    files = [];  // no git, or not a work tree
  }
  if (files.length === 0) files = FOLDERS.flatMap(walk);
  return files.sort();
}

const doc = readFileSync(join(ROOT, DOC), 'utf8');
const files = productFiles();

test('the repository has product files under engine/, wasm/ and web/lib/ to check', () => {
  for (const folder of FOLDERS) expect(files.some((file) => file.startsWith(`${folder}/`))).toBe(true);
});

test('docs/architecture.md names every product file of engine/, wasm/ and web/lib/', () => {
  const missing = files.filter((file) => !doc.includes(`\`${file}\``));
  expect({ [`files not named in ${DOC}`]: missing }).toEqual({ [`files not named in ${DOC}`]: [] });
});

test('every file under engine/, wasm/ and web/lib/ that docs/architecture.md names exists', () => {
  const existing = new Set(files);
  const named = [...new Set(doc.match(NAMED_PATH) ?? [])];
  const absent = named.filter((path) => !existing.has(path)).sort();
  expect({ [`paths in ${DOC} that are not files`]: absent }).toEqual({ [`paths in ${DOC} that are not files`]: [] });
});
