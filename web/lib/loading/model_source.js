// What a model is loaded from, decided once where the API receives it (gpt2.js's loadModel; the CLI's --model,
// web/cli/cli_cache.js) and read by its kind from there on: the loader opens its files by kind (source_files.js),
// the worker takes it as it comes, errors name it (sourceName) and the device probe remembers it (sourceIdentity).
// A source is plain data, so that it crosses postMessage to the engine worker as it is:
//   { kind: 'url', url[, name] } url: the absolute href of a folder's base or of a .gguf file (http:, https: or
//                             blob:); name: the URL as it was given where that differs (relative), which errors repeat
//   { kind: 'path', path }    (Node) a folder or a file on disk, or a file: URL of one
//   { kind: 'files', files }  an array of Files (an array or FileList given): a folder's files, matched by name, or
//                             one GGUF file
//   { kind: 'parts', parts }  { config, weights, vocab, merges }: each a File, Blob, ArrayBuffer, typed array or string
//   { kind: 'file', file }    one File, Blob, ArrayBuffer or typed array given alone: a GGUF file
import { IS_NODE } from '../environment.js';
import { resolveModelUrl } from './model_files.js';

// -> the source that value names (loadModel's first argument: see gpt2.js), or a TypeError. A string or URL is a
// URL, resolved here against the page (the engine worker runs at a Blob URL, against which a relative URL means
// nothing); in Node, one that is not http(s) is a path.
export function modelSource(value) {
  if (isStringOrUrl(value)) {
    const text = String(value);
    return IS_NODE && !/^https?:/i.test(text) ? pathSource(text) : urlSource(resolveModelUrl(text).href, text);
  }
  if (Array.isArray(value) || (typeof FileList !== 'undefined' && value instanceof FileList)) {
    return { kind: 'files', files: Array.from(value) };
  }
  if (isFileBytes(value)) return { kind: 'file', file: value };
  if (value && typeof value === 'object') return { kind: 'parts', parts: value };
  throw new TypeError(`loadModel: unsupported model source ${String(value)} (a URL, a folder path or files)`);
}

// The sources written as text: a URL (its absolute href) and a Node path, as modelSource and the CLI's --model
// (which also reads Hub ids as their URLs) make them.
export function urlSource(href, name = href) {
  return name === href ? { kind: 'url', url: href } : { kind: 'url', url: href, name };
}

export function pathSource(path) {
  return { kind: 'path', path };
}

// Whether a source is written as a URL (or a Node path): a string or a URL object.
export function isStringOrUrl(source) {
  return typeof source === 'string' || source instanceof URL;
}

// One File, Blob, ArrayBuffer or typed array: the bytes of one file.
function isFileBytes(value) {
  return (typeof Blob !== 'undefined' && value instanceof Blob) || value instanceof ArrayBuffer || ArrayBuffer.isView(value);
}

// How errors name a source: its URL as given or its path, or its files' names.
export function sourceName(source) {
  const names = (files) => files.map((file) => file?.name ?? 'a file').join(', ');
  return byKind(source, {
    url: ({ url, name }) => name ?? url,
    path: ({ path }) => path,
    files: ({ files }) => names(files),
    parts: ({ parts }) => names(Object.values(parts)),
    file: ({ file }) => names([file]),
  });
}

// What the device probe remembers its choice under: the URL or path; files by name, size and date.
export function sourceIdentity(source) {
  const describe = (part) => [part?.name ?? null, part?.size ?? part?.byteLength ?? part?.length ?? null, part?.lastModified ?? null];
  return byKind(source, {
    url: ({ url }) => url,
    path: ({ path }) => path,
    files: ({ files }) => files.map((file) => ['file', ...describe(file)]),
    parts: ({ parts }) => Object.entries(parts).map(([key, part]) => [key, ...describe(part)]),
    file: ({ file }) => [['model', ...describe(file)]],
  });
}

// -> what the function of source's kind gives for it; a TypeError for a value that modelSource did not make.
export function byKind(source, functions) {
  const of = Object.hasOwn(functions, source?.kind) ? functions[source.kind] : null;
  if (!of) throw new TypeError(`not a model source (modelSource makes one): ${String(source?.kind ?? source)}`);
  return of(source);
}
