// A model source's files (model_source.js), opened by its kind. The files are either a folder in the Hugging Face
// layout, { format: 'safetensors', config, weights, vocab, merges }, or one GGUF file, { format: 'gguf', model }, of
// file openers ({ name, open({ signal, onRetry, retryDelayMs }) -> { total (bytes or null), chunks:
// AsyncIterable<Uint8Array | DownloadRestart>, cancel(), cacheCopy?, fromCache? } }), plus evict() for cached
// URLs. A URL's files are downloaded by download.js, which resumes broken connections, through the Cache API in
// browsers; local objects are read as they are; a list of files is matched by name (the folder's files, or one
// GGUF file: named .gguf, or starting with its magic); a Node path is read from disk. Only downloads retry.
import { MODEL_FILES, isGgufName, modelFileUrls } from './model_files.js';
import { CacheCopy, evictFromCache, openCache, openCachedFile, requestPersistentStorage } from './model_cache.js';
import { byKind } from './model_source.js';
import { startDownload } from './download.js';
import { importNodeBuiltin } from '../environment.js';
import { ModelLoadError } from '../errors.js';

const NODE_READ_CHUNK_BYTES = 4 << 20;
const UNNAMED_GGUF = 'model.gguf';
const GGUF_MAGIC = 'GGUF';  // a GGUF file's first 4 bytes

// -> Promise of the files of source (model_source.js): see above.
export async function openModelFiles(source) {
  return byKind(source, {
    url: ({ url }) => openUrl(new URL(url)),
    path: async ({ path }) => openNodePath(path.startsWith('file:') ? (await importNodeBuiltin('url')).fileURLToPath(path) : path),
    files: async ({ files }) => openNamedFiles(files, await startsLikeGguf(files)),
    parts: ({ parts }) => openLocalObjects(parts),
    file: ({ file }) => ({ format: 'gguf', model: localFile(file, file.name ?? UNNAMED_GGUF) }),
  });
}

// A URL whose path ends in .gguf is that file; any other, a folder.
function openUrl(url) {
  const { format, urls } = modelFileUrls(url);
  const evict = () => evictFromCache(Object.values(urls));
  if (format === 'gguf') return { format, model: urlFile(fileNameOf(url), urls.model), evict };
  const files = { format, evict };
  for (const [key, fileUrl] of Object.entries(urls)) files[key] = urlFile(MODEL_FILES[key], fileUrl);
  return files;
}

function fileNameOf(url) {
  const name = url.pathname.slice(url.pathname.lastIndexOf('/') + 1);
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

// Whether a list of files is one GGUF file: named .gguf, or a Blob whose first bytes are GGUF's magic.
async function startsLikeGguf(list) {
  if (list.length !== 1) return false;
  const [file] = list;
  if (isGgufName(file?.name)) return true;
  if (typeof Blob === 'undefined' || !(file instanceof Blob)) return false;
  return new TextDecoder().decode(await file.slice(0, GGUF_MAGIC.length).arrayBuffer()) === GGUF_MAGIC;
}

// Taken from the Cache API when a checked copy is there (model_cache.js), else downloaded, and then copied
// into it; before a large file is copied, the page asks to keep its storage.
function urlFile(name, url) {
  return {
    name,
    url,
    open: async ({ signal, onRetry, retryDelayMs } = {}) => {
      const cache = await openCache();
      const cached = cache && await openCachedFile(cache, name, url);
      if (cached) return cached;
      const download = await startDownload(name, url, { signal, onRetry, retryDelayMs });
      if (!cache) return download;
      requestPersistentStorage(download.total);
      return { ...download, cacheCopy: new CacheCopy(cache, url, download.total) };
    },
  };
}

async function* readerChunks(reader) {
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    yield value;
  }
}

// Local objects: { config, weights, vocab, merges } of File, Blob, ArrayBuffer, typed array or string.
function openLocalObjects(objects) {
  const files = { format: 'safetensors' };
  for (const [key, name] of Object.entries(MODEL_FILES)) files[key] = localFile(objects[key], objects[key]?.name ?? name);
  return files;
}

// An array or FileList of Files (e.g. from <input type=file multiple> or a dropped folder), matched by name:
// the folder's files, or one .gguf file (or one file of another name that starts with GGUF's magic).
function openNamedFiles(list, isOneGguf) {
  const ggufs = list.filter((file) => isGgufName(file?.name));
  if (isOneGguf) return { format: 'gguf', model: localFile(list[0], list[0].name ?? UNNAMED_GGUF) };
  if (ggufs.length > 0) {
    throw new ModelLoadError(ggufs[0].name, 'invalid', `give one .gguf file alone (got ${list.map((file) => file.name).join(', ')})`);
  }
  const byName = new Map(list.map((file) => [file.name, file]));
  const objects = {};
  for (const [key, name] of Object.entries(MODEL_FILES)) objects[key] = byName.get(name);
  return openLocalObjects(objects);
}

function localFile(object, name) {
  return {
    name,
    open: async () => {
      if (object === undefined || object === null) throw new ModelLoadError(name, 'missing', 'file not given');
      if (typeof Blob !== 'undefined' && object instanceof Blob) {
        const reader = object.stream().getReader();
        return { total: object.size, chunks: readerChunks(reader), cancel: () => reader.cancel().catch(() => {}) };
      }
      const bytes = toBytes(object, name);
      return { total: bytes.byteLength, chunks: [bytes], cancel: () => {} };
    },
  };
}

function toBytes(object, name) {
  if (typeof object === 'string') return new TextEncoder().encode(object);
  if (object instanceof ArrayBuffer) return new Uint8Array(object);
  if (ArrayBuffer.isView(object)) return new Uint8Array(object.buffer, object.byteOffset, object.byteLength);
  throw new ModelLoadError(name, 'invalid', `expected a File, Blob, ArrayBuffer or typed array, got ${typeof object}`);
}

// Node: a folder path, or a file path (a GGUF file: its name ends in .gguf, or it is a file), read in chunks
// of NODE_READ_CHUNK_BYTES (the size of the engine's staging block).
async function openNodePath(filePath) {
  const [fs, path] = await Promise.all([importNodeBuiltin('fs'), importNodeBuiltin('path')]);
  if (isGgufName(filePath) || fs.statSync(filePath, { throwIfNoEntry: false })?.isFile()) {
    return { format: 'gguf', model: nodeFile(fs, filePath, path.basename(filePath)) };
  }
  const files = { format: 'safetensors' };
  for (const [key, name] of Object.entries(MODEL_FILES)) files[key] = nodeFile(fs, path.join(filePath, name), name);
  return files;
}

function nodeFile(fs, filePath, name) {
  return {
    name,
    open: async () => {
      let fd;
      try {
        fd = fs.openSync(filePath, 'r');
      } catch (error) {
        throw new ModelLoadError(name, 'missing', `cannot read ${filePath}: ${error.message}`);
      }
      const total = fs.fstatSync(fd).size;
      let closed = false;
      const close = () => {
        if (!closed) fs.closeSync(fd);
        closed = true;
      };
      return { total, chunks: nodeChunks(fs, fd, close), cancel: close };
    },
  };
}

async function* nodeChunks(fs, fd, close) {
  try {
    const buffer = new Uint8Array(NODE_READ_CHUNK_BYTES);
    for (;;) {
      const read = fs.readSync(fd, buffer, 0, buffer.length, null);
      if (read === 0) return;
      yield buffer.subarray(0, read);  // the sink copies it before the next read
      await new Promise((resolve) => setImmediate(resolve));  // lets an abort or progress through
    }
  } finally {
    close();
  }
}
