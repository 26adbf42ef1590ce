// The engine's folders are layers that include one way: formats/ may include model/ and kernels/, model/ may include
// kernels/, kernels/ neither; decoding/ (the decoding modes over a session) sits beside formats/ on model/ and
// kernels/, and nothing below it includes it; inspection/ (looking inside a session's passes) sits on decoding/, model/
// and kernels/, and nothing but host/ includes it; host/ (the engine in a host's values) sits on all of them and only
// wasm/ and tests include it; the top-level headers (gpt2.h), which every layer includes, include none of them; and
// nothing of engine/ or wasm/ includes tools/ (wasm/ sits on the whole engine, engine/ under wasm/). Every include of
// every source file under engine/ and wasm/ is resolved as the compiler does (the including file's folder, then the
// engine library's include directory) and its layer checked; a failure names the file, the line and the include.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SOURCE = /\.(?:h|hpp|inc|c|cc|cpp)$/;
// The include directories every engine and wasm target compiles with: the engine library's PUBLIC one
// (engine/CMakeLists.txt; the wasm targets get it by linking the engine); checked below against the build.
const INCLUDE_DIRS = ['engine'];
const INCLUDE = /^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)/;

// The layer of a repository-relative path, or null for a path outside engine/, wasm/ and tools/.
function layerOf(path) {
  const match = /^(engine\/(?:kernels|model|formats|decoding|inspection|host)|engine|wasm|tools)\//.exec(path);
  if (!match) return null;
  return match[1] === 'engine' && path.slice('engine/'.length).includes('/') ? 'engine/?' : match[1];
}

// The layers each layer may not include (engine: the top-level headers, gpt2.h).
const FORBIDDEN = {
  engine: ['engine/kernels', 'engine/model', 'engine/formats', 'engine/decoding', 'engine/inspection', 'engine/host', 'wasm', 'tools'],
  'engine/kernels': ['engine/model', 'engine/formats', 'engine/decoding', 'engine/inspection', 'engine/host', 'wasm', 'tools'],
  'engine/model': ['engine/formats', 'engine/decoding', 'engine/inspection', 'engine/host', 'wasm', 'tools'],
  'engine/formats': ['engine/decoding', 'engine/inspection', 'engine/host', 'wasm', 'tools'],
  'engine/decoding': ['engine/formats', 'engine/inspection', 'engine/host', 'wasm', 'tools'],
  'engine/inspection': ['engine/formats', 'engine/host', 'wasm', 'tools'],
  'engine/host': ['wasm', 'tools'],
  wasm: ['tools'],
};

function walk(folder) {
  return readdirSync(join(ROOT, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = posix.join(folder, entry.name);
    if (entry.isDirectory()) return walk(path);
    return entry.isFile() && SOURCE.test(entry.name) ? [path] : [];
  });
}

function isFile(path) {
  return existsSync(join(ROOT, path)) && statSync(join(ROOT, path)).isFile();
}

// The repository-relative file an include names: a quoted one is looked up beside the including file first, then
// (as an angle-bracket one) in INCLUDE_DIRS. null: not a file of this repository (a system or third-party header).
function resolve(file, name, quoted) {
  const beside = quoted ? [posix.join(posix.dirname(file), name)] : [];
  const candidates = [...beside, ...INCLUDE_DIRS.map((dir) => posix.join(dir, name))];
  const found = candidates.find((path) => !path.startsWith('../') && isFile(path));
  return found ? relative(ROOT, join(ROOT, found)).split(sep).join('/') : null;
}

// -> one line per include that crosses the layering: "file:line: #include ... -> resolved (layer may not include ...)";
// a quoted include that resolves to no file is reported too, since its layer cannot be checked.
function violations(files) {
  const found = [];
  for (const file of files) {
    const layer = layerOf(file);
    readFileSync(join(ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const match = INCLUDE.exec(line);
        if (!match) return;
        const quoted = match[1] !== undefined;
        const name = quoted ? match[1] : match[2];
        const where = `${file}:${i + 1}: ${line.trim()}`;
        const target = resolve(file, name, quoted);
        if (!target) {
          if (quoted) found.push(`${where} -> no file beside it or under ${INCLUDE_DIRS.join(', ')}/`);
          return;
        }
        const targetLayer = layerOf(target);
        if ((FORBIDDEN[layer] ?? []).includes(targetLayer))
          found.push(`${where} -> ${target} (${layer}/ may not include ${targetLayer}/)`);
      });
  }
  return found;  // files in order, each one's lines in order
}

const files = [...walk('engine'), ...walk('wasm')].sort();

test('the includes are resolved against engine/, the include directory of the engine library', () => {
  const cmake = readFileSync(join(ROOT, 'engine/CMakeLists.txt'), 'utf8');
  expect(cmake).toMatch(/target_include_directories\(\$\{name\} PUBLIC \$\{CMAKE_CURRENT_SOURCE_DIR\}\)/);
  expect(readFileSync(join(ROOT, 'wasm/CMakeLists.txt'), 'utf8')).not.toMatch(/target_include_directories/);
});

test('there are sources in every layer of engine/ and in wasm/ to check', () => {
  for (const layer of Object.keys(FORBIDDEN)) expect(files.some((file) => layerOf(file) === layer)).toBe(true);
  expect(files.filter((file) => layerOf(file) === 'engine/?')).toEqual([]);
});

test('no layer of engine/ includes one above it (nothing below decoding/ includes it), nor wasm/ tools/', () => {
  expect({ 'includes against the layering': violations(files) }).toEqual({ 'includes against the layering': [] });
});
